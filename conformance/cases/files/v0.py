"""DSH's v0 logs (SPEC-DECISIONS D1; notes/dsh-persistence §3.2, §3.6): chunk rows, messages from
before message identity, the legacy conversions, a torn v0 tail, the refusals."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from conformance import builders as payloads
from conformance.cases.build import (
    APPEND,
    SEED_TIME,
    event,
)
from conformance.cases.files.logs import (
    CWD,
    OLD,
    PLAIN_RULE,
    V0_RULE,
    FileSet,
    Writes,
    form,
    plain_log,
    raw_line,
    raw_log,
    v4_header,
    zstd_log,
)
from conformance.cases.files.v4 import STORED_TEXTS, TEXT_RULE, TEXT_RULE_WHY
from spec.codes import Code
from spec.format.naming import V0_PLAIN_NAME, V0_ZSTD_NAME, derive_session_relpath, encode_header_line
from spec.log.json import JsonObject, JsonValue

# --- DSH's v0 logs ---------------------------------------------------------------------------------

PRE_IDENTITY_RESULT: Final[JsonObject] = {
    "turn": 1,
    "step": 1,
    "callId": "c1",
    "content": [{"type": "text", "text": "A"}],
    "isError": False,
}
"""A v0 tool/result from before message identity: no message, the call's id and content inline."""


V0_LONG_LOG: Final = 300  # events: a migration's batch of more than 256 lines


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
            event(15, "tool/result", PRE_IDENTITY_RESULT, **APPEND),
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


def v0_files(data: bytes, compressed: bool, session_id: str = OLD) -> dict[str, bytes]:
    project, session, _ = derive_session_relpath(v4_header(session_id), compressed)
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
    yield from v0_lineage_sets()
    yield from v0_stored_text_sets()
    yield v0_raw_set(
        "a plain DSH v0 log of its header line alone reads empty and is resumed",
        V0_RULE,
        [],
        False,
        comment="no record follows the header line: the resume's v4 log holds the end-seed marker alone",
    )
    yield v0_raw_set(
        f"a plain DSH v0 log of {V0_LONG_LOG} events is resumed as a v4 log of every one",
        V0_RULE,
        [raw_line(seq, str(seq % 7), ignorable=True) for seq in range(V0_LONG_LOG)],
        False,
        comment="the resume writes the converted log, more lines than CPython keeps one int object for, "
        "as one batch beside the v0 file",
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
    yield FileSet(
        "a DSH v0 log holding a record that is an array is refused",
        V0_RULE,
        v0_files(v0_log(False, []) + b'[{"type":"turn/start","seq":0}]\n', False),
        False,
        Code.CORRUPT_LOG,
        session=OLD,
        comment="a stored record is one JSON object; an array holding one is not a record",
    )
    for what, code, writes, header in refusals:
        yield FileSet(
            f"a DSH v0 log {what}",
            "decode_header_line" if header is not None else V0_RULE,
            v0_files(v0_log(False, writes, header), False),
            False,
            code,
            session=OLD,
        )


def v0_replaced_result_writes() -> Writes:
    """A turn whose pre-identity tool result (seq 4) a later pre-identity result replaces (seq 6),
    as DSH 0.1's pruning wrote it."""
    result = PRE_IDENTITY_RESULT
    return [
        [
            event(0, "turn/start", {"turn": 1}),
            event(1, "step/start", payloads.step_start(1, 1)),
            event(
                2,
                "assistant/message",
                {
                    "turn": 1,
                    "step": 1,
                    "content": [{"type": "tool-call", "id": "c1", "name": "read", "input": {}}],
                    "provenance": {"provider": "p", "model": "m"},
                },
                **APPEND,
            ),
            event(3, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": {}}),
            event(4, "tool/result", result, **APPEND),
            event(5, "step/end", payloads.step_end(1, 1)),
            event(
                6,
                "tool/result",
                {**result, "content": [{"type": "text", "text": "[pruned]"}]},
                surfaceOp={"op": "replace", "start": 4, "end": 4},
                sourceEventSeqs=[4],
            ),
            event(7, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ]
    ]


def v0_lineage_sets() -> Iterator[FileSet]:
    """A v0 child created from an empty seed (``seedLength: 0``) and a v0 log whose pre-identity
    tool result was replaced: what the upgrade derives that a v0 line does not say."""
    empty_seed = {**v0_header_line(), "parentSession": "p", "seedLength": 0}
    for compressed in (False, True):
        yield FileSet(
            f"a {form(compressed)} DSH v0 child of an empty seed (seedLength 0) reads as seeded",
            "upgrade_v0_header",
            v0_files(v0_log(compressed, [[event(0, "session/end-seed", {})]], empty_seed), compressed),
            compressed,
            session=OLD,
            comment="isSeeded is true exactly when the line has a seedLength, 0 included",
        )
        yield FileSet(
            f"a {form(compressed)} DSH v0 log's replacing pre-identity result keeps the id of the result it replaces",
            "upgrade_pre_identity_message",
            v0_files(v0_log(compressed, v0_replaced_result_writes()), compressed),
            compressed,
            session=OLD,
            comment="the replacement's message id is the replaced message's legacy id (seq 4), not one of its own",
        )


def v0_stored_text_sets() -> Iterator[FileSet]:
    """A v0 log whose events hold each of the v4 logs' raw JSON texts: read through the legacy
    conversions, then resumed, which writes every event again as a v4 log, read back after close
    (what is written is the spec's encoding of the values read, D5). Each event is an unknown type
    marked ``ignorable``, which a v0 log may hold."""
    for what, texts in STORED_TEXTS.items():
        lines = [raw_line(seq, text, ignorable=True) for seq, text in enumerate(texts)]
        for compressed in (False, True):
            yield v0_raw_set(
                f"a {form(compressed)} DSH v0 log whose data holds {what}",
                TEXT_RULE,
                lines,
                compressed,
                why=TEXT_RULE_WHY,
                shown=True,
            )


def v0_raw_set(
    name: str, rule: str, lines: Sequence[bytes], compressed: bool, why: str | None = None, **more: Any
) -> FileSet:
    """A case of session ``old``'s v0 log: DSH's header line, then ``lines`` as they are."""
    data = raw_log(v0_header_line(), lines, compressed)
    return FileSet(name, rule, v0_files(data, compressed), compressed, session=OLD, why=why, **more)
