"""checker: the whole-log checker (SPEC-DECISIONS D9).

Covers ``check_log`` on a well-formed log (no violations), one minimal log per rule id that breaks
exactly that rule (each case is named ``rule-id: sentence`` and pins the rule's own explanation,
from ``spec.checks.log.RULES``), and that every violation is reported, not only the first, with
the relational rules or without them.
"""

from __future__ import annotations

from typing import Any, Final

from conformance.cases import msg
from conformance.cases.build import (
    APPEND,
    CALL,
    S1,
    S1_END,
    SEED_TIME,
    T1,
    T1_END,
    Cases,
    PureCase,
    as_why,
    chained,
    event,
    log,
    pure,
    replace,
    with_closers,
    with_seq,
)
from spec.checks.log import RULES
from spec.log.json import JsonObject, JsonValue

CHECK = "spec.checker.check_log"

HEADER: Final[JsonObject] = {"version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0, "isSeeded": False}


def checked(rule_id: str, name: str, **inputs: Any) -> PureCase:
    """A log checked against the rule ``rule_id``: its why is the rule's explanation."""
    return pure(name, CHECK, why=as_why(RULES[rule_id]), **inputs)


def breaks(name: str, events: list[JsonValue], comment: str | None = None, **extra: Any) -> PureCase:
    """A log named ``rule-id: sentence`` that breaks that rule."""
    return checked(name.split(":")[0], name, comment=comment, events=events, **extra)


def with_seqs_from(first: int, events: list[JsonValue]) -> list[JsonValue]:
    """``events`` (objects numbered from 0) renumbered from ``first``: a log that goes on."""
    return [{**entry, "seq": first + n} for n, entry in enumerate(events) if isinstance(entry, dict)]


def clean_cases() -> Cases:
    clean = log(T1, S1, msg.user(), msg.assistant(calls=["c1"]), CALL, msg.result("c1"), S1_END, T1_END)
    yield pure("a well-formed log has no violations", CHECK, events=clean)
    yield pure("a well-formed log with its header has no violations", CHECK, events=clean, header=HEADER)


def core_rule_cases() -> Cases:
    yield breaks("seq-contiguous: a gap in the seqs is one violation", with_seq(log(T1, msg.user()), 1, 3))
    yield breaks(
        "envelope: an unknown envelope key is a violation", log(T1, ("custom/x", {}, {"extra": 1}), T1_END)
    )
    yield breaks(
        "message-shape: a message without an id is a violation",
        log(("user/message", {"role": "user", "source": {"kind": "user"}, "content": []}, APPEND)),
    )
    yield breaks("surface-op: a message without surfaceOp is a violation", log(("user/message", msg.user())))
    yield breaks(
        "surface-replace: a replace of a node not on the surface is a violation",
        log(
            msg.user(), ("user/message", msg.user("x"), {"surfaceOp": replace(5, 5), "sourceEventSeqs": [0]})
        ),
    )
    yield breaks(
        "provenance: citing a later event is a violation",
        log(msg.user(), ("user/message", msg.user("x"), {"surfaceOp": "append", "sourceEventSeqs": [7]})),
    )
    pruned = (
        "tool/result",
        msg.result("c1", "short", is_error=True),
        {"surfaceOp": replace(4, 4), "sourceEventSeqs": [4]},
    )
    metering = (
        "compaction/prune",
        {"shadowedRange": {"start": 4, "end": 4}, "shadowedSeqs": [4], "shadowedTokenCount": 9},
    )
    yield breaks(
        "tool-rewrite: a pruned result that changes isError is a violation",
        log(T1, S1, msg.assistant(calls=["c1"]), CALL, msg.result("c1"), metering, pruned, S1_END, T1_END),
    )


def core_edge_cases() -> Cases:
    """The replay's view of the events read so far (issue 26, the mutation survivors of
    check_core): a tool/result rewrite is compared with the event it shadows however that event
    was reached: the event just before it, one read after a gap, one read before a seq that went
    back; and a log longer than the small numbers a runtime may share (seqs compared by value)."""
    rewrite_of_4 = (
        "tool/result",
        msg.result("c1", "short"),
        {"surfaceOp": replace(4, 4), "sourceEventSeqs": [4]},
    )
    answered = log(T1, S1, msg.assistant(calls=["c1"]), CALL, msg.result("c1"), rewrite_of_4)
    why = "the core replay looks a shadowed node's event up by its seq among every event read so far (notes/dsh-session-core §4.2)"
    yield pure(
        "a result rewritten by the very next event is compared with that event",
        CHECK,
        why=why,
        comment="the rewrite at seq 5 shadows the result at seq 4, the last event read: it changes only content",
        events=answered,
        relational=False,
    )
    after_gap = with_seq(with_seq(answered, 4, 5), 5, 6)
    assert isinstance(after_gap[5], dict)
    after_gap[5] = {**after_gap[5], "surfaceOp": replace(5, 5), "sourceEventSeqs": [5]}
    yield pure(
        "a result read after a seq gap can be rewritten by the next event",
        CHECK,
        why=why,
        comment="the result is read at seq 5 where 4 was expected (one violation); the rewrite at seq 6 shadows it",
        events=after_gap,
        relational=False,
    )
    rewrite = answered[5]
    assert isinstance(rewrite, dict)
    went_back: list[JsonValue] = [*answered[:5], event(2, "todo/write", {"todos": []}), {**rewrite, "seq": 6}]
    yield pure(
        "a seq that goes back does not hide the later events from a rewrite",
        CHECK,
        why=why,
        comment="seq 2 read again after seq 4 is one violation, and seq 6 after it another; "
        "the rewrite at seq 6 still finds the result at seq 4",
        events=went_back,
        relational=False,
    )
    rewrite_of_0 = (
        "tool/result",
        msg.result("c1", "short"),
        {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]},
    )
    yield pure(
        "a result that is the log's first event can be rewritten by the next",
        CHECK,
        why=why,
        comment="seq 0 is read like every other seq (the pairing of the result is a relational rule, not checked here)",
        events=log(msg.result("c1"), rewrite_of_0),
        relational=False,
    )
    todo: tuple[str, JsonObject] = ("todo/write", {"todos": []})
    yield pure(
        "a log of 300 events is contiguous past every small number",
        CHECK,
        why="each event's seq is the one before it plus one, compared by value however large (notes/dsh-session-core §4.2)",
        events=log(T1, *[todo] * 298, T1_END),
    )


