"""pairing: where the surface may be cut without separating a tool call from its result
(notes/dsh-compaction-projection §2).

Covers balance as a counter over the current surface (a top-level tool-call block opens one call,
a tool/result closes one whatever call it names), the balance of every cut and of the cuts
either side of one node, and the surfaces no balance can be computed for (a node that names no
event, or the wrong one; an orphan result; a queried seq that is not on the surface).
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import APPEND, OK, Cases, chained, log, pure, with_seq
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

CUTS = "spec.pairing.derive_cut_balance"
BEFORE = "spec.pairing.is_balanced_before"
AFTER = "spec.pairing.is_balanced_after"

BALANCE: Final = (
    "a cut of the surface is balanced when no tool call is open across it: counting in surface order, "
    "each top-level tool-call block opens one call and each tool/result closes one "
    "(notes/dsh-compaction-projection §2.1)"
)
# user, an assistant calling c1 and c2, both results, a second assistant: surface [0, 1, 2, 3, 4]
EVENTS: Final = log(
    msg.user(), msg.assistant(calls=["c1", "c2"]), msg.result("c1"), msg.result("c2"), msg.assistant("a2")
)
NODES: Final = [0, 1, 2, 3, 4]


def cut_cases() -> Cases:
    yield pure(
        "a cut is balanced when no tool call is open across it", CUTS, why=BALANCE, nodes=NODES, events=EVENTS
    )
    yield pure(
        "the cut before a call's announcement is balanced",
        BEFORE,
        why=BALANCE,
        nodes=NODES,
        events=EVENTS,
        seq=1,
    )
    yield pure(
        "the cut before a pending result is not balanced",
        BEFORE,
        why=BALANCE,
        comment="c2's result (seq 3) is still pending just before it",
        nodes=NODES,
        events=EVENTS,
        seq=3,
    )
    yield pure(
        "the cut after the last result of a step is balanced",
        AFTER,
        why=BALANCE,
        nodes=NODES,
        events=EVENTS,
        seq=3,
    )
    yield pure(
        "the cut after an announcement is not balanced", AFTER, why=BALANCE, nodes=NODES, events=EVENTS, seq=1
    )
    yield pure("an empty surface has one balanced cut", CUTS, why=BALANCE, nodes=[], events=[])


def counting_cases() -> Cases:
    message: JsonObject = {
        "id": "a",
        "role": "assistant",
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "content": [{"type": "group", "content": [{"type": "tool-call", "id": "c1"}]}],
    }
    nested: JsonObject = {"turn": 1, "step": 1, "message": message}
    call_message = msg.assistant(calls=["c1"])
    tool_blocks: JsonValue = [{"type": "tool-use", "id": "c1"}, {"type": "text", "text": "hi"}]
    tool_like: JsonObject = {**nested, "message": {**message, "content": tool_blocks}}
    for name, comment, nodes, events in (
        (
            "a node that is neither an assistant message nor a tool result opens and closes nothing",
            "seq 0 is a step/start and seq 1 a custom event, named as nodes on purpose: both are neutral",
            [0, 1, 2],
            log(("step/start", {"turn": 1, "step": 1}), ("custom/x", {}), msg.user()),
        ),
        (
            "balance counts over the surface, not the log: shadowed nodes do not count",
            "the call and its results (seqs 1-3) are in the log but not on the surface [0, 4]",
            [0, 4],
            EVENTS,
        ),
        (
            "a tool/result closes one call whatever call it names",
            "zz answers neither c1 nor c2, yet each tool/result node closes one call (seq 2 is listed twice)",
            [1, 2, 2],
            log(msg.user(), msg.assistant(calls=["c1", "c2"]), msg.result("zz")),
        ),
        (
            "a node of another type opens nothing, even when its data holds an assistant message with a tool call",
            "seq 0 is a plugin event whose type sorts before assistant/message, seq 1 one that sorts after it",
            [0, 1, 2],
            log(("a/note", call_message), ("x/note", call_message), msg.user()),
        ),
        (
            "only a tool-call block opens a call: a block of another type with an id opens nothing",
            "a tool-use block (its type sorts after tool-call) and a text block",
            [0],
            log(("assistant/message", tool_like, APPEND)),
        ),
        (
            "a tool-call block nested inside another block opens nothing",
            None,
            [0],
            log(("assistant/message", nested, APPEND)),
        ),
    ):
        yield pure(name, CUTS, why=BALANCE, comment=comment, nodes=nodes, events=events)


def corrupt_cases() -> Cases:
    corrupt = Code.PAIRING_SURFACE_CORRUPT
    two = log(msg.user(), msg.user("u2"))
    for name, intent, comment, nodes, events in (
        ("a surface node must name an event of the log", corrupt, None, [0, 7], log(msg.user())),
        (
            "a surface node must name the event with that seq",
            corrupt,
            "the event at index 1 says it is seq 5",
            [0, 1],
            with_seq(two, 1, 5),
        ),
        (
            "a surface node must name the event with that seq, not one that says it is earlier",
            corrupt,
            "the event at index 1 says it is seq 0",
            [1],
            with_seq(two, 1, 0),
        ),
        (
            "a surface node one past the log's last event names no event",
            corrupt,
            None,
            [0, 1],
            log(msg.user()),
        ),
        (
            "a surface node deep in a long log names its event like the first ones",
            OK,
            None,
            [0, 299],
            log(*(msg.user(f"u{seq}", "m") for seq in range(300))),
        ),
    ):
        yield pure(
            name,
            CUTS,
            intent,
            why="every surface node names the log event with that seq",
            comment=comment,
            nodes=nodes,
            events=events,
        )
    yield pure(
        "a tool/result before any open call is an orphan",
        CUTS,
        Code.PAIRING_ORPHAN_RESULT,
        why="the count of open calls never goes below zero: a result needs a call open before it",
        nodes=[0],
        events=log(msg.result()),
    )


def query_cases() -> Cases:
    yield pure(
        "the cut before the first node is balanced",
        BEFORE,
        why=BALANCE,
        nodes=NODES,
        events=EVENTS,
        seq=0,
    )
    yield pure(
        "the cut after the last node is balanced once every call is answered",
        AFTER,
        why=BALANCE,
        nodes=NODES,
        events=EVENTS,
        seq=4,
    )
    yield pure(
        "a balance query must name a seq on the surface",
        BEFORE,
        Code.PAIRING_SEQ_NOT_ON_SURFACE,
        why="a balance query names a seq on the current surface",
        nodes=NODES,
        events=EVENTS,
        seq=9,
    )
    yield pure(
        "a shadowed node is not on the surface for a balance query",
        AFTER,
        Code.PAIRING_SEQ_NOT_ON_SURFACE,
        why="a balance query names a seq on the current surface (a node a replace removed is not)",
        nodes=[0, 4],
        events=EVENTS,
        seq=2,
    )
    yield pure(
        "the whole surface is checked before the queried seq",
        AFTER,
        Code.PAIRING_ORPHAN_RESULT,
        why="a balance query checks the whole surface first, then the queried seq",
        comment="seq 9 is not on the surface either; the orphan result at node 2 is found first",
        nodes=[2],
        events=EVENTS,
        seq=9,
    )


cases: Final = chained(cut_cases, counting_cases, corrupt_cases, query_cases)
