"""tool-rewrite: a replacing tool/result changes only its inner content (notes/dsh-session-core §3.7).

Covers the rule that lets pruning shrink a tool result in place: the replacement shadows exactly
one node, that node is a tool/result, and the two differ only inside the first block's content
(the call answered, the error flag, the ids, the turn and every other field stay as they were).
A replace by any other type is not bound by it.
"""

from __future__ import annotations

from typing import Any, Final

from conformance.cases import msg
from conformance.cases.build import OK, Cases, Step, append, case, chained, ok, replace, state, turn
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

RULE = "validate_tool_result_rewrite"
ORIGINAL: Final = msg.result("c1", "a long tool output")  # the data of the tool/result at seq 2


def setup() -> list[Step]:
    """A session "s" whose surface is [1, 2, 3]: assistant (calling c1), tool/result, user."""
    return [
        ok("create", id="s"),
        turn(),
        append(msg.assistant(calls=["c1"])),
        append(msg.result("c1", "a long tool output")),
        append(msg.user("u2")),
    ]


def rewrite(data: Any, start_seq: int = 2, end_seq: int = 2) -> JsonObject:
    """An append of a tool/result with ``data`` replacing ``start_seq``..``end_seq``, citing them all."""
    return {
        "op": "append",
        "id": "s",
        "type": "tool/result",
        "data": data,
        "surfaceOp": replace(start_seq, end_seq),
        "sourceEventSeqs": list(range(start_seq, end_seq + 1)),
    }


def message_of(data: JsonObject) -> JsonObject:
    """A tool/result's message."""
    inner = data["message"]
    assert isinstance(inner, dict)
    return inner


def with_message(**changes: JsonValue) -> JsonObject:
    """The original's data with its message changed."""
    return {**ORIGINAL, "message": {**message_of(ORIGINAL), **changes}}


def with_block(**changes: JsonValue) -> JsonObject:
    """The original's data, its first block changed and its inner content shortened."""
    content = message_of(ORIGINAL)["content"]
    assert isinstance(content, list) and isinstance(content[0], dict)
    return with_message(content=[{**content[0], **changes, "content": [{"type": "text", "text": "short"}]}])


def allowed_cases() -> Cases:
    yield case(
        "a tool/result may replace a tool/result with new inner content",
        RULE,
        [*setup(), Step(rewrite(msg.rewritten(ORIGINAL, "short")), OK), state()],
    )
    content = message_of(ORIGINAL)["content"]
    assert isinstance(content, list) and isinstance(content[0], dict)
    yield case(
        "content blocks after the first are not compared",
        RULE,
        [*setup(), Step(rewrite(with_message(content=[*content, {"type": "text", "text": "note"}])), OK)],
    )
    yield case(
        "a tool/result rewrite may give the turn 1 as 1.0: an integral double is that integer",
        RULE,
        [*setup(), Step(rewrite({**msg.rewritten(ORIGINAL, "short"), "turn": 1.0}), OK), state()],
        comment="SPEC-DECISIONS D5: JSON deep equality compares numbers by value",
    )
    yield case(
        "a tool/result rewrite may empty the inner content",
        RULE,
        [*setup(), Step(rewrite(with_message(content=[{**content[0], "content": []}])), OK)],
    )
    yield case(
        "a user/message may replace a tool/result: the rewrite rule binds only tool/result replacements",
        RULE,
        [
            *setup(),
            append(msg.user("sum"), surfaceOp=replace(2, 2), sourceEventSeqs=[2]),
            state(),
        ],
    )


def target_cases() -> Cases:
    short = msg.rewritten(ORIGINAL, "short")
    yield case(
        "a tool/result replace must rewrite exactly one node",
        RULE,
        [*setup(), Step(rewrite(short, 2, 3), str(Code.TOOL_REWRITE_NOT_ONE_NODE)), state()],
    )
    yield case(
        "a tool/result replace must target a tool/result, not a user/message",
        RULE,
        [*setup(), Step(rewrite(short, 3, 3), str(Code.TOOL_REWRITE_NOT_A_RESULT))],
    )
    yield case(
        "a tool/result replace must target a tool/result, not an assistant/message",
        RULE,
        [*setup(), Step(rewrite(short, 1, 1), str(Code.TOOL_REWRITE_NOT_A_RESULT))],
    )