def turn_rule_cases() -> Cases:
    yield breaks(
        "turn-numbering: turns count from 1",
        log(("turn/start", {"turn": 2}), ("turn/end", {"turn": 2, "reason": {"kind": "completed"}})),
    )
    yield breaks("turn-open: a turn cannot start inside another", log(T1, ("turn/start", {"turn": 2})))
    yield breaks("turn-end: a turn/end needs its open turn", log(T1_END))
    yield breaks("step-open: a turn cannot end while a step is open", log(T1, S1, T1_END))
    yield breaks("step-in-turn: a step starts inside its turn", log(S1))
    yield breaks(
        "step-numbering: steps count from 1 in each turn", log(T1, ("step/start", {"turn": 1, "step": 2}))
    )
    yield breaks("step-scoped: an assistant message belongs to the open step", log(T1, msg.assistant()))
    yield breaks(
        "tool-result-pairing: an appended result answers a call started in its step",
        log(T1, S1, msg.assistant(calls=["c1"]), msg.result("c1"), S1_END, T1_END),
    )
    yield breaks("turn-enclosed: todo/write happens inside a turn", log(("todo/write", {"todos": []})))


def turn_edge_cases() -> Cases:
    """The turn and step rules at the edges their code draws (issue 26, the mutation survivors):
    numbering across two turns and two steps, a start while one is open, an end or a step naming
    another turn, events naming another step, crash repair's not-started result and its near
    misses, a result answered twice, and replaces and appends outside a turn or a step."""

    def turn(number: int, end: bool = False) -> tuple[str, JsonObject]:
        if end:
            return ("turn/end", {"turn": number, "reason": {"kind": "completed"}})
        return ("turn/start", {"turn": number})

    def step(number: int, end: bool = False, in_turn: int = 1) -> tuple[str, JsonObject]:
        return ("step/end" if end else "step/start", {"turn": in_turn, "step": number})

    yield breaks(
        "turn-numbering: a turn/start whose number is not an integer, with no turn open, leaves the count at 1",
        log(
            ("turn/start", {"turn": "x"}),
            ("turn/end", {"turn": "x", "reason": {"kind": "completed"}}),
            turn(2),
        ),
        comment="closing the unnumbered turn counts it: the next turn is 2, and only the unnumbered one is wrong",
    )
    yield checked(
        "turn-enclosed",
        "turn-enclosed: an assistant/message replace outside any turn is no execution record",
        events=log(msg.user(), ("assistant/message", msg.assistant("a9"), {"surfaceOp": replace(0, 0)})),
        comment="only a replacing tool/result and the execution records must be inside a turn",
    )
    paired = msg.result("c1")
    carrying: JsonObject = {"turn": 1, "step": 1, "message": {"source": {"kind": "tool", "callId": "c1"}}}
    yield checked(
        "tool-result-pairing",
        "tool-result-pairing: a call logged twice is pending, so its result pairs",
        events=log(T1, S1, CALL, CALL, paired),
        comment="the pending calls are a set: a second tool/call does not take the first one back",
    )
    yield breaks(
        "tool-result-pairing: a result for a call never logged, appended twice, is a violation each time",
        log(T1, S1, msg.result("c2"), msg.result("c2")),
        comment="an unpaired result answers nothing: it leaves no call behind for the next one",
    )
    yield breaks(
        "tool-result-pairing: an event of another type naming a callId logs no call",
        log(T1, S1, ("custom/x", {"turn": 1, "step": 1, "callId": "c1"}), paired),
    )
    for other in ("custom/x", "x/event"):
        yield checked(
            "tool-result-pairing",
            f"tool-result-pairing: an appended {other} carrying a tool message's callId answers no call",
            events=log(T1, S1, CALL, (other, carrying, APPEND), paired),
            comment="only an appended tool/result answers its call (types sorting before and after it)",
        )
    yield checked(
        "tool-result-pairing",
        "tool-result-pairing: a replacing tool/result answers no call, so a later appended one pairs",
        events=log(T1, S1, CALL, ("tool/result", msg.result("c1"), {"surfaceOp": replace(0, 0)}), paired),
    )
    yield checked(
        "turn-numbering",
        "two turns numbered 1 and 2 are clean",
        events=log(turn(1), turn(1, True), turn(2), turn(2, True)),
    )
    yield breaks("turn-numbering: a turn number skipped is a violation", log(turn(1), turn(1, True), turn(3)))
    yield breaks(
        "turn-open: a turn/start inside turn 1 counts turn 1 closed, so it is turn 2",
        log(turn(1), turn(2), turn(2, True), turn(3)),
    )
    yield breaks(
        "turn-end: a turn/end naming another turn than the open one is a violation",
        log(turn(1), turn(2, True)),
    )
    yield checked(
        "step-numbering",
        "two steps numbered 1 and 2 are clean",
        events=log(turn(1), step(1), step(1, True), step(2), step(2, True), turn(1, True)),
    )
    yield breaks(
        "step-numbering: a step number skipped is a violation", log(turn(1), step(1), step(1, True), step(3))
    )
    yield breaks(
        "step-open: a step/start inside step 1 counts step 1 closed, so it is step 2",
        log(turn(1), step(1), step(2), step(2, True), step(3)),
    )
    yield checked(
        "step-numbering",
        "steps count from 1 again in the second turn",
        events=log(
            turn(1),
            step(1),
            step(1, True),
            turn(1, True),
            turn(2),
            step(1, in_turn=2),
            step(1, True, 2),
            turn(2, True),
        ),
    )
    yield breaks(
        "step-in-turn: a step naming another turn than the open one is a violation",
        log(turn(1), step(1, in_turn=2)),
    )
    yield breaks(
        "turn-open: a turn/start inside turn 2 counts turn 2 closed, so it is turn 3",
        log(turn(1), turn(1, True), turn(2), turn(3)),
    )
    yield breaks(
        "step-open: a step/start inside step 2 counts step 2 closed, so it is step 3",
        log(turn(1), step(1), step(1, True), step(2), step(3)),
    )
    yield breaks(
        "turn-open: a turn/start inside a turn closes its open step too",
        log(turn(1), step(1), turn(2), step(1, in_turn=2)),
    )
    yield breaks(
        "step-open: a step/start inside a step drops that step's unanswered calls",
        log(turn(1), step(1), msg.assistant(calls=["c1"]), CALL, step(2), msg.result("c1", step=2)),
    )
    yield breaks(
        "turn-numbering: numbering goes on from the turn that was logged, even a wrong one",
        log(turn(1), turn(1, True), turn(5), turn(5, True), turn(6)),
    )
    yield breaks(
        "step-numbering: numbering goes on from the step that was logged, even a wrong one",
        log(turn(1), step(1), step(1, True), step(5), step(5, True), step(6)),
    )
    yield breaks(
        "step-scoped: an assistant message naming another step than the open one is a violation",
        log(turn(1), step(1), msg.assistant(step=2)),
    )
    yield breaks(
        "step-scoped: an assistant message naming another turn than the open one is a violation",
        log(turn(1), step(1), msg.assistant(turn=2)),
    )
    not_started_error: JsonObject = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}

    def answer(error: JsonValue, blocks: list[JsonValue] | None = None) -> tuple[str, JsonObject, JsonObject]:
        data = {**msg.result("zz", is_error=True), "error": error}
        message = data["message"]
        assert isinstance(message, dict)
        content: JsonObject = {} if blocks is None else {"content": blocks}
        return ("tool/result", {**data, "message": {**message, **content}}, APPEND)

    error_block: JsonObject = {"type": "tool-result", "toolCallId": "zz", "isError": True,
                               "content": [{"type": "text", "text": "result"}]}  # fmt: skip
    plain_block = {**error_block, "isError": False}
    for sentence, result in (
        ("crash repair's not-started result answers no call", answer(not_started_error)),
        (
            "a result whose first block is an error, its last not, can be crash repair's",
            answer(not_started_error, [error_block, plain_block]),
        ),
    ):
        yield checked(
            "tool-result-pairing", f"tool-result-pairing: {sentence}", events=log(turn(1), step(1), result)
        )
    for sentence, result in (
        (
            "a result whose isError is 1, not true, is no not-started result",
            answer(not_started_error, [{**error_block, "isError": 1}]),
        ),
        (
            "a result whose first block is not an error is no not-started result",
            answer(not_started_error, [plain_block, error_block]),
        ),
        (
            "a result with another error code is no not-started result",
            answer({**not_started_error, "code": "TOOL_OUTCOME_UNKNOWN"}),
        ),
        (
            "a result with an error code sorting first is no not-started result",
            answer({**not_started_error, "code": "TOOL_ABORTED"}),
        ),
        ("a result whose error is not an object is no not-started result", answer("TOOL_NOT_STARTED")),
        ("a result with no content is no not-started result", answer(not_started_error, [])),
    ):
        yield breaks(f"tool-result-pairing: {sentence}", log(turn(1), step(1), result))
    yield breaks(
        "tool-result-pairing: a call answered twice is answered once",
        log(turn(1), step(1), msg.assistant(calls=["c1"]), CALL, msg.result("c1"), msg.result("c1")),
    )
    yield checked(
        "tool-result-pairing",
        "tool-result-pairing: an event of an unknown type naming the open step is no result",
        events=log(turn(1), step(1), ("zz/x", {"turn": 1, "step": 1})),
    )
    yield breaks(
        "turn-enclosed: a tool/result replace outside a turn is a violation",
        log(
            msg.user(),
            (
                "compaction/prune",
                {"shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0], "shadowedTokenCount": 1},
            ),
            ("tool/result", msg.result("c1"), {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]}),
        ),
    )
    yield checked(
        "turn-enclosed",
        "turn-enclosed: only execution records and result replaces need a turn, not an assistant replace",
        events=log(
            msg.user(),
            ("assistant/message", msg.assistant("a9"), {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]}),
        ),
    )
    yield checked(
        "step-scoped",
        "step-scoped: an appended event of a custom type is not step-scoped",
        events=log(("custom/x", {}, APPEND)),
    )


