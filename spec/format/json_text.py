"""JSON text: how a value of the lossless domain is written as one line and read back, with a
JavaScript peer's number semantics (SPEC-DECISIONS D5; notes/dsh-persistence §4).

A stored log line, a header line and a protocol message are all this text. Writing keeps
non-ASCII raw and escapes a lone surrogate as ``JSON.stringify`` does. Reading decides every edge
with a stable code (docs/choices.md, "JSON text's edges"), the same for ``str`` and UTF-8 ``bytes``:

- bytes are strict UTF-8 (D3): invalid, overlong or surrogate-encoding bytes, and so UTF-16 and
  UTF-32 text, are ``JSON_NOT_UTF8``; a ``str`` holding a raw surrogate code point (which no UTF-8
  text decodes to) is refused the same way; an escaped lone surrogate (``"\\ud800"``) is a
  JavaScript string's code unit and is kept, as ``JSON.parse`` keeps it;
- a leading byte order mark is ``JSON_BYTE_ORDER_MARK``, as ``JSON.parse`` refuses U+FEFF;
- a number beyond the largest double is ``JSON_NUMBER_OUT_OF_RANGE`` (JavaScript reads Infinity,
  which D5's domain does not hold); one below the smallest reads as 0 and one with more digits
  than a double holds reads as the nearest double, as JavaScript reads them; integers beyond
  2**53 become doubles and -0 becomes 0;
- anything else that is not one JSON value (NaN, Infinity, extra data) is ``JSON_TEXT_INVALID``;
- nesting has no limit but the text's length: both directions are iterative past the recursion
  limit (D6: 20,000 levels).

A refusal is a :class:`JsonTextError`: a ``SpecError`` with its code that is also a
``ValueError``, so a caller that treats unreadable text as damage keeps doing so.
"""

from __future__ import annotations

import json
import json.decoder
import math
import re
from collections.abc import Callable
from typing import Any, Final, NoReturn

from spec.codes import Code, SpecError
from spec.log.json import MAX_SAFE_INTEGER, JsonValue

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
"""``json.dumps`` with these options builds this very encoder for every call; one is enough."""


def encode_json_text(value: JsonValue) -> str:
    """One compact line of JSON text. Non-ASCII is written raw; a lone surrogate is written as a
    lowercase ``\\udxxx`` escape, as JavaScript's ``JSON.stringify`` does (ASCII text has none)."""
    try:
        text = _ENCODER.encode(value)
    except RecursionError:
        text = _encode_deep(value)
    if not text.isascii() and _LONE_SURROGATE.search(text):
        text = _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text


class JsonTextError(SpecError, ValueError):
    """Text that is not JSON of the domain: a rejection with its code, and a ``ValueError``."""


def _reject_constant(name: str) -> NoReturn:
    raise JsonTextError(Code.JSON_TEXT_INVALID, f"{name} is not JSON")


_SAFE_DIGITS: Final = len(str(MAX_SAFE_INTEGER))  # a literal with more digits is not a safe integer


def _parse_int(text: str) -> int | float:
    # A JavaScript reader rounds integers past 2**53 to the nearest double; do the same. float()
    # of the literal is that double (correctly rounded) and, unlike int(), has no digit limit.
    if (
        len(text.lstrip("-")) <= _SAFE_DIGITS
        and -MAX_SAFE_INTEGER <= (number := int(text)) <= MAX_SAFE_INTEGER
    ):
        return number
    return _parse_float(text)


def _parse_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise JsonTextError(
            Code.JSON_NUMBER_OUT_OF_RANGE, f"the number {text[:40]} is beyond the largest double"
        )
    # -0 has no place in the domain; a reader maps it to 0 rather than lose the record. A number
    # below the smallest double reads as 0, as it does in JavaScript.
    return 0.0 if number == 0.0 else number


_DECODER: Final = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant
)
"""``json.loads`` with these hooks builds this very decoder for every call; one is enough."""


