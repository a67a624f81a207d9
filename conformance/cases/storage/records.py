"""How stored lines decode (SPEC-DECISIONS D3 items 4-5; notes/dsh-persistence §3, notes/dsh-session-core
§13.1): a plain log's lines (header line, records, a torn tail dropped, a bad complete line a
corrupt log) and DSH v0's packed chunk rows, expanded into one event per member.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any, Final

from conformance import builders as payloads
from conformance.cases import msg
from conformance.cases.build import NOW, OK, Cases, PureCase, append, chained, event, ok, pure, state
from conformance.cases.build import case as protocol_case
from conformance.cases.build import replace as replace_op
from conformance.cases.files.logs import SESSION, raw_line, raw_log, v4_files, v4_header
from conformance.cases.storage.naming import V4_LINE
from conformance.files.reader import encode_files
from spec.codes import Code
from spec.format.json_text import encode_json_text
from spec.format.naming import encode_header_line
from spec.log.json import JsonObject, JsonValue

RECORD = "spec.chunk_rows.decode_storage_record"
MAX_SAFE: Final = 2**53 - 1  # the largest safe integer
JSONL = "spec.framing.decode_jsonl_log"

TEXT_ROW: Final[JsonObject] = {
    "type": "text-chunks",
    "seq0": 3,
    "time0": 100,
    "data": {"turn": 1, "step": 1, "index": 0, "dt": [5, 7], "texts": ["a", "b", "c"]},
}
TOOL_ROW: Final[JsonObject] = {
    "type": "tool-call-chunks",
    "seq0": 0,
    "time0": 0,
    "data": {"turn": 1, "step": 1, "index": 1, "id": "c1", "name": "read", "dt": [1], "args": ["{", "}"]},
}
ROW_RULE: Final = (
    "a packed row is exactly {type, seq0, time0, data} with seq0 an event seq, its members a non-empty "
    "string array, one dt gap per member after the first, and a tool call's id a string "
    "(notes/dsh-session-core §13.1)"
)
TORN_TAIL: Final = (
    "a crash only loses a suffix of the bytes: a last line without its newline is a torn tail, "
    "dropped, while a complete line that does not parse is a corrupt log (SPEC-DECISIONS D3 items 4-5)"
)


def chunk_row_cases() -> Cases:
    yield pure(
        "a packed text-chunks row expands into one assistant/chunk per member", RECORD, record=TEXT_ROW
    )
    yield pure(
        "a packed reasoning-chunks row expands into reasoning deltas",
        RECORD,
        record={**TEXT_ROW, "type": "reasoning-chunks"},
    )
    yield pure(
        "a packed tool-call-chunks row expands into argument deltas naming the call",
        RECORD,
        record=TOOL_ROW,
    )
    yield pure(
        "a stored record that is not a packed row is one event, unchecked",
        RECORD,
        record={"type": "custom/x", "anything": True},
    )


def malformed_row_cases() -> Cases:
    text_data = TEXT_ROW["data"]
    tool_data = TOOL_ROW["data"]
    assert isinstance(text_data, dict) and isinstance(tool_data, dict)
    value: Any
    not_all_strings: list[JsonValue] = ["a", 1]
    a_string_gap: list[JsonValue] = ["x", 7]
    for name, value in [
        ("a packed row with an extra envelope key is malformed", {**TEXT_ROW, "extra": 1}),
        (
            "a packed row whose dt does not match its members is malformed",
            {**TEXT_ROW, "data": {**text_data, "dt": [1]}},
        ),
        (
            "a packed row with no members is malformed",
            {**TEXT_ROW, "data": {**text_data, "texts": [], "dt": []}},
        ),
        ("a packed row whose seq0 is negative is malformed", {**TEXT_ROW, "seq0": -1}),
        (
            "a packed tool-call row whose id is not a string is malformed",
            {**TOOL_ROW, "data": {**tool_data, "id": 1}},
        ),
        ("a packed row without time0 is malformed", {k: v for k, v in TEXT_ROW.items() if k != "time0"}),
        (
            "a packed row whose members are not all strings is malformed",
            {**TEXT_ROW, "data": {**text_data, "texts": not_all_strings, "dt": [5]}},
        ),
        (
            "a packed row whose dt holds a string is malformed",
            {**TEXT_ROW, "data": {**text_data, "dt": a_string_gap}},
        ),
        (
            "a packed row with more dt gaps than it needs is malformed",
            {**TEXT_ROW, "data": {**text_data, "dt": [1, 2, 3]}},
        ),
        (
            "a packed text row with an extra data key is malformed",
            {**TEXT_ROW, "data": {**text_data, "extra": 1}},
        ),
        (
            "a packed text row without its index is malformed",
            {**TEXT_ROW, "data": {k: v for k, v in text_data.items() if k != "index"}},
        ),
        (
            "a packed tool-call row with an extra data key is malformed",
            {**TOOL_ROW, "data": {**tool_data, "extra": 1}},
        ),
        (
            "a packed tool-call row without its index is malformed",
            {**TOOL_ROW, "data": {k: v for k, v in tool_data.items() if k != "index"}},
        ),
        (
            "a packed row with a non-string member is malformed even when dt fits the strings",
            {**TEXT_ROW, "data": {**text_data, "texts": not_all_strings, "dt": []}},
        ),
        (
            "a packed row whose members' seqs would pass the largest safe integer is malformed",
            {**TEXT_ROW, "seq0": MAX_SAFE - 1},
        ),
        (
            "a packed row whose members' times would pass the largest safe integer is malformed",
            {**TEXT_ROW, "time0": MAX_SAFE - 5},
        ),
        (
            "a packed row whose members' times would fall below the smallest safe integer is malformed",
            {**TEXT_ROW, "time0": -MAX_SAFE, "data": {**text_data, "dt": [0, -1]}},
        ),
    ]:
        yield pure(name, RECORD, Code.MALFORMED_CHUNK_ROW, why=ROW_RULE, record=value)
    for field in ("turn", "step"):
        yield pure(
            f"a packed row whose {field} is a string is malformed, whatever the other numbers",
            RECORD,
            Code.MALFORMED_CHUNK_ROW,
            why=ROW_RULE,
            record={**TEXT_ROW, "data": {**text_data, field: "1"}},
        )
    many = 300
    yield pure(
        f"a packed row of {many} members expands into {many} chunks",
        RECORD,
        why=ROW_RULE,
        comment="past 256 members: the lengths compared are large integers",
        record={**TEXT_ROW, "data": {**text_data, "dt": [1] * (many - 1), "texts": ["a"] * many}},
    )
    yield pure(
        "a packed row whose last member's seq is the largest safe integer is valid",
        RECORD,
        why=ROW_RULE,
        record={**TEXT_ROW, "seq0": MAX_SAFE - 2},
    )
    yield pure(
        "a packed tool-call row may leave out the call's name",
        RECORD,
        why=ROW_RULE,
        record={**TOOL_ROW, "data": {k: v for k, v in tool_data.items() if k != "name"}},
    )
    yield pure(
        "each member's time adds its own gap: four members, three different gaps",
        RECORD,
        why=ROW_RULE,
        record={**TEXT_ROW, "data": {**text_data, "texts": ["a", "b", "c", "d"], "dt": [1, 2, 4]}},
    )


def jsonl_cases() -> Cases:
    head = json.dumps(V4_LINE, separators=(",", ":"))
    first = json.dumps(event(0, "custom/x", {}), separators=(",", ":"))
    second = json.dumps(event(1, "custom/y", {}), separators=(",", ":"))
    yield pure(
        "a plain log is a header line and one record per line", JSONL, text=f"{head}\n{first}\n{second}\n"
    )
    yield pure(
        "a last line without its newline is a torn tail, dropped and cut back",
        JSONL,
        why=TORN_TAIL,
        text=f"{head}\n{first}\n{second[:10]}",
    )
    yield pure(
        "a complete line that does not parse is a corrupt log, not a torn tail",
        JSONL,
        Code.CORRUPT_LOG,
        why=TORN_TAIL,
        comment="the damaged line is followed by a good one: damage that is not a tail is never silent loss",
        text=f"{head}\n{first[:10]}\n{second}\n",
    )
    yield pure(
        "even the last complete line must parse",
        JSONL,
        Code.CORRUPT_LOG,
        why=TORN_TAIL,
        comment="a line that kept its newline kept all of its bytes, so a bad one is damage, not a tear",
        text=f"{head}\n{first}\n{{oops\n",
    )
    yield pure(
        "an empty log is corrupt",
        JSONL,
        Code.CORRUPT_LOG,
        why="a log holds at least its header line",
        text="",
    )
    yield pure(
        "a header line that is not JSON is not a header",
        JSONL,
        Code.HEADER_LINE_INVALID,
        why="a log's first line is its header line, a JSON object",
        text="not json\n",
    )


# --- a zstd log's decompressed frames (spec.framing.decode_compressed_log) -----------------------

COMPRESSED = "spec.framing.decode_compressed_log"
PLACES = "spec.framing.place_compressed_log"
FRAMES_RULE: Final = (
    "a writer's zstd log is the header line alone in its first frame and whole lines in every later "
    "one; a log compressed whole by a tool is the plain log its joined plaintexts are; a torn final "
    "frame is cut off and its complete lines recovered (SPEC-DECISIONS D3 items 4-5; docs/choices.md, "
    '"Reading logs as users have them")'
)
FRAME_OFFSETS: Final = (0, 41, 113, 170, 262, 301)  # where each frame starts in the file (compressed)


def compressed_lines() -> list[str]:
    """The header line and five records of different lengths, each with its newline."""
    head = json.dumps(V4_LINE, separators=(",", ":"))
    records = [
        json.dumps(event(n, "custom/x", {"k": "v" * (3 * n + 1)}), separators=(",", ":")) for n in range(5)
    ]
    return [f"{line}\n" for line in (head, *records)]


def frames(*texts: str, torn: str | None = None) -> dict[str, Any]:
    """The ``call`` input: each text a complete frame's plaintext at the next file offset, ``torn``
    the last one's when it is torn."""
    placed = [{"offset": FRAME_OFFSETS[n], "text": text} for n, text in enumerate(texts)]
    last = None if torn is None else {"offset": FRAME_OFFSETS[len(texts)], "text": torn}
    return {"frames": placed, "torn": last}