def compaction_rule_cases() -> Cases:
    standalone = ("compaction/start", {"compactionId": "k1", "turn": None})
    yield breaks(
        "compaction-bracket: a compaction/end needs its start",
        log(("compaction/end", {"compactionId": "k1", "turn": None, "error": "x"})),
    )
    yield breaks("compaction-turn: a standalone compaction cannot run inside a turn", log(T1, standalone))
    empty_summary: JsonObject = {
        "compactionId": "k1",
        "turn": None,
        "shadowedSeqs": [],
        "shadowedTokenCount": 1,
    }
    yield breaks(
        "compaction-summary: a summary prices a non-empty span",
        log(standalone, ("compaction/summary", empty_summary)),
    )
    summary = {
        "compactionId": "k1",
        "turn": None,
        "shadowedRange": {"start": 0, "end": 0},
        "shadowedSeqs": [0],
        "shadowedTokenCount": 5,
    }
    checkpoint = {**msg.user("ck"), "source": {"kind": "plugin", "plugin": "compact", "compactionId": "k1"}}
    yield breaks(
        "compaction-checkpoint: a checkpoint replace belongs to an open compaction",
        log(
            msg.user(),
            ("compaction/summary", summary),
            ("user/message", checkpoint, {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]}),
        ),
    )
    yield breaks(
        "compaction-dangling: a compaction/start left open at a session/end-seed is a violation",
        log(msg.user(), standalone, ("session/end-seed", {})),
        comment="in a v4 log nothing explains it: a resume closes the bracket first, a fork or a seed refuses",
    )
    yield breaks(
        "legacy-compaction-dangling: in a DSH v0 log the same start is reported as legacy",
        log(msg.user(), standalone, ("session/end-seed", {})),
        formatVersion=0,
        comment="DSH 0.1's resume left open brackets for its end-seed to orphan; formatVersion names the "
        "format the log was stored in",
    )
    yield breaks(
        "compaction-dangling: a start the end-seed orphans is reported once, not at the turn/end before it",
        log(T1, ("compaction/start", {"compactionId": "k1", "turn": 1}), T1_END, ("session/end-seed", {})),
        comment="the end-seed makes the start an orphan, so the turn/end that crossed it is forgiven; "
        "only the dangling start is reported",
    )
    commanded: JsonObject = {"compactionId": "k1", "turn": None, "sourceCommandId": "cmd1"}
    for name, start, end in (
        (
            "compaction-bracket: a compaction/end with another compactionId is a violation",
            commanded,
            {**commanded, "compactionId": "k2"},
        ),
        (
            "compaction-bracket: a compaction/end with another sourceCommandId is a violation",
            commanded,
            {**commanded, "sourceCommandId": "cmd2"},
        ),
        (
            "compaction-bracket: a compaction/end naming a sourceCommandId its start lacks is a violation",
            {"compactionId": "k1", "turn": None},
            commanded,
        ),
        (
            "compaction-bracket: a compaction/end without its start's sourceCommandId is a violation",
            commanded,
            {"compactionId": "k1", "turn": None},
        ),
        (
            "compaction-bracket: an empty sourceCommandId is a violation",
            {**commanded, "sourceCommandId": ""},
            {**commanded, "sourceCommandId": ""},
        ),
    ):
        yield breaks(
            name,
            log(("compaction/start", start), ("compaction/end", {**end, "error": "x"})),
        )
    yield breaks(
        "shadow-price: a replace without its metering event is a violation",
        log(
            msg.user(), ("user/message", msg.user("x"), {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]})
        ),
    )


