"""The header line: encode_header_line and decode_header_line for v4 and DSH v0 lines
(SPEC-DECISIONS D1; notes/dsh-persistence §3.1, §3.5 and the jsonl.spec.ts header cases of §9.6)."""

from __future__ import annotations

import pytest
from event_builders import V4_HEADER_LINE
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from conformance.strategies import json_values
from spec.codes import Code, SpecError
from spec.format.json_text import decode_json_text
from spec.format.naming import decode_header_line, encode_header_line
from spec.log.json import FrozenDict, JsonObject, JsonValue

V4_HEADER: JsonObject = {
    "version": 4,
    "id": "s1",
    "createdAt": 1000,
    "cwd": "/work",
    "delegationDepth": 0,
    "isSeeded": False,
}


def v0_line(fields: JsonObject | None = None, drop: tuple[str, ...] = ()) -> JsonObject:
    line: JsonObject = {
        "type": "session",
        "version": 0,
        "id": "s1",
        "createdAt": 1000,
        "cwd": "/work",
        "delegationDepth": 0,
    }
    line.update(fields or {})
    return {key: value for key, value in line.items() if key not in drop}


def rejection(value: JsonValue, hint: str | None = None) -> SpecError:
    return refusal(lambda: decode_header_line(value, hint))


# --- encode ------------------------------------------------------------------------------------


def test_the_header_line_puts_type_first_then_the_d1_fields_in_order_then_unknown_keys() -> None:
    header: JsonObject = {
        "isSeeded": True,
        "pad": "x",
        "agentPreset": "p",
        "delegationDepth": 1,
        "origin": "subagent",
        "seedLength": 2,
        "parentSession": "p1",
        "cwd": "/w",
        "createdAt": 5,
        "id": "s",
        "version": 4,
    }
    known = [key for key in header if key != "pad"]  # written above in the reverse of D1's order
    assert list(encode_header_line(header)) == ["type", *reversed(known), "pad"]
    assert encode_header_line(header)["type"] == "session"


def test_optional_fields_are_omitted_not_written_as_null() -> None:
    line = encode_header_line({key: value for key, value in V4_HEADER_LINE.items() if key != "type"})
    assert line == V4_HEADER_LINE


@given(
    st.fixed_dictionaries(
        {
            "version": st.just(4),
            "id": st.text(min_size=1),
            "createdAt": st.integers(0, 2**53 - 1),
            "delegationDepth": st.integers(0, 9),
            "isSeeded": st.booleans(),
        },
        optional={
            "cwd": st.just("/w"),
            "parentSession": st.text(),
            "seedLength": st.integers(0, 9),
            "origin": st.just("subagent"),
            "agentPreset": st.text(),
            "extra": json_values(),
        },
    )
)
def test_decoding_an_encoded_v4_header_gives_it_back(header: JsonObject) -> None:
    version, decoded = decode_header_line(encode_header_line(header))
    assert version == 4
    assert decoded == header


def test_a_header_line_holding_the_integer_2_to_the_53_is_not_json() -> None:
    """D5: the integers of the domain are those a double holds as safe integers, |n| <= 2**53 - 1.
    A parsed line never holds the integer 2**53 (JSON text reads it as a double), so one that does
    was not read from text, and it is refused as a header outside the domain."""
    assert (
        refusal(lambda: decode_header_line({"type": "session", **V4_HEADER, "extra": 2**53})).code
        is Code.HEADER_NOT_JSON
    )


def test_a_header_line_read_from_text_keeps_2_to_the_53_as_the_double_it_is() -> None:
    line = decode_json_text(
        '{"type":"session","version":4,"id":"s1","createdAt":1000,"cwd":"/work",'
        '"delegationDepth":0,"isSeeded":false,"extra":9007199254740992}'
    )
    _, header = decode_header_line(line)
    assert type(header["extra"]) is float and header["extra"] == 2**53


# --- decode v4 ---------------------------------------------------------------------------------


def test_a_v4_line_is_the_frozen_header_without_its_type() -> None:
    version, header = decode_header_line({"type": "session", **V4_HEADER})
    assert version == 4 and header == V4_HEADER
    assert isinstance(header, FrozenDict)
    with pytest.raises(TypeError):
        header["id"] = "other"


def test_a_v4_line_keeps_unknown_keys() -> None:
    _, header = decode_header_line({"type": "session", **V4_HEADER, "pad": "x" * 9000})
    assert header["pad"] == "x" * 9000


def test_a_v4_line_must_say_whether_the_session_was_seeded() -> None:
    line = {"type": "session", **V4_HEADER}
    del line["isSeeded"]
    assert rejection(line).code is Code.HEADER_IS_SEEDED


def test_an_integral_float_version_is_that_version() -> None:
    version, header = decode_header_line({"type": "session", **V4_HEADER, "version": 4.0})
    assert version == 4 and type(header["version"]) is int


# --- decode v0 ---------------------------------------------------------------------------------


def test_a_v0_line_is_upgraded_to_the_v4_in_memory_header() -> None:
    version, header = decode_header_line(v0_line())
    assert version == 0
    assert header == V4_HEADER
    assert list(header) == ["version", "id", "createdAt", "cwd", "delegationDepth", "isSeeded"]


def test_a_v0_line_with_a_seed_length_was_created_from_a_seed() -> None:
    _, header = decode_header_line(v0_line({"parentSession": "p", "seedLength": 3}))
    assert header["isSeeded"] is True and header["seedLength"] == 3 and header["parentSession"] == "p"


