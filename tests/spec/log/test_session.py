"""The pure session model: construction, seeds, headers, append (notes/dsh-session-core §1, §4-§6;
§12 session.spec.ts, the cases that are pure rules)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from event_builders import (
    assistant,
    assistant_data,
    at,
    chunk,
    event,
    replace,
    tool_result,
    turn_end,
    turn_start,
    user,
    user_data,
)
from refusals import refusal

from spec.codes import Code, SpecError
from spec.log.header import build_header
from spec.log.json import FrozenDict, thaw_json
from spec.log.seed import needs_end_seed, validate_message_shape, validate_seed_event
from spec.log.session import (
    ABSENT,
    SessionState,
    append_event,
    apply_append,
    create_session_state,
    derive_session_messages,
    plan_event,
    plan_session_id,
    validate_new_session_id,
)

NOW = 5_000  # the pinned clock, ms


def header(session_id: str = "s", seeded: bool = False) -> FrozenDict:
    return build_header(session_id, {"createdAt": 1, "cwd": "/ws"}, NOW, seeded)


def create(seed: list[Any] | None = None, session_id: str = "s") -> SessionState:
    return create_session_state(session_id, seed, header(session_id, seed is not None), NOW)


def restore(seed: list[Any], record: Any = None) -> SessionState:
    stored = thaw_json(header(seeded=True)) if record is None else record
    return create_session_state("s", seed, stored, NOW, mode="restore")


def seed_error(seed: list[Any], restore_mode: bool = False) -> SpecError:
    return refusal(lambda: restore(seed) if restore_mode else create(seed))


def append_error(state: SessionState, *args: Any, **kwargs: Any) -> SpecError:
    return refusal(lambda: append_event(state, *args, **kwargs))


def request_header(
    seq: int, config: Any = None, reason: str = "initial", **header_extra: Any
) -> dict[str, Any]:
    config = {"provider": "p", "model": "m"} if config is None else config
    return event(seq, "request/header", {"header": {"config": config, **header_extra}, "reason": reason})


def kinds(state: SessionState) -> list[Any]:
    return [item["type"] for item in state.events]


# --- the end-seed rule (§4.2 step 5, §4.4) ------------------------------------------------------


def test_a_session_without_a_seed_starts_empty() -> None:
    state = create()
    assert (state.events, state.first_live_seq) == ((), 0)


def test_an_empty_seed_gets_an_end_seed_marker_at_seq_zero() -> None:
    state = create([])
    assert (kinds(state), state.events[0]["seq"], state.first_live_seq) == (["session/end-seed"], 0, 0)


def test_a_seed_gets_its_end_seed_marker_after_the_seed() -> None:
    state = create([turn_start(0), user(1), turn_end(2)])
    assert kinds(state)[-1] == "session/end-seed"
    assert (state.events[3]["seq"], len(state.events), state.first_live_seq) == (3, 4, 3)


def test_the_end_seed_marker_is_stamped_with_the_clock_and_empty_data() -> None:
    marker = create([]).events[0]
    assert (marker["time"], marker["data"]) == (NOW, {})
    assert set(marker) == {"type", "seq", "time", "data"}


def test_a_seed_already_ending_with_end_seed_is_not_marked_again() -> None:
    seed = [user(0), event(1, "session/end-seed", {})]
    state = create(seed)
    assert (len(state.events), state.first_live_seq) == (2, 2)


def test_reopening_a_marked_empty_seed_does_not_grow_it() -> None:
    once = create([])
    twice = create(list(once.events))
    assert (twice.events, twice.first_live_seq) == (once.events, 1)


def test_replaying_a_session_twice_is_idempotent() -> None:
    once = create([turn_start(0), user(1), assistant(2)])
    assert create(list(create(list(once.events)).events)).events == once.events


def test_a_seed_may_stop_inside_an_open_turn() -> None:
    state = create([turn_start(0), user(1)])
    assert kinds(state) == ["turn/start", "user/message", "session/end-seed"]


@pytest.mark.parametrize(
    ("seed_given", "types", "expected"),
    [
        (False, [], False),
        (False, ["user/message"], False),
        (True, [], True),
        (True, ["user/message"], True),
        (True, ["session/end-seed"], False),
        (True, ["session/end-seed", "turn/start"], True),
    ],
)
def test_needs_end_seed_follows_the_table(seed_given: bool, types: list[str], expected: bool) -> None:
    events = [event(index, kind, {}) for index, kind in enumerate(types)]
    assert needs_end_seed(seed_given, events) is expected


def test_a_replayed_log_keeps_its_events_and_messages_with_one_more_seq() -> None:
    live = create()
    for kind, data, op in [
        ("turn/start", {"turn": 1}, ABSENT),
        ("user/message", user_data(), "append"),
        ("assistant/message", assistant_data(), "append"),
    ]:
        live, _ = append_event(live, kind, data, op, time=NOW)
    replayed = create(list(live.events))
    assert replayed.events[:3] == live.events
    assert (len(replayed.events), replayed.first_live_seq) == (4, 3)
    assert derive_session_messages(replayed) == derive_session_messages(live)


# --- seed validation (§1.3, §1.4, §4.2) --------------------------------------------------------


def test_a_well_formed_seed_is_accepted() -> None:
    assert create([turn_start(0), user(1), turn_end(2)]).first_live_seq == 3


def test_a_seed_entry_outside_the_json_domain_is_rejected() -> None:
    error = seed_error([user(0), event(1, "plugin/x", (1, 2))])
    assert (error.code, error.message) == (
        Code.SEED_NOT_JSON,
        "seed event at index 1 is not losslessly JSON-serializable",
    )


def test_non_json_surface_metadata_in_a_seed_is_rejected() -> None:
    assert (
        seed_error([user(0), user(1, "x", {"op": "replace", "start": math.nan, "end": 0}, [0])]).code
        == Code.SEED_NOT_JSON
    )


@pytest.mark.parametrize(
    "entry", [None, 5, "event", [1], []], ids=["null", "number", "string", "array", "empty-array"]
)
def test_a_seed_entry_that_is_not_an_object_has_an_invalid_envelope(entry: Any) -> None:
    error = seed_error([entry])
    assert (error.code, error.message) == (
        Code.SEED_ENVELOPE_INVALID,
        "seed event at index 0 has an invalid event envelope",
    )


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"extra": 1}, id="unknown-key"),
        pytest.param({"type": 5}, id="type-not-string"),
        pytest.param({"seq": -1}, id="negative-seq"),
        pytest.param({"seq": 0.5}, id="fractional-seq"),
        pytest.param({"seq": True}, id="boolean-seq"),
        pytest.param({"time": 0.5}, id="fractional-time"),
        pytest.param({"time": "1"}, id="string-time"),
        pytest.param({"time": 2.0**53}, id="unsafe-time"),
        pytest.param({"ignorable": False}, id="ignorable-false"),
        pytest.param({"ignorable": 1}, id="ignorable-one"),
    ],
)
def test_a_seed_event_with_a_bad_envelope_field_is_rejected(bad: dict[str, Any]) -> None:
    assert seed_error([{**event(0, "plugin/x", {}), **bad}]).code == Code.SEED_ENVELOPE_INVALID


@pytest.mark.parametrize("key", ["type", "seq", "time", "data"])
def test_a_seed_event_missing_a_required_field_is_rejected(key: str) -> None:
    entry = event(0, "plugin/x", {})
    del entry[key]
    assert seed_error([entry]).code == Code.SEED_ENVELOPE_INVALID


def test_a_seed_event_may_have_null_data_a_negative_time_and_an_ignorable_mark() -> None:
    state = create([{**event(0, "plugin/x", None, time=-5), "ignorable": True}])
    assert state.events[0]["ignorable"] is True and state.events[0]["data"] is None


def test_a_legacy_header_delta_is_rejected_before_the_envelope_is_checked() -> None:
    error = seed_error([{"type": "request/header-delta", "extra": 1}])
    assert error.code == Code.LEGACY_HEADER_DELTA
    assert error.message == "seed event at index 0 uses unsupported legacy request/header-delta format"


def test_a_seed_event_whose_seq_is_not_its_index_is_rejected() -> None:
    error = seed_error([user(0), user(2)])
    assert error.code == Code.SEED_SEQ_MISMATCH
    assert error.message == "seed event at index 1 has seq 2 (expected 1); seed must be contiguous from 0"


def test_a_surface_error_in_a_seed_keeps_its_code_and_names_the_index() -> None:
    error = seed_error([user(0), event(1, "user/message", user_data("u1"))])
    assert error.code == Code.SURFACE_OP_MISSING
    assert (
        error.message
        == 'invalid seed event at index 1: session event "user/message" is surface-eligible and requires a surfaceOp marker'
    )


@pytest.mark.parametrize(
    ("entry", "code", "message"),
    [
        (
            request_header(0, config={"provider": "p"}),
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            "seed request/header at index 0 lacks provider/model",
        ),
        (
            event(0, "request/header", None),
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            "seed request/header at index 0 lacks provider/model",
        ),
        (
            event(0, "request/header", {"header": "h"}),
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            "seed request/header at index 0 lacks provider/model",
        ),
        (
            request_header(0, config={"provider": "", "model": "m"}),
            Code.REQUEST_HEADER_PROVIDER_MODEL,
            "seed request/header at index 0 lacks provider/model",
        ),
        (
            request_header(0, config={"provider": "p", "model": "m", "reasoningEffort": ""}),
            Code.REQUEST_HEADER_REASONING_EFFORT,
            "seed request/header at index 0 has an invalid reasoningEffort",
        ),
        (
            request_header(0, config={"provider": "p", "model": "m", "reasoningEffort": 1}),
            Code.REQUEST_HEADER_REASONING_EFFORT,
            "seed request/header at index 0 has an invalid reasoningEffort",
        ),
        (
            assistant(0)
            | {"data": {"message": {**assistant_data()["message"], "source": {"kind": "model"}}}},
            Code.MESSAGE_MODEL_SOURCE,
            "seed assistant/message at index 0 message must have model source",
        ),
    ],
)
def test_pre_provider_request_headers_and_assistant_messages_are_rejected(
    entry: Any, code: Code, message: str
) -> None:
    error = seed_error([entry])
    assert (error.code, error.message) == (code, message)


@pytest.mark.parametrize(
    "markers",
    [
        pytest.param(None, id="null"),
        pytest.param([], id="array"),
        pytest.param({"unknown": True}, id="unknown-key"),
        pytest.param({"maxTokens": False}, id="false-marker"),
        pytest.param({"reasoningEffort": True}, id="marks-an-unset-field"),
    ],
)
def test_invalid_adapter_default_markers_are_rejected(markers: Any) -> None:
    error = seed_error([request_header(0, adapterDefaults=markers)])
    assert (error.code, error.message) == (
        Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
        "seed request/header at index 0 has invalid adapterDefaults",
    )


@pytest.mark.parametrize(
    ("config", "markers"),
    [
        ({"provider": "p", "model": "m"}, {}),
        ({"provider": "p", "model": "m", "reasoningEffort": "high"}, {"reasoningEffort": True}),
        ({"provider": "p", "model": "m", "maxTokens": 10}, {"maxTokens": True}),
    ],
)
def test_valid_request_headers_round_trip(config: dict[str, Any], markers: dict[str, Any]) -> None:
    entry = request_header(0, config=config, adapterDefaults=markers)
    assert create([entry]).events[0] == entry


def test_the_legacy_fallback_reason_is_rejected_after_the_shape_check() -> None:
    assert seed_error([request_header(0, reason="fallback")]).code == Code.LEGACY_FALLBACK_REASON
    assert (
        seed_error([request_header(0, config={}, reason="fallback")]).code
        == Code.REQUEST_HEADER_PROVIDER_MODEL
    )


def broken(kind: str, path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    built = {"user": user(0), "assistant": assistant(0), "tool": tool_result(0)}[kind]
    target: Any = built["data"] if kind == "user" else built["data"]["message"]
    for key in path[:-1]:
        target = target[key]
    if value is ABSENT:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return built


@pytest.mark.parametrize(
    ("entry", "code", "fragment"),
    [
        (
            broken("user", ("id",), ABSENT),
            Code.MESSAGE_UNIDENTIFIED,
            "seed user/message at index 0 lacks an identified message",
        ),
        (
            broken("tool", ("id",), ""),
            Code.MESSAGE_UNIDENTIFIED,
            "seed tool/result at index 0 lacks an identified message",
        ),
        (broken("user", ("role",), "assistant"), Code.MESSAGE_ROLE, 'message must have role "user"'),
        (broken("assistant", ("role",), "user"), Code.MESSAGE_ROLE, 'message must have role "assistant"'),
        (broken("user", ("source",), {"kind": ""}), Code.MESSAGE_SOURCE, "message has invalid source"),
        (broken("user", ("content",), "text"), Code.MESSAGE_CONTENT, "message has invalid content"),
        (
            broken("tool", ("source", "kind"), "user"),
            Code.MESSAGE_TOOL_SOURCE,
            "message must have tool source",
        ),
        (
            broken("tool", ("content",), []),
            Code.MESSAGE_TOOL_BLOCK,
            "message must contain one tool-result block",
        ),
        (
            broken("tool", ("content", 0, "content"), "x"),
            Code.MESSAGE_TOOL_BLOCK,
            "message must contain one tool-result block",
        ),
        (
            broken("tool", ("content", 0, "toolCallId"), "c2"),
            Code.MESSAGE_TOOL_CALL_ID_MISMATCH,
            "message has mismatched tool call ids",
        ),
    ],
)
def test_malformed_seeded_messages_are_rejected(entry: Any, code: Code, fragment: str) -> None:
    error = seed_error([entry])
    assert error.code == code and fragment in error.message


def test_plugin_blocks_and_sources_pass_the_message_shape_check() -> None:
    data = {
        "id": "p1",
        "role": "user",
        "source": {"kind": "plugin", "plugin": "x"},
        "content": [{"type": "plugin-block"}],
    }
    assert create([event(0, "user/message", data, "append")]).surface.nodes == (0,)


def test_an_unknown_plugin_type_with_null_data_is_accepted() -> None:
    assert kinds(create([event(0, "plugin/event", None)])) == ["plugin/event", "session/end-seed"]


def test_the_message_shape_check_names_its_subject() -> None:
    caught = refusal(
        lambda: validate_message_shape("session event at seq 7", broken("user", ("role",), "system"))
    )
    assert caught.message == 'session event at seq 7 message must have role "user"'


def test_the_message_shape_check_ignores_log_only_events() -> None:
    validate_message_shape("session event at seq 0", event(0, "turn/start", None))


def test_a_seed_is_a_snapshot_of_what_the_caller_passed() -> None:
    seed = [user(0, "original")]
    state = create(seed)
    seed[0]["data"]["content"][0]["text"] = "changed"
    assert at(state.events[0], "data", "content", 0, "text") == "original"


def test_restore_mode_takes_ownership_and_freezes_in_place() -> None:
    entry = user(0)
    state = restore([entry])
    assert isinstance(state.events[0], FrozenDict) and isinstance(state.events[0]["data"], FrozenDict)


def test_restore_mode_freezes_twenty_thousand_levels_of_data() -> None:
    data: dict[str, Any] = {}
    cursor = data
    for _ in range(20_000):
        cursor["k"] = {}
        cursor = cursor["k"]
    state = restore([event(0, "plugin/deep", data)])
    with pytest.raises(TypeError):
        at(state.events[0], "data", "k", "k")["x"] = 1


def test_restore_mode_rejects_a_null_entry_as_an_invalid_envelope() -> None:
    assert seed_error([None], restore_mode=True).code == Code.SEED_ENVELOPE_INVALID


def test_a_restore_that_keeps_the_text_judges_each_entry_unfrozen_with_the_same_verdicts() -> None:
    entry = user(0)
    kept = validate_seed_event(0, entry, mode="restore-kept")
    assert kept is entry and type(kept["data"]) is dict  # judged as it is: never frozen, never copied
    for broken in ([None], [{**user(0), "extra": 1}], [user(1)], [{**user(0), "surfaceOp": "bad"}]):
        frozen = seed_error(thaw_json(broken), restore_mode=True)  # type: ignore[arg-type]
        stored = thaw_json(header(seeded=True))
        with pytest.raises(SpecError) as caught:
            create_session_state("s", thaw_json(broken), stored, NOW, mode="restore-kept")  # type: ignore[arg-type]
        assert (caught.value.code, caught.value.message) == (frozen.code, frozen.message)


def test_a_restore_checks_no_message_its_read_path_checked_and_every_other_one() -> None:
    """``messages_checked``: the first that many restored entries' messages were checked by the
    storage read path and are not checked again; the entries after them (closers) are, and the
    envelope, surface and seq rules still judge every entry."""
    malformed = {**user(0), "data": {**user(0)["data"], "role": "system"}}
    assert seed_error([malformed], restore_mode=True).code == Code.MESSAGE_ROLE
    stored = header(seeded=True)
    state = create_session_state("s", [malformed], stored, NOW, mode="restore", messages_checked=1)
    assert at(state.events[0], "data", "role") == "system"
    for checked in (0, 1):
        with pytest.raises(SpecError) as caught:
            create_session_state(
                "s", [user(0), malformed], stored, NOW, mode="restore", messages_checked=checked
            )
        assert caught.value.code == Code.MESSAGE_ROLE
    with pytest.raises(SpecError) as caught:  # only a restore trusts its read path
        create_session_state("s", [malformed], None, NOW, messages_checked=1)
    assert caught.value.code == Code.MESSAGE_ROLE
    for broken in ([{**malformed, "extra": 1}], [{**malformed, "seq": 1}]):
        with pytest.raises(SpecError) as caught:
            create_session_state("s", broken, stored, NOW, mode="restore", messages_checked=1)
        assert caught.value.code in (Code.SEED_ENVELOPE_INVALID, Code.SEED_SEQ_MISMATCH)


def test_validate_seed_event_returns_the_frozen_event() -> None:
    frozen = validate_seed_event(0, user(0), "snapshot")
    with pytest.raises(TypeError):
        frozen["seq"] = 1


# --- the header (§1.5) ------------------------------------------------------------------------


def test_a_snapshot_header_is_validated_after_the_seed() -> None:
    assert (
        refusal(lambda: create_session_state("s", [user(1)], {"version": 4, "id": "other"}, NOW)).code
        == Code.SEED_SEQ_MISMATCH
    )


def test_a_restored_header_is_validated_before_the_seed() -> None:
    assert refusal(lambda: restore([user(1)], {"version": 4, "id": "other"})).code == Code.HEADER_ID_MISMATCH


def test_a_restored_header_that_is_not_an_object_is_not_a_plain_record() -> None:
    assert refusal(lambda: restore([], [1])).code == Code.HEADER_NOT_RECORD


def test_a_supplied_header_outside_the_json_domain_is_rejected() -> None:
    assert (
        refusal(lambda: create_session_state("s", None, {**header(), "extra": (1,)}, NOW)).code
        == Code.HEADER_NOT_JSON
    )


def test_a_supplied_header_is_detached_and_frozen() -> None:
    supplied = thaw_json(header())
    state = create_session_state("s", None, supplied, NOW)
    at(supplied)["cwd"] = "/elsewhere"
    assert state.header["cwd"] == "/ws"
    with pytest.raises(TypeError):
        state.header["cwd"] = "/x"


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("version", 0, Code.HEADER_VERSION),
        ("id", "other", Code.HEADER_ID_MISMATCH),
        ("createdAt", -1, Code.HEADER_CREATED_AT),
        ("cwd", "relative", Code.HEADER_CWD),
        ("cwd", "", Code.HEADER_CWD),
        ("parentSession", 1, Code.HEADER_PARENT_SESSION),
        ("seedLength", 0.5, Code.HEADER_SEED_LENGTH),
        ("origin", "user", Code.HEADER_ORIGIN),
        ("delegationDepth", -1, Code.HEADER_DELEGATION_DEPTH),
        ("agentPreset", 1, Code.HEADER_AGENT_PRESET),
        ("isSeeded", "yes", Code.HEADER_IS_SEEDED),
    ],
)
def test_a_supplied_header_with_an_invalid_field_is_rejected(field: str, value: Any, code: Code) -> None:
    assert refusal(lambda: create_session_state("s", None, {**header(), field: value}, NOW)).code == code


def test_unknown_header_keys_are_kept() -> None:
    assert create_session_state("s", None, {**header(), "custom": [1]}, NOW).header["custom"] == [1]


# --- append (§5) ------------------------------------------------------------------------------


def test_an_appended_event_has_the_next_seq_the_given_time_and_the_append_key_order() -> None:
    state, _ = append_event(create(), "user/message", user_data("u0"), "append", time=7)
    _, appended = append_event(state, "user/message", user_data("u1"), "append", [0], time=8)
    assert list(appended) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    assert (appended["seq"], appended["time"]) == (1, 8)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param((1,), id="tuple"),
        pytest.param({"n": math.inf}, id="infinity"),
        pytest.param([1, 2**60, 3], id="unsafe-int"),
        pytest.param({"f": len}, id="function"),
        pytest.param({1, 2}, id="set"),
        pytest.param(b"x", id="bytes"),
    ],
)
def test_non_json_event_data_is_rejected_and_the_log_stays_empty(data: Any) -> None:
    state = create()
    error = append_error(state, "plugin/x", data)
    assert error.code == Code.DATA_NOT_JSON
    assert error.message == 'session event "plugin/x" carries non-JSON-serializable data'


def test_cyclic_event_data_is_rejected() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    assert append_error(create(), "plugin/x", cycle).code == Code.DATA_NOT_JSON


@pytest.mark.parametrize(
    ("surface_op", "sources"),
    [(("append",), ABSENT), ("append", (0,)), ({"op": "replace", "start": math.nan, "end": 0}, [0])],
)
def test_non_json_surface_metadata_is_rejected(surface_op: Any, sources: Any) -> None:
    state, _ = append_event(create(), "user/message", user_data("u0"), "append")
    assert (
        append_error(state, "user/message", user_data(), surface_op, sources).code
        == Code.SURFACE_METADATA_NOT_JSON
    )


@pytest.mark.parametrize(
    ("surface_op", "sources", "code"),
    [
        ("invalid", ABSENT, Code.SURFACE_OP_INVALID),
        (None, ABSENT, Code.SURFACE_OP_INVALID),
        (replace(-1, 0), [0], Code.REPLACE_OP_INVALID),
        ("append", [0, -1], Code.PROVENANCE_NOT_SEQ),
        (ABSENT, ABSENT, Code.SURFACE_OP_MISSING),
    ],
)
def test_invalid_plain_surface_metadata_is_rejected_at_append(
    surface_op: Any, sources: Any, code: Code
) -> None:
    state, _ = append_event(create(), "user/message", user_data("u0"), "append")
    assert append_error(state, "user/message", user_data(), surface_op, sources).code == code


@pytest.mark.parametrize(
    ("surface_op", "sources", "code"),
    [("append", ABSENT, Code.SURFACE_OP_ON_LOG_ONLY), (ABSENT, [0], Code.PROVENANCE_ON_LOG_ONLY)],
)
def test_surface_metadata_on_a_log_only_append_is_rejected(surface_op: Any, sources: Any, code: Code) -> None:
    state, _ = append_event(create(), "user/message", user_data("u0"), "append")
    assert append_error(state, "turn/start", {"turn": 1}, surface_op, sources).code == code


@pytest.mark.parametrize(("surface_op", "sources"), [("append", ABSENT), (ABSENT, [0])])
def test_surface_metadata_on_a_log_only_seed_event_is_rejected(surface_op: Any, sources: Any) -> None:
    assert seed_error([user(0), event(1, "turn/start", {"turn": 1}, surface_op, sources)]).message.startswith(
        "invalid seed event at index 1: "
    )


def test_a_null_surface_op_is_not_the_same_as_no_surface_op() -> None:
    assert append_error(create(), "turn/start", {"turn": 1}, None).code == Code.SURFACE_OP_ON_LOG_ONLY
    assert append_event(create(), "turn/start", {"turn": 1})[1]["type"] == "turn/start"


@pytest.mark.parametrize("event_type", [None, 5, ""])
def test_an_event_type_must_be_a_non_empty_string(event_type: Any) -> None:
    assert append_error(create(), event_type, {}).code == Code.EVENT_TYPE_INVALID


def test_append_rejects_the_legacy_request_header_vocabulary() -> None:
    delta = append_error(create(), "request/header-delta", {})
    fallback = append_error(
        create(),
        "request/header",
        {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "fallback"},
    )
    assert (delta.code, fallback.code) == (Code.LEGACY_HEADER_DELTA, Code.LEGACY_FALLBACK_REASON)
    assert (
        fallback.message
        == 'session event "request/header" uses unsupported legacy request/header reason "fallback"'
    )


def test_append_checks_data_then_vocabulary_then_metadata_then_surface() -> None:
    assert append_error(create(), "request/header-delta", [math.nan]).code == Code.DATA_NOT_JSON
    assert append_error(create(), "request/header-delta", {}, (1,)).code == Code.LEGACY_HEADER_DELTA
    assert append_error(create(), "turn/start", {}, (1,)).code == Code.SURFACE_METADATA_NOT_JSON


def test_append_does_not_check_message_shapes_but_a_seed_does() -> None:
    state, _ = append_event(
        create(), "user/message", {"content": [], "source": {"kind": "user"}, "extra": [1]}, "append"
    )
    assert seed_error(list(state.events)).code == Code.MESSAGE_UNIDENTIFIED


def test_append_does_not_check_request_header_shapes_but_a_seed_does() -> None:
    state, _ = append_event(create(), "request/header", {"header": {}, "reason": "initial"})
    assert seed_error(list(state.events)).code == Code.REQUEST_HEADER_PROVIDER_MODEL


def test_a_rejected_append_leaves_the_state_equal_and_consumes_no_seq() -> None:
    state, _ = append_event(create(), "user/message", user_data("u0"), "append")
    before = state
    append_error(state, "user/message", user_data(), replace(0, 0), [])
    assert state == before
    _, appended = append_event(state, "user/message", user_data("u1"), "append")
    assert appended["seq"] == 1


def test_planning_an_append_changes_nothing_and_applying_it_equals_appending() -> None:
    state, _ = append_event(create(), "user/message", user_data("u0"), "append")
    planned, plan = plan_event(
        state.surface.nodes, state.events, "user/message", user_data("u1"), replace(0, 0), [0], time=3
    )
    assert len(state.events) == 1
    assert (
        apply_append(state, planned, plan)
        == append_event(state, "user/message", user_data("u1"), replace(0, 0), [0], time=3)[0]
    )


def test_an_appended_event_is_a_detached_snapshot() -> None:
    data = user_data("u0", "original")
    state, _ = append_event(create(), "user/message", data, "append")
    data["content"][0]["text"] = "changed"
    assert at(state.events[0], "data", "content", 0, "text") == "original"


# --- immutability (§4.7, D6) -------------------------------------------------------------------


def test_mutating_a_returned_event_raises_type_error() -> None:
    _, appended = append_event(create(), "user/message", user_data(), "append")
    with pytest.raises(TypeError):
        appended["seq"] = 9


def test_mutating_a_returned_event_payload_raises_type_error() -> None:
    _, appended = append_event(create(), "user/message", user_data(), "append")
    with pytest.raises(TypeError):
        at(appended, "data", "content").append({"type": "text", "text": "x"})


def test_mutating_a_derived_message_raises_type_error() -> None:
    state, _ = append_event(create(), "user/message", user_data(), "append")
    with pytest.raises(TypeError):
        at(derive_session_messages(state), 0, "content").append("x")


def test_a_session_state_cannot_be_reassigned() -> None:
    state = create()
    with pytest.raises(AttributeError):
        state.events = ()  # type: ignore[misc]


# --- derived messages (§6) ---------------------------------------------------------------------


def test_messages_derive_from_the_log_in_surface_order() -> None:
    state = create(
        [
            turn_start(0),
            user(1),
            chunk(2),
            event(3, "assistant/message", assistant_data("a3", "x", ("c1",)), "append"),
            tool_result(4),
            turn_end(5),
        ]
    )
    messages = derive_session_messages(state)
    assert [message["role"] for message in messages] == ["user", "assistant", "user"]
    assert at(messages, 2, "content", 0, "type") == "tool-result"


def test_derived_messages_are_the_logged_message_objects() -> None:
    state = create([user(0)])
    assert derive_session_messages(state)[0] is state.events[0]["data"]


@pytest.mark.parametrize("reason", [{"kind": "max-tokens"}, {"kind": "aborted", "reason": {"kind": "user"}}])
def test_turn_end_reasons_round_trip_through_a_replay(reason: dict[str, Any]) -> None:
    live, _ = append_event(create(), "turn/end", {"turn": 1, "reason": reason})
    assert create(list(live.events)).events[0] == live.events[0]


def test_a_todo_write_is_log_only_and_replays_identically() -> None:
    live, _ = append_event(create(), "todo/write", {"todos": [{"content": "x", "status": "pending"}]})
    assert (live.surface.nodes, derive_session_messages(live)) == ((), [])
    assert create(list(live.events)).events[0] == live.events[0]


# --- ids (§4.6) --------------------------------------------------------------------------------


def test_minted_session_ids_skip_live_ids() -> None:
    assert plan_session_id(0, {"session-1", "session-2"}) == ("session-3", 3)
    assert plan_session_id(3, set()) == ("session-4", 4)


def test_a_live_id_cannot_be_created_again() -> None:
    caught = refusal(lambda: validate_new_session_id({"s"}, "s"))
    assert (caught.code, caught.message) == (
        Code.SESSION_ALREADY_EXISTS,
        'session "s" already exists',
    )