def lineage_rule_cases() -> Cases:
    interrupted = ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}, {"time": SEED_TIME + 1})
    yield breaks(
        "closers: an interrupted turn/end outside repair's closers is a violation",
        log(T1, msg.user(), interrupted),
    )
    yield checked(
        "closers",
        "closers: an event of another type that says what repair's closers say is not a closer",
        events=log(
            T1,
            msg.user(),
            ("custom/x", {"reason": {"kind": "interrupted"}, "error": {"code": "TOOL_NOT_STARTED"}}),
            T1_END,
        ),
        comment="only a turn/end is an interrupted turn end and only a tool/result is repair's answer to a call, "
        "whatever their data says",
    )
    yield breaks(
        "closers: an interrupted turn/end that opens the log is a violation",
        log(interrupted),
        comment="no turn was ever open, so no closer block can end here (pure-drt found the checker failing on it)",
    )
    forged = {
        **msg.result("c1"),
        "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"},
    }
    yield breaks(
        "closers: a result with repair's error code outside repair's closers is a violation",
        log(T1, S1, msg.assistant(calls=["c1"]), CALL, ("tool/result", forged, APPEND), S1_END, T1_END),
        comment="the call was answered by a caller pretending to be crash repair; the turn went on",
    )
    yield breaks(
        "seed-length: a seedLength past the log is a violation",
        log(msg.user()),
        header={
            "version": 4,
            "id": "s",
            "createdAt": 0,
            "seedLength": 5,
            "delegationDepth": 0,
            "isSeeded": True,
        },
    )
    seeded: JsonObject = {**HEADER, "parentSession": "p", "isSeeded": True}
    end_seed: tuple[str, JsonObject] = ("session/end-seed", {})
    for name, events in (
        ("a fork's child that appended nothing holds exactly seedLength events", log(msg.user(), end_seed)),
        (
            "a child whose seed is a whole turn and its end-seed holds exactly seedLength events",
            log(T1, msg.user(), T1_END, end_seed),
        ),
    ):
        yield checked(
            "seed-length",
            name,
            comment="seedLength counts events, so it may equal the log's length; it is not a seq in the log",
            events=events,
            header={**seeded, "seedLength": len(events)},
        )
    yield breaks(
        "seed-length: a seedLength one past the log's length is a violation",
        log(msg.user(), end_seed),
        header={**seeded, "seedLength": 3},
    )
    yield breaks(
        "end-seed: a seeded header promises a session/end-seed",
        log(msg.user()),
        header={**HEADER, "isSeeded": True},
    )
    yield breaks(
        "delegation-depth: a sub-agent's header at depth 0 is a violation",
        log(msg.user()),
        header={**HEADER, "origin": "subagent"},
        comment="what a resume that dropped the depth would leave: the sub-agent reads as top level",
    )


