"""The JSON text reader, :func:`spec.format.json_text.decode_json_text`.

Oracle, for any bytes ``data``:

- as ``bytes`` and as the ``str`` its strict UTF-8 decoding gives (when it decodes), the reader
  either returns a value or raises :class:`JsonTextError` (a ``SpecError``); nothing else;
- both forms give the same answer: the same value, or a refusal with the same code;
- no value holds an infinity or a NaN (a number the domain cannot hold is refused);
- decode∘encode is the identity on what was read: ``encode_json_text`` of the value decodes back
  to an equal value, and encoding that again gives the same text.
"""

from __future__ import annotations

import math

from fuzz import Finding
from fuzz.oracles import same_json
from spec.format.json_text import JsonTextError, decode_json_text, encode_json_text
from spec.log.json import JsonValue


def _answer(text: str | bytes) -> tuple[str, JsonValue]:
    try:
        return "ok", decode_json_text(text)
    except JsonTextError as error:
        return str(error.code), None


def _finite(value: JsonValue) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return False
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def one_input(data: bytes) -> None:
    as_bytes = _answer(data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        if as_bytes[0] == "ok":
            raise Finding(f"bytes that are not UTF-8 were read: {data!r}") from None
        return
    as_text = _answer(text)
    if as_text[0] != as_bytes[0] or (as_text[0] == "ok" and not same_json(as_text[1], as_bytes[1])):
        raise Finding(f"str and bytes disagree on {data!r}: {as_text!r} vs {as_bytes!r}")
    code, value = as_text
    if code != "ok":
        return
    if not _finite(value):
        raise Finding(f"a number outside the domain was read from {data!r}: {value!r}")
    encoded = encode_json_text(value)
    if encode_json_text(decode_json_text(encoded)) != encoded:
        raise Finding(f"decode∘encode is not the identity for {data!r}: {value!r} -> {encoded!r}")
