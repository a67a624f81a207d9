"""The DSH v0 read path: upgrade_v0_records and validate_stored_events (notes/dsh-persistence §3.5,
§3.6, §6.2 and the coordinator-contract legacy cases of §9.2 items 9-11; SPEC-DECISIONS D1)."""

from __future__ import annotations

import pytest
from refusals import refusal

from spec.codes import Code, SpecError
from spec.format.framing import LinePlace
from spec.format.legacy import decode_v4_events, upgrade_v0_records, validate_stored_events
from spec.log.json import FrozenDict, JsonObject, JsonValue

SID = "s1"
USER: JsonObject = {
    "id": "u1",
    "role": "user",
    "content": [{"type": "text", "text": "hi"}],
    "source": {"kind": "user"},
}
MODEL: JsonObject = {"provider": "deepseek", "model": "v4"}


def ev(seq: int, kind: str, data: JsonValue, **extra: JsonValue) -> JsonObject:
    return {"type": kind, "seq": seq, "time": 10 + seq, "data": data, **extra}


def upgrade_one(event: JsonObject, before: list[JsonObject] | None = None) -> JsonObject:
    """Upgrade ``event`` placed after ``before`` (seqs renumbered to be contiguous) and return it."""
    records: list[JsonValue] = [*(before or []), event]
    for seq, record in enumerate(records):
        assert isinstance(record, dict)
        record["seq"] = seq
    return upgrade_v0_records(SID, records)[-1]


def refused_records(records: list[JsonValue]) -> SpecError:
    return refusal(lambda: upgrade_v0_records(SID, records))


def data_of(event: JsonObject) -> JsonObject:
    data = event["data"]
    assert isinstance(data, dict)
    return data


# --- turn/start trigger removal ------------------------------------------------------------------


def test_a_turn_start_trigger_is_removed() -> None:
    event = upgrade_one(
        ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    )
    assert event == ev(0, "turn/start", {"turn": 1})


def test_a_turn_start_without_a_trigger_is_left_alone() -> None:
    assert upgrade_one(ev(0, "turn/start", {"turn": 1})) == ev(0, "turn/start", {"turn": 1})


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 0, "trigger": {"kind": "message"}},
        {"turn": 1.5, "trigger": {"kind": "message"}},
        {"turn": 1, "trigger": {"kind": ""}},
        {"turn": 1, "trigger": {"kind": 7}},
        {"turn": 1, "trigger": "message"},
        {"turn": 1, "trigger": {"kind": "message"}, "extra": True},
    ],
)
def test_a_malformed_turn_start_with_a_trigger_is_refused(data: JsonObject) -> None:
    error = refused_records([ev(0, "turn/start", data)])
    assert error.code is Code.LEGACY_MALFORMED_TURN_START
    assert error.message == 'session "s1" contains malformed pre-react-loop turn/start at seq 0'