def lineage_edge_cases() -> Cases:
    """The closers and the header's lineage at the edges their code draws (issue 26, the mutation
    survivors): closer blocks of other lengths at other positions, the event the closers follow
    differing from the one before it, a stray interrupted turn/end with no turn open, seedLength
    below the log's length, an end-seed at seq 0 or only at the log's end, isSeeded as a number,
    and a sub-agent at depth 1."""
    later = {"time": SEED_TIME + 7}
    for name, events in (
        ("a turn closed right after its start", log(T1)),
        ("a step and its turn closed", log(T1, S1)),
        (
            "closers after an event later than the one before it",
            log(T1, S1, ("step/start", {"turn": 1, "step": 2}, later)),
        ),
        (
            "a turn/end alone after two events of different times",
            log(T1, msg.user(), ("user/message", msg.user("u2"), {**APPEND, **later})),
        ),
        (
            "a compaction, a step and a turn closed",
            log(T1, S1, ("compaction/start", {"compactionId": "k1", "turn": 1})),
        ),
        (
            "a compaction and its turn closed, no step open",
            log(T1, ("compaction/start", {"compactionId": "k1", "turn": 1})),
        ),
        (
            "two calls, their step and their turn closed",
            log(
                T1,
                S1,
                msg.assistant(calls=["c1", "c2"]),
                CALL,
                ("tool/call", {"turn": 1, "step": 1, "callId": "c2", "name": "read"}),
            ),
        ),
    ):
        yield checked("closers", f"closers: {name} passes the closers rule", events=with_closers(events))
    unnumbered = log(T1, S1, msg.user(), msg.assistant(calls=["c1"]), ("custom/x", {}), CALL)
    last = unnumbered[-1]
    assert isinstance(last, dict)
    unnumbered[-1] = {key: value for key, value in last.items() if key != "seq"}
    repaired = with_closers(unnumbered)
    yield checked(
        "closers",
        "closers: a block after an event with no seq starts one past that event's position, "
        "and the log goes on after it",
        comment="only seq-contiguous is broken; the closers at 6-8 are repair's, and turn 2 follows them",
        events=[*repaired, event(len(repaired), "turn/start", {"turn": 2})],
    )
    forged = {
        **msg.result("c2", turn=2),
        "error": {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"},
    }
    turn_2: list[tuple[Any, ...] | JsonObject] = [
        ("turn/start", {"turn": 2}),
        ("step/start", {"turn": 2, "step": 1}),
        msg.assistant("a2", calls=["c2"], turn=2),
        ("tool/call", {"turn": 2, "step": 1, "callId": "c2", "name": "read"}),
        ("tool/result", forged, APPEND),
        ("step/end", {"turn": 2, "step": 1}),
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
    ]
    repaired_turn = with_closers(log(T1, S1, msg.assistant(calls=["c1"]), CALL))
    yield breaks(
        "closers: a result with repair's error code in a turn after repair's closers is a violation",
        [*repaired_turn, *with_seqs_from(len(repaired_turn), log(*turn_2))],
        comment="the closers at 4-6 are repair's; the result at seq 11 only pretends to be",
    )
    first = with_closers(log(T1, msg.user(), msg.user("u2"), S1))
    turn_2_cut = log(
        ("turn/start", {"turn": 2}),
        ("step/start", {"turn": 2, "step": 1}),
        ("turn/end", {"turn": 2, "reason": {"kind": "interrupted"}}),
    )
    yield breaks(
        "closers: an interrupted turn/end with its step still open, after repair's closers, is a violation",
        [*first, *with_seqs_from(len(first), turn_2_cut)],
        comment="the closers at 4-5 are repair's; repair would have closed turn 2's step before its turn/end at seq 8",
    )
    interrupted = ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})
    yield breaks(
        "closers: an interrupted turn/end after a closed turn is a violation",
        log(T1, T1_END, interrupted),
    )
    seeded: JsonObject = {**HEADER, "parentSession": "p", "isSeeded": True}
    end_seed: tuple[str, JsonObject] = ("session/end-seed", {})
    yield checked(
        "seed-length",
        "a child that appended after its seed holds more events than seedLength",
        events=log(msg.user(), end_seed, msg.user("u2")),
        header={**seeded, "seedLength": 2},
    )
    yield checked(
        "end-seed",
        "a child whose seed was empty has its end-seed at seq 0",
        events=log(end_seed, msg.user("u2")),
        header={**seeded, "seedLength": 1},
    )
    for name, events, length in (
        (
            "end-seed: a seedLength of 0 needs the end-seed at seq 0, not at the log's end",
            log(msg.user(), end_seed),
            0,
        ),
        (
            "end-seed: a message where the end-seed should be is a violation",
            log(msg.user(), msg.user("u2")),
            1,
        ),
        (
            "end-seed: an assistant message where the end-seed should be is a violation",
            log(msg.assistant(), msg.user("u2")),
            1,
        ),
        (
            "end-seed: a seedLength equal to the log's length needs an end-seed at its end",
            log(msg.user(), msg.user("u2")),
            2,
        ),
    ):
        yield breaks(name, events, header={**seeded, "seedLength": length})
    yield checked(
        "end-seed",
        "isSeeded as the number 1 promises nothing",
        events=log(msg.user()),
        header={**HEADER, "isSeeded": 1},
    )
    for depth in (1, 2):
        yield checked(
            "delegation-depth",
            f"a sub-agent's header at depth {depth} is consistent",
            events=log(msg.user()),
            header={**HEADER, "origin": "subagent", "delegationDepth": depth},
        )


