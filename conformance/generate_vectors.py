"""Generate the conformance vectors from the specification:
``python -m conformance.generate_vectors [--out DIR]``.

A vector is a case written as data: the requests to send and, for each, the outcome the
specification gives. This script holds the cases (a name that says the rule, the requests, and the
outcome the author means: success or a named code); the outcome written into each vector is
computed by running the requests through :class:`conformance.oracle.SpecOracle`, the protocol
answered by ``spec`` alone, and the script refuses to write a case whose computed outcome is not
the one its author meant. The clock is pinned and ids are fixed, so two runs write the same bytes;
``tests/test_vectors_fresh.py`` fails when the checked-in vectors differ from a fresh generation.

Every code of :mod:`spec.codes` appears in at least one vector, except those listed in
:data:`UNREACHABLE` (with the reason no request can provoke them) and :data:`NOT_YET_COVERED`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shutil
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from conformance.oracle import SpecOracle
from conformance.subject import InProcessSubject
from spec.checks.log import RULES
from spec.codes import Code
from spec.lineage.repair import derive_closers
from spec.log.json import JsonObject, JsonValue

VECTORS_DIR: Final = Path(__file__).resolve().parent / "vectors"
NOW: Final = 1_700_000_000_000  # ms: the pinned clock of every protocol vector
SEED_TIME: Final = 1_000  # ms: the time of hand-written seed and log events

FAMILIES: Final = (
    "session",
    "json",
    "header",
    "surface",
    "provenance",
    "tool-rewrite",
    "seed",
    "fork",
    "repair",
    "storage",
    "pairing",
    "prune",
    "tokens",
    "checker",
)

UNREACHABLE: Final[Mapping[Code, str]] = {
    Code.SURFACE_METADATA_NOT_JSON: "surfaceOp and sourceEventSeqs arrive as JSON, and an absent key means "
    "'not passed'; no request carries a value outside the lossless domain (D5 keeps -0 and unsafe integers "
    "out of vectors)",
    Code.SEED_NOT_JSON: "seed entries arrive as JSON; no request carries a value outside the lossless domain",
    Code.HEADER_NOT_JSON: "meta arrives as JSON and the header keeps only its known fields; no request carries "
    "a value outside the lossless domain",
    Code.SESSION_NOT_LIVE: "a question of object identity (a stale session object); the protocol names sessions "
    "by id",
    Code.LOCKED: "needs a second writer (another store or process) on the same storage; the protocol drives "
    "one store",
    Code.SESSION_CLOSED: "a closed persistence handle; the protocol's close releases the session, after which "
    "its id answers SESSION_NOT_FOUND",
}

_COMPACTION_REASON: Final = (
    "summary compaction, pressure compaction and spill (spec/shrink/compaction.py, spec/shrink/bracket.py, spec/shrink/pressure.py, "
    "spec/shrink/spill.py) have no protocol op or pure function in protocol version 1; add them to the call table, then "
    "vectors here"
)
_PROJECTION_REASON: Final = (
    "projections (spec/projections/units.py) register Python callables, which the protocol cannot carry; a "
    "projection op in a later protocol version would reach them"
)
_RUNTIME_REASON: Final = (
    "an outcome of the agent loop's runtime (cancellation, a summarizer's timeout, a spill store, a "
    "checkpoint before a tool), not a rule a session op can break; the protocol has no such runtime"
)

NOT_YET_COVERED: Final[Mapping[Code, str]] = {
    **dict.fromkeys(
        (
            Code.COMPACTION_CONFIG_INVALID,
            Code.COMPACTION_SURFACE_MISMATCH,
            Code.COMPACTION_BUSY,
            Code.COMPACTION_SUMMARY_NOT_SMALLER,
            Code.COMPACTION_SURFACE_CHANGED,
            Code.COMPACTION_RANGE_INVALID,
            Code.COMPACTION_NO_OPEN_TURN,
            Code.COMPACTION_SUMMARY_UNSUPPORTED_CONTENT,
            Code.COMPACTION_SUMMARY_EMPTY,
            Code.SPILL_CONFIG_INVALID,
            Code.PRUNE_OUTSIDE_TURN,
            Code.COMPACTION_SUMMARY_FAILED,
            Code.COMPACTION_COMMIT_FAILED,
            Code.COMPACTION_PERSISTENCE_FAILED,
            Code.COMPACTION_STILL_ABOVE_THRESHOLD,
            Code.COMPACTION_NO_CAPACITY,
        ),
        _COMPACTION_REASON,
    ),
    **dict.fromkeys(
        (Code.PROJECTION_UNIT_INVALID, Code.PROJECTION_VERSION_CONFLICT, Code.PROJECTION_STATE_INVALID),
        _PROJECTION_REASON,
    ),
    **dict.fromkeys(
        (
            Code.ABORTED,
            Code.COMPACTION_SUMMARY_TIMEOUT,
            Code.SPILL_NOT_FOUND,
            Code.DURABILITY_CHECKPOINT_FAILED,
        ),
        _RUNTIME_REASON,
    ),
}

PROTOCOL_CODES: Final = frozenset({"UNSUPPORTED_OP", "BAD_REQUEST", "CRASHED", "INTERNAL"})
OK: Final = "ok"

# --- cases -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One request and what its author means it to do: ``OK`` or a code."""

    request: JsonObject
    intent: str


@dataclass(frozen=True)
class Case:
    """A protocol vector: requests in order, run on a fresh subject (the first is a ``reset``)."""

    family: str
    name: str
    rule: str
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class PureCase:
    """A pure-function vector: one ``call``."""

    family: str
    name: str
    rule: str
    input: JsonObject
    intent: str


def ok(op: str, **args: Any) -> Step:
    return Step({"op": op, **args}, OK)


def fails(code: Code, op: str, **args: Any) -> Step:
    return Step({"op": op, **args}, str(code))


def start(storage: str = "none", compressed: bool | None = None) -> list[Step]:
    """The opening of every protocol vector: a fresh store, and the clock pinned."""
    reset: JsonObject = {} if storage == "none" else {"storage": storage}
    if compressed is not None:
        reset["compressed"] = compressed
    return [ok("reset", **reset), ok("clock", now=NOW)]


def case(
    family: str,
    name: str,
    rule: str,
    steps: Sequence[Step],
    storage: str = "none",
    compressed: bool | None = None,
) -> Case:
    return Case(family, name, rule, (*start(storage, compressed), *steps))


def pure(family: str, name: str, rule: str, intent: Code | str = OK, **inputs: Any) -> PureCase:
    return PureCase(family, name, rule, dict(inputs), str(intent))


# --- payloads --------------------------------------------------------------------------------------


def user_msg(message_id: str = "u1", text: str = "hello") -> JsonObject:
    """A user/message's data: the message itself."""
    return {
        "id": message_id,
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": text}],
    }


def assistant_msg(
    message_id: str = "a1", text: str | None = "hi", calls: Sequence[str] = (), turn: int = 1, step: int = 1
) -> JsonObject:
    """An assistant/message's data announcing ``calls``; ``text=None`` without calls is empty content."""
    content: list[JsonValue] = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in calls]
    source: JsonObject = {"kind": "model", "provider": "p", "model": "m"}
    return {
        "turn": turn,
        "step": step,
        "message": {"id": message_id, "role": "assistant", "content": content, "source": source},
    }


def result_msg(
    call: str = "c1", text: str = "result", turn: int = 1, step: int = 1, is_error: bool = False
) -> JsonObject:
    """A tool/result's data answering ``call``."""
    block: JsonObject = {
        "type": "tool-result",
        "toolCallId": call,
        "isError": is_error,
        "content": [{"type": "text", "text": text}],
    }
    message: JsonObject = {
        "id": f"r-{call}",
        "role": "user",
        "source": {"kind": "tool", "callId": call},
        "content": [block],
    }
    return {"turn": turn, "step": step, "message": message}


def rewritten(data: JsonObject, text: str) -> JsonObject:
    """A tool/result's data with its first block's inner content replaced by ``text``."""
    message = data["message"]
    assert isinstance(message, dict) and isinstance(message["content"], list)
    first = message["content"][0]
    assert isinstance(first, dict)
    block: JsonObject = {**first, "content": [{"type": "text", "text": text}]}
    return {**data, "message": {**message, "content": [block, *message["content"][1:]]}}


def request_header(**config: JsonValue) -> JsonObject:
    return {"header": {"config": {"provider": "p", "model": "m", **config}}}


def replace(start: int, end: int) -> JsonObject:
    return {"op": "replace", "start": start, "end": end}


def event(seq: int, kind: str, data: Any, **envelope: Any) -> JsonObject:
    """A stored/seed event ``{type, seq, time, data, ...}``."""
    return {"type": kind, "seq": seq, "time": SEED_TIME, "data": data, **envelope}


def log(*entries: tuple[Any, ...]) -> list[JsonValue]:
    """Events numbered from 0: each entry is ``(type, data)`` or ``(type, data, extra envelope)``."""
    events: list[JsonValue] = []
    for seq, entry in enumerate(entries):
        extra: JsonObject = entry[2] if len(entry) == 3 else {}
        events.append(event(seq, entry[0], entry[1], **extra))
    return events


APPEND: Final[JsonObject] = {"surfaceOp": "append"}


def user_ev(message_id: str = "u1", text: str = "hello") -> tuple[str, JsonValue, JsonObject]:
    return ("user/message", user_msg(message_id, text), APPEND)


def assistant_ev(
    message_id: str = "a1", calls: Sequence[str] = (), text: str | None = "hi", turn: int = 1, step: int = 1
) -> tuple[str, JsonValue, JsonObject]:
    return ("assistant/message", assistant_msg(message_id, text, calls, turn, step), APPEND)


def result_ev(
    call: str = "c1", text: str = "result", turn: int = 1, step: int = 1
) -> tuple[str, JsonValue, JsonObject]:
    return ("tool/result", result_msg(call, text, turn, step), APPEND)


def append_step(kind: str, data: Any, session: str = "s", **envelope: Any) -> Step:
    return ok("append", id=session, type=kind, data=data, **envelope)


def append_user(message_id: str = "u1", session: str = "s", text: str = "hello") -> Step:
    return append_step("user/message", user_msg(message_id, text), session, surfaceOp="append")


def append_assistant(
    message_id: str = "a1", session: str = "s", calls: Sequence[str] = (), text: str | None = "hi"
) -> Step:
    return append_step(
        "assistant/message", assistant_msg(message_id, text, calls), session, surfaceOp="append"
    )


def append_result(call: str = "c1", session: str = "s", text: str = "result") -> Step:
    return append_step("tool/result", result_msg(call, text), session, surfaceOp="append")


def turn(n: int = 1, session: str = "s") -> Step:
    return append_step("turn/start", {"turn": n}, session)


def turn_end(n: int = 1, session: str = "s", kind: str = "completed") -> Step:
    return append_step("turn/end", {"turn": n, "reason": {"kind": kind}}, session)


def state(session: str = "s") -> Step:
    return ok("state", id=session)


def gone(session: str = "s") -> Step:
    return fails(Code.SESSION_NOT_FOUND, "state", id=session)


# --- session: create, append, end-seed, firstLiveSeq (notes/dsh-session-core §4, §5) --------------


