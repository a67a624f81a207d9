"""files: reference files every implementation must read (SPEC-DECISIONS D1, D2, D3; issue 10).

Each case is a *file set*: the bytes of a store's files, made here from the specification's own
encoders (:func:`spec.format.naming.encode_header_line`, :func:`spec.format.json_text.encode_json_text`,
the D1 path of :func:`spec.format.naming.derive_session_relpath`) and, compressed, from
:func:`conformance.zstd_frames.encode_raw_frame` (standard zstd frames in raw blocks, so that the
bytes depend on this code alone). A vector places the set with ``reset``'s ``files`` argument
(capability ``import``) and says what ``read`` and ``resume`` must answer; the generator also
writes each set under ``conformance/reference-files/<the vector's file name>/`` as a store root,
for an implementer's own tests.

- **v4 logs**, plain and compressed (one frame per write, a frame in several blocks), closed or
  ending inside a turn: ``read`` shows the log, ``resume`` adds the closers and the end-seed, and a
  ``read`` after ``close`` shows what ``resume`` wrote.
- **torn tails** at several cuts (a plain last line cut short or without its newline; a last
  frame cut in its magic, its header, a block, after some blocks, in its checksum; 1-3 stray
  bytes): dropped, the complete lines of a torn frame kept, and the file cut back so that what
  ``resume`` appends reads back (D3 item 4).
- **damaged middles** (a complemented byte, invalid UTF-8, an empty line, a wrong checksum, bad
  magic, a frame that ends inside a line, a seq gap): ``CORRUPT_LOG`` for ``read`` and
  ``resume``, the id still taken, nothing cut (D3 item 5).
- **v0 logs of DSH's shapes** (``session.jsonl[.zstd]``, packed text, reasoning and tool-call
  chunk rows, messages from before message identity, a steering message, a trigger, a disposed
  turn), read through the legacy conversions and resumed (D1); a torn v0 tail; the refusals a
  v0 log can meet.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from conformance import builders as payloads
from conformance.cases.build import (
    APPEND,
    NOW,
    OK,
    SEED_TIME,
    Case,
    Cases,
    Step,
    assistant_msg,
    event,
    fails,
    ok,
    result_msg,
    user_msg,
)
from conformance.zstd_frames import BLOCK_HEADER_BYTES, HEADER_BYTES, encode_raw_frame
from spec.codes import Code
from spec.format.json_text import encode_json_text
from spec.format.naming import V0_PLAIN_NAME, V0_ZSTD_NAME, derive_session_relpath, encode_header_line
from spec.log.header import build_header
from spec.log.json import JsonObject, JsonValue

SESSION: Final = "r"  # the v4 logs' session
OLD: Final = "old"  # the v0 logs' session
CWD: Final = "/workspace/project"
CHECKSUM_BYTES: Final = 4

PLAIN_RULE: Final = "spec.format.framing.decode_jsonl_log"
ZSTD_RULE: Final = "spec.format.framing.decode_zstd_log"
SCAN_RULE: Final = "spec.format.framing.scan_zstd_frames"
V0_RULE: Final = "spec.format.legacy.upgrade_v0_records"
SEQ_RULE: Final = "spec.format.legacy.decode_v0_events"

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
    extra: tuple[Step, ...] = field(default=())


# --- the logs ----------------------------------------------------------------------------------


def v4_header(session_id: str = SESSION) -> JsonObject:
    return dict(build_header(session_id, {"cwd": CWD}, SEED_TIME, False))


def v4_writes() -> list[list[JsonValue]]:
    """A whole turn written by three flushes: the turn's start and the user's message; the step
    (a tool call and its result); the assistant's answer and the turn's end."""
    return [
        [event(0, "turn/start", payloads.turn_start(1)), event(1, "user/message", user_msg(), **APPEND)],
        [
            event(2, "step/start", payloads.step_start(1, 1)),
            event(3, "assistant/message", assistant_msg(calls=("c1",)), **APPEND),
            event(4, "tool/call", payloads.tool_call("c1")),
            event(5, "tool/result", result_msg(), **APPEND, sourceEventSeqs=[4]),
            event(6, "step/end", payloads.step_end(1, 1)),
        ],
        [
            event(7, "assistant/message", assistant_msg("a2", "done"), **APPEND),
            event(8, "turn/end", payloads.turn_end(1)),
        ],
    ]


def line(value: JsonValue) -> bytes:
    return encode_json_text(value).encode("utf-8") + b"\n"


def plain_log(header_line: JsonValue, writes: Writes) -> bytes:
    return line(header_line) + b"".join(line(record) for batch in writes for record in batch)


def zstd_log(header_line: JsonValue, writes: Writes) -> bytes:
    """Frame 0 the header line, then one frame per write, one raw block per line."""
    frames = [encode_raw_frame(line(header_line))]
    for batch in writes:
        texts = [line(record) for record in batch]
        ends = [sum(len(text) for text in texts[: count + 1]) for count in range(len(texts))]
        frames.append(encode_raw_frame(b"".join(texts), ends))
    return b"".join(frames)


def v4_files(data: bytes, compressed: bool, session_id: str = SESSION) -> dict[str, bytes]:
    project, session, name = derive_session_relpath(v4_header(session_id), compressed)
    return {f"{project}/{session}/{name}": data}


def v4_log(compressed: bool, writes: Writes | None = None) -> bytes:
    encode = zstd_log if compressed else plain_log
    return encode(encode_header_line(v4_header()), v4_writes() if writes is None else writes)


def form(compressed: bool) -> str:
    return "compressed" if compressed else "plain"


# --- v4 logs, whole and torn ---------------------------------------------------------------------


def whole_sets() -> Iterator[FileSet]:
    for compressed in (False, True):
        rule = ZSTD_RULE if compressed else PLAIN_RULE
        yield FileSet(
            f"a {form(compressed)} v4 log of a closed turn reads whole and resumes with only the end-seed marker",
            rule,
            v4_files(v4_log(compressed), compressed),
            compressed,
        )
        open_turn = v4_writes()[:2]
        open_turn[1] = open_turn[1][:3]  # the tool call was announced, its result never written
        yield FileSet(
            f"a {form(compressed)} v4 log that ends inside a turn is resumed with the closers",
            rule,
            v4_files(v4_log(compressed, open_turn), compressed),
            compressed,
        )


def plain_torn_sets() -> Iterator[FileSet]:
    data = v4_log(False)
    last = data.rstrip(b"\n").rfind(b"\n") + 1  # where the last line (turn/end) starts
    cuts = {
        "after its first byte": last + 1,
        "halfway": (last + len(data)) // 2,
        "just before its newline": len(data) - 1,
    }
    for where, cut in cuts.items():
        yield FileSet(
            f"a plain v4 log whose last line is cut {where} is read without it and resumed",
            PLAIN_RULE,
            v4_files(data[:cut], False),
            False,
            comment=f"the file is cut at byte {cut} of {len(data)}; the turn/end is lost, so the turn is open",
        )


def zstd_torn_sets() -> Iterator[FileSet]:
    data = v4_log(True)
    writes = v4_writes()
    last = len(v4_log(True, writes[:2]))  # where the last frame starts
    first_block = last + HEADER_BYTES + BLOCK_HEADER_BYTES + len(line(writes[2][0]))
    cuts = {
        "in its magic number": (last + 2, "nothing of it is read"),
        "in its frame header": (last + HEADER_BYTES - 1, "nothing of it is read"),
        "inside its first block": (last + HEADER_BYTES + 5, "nothing of it is read"),
        "after its first block": (first_block, "its first line is kept"),
        "in its checksum": (len(data) - 2, "both its lines are kept, its checksum unchecked"),
        "before its checksum": (len(data) - CHECKSUM_BYTES, "both its lines are kept"),
    }
    for where, (cut, kept) in cuts.items():
        yield FileSet(
            f"a compressed v4 log whose last frame is cut {where} is read and resumed: {kept}",
            ZSTD_RULE,
            v4_files(data[:cut], True),
            True,
            comment=f"the file is cut at byte {cut} of {len(data)}; the last frame starts at byte {last}, "
            "one raw block per line",
        )
    yield FileSet(
        "up to three stray bytes after the last frame are a torn tail",
        SCAN_RULE,
        v4_files(data + b"\x28\xb5\x2f", True),
        True,
    )


# --- damaged middles ---------------------------------------------------------------------------------


def flip(data: bytes, offset: int) -> bytes:
    """The byte at ``offset`` complemented, as the ``damage`` op does."""
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


def plain_damaged_sets() -> Iterator[FileSet]:
    data = v4_log(False)
    header_end = data.index(b"\n") + 1
    second = data.index(b"\n", header_end) + 1  # the second event line starts here
    middle = data.index(b"hello")
    damaged = {
        "a complemented byte in a middle line": flip(data, middle),
        "invalid UTF-8 in a middle line": data[:middle] + b"\xff" + data[middle + 1 :],
        "an empty line in the middle": data[:second] + b"\n" + data[second:],
        "a middle line that lost its closing brace": data[: second - 2] + data[second - 1 :],
    }
    for what, broken in damaged.items():
        yield FileSet(
            f"a plain v4 log with {what} is corrupt, not torn",
            PLAIN_RULE,
            v4_files(broken, False),
            False,
            Code.CORRUPT_LOG,
        )
    records = [record for batch in v4_writes() for record in batch]
    gap = [records[:3], records[4:]]
    yield FileSet(
        "a plain v4 log with a seq gap is corrupt",
        SEQ_RULE,
        v4_files(v4_log(False, gap), False),
        False,
        Code.CORRUPT_LOG,
        why="a stored log's events sit at their own seqs, 0, 1, 2, and a gap between complete lines is damage",
        comment="the event at seq 3 is missing; every line is complete",
    )


def zstd_damaged_sets() -> Iterator[FileSet]:
    data = v4_log(True)
    writes = v4_writes()
    second = len(v4_log(True, writes[:1]))  # where the second write's frame starts
    third = len(v4_log(True, writes[:2]))
    header_frame = len(v4_log(True, []))
    cut_line = line(writes[1][0])[:-5]
    damaged = {
        "a wrong checksum on a middle frame": flip(data, third - 1),
        "a complemented byte inside a middle frame's block": flip(data, second + HEADER_BYTES + 8),
        "bad magic where its second frame should start": flip(data, header_frame),
        "a wrong checksum on its last complete frame": flip(data, len(data) - 1),
        "a middle frame that ends inside a line": data[:header_frame]
        + encode_raw_frame(cut_line)
        + data[header_frame:],
    }
    for what, broken in damaged.items():
        yield FileSet(
            f"a compressed v4 log with {what} is corrupt, not torn",
            ZSTD_RULE,
            v4_files(broken, True),
            True,
            Code.CORRUPT_LOG,
        )
    yield FileSet(
        "four stray bytes after the last frame are bad magic, not a torn tail",
        SCAN_RULE,
        v4_files(data + b"\x28\xb5\x2f\x00", True),
        True,
        Code.CORRUPT_LOG,
    )


# --- DSH's v0 logs ---------------------------------------------------------------------------------


def v0_header_line(session_id: str = OLD) -> JsonObject:
    """DSH 0.1's header line: version 0, no ``isSeeded``, ``delegationDepth`` written."""
    return {
        "type": "session",
        "version": 0,
        "id": session_id,
        "createdAt": SEED_TIME,
        "cwd": CWD,
        "delegationDepth": 0,
    }