def reporting_cases() -> Cases:
    three_problems = log(T1_END, ("user/message", msg.user()), ("todo/write", {}))
    yield pure(
        "every problem is reported, not only the first",
        CHECK,
        why="the checker reports every violation it finds, with its rule id and seq (SPEC-DECISIONS D9)",
        events=three_problems,
    )
    yield pure(
        "without the relational rules only the core rules are checked",
        CHECK,
        why="relational false checks only the core rules, those a DSH session itself refuses",
        events=three_problems,
        relational=False,
    )
    call2 = ("tool/call", {"turn": 1, "step": 1, "callId": "c2", "name": "read"})
    nested = log(
        T1,
        S1,
        msg.assistant(calls=["c1", "c2"]),
        CALL,
        call2,
        ("compaction/start", {"compactionId": "k1", "turn": 1}),
    )
    yield checked(
        "closers",
        "closers deep in nesting (two calls, a compaction, a step, a turn) pass the closers rule",
        comment="the block is five closers long: two results, compaction/end, step/end, turn/end",
        events=with_closers(nested),
    )
    yield checked(
        "closers",
        "a log repaired with its closers passes the closers rule",
        comment="the interrupted turn/end here is repair's own, so the closers rule accepts it",
        events=with_closers(log(T1, S1, msg.assistant(calls=["c1"]), CALL)),
    )


