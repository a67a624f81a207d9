"""fork: a child log grown from a prefix of its parent (notes/dsh-session-core §7.1).

Covers the child's seed (the parent's log up to the boundary, then the end-seed marker), its
header (the lineage it inherits and what it does not), valid and invalid boundaries, the rules
that a fork never inherits half a turn nor an open compaction bracket, and the order of the request's checks (the child id,
live or stored, then the source, then the boundary).
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import (
    NOW,
    Cases,
    Step,
    append,
    case,
    chained,
    fails,
    gone,
    log,
    ok,
    replace,
    state,
    turn,
    turn_end,
)
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

SEED = "plan_fork_seed"
OPEN_TURN = "validate_boundary_outside_open_turn"
OPEN_COMPACTION = "validate_boundary_outside_open_compaction"
REQUEST = "validate_fork_request"


def fork(*boundary: JsonValue, code: Code | None = None) -> Step:
    """A fork of "p" into "c" (at ``boundary`` when one is given), meant to succeed or, given
    ``code``, to be rejected with it."""
    at: dict[str, JsonValue] = {"boundary": boundary[0]} if boundary else {}
    args: dict[str, JsonValue] = {"source": "p", **at, "child": "c"}
    return ok("fork", **args) if code is None else fails(code, "fork", **args)


def parent() -> list[Step]:
    """A session "p" with lineage meta and two events: user, assistant; then the clock moves on, so
    that a child's createdAt and end-seed time (now) differ from what the parent holds."""
    meta: JsonObject = {"cwd": "/work/p", "delegationDepth": 1, "origin": "subagent", "agentPreset": "coder"}
    return [
        ok("create", id="p", meta=meta),
        append(msg.user("u1"), "p"),
        append(msg.assistant("a1"), "p"),
        ok("clock", now=NOW + 1_000),
    ]


def in_turn() -> list[Step]:
    """A session "p" with turn 1 closed (seqs 0-3) and turn 2 open (seqs 4-5)."""
    return [
        ok("create", id="p"),
        turn(1, "p"),
        append(msg.user("u1"), "p"),
        append(msg.assistant("a1"), "p"),
        turn_end(1, "p"),
        turn(2, "p"),
        append(msg.user("u2"), "p"),
    ]


def child_cases() -> Cases:
    yield case(
        "a fork without a boundary inherits the whole log, names its parent and seed length, and adds the end-seed marker",
        SEED,
        [*parent(), fork(), state("c")],
    )
    yield case(
        "a child inherits cwd but not delegationDepth, origin or agentPreset",
        "derive_child_meta",
        [*parent(), fork()],
        why="a child inherits its parent's cwd; delegationDepth, origin and agentPreset are not inherited "
        "(notes/dsh-session-core §7.1 step 4)",
    )
    yield case(
        "a fork at boundary 0 inherits only the first event",
        SEED,
        [*parent(), fork(0)],
    )
    yield case(
        "the parent is unchanged by a fork",
        SEED,
        [*parent(), fork(0), state("p")],
    )
    yield case(
        "a fork mints the child id when none is given",
        "plan_session_id",
        [*parent(), ok("fork", source="p"), ok("fork", source="p", child=None)],
        comment="child null means 'not passed', as an absent child does",
    )
    yield case(
        "a fork of an empty session has an empty seed and seedLength 0",
        SEED,
        [ok("create", id="p"), fork()],
    )
    yield case(
        "forking a fork inherits its end-seed marker and adds no second one",
        "needs_end_seed",
        [*parent(), fork(), ok("fork", source="c", child="g")],
    )
    yield case(
        "a child is a live session that can be appended to",
        "append_event",
        [*parent(), fork(), append(msg.user("u2"), "c"), state("c"), state("p")],
        why="a fork's child is a live session of its own: its appends change the child alone",
        comment="the last step shows the parent did not gain the child's event",
    )