# --- turn/end reason mapping ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reason", "current"),
    [
        ({"kind": "completed"}, {"kind": "completed"}),
        ({"kind": "interrupted"}, {"kind": "interrupted"}),
        ({"kind": "aborted"}, {"kind": "aborted", "reason": {"kind": "legacy"}}),
        ({"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "aborted", "reason": {"kind": "user"}}),
        ({"kind": "disposed"}, {"kind": "aborted", "reason": {"kind": "disposed"}}),
        (
            {
                "kind": "error",
                "step": 2,
                "failure": {"message": "boom", "code": "E1", "status": 500, "requestId": "r"},
            },
            {"kind": "error", "error": {"message": "boom", "code": "E1", "status": 500, "requestId": "r"}},
        ),
        (
            {"kind": "error", "step": 0, "message": "boom", "code": "E2"},
            {"kind": "error", "error": {"message": "boom", "code": "E2"}},
        ),
        (
            {"kind": "error", "step": 1, "message": "boom"},
            {"kind": "error", "error": {"message": "boom", "code": "UNKNOWN"}},
        ),
        (
            {"kind": "error", "error": {"message": "m", "code": "c"}},
            {"kind": "error", "error": {"message": "m", "code": "c"}},
        ),
        ({"kind": "future-kind", "anything": 1}, {"kind": "future-kind", "anything": 1}),
    ],
)
def test_a_turn_end_reason_is_mapped_to_its_current_form(reason: JsonObject, current: JsonObject) -> None:
    event = upgrade_one(ev(0, "turn/end", {"turn": 1, "reason": reason}))
    assert event == ev(0, "turn/end", {"turn": 1, "reason": current})


@pytest.mark.parametrize(
    "data",
    [
        {"turn": 0, "reason": {"kind": "completed"}},
        {"turn": 1, "reason": {"kind": "completed"}, "extra": 1},
        {"turn": 1},
        {"turn": 1, "reason": None},
        {"turn": 1, "reason": {"kind": 3}},
        {"turn": 1, "reason": {"kind": "completed", "extra": True}},
        {"turn": 1, "reason": {"kind": "disposed", "by": "x"}},
        {"turn": 1, "reason": {"kind": "aborted", "extra": 1}},
        {"turn": 1, "reason": {"kind": "error", "step": -1, "message": "m"}},
        {"turn": 1, "reason": {"kind": "error", "message": "m"}},
        {"turn": 1, "reason": {"kind": "error", "step": 1, "message": 7}},
        {"turn": 1, "reason": {"kind": "error", "step": 1, "message": "m", "code": None}},
        {"turn": 1, "reason": {"kind": "error", "step": 1, "failure": {"message": "m", "code": "c", "x": 1}}},
        {
            "turn": 1,
            "reason": {"kind": "error", "step": 1, "failure": {"message": "m", "code": "c", "status": "500"}},
        },
    ],
)
def test_a_malformed_turn_end_is_refused(data: JsonObject) -> None:
    error = refused_records([ev(0, "turn/end", data)])
    assert error.code is Code.LEGACY_MALFORMED_TURN_END
    assert error.message == 'session "s1" contains malformed pre-react-loop turn/end at seq 0'


# --- steering/message ----------------------------------------------------------------------------


def test_a_wrapped_steering_message_becomes_the_user_message_it_wraps() -> None:
    event = upgrade_one(ev(0, "steering/message", {"turn": 1, "message": USER}, surfaceOp="append"))
    assert event == ev(0, "user/message", USER, surfaceOp="append")


def test_an_unwrapped_steering_message_becomes_a_user_message_with_a_legacy_id() -> None:
    event = upgrade_one(ev(0, "steering/message", {"turn": 1, "content": [], "source": {"kind": "steering"}}))
    assert event["type"] == "user/message"
    assert event["data"] == {
        "content": [],
        "source": {"kind": "steering"},
        "id": "legacy-message:s1:0",
        "role": "user",
    }


@pytest.mark.parametrize(
    "data",
    [
        None,
        {"turn": 1},
        {"turn": "1", "message": USER},
        {"turn": 1, "content": [], "source": {}, "extra": 1},
        {"turn": 1, "message": "hi"},
    ],
)
def test_a_malformed_steering_message_is_refused(data: JsonValue) -> None:
    error = refused_records([ev(0, "steering/message", data)])
    assert error.code is Code.LEGACY_MALFORMED_MESSAGE
    assert error.message == 'session "s1" contains malformed pre-react-loop steering/message at seq 0'


# --- messages from before message identity --------------------------------------------------------


def test_a_pre_identity_user_message_gets_a_legacy_id_and_the_user_role() -> None:
    event = upgrade_one(
        ev(0, "user/message", {"content": [], "source": {"kind": "user"}}, surfaceOp="append"),
        [ev(0, "turn/start", {"turn": 1})],
    )
    assert data_of(event) == {
        "content": [],
        "source": {"kind": "user"},
        "id": "legacy-message:s1:1",
        "role": "user",
    }


def test_a_pre_identity_assistant_message_is_wrapped_with_a_model_source() -> None:
    stored = ev(
        0, "assistant/message", {"turn": 1, "step": 1, "content": [], "provenance": MODEL, "usage": {"in": 1}}
    )
    event = upgrade_one(stored)
    assert data_of(event) == {
        "turn": 1,
        "step": 1,
        "usage": {"in": 1},
        "message": {
            "id": "legacy-message:s1:0",
            "role": "assistant",
            "content": [],
            "source": {**MODEL, "kind": "model"},
        },
    }


def legacy_tool_result(seq: int, **extra: JsonValue) -> JsonObject:
    return ev(
        seq,
        "tool/result",
        {"turn": 1, "step": 1, "callId": "c1", "content": [{"type": "text", "text": "ok"}], "isError": False},
        **extra,
    )


def test_a_pre_identity_tool_result_is_wrapped_into_a_tool_result_message() -> None:
    event = upgrade_one(legacy_tool_result(0, surfaceOp="append"))
    assert data_of(event) == {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "legacy-message:s1:0",
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": "c1",
                    "content": [{"type": "text", "text": "ok"}],
                    "isError": False,
                }
            ],
            "source": {"kind": "tool", "callId": "c1"},
        },
    }


