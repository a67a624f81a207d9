"""Spill: a tool result too large to keep inline is saved whole elsewhere, and the log records a
preview plus how to fetch the rest (SPEC-DECISIONS D8; seed 002; notes/dsh-compaction-projection
§10.1-§10.2).

Spill is lossless and comes before any summary compaction. A result spills only at the top level
and never for the ``read`` tool (reading a spilled file back must not spill again); it spills when
its estimated tokens exceed ``maxInlineTokens``; the log keeps a head and a tail of it and a notice
naming where the whole text is, under a per-session directory whose name does not reveal the
session id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import Final, Protocol, cast

from spec.codes import Code, reject
from spec.format.naming import encode_segment
from spec.log.json import FrozenList, JsonValue, is_safe_integer, js_text, snapshot_json
from spec.log.session import ABSENT
from spec.shrink.prune import derive_code_points
from spec.shrink.tokens import BLOCK_OVERHEAD, CHARS_PER_TOKEN, estimate_content, utf16_length

# --- which results spill, and what the log keeps (notes §10.2, adapted from bytes to tokens) ---

READ_TOOL_NAME: Final = "read"  # the tool a model uses to fetch a spilled result back
SPILL_LABEL: Final = "result"  # which part of a tool call was spilled
BASE_MAX_INLINE_TOKENS: Final = 12500  # tokens; the value the seed's base configuration ships
SPILL_RETRIEVAL_HINT: Final = "Use read with offset/limit, or grep this path to search within it."
SPILL_SEPARATOR: Final = "\n\n"  # between the preview and the notice


def is_spill_candidate(tool_name: str, nested: bool) -> bool:
    """Only a top-level tool call's result may spill, and never the ``read`` tool's: the result
    of a nested call belongs to its parent, and a read of a spilled file must come back whole
    (notes §10.2 step 2)."""
    return not nested and tool_name != READ_TOOL_NAME


def plan_max_inline_tokens(configured: object, has_store: bool) -> int | None:
    """The limit a spill policy runs with. Not configured (``ABSENT``), it is the seed's base
    configuration — "base 配置里 maxInlineTokens 是 12500" — wherever a spill store is configured,
    and no spilling without one (there is nowhere to put the text). Configured, it is that value:
    ``None`` turns spill off (the seed: "字段省略则整个策略不启用", the field left out of the policy's
    own configuration disables it), a number is checked by :func:`validate_max_inline_tokens`."""
    if configured is ABSENT:
        return BASE_MAX_INLINE_TOKENS if has_store else None
    validate_max_inline_tokens(configured)
    return None if configured is None else int(configured)  # type: ignore[call-overload]


def validate_max_inline_tokens(value: object) -> None:
    """``maxInlineTokens`` is absent (no spilling at all) or a non-negative integer (D8)."""
    if value is not None and not (is_safe_integer(value) and value >= 0):
        raise reject(
            Code.SPILL_CONFIG_INVALID,
            f"spill-policy: maxInlineTokens must be a non-negative integer (got {js_text(value)})",
        )


def should_spill(estimated_tokens: int, max_inline_tokens: int | None) -> bool:
    """A result spills when a limit is configured and its estimated tokens (``estimate_content`` of
    the result's content) are strictly above it (D8: the seed's ``maxInlineTokens``; strict ``>`` as
    in notes §10.2)."""
    return max_inline_tokens is not None and estimated_tokens > max_inline_tokens


def derive_spill_text(blocks: Sequence[JsonValue]) -> str | None:
    """Only an all-text result can spill: its text blocks concatenated with no separator; a result
    with any other block is left alone (``None``) (notes §10.2 step 3)."""
    texts: list[str] = []
    for block in blocks:
        if not (
            isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        ):
            return None
        texts.append(block["text"])  # type: ignore[arg-type]
    return "".join(texts)


def derive_spill_notice(omitted: int, locator: str, retrieval_hint: str = SPILL_RETRIEVAL_HINT) -> str:
    """What the model is told: how much was left out (in UTF-16 code units, the token meter's
    unit; nothing when nothing was), where the whole result is, and how to read it."""
    omitted_text = f"Omitted {omitted} characters. " if omitted > 0 else ""
    return f"({omitted_text}Full formatted result stored at: {locator}. {retrieval_hint})"


def derive_spill_preview(
    text: str, max_inline_tokens: int, locator: str, retrieval_hint: str = SPILL_RETRIEVAL_HINT
) -> str | None:
    """The text the log records in place of a spilled result: a head and a tail of the original
    joined with no separator, a blank line, then the notice; or the notice alone when no preview
    fits. As one text block it must cost at most ``max_inline_tokens``; when even that cannot be
    met the result is kept inline (``None``). Budgets are UTF-16 code units and cuts never split a
    surrogate pair (this project's token form of notes §10.2 steps 6-9)."""
    text = "".join(derive_code_points(text))
    total = utf16_length(text)
    capacity = max(0, max_inline_tokens - BLOCK_OVERHEAD) * CHARS_PER_TOKEN
    reserve = utf16_length(derive_spill_notice(total, locator, retrieval_hint)) + len(SPILL_SEPARATOR)
    budget = max(0, capacity - reserve)
    head = _take_units(text, (budget + 1) // 2)
    tail = _take_units(text[len(head) :][::-1], budget // 2)[::-1]
    preview = head + tail
    notice = derive_spill_notice(total - utf16_length(preview), locator, retrieval_hint)
    replaced = f"{preview}{SPILL_SEPARATOR}{notice}" if preview else notice
    if estimate_content([{"type": "text", "text": replaced}]) > max_inline_tokens:
        return None
    return replaced


def _take_units(text: str, units: int) -> str:
    """The longest prefix of ``text`` within ``units`` UTF-16 code units."""
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


# --- the spill step (notes §10.2) ----------------------------------------------------------------


@dataclass(frozen=True)
class SaveSpill:
    """The effect of spilling: save ``text``, the ``label`` of a ``tool_name`` call, whole under
    ``suggested_name``, and answer where it went (a :class:`SpillLocation`), or raise."""

    tool_name: str
    label: str
    suggested_name: str
    text: str


class SpillLocation(Protocol):
    """Where a spilled text went, and the sentence that tells the model how to read it."""

    @property
    def locator(self) -> str: ...

    @property
    def retrieval_hint(self) -> str: ...


@dataclass(frozen=True)
class SpillDecision:
    """The content the ``tool/result`` carries; where the whole text went when it spilled
    (``None``: kept inline); why a result that should have spilled stayed inline — the save's own
    failure, or a notice that alone would break the limit (the saved text is then an orphan)."""

    content: FrozenList
    saved: SpillLocation | None = None
    save_failure: Exception | None = None
    notice_too_large: bool = False


def plan_spill(
    tool_name: str, content: FrozenList, max_inline_tokens: int | None, nested: bool
) -> Generator[SaveSpill, object, SpillDecision]:
    """The spill step as a sans-I/O plan: a top-level, all-text result (not the ``read`` tool's)
    whose estimated tokens exceed the limit is saved whole (one :class:`SaveSpill` effect), then
    logged as a head-and-tail preview and the notice naming where it is. Best effort: a failing
    save, or a notice that alone breaks the limit, keeps the result inline as it came (notes
    §10.2, D8)."""
    keep = SpillDecision(content)
    if max_inline_tokens is None or not is_spill_candidate(tool_name, nested):
        return keep
    text = derive_spill_text(content)
    if text is None or not should_spill(estimate_content(content), max_inline_tokens):
        return keep
    try:
        saved = cast(
            SpillLocation,
            (yield SaveSpill(tool_name, SPILL_LABEL, derive_spill_suggested_name(tool_name), text)),
        )
    except Exception as error:
        return replace(keep, save_failure=error)
    replaced = derive_spill_preview(text, max_inline_tokens, saved.locator, saved.retrieval_hint)
    if replaced is None:
        return replace(keep, notice_too_large=True)
    preview = snapshot_json([{"type": "text", "text": replaced}])
    assert isinstance(preview, FrozenList)
    return SpillDecision(preview, saved)


# --- where spilled text is stored (notes §10.1) ------------------------------------------------------

SESSION_DIR_HASH_CHARS: Final = 12  # hex characters of sha256(session id) in a spill directory name
MEMORY_SPILL_ROOT: Final = "memory://spill"  # where an in-memory spill store names the texts it keeps


def derive_spill_session_dir(session_id: str) -> str:
    """A session's spill directory: ``session-`` and the first 12 hex digits of the SHA-256 of
    its id's UTF-8 bytes, stable for the session and free of path characters (notes §10.1)."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"session-{digest[:SESSION_DIR_HASH_CHARS]}"


def derive_spill_suggested_name(tool_name: str) -> str:
    """The name a spill asks for: the tool's name with ``.txt`` (notes §10.2 step 5)."""
    return f"{tool_name}.txt"


def derive_spill_file_name(token: str, suggested_name: str) -> str:
    """A spilled text's file name: a fresh random token (so that two spills never collide), a
    hyphen, and the suggested name as one safe path segment (notes §10.1; the segment encoding is
    the session directory's, ``spec.format.naming.encode_segment``)."""
    return f"{token}-{encode_segment(suggested_name)}"


def derive_memory_spill_token(count: int) -> str:
    """The token of the ``count``-th text an in-memory spill store saved (counted from 1): ``count``
    in 12 hex digits, as long as the random token of a directory store's file name (notes §10.1)."""
    return f"{count:012x}"


def derive_memory_spill_locator(session_id: str, count: int, suggested_name: str) -> str:
    """Where an in-memory spill store keeps the ``count``-th text it saved (counted from 1):
    ``memory://spill/``, the session's spill directory, and a file name whose token is ``count`` in
    12 hex digits. The token is :func:`derive_memory_spill_token`'s. The conformance protocol's
    spill store names its texts this way, so that the notice a spilled result carries is the same
    in every subject (conformance/PROTOCOL.md)."""
    token = derive_memory_spill_token(count)
    return f"{MEMORY_SPILL_ROOT}/{derive_spill_session_dir(session_id)}/{derive_spill_file_name(token, suggested_name)}"
