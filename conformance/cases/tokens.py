"""tokens: pricing the surface and following its price in O(1) per event
(notes/dsh-compaction-projection §3, §7).

Covers the heuristic price of every surface node, and the shadow-price fold: a metering event arms
a claim on the range it prices, the replace over that range takes its price minus the claim, any
other log-only event lets the claim expire, and a replace over another range is refused.
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import APPEND, Cases, chained, event, log, pure, replace, with_seq
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

PRICE = "spec.tokens.price_surface"
FOLD = "spec.tokens.fold_shadow_price"

CLAIM: Final[JsonObject] = {"start": 2, "end": 2, "tokens": 30}  # what the metering event below arms
METERING: Final = event(
    5,
    "compaction/prune",
    {"shadowedRange": {"start": 2, "end": 2}, "shadowedSeqs": [2], "shadowedTokenCount": 30},
)
REPLACING: Final = event(
    6, "tool/result", msg.result("c1", "short"), surfaceOp=replace(2, 2), sourceEventSeqs=[2]
)


def price_cases() -> Cases:
    events = log(
        msg.user("u1", "hello world"),
        msg.assistant("a1", None),
        msg.result("c1", "x" * 40),
        msg.assistant("a2", calls=["c9"]),
    )
    yield pure(
        "every surface node is priced by the message it shows; an empty assistant message costs 0",
        PRICE,
        why="every surface node is priced by the heuristic token estimate of the message it shows "
        "(notes/dsh-compaction-projection §3)",
        nodes=[0, 1, 2, 3],
        events=events,
    )
    for name, comment, nodes, corrupted in (
        ("a node that names no event of the log cannot be priced", None, [0, 9], events),
        ("a node one past the log's last event names no event and cannot be priced", None, [0, 4], events),
        *(
            (
                f"a node whose event says it is {where} seq cannot be priced",
                f"the event at index 1 says it is seq {said}",
                [1],
                with_seq(events, 1, said),
            )
            for said, where in ((0, "an earlier"), (5, "a later"))
        ),
    ):
        yield pure(
            name,
            PRICE,
            Code.TOKEN_SURFACE_CORRUPT,
            why="every surface node names the log event with that seq",
            comment=comment,
            nodes=nodes,
            events=corrupted,
        )
    yield pure(
        "a node deep in a long log is priced like the first ones",
        PRICE,
        nodes=[0, 299],
        events=log(*(msg.user(f"u{seq}", "m") for seq in range(300))),
        comment="seqs past the first few hundred name their events as the small ones do",
    )
    blocks: tuple[tuple[str, JsonValue], ...] = (
        ("four U+FFFF characters: one UTF-16 unit each", {"type": "text", "text": "\uffff" * 4}),
        ("four U+10000 characters: two UTF-16 units each", {"type": "text", "text": "\U00010000" * 4}),
        (
            "a tool call: its name and its arguments, each rounded up",
            {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": "{}"},
        ),
        (
            "a tool call whose arguments are not a string: its JSON",
            {"type": "tool-call", "id": "c2", "name": "read", "arguments": {"path": "a"}},
        ),
        (
            "an image with a call's name and arguments: its JSON",
            {"type": "image", "name": "read", "arguments": "{}"},
        ),
        (
            "an unknown block with a call's name and arguments: its JSON",
            {"type": "zzz", "name": "read", "arguments": "{}"},
        ),
        ("an image with a text: its JSON", {"type": "image", "text": "hello there"}),
        (
            "an image with inner content: its JSON",
            {"type": "image", "content": [{"type": "text", "text": "hello there"}]},
        ),
        (
            "an unknown block with inner content: its JSON",
            {"type": "zzz", "content": [{"type": "text", "text": "hello there"}]},
        ),
        (
            "a tool result whose content is not an array: its JSON",
            {"type": "tool-result", "content": "hello there"},
        ),
    )
    yield pure(
        "each block is priced by the rule of its type, and a block of another shape by its JSON text",
        PRICE,
        why="a text or reasoning block costs its text, a tool-call its name and arguments each rounded up, a "
        "tool-result its inner content, any other block (or one whose fields have other types) its JSON text; "
        "each plus 4 (notes/dsh-compaction-projection §3)",
        comment="node by node: " + "; ".join(name for name, _ in blocks),
        nodes=list(range(len(blocks))),
        events=log(
            *(
                ("user/message", {**msg.user(f"u{n}"), "content": [block]}, APPEND)
                for n, (_, block) in enumerate(blocks)
            )
        ),
    )

    shows_nothing: tuple[tuple[str, str, JsonValue], ...] = (
        ("a plugin event whose data looks like a user message", "x/note", msg.user("u9", "hello there")),
        ("a plugin event whose data holds a message", "x/note", {"message": msg.user("u9", "hello there")}),
        ("a plugin event sorting before every message type", "a/note", {"message": msg.user("u9", "hi")}),
    )
    yield pure(
        "a node whose event is of no message type shows the model nothing and costs 0",
        PRICE,
        why="every surface node is priced by the heuristic token estimate of the message it shows "
        "(notes/dsh-compaction-projection §3)",
        comment="node by node: " + "; ".join(name for name, _, _ in shows_nothing),
        nodes=[0, 1, 2],
        events=log(*((kind, data) for _, kind, data in shows_nothing)),
    )
    empty_result = msg.result("c1", "x")
    message = empty_result["message"]
    assert isinstance(message, dict)
    yield pure(
        "a tool result whose message has no content still shows that message and costs it",
        PRICE,
        why="only an assistant/message with empty content shows nothing (it only hosts usage); a tool/result "
        "shows its data.message (notes/dsh-session-core §2.6)",
        nodes=[0, 1],
        events=log(
            ("tool/result", {**empty_result, "message": {**message, "content": []}}, APPEND),
            msg.assistant("a1", None),
        ),
    )


def claim_cases() -> Cases:
    yield pure(
        "a metering event arms a claim on its range",
        FOLD,
        why="a metering event (compaction/prune or compaction/summary) arms a claim on the range it prices",
        claim=None,
        event=METERING,
    )
    broken = event(5, "compaction/summary", {"shadowedRange": {"start": 2}, "shadowedTokenCount": 30})
    yield pure(
        "a metering event without a usable range arms nothing",
        FOLD,
        why="only a metering event whose shadowedRange has a start and an end arms a claim",
        comment="its shadowedRange has no end",
        claim=None,
        event=broken,
    )
    for name, data in (
        ("whose shadowedRange is not an object", {"shadowedRange": [2, 2], "shadowedTokenCount": 30}),
        (
            "whose shadowedTokenCount is not an integer",
            {"shadowedRange": {"start": 2, "end": 2}, "shadowedTokenCount": 1.5},
        ),
    ):
        yield pure(
            f"a metering event {name} arms nothing",
            FOLD,
            why="only a metering event whose shadowedRange is a pair of seqs and whose shadowedTokenCount is a safe "
            "integer arms a claim",
            claim=None,
            event=event(5, "compaction/summary", data),
        )
    yield pure(
        "any other log-only event lets the claim expire",
        FOLD,
        why="a claim lives only until the next event: a metering event comes immediately before its replace",
        claim=CLAIM,
        event=event(6, "custom/x", {}),
    )
    yield pure(
        "a message event without a surfaceOp is log-only: the claim expires and nothing is priced",
        FOLD,
        why="a surface event has an eligible type and carries its surfaceOp marker (notes/dsh-session-core §3.11)",
        claim=CLAIM,
        event=event(6, "user/message", msg.user("u9", "hello there")),
    )


def replace_cases() -> Cases:
    yield pure(
        "an appended surface event adds its price",
        FOLD,
        why="a surface append adds its own price and clears the claim",
        claim=CLAIM,
        event=event(6, "user/message", msg.user(), surfaceOp="append"),
    )
    yield pure(
        "a replace over the claimed range adds its price minus the claim",
        FOLD,
        why="a replace whose range equals the claim's adds its own price minus the tokens it shadows",
        claim=CLAIM,
        event=REPLACING,
    )
    yield pure(
        "a replace with no claim adds nothing (legacy drift)",
        FOLD,
        why="a replace with no armed claim adds 0",
        comment="a log from before metering has replaces without a metering event: the fold tolerates them "
        "and its count drifts",
        claim=None,
        event=REPLACING,
    )
    yield pure(
        "a replace over another range than the claim is rejected",
        FOLD,
        Code.TOKEN_SHADOW_PRICE_MISMATCH,
        why="a replace over a range other than the armed claim's is a corrupt metering",
        claim={**CLAIM, "start": 1},
        event=REPLACING,
    )
    yield pure(
        "a replace over a range before the claim's is rejected too",
        FOLD,
        Code.TOKEN_SHADOW_PRICE_MISMATCH,
        why="a replace over a range other than the armed claim's is a corrupt metering",
        comment="the claim covers seq 3, the replace seq 2",
        claim={**CLAIM, "start": 3, "end": 3},
        event=REPLACING,
    )


cases: Final = chained(price_cases, claim_cases, replace_cases)
