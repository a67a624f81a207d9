"""Every reading error names the file line (1-based, the header is line 1) and the byte where the
offending line starts, so that ``sed -n Np`` (or ``zstdcat | sed -n Np``) shows it: plain and
zstd logs, v4 and v0, packed chunk rows included (issue 13, "Exact locations")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from event_builders import V4_HEADER_LINE
from refusals import refusal

from reference.logfile import read_log_file
from reference.persistence.filestore import compress_frame
from spec.codes import Code, SpecError

V0_HEADER = {"type": "session", "version": 0, "id": "s", "createdAt": 1}
USER = {"id": "u1", "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": "hi"}]}


def event(seq: int, kind: str, data: object, **extra: object) -> dict[str, object]:
    return {"type": kind, "seq": seq, "time": 10 + seq, "data": data, **extra}


def turn_events(count: int) -> list[dict[str, object]]:
    """``count`` well-formed events: one turn holding user messages."""
    events = [event(0, "turn/start", {"turn": 1})]
    events += [
        event(seq, "user/message", {**USER, "id": f"u{seq}"}, surfaceOp="append") for seq in range(1, count)
    ]
    return events


def jsonl(*values: object) -> bytes:
    return b"".join(json.dumps(value).encode() + b"\n" for value in values)


def read_refusal(path: Path) -> SpecError:
    return refusal(lambda: read_log_file(str(path)))


def line_start(data: bytes, line: int) -> int:
    """The byte offset at which 1-based ``line`` starts."""
    return len(b"".join(data.splitlines(keepends=True)[: line - 1]))


def test_an_unparsable_line_twelve_is_reported_as_line_twelve_with_its_byte(tmp_path: Path) -> None:
    lines = jsonl(V4_HEADER_LINE, *turn_events(10)).splitlines(keepends=True)
    lines.insert(11, b"{not json\n")  # becomes line 12 of the file
    data = b"".join(lines)
    log = tmp_path / "session.v4.jsonl"
    log.write_bytes(data)
    error = read_refusal(log)
    assert error.code is Code.CORRUPT_LOG
    assert data.splitlines()[11] == b"{not json"
    assert (
        error.message
        == f"corrupt session log: unparsable committed event at line 12 (byte {line_start(data, 12)})"
    )


def test_a_malformed_packed_chunk_row_names_its_line_and_byte(tmp_path: Path) -> None:
    row = {
        "type": "text-chunks",
        "seq0": 3,
        "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1]},
    }
    data = jsonl(
        V0_HEADER,
        event(0, "turn/start", {"turn": 1}),
        event(1, "step/start", {"turn": 1, "step": 1}),
        event(
            2,
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "a"}},
        ),
        row,
    )
    log = tmp_path / "session.jsonl"
    log.write_bytes(data)
    error = read_refusal(log)
    assert error.code is Code.MALFORMED_CHUNK_ROW
    assert error.message == (
        f"malformed text-chunks storage row at line 5 (byte {line_start(data, 5)}): "
        "data must be exactly {turn, step, index, dt, texts}"
    )


@pytest.mark.parametrize("name", ["session.v4.jsonl", "session.jsonl"])
def test_a_seq_gap_names_the_line_that_breaks_the_count(tmp_path: Path, name: str) -> None:
    header = V4_HEADER_LINE if name == "session.v4.jsonl" else V0_HEADER
    events = turn_events(6)
    events[4]["seq"] = 9
    data = jsonl(header, *events)
    log = tmp_path / name
    log.write_bytes(data)
    error = read_refusal(log)
    assert error.code is Code.CORRUPT_LOG
    assert f"at line 6 (byte {line_start(data, 6)}): expected seq 4, got 9" in error.message


def test_a_message_that_a_restore_refuses_names_its_line(tmp_path: Path) -> None:
    events = turn_events(4)
    events[2]["data"] = {**USER, "role": "assistant"}
    data = jsonl(V4_HEADER_LINE, *events)
    log = tmp_path / "session.v4.jsonl"
    log.write_bytes(data)
    error = read_refusal(log)
    assert error.code is Code.MESSAGE_ROLE
    assert error.message.endswith(f", at line 4 (byte {line_start(data, 4)})")


def test_an_unknown_v0_event_type_names_its_line(tmp_path: Path) -> None:
    data = jsonl(V0_HEADER, event(0, "turn/start", {"turn": 1}), event(1, "plugin/unknown", {}))
    log = tmp_path / "session.jsonl"
    log.write_bytes(data)
    error = read_refusal(log)
    assert error.code is Code.UNKNOWN_EVENT_TYPE
    assert error.message.endswith(f", at line 3 (byte {line_start(data, 3)})")


def test_a_bad_line_in_a_zstd_frame_names_its_line_in_the_decompressed_text_and_its_frame(
    tmp_path: Path,
) -> None:
    header, first, second = (
        jsonl(V4_HEADER_LINE),
        jsonl(*turn_events(2)),
        jsonl(*turn_events(3)[2:]) + b"{oops\n",
    )
    data = compress_frame(header) + compress_frame(first) + compress_frame(second)
    log = tmp_path / "session.v4.jsonl.zstd"
    log.write_bytes(data)
    error = read_refusal(log)
    text = header + first + second
    assert text.splitlines()[4] == b"{oops"
    third_frame = len(compress_frame(header)) + len(compress_frame(first))
    assert error.message == (
        f"corrupt session log: unparsable committed event at line 5 (byte {line_start(text, 5)} of the "
        f"decompressed text, zstd frame at byte {third_frame})"
    )


def test_the_places_of_events_follow_their_lines_and_packed_rows_share_one(tmp_path: Path) -> None:
    row = {
        "type": "text-chunks",
        "seq0": 2,
        "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
    }
    data = jsonl(
        V0_HEADER,
        event(0, "turn/start", {"turn": 1}),
        event(1, "step/start", {"turn": 1, "step": 1}),
        row,
        event(5, "step/end", {"turn": 1, "step": 1}),
    )
    log = tmp_path / "session.jsonl"
    log.write_bytes(data)
    read = read_log_file(str(log))
    assert [place.line for place in read.places] == [2, 3, 4, 4, 4, 5]
    assert [place.byte for place in read.places][-1] == line_start(data, 5)