def test_a_replacing_pre_identity_tool_result_inherits_the_id_of_the_message_it_replaces() -> None:
    before = [ev(0, "turn/start", {"turn": 1}), legacy_tool_result(1, surfaceOp="append")]
    event = upgrade_one(legacy_tool_result(2, surfaceOp={"op": "replace", "start": 1, "end": 1}), before)
    message = data_of(event)["message"]
    assert isinstance(message, dict) and message["id"] == "legacy-message:s1:1"


def test_a_replace_start_names_its_message_by_number_only_when_earlier_and_integral() -> None:
    """Any number names the event at that seq (``1.0`` is seq 1, ``-0.0`` seq 0); a fractional,
    later or own seq names no message, and the id left absent is refused (issue 24: the ids are
    read from the upgraded events only when a replacing result asks)."""
    for start, inherited in ((1.0, "legacy-message:s1:1"), (1, "legacy-message:s1:1")):
        before = [ev(0, "turn/start", {"turn": 1}), legacy_tool_result(1, surfaceOp="append")]
        replacing = legacy_tool_result(2, surfaceOp={"op": "replace", "start": start, "end": 1})
        message = data_of(upgrade_one(replacing, before))["message"]
        assert isinstance(message, dict) and message["id"] == inherited
    zero = [legacy_tool_result(0, surfaceOp="append")]
    message = data_of(
        upgrade_one(legacy_tool_result(1, surfaceOp={"op": "replace", "start": -0.0, "end": 0}), zero)
    )["message"]
    assert isinstance(message, dict) and message["id"] == "legacy-message:s1:0"
    for start in (1.5, 2, 2.0, 7, -1):
        before = [ev(0, "turn/start", {"turn": 1}), legacy_tool_result(1, surfaceOp="append")]
        replacing = legacy_tool_result(2, surfaceOp={"op": "replace", "start": start, "end": 1})
        with pytest.raises(SpecError) as caught:
            upgrade_one(replacing, before)
        assert caught.value.code is Code.MESSAGE_UNIDENTIFIED, start


def test_a_replacing_tool_result_inherits_a_current_message_id_too() -> None:
    current = ev(
        1,
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "m-7",
                "role": "user",
                "source": {"kind": "tool", "callId": "c1"},
                "content": [{"type": "tool-result", "toolCallId": "c1", "content": []}],
            },
        },
        surfaceOp="append",
    )
    event = upgrade_one(
        legacy_tool_result(2, surfaceOp={"op": "replace", "start": 1, "end": 1}),
        [ev(0, "turn/start", {"turn": 1}), current],
    )
    message = data_of(event)["message"]
    assert isinstance(message, dict) and message["id"] == "m-7"


def test_a_replacing_tool_result_whose_start_holds_no_message_is_unidentified() -> None:
    records: list[JsonValue] = [
        ev(0, "turn/start", {"turn": 1}),
        legacy_tool_result(1, surfaceOp={"op": "replace", "start": 0, "end": 0}),
    ]
    assert refused_records(records).code is Code.MESSAGE_UNIDENTIFIED


def test_a_current_user_message_is_left_alone() -> None:
    assert upgrade_one(ev(0, "user/message", USER, surfaceOp="append")) == ev(
        0, "user/message", USER, surfaceOp="append"
    )


def test_a_current_looking_malformed_message_is_not_disguised_as_legacy() -> None:
    error = refused_records([ev(0, "user/message", {**USER, "role": "assistant"})])
    assert error.code is Code.MESSAGE_ROLE
    assert error.message == 'session event at seq 0 message must have role "user"'


def test_a_pre_identity_message_that_still_lacks_a_shape_is_refused_after_conversion() -> None:
    assert (
        refused_records(
            [ev(0, "assistant/message", {"turn": 1, "step": 1, "content": [], "provenance": None})]
        ).code
        is Code.MESSAGE_MODEL_SOURCE
    )


