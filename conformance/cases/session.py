"""session: creating a session and appending to it (notes/dsh-session-core §4, §5).

Covers how a store names sessions (given ids, minted ids, one live session per id), what a new
session's log holds (the seed, the ``session/end-seed`` marker, ``firstLiveSeq``), and what an
append commits: the event type rule, the retired request-header vocabulary, the surface it joins,
the messages it derives, its time, that a rejected append changes nothing, and who may write
what (a caller never the end-seed, the compaction bracket or repair's closers; the compaction
engine its bracket, through ``engine_append``).
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import NOW, Cases, append, case, chained, fails, gone, log, ok, state, turn
from spec.codes import Code

CREATE = "create_session_state"
APPEND = "append_event"
MINT = "plan_session_id"
END_SEED = "needs_end_seed"
MESSAGES = "derive_session_messages"
EVENT_TYPE = "validate_event_type"
VOCABULARY = "validate_request_header_vocabulary"


def creation_cases() -> Cases:
    yield case(
        "a session created without a seed has an empty log and no end-seed marker",
        CREATE,
        [ok("create", id="s")],
    )
    yield case("a store mints session ids from its own counter", MINT, [ok("create"), ok("create")])
    yield case(
        "a minted id skips an id that is already live",
        MINT,
        [ok("create", id="session-1"), ok("create")],
        comment="the first minted id would be session-1, which the first create took by name",
    )
    yield case(
        "creating a session whose id is live is rejected",
        "validate_new_session_id",
        [
            ok("create", id="s"),
            append(msg.user()),
            fails(Code.SESSION_ALREADY_EXISTS, "create", id="s"),
            state(),
        ],
        comment="the final state shows the live session kept its event: the refused create replaced nothing",
    )
    yield case(
        "a session that is not live cannot be appended to or read",
        APPEND,
        [fails(Code.SESSION_NOT_FOUND, "append", id="nope", type="turn/start", data={}), gone("nope")],
        why="append and state name a live session (conformance/PROTOCOL.md)",
    )


def end_seed_cases() -> Cases:
    yield case(
        "a session created from an empty seed gets a session/end-seed marker at seq 0",
        END_SEED,
        [ok("create", id="s", seed=[], meta={"createdAt": 5})],
        comment="an empty seed is still a seed: the marker tells a reader that nothing was inherited; its "
        "time is the clock's, not the header's createdAt",
    )
    yield case(
        "a seed that already ends with session/end-seed gets no second marker",
        END_SEED,
        [ok("create", id="s", seed=log(msg.user(), ("session/end-seed", {})))],
    )
    yield case(
        "a seed that ends inside an open compaction bracket is rejected",
        "validate_end_seed_outside_open_compaction",
        [
            fails(
                Code.OPEN_COMPACTION,
                "create",
                id="s",
                seed=log(msg.user(), ("compaction/start", {"compactionId": "k1", "turn": None})),
            ),
            gone(),
        ],
        comment="the marker would leave the compaction/start dangling, never closed",
    )
    yield case(
        "a seed that ends after a compaction's end gets its marker",
        "validate_end_seed_outside_open_compaction",
        [
            ok(
                "create",
                id="s",
                seed=log(
                    msg.user(),
                    ("compaction/start", {"compactionId": "k1", "turn": None}),
                    ("compaction/end", {"compactionId": "k1", "turn": None, "error": "x"}),
                ),
            )
        ],
    )
    yield case(
        "a seed's events are inherited: firstLiveSeq is the seed's length and the marker follows it",
        CREATE,
        [ok("create", id="s", seed=log(msg.user(), msg.assistant())), append(msg.user("u2")), state()],
    )


def append_cases() -> Cases:
    yield case(
        "a log-only event joins the log but not the surface",
        APPEND,
        [ok("create", id="s"), turn(), state()],
        why="an event of a log-only type is logged and leaves the surface as it was (notes/dsh-session-core §3.8)",
    )
    yield case(
        "a user/message appended with surfaceOp append becomes a surface node and a message",
        APPEND,
        [ok("create", id="s"), append(msg.user()), state()],
        why="an append with surfaceOp append pushes its seq onto the surface, where a message event shows "
        "the model its message",
    )
    yield case(
        "an assistant/message with empty content is a surface node that derives no message",
        MESSAGES,
        [ok("create", id="s"), append(msg.user()), append(msg.assistant(text=None)), state()],
        comment="a usage-only provider response: on the surface (it can be replaced), invisible to the model",
    )
    yield case(
        "messages follow the surface order, one per node that derives one",
        MESSAGES,
        [
            ok("create", id="s"),
            append(msg.user("u1")),
            append(msg.assistant("a1", calls=["c1"])),
            append(msg.result("c1")),
            append(msg.user("u2")),
            state(),
        ],
    )
    yield case(
        "append does not check message shapes",
        "plan_event",
        [ok("create", id="s"), append({"anything": True}, type="user/message", surfaceOp="append"), state()],
        why="an append checks the type, the data's JSON domain, the vocabulary and the surface op, "
        "never the shape of a message (that is the seed's and the checker's rule)",
    )
    yield case(
        "a rejected append changes nothing and consumes no seq",
        APPEND,
        [
            ok("create", id="s"),
            append(msg.user()),
            fails(Code.EVENT_TYPE_INVALID, "append", id="s", type="", data={}),
            fails(Code.SURFACE_OP_MISSING, "append", id="s", type="user/message", data=msg.user("u2")),
            state(),
            turn(),
            state(),
        ],
        comment="the turn/start after two refusals gets seq 1: neither refusal took a seq",
    )


def event_type_cases() -> Cases:
    yield case(
        "an event of a type the specification does not know is accepted",
        EVENT_TYPE,
        [ok("create", id="s"), append({"x": 1}, type="custom/event"), state()],
    )
    yield case(
        "an empty event type is rejected",
        EVENT_TYPE,
        [ok("create", id="s"), fails(Code.EVENT_TYPE_INVALID, "append", id="s", type="", data={}), state()],
    )
    yield case(
        "an event type that is not a string is rejected",
        EVENT_TYPE,
        [ok("create", id="s"), fails(Code.EVENT_TYPE_INVALID, "append", id="s", type=5, data={})],
    )
    yield case(
        "an append without a type is rejected as an invalid event type",
        EVENT_TYPE,
        [ok("create", id="s"), fails(Code.EVENT_TYPE_INVALID, "append", id="s", data={})],
        comment="the protocol passes an absent type through to the rule, so this is the rule's code, "
        "not BAD_REQUEST",
    )


def vocabulary_cases() -> Cases:
    yield case(
        "request/header-delta is retired vocabulary and cannot be appended",
        VOCABULARY,
        [
            ok("create", id="s"),
            fails(Code.LEGACY_HEADER_DELTA, "append", id="s", type="request/header-delta", data={}),
            state(),
        ],
    )
    yield case(
        "a request/header with reason fallback is retired vocabulary and cannot be appended",
        VOCABULARY,
        [
            ok("create", id="s"),
            fails(
                Code.LEGACY_FALLBACK_REASON,
                "append",
                id="s",
                type="request/header",
                data={**msg.header(), "reason": "fallback"},
            ),
        ],
    )
    yield case(
        "a request/header with another reason is accepted",
        VOCABULARY,
        [ok("create", id="s"), append({**msg.header(), "reason": "initial"}, type="request/header")],
    )
    yield case(
        "only a request/header's reason fallback is retired: another reason, or another type saying fallback, is accepted",
        VOCABULARY,
        [
            ok("create", id="s"),
            append({**msg.header(), "reason": "compaction"}, type="request/header"),
            append({"reason": "fallback"}, type="a/custom"),
            append({"reason": "fallback"}, type="z/custom"),
            state(),
        ],
        comment="the reason and the types sort before and after fallback and request/header",
    )


WRITER_TYPE = "validate_writer_of_type"
WRITER_CLOSER = "validate_writer_of_closer"
START_K1 = {"compactionId": "k1", "turn": None}


def writer_cases() -> Cases:
    yield case(
        "session/end-seed cannot be appended: only the store writes it",
        WRITER_TYPE,
        [
            ok("create", id="s", seed=[]),
            append(msg.user()),
            fails(Code.STORE_ONLY_EVENT, "append", id="s", type="session/end-seed", data={}),
            fails(Code.STORE_ONLY_EVENT, "engine_append", id="s", type="session/end-seed", data={}),
            state(),
        ],
        comment="not even the compaction engine writes the marker; the state shows nothing was appended",
    )
    for kind, data in (
        ("compaction/start", START_K1),
        ("compaction/summary", {**START_K1, "shadowedSeqs": [0], "shadowedTokenCount": 1}),
        ("compaction/end", {**START_K1, "error": "x"}),
    ):
        yield case(
            f"{kind} cannot be appended by a caller",
            WRITER_TYPE,
            [
                ok("create", id="s"),
                append(msg.user()),
                fails(Code.STORE_ONLY_EVENT, "append", id="s", type=kind, data=data),
            ],
            comment="the compaction bracket is the engine's; a caller runs a compaction instead",
        )
    yield case(
        "the compaction engine writes its bracket through its own path",
        WRITER_TYPE,
        [
            ok("create", id="s"),
            append(msg.user()),
            ok("engine_append", id="s", type="compaction/start", data=START_K1),
            ok("engine_append", id="s", type="compaction/end", data={**START_K1, "error": "gave up"}),
            state(),
        ],
        comment="engine_append is the store's compaction engine; append is every other caller",
    )
    yield case(
        "an interrupted turn/end cannot be appended: it is crash repair's closer",
        WRITER_CLOSER,
        [
            ok("create", id="s"),
            turn(),
            fails(
                Code.REPAIR_CLOSER_RESERVED,
                "append",
                id="s",
                type="turn/end",
                data={"turn": 1, "reason": {"kind": "interrupted"}},
            ),
            append({"turn": 1, "reason": {"kind": "aborted"}}, type="turn/end"),
        ],
        comment="the same turn ends with another reason",
    )
    yield case(
        "a turn/end whose reason kind only sorts after interrupted is no closer and is appended",
        WRITER_CLOSER,
        [
            ok("create", id="s"),
            turn(),
            append({"turn": 1, "reason": {"kind": "timeout"}}, type="turn/end"),
            state(),
        ],
    )
    for code in ("TOOL_NOT_STARTED", "TOOL_OUTCOME_UNKNOWN"):
        yield case(
            f"a tool result with error code {code} cannot be appended: it is crash repair's closer",
            WRITER_CLOSER,
            [
                ok("create", id="s"),
                turn(),
                append(msg.assistant(calls=["c1"])),
                fails(
                    Code.REPAIR_CLOSER_RESERVED,
                    "append",
                    id="s",
                    type="tool/result",
                    data={**msg.result("c1"), "error": {"name": "E", "code": code}},
                    surfaceOp="append",
                ),
                append(msg.result("c1")),
            ],
        )
    closer_like = {"reason": {"kind": "interrupted"}, "error": {"name": "E", "code": "TOOL_NOT_STARTED"}}
    yield case(
        "an event of another type carrying a closer's reason or error code is appended: only the type makes a closer",
        WRITER_CLOSER,
        [
            ok("create", id="s"),
            append(closer_like, type="a/custom"),
            append(closer_like, type="z/custom"),
            append(closer_like, type="tp/custom"),
            state(),
        ],
        comment="the types sort before, after and between turn/end and tool/result: a closer is a turn/end "
        "or a tool/result by type, not by what its data says",
    )


def clock_cases() -> Cases:
    yield case(
        "an event's time is the clock's now when it is appended",
        APPEND,
        [ok("create", id="s"), turn(), ok("clock", now=NOW + 250), append(msg.user()), state()],
        why="an event's time is the clock's now at its append (the protocol's clock op)",
    )
    yield case(
        "createdAt defaults to the clock and may be given in meta",
        "build_header",
        [ok("create", id="s"), ok("create", id="t", meta={"createdAt": 42})],
        why="a header's createdAt is meta's createdAt when given, else now (SPEC-DECISIONS D1)",
    )


cases: Final = chained(
    creation_cases,
    end_seed_cases,
    append_cases,
    event_type_cases,
    vocabulary_cases,
    writer_cases,
    clock_cases,
)