def boundary_cases() -> Cases:
    why = "a fork boundary is an event seq that names an event of the source log"
    invalid: list[tuple[str, JsonValue]] = [
        ("a negative boundary is invalid", -1),
        ("a fractional boundary is invalid", 0.5),
        ("a boundary that is a string is invalid", "1"),
        ("a boundary of null is invalid", None),
        ("a boundary of true is invalid", True),
        ("a boundary past the last event is invalid", 2),
        ("a boundary far past the last event is invalid", 7),
    ]
    for name, boundary in invalid:
        yield case(
            name,
            SEED,
            [*parent(), fork(boundary, code=Code.INVALID_BOUNDARY), gone("c")],
            why=why,
        )
    yield case(
        "any boundary of an empty session is invalid",
        SEED,
        [ok("create", id="p"), fork(0, code=Code.INVALID_BOUNDARY)],
        why=why,
    )
    yield case(
        "a boundary past the end of a log of one event is invalid",
        SEED,
        [ok("create", id="p", seed=[]), fork(1, code=Code.INVALID_BOUNDARY)],
        why=why,
        comment="an empty seed leaves the end-seed marker alone at seq 0: the log's only event is also its last",
    )
    long_seed = log(*[("custom/x", {})] * 259)
    yield case(
        "a fork of a log of 260 events at boundary 258 inherits 259 of them",
        SEED,
        [ok("create", id="p", seed=long_seed), fork(258)],
        comment="a seed of 259 events and its end-seed marker; seqs above 256 are compared by value",
    )


def open_turn_cases() -> Cases:
    yield case(
        "a boundary inside an open turn is rejected",
        OPEN_TURN,
        [*in_turn(), fork(1, code=Code.OPEN_TURN)],
        comment="turn 1 ends at seq 3, but a child cut at seq 1 would inherit it open",
    )
    yield case(
        "a boundary at a turn/start is inside that turn",
        OPEN_TURN,
        [*in_turn(), fork(4, code=Code.OPEN_TURN)],
        comment="seq 4 is turn 2's turn/start",
    )
    yield case(
        "a boundary at a turn/end is outside the turn",
        OPEN_TURN,
        [*in_turn(), fork(3)],
        comment="seq 3 is turn 1's turn/end",
    )
    yield case(
        "a fork without a boundary of a log that ends inside a turn is rejected",
        OPEN_TURN,
        [*in_turn(), fork(code=Code.OPEN_TURN)],
    )


def bracketed() -> list[Step]:
    """A session "p" created from a seed: turn 1 (seqs 0-2), then a standalone compaction bracket
    (seqs 3-6: start, summary, checkpoint, end) between turns; its end-seed is seq 7."""
    start = {"compactionId": "k1", "turn": None}
    summary = {**start, "shadowedRange": {"start": 1, "end": 1}, "shadowedSeqs": [1], "shadowedTokenCount": 9}
    checkpoint = {**msg.user("ck"), "source": {"kind": "plugin", "plugin": "compact", "compactionId": "k1"}}
    seed = log(
        ("turn/start", {"turn": 1}),
        msg.user(),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("compaction/start", start),
        ("compaction/summary", summary),
        ("user/message", checkpoint, {"surfaceOp": replace(1, 1), "sourceEventSeqs": [1]}),
        ("compaction/end", start),
    )
    return [ok("create", id="p", seed=seed)]