def session_cases() -> Iterator[Case]:
    f = "session"
    create = "spec.log.session.create_session_state"
    append = "spec.log.session.append_event"
    yield case(
        f,
        "a session created without a seed has an empty log and no end-seed marker",
        create,
        [ok("create", id="s")],
    )
    yield case(
        f,
        "a store mints session ids from its own counter",
        "spec.log.session.plan_session_id",
        [ok("create"), ok("create")],
    )
    yield case(
        f,
        "a minted id skips an id that is already live",
        "spec.log.session.plan_session_id",
        [ok("create", id="session-1"), ok("create")],
    )
    yield case(
        f,
        "a session created from an empty seed gets a session/end-seed marker at seq 0",
        "spec.lineage.seed.needs_end_seed",
        [ok("create", id="s", seed=[])],
    )
    yield case(
        f,
        "a seed that already ends with session/end-seed gets no second marker",
        "spec.lineage.seed.needs_end_seed",
        [ok("create", id="s", seed=log(user_ev(), ("session/end-seed", {})))],
    )
    yield case(
        f,
        "a seed's events are inherited: firstLiveSeq is the seed's length and the marker follows it",
        create,
        [ok("create", id="s", seed=log(user_ev(), assistant_ev())), append_user("u2"), state()],
    )
    yield case(
        f,
        "creating a session whose id is live is rejected",
        "spec.log.session.validate_new_session_id",
        [ok("create", id="s"), append_user(), fails(Code.SESSION_ALREADY_EXISTS, "create", id="s"), state()],
    )
    yield case(
        f,
        "a log-only event joins the log but not the surface",
        append,
        [ok("create", id="s"), turn(), state()],
    )
    yield case(
        f,
        "a user/message appended with surfaceOp append becomes a surface node and a message",
        append,
        [ok("create", id="s"), append_user(), state()],
    )
    yield case(
        f,
        "an assistant/message with empty content is a surface node that derives no message",
        "spec.log.session.derive_session_messages",
        [ok("create", id="s"), append_user(), append_assistant(text=None), state()],
    )
    yield case(
        f,
        "messages follow the surface order, one per node that derives one",
        "spec.log.session.derive_session_messages",
        [
            ok("create", id="s"),
            append_user("u1"),
            append_assistant("a1", calls=["c1"]),
            append_result("c1"),
            append_user("u2"),
            state(),
        ],
    )
    yield case(
        f,
        "an event of a type the specification does not know is accepted",
        "spec.log.session.validate_event_type",
        [ok("create", id="s"), append_step("custom/event", {"x": 1}), state()],
    )
    yield case(
        f,
        "an empty event type is rejected",
        "spec.log.session.validate_event_type",
        [ok("create", id="s"), fails(Code.EVENT_TYPE_INVALID, "append", id="s", type="", data={}), state()],
    )
    yield case(
        f,
        "an event type that is not a string is rejected",
        "spec.log.session.validate_event_type",
        [ok("create", id="s"), fails(Code.EVENT_TYPE_INVALID, "append", id="s", type=5, data={})],
    )
    yield case(
        f,
        "an append without a type is rejected as an invalid event type",
        "spec.log.session.validate_event_type",
        [ok("create", id="s"), fails(Code.EVENT_TYPE_INVALID, "append", id="s", data={})],
    )
    yield case(
        f,
        "a rejected append changes nothing and consumes no seq",
        append,
        [
            ok("create", id="s"),
            append_user(),
            fails(Code.EVENT_TYPE_INVALID, "append", id="s", type="", data={}),
            fails(Code.SURFACE_OP_MISSING, "append", id="s", type="user/message", data=user_msg("u2")),
            state(),
            turn(),
            state(),
        ],
    )
    yield case(
        f,
        "request/header-delta is retired vocabulary and cannot be appended",
        "spec.log.session.validate_request_header_vocabulary",
        [
            ok("create", id="s"),
            fails(Code.LEGACY_HEADER_DELTA, "append", id="s", type="request/header-delta", data={}),
            state(),
        ],
    )
    yield case(
        f,
        "a request/header with reason fallback is retired vocabulary and cannot be appended",
        "spec.log.session.validate_request_header_vocabulary",
        [
            ok("create", id="s"),
            fails(
                Code.LEGACY_FALLBACK_REASON,
                "append",
                id="s",
                type="request/header",
                data={**request_header(), "reason": "fallback"},
            ),
        ],
    )
    yield case(
        f,
        "a request/header with another reason is accepted",
        "spec.log.session.validate_request_header_vocabulary",
        [ok("create", id="s"), append_step("request/header", {**request_header(), "reason": "initial"})],
    )
    yield case(
        f,
        "append does not check message shapes",
        "spec.log.session.plan_event",
        [ok("create", id="s"), append_step("user/message", {"anything": True}, surfaceOp="append"), state()],
    )
    yield case(
        f,
        "a session that is not live cannot be appended to or read",
        "spec.log.session.append_event",
        [fails(Code.SESSION_NOT_FOUND, "append", id="nope", type="turn/start", data={}), gone("nope")],
    )
    yield case(
        f,
        "an event's time is the clock's now when it is appended",
        append,
        [ok("create", id="s"), turn(), ok("clock", now=NOW + 250), append_user(), state()],
    )
    yield case(
        f,
        "createdAt defaults to the clock and may be given in meta",
        "spec.log.header.build_header",
        [ok("create", id="s"), ok("create", id="t", meta={"createdAt": 42})],
    )


# --- json: the lossless domain (SPEC-DECISIONS D5; notes/dsh-session-core §5.2) -------------------


def json_cases() -> Iterator[Case]:
    f = "json"
    rule = "spec.log.session.snapshot_event_data"
    yield case(
        f,
        "an append without data is rejected: an absent value is not JSON",
        rule,
        [ok("create", id="s"), fails(Code.DATA_NOT_JSON, "append", id="s", type="turn/start"), state()],
    )
    yield case(
        f,
        "data null is JSON and is kept",
        rule,
        [ok("create", id="s"), append_step("custom/null", None), state()],
    )
    yield case(
        f,
        "data may be a string, a number or an array",
        rule,
        [
            ok("create", id="s"),
            append_step("custom/a", "text"),
            append_step("custom/b", 42),
            append_step("custom/c", [1, "two", None]),
        ],
    )
    yield case(
        f,
        "event data keeps text, safe integers, fractions and nesting exactly",
        rule,
        [
            ok("create", id="s"),
            append_step(
                "custom/values",
                {
                    "text": 'h\u00e9llo \u2713 \U0001d11e "quoted" \\ \n tab\t',
                    "max": 9007199254740991,
                    "min": -9007199254740991,
                    "fraction": 1.5,
                    "zero": 0,
                    "flags": [True, False, None],
                    "nested": {"a": [[], {}, [1, [2, [3, {"deep": "yes"}]]]]},
                    "": "empty key",
                },
            ),
            state(),
        ],
    )


# --- header: the session header (SPEC-DECISIONS D1; notes/dsh-session-core §1.5, §4.6) ------------


