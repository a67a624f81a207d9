"""The text form of the lossless JSON domain: one line, JavaScript reader semantics, any depth."""

from __future__ import annotations

import pytest

from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.json import JsonValue, is_deep_equal_json

DEPTH = 20_000  # D6: deep JSON never hits the recursion limit


def nested(depth: int) -> JsonValue:
    value: JsonValue = []
    for _ in range(depth):
        value = [value, {"k": 1}] if depth % 2 else [value]
    return value


def test_twenty_thousand_levels_of_nesting_encode_and_decode_back_to_the_same_value() -> None:
    value: JsonValue = {"deep": nested(DEPTH), "tail": [1, 2.5, "x", None, True]}
    text = encode_json_text(value)
    assert is_deep_equal_json(decode_json_text(text), value)


def test_deep_text_is_the_same_text_the_fast_encoder_writes_for_shallow_values() -> None:
    from spec.format.json_text import _encode_deep

    value: JsonValue = {"a": [1, {"b": "é\u2028"}, [], {}], "c": None}
    assert _encode_deep(value) == encode_json_text(value)


@pytest.mark.parametrize("text", ["[1,]", '{"a":1,}', "[1 2]", "{]", "NaN", "[1]x", "", '{"a"}', "[-]"])
def test_the_deep_decoder_refuses_what_is_not_json(text: str) -> None:
    from spec.format.json_text import _decode_deep

    with pytest.raises(ValueError):
        _decode_deep(text)


def test_a_lone_surrogate_is_written_as_a_lowercase_escape() -> None:
    assert encode_json_text("a\ud800b") == '"a\\ud800b"'


def test_integers_past_two_to_the_fifty_three_are_read_as_doubles_like_javascript() -> None:
    assert decode_json_text("9007199254740993") == 9007199254740992.0


def test_nan_and_infinity_are_not_json() -> None:
    with pytest.raises(ValueError):
        decode_json_text("[NaN]")
    with pytest.raises(ValueError):
        decode_json_text("Infinity")


def test_negative_zero_is_read_as_zero() -> None:
    value = decode_json_text("-0.0")
    assert value == 0 and str(value) == "0.0"
