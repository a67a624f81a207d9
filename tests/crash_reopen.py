"""The crash-reopen oracle shared by the file store's crash tests: a realistic workload journaled
as it runs, and :func:`check_reopen`, which reopens one crash state and checks it against
SPEC-DECISIONS D3 items 1-6 with the spec's own rules (the reopened log is a prefix of what the
session appended, at least what a completed flush made durable, followed by
``spec.lineage.repair.derive_closers`` of that prefix and the ``session/end-seed`` rule)."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import zstandard
from event_builders import assistant_data, tool_result_data, user_data

from reference.persistence.api import OpenReport
from reference.persistence.filestore import FileLogHandle, FileStore
from reference.persistence.powerloss import PowerLossFileSystem, SimulatedCrash
from reference.session import Session
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.format.framing import scan_zstd_frames, split_jsonl
from spec.format.naming import encode_segment
from spec.lineage.repair import derive_closers
from spec.log.events import COMPACTION_END, END_SEED, TOOL_RESULT, Event
from spec.log.json import FrozenDict
from spec.log.surface import fold_surface
from spec.log.writers import COMPACTION_ENGINE
from tests.powerloss_harness import ProbedFileSystem, crash_states, snapshot

REOPENS: Counter[str] = Counter()  # reopens actually run (equal inputs reuse an earlier outcome)


ROOT = "/data"
CWD = "/work/project"
END_SEED_TIME = 99_999  # the resuming store's clock: the time of the end-seed it appends
RESUME_CLOCK_START = 50_000  # a clock for workloads, far from END_SEED_TIME


# --- building realistic events ---------------------------------------------------------------


def assistant_msg(
    message_id: str, turn: int, step: int, text: str, calls: Sequence[str] = ()
) -> dict[str, Any]:
    return {**assistant_data(message_id, text, tuple(calls), tool="read_file"), "turn": turn, "step": step}


def tool_result_msg(call_id: str, turn: int, step: int, text: str) -> dict[str, Any]:
    return tool_result_data(call_id, text, turn=turn, step=step)


def chunk_data(turn: int, step: int, text: str) -> dict[str, Any]:
    return {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": text}}


def tool_round(
    session: Session, turn: int, step: int, call_id: str, output: str, *, answered: bool = True
) -> None:
    """One step that calls a tool: a chunk, the assistant message announcing the call, the call
    started, and (unless ``answered`` is false) its result and the step's end."""
    session.append("step/start", {"turn": turn, "step": step})
    session.append("assistant/chunk", chunk_data(turn, step, "Reading."))
    session.append(
        "assistant/message", assistant_msg(f"a{turn}-{step}", turn, step, "Reading.", (call_id,)), "append"
    )
    session.append("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "read_file"})
    if answered:
        session.append("tool/result", tool_result_msg(call_id, turn, step, output), "append")
        session.append("step/end", {"turn": turn, "step": step})


# --- the workload and what it promised ---------------------------------------------------------


@dataclass
class Journal:
    """What the workload did, as the test sees it: the sessions it built (their logs are what was
    appended) and, per session, how many events a completed flush made durable."""

    store: SessionStore
    flushed: dict[str, int] = field(default_factory=dict)

    def flush(self, session: Session) -> None:
        session.flush()
        self.flushed[session.id] = len(session.events)

    def appended(self) -> dict[str, tuple[Event, ...]]:
        return {session.id: session.events for session in self.store.list()}

    def headers(self) -> dict[str, FrozenDict]:
        return {session.id: session.header for session in self.store.list()}


def counting_clock(start: int) -> Callable[[], int]:
    ticks = itertools.count(start)
    return lambda: next(ticks)


_REOPEN_TOKENS = itertools.count(1)


def counting_tokens(prefix: str) -> Callable[[], str]:
    """Deterministic temp-file names, so that every run of a workload makes the same calls."""
    ticks = itertools.count(1)
    return lambda: f"{prefix}{next(ticks)}"


def file_store(
    fs: PowerLossFileSystem, compressed: bool, temp_token: Callable[[], str] | None = None
) -> FileStore:
    """A store on ``fs``; temp names never repeat one a crashed earlier store may have left."""
    token = temp_token if temp_token is not None else (lambda: f"r{next(_REOPEN_TOKENS)}")
    return FileStore(ROOT, fs=fs, compressed=compressed, temp_token=token)


def realistic_workload(journal: Journal) -> None:
    """Two turns with steps, chunks, tool calls and results, flushed at uneven points; a fork
    whose child starts its own turn; then a third turn that opens a compaction, lands its summary
    as a surface replace, and stops with the compaction bracket open, a tool call unanswered and
    one more event never flushed."""
    store = journal.store
    main = store.create("main", meta={"cwd": CWD, "createdAt": 1})
    main.append("turn/start", {"turn": 1})
    main.append("user/message", user_data("u1", "What is in a.txt?"), "append")
    journal.flush(main)  # publishes the file: header frame + first batch
    tool_round(main, 1, 1, "c1", "alpha beta gamma")
    journal.flush(main)
    main.append("step/start", {"turn": 1, "step": 2})
    main.append("assistant/message", assistant_msg("a1-2", 1, 2, "It holds three words."), "append")
    main.append("step/end", {"turn": 1, "step": 2})
    main.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    journal.flush(main)

    child = store.fork(main, child_id="child")
    journal.flush(child)  # publishes the child whole: its seed and end-seed, once
    child.append("turn/start", {"turn": 2})
    child.append("user/message", user_data("cu2", "And b.txt?"), "append")
    tool_round(child, 2, 1, "cc2", "", answered=False)
    journal.flush(child)

    main.append("turn/start", {"turn": 2})
    main.append("user/message", user_data("u2", "Summarise, then read b.txt."), "append")
    main.append("compaction/start", {"compactionId": "k1", "turn": 2}, writer=COMPACTION_ENGINE)
    journal.flush(main)
    shadowed = list(main.surface.nodes[:-1])
    main.append(
        "compaction/summary",
        {
            "compactionId": "k1",
            "summary": [{"type": "text", "text": "3 words"}],
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": shadowed,
            "shadowedTokenCount": 40,
            "provider": "p",
            "model": "m",
        },
        writer=COMPACTION_ENGINE,
    )
    checkpoint = user_data("ck1", "Summary: 3 words.", kind="plugin")
    checkpoint["source"] = {"kind": "plugin", "plugin": "compact", "compactionId": "k1"}
    main.append(
        "user/message", checkpoint, {"op": "replace", "start": shadowed[0], "end": shadowed[-1]}, shadowed
    )
    tool_round(main, 2, 1, "c2", "", answered=False)
    journal.flush(main)
    main.append("assistant/chunk", chunk_data(2, 1, "never flushed"))


def run_workload(
    workload: Callable[[Journal], None], compressed: bool, crash_at: int | None = None
) -> tuple[ProbedFileSystem, Journal]:
    """Run ``workload`` on a fresh power-loss filesystem, stopped before mutating call
    ``crash_at`` when one is given; returns the filesystem and what the workload promised."""
    fs = ProbedFileSystem()
    if crash_at is not None:
        fs.crash_at_op(crash_at)
    journal = Journal(
        SessionStore(
            file_store(fs, compressed, counting_tokens("w")), clock=counting_clock(RESUME_CLOCK_START)
        )
    )
    try:
        workload(journal)
    except SimulatedCrash:
        pass
    return fs, journal


# --- the oracle: D3 items 1-6 on one reopened session -----------------------------------------


@dataclass(frozen=True)
class Reopened:
    """How one reopen went, for the tests that want to know which repair paths they reached."""

    found: bool
    torn_bytes: int = 0
    recovered: int = 0
    closers: tuple[str, ...] = ()
    lost: int = 0  # appended events that did not come back


def expected_prefix_length(stored: Sequence[Event], appended: Sequence[Event], at_least: int) -> int | None:
    """The ``k`` for which ``stored`` is ``appended[:k]`` followed by the spec's closers of that
    prefix, tried from the longest common prefix down to ``at_least``; None when there is none."""
    common = 0
    for left, right in zip(stored, appended):
        if left != right:
            break
        common += 1
    for k in range(common, at_least - 1, -1):
        if tuple(stored[k:]) == derive_closers(appended[:k]):
            return k
    return None


def torn_offset(data: bytes, compressed: bool) -> int | None:
    """Where the spec's framing says the torn tail of a log's bytes starts (None: no torn tail)."""
    return scan_zstd_frames(data).torn_offset if compressed else split_jsonl(data).torn_offset


def complete_lines_on_disk(data: bytes, compressed: bool) -> int:
    """How many event lines the bytes hold whole, counting the complete lines a torn zstd frame's
    complete blocks give back: what a reopen must keep (D3.4)."""
    if not compressed:
        return data.count(b"\n") - 1
    scan = scan_zstd_frames(data)
    plaintext = b"".join(
        zstandard.ZstdDecompressor().decompress(data[frame.offset : frame.offset + frame.length])
        for frame in scan.frames
    )
    if scan.torn_offset is not None:
        try:
            plaintext += zstandard.ZstdDecompressor().decompressobj().decompress(data[scan.torn_offset :])
        except zstandard.ZstdError:
            pass
    return plaintext.count(b"\n") - 1


def check_reopen(
    fs: PowerLossFileSystem,
    compressed: bool,
    session_id: str,
    appended: Sequence[Event],
    flushed: int,
    header: Mapping[str, Any],
) -> Reopened:
    """Reopen ``session_id`` from ``fs`` with a fresh FileStore and SessionStore.resume and assert
    SPEC-DECISIONS D3: (1) no session, or its header intact; (2) stored events a prefix of
    ``appended``; (3) at least the ``flushed`` ones; (4) a torn tail cut, the committed bytes kept
    byte for byte, the file clean and durable, and a second open finds nothing to repair; (5) no
    corrupt-log error (any SpecError fails the test); (6) the open turn and compaction closed by
    the spec's closers, then the end-seed rule."""
    files = file_store(fs, compressed)
    path = files.locate(session_id)
    if path is None:
        assert flushed == 0, f"{session_id}: {flushed} flushed events, but no session on disk (D3.3)"
        with pytest.raises(SpecError) as missing:
            SessionStore(files).resume(session_id)
        assert missing.value.code == Code.SESSION_NOT_FOUND
        return Reopened(found=False)
    raw = fs.read_bytes(path)
    torn_at = torn_offset(raw, compressed)
    committed = len(raw) if torn_at is None else torn_at

    store = SessionStore(files, clock=lambda: END_SEED_TIME)
    session = store.resume(session_id)  # D3.5: any SpecError here fails the test
    assert session.header == header, "D3.1: the header came back changed"
    stored = session.events[: session.first_live_seq]
    k = expected_prefix_length(stored, appended, flushed)
    assert k is not None, (
        f"{session_id}: reopened log is not a prefix (of at least {flushed} flushed events) of the "
        f"{len(appended)} appended plus closers: {[e['type'] for e in stored]}"
    )
    end_seed = {"type": END_SEED, "seq": len(stored), "time": END_SEED_TIME, "data": {}}
    expected_tail = () if stored and stored[-1]["type"] == END_SEED else (end_seed,)
    assert tuple(session.events[len(stored) :]) == expected_tail
    assert session.surface.nodes == fold_surface(session.events).nodes

    handle = session.detach_sink()  # the store still owns it and closes it below
    assert isinstance(handle, FileLogHandle)
    assert handle.report.torn_bytes_dropped == len(raw) - committed
    from_disk = len(stored) - handle.report.closers_appended
    assert from_disk == complete_lines_on_disk(raw, compressed), (
        "D3.4: a complete line on disk did not come back"
    )
    repaired = fs.read_bytes(path)
    assert repaired[:committed] == raw[:committed], "D3.4: committed bytes were rewritten"
    assert torn_offset(repaired, compressed) is None, "D3.4: the torn tail is still on disk"
    assert fs.crash().read_bytes(path) == repaired, "the repair itself is not durable"

    store.close(session_id)  # writes the buffered end-seed
    again = file_store(fs, compressed).open(session_id)
    assert again.report == OpenReport(), "a second open still had something to repair"
    assert again.read() == session.events
    again.close()
    closers = tuple(str(event["type"]) for event in stored[k:])
    return Reopened(True, len(raw) - committed, handle.report.recovered_events, closers, len(appended) - k)


def reopen_inputs(snapshot: Mapping[str, bytes | None], session_id: str) -> bytes:
    """A digest of everything reopening ``session_id`` can read: the root, the project directories
    (where the store looks for the session) and every entry under the session's own directories.
    Two crash states with equal digests reopen that session identically."""
    segment = encode_segment(session_id)
    digest = hashlib.sha256(session_id.encode())
    for path, content in snapshot.items():
        parts = path[len(ROOT) + 1 :].split("/") if path.startswith(ROOT + "/") else None
        if path == ROOT or (parts is not None and (len(parts) == 1 or parts[1] == segment)):
            digest.update(
                path.encode() + b"\0" + (b"d" if content is None else b"f%d:" % len(content) + content)
            )
    return digest.digest()


def check_every_crash_state(
    fs: PowerLossFileSystem, journal: Journal, compressed: bool, summary: Counter[str] | None = None
) -> int:
    """Every state a power cut now could leave, every session reopened and checked; returns how
    many crash states were checked. A session whose inputs (:func:`reopen_inputs`) equal those of
    a state already checked has the same outcome, which is reused rather than recomputed."""
    appended, headers = journal.appended(), journal.headers()
    outcomes: dict[bytes, Reopened] = {}
    checked = 0
    for plan, after in crash_states(fs):
        checked += 1
        seen = snapshot(after)
        keys = {session_id: reopen_inputs(seen, session_id) for session_id in appended}
        for session_id, events in appended.items():
            outcome = outcomes.get(keys[session_id])
            if outcome is None:
                try:
                    outcome = check_reopen(
                        after,
                        compressed,
                        session_id,
                        events,
                        journal.flushed.get(session_id, 0),
                        headers[session_id],
                    )
                except AssertionError as failure:
                    raise AssertionError(f"crash plan {plan}: {failure}") from failure
                outcomes[keys[session_id]] = outcome
                REOPENS["distinct"] += 1
            if summary is not None:
                summary.update(_outcome_tags(outcome))
    return checked


def _outcome_tags(outcome: Reopened) -> Iterator[str]:
    yield "found" if outcome.found else "absent"
    if outcome.torn_bytes:
        yield "torn"
    if outcome.recovered:
        yield "recovered"
        if outcome.lost:
            yield "partly recovered"
    if outcome.closers:
        yield "closed"
    if COMPACTION_END in outcome.closers:
        yield "compaction closed"
    if TOOL_RESULT in outcome.closers:
        yield "call answered"