def compaction_edge_cases() -> Cases:
    """The compaction rules at the edges their code draws (issue 26, the mutation survivors): which
    source makes a checkpoint, a turn/end's owner, one summary per bracket, the orphan a start
    becomes only at an end-seed, empty and non-string ids, a summary's range against its first and
    last seqs, and a replace with nothing before it."""
    start_k1: JsonObject = {"compactionId": "k1", "turn": None}
    replaced: JsonObject = {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]}
    for sentence, source in (
        ("a command source naming the compact plugin", {"kind": "command", "plugin": "compact"}),
        ("a plugin named after compact in sort order", {"kind": "plugin", "plugin": "compactor"}),
        ("a plugin named before compact in sort order", {"kind": "plugin", "plugin": "auto"}),
    ):
        message = {**msg.user("ck"), "source": {**source, "compactionId": "k1"}}
        yield breaks(
            f"shadow-price: {sentence} is not a checkpoint, so its replace is only unmetered",
            log(msg.user(), ("user/message", message, replaced)),
        )
    checkpoint_source = {"kind": "plugin", "plugin": "compact", "compactionId": "k1"}
    yield breaks(
        "shadow-price: only a user/message is a checkpoint, not an assistant message with its source",
        log(
            msg.user(), ("assistant/message", {**msg.assistant("a9"), "source": checkpoint_source}, replaced)
        ),
    )
    yield breaks(
        "compaction-turn: after its turn/end no turn is open, so a start naming that turn is outside it",
        log(T1, T1_END, ("compaction/start", {"compactionId": "k1", "turn": 1})),
    )
    summary: JsonObject = {**start_k1, "shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0],
                           "shadowedTokenCount": 5}  # fmt: skip
    end_k1: tuple[str, JsonObject] = ("compaction/end", start_k1)
    yield checked(
        "compaction-bracket",
        "a successful compaction with its one summary has no compaction violation",
        events=log(msg.user(), ("compaction/start", start_k1), ("compaction/summary", summary), end_k1),
    )
    yield breaks(
        "compaction-bracket: a second summary within one compaction is a violation",
        log(
            msg.user(),
            ("compaction/start", start_k1),
            ("compaction/summary", summary),
            ("compaction/summary", summary),
            end_k1,
        ),
    )
    turn_start = ("compaction/start", {"compactionId": "k1", "turn": 1})
    yield breaks(
        "compaction-turn: a turn/end crossing an open start is reported when no end-seed follows",
        log(T1, turn_start, T1_END),
    )
    yield breaks(
        "compaction-dangling: the start an end-seed orphans is the last start, not a later message",
        log(T1, turn_start, msg.assistant(), T1_END, ("session/end-seed", {})),
    )
    yield breaks(
        "compaction-turn: a closed compaction is no orphan of a later end-seed",
        log(
            ("compaction/start", start_k1),
            T1,
            ("compaction/end", {**start_k1, "error": "x"}),
            ("session/end-seed", {}),
        ),
    )
    for sentence, compaction_id in (("an empty", ""), ("a number as a", 5)):
        yield breaks(
            f"compaction-bracket: {sentence} compactionId is a violation",
            log(
                ("compaction/start", {"compactionId": compaction_id, "turn": None}),
                ("compaction/end", {"compactionId": compaction_id, "turn": None, "error": "x"}),
            ),
        )
    two_compacted = (msg.user(), msg.user("u2"), ("compaction/start", start_k1))  # a summary follows
    for sentence, seqs, shadowed in (
        ("an empty shadowedSeqs is reported, whatever its range", [], {"start": 0, "end": 0}),
        ("a range matching the first and last of two seqs is clean", [0, 1], {"start": 0, "end": 1}),
        ("a range ending before the last seq is a violation", [0, 1], {"start": 0, "end": 0}),
    ):
        wide = {**summary, "shadowedSeqs": seqs, "shadowedRange": shadowed}
        yield checked(
            "compaction-summary",
            f"compaction-summary: {sentence}",
            events=log(*two_compacted, ("compaction/summary", wide), end_k1),
        )
    yield checked(
        "compaction-checkpoint",
        "compaction-checkpoint: a user source naming the compact plugin is not a checkpoint",
        events=log(
            msg.user(),
            ("user/message", {**msg.user("ck"), "source": {"kind": "user", "plugin": "compact"}}, replaced),
        ),
    )
    yield checked(
        "compaction-checkpoint",
        "compaction-checkpoint: a checkpoint source on an event of an unknown type is no checkpoint",
        events=log(msg.user(), ("zz/custom", {**msg.user("ck"), "source": checkpoint_source}, replaced)),
    )
    yield breaks(
        "compaction-turn: a start naming another turn than the open one is a violation",
        log(T1, ("compaction/start", {"compactionId": "k1", "turn": 2})),
    )
    for sentence, events in (
        (
            "a start naming turn true is not turn 1",
            log(T1, ("compaction/start", {"compactionId": "k1", "turn": True})),
        ),
        (
            "a start naming an object as its turn never matches",
            log(T1, ("compaction/start", {"compactionId": "k1", "turn": {}})),
        ),
        (
            "a start naming turn 1.5 is not turn 1",
            log(T1, ("compaction/start", {"compactionId": "k1", "turn": 1.5})),
        ),
    ):
        yield breaks(f"compaction-turn: {sentence}", events)
    yield checked(
        "compaction-turn",
        "compaction-turn: a start naming turn 1.0 inside turn 1 matches it: numbers compare by value",
        events=log(T1, ("compaction/start", {"compactionId": "k1", "turn": 1.0})),
    )
    yield checked(
        "compaction-turn",
        "compaction-turn: a start naming turn true inside a turn started as true matches it",
        comment="true === true in JavaScript: a strict equality, not a number check",
        events=log(
            ("turn/start", {"turn": True}), ("compaction/start", {"compactionId": "k1", "turn": True})
        ),
    )
    yield breaks(
        "compaction-turn: a start is no orphan until an end-seed comes, whatever comes between",
        log(T1, turn_start, msg.assistant(), T1_END),
    )
    wide_summary: JsonObject = {**summary, "shadowedRange": {"start": 0, "end": 1}, "shadowedSeqs": [0, 1]}
    for sentence, op in (
        ("a replace of two nodes metered by its summary's range is clean", replace(0, 1)),
        ("a replace whose end is not its summary's range end is unmetered", replace(0, 0)),
    ):
        yield checked(
            "shadow-price",
            f"shadow-price: {sentence}",
            events=log(
                *two_compacted,
                ("compaction/summary", wide_summary),
                (
                    "user/message",
                    {**msg.user("ck"), "source": checkpoint_source},
                    {"surfaceOp": op, "sourceEventSeqs": [0, 1]},
                ),
                end_k1,
            ),
        )
    prune = (
        "compaction/prune",
        {"shadowedRange": {"start": 0, "end": 0}, "shadowedSeqs": [0], "shadowedTokenCount": 5},
    )
    yield breaks(
        "shadow-price: a tool/result replace after a compaction/summary is metered by the wrong kind",
        log(msg.user(), ("compaction/summary", summary), ("tool/result", msg.result("c1", "x"), replaced)),
    )
    yield breaks(
        "shadow-price: a user/message replace after a compaction/prune is metered by the wrong kind",
        log(msg.user(), prune, ("user/message", msg.user("x"), replaced)),
    )
    yield breaks(
        "shadow-price: an event that is no metering event does not meter, whatever range it carries",
        log(
            msg.user(),
            ("custom/x", {"shadowedRange": {"start": 0, "end": 0}}),
            ("user/message", msg.user("x"), replaced),
        ),
    )
    yield checked(
        "shadow-price",
        "shadow-price: a replace second in the log is metered by the first event",
        events=log(("compaction/summary", summary), ("user/message", msg.user("x"), replaced)),
    )
    yield breaks(
        "shadow-price: a replace that opens the log has nothing before it, whatever ends the log",
        log(
            ("user/message", msg.user("x"), replaced),
            ("compaction/start", start_k1),
            ("compaction/summary", summary),
        ),
    )

    for owner, open_turn in ((True, False), (False, True)):
        yield breaks(
            f"compaction-turn: a start naming turn {str(owner).lower()} is outside the open turn "
            f"{str(open_turn).lower()}",
            log(
                ("turn/start", {"turn": open_turn}),
                ("compaction/start", {"compactionId": "k1", "turn": owner}),
            ),
            comment="JavaScript's ===: true and false are two values; no ordering makes them equal",
        )


