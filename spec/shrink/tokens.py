"""Token estimation: the fixed heuristic behind every pricing decision of context shrinking
(notes/dsh-compaction-projection §3, §7).

Lengths are JavaScript string lengths, that is UTF-16 code units: a character outside the Basic
Multilingual Plane counts 2. The heuristic has no configuration. A block of unknown shape is priced
by the length of its compact JSON text, as ``JSON.stringify`` writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from spec.codes import Code, reject
from spec.format.json_text import encode_json_text
from spec.log.events import (
    COMPACTION_PRUNE,
    COMPACTION_SUMMARY,
    Event,
    Message,
    derive_event_message,
    event_data,
    is_named,
    is_surface_event,
)
from spec.log.json import JsonValue, is_event_seq, is_safe_integer

CHARS_PER_TOKEN: Final = 4  # UTF-16 code units per token
BLOCK_OVERHEAD: Final = 4  # tokens added per content block
ROLE_OVERHEAD: Final = 4  # tokens added per message
SYSTEM_OVERHEAD: Final = 4  # tokens added for a non-empty system prompt
TOOLS_OVERHEAD: Final = 4  # tokens added for a non-empty tool list

SHADOW_PRICE_EVENT_TYPES: Final = frozenset({COMPACTION_SUMMARY, COMPACTION_PRUNE})

PricedNode = tuple[int, int]
"""``(seq, tokens)``: one current surface node and its heuristic price."""


def utf16_length(text: str) -> int:
    """JavaScript's ``text.length``: one unit per code point, two for a code point above U+FFFF."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _ceil_tokens(length: int) -> int:
    return -(-length // CHARS_PER_TOKEN)


def estimate_text(text: str) -> int:
    """A run of text costs one token per four UTF-16 code units, rounded up (§3)."""
    return _ceil_tokens(utf16_length(text))


def estimate_json(value: JsonValue) -> int:
    """A JSON value costs the token price of its compact JSON text (``JSON.stringify``) (§3)."""
    return estimate_text(encode_json_text(value))


def estimate_content(blocks: Sequence[JsonValue] | JsonValue) -> int:
    """The price of a content array, summed per block (§3): ``text``/``reasoning`` cost their text
    plus 4; ``tool-call`` costs its name and its arguments, each rounded up separately, plus 4;
    ``tool-result`` costs its inner content plus 4; any other block costs 4 plus its JSON text.
    A block whose fields do not have those types (a text that is not a string, a tool-result whose
    content is not an array) is priced as an unknown block, and a non-array prices 0: DSH would
    fail on them, this project keeps the estimate total."""
    total = 0
    pending: list[object] = [blocks]
    while pending:
        current = pending.pop()
        if not isinstance(current, (list, tuple)):
            continue
        for block in current:
            total += BLOCK_OVERHEAD + _estimate_block_body(block, pending)
    return total


def _estimate_block_body(block: JsonValue, pending: list[object]) -> int:
    """The price of one block without its overhead; a tool-result's inner content is queued."""
    if isinstance(block, dict):
        kind = block.get("type")
        if kind in ("text", "reasoning") and isinstance(block.get("text"), str):
            return estimate_text(block["text"])  # type: ignore[arg-type]
        name, arguments = block.get("name"), block.get("arguments")
        if kind == "tool-call" and isinstance(name, str) and isinstance(arguments, str):
            return estimate_text(name) + estimate_text(arguments)
        if kind == "tool-result" and isinstance(block.get("content"), list):
            pending.append(block["content"])
            return 0
    return estimate_json(block)


def estimate_message(message: JsonValue) -> int:
    """A message costs its content plus 4 for the role (§3). A message that is not an object, or
    has no content array, costs just the 4."""
    content = message.get("content") if isinstance(message, dict) else None
    return estimate_content(content) + ROLE_OVERHEAD


def estimate_system_tokens(system: str | None) -> int:
    """A non-empty system prompt costs its text plus 4; none or ``""`` costs 0 (§3)."""
    return estimate_text(system) + SYSTEM_OVERHEAD if system else 0


def estimate_tools_tokens(tools: Sequence[JsonValue] | None) -> int:
    """A non-empty tool list costs the JSON text of the whole list plus 4; none or ``[]`` costs 0
    (§3)."""
    return estimate_json(list(tools)) + TOOLS_OVERHEAD if tools else 0


def estimate_node(event: Event) -> int:
    """A surface node costs the message it shows the model, or 0 when it shows none (§3)."""
    message: Message | None = derive_event_message(event)
    return estimate_message(message) if message is not None else 0


def price_surface(nodes: Sequence[int], events: Sequence[Event]) -> tuple[PricedNode, ...]:
    """The heuristic price of every current surface node, in surface order: ``measure().nodes``
    (§3). ``events`` is the whole log; every node must name the event with that seq."""
    priced: list[PricedNode] = []
    for seq in nodes:
        event = events[seq] if 0 <= seq < len(events) else None
        if event is None or not is_event_seq(event.get("seq")) or event.get("seq") != seq:
            raise reject(
                Code.TOKEN_SURFACE_CORRUPT, f"token surface: surface seq {seq} has no matching session event"
            )
        priced.append((seq, estimate_node(event)))
    return tuple(priced)


# --- the shadow-price protocol (§7) ---------------------------------------------------------------


@dataclass(frozen=True)
class ShadowClaim:
    """An armed shadow price: the range the next replace must name, and what it shadows."""

    start: int
    end: int
    tokens: int


def derive_shadow_claim(event: Event) -> ShadowClaim | None:
    """A compaction/summary or compaction/prune arms a claim from its ``shadowedRange`` and
    ``shadowedTokenCount``; any other event arms none. A metering event whose range or price is not
    a pair of seqs and a safe integer arms none either (this project's choice: it then prices as a
    legacy replace)."""
    if not is_named(event.get("type"), SHADOW_PRICE_EVENT_TYPES):
        return None
    data = event_data(event)
    shadowed_range, tokens = data.get("shadowedRange"), data.get("shadowedTokenCount")
    if not isinstance(shadowed_range, dict) or not is_safe_integer(tokens):
        return None
    start, end = shadowed_range.get("start"), shadowed_range.get("end")
    if not is_event_seq(start) or not is_event_seq(end):
        return None
    return ShadowClaim(start=int(start), end=int(end), tokens=int(tokens))


def fold_shadow_price(claim: ShadowClaim | None, event: Event) -> tuple[ShadowClaim | None, int]:
    """One step of the O(1) surface-token fold: returns the next claim and the token delta (§7).
    A metering event arms a claim; any other log-only event expires it; a surface append adds its
    price; a replace with no claim adds 0 (legacy drift); a replace whose range equals the claim's
    adds its price minus the claim's tokens; a replace over another range is rejected. Every
    surface event clears the claim."""
    if not is_surface_event(event):
        return derive_shadow_claim(event), 0
    op = event["surfaceOp"]
    price = estimate_node(event)
    if op == "append":
        return None, price
    if claim is None:
        return None, 0
    start, end = (op.get("start"), op.get("end")) if isinstance(op, dict) else (None, None)
    if (start, end) != (claim.start, claim.end):
        raise reject(
            Code.TOKEN_SHADOW_PRICE_MISMATCH,
            f"token surface: replace at seq {event.get('seq')} over range {start}-{end} has no adjacent shadow price "
            f"(armed claim covers {claim.start}-{claim.end})",
        )
    return None, price - claim.tokens
