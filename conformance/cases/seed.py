"""seed: what an inherited or restored event must pass (notes/dsh-session-core §1.3, §1.4, §4.2).

Covers the checks a create runs on every seed entry, in their order: the event envelope (with
the retired ``request/header-delta`` first), the shape of a request/header and of each message,
the retired ``fallback`` reason, ``seq == index``, and then the surface rules against the seed
before it. The first failing entry rejects the whole seed and no session is created.
"""

from __future__ import annotations

from typing import Any, Final

from conformance.cases import msg
from conformance.cases.build import Case, Cases, case, chained, event, fails, gone, log, ok, replace, state
from spec.codes import MEANING, Code
from spec.log.json import JsonObject, JsonValue

ENVELOPE = "validate_seed_envelope"
SHAPE = "validate_message_shape"
HEADER_SHAPE = "validate_request_header_shape"
SURFACE = "plan_seed_surface"
SEQ = "validate_seed_seq"
FOLD = "fold_seed"


def refused(
    name: str, code: Code, rule: str, seed: JsonValue, why: str | None = None, comment: str | None = None
) -> Case:
    """A create with ``seed`` meant to fail with ``code``, after which no session "s" exists."""
    return case(name, rule, [fails(code, "create", id="s", seed=seed), gone()], why=why, comment=comment)


