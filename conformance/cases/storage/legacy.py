"""The read path of DSH's v0 logs (SPEC-DECISIONS D1; notes/dsh-persistence §3.5-§3.6): the
records after a v0 header become events, with the legacy conversions applied (turn/end reasons,
steering messages, messages from before message identity, packed chunk rows) and the retired or
malformed vocabulary refused.
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import APPEND, Cases, chained, event, log, pure
from conformance.cases.files.v0 import PRE_IDENTITY_RESULT
from spec.codes import Code
from spec.format.json_text import encode_json_text as encode
from spec.log.json import JsonObject, JsonValue

UPGRADE = "spec.legacy.upgrade_v0_records"

REFUSALS: Final = {
    Code.LEGACY_MALFORMED_TURN_START: "a v0 turn/start with a trigger is exactly {turn, trigger}, "
    "the trigger naming its kind",
    Code.LEGACY_MALFORMED_TURN_END: "a v0 turn/end's reason has a kind, and a simple kind carries "
    "nothing else",
    Code.LEGACY_MALFORMED_MESSAGE: "a v0 steering/message has one of its two legacy shapes",
    Code.LEGACY_MODE_SET: "mode/set is retired vocabulary a v0 log may not hold",
    Code.LEGACY_HEADER_DELTA: "request/header-delta is retired vocabulary a stored log may not hold",
    Code.LEGACY_FALLBACK_REASON: "a request/header with reason fallback is retired vocabulary",
    Code.UNKNOWN_EVENT_TYPE: "a stored event of an unknown type is refused unless it is marked ignorable",
    Code.MESSAGE_ROLE: "a stored message is checked for its shape, as a seeded one is",
    Code.CORRUPT_LOG: "a v0 log's records are objects numbered contiguously from 0",
}


def conversion_cases() -> Cases:
    yield pure(
        "v0 turn/end reasons are mapped: disposed becomes aborted",
        UPGRADE,
        sessionId="old",
        records=log(("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "disposed"}})),
    )
    yield pure(
        "a legacy error reason becomes an error with a failure",
        UPGRADE,
        sessionId="old",
        records=log(
            ("turn/start", {"turn": 1}),
            ("turn/end", {"turn": 1, "reason": {"kind": "error", "step": 1, "message": "boom"}}),
        ),
    )
    steering = {"turn": 1, "content": [{"type": "text", "text": "wait"}], "source": {"kind": "user"}}
    yield pure(
        "a v0 steering/message becomes a user/message",
        UPGRADE,
        sessionId="old",
        records=log(("turn/start", {"turn": 1}), ("steering/message", steering, APPEND)),
    )
    yield pure(
        "a message from before message identity gets a legacy id",
        UPGRADE,
        sessionId="old",
        records=log(("user/message", {"content": [], "source": {"kind": "user"}}, APPEND)),
    )
    result = PRE_IDENTITY_RESULT
    yield pure(
        "a replacing result from before message identity inherits the id of the message it replaces",
        UPGRADE,
        sessionId="old",
        records=log(
            ("tool/result", result, APPEND),
            (
                "tool/result",
                {**result, "content": [{"type": "text", "text": "[pruned]"}]},
                {"surfaceOp": {"op": "replace", "start": 0, "end": 0}, "sourceEventSeqs": [0]},
            ),
        ),
        comment="the first result gets legacy-message:old:0 and its replacement takes it over",
    )
    yield pure(
        "packed chunk rows in a v0 log are expanded in place",
        UPGRADE,
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
        comment="the row holds seqs 1 and 2, so the record after it is seq 3",
    )


def turn_end_reason_cases() -> Cases:
    """Every v0 turn/end reason form, each turn its own: kept, mapped, or refused."""
    failure: JsonObject = {"message": "boom", "code": "E"}
    full: JsonObject = {**failure, "status": 503, "providerRetryAfterMs": 1.5, "requestId": "r1"}
    accepted: list[JsonObject] = [
        {"kind": "error", "step": 0, "failure": failure},
        {"kind": "error", "step": 2, "failure": full},
        {"kind": "error", "step": 1, "message": "boom", "code": "E"},
        {"kind": "error", "step": 1, "message": "boom"},
        {"kind": "error", "error": failure},
        {"kind": "aborted"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "max-tokens"},
        {"kind": "blocked"},
        {"kind": "custom-kind", "detail": 1},
    ]
    records: list[tuple[str, dict[str, object]]] = []
    for turn, reason in enumerate(accepted, 1):
        records += [("turn/start", {"turn": turn}), ("turn/end", {"turn": turn, "reason": reason})]
    yield pure(
        "every v0 turn/end reason form is kept or mapped: failures with their optional fields, messages "
        "with and without a code, aborted with and without a cause, unknown kinds as they are",
        UPGRADE,
        sessionId="old",
        records=log(*records),
        comment="in order: " + "; ".join(encode(reason) for reason in accepted),
    )
    refused: dict[str, JsonObject] = {
        "a negative step": {"kind": "error", "step": -1, "failure": failure},
        "a fractional step": {"kind": "error", "step": 1.5, "failure": failure},
        "a step given as a string": {"kind": "error", "step": "1", "failure": failure},
        "no step": {"kind": "error", "failure": failure},
        "a failure without a code": {"kind": "error", "step": 1, "failure": {"message": "boom"}},
        "a failure whose code is not a string": {
            "kind": "error",
            "step": 1,
            "failure": {"message": "m", "code": 5},
        },
        "a failure whose message is not a string": {
            "kind": "error",
            "step": 1,
            "failure": {"message": 5, "code": "E"},
        },
        "a failure with a key of its own": {"kind": "error", "step": 1, "failure": {**failure, "extra": 1}},
        "a failure whose status is not a number": {
            "kind": "error",
            "step": 1,
            "failure": {**failure, "status": "503"},
        },
        "a failure whose retry delay is not a number": {
            "kind": "error",
            "step": 1,
            "failure": {**failure, "providerRetryAfterMs": True},
        },
        "a failure whose request id is not a string": {
            "kind": "error",
            "step": 1,
            "failure": {**failure, "requestId": 7},
        },
        "a failure and a message both": {"kind": "error", "step": 1, "failure": failure, "message": "boom"},
        "a message that is not a string": {"kind": "error", "step": 1, "message": 5},
        "a message with a code that is not a string": {"kind": "error", "step": 1, "message": "m", "code": 5},
        "a message with a key of its own": {"kind": "error", "step": 1, "message": "m", "extra": 1},
        "disposed with a key of its own": {"kind": "disposed", "why": "x"},
        "aborted without a cause but with a key of its own": {"kind": "aborted", "why": "x"},
        "a kind that is not a string": {"kind": 5},
    }
    for what, reason in refused.items():
        yield pure(
            f"a v0 turn/end error reason with {what} is malformed"
            if reason.get("kind") == "error"
            else f"a v0 turn/end reason, {what}, is malformed",
            UPGRADE,
            Code.LEGACY_MALFORMED_TURN_END,
            why=REFUSALS[Code.LEGACY_MALFORMED_TURN_END],
            sessionId="old",
            records=log(("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": reason})),
        )
    for what, data in {
        "turn 0": {"turn": 0, "reason": {"kind": "completed"}},
        "a key besides turn and reason": {"turn": 1, "reason": {"kind": "completed"}, "extra": 1},
    }.items():
        yield pure(
            f"a v0 turn/end with {what} is malformed",
            UPGRADE,
            Code.LEGACY_MALFORMED_TURN_END,
            why=REFUSALS[Code.LEGACY_MALFORMED_TURN_END],
            sessionId="old",
            records=log(("turn/start", {"turn": 1}), ("turn/end", data)),
        )


def legacy_form_cases() -> Cases:
    """The legacy forms beside the turn/end reasons, each read from a v0 log as its rule says."""
    header = {"header": {"config": {"provider": "p", "model": "m"}}}
    text: JsonValue = [{"type": "text", "text": "hi"}]
    converted = log(
        ("turn/start", {"turn": 1, "trigger": {"kind": "user"}}),
        ("request/header", {**header, "reason": "change"}),
        ("request/header", {**header, "reason": "auto"}),
        ("steering/message", {"turn": 1, "message": msg.user("u9", "wait")}, APPEND),
        ("user/message", {"content": text, "source": {"kind": "user"}}, APPEND),
        (
            "assistant/message",
            {"turn": 1, "step": 1, "content": text, "provenance": {"provider": "p", "model": "m"}},
            APPEND,
        ),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    )
    yield pure(
        "a v0 log's legacy forms are read: a trigger dropped, request/headers of other reasons kept, a "
        "wrapped steering message unwrapped, messages from before message identity given ids",
        UPGRADE,
        sessionId="old",
        records=converted,
        comment="the request/header reasons sort before and after fallback; the assistant message keeps its "
        "turn and step beside the message its content and provenance become",
    )
    steering: JsonObject = {"turn": 1, "content": text, "source": {"kind": "user"}}
    malformed: dict[Code, dict[str, tuple[str, JsonObject]]] = {
        Code.LEGACY_MALFORMED_TURN_START: {
            "a trigger whose kind is empty": ("turn/start", {"turn": 1, "trigger": {"kind": ""}}),
            "a trigger whose kind is not a string": ("turn/start", {"turn": 1, "trigger": {"kind": 5}}),
            "a trigger that is not an object": ("turn/start", {"turn": 1, "trigger": "user"}),
            "a trigger and turn 0": ("turn/start", {"turn": 0, "trigger": {"kind": "user"}}),
            "a trigger and a fractional turn": ("turn/start", {"turn": 1.5, "trigger": {"kind": "user"}}),
        },
        Code.LEGACY_MALFORMED_MESSAGE: {
            "a wrapped message and a turn given as a string": (
                "steering/message",
                {"turn": "1", "message": msg.user("u9")},
            ),
            "a wrapped message and a key of its own": (
                "steering/message",
                {"turn": 1, "message": msg.user("u9"), "extra": 1},
            ),
            "content and source and a key of its own": ("steering/message", {**steering, "extra": 1}),
            "content and source and no turn": (
                "steering/message",
                {"content": text, "source": {"kind": "user"}},
            ),
        },
    }
    for code, forms in malformed.items():
        for what, (kind, data) in forms.items():
            yield pure(
                f"a v0 {kind} with {what} is malformed",
                UPGRADE,
                code,
                why=REFUSALS[code],
                sessionId="old",
                records=log(("turn/start", {"turn": 1}), (kind, data)),
            )


def kept_cases() -> Cases:
    turn_start = ("turn/start", {"turn": 1, "trigger": {"kind": "user"}})
    current = log(turn_start, msg.user(), ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}))
    yield pure("a v0 log in the current vocabulary reads as it is", UPGRADE, sessionId="old", records=current)
    yield pure(
        "an unknown event type marked ignorable is kept",
        UPGRADE,
        why=REFUSALS[Code.UNKNOWN_EVENT_TYPE],
        sessionId="old",
        records=log(("custom/x", {}, {"ignorable": True})),
    )


def refused_cases() -> Cases:
    refused: list[tuple[str, Code, list[JsonValue]]] = [
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
            log(("request/header", {**msg.header(), "reason": "fallback"})),
        ),
        (
            "an unknown event type not marked ignorable is refused",
            Code.UNKNOWN_EVENT_TYPE,
            log(("custom/x", {})),
        ),
        (
            "a stored message is checked for its shape",
            Code.MESSAGE_ROLE,
            log(("user/message", {**msg.user(), "role": "system"}, APPEND)),
        ),
        (
            "a seq gap in a stored log is corruption",
            Code.CORRUPT_LOG,
            [event(0, "turn/start", {"turn": 1}), event(2, "custom/x", {}, ignorable=True)],
        ),
        ("a stored record that is not an object is corruption", Code.CORRUPT_LOG, [5]),
    ]
    for name, code, records in refused:
        yield pure(name, UPGRADE, code, why=REFUSALS[code], sessionId="old", records=records)


def boundary_cases() -> Cases:
    """The edges of the legacy read path's tests: what each compares with, exactly (a type that is
    no string, a repeated seq, a reason that sorts past another, the key set of a message from
    before message identity, which replace target a result's id comes from)."""
    old = {"sessionId": "old"}
    text: JsonValue = [{"type": "text", "text": "hi"}]
    user: JsonObject = {"content": text, "source": {"kind": "user"}}
    result: JsonObject = PRE_IDENTITY_RESULT
    bare_result = {key: result[key] for key in ("callId", "content", "isError")}
    yield pure(
        "an ignorable v0 event whose type is not a string is kept",
        UPGRADE,
        why=REFUSALS[Code.UNKNOWN_EVENT_TYPE],
        records=[{"type": [], "seq": 0, "time": 0, "data": {}, "ignorable": True}],
        **old,
    )
    yield pure(
        "an unknown event type after a known one is refused",
        UPGRADE,
        Code.UNKNOWN_EVENT_TYPE,
        why=REFUSALS[Code.UNKNOWN_EVENT_TYPE],
        records=log(("turn/start", {"turn": 1}), ("custom/x", {})),
        **old,
    )
    yield pure(
        "an unknown event type marked ignorable with 1, not true, is refused",
        UPGRADE,
        Code.UNKNOWN_EVENT_TYPE,
        why=REFUSALS[Code.UNKNOWN_EVENT_TYPE],
        records=log(("custom/x", {}, {"ignorable": 1})),
        **old,
    )
    yield pure(
        "a repeated seq in a v0 log is corruption",
        UPGRADE,
        Code.CORRUPT_LOG,
        why=REFUSALS[Code.CORRUPT_LOG],
        records=[event(0, "turn/start", {"turn": 1}), event(0, "custom/x", {}, ignorable=True)],
        **old,
    )
    yield pure(
        "a request/header whose reason sorts after fallback is kept",
        UPGRADE,
        records=log(("request/header", {**msg.header(), "reason": "user"})),
        **old,
    )
    yield pure(
        "v0 turn/end kinds that sort before aborted and after error pass unchanged",
        UPGRADE,
        records=log(
            ("turn/start", {"turn": 1}),
            ("turn/end", {"turn": 1, "reason": {"kind": "abandoned"}}),
            ("turn/start", {"turn": 2}),
            ("turn/end", {"turn": 2, "reason": {"kind": "timeout"}}),
        ),
        **old,
    )
    yield pure(
        "a user/message from before message identity with a key besides content and source gets an id",
        UPGRADE,
        records=log(("user/message", {**user, "turn": 1}, APPEND)),
        **old,
    )
    yield pure(
        "a user/message with content but no source is not one from before message identity",
        UPGRADE,
        Code.MESSAGE_UNIDENTIFIED,
        why=REFUSALS[Code.MESSAGE_ROLE],
        records=log(("user/message", {"content": text}, APPEND)),
        **old,
    )
    yield pure(
        "an assistant/message of exactly content and provenance is one from before message identity",
        UPGRADE,
        records=log(
            ("assistant/message", {"content": text, "provenance": {"provider": "p", "model": "m"}}, APPEND)
        ),
        **old,
    )
    yield pure(
        "an assistant/message with content but no provenance is not one from before message identity",
        UPGRADE,
        Code.MESSAGE_UNIDENTIFIED,
        why=REFUSALS[Code.MESSAGE_ROLE],
        records=log(("assistant/message", {"turn": 1, "step": 1, "content": text}, APPEND)),
        **old,
    )
    yield pure(
        "a tool/result of exactly callId, content and isError is one from before message identity",
        UPGRADE,
        records=log(("tool/result", bare_result, APPEND)),
        **old,
    )
    yield pure(
        "a tool/result with a callId and content but no isError is not one from before message identity",
        UPGRADE,
        Code.MESSAGE_UNIDENTIFIED,
        why=REFUSALS[Code.MESSAGE_ROLE],
        records=log(("tool/result", {"callId": "c1", "content": []}, APPEND)),
        **old,
    )
    targets: dict[str, JsonValue] = {
        "a seq past the log's end": 5,
        "its own seq": 1,
        "a negative seq": -1,
    }
    for what, start in targets.items():
        yield pure(
            f"a replacing result from before message identity whose target is {what} inherits no id",
            UPGRADE,
            Code.MESSAGE_UNIDENTIFIED,
            why=REFUSALS[Code.MESSAGE_ROLE],
            records=log(
                ("user/message", user, APPEND),
                ("tool/result", result, {"surfaceOp": {"op": "replace", "start": start, "end": start}}),
            ),
            **old,
        )
    yield pure(
        "a replacing result from before message identity inherits a user message's own id",
        UPGRADE,
        records=log(
            ("user/message", user, APPEND),
            ("tool/result", result, {"surfaceOp": {"op": "replace", "start": 0, "end": 0}}),
        ),
        comment="a user/message holds its id in its data, the other message events under message",
        **old,
    )
    yield pure(
        "a replacing result from before message identity inherits no id from an event that is no message",
        UPGRADE,
        Code.MESSAGE_UNIDENTIFIED,
        why=REFUSALS[Code.MESSAGE_ROLE],
        records=log(
            ("x-custom/y", {"id": "x"}, {"ignorable": True}),
            ("tool/result", result, {"surfaceOp": {"op": "replace", "start": 0, "end": 0}}),
        ),
        comment="the event's type sorts after user/message and its data has an id",
        **old,
    )
    yield pure(
        "only a replace's start names the message whose id a result from before message identity takes",
        UPGRADE,
        records=log(
            ("user/message", user, APPEND),
            ("tool/result", result, {"surfaceOp": {"op": "append", "start": 0}}),
            ("tool/result", result, {"surfaceOp": {"op": "truncate", "start": 0}}),
            ("tool/result", result, {"surfaceOp": {"op": "replace", "start": "0", "end": 0}}),
        ),
        comment="an append or another op with a start, and a replace whose start is a string, mint the "
        "result's own id",
        **old,
    )


cases: Final = chained(
    conversion_cases, turn_end_reason_cases, legacy_form_cases, kept_cases, refused_cases, boundary_cases
)