def order_edge_cases() -> Cases:
    """Rules whose code compares a type, a version or a position with another (issue 26, the
    mutation survivors): a log-only type that sorts before tool/result carrying a replace, a format
    version that is not v0's, a seedLength past 256 whose end-seed is missing."""
    yield breaks(
        "surface-op: a log-only event with a replace outside a turn is the surface rule's alone",
        log(msg.user(), ("custom/x", {}, {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]})),
        comment="custom/x sorts before tool/result; only a replacing tool/result must be turn-enclosed",
    )
    standalone = ("compaction/start", {"compactionId": "k1", "turn": None})
    yield breaks(
        "compaction-dangling: a start left open at the end-seed of a log of format -1 is not a v0 log's",
        log(msg.user(), standalone, ("session/end-seed", {})),
        formatVersion=-1,
        comment="only formatVersion 0 names DSH's v0 format",
    )
    many = 300
    yield checked(
        "end-seed",
        f"end-seed: a seedLength of {many}, the log's length, with no end-seed at {many - 1} is a violation",
        events=[event(seq, "custom/x", {}) for seq in range(many)],
        header={**HEADER, "seedLength": many, "isSeeded": True},
        comment="the end-seed may sit at seedLength - 1 or seedLength; the second is past the log's end",
    )


cases: Final = chained(
    clean_cases,
    core_rule_cases,
    core_edge_cases,
    turn_rule_cases,
    turn_edge_cases,
    compaction_rule_cases,
    compaction_edge_cases,
    lineage_rule_cases,
    lineage_edge_cases,
    reporting_cases,
    order_edge_cases,
)