def compressed_cases() -> Cases:
    """Each zstd log read into its records and cut, and each one read whole its records' places
    (:data:`PLACES`, a row of its own: a reader may give the records without their places)."""
    for case in compressed_reads():
        yield case
        if case.intent == OK:
            yield replace(case, name=f"places: {case.name}", function=PLACES)


def compressed_reads() -> Iterator[PureCase]:
    h, r0, r1, r2, r3, r4 = compressed_lines()
    yield pure(
        "a writer's zstd log reads each frame's lines as records",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="the byte is the line's offset in the decompressed text; frames of one, two and three lines",
        **frames(h, r0 + r1, r2, r3 + r4),
    )
    yield pure(
        "a writer's zstd log with a torn last frame recovers its whole lines and names its torn tail",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="the file is cut back to the torn frame's offset; its whole lines must be written again",
        **frames(h, r0 + r1, torn=r2 + r3 + r4[:9]),
    )
    yield pure(
        "a writer's zstd log whose torn last frame ends a line recovers it with no torn tail",
        COMPRESSED,
        why=FRAMES_RULE,
        **frames(h, r0, torn=r1 + r2),
    )
    yield pure(
        "a writer's complete frame that does not end a line is a corrupt log",
        COMPRESSED,
        Code.CORRUPT_LOG,
        why=FRAMES_RULE,
        comment="a crash tears only the last frame; a complete frame holds whole lines",
        **frames(h, r0 + r1[:7], r2),
    )
    yield pure(
        "a writer's complete frame holding a line that does not parse is a corrupt log",
        COMPRESSED,
        Code.CORRUPT_LOG,
        why=FRAMES_RULE,
        **frames(h, r0, "{oops\n" + r1),
    )
    yield pure(
        "a zstd log compressed whole reads as the plain log of its joined frames, each line at its frame",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="frames cut inside lines, an empty one among them (it holds no line, even the one "
        "starting where it is); a line is placed at the frame holding its first byte",
        **frames(h + r0[:5], r0[5:] + r1, "", r2 + r3[:4], r3[4:] + r4),
    )
    yield pure(
        "a zstd log compressed whole whose first frame ends a line after the header reads whole",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="a first frame of two whole lines is not the writer's form (the header line alone)",
        **frames(h + r0, r1 + r2),
    )
    yield pure(
        "a zstd log compressed whole with a torn last frame keeps the lines it completes and recovers the rest",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="a line that ends exactly where the complete frames end is committed; one that ends in "
        "the torn frame is recovered; the bytes after its last newline are the torn tail",
        **frames(h + r0[:9], r0[9:] + r1, torn=r2 + r3 + r4[:6]),
    )
    yield pure(
        "a zstd log compressed whole whose text ends inside a line drops that tail, with no frame torn",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="the torn tail is of the plain text that was compressed: nothing in the file is cut",
        **frames(h[:20], h[20:] + r0 + r1[:4]),
    )
    yield pure(
        "a zstd log whose only frame is torn is corrupt: no complete frame holds its header line",
        COMPRESSED,
        Code.CORRUPT_LOG,
        why=FRAMES_RULE,
        comment="the header frame is the log's first write; torn, the session was never durably created",
        **frames(torn=h + r0 + r1[:3]),
    )
    yield pure(
        "a writer's zstd log whose torn last frame holds no whole line names its torn tail at the frame's start",
        COMPRESSED,
        why=FRAMES_RULE,
        **frames(h, r0, torn=r1[:5]),
    )
    yield pure(
        "a zstd log compressed whole recovers a line whose newline is in the torn frame",
        COMPRESSED,
        why=FRAMES_RULE,
        comment="the complete frames end one byte short of the line's end (at an odd offset, 269): the line "
        "is not committed",
        **frames(h + r0, r1 + r2[:-1], torn="\n" + r3),
    )
    yield pure(
        "a zstd log compressed whole reads a line that starts at its first frame's last byte",
        COMPRESSED,
        why=FRAMES_RULE,
        **frames(h + r0[:1], r0[1:] + r1),
    )
    yield pure(
        "a zstd log of no frames is corrupt",
        COMPRESSED,
        Code.CORRUPT_LOG,
        why="a log holds at least its header line",
        **frames(),
    )
    yield pure(
        "a zstd log compressed whole that holds no complete line is corrupt",
        COMPRESSED,
        Code.CORRUPT_LOG,
        why="a log holds at least its header line",
        **frames("", h[:30]),
    )
    yield pure(
        "a zstd log compressed whole whose header line is not JSON is not a header",
        COMPRESSED,
        Code.HEADER_LINE_INVALID,
        why="a log's first line is its header line, a JSON object",
        **frames("not json\n" + r0, r1),
    )