def open_compaction_cases() -> Cases:
    yield case(
        "a boundary inside a standalone compaction bracket is rejected",
        OPEN_COMPACTION,
        [*bracketed(), fork(4, code=Code.OPEN_COMPACTION), gone("c")],
        comment="seq 4 lies between the bracket's start (3) and its end (6): the child would inherit it open",
    )
    yield case(
        "a boundary at a compaction/start is inside that compaction",
        OPEN_COMPACTION,
        [*bracketed(), fork(3, code=Code.OPEN_COMPACTION)],
    )
    yield case(
        "a boundary at a compaction/end is outside the compaction",
        OPEN_COMPACTION,
        [*bracketed(), fork(6)],
    )
    yield case(
        "a fork without a boundary of a log that ends inside a compaction is rejected",
        OPEN_COMPACTION,
        [
            ok("create", id="p"),
            append(msg.user("u1"), "p"),
            ok("engine_append", id="p", type="compaction/start", data={"compactionId": "k1", "turn": None}),
            fork(code=Code.OPEN_COMPACTION),
        ],
        comment="the compaction engine is still at work on p: its bracket is the session's live lock",
    )
    yield case(
        "a boundary inside a compaction inside a turn is an open turn",
        OPEN_TURN,
        [
            ok(
                "create",
                id="p",
                seed=log(
                    ("turn/start", {"turn": 1}),
                    ("compaction/start", {"compactionId": "k1", "turn": 1}),
                    ("compaction/end", {"compactionId": "k1", "turn": 1, "error": "x"}),
                    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
                ),
            ),
            fork(1, code=Code.OPEN_TURN),
        ],
        comment="the open turn is checked first; its compaction is inside it",
    )
    yield case(
        "a compaction left open before a session/end-seed does not block a fork",
        OPEN_COMPACTION,
        [
            ok(
                "create",
                id="p",
                seed=log(
                    ("compaction/start", {"compactionId": "k1", "turn": None}), ("session/end-seed", {})
                ),
            ),
            fork(),
        ],
        comment="the marker made it a stale orphan of an earlier lifecycle (a DSH v0 resume leaves these): "
        "it is no live lock, so the fork is allowed and the checker reports the orphan",
    )


def request_cases() -> Cases:
    yield case(
        "a fork of a session that is not live is rejected",
        REQUEST,
        [fails(Code.SESSION_NOT_FOUND, "fork", source="nope", child="c")],
    )
    yield case(
        "a fork into a live id is rejected",
        REQUEST,
        [*parent(), ok("create", id="c"), fork(code=Code.SESSION_ALREADY_EXISTS), state("c")],
    )
    yield case(
        "a stored child id is rejected before the boundary is looked at",
        REQUEST,
        [
            ok("create", id="c", meta={"cwd": "/work/c"}),
            ok("close", id="c"),
            *parent(),
            fork(7, code=Code.SESSION_ALREADY_EXISTS),
            ok("read", id="c"),
        ],
        storage="memory",
        why="a given child id must be free, neither live nor stored, and that is checked before the "
        "boundary (the seed: the child-id check comes before the boundary check)",
        comment="c is stored, not live; boundary 7 does not exist, so a store that looks at the boundary "
        "first answers INVALID_BOUNDARY",
    )
    yield case(
        "a stored child id is rejected before the source is looked up",
        REQUEST,
        [
            ok("create", id="c"),
            ok("close", id="c"),
            fails(Code.SESSION_ALREADY_EXISTS, "fork", source="nope", child="c"),
        ],
        storage="memory",
    )
    yield case(
        "a live child id is rejected before the source is looked up",
        REQUEST,
        [ok("create", id="c"), fails(Code.SESSION_ALREADY_EXISTS, "fork", source="nope", child="c")],
        comment="the source does not exist either; the child id is checked first",
    )


def judged_seed_cases() -> Cases:
    """A live append does not judge a message's shape (the harness wrote it), but a child's seed is
    judged entry by entry, its messages included, however much of it the fold takes at once
    (notes/dsh-session-core §1.4, §4.2 step 2)."""
    unidentified: JsonObject = {"role": "user", "content": [], "source": {"kind": "user"}}
    for where, before in (("first", []), ("second", [append(msg.user("u1"), "p")])):
        yield case(
            f"a fork whose seed's {where} entry is a message without an id is refused",
            "validate_message_shape",
            [
                ok("create", id="p"),
                *before,
                append(unidentified, "p", type="user/message", surfaceOp="append"),
                fails(Code.MESSAGE_UNIDENTIFIED, "fork", source="p", child="c"),
                gone("c"),
            ],
            comment="the parent's log holds the message as the live append took it",
        )


cases: Final = chained(
    child_cases, boundary_cases, open_turn_cases, open_compaction_cases, request_cases, judged_seed_cases
)