def folding_cases() -> Cases:
    full = log(
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        msg.user("u1"),
        ("request/header", msg.header(reasoningEffort="high")),
        msg.assistant("a1", calls=["c1"]),
        ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"}),
        msg.result("c1"),
        (
            "user/message",
            msg.user("sum", "summary"),
            {"surfaceOp": replace(2, 6), "sourceEventSeqs": [2, 4, 6]},
        ),
        ("step/end", {"turn": 1, "step": 1}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
    yield case(
        "a well-formed seed is folded into the surface, replaces included",
        FOLD,
        [ok("create", id="s", seed=full), state()],
    )
    yield case(
        "a rejected seed creates no session and leaves its id free",
        "create_session_state",
        [
            fails(Code.SEED_SEQ_MISMATCH, "create", id="s", seed=[event(3, "custom/x", {})]),
            gone(),
            ok("create", id="s"),
        ],
        why="a seed is validated whole before the session exists, so a rejected one leaves nothing behind",
    )


def envelope_cases() -> Cases:
    yield case(
        "a seed event may be marked ignorable",
        ENVELOPE,
        [ok("create", id="s", seed=log(("custom/x", {}, {"ignorable": True})))],
    )
    yield case(
        "a seed event's time may be negative",
        ENVELOPE,
        [ok("create", id="s", seed=[{"type": "custom/x", "seq": 0, "time": -5, "data": None}])],
    )
    extremes = (-(2**53 - 1), 2**53 - 1, 5.0, 9007199254740991.0)
    yield case(
        "a seed event's time may be any safe integer, the smallest and largest included, or an integral float",
        ENVELOPE,
        [
            ok(
                "create",
                id="s",
                seed=[
                    {"type": "custom/x", "seq": seq, "time": time, "data": None}
                    for seq, time in enumerate(extremes)
                ],
            )
        ],
        why="a safe integer field is an int with |n| <= 2**53 - 1, and an integral float counts as that integer "
        "(SPEC-DECISIONS D5)",
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
            "a seed event whose time is just below the smallest safe integer is invalid",
            {**base, "time": -(2**53)},
        ),
        ("a seed event whose time is just past the largest safe integer is invalid", {**base, "time": 2**53}),
        ("a seed event whose seq is -1 written as a float is invalid", {**base, "seq": -1.0}),
        (
            "a seed event without data is invalid",
            {key: value for key, value in base.items() if key != "data"},
        ),
        ("a seed event marked ignorable false is invalid", {**base, "ignorable": False}),
        ("a seed event marked ignorable 1 is invalid: only true marks it", {**base, "ignorable": 1}),
        ("a seed event marked ignorable with a string is invalid", {**base, "ignorable": "yes"}),
        ("a seed entry that is null is not an event", None),
        ("a seed entry that is an array is not an event", []),
        ("a seed entry that is a string is not an event", "event"),
        ("a seed entry that is a number is not an event", 1.5),
    ]:
        yield refused(name, Code.SEED_ENVELOPE_INVALID, ENVELOPE, [entry])


def order_cases() -> Cases:
    yield refused(
        "seed events must be numbered from 0", Code.SEED_SEQ_MISMATCH, SEQ, [event(1, "custom/x", {})]
    )
    yield refused(
        "seed events must be contiguous",
        Code.SEED_SEQ_MISMATCH,
        SEQ,
        [event(0, "custom/x", {}), event(2, "custom/x", {})],
    )
    yield refused(
        "a seed event may not repeat the seq before it",
        Code.SEED_SEQ_MISMATCH,
        SEQ,
        [event(0, "custom/x", {}), event(1, "custom/x", {}), event(1, "custom/x", {})],
        comment="entry 2 has seq 1: below its index, as a duplicated line would be",
    )
    yield refused(
        "the first failing seed entry decides the error",
        Code.SEED_ENVELOPE_INVALID,
        FOLD,
        [{**event(0, "custom/x", {}), "extra": 1}, event(5, "custom/x", {})],
        comment="entry 1's seq is wrong too; entry 0's envelope is judged first",
    )
    yield refused(
        "request/header-delta in a seed is refused before its envelope is checked",
        Code.LEGACY_HEADER_DELTA,
        ENVELOPE,
        [{**event(0, "request/header-delta", {}), "extra": 1}],
        comment="the extra key would fail the envelope; the retired type is refused first",
    )
    yield refused(
        "a seeded request/header with reason fallback is retired vocabulary",
        Code.LEGACY_FALLBACK_REASON,
        "validate_seed_request_header_reason",
        [event(0, "request/header", {**msg.header(), "reason": "fallback"})],
    )
    yield refused(
        "a seeded request/header is checked for its shape before its reason",
        Code.REQUEST_HEADER_PROVIDER_MODEL,
        "validate_seed_event",
        [event(0, "request/header", {"reason": "fallback"})],
        why="a seed entry's checks run in order: envelope, shape, retired reason, then seq == index",
        comment="the data has the retired reason and no config: the shape's code wins",
    )


def request_header_cases() -> Cases:
    config: JsonObject = {"provider": "p", "model": "m"}
    for name, code, data in [
        ("a seeded request/header needs a header config", Code.REQUEST_HEADER_PROVIDER_MODEL, {}),
        (
            "a seeded request/header whose header has no config is refused",
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            {"header": {}},
        ),
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
            msg.header(reasoningEffort=""),
        ),
        (
            "a seeded reasoningEffort that is a number is refused",
            Code.REQUEST_HEADER_REASONING_EFFORT,
            msg.header(reasoningEffort=5),
        ),
        (
            "adapterDefaults may mark only a field the config sets",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {"header": {"config": config, "adapterDefaults": {"maxTokens": True}}},
        ),
        (
            "adapterDefaults may mark only reasoningEffort and maxTokens",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {"header": {"config": {**config, "other": 1}, "adapterDefaults": {"other": True}}},
        ),
        (
            "adapterDefaults markers must be exactly true",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {
                "header": {
                    "config": {**config, "reasoningEffort": "high"},
                    "adapterDefaults": {"reasoningEffort": False},
                }
            },
        ),
        (
            "an adapterDefaults marker of 1 is not true",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {"header": {"config": {**config, "maxTokens": 9}, "adapterDefaults": {"maxTokens": 1}}},
        ),
        (
            "adapterDefaults must be an object",
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            {"header": {"config": config, "adapterDefaults": []}},
        ),
    ]:
        yield refused(name, code, HEADER_SHAPE, [event(0, "request/header", data)], why=MEANING[code])
    yield case(
        "a fallback reason on an event that is no request/header is not the retired form",
        "validate_seed_request_header_reason",
        [
            ok(
                "create",
                id="s",
                seed=log(("a/custom", {"reason": "fallback"}), ("x-custom/y", {"reason": "fallback"})),
            )
        ],
        comment="the two types sort before and after request/header",
    )
    marked = {"header": {"config": {**config, "maxTokens": 9}, "adapterDefaults": {"maxTokens": True}}}
    yield case(
        "adapterDefaults may mark a field the config sets",
        HEADER_SHAPE,
        [ok("create", id="s", seed=[event(0, "request/header", marked)])],
        why=MEANING[Code.REQUEST_HEADER_ADAPTER_DEFAULTS],
    )


def message_shape_cases() -> Cases:
    for name, code, kind, data in user_and_assistant_shapes() + tool_result_shapes():
        seed: list[JsonValue] = [event(0, kind, data, surfaceOp="append")]
        yield refused(name, code, SHAPE, seed, why=MEANING[code])


