"""What more than one harness's oracle needs."""

from __future__ import annotations

from fuzz import Finding
from spec.codes import Code, SpecError
from spec.format.json_text import encode_json_text
from spec.log.json import JsonValue


def same_json(left: JsonValue, right: JsonValue) -> bool:
    """Equal JSON values, compared by their text: ``==`` recurses, and a value may be nested
    20,000 deep (D6), which the encoder handles."""
    return encode_json_text(left) == encode_json_text(right)


def typed_refusal(error: SpecError) -> None:
    """A refusal the oracle allows: a :class:`SpecError` whose code is one of :class:`Code`."""
    if not isinstance(error.code, Code):
        raise Finding(f"a refusal without a spec code: {error!r}") from None
