"""surface: surface ops and the replace rule (notes/dsh-session-core §3.3-§3.5, §3.8-§3.10).

Covers which events may carry ``surfaceOp`` and ``sourceEventSeqs``, the shapes a surface op may
take, what an append and a replace do to the surface (``replaceGeneration`` included), the
replace rule (start and end on the surface right now, the start not after the end), and replaying
a whole log into its surface (``fold_surface``).
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import (
    Cases,
    Step,
    append,
    case,
    chained,
    fails,
    log,
    ok,
    pure,
    refused,
    replace,
    state,
    with_seq,
)
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

APPLY = "apply_surface_plan"
PLAN = "plan_replace"
READ = "read_surface_op"
FOLD = "spec.surface.fold_surface"

LOG_ONLY_RULE: Final = (
    "only user/message, assistant/message and tool/result join the surface; every other event carries "
    "neither surfaceOp nor sourceEventSeqs (notes/dsh-session-core §3.4)"
)
SURFACE_OP_RULE: Final = (
    "a user/message, assistant/message or tool/result says how it joins the surface: surfaceOp "
    '"append" or exactly {op: "replace", start, end} with event seqs (notes/dsh-session-core §3.4)'
)


def three_nodes() -> list[Step]:
    """A session "s" whose surface is [0, 1, 2]: user, assistant, user."""
    return [ok("create", id="s"), append(msg.user("u1")), append(msg.assistant("a1")), append(msg.user("u2"))]


def replace_user(start_seq: int, end_seq: int, sources: JsonValue, message_id: str = "summary") -> Step:
    """A user/message replacing ``start_seq``..``end_seq``, citing ``sources``."""
    return append(
        msg.user(message_id, "summary"),
        surfaceOp=replace(start_seq, end_seq),
        sourceEventSeqs=sources,
    )


def replace_cases() -> Cases:
    yield case(
        "a replace swaps a span of surface nodes for itself and counts one generation",
        APPLY,
        [*three_nodes(), replace_user(0, 1, [0, 1]), state()],
    )
    yield case(
        "a replace whose start equals its end swaps one node",
        APPLY,
        [*three_nodes(), replace_user(1, 1, [1]), state()],
    )
    yield case(
        "a replace may span a replacement node",
        APPLY,
        [*three_nodes(), replace_user(0, 1, [0, 1]), replace_user(3, 2, [2, 3], "summary-2"), state()],
        comment="the replacement (seq 3) stands where node 0 stood, before node 2: a start whose seq is "
        "larger than its end's is fine, since the order that counts is the surface's",
    )
    yield case(
        "an assistant/message may replace a span",
        APPLY,
        [
            *three_nodes(),
            append(msg.assistant("a2"), surfaceOp=replace(1, 2), sourceEventSeqs=[1, 2]),
            state(),
        ],
    )


def replace_rule_cases() -> Cases:
    yield case(
        "a shadowed node is no longer on the surface, so no replace can start at it",
        PLAN,
        [
            *three_nodes(),
            replace_user(0, 1, [0, 1]),
            refused(Code.REPLACE_START_NOT_FOUND, replace_user(0, 2, [0, 2])),
            state(),
        ],
    )
    yield case(
        "a replace whose start is not on the surface is rejected and changes nothing",
        PLAN,
        [*three_nodes(), refused(Code.REPLACE_START_NOT_FOUND, replace_user(9, 0, [0])), state()],
    )
    yield case(
        "a replace whose end is not on the surface is rejected",
        PLAN,
        [*three_nodes(), refused(Code.REPLACE_END_NOT_FOUND, replace_user(0, 9, [0]))],
    )
    yield case(
        "a replace whose start and end are both missing is refused for its start",
        PLAN,
        [*three_nodes(), refused(Code.REPLACE_START_NOT_FOUND, replace_user(8, 9, [0]))],
        comment="both ends are wrong; the expected code says the start is checked first",
    )
    yield case(
        "a replace whose start comes after its end is rejected",
        PLAN,
        [*three_nodes(), refused(Code.REPLACE_INVERTED, replace_user(2, 0, [0, 1, 2])), state()],
        comment="it cites every node of the span, so the provenance rule has nothing to refuse",
    )


def log_only(code: Code, event_type: str, data: JsonObject, **keys: JsonValue) -> Step:
    """A log-only event appended to "s" with surface keys it may not carry, refused with ``code``."""
    return fails(code, "append", id="s", type=event_type, data=data, **keys)


def log_only_cases() -> Cases:
    yield case(
        "a log-only event cannot carry surfaceOp",
        READ,
        [
            ok("create", id="s"),
            log_only(Code.SURFACE_OP_ON_LOG_ONLY, "turn/start", {"turn": 1}, surfaceOp="append"),
        ],
        why=LOG_ONLY_RULE,
    )
    yield case(
        "a log-only event cannot carry sourceEventSeqs",
        READ,
        [
            *three_nodes(),
            log_only(Code.PROVENANCE_ON_LOG_ONLY, "turn/start", {"turn": 1}, sourceEventSeqs=[0]),
        ],
        why=LOG_ONLY_RULE,
    )
    yield case(
        "a log-only event carrying both keys is refused for surfaceOp first",
        READ,
        [
            *three_nodes(),
            log_only(Code.SURFACE_OP_ON_LOG_ONLY, "todo/write", {}, surfaceOp="append", sourceEventSeqs=[0]),
        ],
        why=LOG_ONLY_RULE,
        comment="both keys are wrong; the expected code says surfaceOp is checked first",
    )
    for name, plugin_type, data in (
        ("a plugin's x-user/message is log-only and cannot carry surfaceOp", "x-user/message", msg.user()),
        ("a plugin's x-tool/result is log-only and cannot carry surfaceOp", "x-tool/result", msg.result()),
    ):
        yield case(
            name,
            READ,
            [
                ok("create", id="s"),
                log_only(Code.SURFACE_OP_ON_LOG_ONLY, plugin_type, data, surfaceOp="append"),
            ],
            why=LOG_ONLY_RULE,
            comment="its name ends like a surface type's, and its data is a message, but only the three "
            "surface types themselves may join the surface",
        )


def surface_op_cases() -> Cases:
    yield case(
        "tool/result may join the surface with surfaceOp append",
        READ,
        [ok("create", id="s"), append(msg.assistant(calls=["c1"])), append(msg.result("c1")), state()],
        why=SURFACE_OP_RULE,
    )
    for name, kind, data in [
        ("a surface-eligible event without surfaceOp is rejected", "user/message", msg.user()),
        ("a tool/result without surfaceOp is rejected", "tool/result", msg.result()),
    ]:
        yield case(
            name,
            READ,
            [ok("create", id="s"), refused(Code.SURFACE_OP_MISSING, append(data, type=kind))],
            why=SURFACE_OP_RULE,
        )
    yield from invalid_op_cases()
    yield from malformed_replace_cases()


def invalid_op_cases() -> Cases:
    invalid_ops: list[tuple[str, JsonValue]] = [
        ("surfaceOp null is not a surface op", None),
        ("surfaceOp 'prepend' is not a surface op", "prepend"),
        ("surfaceOp that is a number is not a surface op", 5),
        ("surfaceOp that is an array is not a surface op", ["append"]),
    ]
    for name, op in invalid_ops:
        invalid = refused(Code.SURFACE_OP_INVALID, append(msg.user(), surfaceOp=op))
        yield case(name, READ, [ok("create", id="s"), invalid, state()], why=SURFACE_OP_RULE)


def malformed_replace_cases() -> Cases:
    malformed: list[tuple[str, JsonValue]] = [
        ("a replace op without end is malformed", {"op": "replace", "start": 0}),
        ("a replace op with an extra key is malformed", {**replace(0, 0), "why": "x"}),
        ("a replace op whose op is not 'replace' is malformed", {"op": "swap", "start": 0, "end": 0}),
        (
            "a replace op whose op sorts before 'replace' is malformed too",
            {"op": "append", "start": 0, "end": 0},
        ),
        ("a replace op with a negative start is malformed", replace(-1, 0)),
        ("a replace op whose start is a string is malformed", {"op": "replace", "start": "0", "end": 0}),
        ("a replace op with a fractional end is malformed", {"op": "replace", "start": 0, "end": 0.5}),
    ]
    for name, op in malformed:
        bad = refused(Code.REPLACE_OP_INVALID, append(msg.user("x"), surfaceOp=op, sourceEventSeqs=[0]))
        yield case(name, READ, [*three_nodes(), bad], why=SURFACE_OP_RULE)


def fold_cases() -> Cases:
    yield pure(
        "folding a log replays appends and replaces into the surface",
        FOLD,
        events=log(
            msg.user("u1"),
            msg.assistant(),
            ("user/message", msg.user("sum"), {"surfaceOp": replace(0, 1), "sourceEventSeqs": [0, 1]}),
        ),
    )
    yield pure(
        "folding a log passes over its log-only events and goes on to the surface events after them",
        FOLD,
        events=log(
            ("turn/start", {"turn": 1}),
            msg.user("u1"),
            ("x/note", {"n": 1}),
            msg.assistant(),
            ("user/message", msg.user("sum"), {"surfaceOp": replace(1, 3), "sourceEventSeqs": [1, 3]}),
        ),
        comment="a turn start, a plugin note (seq 2) between the two messages: neither is a node, and the "
        "replace after them still folds",
    )
    yield pure(
        "a tool/result may rewrite the tool/result at seq 0",
        FOLD,
        events=log(
            ("tool/result", msg.result("c1", "a long output"), {"surfaceOp": "append"}),
            (
                "tool/result",
                msg.rewritten(msg.result("c1", "a long output"), "short"),
                {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]},
            ),
        ),
        comment="the first event of the log is the rewritten one: the rewrite rule finds it at position 0",
    )
    many = [msg.user(f"u{seq}", "m") for seq in range(300)]
    yield pure(
        "a surface of hundreds of nodes folds in order through replaces deep inside it",
        FOLD,
        events=log(
            *many,
            (
                "user/message",
                msg.user("s1", "sum"),
                {"surfaceOp": replace(260, 270), "sourceEventSeqs": list(range(260, 271))},
            ),
            (
                "user/message",
                msg.user("s2", "sum"),
                {"surfaceOp": replace(250, 300), "sourceEventSeqs": [*range(250, 260), 300]},
            ),
            msg.user("after"),
            (
                "user/message",
                msg.user("s3", "sum"),
                {"surfaceOp": replace(299, 302), "sourceEventSeqs": [299, 302]},
            ),
        ),
        comment="300 appended nodes, then a replace of seqs 260..270, one of 250 up to that replacement (now "
        "at position 250), an append, and a replace from the 300th node to the newest: positions past the "
        "first few hundred are looked up, spliced and listed like the first ones",
    )
    yield pure(
        "a log whose seqs skip a number does not fold",
        FOLD,
        Code.SEQ_NOT_CONTIGUOUS,
        events=with_seq(log(msg.user(), msg.assistant()), 1, 2),
    )
    yield pure(
        "a log must start at seq 0", FOLD, Code.SEQ_NOT_CONTIGUOUS, events=with_seq(log(msg.user()), 0, 1)
    )
    yield pure(
        "a log whose seq repeats does not fold",
        FOLD,
        Code.SEQ_NOT_CONTIGUOUS,
        events=with_seq(log(msg.user(), msg.assistant(), msg.user("u2")), 2, 1),
        comment="the third event says it is seq 1 again",
    )
    yield pure(
        "a seq written as an integral float is that seq",
        FOLD,
        events=with_seq(log(msg.user(), msg.assistant()), 1, 1.0),
        comment="1.0 is the number 1 (D5): the log folds",
    )
    yield pure(
        "a seq of true is not seq 1",
        FOLD,
        Code.SEQ_NOT_CONTIGUOUS,
        events=with_seq(log(msg.user(), msg.assistant()), 1, True),
        comment="a boolean is no number, though Python's True == 1",
    )


def lookup_cases() -> Cases:
    """A surface read by position after appends, replaces and a seed: the nodes and the messages a
    state shows follow each change in order (notes/dsh-session-core §3.8), whatever a reader keeps
    between two reads."""
    yield case(
        "the messages a second state shows follow the nodes appended since the first",
        APPLY,
        [
            ok("create", id="s"),
            append(msg.user("u1")),
            state(),
            append(msg.assistant("a1")),
            append(msg.user("u2")),
            state(),
        ],
    )
    yield case(
        "the messages a state shows after a replace follow the nodes appended since",
        APPLY,
        [
            ok("create", id="s"),
            append(msg.user("u1")),
            append(msg.assistant("a1")),
            replace_user(0, 1, [0, 1]),
            state(),
            append(msg.assistant("a2")),
            append(msg.user("u3")),
            state(),
        ],
    )
    yield case(
        "a node a replace left on the surface is found again by a later replace",
        PLAN,
        [*three_nodes(), replace_user(2, 2, [2], "s1"), replace_user(1, 1, [1], "s2"), state()],
        comment="the first replace leaves the assistant message at seq 1 in place; the second replaces it",
    )
    seeded = log(msg.user("u1"), msg.assistant("a1"), msg.user("u2"), msg.assistant("a2"))
    yield case(
        "a replace of the fourth node of a seeded surface shadows that node",
        PLAN,
        [ok("create", id="s", seed=seeded), replace_user(3, 3, [3]), state()],
    )


cases: Final = chained(
    replace_cases, replace_rule_cases, log_only_cases, surface_op_cases, fold_cases, lookup_cases
)