def chunk_row(tag: str, seq0: int, data: JsonObject) -> JsonObject:
    return {"type": tag, "seq0": seq0, "time0": SEED_TIME, "data": data}


def v0_writes() -> list[list[JsonValue]]:
    """A DSH 0.1 session as its store wrote it: a preset, a turn started by a trigger with a user
    message from before message identity; a step whose reasoning, text and tool-call deltas are
    packed chunk rows, an assistant message and a tool result from before message identity; a
    steering message and a disposed turn end; then a second turn left open."""
    content = [{"type": "text", "text": "read a"}]
    return [
        [
            event(0, "permission/preset", {"preset": "workspace-write"}),
            event(1, "turn/start", {"turn": 1, "trigger": {"kind": "user"}}),
            event(2, "user/message", {"content": content, "source": {"kind": "user"}}, **APPEND),
        ],
        [
            event(3, "step/start", payloads.step_start(1, 1)),
            chunk_row(
                "reasoning-chunks",
                4,
                {"turn": 1, "step": 1, "index": 0, "dt": [1, 2], "texts": ["I ", "should ", "read"]},
            ),
            chunk_row(
                "text-chunks",
                7,
                {"turn": 1, "step": 1, "index": 1, "dt": [0, 1], "texts": ["Rea", "ding ", "a"]},
            ),
            chunk_row(
                "tool-call-chunks",
                10,
                {
                    "turn": 1,
                    "step": 1,
                    "index": 2,
                    "dt": [1, 1],
                    "id": "c1",
                    "name": "read",
                    "args": ['{"pa', 'th":', '"a"}'],
                },
            ),
            event(
                13,
                "assistant/message",
                {
                    "turn": 1,
                    "step": 1,
                    "content": [{"type": "text", "text": "Reading a"}],
                    "provenance": {"provider": "p", "model": "m"},
                },
                **APPEND,
            ),
            event(
                14,
                "tool/call",
                {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": {"path": "a"}},
            ),
            event(
                15,
                "tool/result",
                {
                    "turn": 1,
                    "step": 1,
                    "callId": "c1",
                    "content": [{"type": "text", "text": "A"}],
                    "isError": False,
                },
                **APPEND,
            ),
            event(16, "step/end", payloads.step_end(1, 1)),
        ],
        [
            event(
                17,
                "steering/message",
                {"turn": 1, "content": [{"type": "text", "text": "stop"}], "source": {"kind": "user"}},
                **APPEND,
            ),
            event(18, "turn/end", {"turn": 1, "reason": {"kind": "disposed"}}),
            event(19, "turn/start", {"turn": 2}),
        ],
    ]


def v0_files(data: bytes, compressed: bool) -> dict[str, bytes]:
    _, session, _ = derive_session_relpath(v4_header(OLD), compressed)
    project = derive_session_relpath(v4_header(OLD), compressed)[0]
    return {f"{project}/{session}/{V0_ZSTD_NAME if compressed else V0_PLAIN_NAME}": data}


def v0_log(compressed: bool, writes: Writes | None = None, header: JsonValue = None) -> bytes:
    encode = zstd_log if compressed else plain_log
    return encode(v0_header_line() if header is None else header, v0_writes() if writes is None else writes)


def v0_sets() -> Iterator[FileSet]:
    for compressed in (False, True):
        yield FileSet(
            f"a {form(compressed)} DSH v0 log is read through the legacy conversions and resumed",
            V0_RULE,
            v0_files(v0_log(compressed), compressed),
            compressed,
            session=OLD,
            comment="packed reasoning, text and tool-call rows expand in place; the user message, the assistant "
            "message and the tool result from before message identity get legacy ids; the steering message "
            "becomes a user message; the trigger is dropped; disposed becomes aborted; turn 2 is left open",
        )
    data = v0_log(False)
    yield FileSet(
        "a plain DSH v0 log whose last line is torn is read without it",
        PLAIN_RULE,
        v0_files(data[: len(data) - 6], False),
        False,
        session=OLD,
    )
    refusals: list[tuple[str, Code, Writes, JsonValue]] = [
        (
            "holding mode/set is refused",
            Code.LEGACY_MODE_SET,
            [[event(0, "mode/set", {"mode": "plan"})]],
            None,
        ),
        (
            "with a packed row whose dt does not match its texts is refused",
            Code.MALFORMED_CHUNK_ROW,
            [
                [
                    chunk_row(
                        "text-chunks",
                        0,
                        {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b", "c"]},
                    )
                ]
            ],
            None,
        ),
        (
            "whose header says version 4 is refused: the file name and the header disagree",
            Code.HEADER_VERSION_FILE_MISMATCH,
            [],
            encode_header_line(v4_header(OLD)),
        ),
    ]
    for what, code, writes, header in refusals:
        yield FileSet(
            f"a DSH v0 log {what}",
            "spec.format.naming.decode_header_line" if header is not None else V0_RULE,
            v0_files(v0_log(False, writes, header), False),
            False,
            code,
            session=OLD,
        )


# --- the cases ---------------------------------------------------------------------------------------


def file_sets() -> Iterator[FileSet]:
    yield from whole_sets()
    yield from plain_torn_sets()
    yield from zstd_torn_sets()
    yield from plain_damaged_sets()
    yield from zstd_damaged_sets()
    yield from v0_sets()


def placed(files: Mapping[str, bytes]) -> list[JsonValue]:
    """``reset``'s ``files``: each path with its bytes in base64, in path order."""
    return [
        {"path": path, "bytes": base64.b64encode(data).decode("ascii")}
        for path, data in sorted(files.items())
    ]


def steps_of(file_set: FileSet) -> tuple[Step, ...]:
    """Place the files; then a readable log is read, resumed, closed and read again (what resume
    wrote reads back: a torn tail was cut back, not appended after); a refused one answers its
    code to read and resume alike, keeps its id, and still answers it after the failed resume."""
    session = file_set.session
    opening = (
        ok("reset", storage="file", compressed=file_set.compressed, files=placed(file_set.files)),
        ok("clock", now=NOW),
    )
    if file_set.intent == OK:
        return (
            *opening,
            ok("read", id=session),
            ok("resume", id=session),
            ok("close", id=session),
            ok("read", id=session),
        )
    code = Code(file_set.intent)
    return (
        *opening,
        fails(code, "read", id=session),
        fails(code, "resume", id=session),
        fails(Code.SESSION_ALREADY_EXISTS, "create", id=session),
        fails(code, "read", id=session),
    )


def cases() -> Cases:
    for file_set in file_sets():
        yield Case(file_set.name, file_set.rule, steps_of(file_set), file_set.why, file_set.comment)


def reference_files() -> dict[str, dict[str, bytes]]:
    """Every case's files, by the case's name."""
    return {file_set.name: dict(file_set.files) for file_set in file_sets()}
