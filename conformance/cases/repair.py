"""repair: the synthetic closers that end what a crash left open, and resume
(notes/dsh-session-core §9; SPEC-DECISIONS D3 item 6).

Covers ``derive_closers`` on its own (a result per unanswered call, whether it started or not, in
announcement order; a compaction/end per open compaction; then step/end and turn/end; nothing for
a balanced log, or twice) and resume through the protocol: the closers and the end-seed marker
appended as new events, the stored header kept.
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import (
    CALL,
    NOW,
    S1,
    SEED_TIME,
    T1,
    Cases,
    Step,
    append,
    case,
    chained,
    event,
    fails,
    log,
    ok,
    pure,
    turn,
    turn_end,
    with_closers,
)
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

CLOSERS = "spec.repair.derive_closers"
RESUME = "create_session_state"

RESUME_RULE: Final = (
    "a resume appends, as new events, the closers of whatever the stored log leaves open, then "
    "session/end-seed unless the log already ends with one (SPEC-DECISIONS D3 item 6)"
)


def balanced_cases() -> Cases:
    yield pure("an empty log needs no closers", CLOSERS, events=[])
    yield pure(
        "a log with every turn closed needs no closers",
        CLOSERS,
        events=log(T1, msg.user(), ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})),
    )
    yield pure(
        "an open turn is closed by an interrupted turn/end that reuses the last event's time",
        CLOSERS,
        events=log(T1, ("user/message", msg.user(), {"surfaceOp": "append", "time": SEED_TIME + 500})),
        comment="the closers carry the time of the last event logged (1500, not the first event's 1000), "
        "not the clock at resume",
    )
    yield pure("an open step is closed before its turn", CLOSERS, events=log(T1, S1))
    broken = log(
        T1,
        S1,
        msg.assistant(calls=["c1", "c2"]),
        CALL,
        ("compaction/start", {"compactionId": "k1", "turn": 1}),
    )
    yield pure("a repaired log needs no more closers", CLOSERS, events=with_closers(broken))


def call_cases() -> Cases:
    yield pure(
        "a call announced but never started gets a TOOL_NOT_STARTED result",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c1"])),
    )
    yield pure(
        "a started call gets a TOOL_OUTCOME_UNKNOWN result that cites its tool/call",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c1"]), CALL),
        comment="a started call may have had effects, so its result says the outcome is unknown",
    )
    yield pure(
        "an answered call gets no closer",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c1"]), CALL, msg.result("c1")),
    )
    yield pure(
        "pending calls are closed in the order they were announced",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c2", "c1", "c3"]), CALL, msg.result("c3")),
        comment="c1 started and c3 was answered: the closers are c2's, then c1's, not sorted by id",
    )
    yield pure(
        "answering the first-sorting call leaves the others pending, in their order",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c2", "c1", "c3"]), msg.result("c1")),
    )
    yield pure(
        "a message holding only a tool-call block announces its call",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c1"], text=None)),
    )
    yield pure(
        "a call announced again after it started is pending once, as announced again",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c1"]), CALL, msg.assistant("a2", calls=["c1"])),
    )
    yield pure(
        "a step/end forgets the calls of its step",
        CLOSERS,
        events=log(T1, S1, msg.assistant(calls=["c1"]), ("step/end", {"turn": 1, "step": 1})),
        comment="calls may stay unanswered when their step ends; only the turn needs closing",
    )


def compaction_cases() -> Cases:
    yield pure(
        "an open compaction is closed after the call results and before the step and turn",
        CLOSERS,
        events=log(
            T1,
            S1,
            msg.assistant(calls=["c1"]),
            ("compaction/start", {"compactionId": "k1", "turn": 1, "sourceCommandId": "cmd"}),
        ),
    )
    two = (
        ("compaction/start", {"compactionId": "k1", "turn": None}),
        ("compaction/start", {"compactionId": "k2", "turn": None}),
    )
    yield pure(
        "two open compactions get a compaction/end each, in the order they opened", CLOSERS, events=log(*two)
    )
    for closed in ("k1", "k2"):
        yield pure(
            f"of two open compactions, the one whose compaction/end ({closed}) came stays closed",
            CLOSERS,
            events=log(*two, ("compaction/end", {"compactionId": closed, "turn": None, "error": "x"})),
        )
    yield pure(
        "an open compaction outside a turn gets its compaction/end alone",
        CLOSERS,
        events=log(("compaction/start", {"compactionId": "k1", "turn": None})),
    )
    yield pure(
        "an open compaction whose start has no turn is closed with turn null, not without one",
        CLOSERS,
        events=log(("compaction/start", {"compactionId": "k1"})),
        comment="the closer writes every field it carries: a key the start lacked is null, not left out",
    )
    yield pure(
        "an open compaction with no turn inside an open turn is closed with turn null before the turn/end",
        CLOSERS,
        events=log(T1, ("compaction/start", {"compactionId": "k1", "sourceCommandId": "cmd"})),
    )
    yield pure(
        "a compaction left open before a session/end-seed is a stale orphan and is never closed",
        CLOSERS,
        events=log(("compaction/start", {"compactionId": "k1", "turn": None}), ("session/end-seed", {})),
        comment="it was left open by an earlier lifecycle (a seed or a resume), which the marker ends",
    )
    ended: tuple[str, dict[str, object]] = ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    second: tuple[str, dict[str, object]] = ("turn/start", {"turn": 2})
    yield pure(
        "a compaction opened between turns and still open is closed before the open turn's end",
        CLOSERS,
        events=log(T1, ended, ("compaction/start", {"compactionId": "k1", "turn": None}), second),
        comment="a turn boundary sets the open turn afresh, but a compaction reaches across it",
    )
    yield pure(
        "a compaction opened and closed in earlier turns stays closed",
        CLOSERS,
        events=log(
            ("compaction/start", {"compactionId": "k1", "turn": None}),
            T1,
            ("compaction/end", {"compactionId": "k1", "turn": None}),
            ended,
            second,
        ),
    )
    yield pure(
        "a session/end-seed turns before the log's end orphans the compactions opened before it, not after",
        CLOSERS,
        events=log(
            ("compaction/start", {"compactionId": "k1", "turn": None}),
            ("session/end-seed", {}),
            ("compaction/start", {"compactionId": "k2", "turn": None}),
            T1,
            ended,
            second,
        ),
    )

    yield pure(
        "a compaction opened before the last turn start stays open through the messages after it",
        CLOSERS,
        events=log(
            ("compaction/start", {"compactionId": "k1", "turn": None}),
            T1,
            msg.user(),
            msg.assistant(),
            ("x/note", {}),
        ),
        comment="the events after the last turn boundary sort before and after session/end-seed: none is one",
    )
    yield pure(
        "a compaction started again under its id is open once, as started again, in its first place",
        CLOSERS,
        events=log(
            ("compaction/start", {"compactionId": "k1", "turn": None, "sourceCommandId": "first"}),
            ("compaction/start", {"compactionId": "k2", "turn": None}),
            ("compaction/start", {"compactionId": "k1", "turn": None, "sourceCommandId": "again"}),
        ),
    )
    yield pure(
        "a compaction whose id sorts before an open one's opens beside it",
        CLOSERS,
        events=log(
            ("compaction/start", {"compactionId": "k2", "turn": None}),
            ("compaction/start", {"compactionId": "k1", "turn": None}),
        ),
    )


def identity_cases() -> Cases:
    for name, call_id, answer in (
        (
            "a call id 1 is answered by a result for 1.0: ids are equal numbers, as a JavaScript Map keys them",
            1,
            1.0,
        ),
        ("a call id true is not answered by a result for 1", True, 1),
    ):
        yield pure(
            name,
            CLOSERS,
            events=log(
                T1,
                S1,
                ("assistant/message", _with_call_id(call_id), {"surfaceOp": "append"}),
                ("tool/result", _result_for(answer), {"surfaceOp": "append"}),
            ),
        )
    yield pure(
        "a block of another type beside a tool-call announces nothing, and a block that is no object is passed over",
        CLOSERS,
        events=log(
            T1,
            S1,
            (
                "assistant/message",
                _with_blocks("note", {"type": "zz-note", "id": "z1"}),
                {"surfaceOp": "append"},
            ),
            msg.result("c1"),
        ),
    )
    yield pure(
        "closers count on from the last event's seq, even in a log that does not start at 0",
        CLOSERS,
        events=[event(seq + 5, kind, data) for seq, (kind, data) in enumerate((T1, S1))],
    )
    yield pure(
        "closers after a last event whose seq is not a seq count on from the log's length",
        CLOSERS,
        events=[
            *log(T1),
            {"type": "step/start", "seq": "one", "time": 1000, "data": {"turn": 1, "step": 1}},
        ],
    )
    yield pure(
        "closers after a last event without a time are written at time 0",
        CLOSERS,
        events=[*log(T1), {"type": "step/start", "seq": 1, "data": {"turn": 1, "step": 1}}],
    )


def _with_call_id(call_id: JsonValue) -> JsonObject:
    data = msg.assistant(calls=["c1"])
    message = data["message"]
    assert isinstance(message, dict) and isinstance(message["content"], list)
    blocks: list[JsonValue] = [
        {**block, "id": call_id} if isinstance(block, dict) and block.get("type") == "tool-call" else block
        for block in message["content"]
    ]
    return {**data, "message": {**message, "content": blocks}}


def _result_for(call_id: JsonValue) -> JsonObject:
    data = msg.result("c1")
    message = data["message"]
    assert isinstance(message, dict) and isinstance(message["source"], dict)
    return {**data, "message": {**message, "source": {**message["source"], "callId": call_id}}}


def _with_blocks(*more: JsonValue) -> JsonObject:
    data = msg.assistant(calls=["c1"])
    message = data["message"]
    assert isinstance(message, dict) and isinstance(message["content"], list)
    return {**data, "message": {**message, "content": [*more, *message["content"]]}}


def closed_inside_a_turn() -> list[Step]:
    """A session "s" closed inside turn 1: a step open, and call c1 announced and started."""
    return [
        ok("create", id="s"),
        turn(),
        append({"turn": 1, "step": 1}, type="step/start"),
        append(msg.assistant(calls=["c1"])),
        append({"turn": 1, "step": 1, "callId": "c1", "name": "read"}, type="tool/call"),
        ok("close", id="s"),
    ]


def resume_cases() -> Cases:
    yield case(
        "resuming a log that ends inside a turn appends the closers durably, then the end-seed marker",
        RESUME,
        [
            *closed_inside_a_turn(),
            ok("clock", now=NOW + 5_000),
            ok("resume", id="s"),
            ok("read", id="s"),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
        why=RESUME_RULE,
        comment="the first read shows the closers durable at once; the marker is durable after the flush; "
        "the closers carry the last event's time, the marker the clock's",
    )
    yield case(
        "resuming a balanced log appends only the end-seed marker",
        RESUME,
        [
            ok("create", id="s"),
            turn(),
            append(msg.user()),
            turn_end(),
            ok("close", id="s"),
            ok("clock", now=NOW + 5_000),
            ok("resume", id="s"),
        ],
        storage="memory",
        why=RESUME_RULE,
    )
    yield case(
        "resuming a log that already ends with session/end-seed appends nothing",
        "needs_end_seed",
        [ok("create", id="s", seed=[]), ok("close", id="s"), ok("resume", id="s")],
        storage="memory",
    )
    lineage = {
        "createdAt": 7,
        "cwd": "/work/sub",
        "parentSession": "p",
        "seedLength": 2,
        "origin": "subagent",
        "delegationDepth": 2,
        "agentPreset": "coder",
    }
    yield case(
        "a resumed session keeps seedLength and delegationDepth as stored",
        RESUME,
        [
            ok("create", id="c", seed=log(T1, msg.user()), meta=lineage),
            append({"turn": 1, "reason": {"kind": "completed"}}, "c", type="turn/end"),
            append(msg.user("u2"), "c"),
            ok("close", id="c"),
            ok("clock", now=NOW + 5_000),
            ok("resume", id="c"),
        ],
        storage="memory",
        why="a resume takes over the stored header as it is; it is not a new session's header",
        comment="every lineage field differs from its default: delegationDepth 2 (a sub-agent's), seedLength 2 "
        "where the resumed firstLiveSeq is 5, createdAt 7 where the clock is later; a resume that drops the "
        "depth would let the sub-agent think it is at the top level (the resume/fork/compaction seed)",
    )
    for storage in ("memory", "file"):
        yield case(
            f"{storage} storage: resuming a log left inside a compaction closes it before the end-seed marker",
            RESUME,
            [
                ok("create", id="s"),
                append(msg.user()),
                ok(
                    "engine_append",
                    id="s",
                    type="compaction/start",
                    data={"compactionId": "k1", "turn": None},
                ),
                ok("close", id="s"),
                ok("resume", id="s"),
                ok("read", id="s"),
            ],
            storage=storage,
            why=RESUME_RULE,
            comment="the compaction engine stopped inside its bracket; the resume writes its compaction/end "
            "with an error, durably, so the end-seed never leaves the start dangling",
        )
    yield case(
        "file storage: resuming a log left inside a compaction whose start has no turn writes its end with turn null",
        RESUME,
        [
            ok("create", id="s"),
            append(msg.user()),
            ok("engine_append", id="s", type="compaction/start", data={"compactionId": "k1"}),
            ok("close", id="s"),
            ok("resume", id="s"),
            ok("read", id="s"),
        ],
        storage="file",
        why=RESUME_RULE,
    )
    yield from repeated_resume_cases()


def repeated_resume_cases() -> Cases:
    yield case(
        "resuming twice closes nothing twice",
        RESUME,
        [
            *closed_inside_a_turn(),
            ok("resume", id="s"),
            ok("close", id="s"),
            ok("resume", id="s"),
        ],
        storage="memory",
        why=RESUME_RULE,
        comment="after the first resume the log ends with the marker: the second appends nothing",
    )


def restarted_compaction_cases() -> Cases:
    yield pure(
        "a compaction started again replaces its own start and leaves the others open as they were",
        CLOSERS,
        events=log(
            T1,
            ("compaction/start", {"compactionId": "k2", "turn": 1}),
            ("compaction/start", {"compactionId": "k1", "turn": 1}),
            ("compaction/start", {"compactionId": "k2", "turn": 1, "note": "again"}),
        ),
        comment="k1 sorts before k2: only the start with k2's id is the one started again",
    )


def restored_message_cases() -> Cases:
    """A live append does not judge a message's shape (the harness wrote it); a resume restores
    the stored log as a seed, and a seed's messages are judged (notes/dsh-session-core §1.4, §4.2)."""
    unidentified = {"role": "user", "content": [], "source": {"kind": "user"}}
    for where, before in (("first", []), ("second", [turn()])):
        yield case(
            f"a message a live append let through without an id, the log's {where} event, is refused when "
            "its log is resumed",
            "validate_message_shape",
            [
                ok("create", id="s"),
                *before,
                append(unidentified, type="user/message", surfaceOp="append"),
                ok("close", id="s"),
                fails(Code.MESSAGE_UNIDENTIFIED, "resume", id="s"),
            ],
            storage="memory",
            comment="the memory store's log is restored rule by rule, every message judged",
        )


cases: Final = chained(
    balanced_cases,
    call_cases,
    compaction_cases,
    identity_cases,
    resume_cases,
    restored_message_cases,
    restarted_compaction_cases,
)
