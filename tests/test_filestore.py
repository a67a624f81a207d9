"""The file store beyond the shared contract: damage that is not a tail, the writer lock (in this
process and across processes), storage faults, the v4 layout and framing (notes/dsh-persistence.md
§9.6-§9.7 items that apply), format versions and the stored-event checks.

Crash recovery at every write boundary is in test_filestore_crash.py.
"""

from __future__ import annotations

import errno
import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard
from event_builders import V4_HEADER_LINE, at, user_data
from refusals import refusal

from reference.persistence import fastjson
from reference.persistence.api import OpenReport
from reference.persistence.filestore import FileStore
from reference.persistence.powerloss import KEEP_ALL, PowerLossFileSystem
from reference.session import Session
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.format.framing import encode_lines, scan_zstd_frames
from spec.format.naming import V4_PLAIN_NAME, V4_ZSTD_NAME, encode_header_line, encode_project_key
from spec.lineage.repair import INTERRUPTED_REASON_KIND
from spec.log.events import END_SEED, Event
from spec.log.header import build_header
from tests.powerloss_harness import ProbedFileSystem, crash_states, snapshot, sync_all

ROOT = "/data"
CWD = "/work/project"
REPO = Path(__file__).resolve().parent.parent


def new_fs() -> ProbedFileSystem:
    return ProbedFileSystem()


def store_on(fs: PowerLossFileSystem, compressed: bool = True) -> SessionStore:
    ticks = itertools.count(1_000)
    return SessionStore(FileStore(ROOT, fs=fs, compressed=compressed), clock=lambda: next(ticks))


def completed_turn(session: Session, turn: int, text: str = "hello there") -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user_data(f"u{turn}", text), "append")
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def flushed_session(store: SessionStore, session_id: str = "s", turns: int = 1) -> Session:
    """A new live session (in project CWD) with one flush per completed turn."""
    session = store.create(session_id, meta={"cwd": CWD})
    for turn in range(1, turns + 1):
        completed_turn(session, turn)
        session.flush()
    return session


def written_session(
    fs: PowerLossFileSystem, compressed: bool = True, turns: int = 3, session_id: str = "s"
) -> str:
    """A closed session with one flush per completed turn; returns its log's path."""
    store = store_on(fs, compressed)
    flushed_session(store, session_id, turns)
    store.close(session_id)
    path = FileStore(ROOT, fs=fs).locate(session_id)
    assert path is not None
    return path


def replace_file(fs: PowerLossFileSystem, path: str, data: bytes) -> None:
    """Put ``data`` at ``path``, durably, as damage from outside the store would."""
    fs.remove(path)
    fs.write_new(path, data)
    sync_all(fs)


def flip_byte(fs: PowerLossFileSystem, path: str, index: int) -> None:
    """Damage the byte at ``index`` of ``path`` (every bit inverted), as :func:`replace_file` does."""
    data = fs.read_bytes(path)
    replace_file(fs, path, data[:index] + bytes([data[index] ^ 0xFF]) + data[index + 1 :])


def expect_code(code: Code, call: Any, *args: Any) -> SpecError:
    caught = refusal(lambda: call(*args))
    assert caught.code == code, caught
    return caught


# --- damage that is not a tail (D3 item 5) -------------------------------------------------------