def user_and_assistant_shapes() -> list[tuple[str, Code, str, JsonValue]]:
    user = msg.user()
    assistant = msg.assistant(calls=["c1"])
    message = assistant["message"]
    assert isinstance(message, dict)
    return [
        ("a seeded user message needs an id", Code.MESSAGE_UNIDENTIFIED, "user/message", without(user, "id")),
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
            {**assistant, "message": {**message, "role": "user"}},
        ),
        ("a seeded message needs a source", Code.MESSAGE_SOURCE, "user/message", without(user, "source")),
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
            {**assistant, "message": {**message, "source": {"kind": "user"}}},
        ),
        (
            "a seeded assistant message's source is a model even when it names a provider and model",
            Code.MESSAGE_MODEL_SOURCE,
            "assistant/message",
            {**assistant, "message": {**message, "source": {"kind": "agent", "provider": "p", "model": "m"}}},
        ),
        (
            "a seeded assistant message whose source is the user is refused though it names a model",
            Code.MESSAGE_MODEL_SOURCE,
            "assistant/message",
            {**assistant, "message": {**message, "source": {"kind": "user", "provider": "p", "model": "m"}}},
        ),
        (
            "a seeded assistant message's source names its model",
            Code.MESSAGE_MODEL_SOURCE,
            "assistant/message",
            {**assistant, "message": {**message, "source": {"kind": "model", "provider": "p"}}},
        ),
    ]


def tool_result_shapes() -> list[tuple[str, Code, str, JsonValue]]:
    result = msg.result("c1")
    message = result["message"]
    assert isinstance(message, dict) and isinstance(message["content"], list)
    block = message["content"][0]
    assert isinstance(block, dict)

    def with_message(**changes: JsonValue) -> JsonObject:
        return {**result, "message": {**message, **changes}}

    shapes: list[tuple[str, Code, JsonObject]] = [
        (
            "a seeded tool result's source is a tool",
            Code.MESSAGE_TOOL_SOURCE,
            with_message(source={"kind": "model", "callId": "c1"}),
        ),
        (
            "a seeded tool result whose source is the user is refused",
            Code.MESSAGE_TOOL_SOURCE,
            with_message(source={"kind": "user", "callId": "c1"}),
        ),
        (
            "a seeded tool result's source names its call",
            Code.MESSAGE_TOOL_SOURCE,
            with_message(source={"kind": "tool"}),
        ),
        ("a seeded tool result holds a block", Code.MESSAGE_TOOL_BLOCK, with_message(content=[])),
        (
            "a seeded tool result holds exactly one block",
            Code.MESSAGE_TOOL_BLOCK,
            with_message(content=[block, block]),
        ),
        (
            "a seeded tool result's block is a tool-result block",
            Code.MESSAGE_TOOL_BLOCK,
            with_message(content=[{**block, "type": "text"}]),
        ),
        (
            "a seeded tool result's block of type tool-use is not a tool-result block",
            Code.MESSAGE_TOOL_BLOCK,
            with_message(content=[{**block, "type": "tool-use"}]),
        ),
        (
            "a seeded tool-result block's content is an array",
            Code.MESSAGE_TOOL_BLOCK,
            with_message(content=[{**block, "content": "text"}]),
        ),
        (
            "a seeded tool result's block answers the call its source names",
            Code.MESSAGE_TOOL_CALL_ID_MISMATCH,
            with_message(content=[{**block, "toolCallId": "c2"}]),
        ),
        (
            "a seeded tool result's block naming a call that sorts before its source's is refused",
            Code.MESSAGE_TOOL_CALL_ID_MISMATCH,
            with_message(content=[{**block, "toolCallId": "c0"}]),
        ),
    ]
    return [(name, code, "tool/result", data) for name, code, data in shapes]


def without(data: JsonObject, key: str) -> JsonObject:
    return {k: v for k, v in data.items() if k != key}


def surface_cases() -> Cases:
    yield refused(
        "a seeded surface event needs surfaceOp, as on append",
        Code.SURFACE_OP_MISSING,
        SURFACE,
        [event(0, "user/message", msg.user())],
    )
    yield refused(
        "a seeded replace of a node not on the seed's surface keeps the replace rule's code",
        Code.REPLACE_START_NOT_FOUND,
        SURFACE,
        log(
            msg.user(), ("user/message", msg.user("x"), {"surfaceOp": replace(5, 0), "sourceEventSeqs": [0]})
        ),
    )
    yield refused(
        "a seeded tool/result replace obeys the rewrite rule",
        Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT,
        SURFACE,
        log(
            msg.assistant(calls=["c1"]),
            msg.result("c1"),
            (
                "tool/result",
                {**msg.result("c1"), "turn": 9},
                {"surfaceOp": replace(1, 1), "sourceEventSeqs": [1]},
            ),
        ),
    )


cases: Final = chained(
    folding_cases, envelope_cases, order_cases, request_header_cases, message_shape_cases, surface_cases
)
