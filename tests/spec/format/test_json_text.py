"""The text form of the lossless JSON domain: one line, JavaScript reader semantics, any depth."""

from __future__ import annotations

import pytest
from refusals import refusal

from spec.codes import Code
from spec.format.json_text import JsonTextError, decode_json_text, encode_json_text
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


# --- every edge of JSON text decided, with a code, the same for str and UTF-8 bytes -------------

REFUSED = [
    ("[1e999999]", Code.JSON_NUMBER_OUT_OF_RANGE),  # JavaScript reads Infinity
    ("-1e309", Code.JSON_NUMBER_OUT_OF_RANGE),
    ("1" + "0" * 400, Code.JSON_NUMBER_OUT_OF_RANGE),  # an integer literal past the largest double
    ("1" + "0" * 5000, Code.JSON_NUMBER_OUT_OF_RANGE),  # past int()'s digit limit too
    ("\ufeff{}", Code.JSON_BYTE_ORDER_MARK),
    ("[NaN]", Code.JSON_TEXT_INVALID),
    ("[1]x", Code.JSON_TEXT_INVALID),
    ("[\u0661]", Code.JSON_TEXT_INVALID),  # a digit outside ASCII is not a JSON digit
]


@pytest.mark.parametrize(("text", "code"), REFUSED)
def test_an_edge_is_refused_with_its_code_for_str_and_for_utf8_bytes_alike(text: str, code: Code) -> None:
    for form in (text, text.encode("utf-8")):
        with pytest.raises(JsonTextError) as refused:
            decode_json_text(form)
        assert refused.value.code == code
        assert isinstance(refused.value, ValueError)


@pytest.mark.parametrize(
    "data",
    [
        b'"\xc0\xaf"',  # an overlong "/"
        b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8
        b'"\xff"',
        "{}".encode("utf-16"),  # UTF-16 with its byte order mark
        "{}".encode("utf-32"),
    ],
)
def test_bytes_that_are_not_strict_utf8_are_refused_with_a_code_not_a_unicode_error(data: bytes) -> None:
    assert refusal(lambda: decode_json_text(data), JsonTextError).code == Code.JSON_NOT_UTF8


def test_utf16_without_a_byte_order_mark_is_not_json_and_a_raw_surrogate_in_str_is_not_utf8() -> None:
    with pytest.raises(JsonTextError) as refused:
        decode_json_text("{}".encode("utf-16-le"))  # valid UTF-8 holding NULs
    assert refused.value.code == Code.JSON_TEXT_INVALID
    # what a surrogateescape decode makes of the byte 0xff, refused as the byte itself is
    assert (
        refusal(lambda: decode_json_text(b'"\xff"'.decode("utf-8", "surrogateescape")), JsonTextError).code
        == Code.JSON_NOT_UTF8
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("[1e-999999]", [0.0]),  # below the smallest double: 0, as JavaScript reads it
        ("-1e-999", 0.0),
        ("0.1000000000000000055511151231257827", 0.1),  # more digits than a double: the nearest one
        ("9007199254740993", 9007199254740992.0),
        ("1" + "0" * 300, 1e300),
        ('"\\ud800"', "\ud800"),  # an escaped lone surrogate is a JavaScript string's code unit
        ('"\\udc00\\ud800"', "\udc00\ud800"),  # an inverted pair is two lone halves
        ('"\\ud83d\\ude00"', "\U0001f600"),
    ],
)
def test_an_edge_javascript_reads_is_read_as_javascript_reads_it(text: str, value: object) -> None:
    for form in (text, text.encode("utf-8")):
        got = decode_json_text(form)
        assert repr(got) == repr(value)


def test_the_deep_decoder_decides_the_same_edges() -> None:
    from spec.format.json_text import _decode_deep

    deep = "[" * DEPTH + "{}" + "]" * DEPTH
    for inner, code in (("1e999", Code.JSON_NUMBER_OUT_OF_RANGE), ("\u0661", Code.JSON_TEXT_INVALID)):
        with pytest.raises(JsonTextError) as refused:
            decode_json_text(deep.replace("{}", inner))
        assert refused.value.code == code
    assert _decode_deep("[1e-999]") == [0]
