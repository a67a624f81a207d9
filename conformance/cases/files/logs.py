"""The words the files cases are written in: a file set, and the logs it holds, encoded by the
specification's own encoders (one line per record; one raw-block zstd frame per write)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from conformance import builders as payloads
from conformance.cases import msg
from conformance.cases.build import APPEND, OK, SEED_TIME, event
from conformance.zstd_frames import encode_raw_frame
from spec.format.json_text import encode_json_text
from spec.format.naming import derive_session_relpath, encode_header_line
from spec.log.header import build_header
from spec.log.json import JsonObject, JsonValue

SESSION: Final = "r"  # the v4 logs' session
OLD: Final = "old"  # the v0 logs' session
CWD: Final = "/workspace/project"
CHECKSUM_BYTES: Final = 4

PLAIN_RULE: Final = "decode_jsonl_log"
ZSTD_RULE: Final = "decode_zstd_log"
SCAN_RULE: Final = "scan_zstd_frames"
V0_RULE: Final = "upgrade_v0_records"
SEQ_RULE: Final = "decode_v0_events"

Writes = Sequence[Sequence[JsonValue]]  # the records of each write (a flush), in order


@dataclass(frozen=True)
class FileSet:
    """A case: the files a store starts over, the session they hold, and what reading it must
    give (``OK``, or the code ``read`` and ``resume`` answer)."""

    name: str
    rule: str
    files: Mapping[str, bytes]
    compressed: bool
    intent: str = OK
    session: str = SESSION
    why: str | None = None
    comment: str | None = None
    taken: bool = True  # a refused log's id is still taken: create answers SESSION_ALREADY_EXISTS
    shown: bool = False  # the resumed session's state is asked, and a fork's: events decoded from kept lines
    read: bool = False  # refused by resume only: read answers the log's events (its fold is resume's)


# --- the logs ----------------------------------------------------------------------------------


def v4_header(session_id: str = SESSION) -> JsonObject:
    return dict(build_header(session_id, {"cwd": CWD}, SEED_TIME, False))


def v4_writes() -> list[list[JsonValue]]:
    """A whole turn written by three flushes: the turn's start and the user's message; the step
    (a tool call and its result); the assistant's answer and the turn's end."""
    return [
        [event(0, "turn/start", payloads.turn_start(1)), event(1, "user/message", msg.user(), **APPEND)],
        [
            event(2, "step/start", payloads.step_start(1, 1)),
            event(3, "assistant/message", msg.assistant(calls=("c1",)), **APPEND),
            event(4, "tool/call", payloads.tool_call("c1")),
            event(5, "tool/result", msg.result(), **APPEND, sourceEventSeqs=[4]),
            event(6, "step/end", payloads.step_end(1, 1)),
        ],
        [
            event(7, "assistant/message", msg.assistant("a2", "done"), **APPEND),
            event(8, "turn/end", payloads.turn_end(1)),
        ],
    ]


def line(value: JsonValue) -> bytes:
    return encode_json_text(value).encode("utf-8") + b"\n"


def plain_log(header_line: JsonValue, writes: Writes) -> bytes:
    return line(header_line) + b"".join(line(record) for batch in writes for record in batch)


Frame = Callable[[int, Sequence[bytes]], bytes]  # a frame's index in the log and its lines -> its bytes


def raw_frame(index: int, texts: Sequence[bytes]) -> bytes:
    """A frame of one raw block per line, with its 4-byte content size and its checksum."""
    ends = [sum(len(text) for text in texts[: count + 1]) for count in range(len(texts))]
    return encode_raw_frame(b"".join(texts), ends)


def zstd_log(header_line: JsonValue, writes: Writes, frame: Frame = raw_frame) -> bytes:
    """Frame 0 the header line, then one frame per write, each made by ``frame`` (by default one
    raw block per line)."""
    batches = [[line(header_line)], *([line(record) for record in batch] for batch in writes)]
    return b"".join(frame(index, texts) for index, texts in enumerate(batches))


def v4_files(data: bytes, compressed: bool, session_id: str = SESSION) -> dict[str, bytes]:
    project, session, name = derive_session_relpath(v4_header(session_id), compressed)
    return {f"{project}/{session}/{name}": data}


def v4_log(compressed: bool, writes: Writes | None = None) -> bytes:
    encode = zstd_log if compressed else plain_log
    return encode(encode_header_line(v4_header()), v4_writes() if writes is None else writes)


def form(compressed: bool) -> str:
    return "compressed" if compressed else "plain"


RAW: Final = "\ue000raw\ue000"  # where a record's data is written as raw JSON text (raw_line)


def raw_line(
    seq: int, text: str, kind: str = "custom/value", data: JsonValue = RAW, **envelope: JsonValue
) -> bytes:
    """A stored line of a ``kind`` event at ``seq`` whose data is ``text`` (or, with ``data``, holds
    it where ``data`` holds :data:`RAW`), raw JSON text as a writer other than the spec's encoder
    may have written it (spaces, escapes, number forms)."""
    encoded = encode_json_text({"type": kind, "seq": seq, "time": SEED_TIME, "data": data, **envelope})
    return encoded.replace(encode_json_text(RAW), text).encode("utf-8") + b"\n"


def raw_log(header_line: JsonValue, lines: Sequence[bytes], compressed: bool) -> bytes:
    """The header line and ``lines`` as they are: one line each, plain, or compressed as one frame
    for the header line and one holding every other line (one raw block per line)."""
    if not compressed:
        return line(header_line) + b"".join(lines)
    return raw_frame(0, [line(header_line)]) + (raw_frame(1, lines) if lines else b"")