def resumed_surface_cases() -> Cases:
    """A stored log folded at resume in runs (issue 24: take_seed_run) gives the surface a fold
    event by event gives: a second run of appends, after a request/header ends the first, is pushed
    once, and a replace after the resume finds its nodes where they stand."""
    header_data = encode_json_text({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "user"})
    messages = [
        raw_line(seq, encode_json_text(payloads.user_message(f"u{seq}")), "user/message", surfaceOp="append")
        for seq in (2, 3, 4)
    ]
    lines = [raw_line(0, "{}"), raw_line(1, header_data, "request/header"), *messages]
    files = v4_files(raw_log(encode_header_line(v4_header()), lines, False), False)
    yield protocol_case(
        "a replace after a resume finds the resumed log's second run of appends where it stands",
        "fold_seed",
        [
            ok("reset", storage="file", compressed=False, files=encode_files(files)),
            ok("clock", now=NOW),
            ok("resume", id=SESSION),
            append(msg.user("sum", "summary"), SESSION, surfaceOp=replace_op(3, 4), sourceEventSeqs=[3, 4]),
            state(SESSION),
        ],
        storage="file",
        comment="the surface is [2, 3, 4] after the resume; the summary replaces 3 and 4",
    )


cases: Final = chained(
    chunk_row_cases, malformed_row_cases, jsonl_cases, compressed_cases, resumed_surface_cases
)