def decode_json_text(text: str | bytes) -> JsonValue:
    """Parse one JSON text with a JavaScript reader's semantics, every edge decided as the module
    says; ``bytes`` are strict UTF-8. Raises :class:`JsonTextError`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as error:
            raise JsonTextError(
                Code.JSON_NOT_UTF8,
                f"JSON text is not UTF-8: byte {error.start} is {error.object[error.start]:#04x}",
            ) from None
    elif not text.isascii() and (raw := _LONE_SURROGATE.search(text)):
        raise JsonTextError(
            Code.JSON_NOT_UTF8, f"JSON text holds the raw surrogate U+{ord(raw.group()):04X} at {raw.start()}"
        )
    if text.startswith("\ufeff"):
        raise JsonTextError(Code.JSON_BYTE_ORDER_MARK, "JSON text begins with a byte order mark")
    try:
        try:
            return _DECODER.decode(text)  # type: ignore[no-any-return]  # what json.loads does
        except RecursionError:
            return _decode_deep(text)
    except JsonTextError:
        raise
    except ValueError as error:
        raise JsonTextError(Code.JSON_TEXT_INVALID, f"not JSON: {error}") from None


# The standard library's encoder and decoder recurse; these iterative twins take over for values
# nested deeper than the recursion limit allows (D6: 20,000 levels must work).

_END: Final = object()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?")  # ASCII digits only


def _encode_deep(value: JsonValue) -> str:
    parts: list[str] = []
    stack: list[tuple[Any, bool, list[bool]]] = []
    item: Any
    key: Any
    child: Any

    def open_value(item: Any) -> None:
        if isinstance(item, dict):
            parts.append("{")
            stack.append((iter(item.items()), True, [True]))
        elif isinstance(item, list):
            parts.append("[")
            stack.append((iter(item), False, [True]))
        else:
            parts.append(json.dumps(item, ensure_ascii=False, allow_nan=False))

    open_value(value)
    while stack:
        items, is_object, first = stack[-1]
        item = next(items, _END)
        if item is _END:
            parts.append("}" if is_object else "]")
            stack.pop()
            continue
        if not first[0]:
            parts.append(",")
        first[0] = False
        if is_object:
            key, child = item
            parts.append(json.dumps(key, ensure_ascii=False) + ":")
            open_value(child)
        else:
            open_value(item)
    return "".join(parts)


def _decode_deep(text: str) -> JsonValue:
    scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

    def skip(index: int) -> int:
        match = _WHITESPACE.match(text, index)
        return match.end() if match else index

    def read_key(index: int) -> tuple[str, int]:
        if not text.startswith('"', index):
            raise ValueError(f"expected a key at {index}")
        key, index = scanstring(text, index + 1)
        index = skip(index)
        if not text.startswith(":", index):
            raise ValueError(f"expected ':' at {index}")
        return key, skip(index + 1)

    stack: list[tuple[Any, str]] = []
    index = skip(0)
    while True:
        value: Any
        if text.startswith("{", index):
            index = skip(index + 1)
            if not text.startswith("}", index):
                key, index = read_key(index)
                stack.append(({}, key))
                continue
            value, index = {}, index + 1
        elif text.startswith("[", index):
            index = skip(index + 1)
            if not text.startswith("]", index):
                stack.append(([], ""))
                continue
            value, index = [], index + 1
        elif text.startswith('"', index):
            value, index = scanstring(text, index + 1)
        elif (number := _NUMBER.match(text, index)) is not None:
            whole, fraction, exponent = number.groups()
            value = _parse_float(number.group()) if fraction or exponent else _parse_int(whole)
            index = number.end()
        elif text.startswith("null", index):
            value, index = None, index + 4
        elif text.startswith("true", index):
            value, index = True, index + 4
        elif text.startswith("false", index):
            value, index = False, index + 5
        else:
            raise ValueError(f"not JSON at {index}")
        while True:
            index = skip(index)
            if not stack:
                if index != len(text):
                    raise ValueError(f"extra data at {index}")
                return value  # type: ignore[no-any-return]
            container, key = stack[-1]
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)
            if text.startswith(",", index):
                index = skip(index + 1)
                if isinstance(container, dict):
                    key, index = read_key(index)
                    stack[-1] = (container, key)
                break
            closer = "}" if isinstance(container, dict) else "]"
            if not text.startswith(closer, index):
                raise ValueError(f"expected ',' or {closer!r} at {index}")
            stack.pop()
            value, index = container, index + 1