def middle_frame_bytes(data: bytes) -> Iterator[tuple[int, int]]:
    """Every byte of the middle event frame's compressed blocks and checksum, with that frame's
    offset: the block contents (not the frame or block headers, whose damage can read as a torn
    frame: see the xfail below) and the 4 checksum bytes."""
    frames = scan_zstd_frames(data).frames
    middle = frames[len(frames) // 2]
    assert 0 < frames.index(middle) < len(frames) - 1
    descriptor = data[middle.offset + 4]
    assert descriptor & 0x20 and not descriptor & 0x03, "expected a single-segment frame without dictionary"
    content_size_bytes = (1, 2, 4, 8)[descriptor >> 6]
    position = middle.offset + 5 + content_size_bytes
    while True:
        block = int.from_bytes(data[position : position + 3], "little")
        size = 1 if (block >> 1) & 3 == 1 else block >> 3
        for index in range(position + 3, position + 3 + size):
            yield index, middle.offset
        position += 3 + size
        if block & 1:
            break
    for index in range(position, position + 4):
        yield index, middle.offset
    assert position + 4 == middle.offset + middle.length


@pytest.mark.parametrize("action", ["open", "read", "resume"])
def test_every_flipped_byte_in_a_middle_frame_is_a_corrupt_log_naming_the_frame_and_changes_nothing(
    action: str,
) -> None:
    fs = new_fs()
    path = written_session(fs)
    data = fs.read_bytes(path)
    flips = 0
    for index, frame_offset in middle_frame_bytes(data):
        damaged = fs.crash(KEEP_ALL)
        flip_byte(damaged, path, index)
        before = snapshot(damaged)
        files = FileStore(ROOT, fs=damaged)
        call = {"open": files.open, "read": files.read, "resume": SessionStore(files).resume}[action]
        error = expect_code(Code.CORRUPT_LOG, call, "s")
        assert f"frame at byte {frame_offset}" in str(error)
        assert snapshot(damaged) == before
        flips += 1
    assert flips > 40


def test_a_failed_open_of_a_corrupt_log_releases_the_writer_lock() -> None:
    fs = new_fs()
    path = written_session(fs)
    index, _ = next(middle_frame_bytes(fs.read_bytes(path)))
    flip_byte(fs, path, index)
    files = FileStore(ROOT, fs=fs)
    expect_code(Code.CORRUPT_LOG, files.open, "s")
    assert fs.try_lock(path.rsplit("/", 1)[0] + "/session.lock") is not None


def test_a_middle_frame_whose_block_size_was_damaged_is_a_corrupt_log() -> None:
    fs = new_fs()
    path = written_session(fs)
    middle = scan_zstd_frames(fs.read_bytes(path)).frames[2]
    flip_byte(fs, path, middle.offset + 9)  # the high byte of the first block header: its size
    expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")


def test_a_bad_complete_plain_line_followed_by_more_lines_is_a_corrupt_log_naming_its_byte_and_changes_nothing() -> (
    None
):
    fs = new_fs()
    path = written_session(fs, compressed=False)
    lines = fs.read_bytes(path).split(b"\n")
    offset = sum(len(line) + 1 for line in lines[:3])
    lines[3] = lines[3][:-5]
    replace_file(fs, path, b"\n".join(lines))
    before = snapshot(fs)
    for call in (
        FileStore(ROOT, fs=fs).open,
        FileStore(ROOT, fs=fs).read,
        SessionStore(FileStore(ROOT, fs=fs)).resume,
    ):
        error = expect_code(Code.CORRUPT_LOG, call, "s")
        assert f"(byte {offset})" in str(error)
    assert snapshot(fs) == before


def test_a_bad_last_plain_line_that_kept_its_newline_is_a_corrupt_log_not_a_torn_tail() -> None:
    """A crash only loses a suffix of the bytes, so a line that kept its newline kept all of it."""
    fs = new_fs()
    path = written_session(fs, compressed=False)
    replace_file(fs, path, fs.read_bytes(path) + b'{"type":"turn/sta\n')
    expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")


def test_a_complete_frame_holding_a_torn_line_is_a_corrupt_log() -> None:
    """§9.7: ``{"type":"turn/start"`` with no newline inside a complete frame."""
    fs = new_fs()
    path = written_session(fs)
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(b'{"type":"turn/start"')
    replace_file(fs, path, fs.read_bytes(path) + frame)
    error = expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert "torn JSONL record" in str(error)


def test_a_seq_gap_between_frames_is_a_corrupt_log() -> None:
    fs = new_fs()
    path = written_session(fs)
    stray: Event = {"type": "session/title", "seq": 40, "time": 1, "data": {"title": "x"}}
    frame = zstandard.ZstdCompressor(write_checksum=True).compress(encode_lines([stray]))
    replace_file(fs, path, fs.read_bytes(path) + frame)
    error = expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert "seq gap in committed region at line 11 (byte " in str(error)  # header + 9 events: line 11
    assert "expected seq 9, got 40" in str(error)


def test_four_or_more_bytes_that_start_no_frame_after_the_last_frame_are_a_corrupt_log() -> None:
    fs = new_fs()
    path = written_session(fs)
    data = fs.read_bytes(path)
    replace_file(fs, path, data + b"\0\0\0\0garbage")
    error = expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert f"byte {len(data)}" in str(error)


def test_an_empty_compressed_log_is_a_corrupt_log() -> None:
    """§9.7: 0 bytes → empty or header-less."""
    fs = new_fs()
    path = written_session(fs)
    replace_file(fs, path, b"")
    error = expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert "empty or header-less" in str(error)


def test_a_header_frame_of_two_lines_is_rejected_by_open_and_skipped_by_list() -> None:
    """§9.7: a malformed header frame."""
    fs = new_fs()
    path = written_session(fs)
    frames = scan_zstd_frames(fs.read_bytes(path)).frames
    rest = fs.read_bytes(path)[frames[1].offset :]
    header_line = json.dumps(encode_header_line(build_header("s", {"cwd": CWD, "createdAt": 1}, 1, False)))
    two_lines = zstandard.ZstdCompressor(write_checksum=True).compress((header_line + "\n{}\n").encode())
    replace_file(fs, path, two_lines + rest)
    expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert FileStore(ROOT, fs=fs).list() == []


# --- torn tails (D3 item 4; §9.6-§9.7) ---------------------------------------------------------------


def open_turn_session(fs: PowerLossFileSystem, compressed: bool = True) -> tuple[str, Session]:
    """A session whose last durable frame ends inside turn 2 (turn/start, step/start, two messages)."""
    store = store_on(fs, compressed)
    session = flushed_session(store)
    session.append("turn/start", {"turn": 2})
    session.append("step/start", {"turn": 2, "step": 1})
    session.append("user/message", user_data("u2", "a"), "append")
    session.append(
        "assistant/chunk",
        {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x" * 50}},
    )
    session.flush()
    store.close("s")
    path = FileStore(ROOT, fs=fs).locate("s")
    assert path is not None
    return path, session


def test_a_frame_missing_only_its_checksum_gives_back_every_line_re_framed_with_closers() -> None:
    """§9.7: the torn frame is cut, its lines recovered and written again with the closers; the
    committed prefix stays byte-identical and no torn frame remains."""
    fs = new_fs()
    path, session = open_turn_session(fs)
    data = fs.read_bytes(path)
    last = scan_zstd_frames(data).frames[-1]
    torn = fs.crash(KEEP_ALL)
    replace_file(torn, path, data[:-1])
    handle = FileStore(ROOT, fs=torn).open("s")
    assert handle.report == OpenReport(
        torn_bytes_dropped=last.length - 1, recovered_events=4, closers_appended=2
    )
    assert handle.read() == session.events + handle.read()[len(session.events) :]
    assert [e["type"] for e in handle.read()[len(session.events) :]] == ["step/end", "turn/end"]
    # Every stored event (recovered ones too) had its message checked by the read path; no closer.
    assert handle.judged()[2] == len(session.events) == len(handle.read()) - 2
    repaired = torn.read_bytes(path)
    assert repaired[: last.offset] == data[: last.offset]
    assert scan_zstd_frames(repaired).torn_offset is None
    assert len(scan_zstd_frames(repaired).frames) == len(scan_zstd_frames(data).frames)
    handle.close()


def test_a_frame_torn_in_its_header_is_dropped_and_the_file_restored_byte_identical() -> None:
    """§9.7: 2 magic bytes after a balanced log."""
    fs = new_fs()
    path = written_session(fs)
    data = fs.read_bytes(path)
    replace_file(fs, path, data + b"\x28\xb5")
    handle = FileStore(ROOT, fs=fs).open("s")
    assert handle.report == OpenReport(torn_bytes_dropped=2)
    handle.close()
    assert fs.read_bytes(path) == data


def test_a_torn_frame_cut_inside_its_only_block_loses_that_batch_and_closes_the_turn() -> None:
    fs = new_fs()
    path, session = open_turn_session(fs)
    data = fs.read_bytes(path)
    last = scan_zstd_frames(data).frames[-1]
    replace_file(fs, path, data[: last.offset + last.length // 2])
    handle = FileStore(ROOT, fs=fs).open("s")
    assert handle.report.recovered_events == 0
    assert handle.read() == session.events[:3]  # turn 1 was closed: nothing to add
    handle.close()
    assert fs.read_bytes(path) == data[: last.offset]


def test_a_plain_last_line_without_its_newline_is_dropped_and_the_prefix_kept_byte_identical() -> None:
    """§9.6: a partial line after the committed lines; the turn it was in is closed."""
    fs = new_fs()
    path, session = open_turn_session(fs, compressed=False)
    data = fs.read_bytes(path)
    replace_file(fs, path, data + b'{"type":"assistant/chunk","seq":7,"ti')
    resumed = SessionStore(FileStore(ROOT, fs=fs, compressed=False), clock=lambda: 5).resume("s")
    assert resumed.events[:7] == session.events
    assert [e["type"] for e in resumed.events[7:]] == ["step/end", "turn/end", END_SEED]
    assert at(resumed.events, 8, "data", "reason", "kind") == INTERRUPTED_REASON_KIND
    assert fs.read_bytes(path).startswith(data)


def test_a_header_only_log_with_nothing_after_it_opens_empty() -> None:
    """§9.6: a header-only log preserves nothing and needs no repair."""
    fs = new_fs()
    store = store_on(fs)
    store.create("s", meta={"cwd": CWD}).flush()
    store.close("s")
    handle = FileStore(ROOT, fs=fs).open("s")
    assert handle.read() == () and handle.report == OpenReport()
    handle.close()


# --- the writer lock (D2) ----------------------------------------------------------------------------


def test_a_second_writer_in_this_process_gets_locked_while_a_reader_reads() -> None:
    fs = new_fs()
    written_session(fs)
    store = store_on(fs)
    session = store.resume("s")
    expect_code(Code.LOCKED, SessionStore(FileStore(ROOT, fs=fs)).resume, "s")
    assert FileStore(ROOT, fs=fs).read("s").events == session.events[:-1]  # the end-seed is buffered
    store.close("s")
    SessionStore(FileStore(ROOT, fs=fs)).resume("s")


def test_creating_a_session_takes_the_lock_before_the_first_flush() -> None:
    fs = new_fs()
    files = FileStore(ROOT, fs=fs)
    files.create(build_header("s", {"cwd": CWD}, 1, False))
    expect_code(Code.LOCKED, FileStore(ROOT, fs=fs).create, build_header("s", {"cwd": CWD}, 1, False))


def _other_process(root: Path, action: str) -> dict[str, Any]:
    """Run ``action`` ("open" or "read") on session ``s`` under ``root`` in a fresh interpreter."""
    script = (
        "import json, sys\n"
        "from reference.persistence.filestore import FileStore\n"
        "from spec.codes import SpecError\n"
        "files = FileStore(sys.argv[1])\n"
        "try:\n"
        "    if sys.argv[2] == 'open':\n"
        "        files.open('s').close()\n"
        "        print(json.dumps({'ok': True}))\n"
        "    else:\n"
        "        print(json.dumps({'ok': True, 'events': len(files.read('s').events)}))\n"
        "except SpecError as error:\n"
        "    print(json.dumps({'ok': False, 'code': str(error.code)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root), action],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_writer_in_another_process_gets_locked_while_its_reads_still_work(tmp_path: Path) -> None:
    store = SessionStore(FileStore(str(tmp_path)))
    flushed_session(store)
    assert _other_process(tmp_path, "open") == {"ok": False, "code": "LOCKED"}
    assert _other_process(tmp_path, "read") == {"ok": True, "events": 3}
    store.close("s")
    assert _other_process(tmp_path, "open") == {"ok": True}


# --- storage faults (D2: flush raises, nothing flushed before is lost) -----------------------------


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
@pytest.mark.parametrize(
    ("op", "code", "written"),
    [
        ("fsync", errno.EIO, 0),
        ("append", errno.ENOSPC, 0),
        ("append", errno.ENOSPC, 7),
        ("append", errno.EIO, 1),
    ],
    ids=["fsync-EIO", "append-ENOSPC", "append-ENOSPC-partial", "append-EIO-partial"],
)
def test_a_failed_flush_raises_storage_io_loses_nothing_and_a_retry_writes_the_batch_once(
    compressed: bool, op: str, code: int, written: int
) -> None:
    fs = new_fs()
    store = store_on(fs, compressed)
    session = flushed_session(store)
    path = FileStore(ROOT, fs=fs).locate("s")
    assert path is not None
    durable = fs.read_bytes(path)
    completed_turn(session, 2)
    fs.fail_next(op, code, written=written)
    error = expect_code(Code.STORAGE_IO, session.flush)
    assert isinstance(error.__cause__, OSError) and error.__cause__.errno == code
    assert fs.read_bytes(path) == durable, "the failed batch was not rolled back"
    for _, after in crash_states(fs):
        assert FileStore(ROOT, fs=after).read("s").events == session.events[:3]
    session.flush()
    assert FileStore(ROOT, fs=fs).read("s").events == session.events
    assert fs.crash().read_bytes(path)[: len(durable)] == durable
    if compressed:
        assert len(scan_zstd_frames(fs.read_bytes(path)).frames) == 3  # header, turn 1, turn 2: once


@pytest.mark.parametrize("op", ["write_new", "fsync", "link", "fsync_dir"])
def test_a_failed_first_flush_raises_storage_io_publishes_nothing_and_a_retry_publishes(op: str) -> None:
    fs = new_fs()
    store = store_on(fs)
    session = store.create("s", meta={"cwd": CWD})
    completed_turn(session, 1)
    fs.fail_next(op, errno.EIO)
    expect_code(Code.STORAGE_IO, session.flush)
    if op != "fsync_dir":  # once linked, the file is visible; only its directory entry is not durable
        assert FileStore(ROOT, fs=fs).locate("s") is None
    assert FileStore(ROOT, fs=fs.crash()).locate("s") is None
    session.flush()
    assert FileStore(ROOT, fs=fs.crash()).read("s").events == session.events
    assert [
        name
        for name in fs.listdir(FileStore(ROOT, fs=fs).locate("s").rsplit("/", 1)[0])
        if name.endswith(".tmp")
    ] == []


@pytest.mark.parametrize("op", ["write_new", "fsync", "rename", "fsync_dir"])
def test_a_failed_repair_on_open_raises_storage_io_and_a_later_open_repairs(op: str) -> None:
    fs = new_fs()
    path, session = open_turn_session(fs)
    data = fs.read_bytes(path)
    replace_file(fs, path, data[:-1])
    fs.fail_next(op, errno.EIO)
    expect_code(Code.STORAGE_IO, FileStore(ROOT, fs=fs).open, "s")
    if op != "fsync_dir":
        assert fs.read_bytes(path) == data[:-1]
    handle = FileStore(ROOT, fs=fs).open("s")
    assert handle.read()[: len(session.events)] == session.events
    handle.close()


# --- layout and framing (D1; §9.6-§9.7) ----------------------------------------------------------------


def test_a_session_lives_under_its_project_directory_and_encoded_id() -> None:
    fs = new_fs()
    store = store_on(fs)
    store.create("a/../b", meta={"cwd": CWD}).flush()
    store.create("n").flush()
    names = {path for path, content in snapshot(fs).items() if content is not None and "session.v4" in path}
    assert names == {
        f"{ROOT}/{encode_project_key(CWD)}/a~002F..~002Fb/{V4_ZSTD_NAME}",
        f"{ROOT}/_no-cwd/n/{V4_ZSTD_NAME}",
    }


def test_plain_mode_writes_session_v4_jsonl_and_round_trips_byte_identically() -> None:
    """§9.6: the file is the header line and one line per event, in the encoder's bytes."""
    fs = new_fs()
    store = store_on(fs, compressed=False)
    session = store.create("s", meta={"cwd": CWD})
    completed_turn(session, 1)
    session.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "é😀\u2028"}},
    )
    session.flush()
    path = FileStore(ROOT, fs=fs).locate("s")
    assert path is not None and path.endswith(V4_PLAIN_NAME)
    assert fs.read_bytes(path) == encode_lines([encode_header_line(session.header), *session.events])
    assert FileStore(ROOT, fs=fs).read("s").events == session.events


def test_zstd_mode_writes_one_checksummed_header_frame_then_one_frame_per_flush() -> None:
    """§9.7: frame 0 holds the header line alone; each frame has its content checksum."""
    fs = new_fs()
    store = store_on(fs)
    session = flushed_session(store, turns=2)
    session.flush()  # nothing pending: no frame
    path = FileStore(ROOT, fs=fs).locate("s")
    assert path is not None and path.endswith(V4_ZSTD_NAME)
    data = fs.read_bytes(path)
    frames = scan_zstd_frames(data).frames
    plaintexts = [
        zstandard.ZstdDecompressor().decompress(data[f.offset : f.offset + f.length]) for f in frames
    ]
    assert all(data[f.offset + 4] & 0x04 for f in frames)
    assert plaintexts == [
        encode_lines([encode_header_line(session.header)]),
        encode_lines(session.events[:3]),
        encode_lines(session.events[3:]),
    ]


def stored_text(fs: PowerLossFileSystem, compressed: bool, session_id: str = "s") -> bytes:
    """The JSONL text of a session's log file, its frames decompressed when ``compressed``."""
    path = FileStore(ROOT, fs=fs).locate(session_id)
    assert path is not None
    data = fs.read_bytes(path)
    if compressed:
        frames = scan_zstd_frames(data).frames
        data = b"".join(
            zstandard.ZstdDecompressor().decompress(data[f.offset : f.offset + f.length]) for f in frames
        )
    return data


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
def test_an_appended_event_s_floats_are_written_as_the_spec_writes_them_without_a_search(
    compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session tells its handle the floats the spec's copies met (and a float time), so the
    handle's line is searched for small floats only when one is there; every line is still the
    spec's: orjson's for the floats it writes alike, the spec encoder's for those below 1e-4
    (``1e-06`` where orjson writes ``1e-6``; ``1e-05`` where it writes ``0.00001``)."""
    searched: list[bytes] = []
    original = fastjson.may_write_otherwise

    def counting(text: bytes) -> bool:
        searched.append(text)
        return original(text)

    monkeypatch.setattr(fastjson, "may_write_otherwise", counting)
    fs = new_fs()
    session = store_on(fs, compressed).create("s", meta={"cwd": CWD})  # the default policy: 1 MiB
    searched.clear()
    session.append("turn/start", {"turn": 1, "share": 0.5, "big": 1e20, "zero": 0.0})
    session.append("turn/start", {"turn": 2, "step": 3})
    assert searched == []  # no small float: orjson's lines, unsearched
    session.append("turn/start", {"turn": 3, "tiny": [1e-06, {"less": 1.5e-05}]})
    assert searched  # a small float in the data: its line searched (and written by the spec)
    searched.clear()
    monkeypatch.setattr(session, "_clock", lambda: 1e-07)
    session.append("turn/start", {"turn": 4})
    assert searched  # a float time, which no copy meets: the session counts it
    session.flush()
    data = stored_text(fs, compressed)
    assert data == encode_lines([encode_header_line(session.header), *session.events])
    assert b"1e-06" in data and b"1.5e-05" in data and b"1e-07" in data


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
def test_under_a_byte_bound_each_event_is_encoded_once_as_it_is_appended_and_written_as_such(
    compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch bound counts each appended event's line; that line is the one the flush writes
    (the spec's bytes), never encoded a second time."""
    encoded: list[object] = []
    original = fastjson.encode_lines

    def counting(records: Any, small_floats: Any = None) -> bytes:
        encoded.extend(records)
        return original(records, small_floats)

    monkeypatch.setattr(fastjson, "encode_lines", counting)
    fs = new_fs()
    session = store_on(fs, compressed).create("s", meta={"cwd": CWD})  # the default policy: 1 MiB
    for turn in (1, 2):
        completed_turn(session, turn)
        session.flush()
    events = [record for record in encoded if isinstance(record, dict) and "seq" in record]
    assert events == list(session.events) and len({id(record) for record in events}) == len(events)
    data = stored_text(fs, compressed)
    assert data == encode_lines([encode_header_line(session.header), *session.events])


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
def test_appending_never_rewrites_the_bytes_already_written(compressed: bool) -> None:
    """§9.6-§9.7: the old prefix is byte-identical after each append, and after a resume."""
    fs = new_fs()
    store = store_on(fs, compressed)
    session = store.create("s", meta={"cwd": CWD})
    path = None
    previous = b""
    for turn in range(1, 4):
        completed_turn(session, turn)
        session.flush()
        path = FileStore(ROOT, fs=fs).locate("s")
        assert path is not None
        current = fs.read_bytes(path)
        assert current.startswith(previous) and len(current) > len(previous)
        previous = current
    store.close("s")
    assert path is not None
    store_on(fs, compressed).resume("s").flush()
    assert fs.read_bytes(path).startswith(previous)


def test_a_fork_gets_its_own_location_and_a_resume_keeps_its_location() -> None:
    """§9.6."""
    fs = new_fs()
    store = store_on(fs)
    parent = flushed_session(store, "parent")
    store.fork(parent, child_id="child").flush()
    locate = FileStore(ROOT, fs=fs).locate
    parent_path, child_path = locate("parent"), locate("child")
    assert parent_path and child_path and parent_path != child_path
    store.close_all()
    store_on(fs).resume("parent").flush()
    assert locate("parent") == parent_path


def test_list_finds_sessions_across_project_directories_and_skips_unreadable_logs() -> None:
    """§9.6: several project directories, including ``_no-cwd``; an empty root lists nothing."""
    fs = new_fs()
    assert FileStore(ROOT, fs=fs).list() == []
    store = store_on(fs)
    store.create("a", meta={"cwd": "/one"}).flush()
    store.create("b", meta={"cwd": "/two"}).flush()
    store.create("c").flush()
    broken = written_session(fs, session_id="d")
    replace_file(fs, broken, b"not a log")
    assert sorted(str(header["id"]) for header in FileStore(ROOT, fs=fs).list()) == ["a", "b", "c"]


def test_creating_an_id_stored_under_another_project_directory_is_rejected() -> None:
    """§9.6: createCore rejects an id already on disk under a different project directory."""
    fs = new_fs()
    store_on(fs).create("s", meta={"cwd": "/one"}).flush()
    expect_code(Code.SESSION_ALREADY_EXISTS, store_on(fs).create, "s", None, {"cwd": "/two"})


def test_one_id_in_two_project_directories_is_a_corrupt_log() -> None:
    """§9.6: load and list reject one id materialized in multiple project directories."""
    fs = new_fs()
    path = written_session(fs)
    copy = f"{ROOT}/--elsewhere--/s/{V4_ZSTD_NAME}"
    fs.makedirs(copy.rsplit("/", 1)[0])
    fs.write_new(copy, fs.read_bytes(path))
    expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")


# --- format versions and stored events (D1; §9.2 #35-#37) --------------------------------------------


def log_with(header_line: dict[str, Any], records: list[dict[str, Any]]) -> PowerLossFileSystem:
    """A plain v4-layout log under the ``_no-cwd`` directory holding exactly these lines."""
    fs = new_fs()
    fs.makedirs(f"{ROOT}/_no-cwd/s")
    fs.write_new(f"{ROOT}/_no-cwd/s/{V4_PLAIN_NAME}", encode_lines([header_line, *records]))
    sync_all(fs)
    return fs


def header_line(**fields: Any) -> dict[str, Any]:
    return {**V4_HEADER_LINE, **fields}


@pytest.mark.parametrize("version", [99, 5, -1, 1])
def test_a_log_of_an_unsupported_format_version_is_refused_naming_the_version(version: int) -> None:
    fs = log_with(header_line(version=version), [])
    error = expect_code(Code.UNSUPPORTED_FORMAT, FileStore(ROOT, fs=fs).open, "s")
    assert f"v{version}" in str(error)


def v0_log_with(records: list[dict[str, Any]]) -> PowerLossFileSystem:
    """A DSH v0 plain log under the ``_no-cwd`` directory holding exactly these records."""
    fs = new_fs()
    fs.makedirs(f"{ROOT}/_no-cwd/s")
    v0_header = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}
    fs.write_new(f"{ROOT}/_no-cwd/s/session.jsonl", encode_lines([v0_header, *records]))
    sync_all(fs)
    return fs


def test_an_unknown_event_type_in_a_v0_log_is_refused_unless_marked_ignorable() -> None:
    """§9.2 #37: DSH's reader refuses vocabulary newer than it."""
    unknown = {"type": "plugin/thing", "seq": 0, "time": 1, "data": None}
    expect_code(Code.UNKNOWN_EVENT_TYPE, FileStore(ROOT, fs=v0_log_with([unknown])).open, "s")
    ignorable = {**unknown, "ignorable": True}
    handle = FileStore(ROOT, fs=v0_log_with([ignorable])).open("s")
    assert handle.read()[0] == ignorable
    handle.close()


def test_an_unknown_event_type_this_project_wrote_reads_back_from_a_v4_log() -> None:
    """The Session accepts any type, so the v4 reader must too: nothing stored is lost."""
    unknown = {"type": "plugin/thing", "seq": 0, "time": 1, "data": None}
    handle = FileStore(ROOT, fs=log_with(header_line(), [unknown])).open("s")
    assert handle.read() == (unknown,)
    handle.close()


def test_a_malformed_stored_message_is_refused_before_it_is_returned() -> None:
    """§9.2 #11: a message event without an identified message."""
    bad: Event = {
        "type": "user/message",
        "seq": 0,
        "time": 1,
        "data": {"role": "user", "content": []},
        "surfaceOp": "append",
    }
    for call in (
        FileStore(ROOT, fs=log_with(header_line(), [bad])).read,
        FileStore(ROOT, fs=log_with(header_line(), [bad])).open,
    ):
        with pytest.raises(SpecError) as rejected:
            call("s")
        assert rejected.value.code.startswith("MESSAGE_")


def test_a_header_whose_id_is_not_the_requested_session_is_refused_before_any_repair() -> None:
    """§9.6: a mismatched header; the file is left byte-identical."""
    fs = log_with(header_line(id="other"), [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    path = f"{ROOT}/_no-cwd/s/{V4_PLAIN_NAME}"
    before = fs.read_bytes(path)
    expect_code(Code.HEADER_ID_MISMATCH, FileStore(ROOT, fs=fs).open, "s")
    assert fs.read_bytes(path) == before


def test_list_reads_only_the_header_frame_so_a_corrupt_event_frame_does_not_hide_the_session() -> None:
    """§9.7: list succeeds; open fails with the frame's offset."""
    fs = new_fs()
    path = written_session(fs)
    index, frame_offset = next(middle_frame_bytes(fs.read_bytes(path)))
    flip_byte(fs, path, index)
    assert [header["id"] for header in FileStore(ROOT, fs=fs).list()] == ["s"]
    error = expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert f"frame at byte {frame_offset}" in str(error)


def test_a_header_frame_failing_its_checksum_is_a_corrupt_log_and_is_not_listed() -> None:
    """§9.7: a checksum-corrupt header frame."""
    fs = new_fs()
    path = written_session(fs)
    header_frame = scan_zstd_frames(fs.read_bytes(path)).frames[0]
    flip_byte(fs, path, header_frame.offset + header_frame.length - 1)
    error = expect_code(Code.CORRUPT_LOG, FileStore(ROOT, fs=fs).open, "s")
    assert "frame at byte 0" in str(error)
    assert FileStore(ROOT, fs=fs).list() == []


# --- DSH v0 logs: read, migrated on resume, never written (D1) -------------------------------------

V0_HEADER: dict[str, Any] = {"type": "session", "version": 0, "id": "old", "createdAt": 5, "cwd": CWD}
V0_RECORDS: list[Any] = [
    {"type": "turn/start", "seq": 0, "time": 10, "data": {"turn": 1, "trigger": {"kind": "message"}}},
    {
        "type": "user/message",
        "seq": 1,
        "time": 11,
        "data": {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        "surfaceOp": "append",
    },
    {"type": "step/start", "seq": 2, "time": 12, "data": {"turn": 1, "step": 1}},
    {
        "type": "text-chunks",
        "seq0": 3,
        "time0": 13,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
    },
]


def v0_log(compressed: bool, torn_tail: bytes = b"") -> tuple[PowerLossFileSystem, str, bytes]:
    """A DSH v0 session ``old`` left inside a turn: header, a turn/start with its retired trigger,
    a pre-identity user message, a step and a packed row of three text chunks."""
    fs = new_fs()
    directory = f"{ROOT}/{encode_project_key(CWD)}/old"
    fs.makedirs(directory)
    if compressed:
        compressor = zstandard.ZstdCompressor(write_checksum=True)
        data = compressor.compress(encode_lines([V0_HEADER])) + compressor.compress(encode_lines(V0_RECORDS))
        path = f"{directory}/session.jsonl.zstd"
    else:
        data = encode_lines([V0_HEADER, *V0_RECORDS])
        path = f"{directory}/session.jsonl"
    data += torn_tail
    fs.write_new(path, data)
    sync_all(fs)
    return fs, path, data


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
def test_a_v0_log_resumes_converted_and_closed_and_is_migrated_to_a_v4_file_beside_it(
    compressed: bool,
) -> None:
    fs, path, data = v0_log(compressed)
    session = store_on(fs, compressed).resume("old")
    assert [e["type"] for e in session.events] == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunk",
        "assistant/chunk",
        "assistant/chunk",
        "step/end",
        "turn/end",
        END_SEED,
    ]
    assert "trigger" not in at(session.events, 0, "data")
    assert at(session.events, 1, "data", "id") == "legacy-message:old:1"
    assert [at(e, "data", "chunk", "text") for e in session.events[3:6]] == ["a", "b", "c"]
    assert session.header["version"] == 4 and session.header["createdAt"] == 5
    session.append("turn/start", {"turn": 2})
    session.flush()
    v4_path = path.rsplit("/", 1)[0] + "/" + (V4_ZSTD_NAME if compressed else V4_PLAIN_NAME)
    assert FileStore(ROOT, fs=fs).locate("old") == v4_path
    assert fs.read_bytes(path) == data, "a v0 log is never written"
    assert FileStore(ROOT, fs=fs.crash()).read("old").events == session.events


def test_a_v0_log_with_a_torn_tail_migrates_without_it_and_the_v0_file_is_left_as_it_was() -> None:
    fs, path, data = v0_log(False, torn_tail=b'{"type":"assistant/chunk","seq":6,"ti')
    handle = FileStore(ROOT, fs=fs).open("old")
    assert handle.report.migrated_from_v0 and handle.report.torn_bytes_dropped == 37
    assert [e["type"] for e in handle.read()][-3:] == ["assistant/chunk", "step/end", "turn/end"]
    handle.close()
    assert fs.read_bytes(path) == data


def test_reading_a_v0_log_changes_nothing_and_adds_no_closers() -> None:
    fs, path, data = v0_log(True)
    stored = FileStore(ROOT, fs=fs).read("old")
    assert stored.format_version == 0 and len(stored.events) == 6
    assert snapshot(fs)[path] == data and FileStore(ROOT, fs=fs).locate("old") == path


# --- the file name and the header's format version agree (seed 002) -------------------------------


def test_a_v4_file_name_holding_a_v0_header_is_refused_naming_both_and_never_migrated() -> None:
    fs, path, data = v0_log(False)
    renamed = path.rsplit("/", 1)[0] + "/" + V4_PLAIN_NAME
    fs.rename(path, renamed)
    sync_all(fs)
    store = FileStore(ROOT, fs=fs, compressed=False)
    for attempt in (store.open, store.read):
        with pytest.raises(SpecError) as caught:
            attempt("old")
        assert caught.value.code == Code.HEADER_VERSION_FILE_MISMATCH
        assert '"session.v4.jsonl" is named for format v4' in caught.value.message
        assert "says version 0" in caught.value.message
    assert snapshot(fs)[renamed] == data and store.list() == []


def test_a_v0_file_name_holding_a_v4_header_is_refused_instead_of_appended_in_place() -> None:
    fs = new_fs()
    store = store_on(fs, compressed=False)
    session = store.create("s", meta={"cwd": CWD})
    completed_turn(session, 1)
    store.close("s")
    path = FileStore(ROOT, fs=fs).locate("s")
    assert path is not None and path.endswith(V4_PLAIN_NAME)
    v0_name = path.rsplit("/", 1)[0] + "/session.jsonl"
    fs.rename(path, v0_name)
    data = fs.read_bytes(v0_name)
    assert (
        refusal(lambda: store_on(fs, compressed=False).resume("s")).code == Code.HEADER_VERSION_FILE_MISMATCH
    )
    assert fs.read_bytes(v0_name) == data


class _RacingStore(FileStore):
    """Finds the v0 log even though a v4 file appeared beside it after the lookup (another writer
    migrated it first), as a store racing that writer would."""

    def locate(self, session_id: str) -> str | None:
        found = super().locate(session_id)
        return None if found is None else found.rsplit("/", 1)[0] + "/session.jsonl.zstd"


def test_the_v0_to_v4_migration_never_publishes_over_an_existing_v4_file() -> None:
    fs, path, _ = v0_log(True)
    first = FileStore(ROOT, fs=fs).open("old")  # migrates: session.v4.jsonl.zstd now exists
    first.close()
    v4_path = path.rsplit("/", 1)[0] + "/" + V4_ZSTD_NAME
    migrated = fs.read_bytes(v4_path)
    caught = refusal(lambda: _RacingStore(ROOT, fs=fs).open("old"))
    assert caught.code == Code.SESSION_ALREADY_EXISTS and "refusing to publish" in caught.message
    assert fs.read_bytes(v4_path) == migrated
    assert not [name for name in fs.listdir(path.rsplit("/", 1)[0]) if name.endswith(".tmp")]
