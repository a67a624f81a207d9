"""prune: tool-result pruning (SPEC-DECISIONS D8; notes/dsh-compaction-projection §6).

Covers the configuration (defaults, unknown keys, and head + marker + tail within the threshold),
what pruning does to one result's content (head and tail kept in code points, the marker between,
non-text blocks kept in place), the configurations under which it refuses, and the session pass
that plans a metering event and a replacement for every oversized tool/result on the surface.
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import APPEND, Cases, chained, log, pure
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

DECODE = "spec.prune.decode_prune_config"
CONTENT = "spec.prune.plan_pruned_content"
EVENTS = "spec.prune.plan_prune_events"

SMALL: Final[JsonObject] = {"thresholdChars": 60, "headChars": 10, "tailChars": 10}
DIGITS: Final = "".join(str(i % 10) for i in range(100))  # 100 code points, each one's position readable
FITS: Final = (
    "thresholdChars is a positive integer, headChars and tailChars non-negative integers, and head + "
    "marker (39 code points) + tail fits within the threshold (notes §6.1)"
)


def _result_holding(message_id: str, call: str, content: JsonValue) -> JsonObject:
    """A tool/result's data answering ``call`` whose message content is ``content`` as given, a
    block list or not (for the candidates the session pass skips)."""
    source: JsonObject = {"kind": "tool", "callId": call}
    message: JsonObject = {"id": message_id, "role": "user", "source": source, "content": content}
    return {"turn": 1, "step": 1, "message": message}


def config_cases() -> Cases:
    for name, why, comment, config in (
        ("a null configuration takes the defaults", None, None, None),
        ("missing keys take their defaults", None, None, {"tailChars": 100}),
        (
            "a key whose value is null takes its default",
            None,
            None,
            {"thresholdChars": None, "tailChars": 100},
        ),
        (
            "head, marker and tail may exactly fill the threshold",
            FITS,
            "10 + 39 + 10 = 59",
            {"thresholdChars": 59, "headChars": 10, "tailChars": 10},
        ),
        (
            "a marker alone may fill the threshold: no head, no tail",
            FITS,
            "0 + 39 + 0 = 39",
            {"thresholdChars": 39, "headChars": 0, "tailChars": 0},
        ),
    ):
        yield pure(name, DECODE, why=why, comment=comment, config=config)


def bad_config_cases() -> Cases:
    for name, config, why in [
        ("an unknown configuration key is rejected", {"maxChars": 5}, None),
        ("a threshold of 0 is rejected", {"thresholdChars": 0, "headChars": 0, "tailChars": 0}, FITS),
        ("a negative headChars is rejected", {"headChars": -1}, FITS),
        ("a fractional tailChars is rejected", {"tailChars": 1.5}, FITS),
        ("a headChars that is a string is rejected", {"headChars": "10"}, FITS),
        (
            "head, marker and tail larger than the threshold are rejected",
            {"thresholdChars": 58, "headChars": 10, "tailChars": 10},
            FITS,
        ),
        ("a small threshold with the default head and tail is rejected", {"thresholdChars": 100}, FITS),
        ("a configuration that is not an object is rejected", [], None),
        ("a thresholdChars that is a string is rejected", {"thresholdChars": "100"}, FITS),
        (
            "head, marker and tail one over the threshold are rejected, whatever their bits",
            {"thresholdChars": 43, "headChars": 2, "tailChars": 3},
            FITS,
        ),
    ]:
        yield pure(name, DECODE, Code.PRUNE_CONFIG_INVALID, why=why, config=config)


def content_cases() -> Cases:
    yield pure(
        "content within the threshold is left alone",
        CONTENT,
        blocks=[{"type": "text", "text": "x" * 60}],
        config=SMALL,
    )
    yield pure(
        "oversized content keeps its head and tail with the marker between",
        CONTENT,
        blocks=[{"type": "text", "text": DIGITS}],
        config=SMALL,
    )
    yield pure(
        "the cut spans text blocks: the first block it touches gets the marker and emptied blocks are dropped",
        CONTENT,
        blocks=[
            {"type": "text", "text": DIGITS[:30]},
            {"type": "text", "text": DIGITS[30:60]},
            {"type": "text", "text": DIGITS[60:]},
        ],
        config=SMALL,
    )
    yield pure(
        "blocks that are not text are kept in place and not measured",
        CONTENT,
        comment="a text block whose text is not a string counts as not text",
        blocks=[
            {"type": "image", "data": "x" * 500},
            {"type": "text", "text": DIGITS},
            {"type": "text", "text": 5},
        ],
        config=SMALL,
    )
    yield pure(
        "text is measured in code points: an astral character counts once",
        CONTENT,
        comment="61 code points (122 UTF-16 units): just over the threshold of 60",
        blocks=[{"type": "text", "text": "\U0001d11e" * 61}],
        config=SMALL,
    )

    for name, comment, lengths, config in (
        (
            "a pruned result exactly at the threshold is within it",
            "head 5 + marker 39 + tail 5 = 49 code points against a threshold of 49",
            (100,),
            {"thresholdChars": 49, "headChars": 5, "tailChars": 5},
        ),
        (
            "each text block after the first starts where the blocks before it end",
            "three blocks of 60: the third keeps its last 5 code points, not its first",
            (60, 60, 60),
            {"thresholdChars": 50, "headChars": 5, "tailChars": 5},
        ),
        (
            "a block that ends where the cut starts keeps its text whole and the next block carries the marker",
            None,
            (5, 100),
            {"thresholdChars": 50, "headChars": 5, "tailChars": 5},
        ),
        (
            "a block that ends before the cut starts keeps its text whole, the next one the rest of the head",
            None,
            (2, 100),
            {"thresholdChars": 50, "headChars": 5, "tailChars": 5},
        ),
        (
            "a block inside the tail is kept whole",
            "the last block, 3 code points, lies inside the tail of 5",
            (100, 3),
            {"thresholdChars": 50, "headChars": 5, "tailChars": 5},
        ),
    ):
        yield pure(
            name,
            CONTENT,
            why="the global span [headChars, total - tailChars) is removed, each text block keeping what lies outside "
            "it, and the first block that meets the span carries the marker (notes §6.2)",
            comment=comment,
            blocks=_lettered(lengths),
            config=config,
        )


def _lettered(lengths: tuple[int, ...]) -> list[JsonValue]:
    """Text blocks of these lengths in code points, their letters running on across blocks (a-z, again)."""
    blocks: list[JsonValue] = []
    start = 0
    for length in lengths:
        blocks.append({"type": "text", "text": "".join(chr(97 + (start + n) % 26) for n in range(length))})
        start += length
    return blocks


def unmeasured_cases() -> Cases:
    """Only ``{type: "text", text: <string>}`` blocks are measured: a block of another type is kept
    and counts 0 code points, whatever text it carries (notes §6.2)."""
    yield pure(
        "blocks of other types are not measured, even when they carry a text",
        CONTENT,
        comment="the text block holds 50 code points against a threshold of 60; the image and the unknown "
        "block carry 100 each, and a bare string is no block: nothing is oversized, nothing is pruned",
        blocks=[
            {"type": "text", "text": DIGITS[:50]},
            {"type": "image", "text": DIGITS},
            {"type": "zzz", "text": DIGITS},
            "a bare string",
        ],
        config=SMALL,
    )
    yield pure(
        "a block of another type counts nothing toward the threshold, not less than nothing",
        CONTENT,
        comment="the text block holds 61 code points against a threshold of 60: over it, with or without the image",
        blocks=[{"type": "text", "text": DIGITS[:61]}, {"type": "image", "data": "AA=="}],
        config=SMALL,
    )


def refused_content_cases() -> Cases:
    no_span = (
        Code.PRUNE_SPAN_NOT_FOUND,
        "plan_pruned_content takes its configuration as given; only a valid one is sure to find a span",
    )
    not_smaller = (
        Code.PRUNE_NOT_SMALLER,
        "a pruned result must be smaller than before and within the threshold (notes §6.2)",
    )
    for name, (code, why), comment, blocks, (threshold, head, tail) in (
        (
            "a configuration whose head and tail cover everything finds no span to cut",
            no_span,
            "such a configuration fails decode_prune_config; this pins what the content rule does with it",
            [{"type": "text", "text": "abcdef"}],
            (1, 6, 6),
        ),
        (
            "a configuration that makes the result no smaller is refused",
            not_smaller,
            "an invalid configuration again: head + marker + tail is 59 code points, the text 25",
            [{"type": "text", "text": "x" * 25}],
            (10, 10, 10),
        ),
        (
            "a pruned result one past the threshold is refused, however much smaller, and a block of another type "
            "does not make it smaller",
            not_smaller,
            "head 5 + marker 39 + tail 5 = 49 code points against a threshold of 48; the image counts 0",
            [{"type": "image", "data": "AA=="}, *_lettered((100,))],
            (48, 5, 5),
        ),
        (
            "a cut that meets no block finds no span, though the blocks end and start at its edges",
            no_span,
            "head and tail of 10 over 20 code points: the span [10, 10) is empty; the blocks are 10, 5 and 5",
            _lettered((10, 5, 5)),
            (5, 10, 10),
        ),
    ):
        yield pure(
            name,
            CONTENT,
            code,
            why=why,
            comment=comment,
            blocks=blocks,
            config={"thresholdChars": threshold, "headChars": head, "tailChars": tail},
        )


def session_pass_cases() -> Cases:
    big = log(
        ("turn/start", {"turn": 1}),
        msg.assistant(calls=["c1", "c2"]),
        msg.result("c1", DIGITS),
        msg.result("c2", "small"),
        msg.user("u1", DIGITS),
    )
    yield pure(
        "every oversized tool/result on the surface gets a metering event and a replacement",
        EVENTS,
        comment="the user message is just as long, but only tool results are pruned",
        nodes=[1, 2, 3, 4],
        events=big,
        config=SMALL,
    )
    yield pure(
        "a tool/result that is not on the surface is not pruned",
        EVENTS,
        nodes=[1, 3, 4],
        events=big,
        config=SMALL,
    )
    yield pure("nothing is planned when every result is small", EVENTS, nodes=[1, 3], events=big, config=None)
    split = msg.result("c1", DIGITS[:40], more=[{"type": "text", "text": DIGITS[40:80]}])
    yield pure(
        "a tool/result is measured by all its text blocks: two within the threshold, together over it",
        EVENTS,
        comment="40 + 40 code points against a threshold of 60: neither block alone is oversized",
        nodes=[1, 2],
        events=log(("turn/start", {"turn": 1}), msg.assistant(calls=["c1"]), ("tool/result", split, APPEND)),
        config=SMALL,
    )
    carrying = {**msg.user("u1", "short"), "message": msg.result("c1", DIGITS)["message"]}
    odd = _result_holding("r", "c1", ["not a block"])
    skipped: list[tuple[str, str, str, JsonObject]] = [
        (
            "a user message whose data also holds an oversized tool result's message is not pruned",
            "only a tool/result is a candidate, whatever its data holds; user/message sorts after tool/result",
            "user/message",
            carrying,
        ),
        (
            "a tool/result whose first content entry is not a block is skipped",
            "a project choice: DSH would fail on it",
            "tool/result",
            odd,
        ),
    ]
    for name, comment, kind, data in skipped:
        yield pure(name, EVENTS, comment=comment, nodes=[0], events=log((kind, data, APPEND)), config=SMALL)
    looks_like_a_result: JsonValue = [
        {
            "type": "tool-result",
            "toolCallId": "c1",
            "isError": False,
            "content": [{"type": "text", "text": DIGITS}],
        }
    ]
    calling = msg.assistant()
    calling_message = calling["message"]
    assert isinstance(calling_message, dict)
    yield pure(
        "only tool/result events are pruned, even when another message holds a tool-result block",
        EVENTS,
        comment="the assistant and the user message each hold an oversized tool-result block: neither is a "
        "tool/result event, so neither is a candidate",
        nodes=[1, 2],
        events=log(
            ("turn/start", {"turn": 1}),
            (
                "assistant/message",
                {**calling, "message": {**calling_message, "content": looks_like_a_result}},
                APPEND,
            ),
            ("user/message", {**msg.user(), "content": looks_like_a_result}, APPEND),
        ),
        config=SMALL,
    )
    for name, nodes in (
        (
            "a node one past the log, or further, or before it, names no tool/result and is skipped",
            [1, 5, -1],
        ),
        ("a tool/result at seq 0 is a candidate like any other", [0]),
    ):
        yield pure(name, EVENTS, nodes=nodes, events=log(msg.result("c1", DIGITS)), config=SMALL)
    shapeless = _result_holding("r2", "c2", {"0": "x"})
    yield pure(
        "skipped candidates do not end the pass: the results after them are still pruned",
        EVENTS,
        comment="seq 2 is small, seq 3's content is not an array and seq 4's first entry is not a block: each "
        "is skipped, and the oversized seq 5 is pruned",
        nodes=[2, 3, 4, 5],
        events=log(
            ("turn/start", {"turn": 1}),
            msg.assistant(calls=["c1", "c2", "c3", "c4"]),
            msg.result("c1", "small"),
            ("tool/result", shapeless, APPEND),
            ("tool/result", odd, APPEND),
            msg.result("c4", DIGITS),
        ),
        config=SMALL,
    )
    yield pure(
        "the session pass validates its configuration",
        EVENTS,
        Code.PRUNE_CONFIG_INVALID,
        why=FITS,
        nodes=[],
        events=[],
        config={"thresholdChars": 1},
    )


cases: Final = chained(
    config_cases, bad_config_cases, content_cases, unmeasured_cases, refused_content_cases, session_pass_cases
)