# --- refused vocabulary ---------------------------------------------------------------------------


def test_a_request_header_delta_is_refused() -> None:
    error = refused_records([ev(0, "turn/start", {"turn": 1}), ev(1, "request/header-delta", {})])
    assert error.code is Code.LEGACY_HEADER_DELTA
    assert error.message == 'session "s1" contains unsupported legacy request/header-delta event at seq 1'


def test_a_mode_set_is_refused() -> None:
    error = refused_records([ev(0, "mode/set", {"mode": "plan"})])
    assert error.code is Code.LEGACY_MODE_SET
    assert error.message == 'session "s1" contains unsupported legacy mode/set event at seq 0'


def test_a_request_header_with_the_fallback_reason_is_refused() -> None:
    error = refused_records([ev(0, "request/header", {"header": {}, "reason": "fallback"})])
    assert error.code is Code.LEGACY_FALLBACK_REASON
    assert (
        error.message == 'session "s1" contains unsupported legacy request/header reason "fallback" at seq 0'
    )


def test_a_header_delta_anywhere_is_reported_before_an_earlier_mode_set() -> None:
    assert (
        refused_records([ev(0, "mode/set", {}), ev(1, "request/header-delta", {})]).code
        is Code.LEGACY_HEADER_DELTA
    )


def test_retired_vocabulary_is_refused_before_any_conversion_fails() -> None:
    assert (
        refused_records([ev(0, "turn/end", {"turn": 0}), ev(1, "mode/set", {})]).code is Code.LEGACY_MODE_SET
    )


# --- unknown types --------------------------------------------------------------------------------


def test_an_unknown_type_not_marked_ignorable_is_refused() -> None:
    error = refused_records([ev(0, "turn/start", {"turn": 1}), ev(1, "plugin/future", {})])
    assert error.code is Code.UNKNOWN_EVENT_TYPE
    assert error.message == (
        'session "s1" contains event type "plugin/future" (seq 1) unknown to this harness and not marked ignorable; '
        "refusing to interpret the log — it was likely written by a newer harness"
    )


def test_an_unknown_type_marked_ignorable_is_kept_even_with_null_data() -> None:
    events = upgrade_v0_records(SID, [ev(0, "plugin/note", None, ignorable=True)])
    assert events == (ev(0, "plugin/note", None, ignorable=True),)


def test_unknown_types_are_checked_after_conversion_so_steering_passes() -> None:
    assert upgrade_one(ev(0, "steering/message", {"turn": 1, "message": USER}))["type"] == "user/message"


def test_an_unknown_type_is_refused_only_after_every_event_converted() -> None:
    assert (
        refused_records([ev(0, "plugin/future", {}), ev(1, "turn/end", {"turn": 0})]).code
        is Code.LEGACY_MALFORMED_TURN_END
    )


# --- records, rows and freezing --------------------------------------------------------------------


def test_packed_rows_are_expanded_before_conversion() -> None:
    row: JsonObject = {
        "type": "text-chunks",
        "seq0": 1,
        "time0": 5,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1, 1], "texts": ["a", "b", "c"]},
    }
    events = upgrade_v0_records(
        SID, [ev(0, "step/start", {"turn": 1, "step": 1}), row, ev(4, "step/end", {"turn": 1, "step": 1})]
    )
    assert [event["seq"] for event in events] == [0, 1, 2, 3, 4]
    assert [event["type"] for event in events] == [
        "step/start",
        "assistant/chunk",
        "assistant/chunk",
        "assistant/chunk",
        "step/end",
    ]


def test_a_seq_gap_in_the_records_is_a_corrupt_log() -> None:
    error = refused_records(
        [ev(0, "turn/start", {"turn": 1}), ev(2, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})]
    )
    assert error.code is Code.CORRUPT_LOG
    # without places the records are counted as the lines after the header: the second is line 3
    assert (
        error.message == "corrupt session log: seq gap in committed region at line 3: expected seq 1, got 2"
    )