def changed_cases() -> Cases:
    short = msg.rewritten(ORIGINAL, "short")
    changes: list[tuple[str, JsonValue]] = [
        ("a tool/result rewrite may not change isError", with_block(isError=True)),
        ("a tool/result rewrite may not change the call it answers", with_block(toolCallId="c2")),
        (
            "a tool/result rewrite may not change the message id",
            {**ORIGINAL, "message": {**message_of(with_block()), "id": "other"}},
        ),
        ("a tool/result rewrite may not change the turn", {**short, "turn": 2}),
        ("a tool/result rewrite may not add fields to data", {**short, "error": {"code": "X"}}),
        # values a host language's equality confuses, which JSON deep equality tells apart
        ("a tool/result rewrite may not change isError false into 0", with_block(isError=0)),
        ("a tool/result rewrite may not change the turn 1 into true", {**short, "turn": True}),
        ("a tool/result rewrite may not add a null field: absent is not null", {**short, "error": None}),
        ("a tool/result rewrite may not replace the message by a string", {**short, "message": "short"}),
    ]
    for name, data in changes:
        yield case(
            name,
            RULE,
            [*setup(), Step(rewrite(data), str(Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT)), state()],
        )


TAGGED: Final[JsonObject] = {**ORIGINAL, "meta": {"tags": ["a", "b"]}}  # a result whose meta holds an array


def meta_cases() -> Cases:
    """A result whose meta holds an array and an object: a rewrite must keep both exactly, and JSON
    deep equality tells every difference of shape apart, however alike a host language finds them."""
    setup_tagged = [
        ok("create", id="s"),
        turn(),
        append(msg.assistant(calls=["c1"])),
        append(TAGGED),
        append(msg.user("u2")),
    ]
    short = msg.rewritten(TAGGED, "short")
    yield case(
        "a tool/result rewrite may keep the original's meta array and object exactly",
        RULE,
        [*setup_tagged, Step(rewrite(short), OK), state()],
    )
    big: JsonObject = {"tags": [f"t{n}" for n in range(300)], "fields": {f"k{n}": n for n in range(300)}}
    big_setup = [*setup_tagged[:3], append({**TAGGED, "meta": big})]
    yield case(
        "a tool/result rewrite may keep an array and an object of hundreds of entries exactly",
        RULE,
        [*big_setup, append(msg.user("u2")), Step(rewrite({**short, "meta": big}), OK)],
        comment="300 items and 300 keys: lengths compared by identity would differ",
    )
    changes: list[tuple[str, JsonValue]] = [
        ("a tool/result rewrite may not add an item to an array in data", {"tags": ["a", "b", "c"]}),
        ("a tool/result rewrite may not drop the last item of an array in data", {"tags": ["a"]}),
        (
            "a tool/result rewrite may not turn an array in data into a string of as many characters",
            {"tags": "ab"},
        ),
        (
            "a tool/result rewrite may not rename a key in data, even keeping its value",
            {"labels": ["a", "b"]},
        ),
    ]
    for name, meta in changes:
        yield case(
            name,
            RULE,
            [
                *setup_tagged,
                Step(rewrite({**short, "meta": meta}), str(Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT)),
                state(),
            ],
        )
    yield case(
        "a tool/result rewrite may not turn an object in data into a number",
        RULE,
        [
            *setup_tagged,
            Step(rewrite({**short, "meta": 2}), str(Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT)),
            state(),
        ],
    )


def unshaped_cases() -> Cases:
    """A live append judges no message shape, so a result whose message content is not an array can
    be in the log; the rewrite rule still compares the two results around the first block's inner
    content, whatever the content is."""
    odd = with_message(content={"text": "a long tool output"})
    yield case(
        "a tool/result whose message content is an object may be rewritten by an equal one",
        RULE,
        [
            ok("create", id="s"),
            turn(),
            append(msg.assistant(calls=["c1"])),
            append(odd, type="tool/result", surfaceOp="append"),
            Step(rewrite(odd), OK),
        ],
        comment="with no first block to set aside, the two results compare whole and are equal",
    )


cases: Final = chained(allowed_cases, target_cases, changed_cases, meta_cases, unshaped_cases)