def header_cases() -> Iterator[Case | PureCase]:
    f = "header"
    build = "spec.log.header.build_header"
    validate = "spec.header.validate_header"
    full_meta: JsonObject = {
        "createdAt": 5,
        "cwd": "/work/project",
        "parentSession": "p0",
        "seedLength": 0,
        "origin": "subagent",
        "delegationDepth": 2,
        "agentPreset": "coder",
        "unknown": "dropped",
    }
    yield case(
        f,
        "a header takes its lineage fields from meta, in order, and drops unknown keys",
        build,
        [ok("create", id="s", meta=full_meta)],
    )
    yield case(
        f,
        "meta fields that are null are left out",
        build,
        [ok("create", id="s", meta={"cwd": None, "agentPreset": None, "delegationDepth": None})],
    )
    yield case(f, "meta null is no meta", build, [ok("create", id="s", meta=None)])
    bad_meta: list[tuple[str, Code, JsonValue]] = [
        ("a relative cwd is rejected", Code.HEADER_CWD, {"cwd": "relative/path"}),
        ("a cwd that is not a string is rejected", Code.HEADER_CWD, {"cwd": 5}),
        ("a negative createdAt is rejected", Code.HEADER_CREATED_AT, {"createdAt": -1}),
        ("a fractional createdAt is rejected", Code.HEADER_CREATED_AT, {"createdAt": 1.5}),
        ("a createdAt that is not a number is rejected", Code.HEADER_CREATED_AT, {"createdAt": "now"}),
        (
            "a parentSession that is not a string is rejected",
            Code.HEADER_PARENT_SESSION,
            {"parentSession": 7},
        ),
        ("a negative seedLength is rejected", Code.HEADER_SEED_LENGTH, {"seedLength": -1}),
        ("an origin other than subagent is rejected", Code.HEADER_ORIGIN, {"origin": "user"}),
        ("a negative delegationDepth is rejected", Code.HEADER_DELEGATION_DEPTH, {"delegationDepth": -1}),
        (
            "a delegationDepth that is not a number is rejected",
            Code.HEADER_DELEGATION_DEPTH,
            {"delegationDepth": "1"},
        ),
        ("an agentPreset that is not a string is rejected", Code.HEADER_AGENT_PRESET, {"agentPreset": False}),
        ("meta that is an array is not a header record", Code.HEADER_NOT_RECORD, []),
        ("meta that is a string is not a header record", Code.HEADER_NOT_RECORD, "meta"),
    ]
    for name, code, meta in bad_meta:
        yield case(
            f, f"{name}, and no session is created", build, [fails(code, "create", id="s", meta=meta), gone()]
        )
    yield case(
        f,
        "header fields are checked in order: createdAt before cwd",
        build,
        [fails(Code.HEADER_CREATED_AT, "create", id="s", meta={"cwd": "rel", "createdAt": -1})],
    )
    valid: JsonObject = {"version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0, "isSeeded": False}
    yield pure(f, "a complete version 4 header is valid", validate, sessionId="s", header=valid)
    yield pure(
        f,
        "a header keeps unknown extra keys and stays valid",
        validate,
        sessionId="s",
        header={**valid, "extra": {"k": 1}},
    )
    yield pure(
        f,
        "a header of another version is rejected",
        validate,
        Code.HEADER_VERSION,
        sessionId="s",
        header={**valid, "version": 3},
    )
    yield pure(
        f,
        "a header whose version is a string is rejected",
        validate,
        Code.HEADER_VERSION,
        sessionId="s",
        header={**valid, "version": "4"},
    )
    yield pure(
        f,
        "a header naming another session is rejected",
        validate,
        Code.HEADER_ID_MISMATCH,
        sessionId="t",
        header=valid,
    )
    no_seeded = {key: value for key, value in valid.items() if key != "isSeeded"}
    yield pure(
        f,
        "a header without isSeeded is rejected",
        validate,
        Code.HEADER_IS_SEEDED,
        sessionId="s",
        header=no_seeded,
    )
    yield pure(
        f,
        "a header whose isSeeded is not a boolean is rejected",
        validate,
        Code.HEADER_IS_SEEDED,
        sessionId="s",
        header={**valid, "isSeeded": 1},
    )
    no_depth = {key: value for key, value in valid.items() if key != "delegationDepth"}
    yield pure(
        f,
        "a header without delegationDepth is rejected",
        validate,
        Code.HEADER_DELEGATION_DEPTH,
        sessionId="s",
        header=no_depth,
    )
    yield pure(
        f,
        "a header that is an array is not a record",
        validate,
        Code.HEADER_NOT_RECORD,
        sessionId="s",
        header=[],
    )


# --- surface: surface ops and the replace rule (notes/dsh-session-core §3.3-§3.5, §3.8) ------------


def three_nodes() -> list[Step]:
    """A session "s" whose surface is [0, 1, 2]: user, assistant, user."""
    return [ok("create", id="s"), append_user("u1"), append_assistant("a1"), append_user("u2")]


def replace_user(start_seq: int, end_seq: int, sources: JsonValue, message_id: str = "summary") -> Step:
    return append_step(
        "user/message",
        user_msg(message_id, "summary"),
        surfaceOp=replace(start_seq, end_seq),
        sourceEventSeqs=sources,
    )


def surface_cases() -> Iterator[Case | PureCase]:
    f = "surface"
    plan = "spec.log.surface.plan_replace"
    read = "spec.log.surface.read_surface_op"
    yield case(
        f,
        "a replace swaps a span of surface nodes for itself and counts one generation",
        "spec.log.surface.apply_surface_plan",
        [*three_nodes(), replace_user(0, 1, [0, 1]), state()],
    )
    yield case(
        f,
        "a replace whose start equals its end swaps one node",
        "spec.log.surface.apply_surface_plan",
        [*three_nodes(), replace_user(1, 1, [1]), state()],
    )
    yield case(
        f,
        "a replace may span a replacement node",
        "spec.log.surface.apply_surface_plan",
        [*three_nodes(), replace_user(0, 1, [0, 1]), replace_user(3, 2, [2, 3], "summary-2"), state()],
    )
    yield case(
        f,
        "a shadowed node is no longer on the surface, so no replace can start at it",
        plan,
        [
            *three_nodes(),
            replace_user(0, 1, [0, 1]),
            Step(replace_user(0, 2, [0, 2]).request, str(Code.REPLACE_START_NOT_FOUND)),
            state(),
        ],
    )
    yield case(
        f,
        "an assistant/message may replace a span",
        "spec.log.surface.apply_surface_plan",
        [
            *three_nodes(),
            append_step(
                "assistant/message", assistant_msg("a2"), surfaceOp=replace(1, 2), sourceEventSeqs=[1, 2]
            ),
            state(),
        ],
    )
    yield case(
        f,
        "tool/result may join the surface with surfaceOp append",
        read,
        [ok("create", id="s"), append_assistant(calls=["c1"]), append_result("c1"), state()],
    )
    yield case(
        f,
        "a log-only event cannot carry surfaceOp",
        read,
        [
            ok("create", id="s"),
            fails(
                Code.SURFACE_OP_ON_LOG_ONLY,
                "append",
                id="s",
                type="turn/start",
                data={"turn": 1},
                surfaceOp="append",
            ),
        ],
    )
    yield case(
        f,
        "a log-only event cannot carry sourceEventSeqs",
        read,
        [
            *three_nodes(),
            fails(
                Code.PROVENANCE_ON_LOG_ONLY,
                "append",
                id="s",
                type="turn/start",
                data={"turn": 1},
                sourceEventSeqs=[0],
            ),
        ],
    )
    yield case(
        f,
        "a log-only event carrying both keys is refused for surfaceOp first",
        read,
        [
            *three_nodes(),
            fails(
                Code.SURFACE_OP_ON_LOG_ONLY,
                "append",
                id="s",
                type="todo/write",
                data={},
                surfaceOp="append",
                sourceEventSeqs=[0],
            ),
        ],
    )
    yield case(
        f,
        "a surface-eligible event without surfaceOp is rejected",
        read,
        [
            ok("create", id="s"),
            fails(Code.SURFACE_OP_MISSING, "append", id="s", type="user/message", data=user_msg()),
        ],
    )
    yield case(
        f,
        "a tool/result without surfaceOp is rejected",
        read,
        [
            ok("create", id="s"),
            fails(Code.SURFACE_OP_MISSING, "append", id="s", type="tool/result", data=result_msg()),
        ],
    )
    invalid_ops: list[tuple[str, JsonValue]] = [
        ("surfaceOp null is not a surface op", None),
        ("surfaceOp 'prepend' is not a surface op", "prepend"),
        ("surfaceOp that is a number is not a surface op", 5),
        ("surfaceOp that is an array is not a surface op", ["append"]),
    ]
    for name, op in invalid_ops:
        yield case(
            f,
            name,
            read,
            [
                ok("create", id="s"),
                fails(
                    Code.SURFACE_OP_INVALID,
                    "append",
                    id="s",
                    type="user/message",
                    data=user_msg(),
                    surfaceOp=op,
                ),
                state(),
            ],
        )
    malformed: list[tuple[str, JsonValue]] = [
        ("a replace op without end is malformed", {"op": "replace", "start": 0}),
        ("a replace op with an extra key is malformed", {**replace(0, 0), "why": "x"}),
        ("a replace op whose op is not 'replace' is malformed", {"op": "swap", "start": 0, "end": 0}),
        ("a replace op with a negative start is malformed", replace(-1, 0)),
        ("a replace op whose start is a string is malformed", {"op": "replace", "start": "0", "end": 0}),
        ("a replace op with a fractional end is malformed", {"op": "replace", "start": 0, "end": 0.5}),
    ]
    for name, op in malformed:
        yield case(
            f,
            name,
            read,
            [
                *three_nodes(),
                fails(
                    Code.REPLACE_OP_INVALID,
                    "append",
                    id="s",
                    type="user/message",
                    data=user_msg("x"),
                    surfaceOp=op,
                    sourceEventSeqs=[0],
                ),
            ],
        )
    yield case(
        f,
        "a replace whose start is not on the surface is rejected and changes nothing",
        plan,
        [*three_nodes(), Step(replace_user(9, 0, [0]).request, str(Code.REPLACE_START_NOT_FOUND)), state()],
    )
    yield case(
        f,
        "a replace whose end is not on the surface is rejected",
        plan,
        [*three_nodes(), Step(replace_user(0, 9, [0]).request, str(Code.REPLACE_END_NOT_FOUND))],
    )
    yield case(
        f,
        "a replace whose start and end are both missing is refused for its start",
        plan,
        [*three_nodes(), Step(replace_user(8, 9, [0]).request, str(Code.REPLACE_START_NOT_FOUND))],
    )
    yield case(
        f,
        "a replace whose start comes after its end is rejected",
        plan,
        [*three_nodes(), Step(replace_user(2, 0, [0, 1, 2]).request, str(Code.REPLACE_INVERTED)), state()],
    )
    fold = "spec.surface.fold_surface"
    yield pure(
        f,
        "folding a log replays appends and replaces into the surface",
        fold,
        events=log(
            user_ev("u1"),
            assistant_ev(),
            ("user/message", user_msg("sum"), {"surfaceOp": replace(0, 1), "sourceEventSeqs": [0, 1]}),
        ),
    )
    gap = log(user_ev(), assistant_ev())
    assert isinstance(gap[1], dict)
    gap[1] = {**gap[1], "seq": 2}
    yield pure(f, "a log whose seqs skip a number does not fold", fold, Code.SEQ_NOT_CONTIGUOUS, events=gap)
    late = log(user_ev())
    assert isinstance(late[0], dict)
    late[0] = {**late[0], "seq": 1}
    yield pure(f, "a log must start at seq 0", fold, Code.SEQ_NOT_CONTIGUOUS, events=late)


# --- provenance: sourceEventSeqs (notes/dsh-session-core §3.6) -------------------------------------


def provenance_cases() -> Iterator[Case]:
    f = "provenance"
    rule = "spec.log.provenance.validate_provenance"
    two = [ok("create", id="s"), append_user("u1"), append_assistant("a1")]

    def cite(kind: str, sources: JsonValue, op: JsonValue = "append") -> JsonObject:
        data = {
            "user/message": user_msg("u9"),
            "assistant/message": assistant_msg("a9"),
            "tool/result": result_msg("c9"),
        }[kind]
        return {
            "op": "append",
            "id": "s",
            "type": kind,
            "data": data,
            "surfaceOp": op,
            "sourceEventSeqs": sources,
        }

    yield case(
        f, "an append may cite earlier events", rule, [*two, Step(cite("user/message", [0, 1]), OK), state()]
    )
    yield case(
        f,
        "an assistant/message may cite nothing (a known-empty provider stream)",
        rule,
        [*two, Step(cite("assistant/message", []), OK)],
    )
    refused: list[tuple[str, Code, str, JsonValue]] = [
        ("sourceEventSeqs that is a number is not an array", Code.PROVENANCE_NOT_ARRAY, "user/message", 0),
        (
            "sourceEventSeqs that is an object is not an array",
            Code.PROVENANCE_NOT_ARRAY,
            "user/message",
            {"0": 0},
        ),
        ("sourceEventSeqs null is present and not an array", Code.PROVENANCE_NOT_ARRAY, "user/message", None),
        ("a user/message may not cite an empty list", Code.PROVENANCE_EMPTY, "user/message", []),
        ("a tool/result may not cite an empty list", Code.PROVENANCE_EMPTY, "tool/result", []),
        ("a negative seq is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [-1]),
        ("a fractional seq is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [0.5]),
        ("a string is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", ["0"]),
        ("null is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [None]),
        ("a boolean is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [True]),
        (
            "every entry is checked to be a seq before any other check",
            Code.PROVENANCE_NOT_SEQ,
            "user/message",
            [9, 9, "x"],
        ),
        ("a seq may be cited only once", Code.PROVENANCE_DUPLICATE, "user/message", [0, 0]),
        (
            "duplicates are found before citations of later events",
            Code.PROVENANCE_DUPLICATE,
            "user/message",
            [9, 0, 0],
        ),
        ("an event may not cite itself", Code.PROVENANCE_NOT_EARLIER, "user/message", [2]),
        ("an event may not cite a later event", Code.PROVENANCE_NOT_EARLIER, "user/message", [0, 5]),
    ]
    for name, code, kind, sources in refused:
        yield case(f, name, rule, [*two, Step(cite(kind, sources), str(code)), state()])
    yield case(
        f,
        "a replace without sourceEventSeqs does not cite what it shadows",
        rule,
        [
            *two,
            fails(
                Code.PROVENANCE_MISSING_SHADOWED,
                "append",
                id="s",
                type="user/message",
                data=user_msg("x"),
                surfaceOp=replace(0, 1),
            ),
        ],
    )
    yield case(
        f,
        "a replace must cite every node it shadows",
        rule,
        [*two, Step(cite("user/message", [0], replace(0, 1)), str(Code.PROVENANCE_MISSING_SHADOWED))],
    )
    yield case(
        f,
        "a replace may cite more than it shadows",
        rule,
        [*two, Step(cite("user/message", [0, 1], replace(1, 1)), OK), state()],
    )
    yield case(
        f,
        "a replace citing an empty list is refused for the empty list first",
        rule,
        [*two, Step(cite("user/message", [], replace(0, 1)), str(Code.PROVENANCE_EMPTY))],
    )


# --- tool-rewrite: a replacing tool/result changes only content (notes/dsh-session-core §3.7) -------


def tool_rewrite_cases() -> Iterator[Case]:
    f = "tool-rewrite"
    rule = "spec.log.tool_rewrite.validate_tool_result_rewrite"
    original = result_msg("c1", "a long tool output")
    setup = [
        ok("create", id="s"),
        turn(),
        append_assistant(calls=["c1"]),
        append_result("c1", text="a long tool output"),
        append_user("u2"),
    ]
    # The surface is [1, 2, 3]: assistant, tool/result, user.

    def rewrite(data: Any, start_seq: int = 2, end_seq: int = 2, sources: JsonValue = None) -> JsonObject:
        cited = sources if sources is not None else list(range(start_seq, end_seq + 1))
        return {
            "op": "append",
            "id": "s",
            "type": "tool/result",
            "data": data,
            "surfaceOp": replace(start_seq, end_seq),
            "sourceEventSeqs": cited,
        }

    yield case(
        f,
        "a tool/result may replace a tool/result with new inner content",
        rule,
        [*setup, Step(rewrite(rewritten(original, "short")), OK), state()],
    )
    message = original["message"]
    assert isinstance(message, dict) and isinstance(message["content"], list)
    extra_block = {
        **original,
        "message": {**message, "content": [*message["content"], {"type": "text", "text": "note"}]},
    }
    yield case(
        f, "content blocks after the first are not compared", rule, [*setup, Step(rewrite(extra_block), OK)]
    )
    emptied = {**original, "message": {**message, "content": [{**message["content"][0], "content": []}]}}  # type: ignore[dict-item]
    yield case(
        f, "a tool/result rewrite may empty the inner content", rule, [*setup, Step(rewrite(emptied), OK)]
    )
    yield case(
        f,
        "a tool/result replace must rewrite exactly one node",
        rule,
        [
            *setup,
            Step(rewrite(rewritten(original, "short"), 2, 3), str(Code.TOOL_REWRITE_NOT_ONE_NODE)),
            state(),
        ],
    )
    yield case(
        f,
        "a tool/result replace must target a tool/result, not a user/message",
        rule,
        [*setup, Step(rewrite(rewritten(original, "short"), 3, 3), str(Code.TOOL_REWRITE_NOT_A_RESULT))],
    )
    yield case(
        f,
        "a tool/result replace must target a tool/result, not an assistant/message",
        rule,
        [*setup, Step(rewrite(rewritten(original, "short"), 1, 1), str(Code.TOOL_REWRITE_NOT_A_RESULT))],
    )
    block = message["content"][0]
    assert isinstance(block, dict)

    def with_block(**changes: JsonValue) -> JsonObject:
        return {
            **original,
            "message": {
                **message,
                "content": [{**block, **changes, "content": [{"type": "text", "text": "short"}]}],
            },
        }

    changes: list[tuple[str, JsonValue]] = [
        ("a tool/result rewrite may not change isError", with_block(isError=True)),
        ("a tool/result rewrite may not change the call it answers", with_block(toolCallId="c2")),
        (
            "a tool/result rewrite may not change the message id",
            {**original, "message": {**with_block()["message"], "id": "other"}},  # type: ignore[dict-item]
        ),
        ("a tool/result rewrite may not change the turn", {**rewritten(original, "short"), "turn": 2}),
        (
            "a tool/result rewrite may not add fields to data",
            {**rewritten(original, "short"), "error": {"code": "X"}},
        ),
    ]
    for name, data in changes:
        yield case(
            f,
            name,
            rule,
            [*setup, Step(rewrite(data), str(Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT)), state()],
        )
    yield case(
        f,
        "a user/message may replace a tool/result: the rewrite rule binds only tool/result replacements",
        rule,
        [
            *setup,
            append_step("user/message", user_msg("sum"), surfaceOp=replace(2, 2), sourceEventSeqs=[2]),
            state(),
        ],
    )


# --- seed: validation of inherited events (notes/dsh-session-core §1.3, §1.4, §4.2) ----------------


def seed_cases() -> Iterator[Case]:
    f = "seed"
    envelope = "spec.lineage.seed.validate_seed_envelope"
    shape = "spec.lineage.seed.validate_message_shape"
    header_shape = "spec.lineage.seed.validate_request_header_shape"

    def refused(name: str, code: Code, rule: str, seed: JsonValue) -> Case:
        return case(f, name, rule, [fails(code, "create", id="s", seed=seed), gone()])

    full = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        user_ev("u1"),
        ("request/header", request_header(reasoningEffort="high")),
        assistant_ev("a1", calls=["c1"]),
        ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"}),
        result_ev("c1"),
        (
            "user/message",
            user_msg("sum", "summary"),
            {"surfaceOp": replace(2, 6), "sourceEventSeqs": [2, 4, 6]},
        ),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
    yield case(
        f,
        "a well-formed seed is folded into the surface, replaces included",
        "spec.log.session.fold_seed",
        [ok("create", id="s", seed=full), state()],
    )
    yield case(
        f,
        "a seed event may be marked ignorable",
        envelope,
        [ok("create", id="s", seed=log(("custom/x", {}, {"ignorable": True})))],
    )
    yield case(
        f,
        "a seed event's time may be negative",
        envelope,
        [ok("create", id="s", seed=[{"type": "custom/x", "seq": 0, "time": -5, "data": None}])],
    )
    base = event(0, "custom/x", {})
    entry: Any
    for name, entry in [
        ("a seed event with an unknown envelope key is invalid", {**base, "extra": 1}),
        ("a seed event whose type is not a string is invalid", {**base, "type": 5}),
        ("a seed event with a negative seq is invalid", {**base, "seq": -1}),
        ("a seed event whose seq is a string is invalid", {**base, "seq": "0"}),
        ("a seed event whose time is a string is invalid", {**base, "time": "noon"}),
        ("a seed event with a fractional time is invalid", {**base, "time": 1.5}),
        (
            "a seed event without data is invalid",
            {key: value for key, value in base.items() if key != "data"},
        ),
        ("a seed event marked ignorable false is invalid", {**base, "ignorable": False}),
        ("a seed entry that is null is not an event", None),
        ("a seed entry that is an array is not an event", []),
        ("a seed entry that is a string is not an event", "event"),
    ]:
        yield refused(name, Code.SEED_ENVELOPE_INVALID, envelope, [entry])
    yield refused(
        "seed events must be numbered from 0",
        Code.SEED_SEQ_MISMATCH,
        "spec.lineage.seed.validate_seed_seq",
        [event(1, "custom/x", {})],
    )
    yield refused(
        "seed events must be contiguous",
        Code.SEED_SEQ_MISMATCH,
        "spec.lineage.seed.validate_seed_seq",
        [event(0, "custom/x", {}), event(2, "custom/x", {})],
    )
    yield refused(
        "the first failing seed entry decides the error",
        Code.SEED_ENVELOPE_INVALID,
        "spec.log.session.fold_seed",
        [{**event(0, "custom/x", {}), "extra": 1}, event(5, "custom/x", {})],
    )
    yield refused(
        "request/header-delta in a seed is refused before its envelope is checked",
        Code.LEGACY_HEADER_DELTA,
        envelope,
        [{**event(0, "request/header-delta", {}), "extra": 1}],
    )
    yield refused(
        "a seeded request/header with reason fallback is retired vocabulary",
        Code.LEGACY_FALLBACK_REASON,
        "spec.lineage.seed.validate_seed_request_header_reason",
        [event(0, "request/header", {**request_header(), "reason": "fallback"})],
    )
    yield refused(
        "a seeded request/header is checked for its shape before its reason",
        Code.REQUEST_HEADER_PROVIDER_MODEL,
        "spec.lineage.seed.validate_seed_event",
        [event(0, "request/header", {"reason": "fallback"})],
    )
    for name, code, data in [
        ("a seeded request/header needs a header config", Code.REQUEST_HEADER_PROVIDER_MODEL, {}),
        (
            "a seeded request/header needs a model",
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            {"header": {"config": {"provider": "p"}}},
        ),
        (
            "a seeded request/header needs a non-empty provider",
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            {"header": {"config": {"provider": "", "model": "m"}}},
        ),
        (
            "a seeded reasoningEffort must be a non-empty string",
            Code.REQUEST_HEADER_REASONING_EFFORT,
            request_header(reasoningEffort=""),
        ),
        (
            "a seeded reasoningEffort that is a number is refused",
            Code.REQUEST_HEADER_REASONING_EFFORT,
            request_header(reasoningEffort=5),
        ),
        (
            "adapterDefaults may mark only a field the config sets",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {"header": {**request_header()["header"], "adapterDefaults": {"maxTokens": True}}},  # type: ignore[dict-item]
        ),
        (
            "adapterDefaults may mark only reasoningEffort and maxTokens",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {
                "header": {
                    "config": {"provider": "p", "model": "m", "other": 1},
                    "adapterDefaults": {"other": True},
                }
            },
        ),
        (
            "adapterDefaults markers must be exactly true",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {
                "header": {
                    "config": {"provider": "p", "model": "m", "reasoningEffort": "high"},
                    "adapterDefaults": {"reasoningEffort": False},
                }
            },
        ),
        (
            "adapterDefaults must be an object",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {"header": {"config": {"provider": "p", "model": "m"}, "adapterDefaults": []}},
        ),
    ]:
        yield refused(name, code, header_shape, [event(0, "request/header", data)])
    yield case(
        f,
        "adapterDefaults may mark a field the config sets",
        header_shape,
        [
            ok(
                "create",
                id="s",
                seed=[
                    event(
                        0,
                        "request/header",
                        {
                            "header": {
                                "config": {"provider": "p", "model": "m", "maxTokens": 9},
                                "adapterDefaults": {"maxTokens": True},
                            }
                        },
                    )
                ],
            )
        ],
    )
    user = user_msg()
    assistant = assistant_msg(calls=["c1"])
    a_message = assistant["message"]
    assert isinstance(a_message, dict)
    result = result_msg("c1")
    r_message = result["message"]
    assert isinstance(r_message, dict) and isinstance(r_message["content"], list)
    r_block = r_message["content"][0]
    assert isinstance(r_block, dict)

    def seeded(kind: str, data: Any) -> list[JsonValue]:
        return [event(0, kind, data, surfaceOp="append")]

    def with_result(**changes: JsonValue) -> JsonObject:
        return {**result, "message": {**r_message, **changes}}

    for name, code, kind, data in [
        (
            "a seeded user message needs an id",
            Code.MESSAGE_UNIDENTIFIED,
            "user/message",
            {k: v for k, v in user.items() if k != "id"},
        ),
        (
            "a seeded message id must be non-empty",
            Code.MESSAGE_UNIDENTIFIED,
            "user/message",
            {**user, "id": ""},
        ),
        (
            "a seeded assistant/message needs a message object",
            Code.MESSAGE_UNIDENTIFIED,
            "assistant/message",
            {"turn": 1, "step": 1},
        ),
        (
            "a seeded user message has role user",
            Code.MESSAGE_ROLE,
            "user/message",
            {**user, "role": "assistant"},
        ),
        (
            "a seeded assistant message has role assistant",
            Code.MESSAGE_ROLE,
            "assistant/message",
            {**assistant, "message": {**a_message, "role": "user"}},
        ),
        (
            "a seeded message needs a source",
            Code.MESSAGE_SOURCE,
            "user/message",
            {k: v for k, v in user.items() if k != "source"},
        ),
        (
            "a seeded message source needs a non-empty kind",
            Code.MESSAGE_SOURCE,
            "user/message",
            {**user, "source": {"kind": ""}},
        ),
        (
            "a seeded message's content is an array",
            Code.MESSAGE_CONTENT,
            "user/message",
            {**user, "content": "hello"},
        ),
        (
            "a seeded assistant message's source is a model",
            Code.MESSAGE_MODEL_SOURCE,
            "assistant/message",
            {**assistant, "message": {**a_message, "source": {"kind": "user"}}},
        ),
        (
            "a seeded assistant message's source names its model",
            Code.MESSAGE_MODEL_SOURCE,
            "assistant/message",
            {**assistant, "message": {**a_message, "source": {"kind": "model", "provider": "p"}}},
        ),
        (
            "a seeded tool result's source is a tool",
            Code.MESSAGE_TOOL_SOURCE,
            "tool/result",
            with_result(source={"kind": "model", "callId": "c1"}),
        ),
        (
            "a seeded tool result's source names its call",
            Code.MESSAGE_TOOL_SOURCE,
            "tool/result",
            with_result(source={"kind": "tool"}),
        ),
        (
            "a seeded tool result holds a block",
            Code.MESSAGE_TOOL_BLOCK,
            "tool/result",
            with_result(content=[]),
        ),
        (
            "a seeded tool result holds exactly one block",
            Code.MESSAGE_TOOL_BLOCK,
            "tool/result",
            with_result(content=[r_block, r_block]),
        ),
        (
            "a seeded tool result's block is a tool-result block",
            Code.MESSAGE_TOOL_BLOCK,
            "tool/result",
            with_result(content=[{**r_block, "type": "text"}]),
        ),
        (
            "a seeded tool-result block's content is an array",
            Code.MESSAGE_TOOL_BLOCK,
            "tool/result",
            with_result(content=[{**r_block, "content": "text"}]),
        ),
        (
            "a seeded tool result's block answers the call its source names",
            Code.MESSAGE_TOOL_CALL_ID_MISMATCH,
            "tool/result",
            with_result(content=[{**r_block, "toolCallId": "c2"}]),
        ),
    ]:
        yield refused(name, code, shape, seeded(kind, data))
    yield refused(
        "a seeded surface event needs surfaceOp, as on append",
        Code.SURFACE_OP_MISSING,
        "spec.lineage.seed.plan_seed_surface",
        [event(0, "user/message", user_msg())],
    )
    yield refused(
        "a seeded replace of a node not on the seed's surface keeps the replace rule's code",
        Code.REPLACE_START_NOT_FOUND,
        "spec.lineage.seed.plan_seed_surface",
        log(user_ev(), ("user/message", user_msg("x"), {"surfaceOp": replace(5, 0), "sourceEventSeqs": [0]})),
    )
    yield refused(
        "a seeded tool/result replace obeys the rewrite rule",
        Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT,
        "spec.lineage.seed.plan_seed_surface",
        log(
            assistant_ev(calls=["c1"]),
            result_ev("c1"),
            (
                "tool/result",
                {**result_msg("c1"), "turn": 9},
                {"surfaceOp": replace(1, 1), "sourceEventSeqs": [1]},
            ),
        ),
    )
    yield case(
        f,
        "a rejected seed creates no session and leaves its id free",
        "spec.log.session.create_session_state",
        [
            fails(Code.SEED_SEQ_MISMATCH, "create", id="s", seed=[event(3, "custom/x", {})]),
            gone(),
            ok("create", id="s"),
        ],
    )


# --- fork (notes/dsh-session-core §7.1) ------------------------------------------------------------


def fork_cases() -> Iterator[Case]:
    f = "fork"
    seed = "spec.lineage.fork.plan_fork_seed"
    boundary_rule = "spec.lineage.fork.validate_boundary_outside_open_turn"
    parent_meta: JsonObject = {
        "cwd": "/work/p",
        "delegationDepth": 1,
        "origin": "subagent",
        "agentPreset": "coder",
    }
    parent = [ok("create", id="p", meta=parent_meta), append_user("u1", "p"), append_assistant("a1", "p")]
    yield case(
        f,
        "a fork without a boundary inherits the whole log, names its parent and seed length, and adds the end-seed marker",
        seed,
        [*parent, ok("fork", source="p", child="c"), state("c")],
    )
    yield case(
        f,
        "a child inherits cwd but not delegationDepth, origin or agentPreset",
        "spec.lineage.fork.derive_child_meta",
        [*parent, ok("fork", source="p", child="c")],
    )
    yield case(
        f,
        "a fork at boundary 0 inherits only the first event",
        seed,
        [*parent, ok("fork", source="p", boundary=0, child="c")],
    )
    yield case(
        f,
        "the parent is unchanged by a fork",
        seed,
        [*parent, ok("fork", source="p", boundary=0, child="c"), state("p")],
    )
    yield case(
        f,
        "a fork mints the child id when none is given",
        "spec.log.session.plan_session_id",
        [*parent, ok("fork", source="p"), ok("fork", source="p", child=None)],
    )
    yield case(
        f,
        "a fork of an empty session has an empty seed and seedLength 0",
        seed,
        [ok("create", id="p"), ok("fork", source="p", child="c")],
    )
    yield case(
        f,
        "forking a fork inherits its end-seed marker and adds no second one",
        "spec.lineage.seed.needs_end_seed",
        [*parent, ok("fork", source="p", child="c"), ok("fork", source="c", child="g")],
    )
    yield case(
        f,
        "a child is a live session that can be appended to",
        "spec.log.session.append_event",
        [*parent, ok("fork", source="p", child="c"), append_user("u2", "c"), state("c"), state("p")],
    )
    for name, boundary in [
        ("a negative boundary is invalid", -1),
        ("a fractional boundary is invalid", 0.5),
        ("a boundary that is a string is invalid", "1"),
        ("a boundary of null is invalid", None),
        ("a boundary of true is invalid", True),
        ("a boundary past the last event is invalid", 2),
    ]:
        yield case(
            f,
            name,
            seed,
            [
                *parent,
                fails(Code.INVALID_BOUNDARY, "fork", source="p", boundary=boundary, child="c"),
                gone("c"),
            ],
        )
    yield case(
        f,
        "any boundary of an empty session is invalid",
        seed,
        [ok("create", id="p"), fails(Code.INVALID_BOUNDARY, "fork", source="p", boundary=0, child="c")],
    )
    in_turn = [
        ok("create", id="p"),
        turn(1, "p"),
        append_user("u1", "p"),
        append_assistant("a1", "p"),
        turn_end(1, "p"),
        turn(2, "p"),
        append_user("u2", "p"),
    ]
    yield case(
        f,
        "a boundary inside an open turn is rejected",
        boundary_rule,
        [*in_turn, fails(Code.OPEN_TURN, "fork", source="p", boundary=1, child="c")],
    )
    yield case(
        f,
        "a boundary at a turn/start is inside that turn",
        boundary_rule,
        [*in_turn, fails(Code.OPEN_TURN, "fork", source="p", boundary=4, child="c")],
    )
    yield case(
        f,
        "a boundary at a turn/end is outside the turn",
        boundary_rule,
        [*in_turn, ok("fork", source="p", boundary=3, child="c")],
    )
    yield case(
        f,
        "a fork without a boundary of a log that ends inside a turn is rejected",
        boundary_rule,
        [*in_turn, fails(Code.OPEN_TURN, "fork", source="p", child="c")],
    )
    yield case(
        f,
        "a fork of a session that is not live is rejected",
        "spec.lineage.fork.validate_fork_request",
        [fails(Code.SESSION_NOT_FOUND, "fork", source="nope", child="c")],
    )
    yield case(
        f,
        "a fork into a live id is rejected",
        "spec.lineage.fork.validate_fork_request",
        [
            *parent,
            ok("create", id="c"),
            fails(Code.SESSION_ALREADY_EXISTS, "fork", source="p", child="c"),
            state("c"),
        ],
    )
    yield case(
        f,
        "a live child id is rejected before the source is looked up",
        "spec.lineage.fork.validate_fork_request",
        [ok("create", id="c"), fails(Code.SESSION_ALREADY_EXISTS, "fork", source="nope", child="c")],
    )


# --- repair: crash-repair closers (notes/dsh-session-core §9; SPEC-DECISIONS D3 item 6) ------------


def repair_cases() -> Iterator[Case | PureCase]:
    f = "repair"
    closers = "spec.repair.derive_closers"
    turn_start = ("turn/start", {"turn": 1})
    step_start = ("step/start", {"turn": 1, "step": 1})
    tool_call = ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"})
    yield pure(f, "an empty log needs no closers", closers, events=[])
    yield pure(
        f,
        "a log with every turn closed needs no closers",
        closers,
        events=log(turn_start, user_ev(), ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})),
    )
    yield pure(
        f,
        "an open turn is closed by an interrupted turn/end that reuses the last event's time",
        closers,
        events=log(turn_start, user_ev()),
    )
    yield pure(f, "an open step is closed before its turn", closers, events=log(turn_start, step_start))
    yield pure(
        f,
        "a call announced but never started gets a TOOL_NOT_STARTED result",
        closers,
        events=log(turn_start, step_start, assistant_ev(calls=["c1"])),
    )
    yield pure(
        f,
        "a started call gets a TOOL_OUTCOME_UNKNOWN result that cites its tool/call",
        closers,
        events=log(turn_start, step_start, assistant_ev(calls=["c1"]), tool_call),
    )
    yield pure(
        f,
        "an answered call gets no closer",
        closers,
        events=log(turn_start, step_start, assistant_ev(calls=["c1"]), tool_call, result_ev("c1")),
    )
    yield pure(
        f,
        "pending calls are closed in the order they were announced",
        closers,
        events=log(
            turn_start, step_start, assistant_ev(calls=["c2", "c1", "c3"]), tool_call, result_ev("c3")
        ),
    )
    yield pure(
        f,
        "a step/end forgets the calls of its step",
        closers,
        events=log(turn_start, step_start, assistant_ev(calls=["c1"]), ("step/end", {"turn": 1, "step": 1})),
    )
    yield pure(
        f,
        "an open compaction is closed after the call results and before the step and turn",
        closers,
        events=log(
            turn_start,
            step_start,
            assistant_ev(calls=["c1"]),
            ("compaction/start", {"compactionId": "k1", "turn": 1, "sourceCommandId": "cmd"}),
        ),
    )
    yield pure(
        f,
        "an open compaction outside a turn gets its compaction/end alone",
        closers,
        events=log(("compaction/start", {"compactionId": "k1", "turn": None})),
    )
    yield pure(
        f,
        "a compaction left open before a session/end-seed is a stale orphan and is never closed",
        closers,
        events=log(("compaction/start", {"compactionId": "k1", "turn": None}), ("session/end-seed", {})),
    )
    broken = log(
        turn_start,
        step_start,
        assistant_ev(calls=["c1", "c2"]),
        tool_call,
        ("compaction/start", {"compactionId": "k1", "turn": 1}),
    )
    repaired = [*broken, *derive_closers(broken)]  # type: ignore[arg-type]
    yield pure(f, "a repaired log needs no more closers", closers, events=repaired)
    resume = "spec.log.session.create_session_state"
    open_turn = [
        turn(),
        append_step("step/start", {"turn": 1, "step": 1}),
        append_assistant(calls=["c1"]),
        append_step("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"}),
    ]
    yield case(
        f,
        "resuming a log that ends inside a turn appends the closers durably, then the end-seed marker",
        resume,
        [
            ok("create", id="s"),
            *open_turn,
            ok("close", id="s"),
            ok("resume", id="s"),
            ok("read", id="s"),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
    )
    yield case(
        f,
        "resuming a balanced log appends only the end-seed marker",
        resume,
        [ok("create", id="s"), turn(), append_user(), turn_end(), ok("close", id="s"), ok("resume", id="s")],
        storage="memory",
    )
    yield case(
        f,
        "resuming a log that already ends with session/end-seed appends nothing",
        "spec.lineage.seed.needs_end_seed",
        [ok("create", id="s", seed=[]), ok("close", id="s"), ok("resume", id="s")],
        storage="memory",
    )
    yield case(
        f,
        "a resumed session keeps seedLength and delegationDepth as stored",
        resume,
        [
            ok("create", id="p", meta={"delegationDepth": 3}),
            append_user("u1", "p"),
            ok("fork", source="p", child="c"),
            ok("close", id="c"),
            ok("resume", id="c"),
        ],
        storage="memory",
    )
    yield case(
        f,
        "resuming twice closes nothing twice",
        resume,
        [
            ok("create", id="s"),
            *open_turn,
            ok("close", id="s"),
            ok("resume", id="s"),
            ok("close", id="s"),
            ok("resume", id="s"),
        ],
        storage="memory",
    )


# --- storage: durability through the protocol, naming, the header line, stored records ------------


def storage_cases() -> Iterator[Case | PureCase]:
    f = "storage"
    flush = "spec.log.session.append_event"  # what a flush makes durable is what append committed
    yield case(
        f,
        "flush makes appended events durable for readers, and only flush does",
        flush,
        [
            ok("create", id="s"),
            append_user(),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            ok("flush", id="s"),
            ok("read", id="s"),
            append_assistant(),
            ok("read", id="s"),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
    )
    yield case(
        f,
        "close flushes and releases the session",
        flush,
        [
            ok("create", id="s"),
            append_user(),
            ok("close", id="s"),
            gone(),
            fails(Code.SESSION_NOT_FOUND, "append", id="s", type="x", data={}),
            ok("read", id="s"),
        ],
        storage="memory",
    )
    yield case(
        f,
        "a closed session can be resumed and appended to",
        "spec.log.session.create_session_state",
        [
            ok("create", id="s"),
            append_user(),
            ok("close", id="s"),
            ok("resume", id="s"),
            append_assistant(),
            ok("close", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
    )
    yield case(
        f,
        "resuming a live session is rejected",
        "spec.log.session.validate_new_session_id",
        [ok("create", id="s"), ok("flush", id="s"), fails(Code.SESSION_ALREADY_EXISTS, "resume", id="s")],
        storage="memory",
    )
    yield case(
        f,
        "resuming a session that was never stored is rejected",
        flush,
        [fails(Code.SESSION_NOT_FOUND, "resume", id="nope")],
        storage="memory",
    )
    yield case(
        f,
        "creating a session whose id is stored is rejected",
        "spec.log.session.validate_new_session_id",
        [
            ok("create", id="s"),
            ok("close", id="s"),
            fails(Code.SESSION_ALREADY_EXISTS, "create", id="s"),
            gone(),
        ],
        storage="memory",
    )
    yield case(
        f,
        "a minted id skips ids that are stored",
        "spec.log.session.plan_session_id",
        [ok("create", id="session-1"), ok("close", id="session-1"), ok("create")],
        storage="memory",
    )
    yield case(
        f,
        "flush and close of a session that is not live are rejected",
        flush,
        [
            fails(Code.SESSION_NOT_FOUND, "flush", id="nope"),
            fails(Code.SESSION_NOT_FOUND, "close", id="nope"),
        ],
        storage="memory",
    )
    yield case(
        f,
        "without storage, flush and close work and nothing can be read or resumed",
        flush,
        [
            ok("create", id="s"),
            append_user(),
            ok("flush", id="s"),
            ok("close", id="s"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            fails(Code.SESSION_NOT_FOUND, "resume", id="s"),
        ],
    )
    yield case(
        f,
        "a fork's child is stored with its lineage header",
        "spec.lineage.fork.derive_child_meta",
        [
            ok("create", id="p", meta={"cwd": "/w"}),
            append_user("u1", "p"),
            ok("fork", source="p", child="c"),
            ok("close", id="c"),
            ok("read", id="c"),
        ],
        storage="memory",
    )
    for compressed in (True, False):
        label = "compressed" if compressed else "uncompressed"
        yield case(
            f,
            f"file storage ({label}): what was flushed survives a crash, the rest is lost",
            flush,
            [
                ok("create", id="s", meta={"cwd": "/work/p"}),
                append_user(),
                ok("flush", id="s"),
                append_assistant(),
                ok("crash"),
                gone(),
                ok("read", id="s"),
                ok("resume", id="s"),
                state(),
            ],
            storage="file",
            compressed=compressed,
        )
    yield case(
        f,
        "file storage: a session never flushed does not survive a crash",
        flush,
        [
            ok("create", id="s"),
            append_user(),
            ok("crash"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            ok("create", id="s"),
        ],
        storage="file",
    )
    yield case(
        f,
        "file storage: resuming after a crash inside a turn appends the closers",
        "spec.repair.derive_closers",
        [
            ok("create", id="s"),
            turn(),
            append_assistant(calls=["c1"]),
            ok("flush", id="s"),
            ok("crash"),
            ok("resume", id="s"),
            ok("read", id="s"),
        ],
        storage="file",
    )
    io = "spec.log.session.append_event"
    yield case(
        f,
        "a failed fsync answers STORAGE_IO, loses nothing flushed before, and a retried flush succeeds",
        io,
        [
            ok("create", id="s"),
            append_user(),
            ok("flush", id="s"),
            append_assistant(),
            ok("fail_next", fsOp="fsync", errno="EIO"),
            fails(Code.STORAGE_IO, "flush", id="s"),
            ok("read", id="s"),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="file",
    )
    yield case(
        f,
        "a failed write on a full disk answers STORAGE_IO and a retried flush succeeds",
        io,
        [
            ok("create", id="s"),
            append_user(),
            ok("flush", id="s"),
            append_assistant(),
            ok("fail_next", fsOp="write", errno="ENOSPC"),
            fails(Code.STORAGE_IO, "flush", id="s"),
            ok("read", id="s"),
            ok("flush", id="s"),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
    )
    yield case(
        f,
        "a failed first publication leaves no session to read",
        io,
        [
            ok("create", id="s"),
            append_user(),
            ok("fail_next", fsOp="write", errno="EIO"),
            fails(Code.STORAGE_IO, "flush", id="s"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="file",
    )
    yield case(
        f,
        "a close that hits a storage failure answers STORAGE_IO and keeps the session live; a retried close writes it",
        io,
        [
            ok("create", id="s"),
            append_user(),
            ok("flush", id="s"),
            append_assistant(),
            ok("fail_next", fsOp="fsync", errno="EIO"),
            fails(Code.STORAGE_IO, "close", id="s"),
            ok("state", id="s"),
            ok("close", id="s"),
            gone(),
            ok("resume", id="s"),
        ],
        storage="file",
    )
    yield case(
        f,
        "a fault armed before a flush with nothing to write stays armed",
        io,
        [
            ok("create", id="s"),
            ok("flush", id="s"),
            ok("fail_next", fsOp="write", errno="EIO"),
            ok("flush", id="s"),
            append_user(),
            fails(Code.STORAGE_IO, "flush", id="s"),
        ],
        storage="file",
    )
    yield from storage_pure_cases()


def storage_pure_cases() -> Iterator[PureCase]:
    f = "storage"
    segment = "spec.storage.encode_segment"
    for name, session_id in [
        ("a session id of safe characters is its own path segment", "abc-1.2_XYZ"),
        ("a slash in a session id is escaped", "a/b"),
        ("a tilde is escaped so the encoding stays injective", "~7E"),
        ("a single dot as an id is escaped whole", "."),
        ("two dots as an id are escaped whole", ".."),
        ("three dots as an id are kept", "..."),
        ("a non-ASCII character is escaped by its UTF-16 code unit", "caf\u00e9"),
        ("a character outside the BMP is escaped as two UTF-16 code units", "\U0001f600"),
        ("a space is escaped", "a b"),
    ]:
        yield pure(f, name, segment, id=session_id)
    yield pure(f, "an empty session id has no path segment", segment, Code.EMPTY_PATH_SEGMENT, id="")
    project = "spec.storage.encode_project_key"
    for name, cwd in [
        ("a POSIX cwd becomes its slug between double dashes", "/home/user/project"),
        ("a Windows cwd's separators and drive colon become dashes", "C:\\Users\\x"),
        ("a run of separators becomes one dash", "//a//b/"),
        ("the root cwd is 'root'", "/"),
        ("a non-ASCII character in a cwd is escaped", "/tmp/\u00e9t\u00e9"),
        ("a long cwd's slug is cut to 251 characters", "/" + "d" * 300),
    ]:
        yield pure(f, name, project, cwd=cwd)
    yield pure(f, "an empty cwd has no project directory", project, Code.EMPTY_PROJECT_PATH, cwd="")
    relpath = "spec.storage.derive_session_relpath"
    header: JsonObject = {
        "version": 4,
        "id": "s/1",
        "createdAt": 0,
        "cwd": "/work/p",
        "delegationDepth": 0,
        "isSeeded": False,
    }
    yield pure(
        f,
        "a compressed log lives under its project and session directories",
        relpath,
        header=header,
        compressed=True,
    )
    no_cwd = {key: value for key, value in header.items() if key != "cwd"}
    yield pure(
        f,
        "a session without a cwd lives under _no-cwd, uncompressed here",
        relpath,
        header=no_cwd,
        compressed=False,
    )
    line = "spec.storage.decode_header_line"
    v4: JsonObject = {
        "type": "session",
        "version": 4,
        "id": "s",
        "createdAt": 7,
        "delegationDepth": 0,
        "isSeeded": True,
    }
    yield pure(f, "a version 4 header line is the header with type session in front", line, line=v4)
    yield pure(f, "a header line keeps unknown keys", line, line={**v4, "note": "kept"})
    yield pure(
        f,
        "a header line must name the session it is read as",
        line,
        Code.HEADER_ID_MISMATCH,
        line=v4,
        sessionId="t",
    )
    v0: JsonObject = {
        "type": "session",
        "version": 0,
        "id": "old",
        "createdAt": 7,
        "cwd": "/w",
        "seedLength": 2,
        "parentSession": "p",
    }
    yield pure(
        f,
        "a DSH v0 header line is upgraded: version 4, delegationDepth 0, isSeeded from seedLength",
        line,
        line=v0,
    )
    value: Any
    for name, code, value in [
        ("a header line from a newer format is unsupported", Code.UNSUPPORTED_FORMAT, {**v4, "version": 5}),
        (
            "a header line of an unknown older format is unsupported",
            Code.UNSUPPORTED_FORMAT,
            {**v4, "version": 3},
        ),
        (
            "a header line whose version is a string is not a header",
            Code.HEADER_LINE_INVALID,
            {**v4, "version": "4"},
        ),
        ("a first line that is not an object is not a header", Code.HEADER_LINE_INVALID, []),
        (
            "a first line whose type is not session is not a header",
            Code.HEADER_LINE_INVALID,
            {**v4, "type": "event"},
        ),
        (
            "a header line without an id is not a header",
            Code.HEADER_LINE_INVALID,
            {k: v for k, v in v4.items() if k != "id"},
        ),
        (
            "a header line may not carry the retired sandboxMode field",
            Code.HEADER_RETIRED_FIELDS,
            {**v4, "sandboxMode": "off"},
        ),
        (
            "a version 4 header line obeys the header rules",
            Code.HEADER_IS_SEEDED,
            {k: v for k, v in v4.items() if k != "isSeeded"},
        ),
        (
            "a version 4 header line's createdAt is a non-negative safe integer",
            Code.HEADER_CREATED_AT,
            {**v4, "createdAt": -1},
        ),
    ]:
        yield pure(f, name, line, code, line=value)
    record = "spec.chunk_rows.decode_storage_record"
    text_row: JsonObject = {
        "type": "text-chunks",
        "seq0": 3,
        "time0": 100,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [5, 7], "texts": ["a", "b", "c"]},
    }
    yield pure(
        f, "a packed text-chunks row expands into one assistant/chunk per member", record, record=text_row
    )
    yield pure(
        f,
        "a packed reasoning-chunks row expands into reasoning deltas",
        record,
        record={**text_row, "type": "reasoning-chunks"},
    )
    tool_row: JsonObject = {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 0,
        "data": {"turn": 1, "step": 1, "index": 1, "id": "c1", "name": "read", "dt": [1], "args": ["{", "}"]},
    }
    yield pure(
        f,
        "a packed tool-call-chunks row expands into argument deltas naming the call",
        record,
        record=tool_row,
    )
    yield pure(
        f,
        "a stored record that is not a packed row is one event, unchecked",
        record,
        record={"type": "custom/x", "anything": True},
    )
    text_data = text_row["data"]
    assert isinstance(text_data, dict)
    for name, value in [
        ("a packed row with an extra envelope key is malformed", {**text_row, "extra": 1}),
        (
            "a packed row whose dt does not match its members is malformed",
            {**text_row, "data": {**text_data, "dt": [1]}},
        ),
        (
            "a packed row with no members is malformed",
            {**text_row, "data": {**text_data, "texts": [], "dt": []}},
        ),
        ("a packed row whose seq0 is negative is malformed", {**text_row, "seq0": -1}),
        (
            "a packed tool-call row whose id is not a string is malformed",
            {**tool_row, "data": {**tool_row["data"], "id": 1}},  # type: ignore[dict-item]
        ),
    ]:
        yield pure(f, name, record, Code.MALFORMED_CHUNK_ROW, record=value)
    jsonl = "spec.framing.decode_jsonl_log"
    head = json.dumps(v4, separators=(",", ":"))
    first = json.dumps(event(0, "custom/x", {}), separators=(",", ":"))
    second = json.dumps(event(1, "custom/y", {}), separators=(",", ":"))
    yield pure(
        f, "a plain log is a header line and one record per line", jsonl, text=f"{head}\n{first}\n{second}\n"
    )
    yield pure(
        f,
        "a last line without its newline is a torn tail, dropped and cut back",
        jsonl,
        text=f"{head}\n{first}\n{second[:10]}",
    )
    yield pure(
        f,
        "a complete line that does not parse is a corrupt log, not a torn tail",
        jsonl,
        Code.CORRUPT_LOG,
        text=f"{head}\n{first[:10]}\n{second}\n",
    )
    yield pure(
        f,
        "even the last complete line must parse",
        jsonl,
        Code.CORRUPT_LOG,
        text=f"{head}\n{first}\n{{oops\n",
    )
    yield pure(f, "an empty log is corrupt", jsonl, Code.CORRUPT_LOG, text="")
    yield pure(
        f,
        "a header line that is not JSON is not a header",
        jsonl,
        Code.HEADER_LINE_INVALID,
        text="not json\n",
    )
    yield from legacy_cases()


def legacy_cases() -> Iterator[PureCase]:
    f = "storage"
    upgrade = "spec.legacy.upgrade_v0_records"
    turn_start_ev = ("turn/start", {"turn": 1, "trigger": {"kind": "user"}})
    current = log(turn_start_ev, user_ev(), ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}))
    yield pure(
        f, "a v0 log in the current vocabulary reads as it is", upgrade, sessionId="old", records=current
    )
    yield pure(
        f,
        "v0 turn/end reasons are mapped: disposed becomes aborted",
        upgrade,
        sessionId="old",
        records=log(("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "disposed"}})),
    )
    yield pure(
        f,
        "a legacy error reason becomes an error with a failure",
        upgrade,
        sessionId="old",
        records=log(
            ("turn/start", {"turn": 1}),
            ("turn/end", {"turn": 1, "reason": {"kind": "error", "step": 1, "message": "boom"}}),
        ),
    )
    yield pure(
        f,
        "a v0 steering/message becomes a user/message",
        upgrade,
        sessionId="old",
        records=log(
            ("turn/start", {"turn": 1}),
            (
                "steering/message",
                {"turn": 1, "content": [{"type": "text", "text": "wait"}], "source": {"kind": "user"}},
                APPEND,
            ),
        ),
    )
    yield pure(
        f,
        "a message from before message identity gets a legacy id",
        upgrade,
        sessionId="old",
        records=log(("user/message", {"content": [], "source": {"kind": "user"}}, APPEND)),
    )
    yield pure(
        f,
        "packed chunk rows in a v0 log are expanded in place",
        upgrade,
        sessionId="old",
        records=[
            event(0, "turn/start", {"turn": 1}),
            {
                "type": "text-chunks",
                "seq0": 1,
                "time0": 5,
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
            },
            event(3, "custom/x", {}, ignorable=True),
        ],
    )
    yield pure(
        f,
        "an unknown event type marked ignorable is kept",
        upgrade,
        sessionId="old",
        records=log(("custom/x", {}, {"ignorable": True})),
    )
    for name, code, records in [
        (
            "a v0 turn/start with a trigger has exactly turn and trigger",
            Code.LEGACY_MALFORMED_TURN_START,
            log(("turn/start", {"turn": 1, "trigger": {"kind": "user"}, "extra": 1})),
        ),
        (
            "a v0 turn/end has a reason with a kind",
            Code.LEGACY_MALFORMED_TURN_END,
            log(("turn/end", {"turn": 1, "reason": {}})),
        ),
        (
            "a simple v0 turn/end reason carries nothing but its kind",
            Code.LEGACY_MALFORMED_TURN_END,
            log(("turn/end", {"turn": 1, "reason": {"kind": "completed", "why": "x"}})),
        ),
        (
            "a v0 steering/message has one of its two legacy shapes",
            Code.LEGACY_MALFORMED_MESSAGE,
            log(("steering/message", {"turn": 1, "text": "x"})),
        ),
        ("mode/set is retired vocabulary", Code.LEGACY_MODE_SET, log(("mode/set", {"mode": "plan"}))),
        (
            "request/header-delta is refused in a stored log",
            Code.LEGACY_HEADER_DELTA,
            log(("request/header-delta", {})),
        ),
        (
            "a stored request/header with reason fallback is refused",
            Code.LEGACY_FALLBACK_REASON,
            log(("request/header", {**request_header(), "reason": "fallback"})),
        ),
        (
            "an unknown event type not marked ignorable is refused",
            Code.UNKNOWN_EVENT_TYPE,
            log(("custom/x", {})),
        ),
        (
            "a stored message is checked for its shape",
            Code.MESSAGE_ROLE,
            log(("user/message", {**user_msg(), "role": "system"}, APPEND)),
        ),
        (
            "a seq gap in a stored log is corruption",
            Code.CORRUPT_LOG,
            [event(0, "turn/start", {"turn": 1}), event(2, "custom/x", {}, ignorable=True)],
        ),
        ("a stored record that is not an object is corruption", Code.CORRUPT_LOG, [5]),
    ]:
        yield pure(f, name, upgrade, code, sessionId="old", records=records)


# --- pairing: tool-pairing balance (notes/dsh-compaction-projection §2) ----------------------------


def pairing_cases() -> Iterator[PureCase]:
    f = "pairing"
    cuts = "spec.pairing.derive_cut_balance"
    before, after = "spec.pairing.is_balanced_before", "spec.pairing.is_balanced_after"
    events = log(
        user_ev(), assistant_ev(calls=["c1", "c2"]), result_ev("c1"), result_ev("c2"), assistant_ev("a2")
    )
    nodes = [0, 1, 2, 3, 4]
    yield pure(f, "a cut is balanced when no tool call is open across it", cuts, nodes=nodes, events=events)
    yield pure(
        f, "the cut before a call's announcement is balanced", before, nodes=nodes, events=events, seq=1
    )
    yield pure(
        f, "the cut before a pending result is not balanced", before, nodes=nodes, events=events, seq=3
    )
    yield pure(
        f, "the cut after the last result of a step is balanced", after, nodes=nodes, events=events, seq=3
    )
    yield pure(f, "the cut after an announcement is not balanced", after, nodes=nodes, events=events, seq=1)
    yield pure(
        f,
        "balance counts over the surface, not the log: shadowed nodes do not count",
        cuts,
        nodes=[0, 4],
        events=events,
    )
    yield pure(
        f,
        "a tool/result closes one call whatever call it names",
        cuts,
        nodes=[1, 2, 2],
        events=log(user_ev(), assistant_ev(calls=["c1", "c2"]), result_ev("zz")),
    )
    nested = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "a",
            "role": "assistant",
            "source": {"kind": "model", "provider": "p", "model": "m"},
            "content": [{"type": "group", "content": [{"type": "tool-call", "id": "c1"}]}],
        },
    }
    yield pure(
        f,
        "a tool-call block nested inside another block opens nothing",
        cuts,
        nodes=[0],
        events=log(("assistant/message", nested, APPEND)),
    )
    yield pure(f, "an empty surface has one balanced cut", cuts, nodes=[], events=[])
    yield pure(
        f,
        "a surface node must name an event of the log",
        cuts,
        Code.PAIRING_SURFACE_CORRUPT,
        nodes=[0, 7],
        events=log(user_ev()),
    )
    mismatched = log(user_ev(), user_ev("u2"))
    assert isinstance(mismatched[1], dict)
    mismatched[1] = {**mismatched[1], "seq": 5}
    yield pure(
        f,
        "a surface node must name the event with that seq",
        cuts,
        Code.PAIRING_SURFACE_CORRUPT,
        nodes=[0, 1],
        events=mismatched,
    )
    yield pure(
        f,
        "a tool/result before any open call is an orphan",
        cuts,
        Code.PAIRING_ORPHAN_RESULT,
        nodes=[0],
        events=log(result_ev()),
    )
    yield pure(
        f,
        "a balance query must name a seq on the surface",
        before,
        Code.PAIRING_SEQ_NOT_ON_SURFACE,
        nodes=nodes,
        events=events,
        seq=9,
    )
    yield pure(
        f,
        "a shadowed node is not on the surface for a balance query",
        after,
        Code.PAIRING_SEQ_NOT_ON_SURFACE,
        nodes=[0, 4],
        events=events,
        seq=2,
    )
    yield pure(
        f,
        "the whole surface is checked before the queried seq",
        after,
        Code.PAIRING_ORPHAN_RESULT,
        nodes=[2],
        events=events,
        seq=9,
    )


# --- prune: tool-result pruning (SPEC-DECISIONS D8; notes/dsh-compaction-projection §6) ------------


def prune_cases() -> Iterator[PureCase]:
    f = "prune"
    decode = "spec.prune.decode_prune_config"
    yield pure(f, "a null configuration takes the defaults", decode, config=None)
    yield pure(f, "missing keys take their defaults", decode, config={"tailChars": 100})
    yield pure(
        f,
        "head, marker and tail may exactly fill the threshold",
        decode,
        config={"thresholdChars": 59, "headChars": 10, "tailChars": 10},
    )
    for name, config in [
        ("an unknown configuration key is rejected", {"maxChars": 5}),
        ("a threshold of 0 is rejected", {"thresholdChars": 0, "headChars": 0, "tailChars": 0}),
        ("a negative headChars is rejected", {"headChars": -1}),
        ("a fractional tailChars is rejected", {"tailChars": 1.5}),
        ("a headChars that is a string is rejected", {"headChars": "10"}),
        (
            "head, marker and tail larger than the threshold are rejected",
            {"thresholdChars": 58, "headChars": 10, "tailChars": 10},
        ),
        ("a small threshold with the default head and tail is rejected", {"thresholdChars": 100}),
        ("a configuration that is not an object is rejected", []),
    ]:
        yield pure(f, name, decode, Code.PRUNE_CONFIG_INVALID, config=config)
    content = "spec.prune.plan_pruned_content"
    small: JsonObject = {"thresholdChars": 60, "headChars": 10, "tailChars": 10}
    digits = "".join(str(i % 10) for i in range(100))
    yield pure(
        f,
        "content within the threshold is left alone",
        content,
        blocks=[{"type": "text", "text": "x" * 60}],
        config=small,
    )
    yield pure(
        f,
        "oversized content keeps its head and tail with the marker between",
        content,
        blocks=[{"type": "text", "text": digits}],
        config=small,
    )
    yield pure(
        f,
        "the cut spans text blocks: the first block it touches gets the marker and emptied blocks are dropped",
        content,
        blocks=[
            {"type": "text", "text": digits[:30]},
            {"type": "text", "text": digits[30:60]},
            {"type": "text", "text": digits[60:]},
        ],
        config=small,
    )
    yield pure(
        f,
        "blocks that are not text are kept in place and not measured",
        content,
        blocks=[
            {"type": "image", "data": "x" * 500},
            {"type": "text", "text": digits},
            {"type": "text", "text": 5},
        ],
        config=small,
    )
    yield pure(
        f,
        "text is measured in code points: an astral character counts once",
        content,
        blocks=[{"type": "text", "text": "\U0001d11e" * 61}],
        config=small,
    )
    yield pure(
        f,
        "a configuration whose head and tail cover everything finds no span to cut",
        content,
        Code.PRUNE_SPAN_NOT_FOUND,
        blocks=[{"type": "text", "text": "abcdef"}],
        config={"thresholdChars": 1, "headChars": 6, "tailChars": 6},
    )
    yield pure(
        f,
        "a configuration that makes the result no smaller is refused",
        content,
        Code.PRUNE_NOT_SMALLER,
        blocks=[{"type": "text", "text": "x" * 25}],
        config={"thresholdChars": 10, "headChars": 10, "tailChars": 10},
    )
    events = "spec.prune.plan_prune_events"
    big = log(
        turn_start_entry(),
        assistant_ev(calls=["c1", "c2"]),
        result_ev("c1", digits),
        result_ev("c2", "small"),
        user_ev("u1", digits),
    )
    yield pure(
        f,
        "every oversized tool/result on the surface gets a metering event and a replacement",
        events,
        nodes=[1, 2, 3, 4],
        events=big,
        config=small,
    )
    yield pure(
        f,
        "a tool/result that is not on the surface is not pruned",
        events,
        nodes=[1, 3, 4],
        events=big,
        config=small,
    )
    yield pure(
        f, "nothing is planned when every result is small", events, nodes=[1, 3], events=big, config=None
    )
    odd = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "r",
            "role": "user",
            "source": {"kind": "tool", "callId": "c1"},
            "content": ["not a block"],
        },
    }
    yield pure(
        f,
        "a tool/result whose first content entry is not a block is skipped",
        events,
        nodes=[0],
        events=log(("tool/result", odd, APPEND)),
        config=small,
    )
    yield pure(
        f,
        "the session pass validates its configuration",
        events,
        Code.PRUNE_CONFIG_INVALID,
        nodes=[],
        events=[],
        config={"thresholdChars": 1},
    )


def turn_start_entry() -> tuple[str, JsonValue]:
    return ("turn/start", {"turn": 1})


# --- tokens: surface pricing and the shadow price (notes/dsh-compaction-projection §3, §7) ---------


def tokens_cases() -> Iterator[PureCase]:
    f = "tokens"
    price = "spec.tokens.price_surface"
    fold = "spec.tokens.fold_shadow_price"
    events = log(
        user_ev("u1", "hello world"),
        assistant_ev("a1", text=None),
        result_ev("c1", "x" * 40),
        assistant_ev("a2", calls=["c9"]),
    )
    yield pure(
        f,
        "every surface node is priced by the message it shows; an empty assistant message costs 0",
        price,
        nodes=[0, 1, 2, 3],
        events=events,
    )
    yield pure(
        f,
        "a node that names no event of the log cannot be priced",
        price,
        Code.TOKEN_SURFACE_CORRUPT,
        nodes=[0, 9],
        events=events,
    )
    metering = event(
        5,
        "compaction/prune",
        {"shadowedRange": {"start": 2, "end": 2}, "shadowedSeqs": [2], "shadowedTokenCount": 30},
    )
    yield pure(f, "a metering event arms a claim on its range", fold, claim=None, event=metering)
    broken_meter = event(5, "compaction/summary", {"shadowedRange": {"start": 2}, "shadowedTokenCount": 30})
    yield pure(
        f, "a metering event without a usable range arms nothing", fold, claim=None, event=broken_meter
    )
    claim: JsonObject = {"start": 2, "end": 2, "tokens": 30}
    yield pure(
        f, "any other log-only event lets the claim expire", fold, claim=claim, event=event(6, "custom/x", {})
    )
    yield pure(
        f,
        "an appended surface event adds its price",
        fold,
        claim=claim,
        event=event(6, "user/message", user_msg(), surfaceOp="append"),
    )
    replacing = event(
        6, "tool/result", result_msg("c1", "short"), surfaceOp=replace(2, 2), sourceEventSeqs=[2]
    )
    yield pure(
        f,
        "a replace over the claimed range adds its price minus the claim",
        fold,
        claim=claim,
        event=replacing,
    )
    yield pure(f, "a replace with no claim adds nothing (legacy drift)", fold, claim=None, event=replacing)
    yield pure(
        f,
        "a replace over another range than the claim is rejected",
        fold,
        Code.TOKEN_SHADOW_PRICE_MISMATCH,
        claim={**claim, "start": 1},
        event=replacing,
    )


# --- checker: the whole-log checker (SPEC-DECISIONS D9) --------------------------------------------


def checker_cases() -> Iterator[PureCase]:
    f = "checker"
    check = "spec.checker.check_log"
    t1 = ("turn/start", {"turn": 1})
    s1 = ("step/start", {"turn": 1, "step": 1})
    s1_end = ("step/end", {"turn": 1, "step": 1})
    t1_end = ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    call = ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"})
    clean = log(t1, s1, user_ev(), assistant_ev(calls=["c1"]), call, result_ev("c1"), s1_end, t1_end)
    yield pure(f, "a well-formed log has no violations", check, events=clean)
    yield pure(
        f,
        "a well-formed log with its header has no violations",
        check,
        events=clean,
        header={"version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0, "isSeeded": False},
    )
    gap = log(t1, user_ev())
    assert isinstance(gap[1], dict)
    gap[1] = {**gap[1], "seq": 3}
    cases: list[tuple[str, list[JsonValue], JsonObject]] = [
        ("seq-contiguous: a gap in the seqs is one violation", gap, {}),
        (
            "envelope: an unknown envelope key is a violation",
            log(t1, ("custom/x", {}, {"extra": 1}), t1_end),
            {},
        ),
        (
            "message-shape: a message without an id is a violation",
            log(("user/message", {"role": "user", "source": {"kind": "user"}, "content": []}, APPEND)),
            {},
        ),
        ("surface-op: a message without surfaceOp is a violation", log(("user/message", user_msg())), {}),
        (
            "surface-replace: a replace of a node not on the surface is a violation",
            log(
                user_ev(),
                ("user/message", user_msg("x"), {"surfaceOp": replace(5, 5), "sourceEventSeqs": [0]}),
            ),
            {},
        ),
        (
            "provenance: citing a later event is a violation",
            log(user_ev(), ("user/message", user_msg("x"), {"surfaceOp": "append", "sourceEventSeqs": [7]})),
            {},
        ),
        (
            "tool-rewrite: a pruned result that changes isError is a violation",
            log(
                t1,
                s1,
                assistant_ev(calls=["c1"]),
                call,
                result_ev("c1"),
                (
                    "compaction/prune",
                    {"shadowedRange": {"start": 4, "end": 4}, "shadowedSeqs": [4], "shadowedTokenCount": 9},
                ),
                (
                    "tool/result",
                    result_msg("c1", "short", is_error=True),
                    {"surfaceOp": replace(4, 4), "sourceEventSeqs": [4]},
                ),
                s1_end,
                t1_end,
            ),
            {},
        ),
        (
            "turn-numbering: turns count from 1",
            log(("turn/start", {"turn": 2}), ("turn/end", {"turn": 2, "reason": {"kind": "completed"}})),
            {},
        ),
        ("turn-open: a turn cannot start inside another", log(t1, ("turn/start", {"turn": 2})), {}),
        ("turn-end: a turn/end needs its open turn", log(t1_end), {}),
        ("step-open: a turn cannot end while a step is open", log(t1, s1, t1_end), {}),
        ("step-in-turn: a step starts inside its turn", log(s1), {}),
        (
            "step-numbering: steps count from 1 in each turn",
            log(t1, ("step/start", {"turn": 1, "step": 2})),
            {},
        ),
        ("step-scoped: an assistant message belongs to the open step", log(t1, assistant_ev()), {}),
        (
            "tool-result-pairing: an appended result answers a call started in its step",
            log(t1, s1, assistant_ev(calls=["c1"]), result_ev("c1"), s1_end, t1_end),
            {},
        ),
        ("turn-enclosed: todo/write happens inside a turn", log(("todo/write", {"todos": []})), {}),
        (
            "compaction-bracket: a compaction/end needs its start",
            log(("compaction/end", {"compactionId": "k1", "turn": None, "error": "x"})),
            {},
        ),
        (
            "compaction-turn: a standalone compaction cannot run inside a turn",
            log(t1, ("compaction/start", {"compactionId": "k1", "turn": None})),
            {},
        ),
        (
            "compaction-summary: a summary prices a non-empty span",
            log(
                ("compaction/start", {"compactionId": "k1", "turn": None}),
                (
                    "compaction/summary",
                    {"compactionId": "k1", "turn": None, "shadowedSeqs": [], "shadowedTokenCount": 1},
                ),
            ),
            {},
        ),
        (
            "compaction-checkpoint: a checkpoint replace belongs to an open compaction",
            log(
                user_ev(),
                (
                    "compaction/summary",
                    {
                        "compactionId": "k1",
                        "turn": None,
                        "shadowedRange": {"start": 0, "end": 0},
                        "shadowedSeqs": [0],
                        "shadowedTokenCount": 5,
                    },
                ),
                (
                    "user/message",
                    {
                        **user_msg("ck"),
                        "source": {"kind": "plugin", "plugin": "compact", "compactionId": "k1"},
                    },
                    {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]},
                ),
            ),
            {},
        ),
        (
            "shadow-price: a replace without its metering event is a violation",
            log(
                user_ev(),
                ("user/message", user_msg("x"), {"surfaceOp": replace(0, 0), "sourceEventSeqs": [0]}),
            ),
            {},
        ),
        (
            "closers: an interrupted turn/end outside repair's closers is a violation",
            log(
                t1,
                user_ev(),
                ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}, {"time": SEED_TIME + 1}),
            ),
            {},
        ),
        (
            "seed-length: a seedLength past the log is a violation",
            log(user_ev()),
            {
                "header": {
                    "version": 4,
                    "id": "s",
                    "createdAt": 0,
                    "seedLength": 5,
                    "delegationDepth": 0,
                    "isSeeded": True,
                }
            },
        ),
        (
            "end-seed: a seeded header promises a session/end-seed",
            log(user_ev()),
            {"header": {"version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0, "isSeeded": True}},
        ),
    ]
    for name, events, extra in cases:
        yield PureCase(f, name, check, {"events": events, **extra}, OK)
    yield pure(
        f,
        "every problem is reported, not only the first",
        check,
        events=log(t1_end, ("user/message", user_msg()), ("todo/write", {})),
    )
    yield pure(
        f,
        "without the relational rules only the core rules are checked",
        check,
        events=log(t1_end, ("user/message", user_msg()), ("todo/write", {})),
        relational=False,
    )
    yield pure(
        f,
        "a log repaired with its closers passes the closers rule",
        check,
        events=[
            *log(t1, s1, assistant_ev(calls=["c1"]), call),
            *derive_closers(log(t1, s1, assistant_ev(calls=["c1"]), call)),  # type: ignore[arg-type]
        ],
    )


# --- generation ------------------------------------------------------------------------------------

CASE_SOURCES: Final = (
    session_cases,
    json_cases,
    header_cases,
    surface_cases,
    provenance_cases,
    tool_rewrite_cases,
    seed_cases,
    fork_cases,
    repair_cases,
    storage_cases,
    pairing_cases,
    prune_cases,
    tokens_cases,
    checker_cases,
)

STORAGE_OPS: Final = frozenset({"flush", "close", "resume", "read"})
CRASH_OPS: Final = frozenset({"unsynced", "crash", "arm_crash", "fail_next", "ops"})


class GenerationError(Exception):
    """A case whose computed outcome is not the one its author meant, or a malformed case."""


def all_cases() -> list[Case | PureCase]:
    cases: list[Case | PureCase] = []
    for source in CASE_SOURCES:
        cases.extend(source())
    return cases


def capabilities_of(case_: Case | PureCase) -> list[str]:
    """What a subject must support to run the vector: the ops it sends decide."""
    if isinstance(case_, PureCase):
        return ["pure"]
    needed = {"core"}
    for step in case_.steps:
        op = step.request["op"]
        if op in STORAGE_OPS:
            needed.add("storage")
        if op in CRASH_OPS or (op == "reset" and step.request.get("storage") == "file"):
            needed.update({"storage", "crash-seam"})
    return sorted(needed)


def expectation(ok_: bool, result: JsonValue, code: str | None) -> JsonObject:
    return {"ok": True, "result": result} if ok_ else {"ok": False, "code": code}


def check_intent(where: str, intent: str, ok_: bool, code: str | None) -> None:
    if code in PROTOCOL_CODES:
        raise GenerationError(f"{where}: the oracle answered protocol code {code}")
    if intent == OK and not ok_:
        raise GenerationError(f"{where}: meant to succeed, the specification says {code}")
    if intent != OK and code != intent:
        raise GenerationError(
            f"{where}: meant to fail with {intent}, the specification says {code if code else 'ok'}"
        )


def build_vector(case_: Case | PureCase) -> JsonObject:
    """The vector's JSON, every outcome computed by the oracle."""
    oracle = InProcessSubject(SpecOracle())
    vector: JsonObject = {
        "name": case_.name,
        "family": case_.family,
        "rule": case_.rule,
        "capabilities": capabilities_of(case_),  # type: ignore[dict-item]
    }
    where = f"[{case_.family}] {case_.name}"
    if isinstance(case_, PureCase):
        response = oracle.request("call", function=case_.rule, input=case_.input)
        check_intent(where, case_.intent, response.ok, response.error_code)
        vector.update(
            {
                "function": case_.rule,
                "input": case_.input,
                "expect": expectation(response.ok, response.result, response.error_code),
            }
        )
        return _plain(vector)
    steps: list[JsonValue] = []
    for number, step in enumerate(case_.steps):
        args = {key: value for key, value in step.request.items() if key != "op"}
        response = oracle.request(str(step.request["op"]), **args)
        check_intent(f"{where}, step {number}", step.intent, response.ok, response.error_code)
        steps.append(
            {
                "request": step.request,
                "expect": expectation(response.ok, response.result, response.error_code),
            }
        )
    vector["steps"] = steps
    return _plain(vector)


def _plain(value: JsonObject) -> JsonObject:
    """The vector as plain JSON (tuples and frozen containers become lists and dicts)."""
    plain = json.loads(json.dumps(value))
    assert isinstance(plain, dict)
    return plain


def slug(name: str) -> str:
    """A vector's file name, from its sentence."""
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return text[:90].rstrip("-")


def render(vector: JsonObject) -> str:
    return json.dumps(vector, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generate() -> dict[str, str]:
    """Every vector file, relative path to text."""
    files: dict[str, str] = {}
    for case_ in all_cases():
        if case_.family not in FAMILIES:
            raise GenerationError(f"unknown family {case_.family!r} for {case_.name!r}")
        validate_rule_name(case_.rule)
        path = f"{case_.family}/{slug(case_.name)}.json"
        if path in files:
            raise GenerationError(f"two cases share the file {path}")
        files[path] = render(build_vector(case_))
    validate_coverage(files)
    return files


def validate_rule_name(rule: str) -> None:
    """A vector's rule names a function of the specification."""
    module_name, _, function = rule.rpartition(".")
    if not module_name.startswith("spec.") or not callable(
        getattr(importlib.import_module(module_name), function, None)
    ):
        raise GenerationError(f"rule {rule!r} is not a function of the specification")


def covered_codes(vectors: Mapping[str, str]) -> set[str]:
    """Every code some vector expects."""
    codes: set[str] = set()
    for text in vectors.values():
        vector = json.loads(text)
        expects = [vector["expect"]] if "expect" in vector else [step["expect"] for step in vector["steps"]]
        codes.update(expect["code"] for expect in expects if not expect["ok"])
    return codes


def checker_rules_covered(vectors: Mapping[str, str]) -> set[str]:
    rules: set[str] = set()
    for text in vectors.values():
        vector = json.loads(text)
        if vector.get("function") == "spec.checker.check_log" and vector["expect"]["ok"]:
            rules.update(violation["rule"] for violation in vector["expect"]["result"])
    return rules


def validate_coverage(vectors: Mapping[str, str]) -> None:
    """Every code is expected by some vector or excused with a reason; every checker rule is
    reported by some vector; no excused code is in fact covered."""
    covered = covered_codes(vectors)
    excused = {str(code) for code in (*UNREACHABLE, *NOT_YET_COVERED)}
    missing = sorted(str(code) for code in Code if str(code) not in covered | excused)
    if missing:
        raise GenerationError(f"codes no vector expects and no reason excuses: {missing}")
    stale = sorted(covered & excused)
    if stale:
        raise GenerationError(f"codes excused although a vector covers them: {stale}")
    rules = sorted(set(RULES) - checker_rules_covered(vectors))
    if rules:
        raise GenerationError(f"checker rules no vector reports: {rules}")


def write(files: Mapping[str, str], out: Path) -> None:
    """Replace the vector files under ``out`` (other files there, like README.md, are kept)."""
    for family_dir in out.iterdir() if out.is_dir() else ():
        if family_dir.is_dir():
            shutil.rmtree(family_dir)
    for relative, text in sorted(files.items()):
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.generate_vectors", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=VECTORS_DIR,
        help="where to write the vectors (default: conformance/vectors)",
    )
    args = parser.parse_args(argv)
    try:
        files = generate()
    except GenerationError as error:
        print(f"generate_vectors: {error}", file=sys.stderr)
        return 1
    write(files, args.out)
    by_family: dict[str, int] = {}
    for relative in files:
        by_family[relative.split("/")[0]] = by_family.get(relative.split("/")[0], 0) + 1
    print(
        f"wrote {len(files)} vectors to {args.out}: "
        + ", ".join(f"{family} {count}" for family, count in sorted(by_family.items()))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
