"""Packed chunk rows, read side: decode_storage_record (notes/dsh-session-core §13.1 and its
chunk-rows.spec.ts checklist; notes/dsh-persistence §3.2). This project never writes rows."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code, SpecError
from spec.format.chunk_rows import decode_storage_record
from spec.log.json import MAX_SAFE_INTEGER, FrozenDict, JsonObject, JsonValue


def chunk_event(seq: int, time: int, chunk: JsonObject, turn: int = 1, step: int = 1) -> JsonObject:
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": time,
        "data": {"turn": turn, "step": step, "chunk": chunk},
    }


def text_row(
    texts: list[str], dt: list[int], seq0: int = 0, time0: int = 1000, tag: str = "text-chunks"
) -> JsonObject:
    return {
        "type": tag,
        "seq0": seq0,
        "time0": time0,
        "data": {
            "turn": 1,
            "step": 1,
            "index": 0,
            "dt": list[JsonValue](dt),
            "texts": list[JsonValue](texts),
        },
    }


def placements(row: JsonObject) -> list[tuple[JsonValue, JsonValue]]:
    decoded = decode_storage_record(row)
    assert all(isinstance(event, dict) for event in decoded)
    return [(event["seq"], event["time"]) for event in decoded if isinstance(event, dict)]


def test_a_text_row_expands_into_its_text_delta_events() -> None:
    row = text_row(["t0", "t1", "t2", "t3", "t4"], [10, 10, 10, 10])
    assert decode_storage_record(row) == [
        chunk_event(k, 1000 + 10 * k, {"type": "text-delta", "index": 0, "text": f"t{k}"}) for k in range(5)
    ]


def test_a_reasoning_row_expands_into_reasoning_delta_events() -> None:
    row = text_row(["a", "b", "c"], [1, 1], seq0=7, tag="reasoning-chunks")
    assert decode_storage_record(row) == [
        chunk_event(7 + k, 1000 + k, {"type": "reasoning-delta", "index": 0, "text": text})
        for k, text in enumerate("abc")
    ]


def test_a_tool_call_row_expands_with_its_id_and_name() -> None:
    row: JsonObject = {
        "type": "tool-call-chunks",
        "seq0": 4,
        "time0": 1004,
        "data": {
            "turn": 1,
            "step": 1,
            "index": 1,
            "id": "c1",
            "name": "write",
            "dt": [1, 1],
            "args": ["a4", "a5", "a6"],
        },
    }
    assert decode_storage_record(row) == [
        chunk_event(
            seq,
            1000 + seq,
            {"type": "tool-call-delta", "index": 1, "id": "c1", "name": "write", "argumentsDelta": f"a{seq}"},
        )
        for seq in (4, 5, 6)
    ]


@pytest.mark.parametrize("tag", ["text-chunks", "tool-call-chunks"])
def test_expanded_events_are_frozen_all_the_way_down_unless_a_reader_judges_them_unfrozen(tag: str) -> None:
    """A reader freezes what it reads: an expanded member is built frozen, envelope, data and chunk.
    Not ``frozen`` (a checker, or a first resume that keeps only the lines it writes): the very
    members, in the same key order, built as plain objects all the way down."""
    payload: JsonObject = {"texts": ["a", "b"]} if tag == "text-chunks" else {"id": "c1", "args": ["a", "b"]}
    row: JsonObject = {
        "type": tag,
        "seq0": 3,
        "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "dt": [2], **payload},
    }
    frozen, plain = decode_storage_record(row), decode_storage_record(row, frozen=False)
    assert plain == frozen and len(plain) == 2
    for event, twin in zip(plain, frozen):
        assert isinstance(event, dict) and isinstance(twin, dict)
        data, twin_data = event["data"], twin["data"]
        assert isinstance(data, dict) and isinstance(twin_data, dict)
        chunk, twin_chunk = data["chunk"], twin_data["chunk"]
        assert isinstance(chunk, dict) and isinstance(twin_chunk, dict)
        assert (type(twin), type(twin_data), type(twin_chunk)) == (FrozenDict, FrozenDict, FrozenDict)
        assert (type(event), type(data), type(chunk)) == (dict, dict, dict)
        assert list(event) == list(twin) and list(chunk) == list(twin_chunk)


def test_a_name_less_tool_call_row_expands_without_a_name_key() -> None:
    row: JsonObject = {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 1000,
        "data": {"turn": 1, "step": 1, "index": 0, "id": "c1", "dt": [0, 0], "args": ["a0", "a1", "a2"]},
    }
    decoded = decode_storage_record(row)
    assert decoded == [
        chunk_event(
            seq, 1000, {"type": "tool-call-delta", "index": 0, "id": "c1", "argumentsDelta": f"a{seq}"}
        )
        for seq in range(3)
    ]


def test_expanded_events_keep_the_envelope_and_chunk_key_order_dsh_writes() -> None:
    row: JsonObject = {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 1,
        "data": {"turn": 1, "step": 1, "index": 0, "id": "c", "name": "n", "dt": [], "args": ["x"]},
    }
    (event,) = decode_storage_record(row)
    assert (
        isinstance(event, dict)
        and isinstance(event["data"], dict)
        and isinstance(event["data"]["chunk"], dict)
    )
    assert list(event) == ["type", "seq", "time", "data"]
    assert list(event["data"]) == ["turn", "step", "chunk"]
    assert list(event["data"]["chunk"]) == ["type", "index", "id", "name", "argumentsDelta"]


def test_timestamps_are_rebuilt_through_negative_gaps() -> None:
    row = text_row(["a", "b", "c"], [-10, 5])
    assert [time for _, time in placements(row)] == [1000, 990, 995]


def test_rows_of_one_or_two_members_are_accepted_on_read() -> None:
    assert len(decode_storage_record(text_row(["a"], []))) == 1
    assert len(decode_storage_record(text_row(["a", "b"], [1]))) == 2


def test_integral_float_placements_decode_to_integer_seqs_and_times() -> None:
    row = text_row(["a", "b"], [1])
    row["seq0"], row["time0"] = 3.0, 10.0
    assert placements(row) == [(3, 10), (4, 11)]
    assert all(type(seq) is int and type(time) is int for seq, time in placements(row))


@pytest.mark.parametrize(
    "value", [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}, "junk", None, 42, []]
)
def test_a_value_that_is_not_a_row_passes_through_as_one_unvalidated_event(value: JsonValue) -> None:
    decoded = decode_storage_record(value)
    assert decoded == [value]
    assert decoded[0] is value


def _text_data(**overrides: JsonValue) -> JsonObject:
    data: JsonObject = {"turn": 1, "step": 1, "index": 0, "dt": [], "texts": ["a"]}
    data.update(overrides)
    return data


MALFORMED_ROWS: list[tuple[str, JsonObject, str]] = [
    (
        "a non-object data",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": "x"},
        "data must be an object",
    ),
    (
        "an envelope with extra keys",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(), "extra": 1},
        "envelope must be exactly {type, seq0, time0, data}",
    ),
    (
        "a negative seq0",
        {"type": "text-chunks", "seq0": -1, "time0": 1, "data": _text_data()},
        "seq0 must be a non-negative safe integer",
    ),
    (
        "a non-finite time0",
        {"type": "text-chunks", "seq0": 0, "time0": float("inf"), "data": _text_data()},
        "time0 must be a safe integer",
    ),
    (
        "a fractional time0",
        {"type": "text-chunks", "seq0": 0, "time0": 1.5, "data": _text_data()},
        "time0 must be a safe integer",
    ),
    (
        "a data shape mismatch",
        {
            "type": "text-chunks",
            "seq0": 0,
            "time0": 1,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "args": ["a"]},
        },
        "data must be exactly {turn, step, index, dt, texts}",
    ),
    (
        "a non-string member",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(texts=[7])},
        "texts must be a non-empty string array",
    ),
    (
        "an empty member list",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(texts=[])},
        "texts must be a non-empty string array",
    ),
    (
        "a dt arity mismatch",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(dt=[1, 2], texts=["a", "b"])},
        "dt length 2 does not match 2 members",
    ),
    (
        "a non-finite dt gap",
        {
            "type": "text-chunks",
            "seq0": 0,
            "time0": 1,
            "data": _text_data(dt=[float("nan")], texts=["a", "b"]),
        },
        "dt must be an array of safe integers",
    ),
    (
        "a fractional dt gap",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(dt=[0.5], texts=["a", "b"])},
        "dt must be an array of safe integers",
    ),
    (
        "a member seq leaving safe range",
        {
            "type": "text-chunks",
            "seq0": MAX_SAFE_INTEGER,
            "time0": 1,
            "data": _text_data(dt=[0, 0], texts=["a", "b", "c"]),
        },
        "member seqs must stay safe integers",
    ),
    (
        "a member time leaving safe range",
        {
            "type": "text-chunks",
            "seq0": 0,
            "time0": MAX_SAFE_INTEGER,
            "data": _text_data(dt=[1], texts=["a", "b"]),
        },
        "member times must stay safe integers",
    ),
    (
        "a non-numeric turn",
        {"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(turn="x")},
        "turn/step/index must be numbers",
    ),
    (
        "a tool-call row without id",
        {
            "type": "tool-call-chunks",
            "seq0": 0,
            "time0": 1,
            "data": {"turn": 1, "step": 1, "index": 0, "dt": [], "args": ["a"]},
        },
        "data must be exactly {turn, step, index, id, name?, dt, args}",
    ),
    (
        "a tool-call row with non-string id",
        {
            "type": "tool-call-chunks",
            "seq0": 0,
            "time0": 1,
            "data": {"turn": 1, "step": 1, "index": 0, "id": 7, "dt": [], "args": ["a"]},
        },
        "id (and name when present) must be strings",
    ),
    (
        "a tool-call row with non-string name",
        {
            "type": "tool-call-chunks",
            "seq0": 0,
            "time0": 1,
            "data": {"turn": 1, "step": 1, "index": 0, "id": "c", "name": 7, "dt": [], "args": ["a"]},
        },
        "id (and name when present) must be strings",
    ),
]


def test_there_are_seventeen_malformed_row_cases() -> None:
    assert len(MALFORMED_ROWS) == 17


@pytest.mark.parametrize(
    ("label", "row", "why"), MALFORMED_ROWS, ids=[label for label, _, _ in MALFORMED_ROWS]
)
def test_a_malformed_row_is_refused_with_the_dsh_reason(label: str, row: JsonObject, why: str) -> None:
    caught = refusal(lambda: decode_storage_record(row))
    assert caught.code is Code.MALFORMED_CHUNK_ROW
    assert caught.message == f"malformed {row['type']} storage row: {why}"


def test_a_dt_shorter_than_the_members_is_refused_too() -> None:
    caught = refusal(lambda: decode_storage_record(text_row(["a", "b", "c"], [1])))
    assert caught.message == "malformed text-chunks storage row: dt length 1 does not match 3 members"


def test_an_array_data_fails_the_exact_keys_check_as_in_dsh() -> None:
    with pytest.raises(SpecError, match="data must be exactly"):
        decode_storage_record({"type": "text-chunks", "seq0": 0, "time0": 1, "data": []})


def test_a_boolean_turn_is_not_a_number() -> None:
    with pytest.raises(SpecError, match="turn/step/index must be numbers"):
        decode_storage_record({"type": "text-chunks", "seq0": 0, "time0": 1, "data": _text_data(step=True)})


def test_an_event_whose_type_is_literally_a_row_tag_cannot_be_read_back() -> None:
    plugin_event: JsonObject = {"type": "text-chunks", "seq": 0, "time": 1, "data": None, "ignorable": True}
    assert refusal(lambda: decode_storage_record(plugin_event)).code is Code.MALFORMED_CHUNK_ROW


@st.composite
def delta_runs(draw: st.DrawFn) -> tuple[JsonObject, list[JsonObject]]:
    """A run drawn as its events, and the row DSH's packer would write for it."""
    kind = draw(st.sampled_from(["text-chunks", "reasoning-chunks", "tool-call-chunks"]))
    count = draw(st.integers(1, 8))
    seq0 = draw(st.integers(0, 10**6))
    times = [draw(st.integers(-(2**40), 2**40)) for _ in range(count)]
    members = [draw(st.text(max_size=5)) for _ in range(count)]
    turn, step, index = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(0, 3))
    name = draw(st.none() | st.sampled_from(["write", "read"]))
    dt: list[JsonValue] = [later - earlier for earlier, later in itertools.pairwise(times)]
    data: JsonObject = {"turn": turn, "step": step, "index": index, "dt": dt}
    events: list[JsonObject] = []
    for k, member in enumerate(members):
        chunk: JsonObject
        if kind == "tool-call-chunks":
            chunk = {"type": "tool-call-delta", "index": index, "id": "c1"}
            if name is not None:
                chunk["name"] = name
            chunk["argumentsDelta"] = member
        else:
            chunk = {
                "type": "text-delta" if kind == "text-chunks" else "reasoning-delta",
                "index": index,
                "text": member,
            }
        events.append(chunk_event(seq0 + k, times[k], chunk, turn, step))
    if kind == "tool-call-chunks":
        data.update({"id": "c1", **({"name": name} if name is not None else {}), "args": list(members)})
    else:
        data["texts"] = list(members)
    return {"type": kind, "seq0": seq0, "time0": times[0], "data": data}, events


@given(delta_runs())
def test_decoding_a_packed_run_reproduces_its_events_exactly(
    case: tuple[JsonObject, list[JsonObject]],
) -> None:
    row, events = case
    assert decode_storage_record(row) == events