def test_v4_records_are_events_whose_seqs_run_on_from_the_first() -> None:
    records: list[JsonValue] = [ev(3, "turn/start", {"turn": 1}), ev(4, "note", {})]
    assert [dict(event) for event in decode_v4_events(records, 3)] == records
    places = [LinePlace(line, 10 * line) for line in range(2, 9)]  # seq 0 is on line 2
    caught = refusal(lambda: decode_v4_events([*records, ev(6, "note", {})], 3, places))
    assert caught.code is Code.CORRUPT_LOG
    assert caught.message == (
        "corrupt session log: seq gap in committed region at line 7 (byte 70): expected seq 5, got 6"
    )


@pytest.mark.parametrize("record", [None, 42, "junk", []])
def test_a_record_that_is_not_an_event_object_is_a_corrupt_log(record: JsonValue) -> None:
    assert refused_records([ev(0, "turn/start", {"turn": 1}), record]).code is Code.CORRUPT_LOG


def test_a_malformed_row_is_refused_with_its_own_code() -> None:
    assert refused_records([{"type": "text-chunks", "seq0": 0}]).code is Code.MALFORMED_CHUNK_ROW


def test_upgraded_events_are_frozen_all_the_way_down() -> None:
    (event,) = upgrade_v0_records(SID, [ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "message"}})])
    assert isinstance(event, FrozenDict) and isinstance(event["data"], FrozenDict)
    with pytest.raises(TypeError):
        event["data"]["turn"] = 2


MIXED_V0: list[JsonValue] = [
    ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "message"}}),
    ev(
        1,
        "user/message",
        {"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        surfaceOp="append",
    ),
    ev(2, "steering/message", {"turn": 1, "content": [], "source": {"kind": "user"}}, surfaceOp="append"),
    ev(3, "step/start", {"turn": 1, "step": 1}),
    {
        "type": "text-chunks",
        "seq0": 4,
        "time0": 14,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [1], "texts": ["a", "b"]},
    },
    ev(6, "plugin/note", {"n": [1, {"m": 2}]}, ignorable=True),
    ev(7, "turn/end", {"turn": 1, "reason": {"kind": "disposed"}}),
]


def test_events_left_unfrozen_are_the_frozen_ones_as_plain_values() -> None:
    """``frozen=False`` (a checker, which hands no event out) changes no value and no verdict."""
    frozen = upgrade_v0_records(SID, MIXED_V0)
    plain = upgrade_v0_records(SID, MIXED_V0, frozen=False)
    assert plain == frozen and len(plain) == 8
    assert all(type(event) is FrozenDict for event in frozen)
    assert [type(event) for event in plain] == [dict] * 8  # a packed row's members (4, 5) too
    assert type(plain[4]["data"]) is dict and type(plain[6]["data"]) is dict
    refused: list[list[JsonValue]] = [
        [ev(0, "mode/set", {})],
        [ev(0, "plugin/x", None)],
        [ev(0, "tool/result", {"message": {}})],
    ]
    for bad in refused:
        with pytest.raises(SpecError) as unfrozen:
            upgrade_v0_records(SID, bad, frozen=False)
        assert (unfrozen.value.code, unfrozen.value.message) == (
            refused_records(bad).code,
            refused_records(bad).message,
        )


def test_the_callers_records_are_not_changed() -> None:
    record = ev(0, "turn/start", {"turn": 1, "trigger": {"kind": "message"}})
    upgrade_v0_records(SID, [record])
    assert data_of(record) == {"turn": 1, "trigger": {"kind": "message"}}


def test_an_empty_log_has_no_events() -> None:
    assert upgrade_v0_records(SID, []) == ()


# --- validate_stored_events (v4 logs) ----------------------------------------------------------------


def test_stored_v4_events_pass_when_their_messages_and_types_are_good() -> None:
    validate_stored_events(
        SID, [ev(0, "turn/start", {"turn": 1}), ev(1, "user/message", USER, surfaceOp="append")]
    )


def test_a_stored_v4_event_is_not_converted_so_a_pre_identity_message_is_refused() -> None:
    assert (
        refusal(
            lambda: validate_stored_events(
                SID, [ev(0, "user/message", {"content": [], "source": {"kind": "user"}})]
            )
        ).code
        is Code.MESSAGE_UNIDENTIFIED
    )


def test_a_stored_v4_event_of_unknown_type_is_kept_because_a_v4_writer_may_write_any_type() -> None:
    validate_stored_events(SID, [ev(0, "plugin/custom", {"turn": 1})])
