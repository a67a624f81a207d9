"""What more than one harness's oracle needs."""

from __future__ import annotations

from spec.format.json_text import encode_json_text
from spec.log.json import JsonValue


def same_json(left: JsonValue, right: JsonValue) -> bool:
    """Equal JSON values, compared by their text: ``==`` recurses, and a value may be nested
    20,000 deep (D6), which the encoder handles."""
    return encode_json_text(left) == encode_json_text(right)