def test_a_v0_line_without_a_seed_length_was_not_seeded_even_with_a_parent() -> None:
    _, header = decode_header_line(
        v0_line({"parentSession": "p", "origin": "subagent", "delegationDepth": 1})
    )
    assert header["isSeeded"] is False and header["delegationDepth"] == 1


def test_a_v0_line_without_delegation_depth_gets_depth_zero() -> None:
    _, header = decode_header_line(v0_line(drop=("delegationDepth",)))
    assert header["delegationDepth"] == 0


def test_a_v0_line_keeps_unknown_keys_after_the_known_ones() -> None:
    _, header = decode_header_line(v0_line({"pad": "x", "agentPreset": "coder"}))
    assert list(header)[-1] == "pad" and header["agentPreset"] == "coder"


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"createdAt": 1.5}, Code.HEADER_CREATED_AT),
        ({"createdAt": -1}, Code.HEADER_CREATED_AT),
        ({"createdAt": 2.0**53}, Code.HEADER_CREATED_AT),
        ({"delegationDepth": "0"}, Code.HEADER_DELEGATION_DEPTH),
        ({"delegationDepth": 0.5}, Code.HEADER_DELEGATION_DEPTH),
        ({"delegationDepth": -1}, Code.HEADER_DELEGATION_DEPTH),
        ({"agentPreset": 7}, Code.HEADER_AGENT_PRESET),
        ({"origin": "user"}, Code.HEADER_ORIGIN),
        ({"cwd": "relative/dir"}, Code.HEADER_CWD),
        ({"seedLength": -2}, Code.HEADER_SEED_LENGTH),
        ({"parentSession": 3}, Code.HEADER_PARENT_SESSION),
    ],
)
def test_a_v0_line_with_a_bad_field_is_refused(fields: JsonObject, code: Code) -> None:
    assert rejection(v0_line(fields)).code is code


def test_a_v0_line_without_created_at_is_refused() -> None:
    assert rejection(v0_line(drop=("createdAt",))).code is Code.HEADER_CREATED_AT


# --- refusals common to both -------------------------------------------------------------------


@pytest.mark.parametrize("value", [42, None, "session", [], True])
def test_a_first_line_that_is_not_an_object_is_not_a_header(value: JsonValue) -> None:
    error = rejection(value)
    assert error.code is Code.HEADER_LINE_INVALID
    assert error.message == "corrupt session log: first line is not a session header"


@pytest.mark.parametrize(
    "line",
    [
        {"type": "event", "version": 0, "id": "s1", "createdAt": 1, "delegationDepth": 0},
        {"version": 0, "id": "s1", "createdAt": 1, "delegationDepth": 0},
        {"type": "session", "version": 0, "id": 7, "createdAt": 1, "delegationDepth": 0},
        {"type": "session", "version": "0", "id": "s1", "createdAt": 1, "delegationDepth": 0},
        {"type": "session", "version": False, "id": "s1", "createdAt": 1, "delegationDepth": 0},
        {"type": "session", "id": "s1", "createdAt": 1, "delegationDepth": 0},
    ],
)
def test_an_object_without_the_header_line_shape_is_not_a_header(line: JsonObject) -> None:
    assert rejection(line).code is Code.HEADER_LINE_INVALID


def test_a_future_version_is_refused_as_unsupported_before_its_shape_is_checked() -> None:
    error = rejection({"type": "session", "version": 42, "id": "s1"})
    assert error.code is Code.UNSUPPORTED_FORMAT
    assert 'session "s1" uses log format v42' in error.message and "newer" in error.message


def test_a_foreign_version_names_a_non_string_id_as_javascript_prints_it() -> None:
    assert 'session "123" uses log format v42' in rejection({"version": 42, "id": 123}).message


@pytest.mark.parametrize("version", [-1, 1, 3, 1.5, 7])
def test_every_version_but_four_and_zero_is_unsupported_and_named(version: float) -> None:
    error = rejection(
        {"type": "session", "version": version, "id": "s1", "createdAt": 1, "delegationDepth": 0}
    )
    assert error.code is Code.UNSUPPORTED_FORMAT
    assert f"v{version}" in error.message


def test_an_older_version_is_refused_without_claiming_an_upgrade_path() -> None:
    error = rejection({"type": "session", "version": -1, "id": "s1"})
    assert "no upgrade path" in error.message and "newer" not in error.message


@pytest.mark.parametrize("field", ["sandboxMode", "approvalPolicy"])
@pytest.mark.parametrize("version", [0, 4])
def test_the_retired_policy_baseline_fields_are_refused(field: str, version: int) -> None:
    line = v0_line({field: "x"}) if version == 0 else {"type": "session", **V4_HEADER, field: "x"}
    error = rejection(line)
    assert error.code is Code.HEADER_RETIRED_FIELDS
    assert error.message == "session header uses retired policy baseline fields"


@pytest.mark.parametrize("version", [0, 4])
def test_a_header_of_another_session_than_the_one_asked_for_is_refused(version: int) -> None:
    line = v0_line() if version == 0 else {"type": "session", **V4_HEADER}
    assert rejection(line, hint="s2").code is Code.HEADER_ID_MISMATCH


def test_the_hint_is_accepted_when_it_matches() -> None:
    assert decode_header_line(v0_line(), "s1")[1]["id"] == "s1"
