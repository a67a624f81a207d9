"""JSON text: how a value of the lossless domain is written as one line and read back, with a
JavaScript peer's number semantics (SPEC-DECISIONS D5; notes/dsh-persistence §4).

A stored log line, a header line and a protocol message are all this text. Writing keeps
non-ASCII raw and escapes a lone surrogate as ``JSON.stringify`` does; reading refuses NaN and
Infinity, rounds integers beyond 2**53 to doubles and maps -0 to 0. Both directions are iterative
past the recursion limit (D6: 20,000 levels of nesting).
"""

from __future__ import annotations

import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any, Final, NoReturn

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


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def _parse_int(text: str) -> int | float:
    number = int(text)
    # A JavaScript reader rounds integers past 2**53 to the nearest double; do the same.
    return number if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER else float(number)


def _parse_float(text: str) -> float:
    number = float(text)
    # -0 has no place in the domain; a reader maps it to 0 rather than lose the record.
    return 0.0 if number == 0.0 else number


_DECODER: Final = json.JSONDecoder(
    parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant
)
"""``json.loads`` with these hooks builds this very decoder for every call; one is enough."""


def decode_json_text(text: str | bytes) -> JsonValue:
    """Parse one JSON text with a JavaScript reader's number semantics (D5): NaN and Infinity
    are refused, integers beyond 2**53 become doubles, -0 becomes 0. Raises ``ValueError``."""
    try:
        if isinstance(text, str) and not text.startswith("\ufeff"):
            return _DECODER.decode(text)  # type: ignore[no-any-return]  # what json.loads does
        return json.loads(  # type: ignore[no-any-return]
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant
        )
    except RecursionError:
        return _decode_deep(text.decode("utf-8") if isinstance(text, bytes) else text)


# The standard library's encoder and decoder recurse; these iterative twins take over for values
# nested deeper than the recursion limit allows (D6: 20,000 levels must work).

_END: Final = object()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?")


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
