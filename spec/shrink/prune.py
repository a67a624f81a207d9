"""Tool-result pruning: cut the middle out of large tool results on the surface
(SPEC-DECISIONS D8; notes/dsh-compaction-projection §6).

Pruning is deterministic and needs no model. It measures text in Unicode code points (what
JavaScript's ``Array.from(text).length`` counts), keeps a head and a tail of every oversized result,
and puts a marker where the middle was. Each prune lands as two adjacent appends: a
``compaction/prune`` metering event, then a ``tool/result`` that replaces the original node and may
change only its inner content (notes/dsh-session-core §3.7). The original stays in the log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Final

from spec.codes import Code, reject
from spec.log.events import TOOL_RESULT, Event, event_data
from spec.log.json import FrozenDict, FrozenList, JsonValue, is_safe_integer, js_text, snapshot_json
from spec.shrink.bracket import snapshot_compaction_data
from spec.shrink.tokens import estimate_message

PRUNE_MARKER: Final = "\n\n[... tool result middle pruned ...]\n\n"
PRUNE_MARKER_CODE_POINTS: Final = 39  # code points in PRUNE_MARKER

DEFAULT_THRESHOLD_CHARS: Final = 8192  # code points: results above this are pruned
DEFAULT_HEAD_CHARS: Final = 4096  # code points kept from the start
DEFAULT_TAIL_CHARS: Final = 1024  # code points kept from the end

CONFIG_KEYS: Final = {
    "thresholdChars": "threshold_chars",
    "headChars": "head_chars",
    "tailChars": "tail_chars",
}


@dataclass(frozen=True)
class PruneConfig:
    """The pruner's three sizes, all in code points of text (notes §6.1)."""

    threshold_chars: int = DEFAULT_THRESHOLD_CHARS
    head_chars: int = DEFAULT_HEAD_CHARS
    tail_chars: int = DEFAULT_TAIL_CHARS


def validate_prune_config(config: PruneConfig) -> None:
    """``thresholdChars`` is a positive integer, ``headChars`` and ``tailChars`` non-negative
    integers, and head + marker + tail fits within the threshold, so that a pruned result is always
    smaller than one that qualified (notes §6.1)."""
    name = "ToolResultPruneConfig"
    if not is_safe_integer(config.threshold_chars) or config.threshold_chars < 1:
        raise reject(
            Code.PRUNE_CONFIG_INVALID,
            f"{name}: thresholdChars must be a positive integer (got {js_text(config.threshold_chars)})",
        )
    for key, value in (("headChars", config.head_chars), ("tailChars", config.tail_chars)):
        if not is_safe_integer(value) or value < 0:
            raise reject(
                Code.PRUNE_CONFIG_INVALID,
                f"{name}: {key} must be a non-negative integer (got {js_text(value)})",
            )
    budget = config.head_chars + PRUNE_MARKER_CODE_POINTS + config.tail_chars
    if budget > config.threshold_chars:
        raise reject(
            Code.PRUNE_CONFIG_INVALID,
            f"{name}: headChars + marker + tailChars ({js_text(budget)}) must be at most thresholdChars "
            f"({js_text(config.threshold_chars)})",
        )


def decode_prune_config(raw: object) -> PruneConfig:
    """A configuration object: a ``null`` configuration, a missing key or a key whose value is
    ``null`` takes the default (DSH resolves each key with ``??``), an unknown key is rejected, and
    the result must pass :func:`validate_prune_config` (notes §6.1)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise reject(Code.PRUNE_CONFIG_INVALID, "ToolResultPruneConfig: configuration must be an object")
    for key in raw:
        if key not in CONFIG_KEYS:
            raise reject(
                Code.PRUNE_CONFIG_INVALID,
                f'ToolResultPruneConfig: unknown key "{key}" (allowed: thresholdChars, headChars, tailChars)',
            )
    values: dict[str, object] = {CONFIG_KEYS[key]: value for key, value in raw.items() if value is not None}
    defaults = PruneConfig()
    config = PruneConfig(
        **{f.name: values.get(f.name, getattr(defaults, f.name)) for f in fields(PruneConfig)}  # type: ignore[arg-type]
    )
    validate_prune_config(config)
    return PruneConfig(int(config.threshold_chars), int(config.head_chars), int(config.tail_chars))


# --- the content transform (notes §6.2) ------------------------------------------------------------


def derive_code_points(text: str) -> list[str]:
    """The code points of a text, as ``Array.from`` yields them: a surrogate pair is one code point
    (even when a Python string holds its halves separately), a lone surrogate is one too."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return list(text)
    return list(text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass"))


def _text_of(block: JsonValue) -> str | None:
    """The text of a ``{type: "text", text: <string>}`` block, else ``None``: only such blocks are
    measured and cut; every other block (a text block whose text is not a string included, a
    project choice) is kept whole."""
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None


def derive_text_code_points(blocks: Sequence[JsonValue]) -> int:
    """The size the pruner measures: code points over the text blocks only; other blocks count 0
    (notes §6.2)."""
    total = 0
    for block in blocks:
        text = _text_of(block)
        total += len(derive_code_points(text)) if text is not None else 0
    return total


def plan_pruned_content(blocks: Sequence[JsonValue], config: PruneConfig) -> FrozenList | None:
    """``pruneContent``: the text blocks are cut as :func:`plan_text_cuts` decides from their sizes
    in code points (``None``: the content is left alone). Each text block keeps its head, the
    marker if it carries it, and its tail; text blocks left empty are dropped, and other blocks
    stay in place. The result must be smaller than before and within the threshold, as measured
    (notes §6.2). ``config`` should have passed :func:`validate_prune_config`; one that did not may
    fail these checks."""
    texts = [_text_of(block) for block in blocks]
    points = [derive_code_points(text) for text in texts if text is not None]
    cuts = plan_text_cuts([len(block_points) for block_points in points], config)
    if cuts is None:
        return None
    pruned: list[JsonValue] = []
    text_cuts = iter(zip(points, cuts))
    for block, text in zip(blocks, texts):
        if text is None:
            pruned.append(block)
            continue
        assert isinstance(block, dict)
        block_points, cut = next(text_cuts)
        marker = PRUNE_MARKER if cut.marker else ""
        kept = "".join(block_points[: cut.head_end]) + marker + "".join(block_points[cut.tail_start :])
        if kept:
            pruned.append({**block, "text": kept})
    after = derive_text_code_points(pruned)
    if not (after <= config.threshold_chars and after < sum(cut.length for cut in cuts)):
        raise reject(
            Code.PRUNE_NOT_SMALLER, "tool-result prune: replacement must be smaller and within threshold"
        )
    frozen = snapshot_json(pruned)
    assert isinstance(frozen, FrozenList)
    return frozen


@dataclass(frozen=True)
class TextCut:
    """How one text block of ``length`` code points is cut: it keeps ``[0, head_end)``, then the
    marker when ``marker``, then ``[tail_start, length)``."""

    length: int
    head_end: int
    tail_start: int
    marker: bool


def plan_text_cuts(lengths: Sequence[int], config: PruneConfig) -> tuple[TextCut, ...] | None:
    """The code-point arithmetic of ``pruneContent`` over the text blocks' sizes, in order: a total
    of at most ``thresholdChars`` is left alone (``None``); otherwise the global span
    ``[headChars, total - tailChars)`` is removed, each block keeping what lies outside it, and the
    first block that meets the span carries the marker (notes §6.2). With a valid ``config`` what
    is kept is exactly ``headChars + tailChars`` code points, so head + marker + tail fits the
    threshold and is smaller than before, and the span is always found.

    pre: all(length >= 0 for length in lengths)
    pre: 0 <= config.head_chars and 0 <= config.tail_chars
    pre: config.head_chars + PRUNE_MARKER_CODE_POINTS + config.tail_chars <= config.threshold_chars
    post: (__return__ is None) == (sum(lengths) <= config.threshold_chars)
    post: __return__ is None or tuple(cut.length for cut in __return__) == tuple(lengths)
    post: __return__ is None or all(0 <= cut.head_end <= cut.tail_start <= cut.length for cut in __return__)
    post: __return__ is None or sum(1 for cut in __return__ if cut.marker) == 1
    post: __return__ is None or sum(cut.head_end + cut.length - cut.tail_start for cut in __return__) == config.head_chars + config.tail_chars
    """
    total = sum(lengths)
    if total <= config.threshold_chars:
        return None
    removed_start, removed_end = config.head_chars, total - config.tail_chars
    cuts: list[TextCut] = []
    block_start = 0
    marker_placed = False
    for length in lengths:
        block_end = block_start + length
        marker = not marker_placed and block_start < removed_end and block_end > removed_start
        marker_placed = marker_placed or marker
        head_end = _clamp(removed_start - block_start, 0, length)
        tail_start = _clamp(removed_end - block_start, 0, length)
        cuts.append(TextCut(length=length, head_end=head_end, tail_start=tail_start, marker=marker))
        block_start = block_end
    if not marker_placed:
        raise reject(Code.PRUNE_SPAN_NOT_FOUND, "tool-result prune: failed to locate the removed text span")
    return tuple(cuts)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(value, high))


# --- the session pass (notes §6.3) -----------------------------------------------------------------


@dataclass(frozen=True)
class PrunePlan:
    """One planned prune: append ``compaction/prune`` with ``prune_data``, then at once a
    ``tool/result`` with ``replacement_data``, ``surface_op`` and ``source_event_seqs``."""

    original_seq: int
    call_id: JsonValue
    prune_data: FrozenDict
    replacement_data: FrozenDict
    surface_op: FrozenDict
    source_event_seqs: FrozenList
    chars_before: int
    chars_after: int


@dataclass(frozen=True)
class PrunedEntry:
    """One pruned tool result: the node it replaced, the replacement, and the sizes in code points."""

    original_seq: int
    replacement_seq: int
    call_id: JsonValue
    chars_before: int
    chars_after: int


def derive_chars_removed(entries: Sequence[PrunedEntry]) -> int:
    """The characters a prune pass removed: each pruned result's characters before less its
    characters after, summed over the pass (notes §6.3 ``PruneResult.charsRemoved``)."""
    return sum(entry.chars_before - entry.chars_after for entry in entries)


def plan_prune_events(
    nodes: Sequence[int],
    events: Sequence[Event],
    config: PruneConfig,
    estimate: Callable[[JsonValue], int] = estimate_message,
) -> tuple[PrunePlan, ...]:
    """``pruneSession`` as a plan: every node of the current surface whose log event is a
    tool/result is a candidate, in surface order, with no age or recency rule. A candidate whose
    tool-result block's content :func:`plan_pruned_content` shrinks gets a metering event pricing
    the *original* message, and a replacement that differs only in that inner content (the message
    keeps its id, source, ``toolCallId`` and ``isError``; data keeps every other field; content
    blocks after the tool-result block are not carried over, as in DSH). A
    tool/result whose ``message.content[0]`` is not a block with a content array is skipped (a
    project choice; DSH would fail). Running the pass on its own result plans nothing (notes §6.3)."""
    validate_prune_config(config)
    plans: list[PrunePlan] = []
    for seq in list(nodes):
        event = events[seq] if 0 <= seq < len(events) else None
        if event is None or event.get("type") != TOOL_RESULT:
            continue
        data = event_data(event)
        message = data.get("message")
        content = message.get("content") if isinstance(message, Mapping) else None
        result = content[0] if isinstance(content, list) and content else None
        if (
            not isinstance(message, dict)
            or not isinstance(result, dict)
            or not isinstance(result.get("content"), list)
        ):
            continue
        inner: list[JsonValue] = result["content"]  # type: ignore[assignment]
        pruned = plan_pruned_content(inner, config)
        if pruned is None:
            continue
        plans.append(_plan_one(seq, data, message, result, inner, pruned, estimate))
    return tuple(plans)


def _plan_one(
    seq: int,
    data: Mapping[str, JsonValue],
    message: dict[str, JsonValue],
    result: dict[str, JsonValue],
    inner: list[JsonValue],
    pruned: FrozenList,
    estimate: Callable[[JsonValue], int],
) -> PrunePlan:
    source = message.get("source")
    replacement: dict[str, JsonValue] = {
        **data,
        "message": {**message, "content": [{**result, "content": pruned}]},
    }
    metering: dict[str, JsonValue] = {
        "shadowedRange": {"start": seq, "end": seq},
        "shadowedSeqs": [seq],
        "shadowedTokenCount": estimate(message),
    }
    return PrunePlan(
        original_seq=seq,
        call_id=source.get("callId") if isinstance(source, dict) else None,
        prune_data=snapshot_compaction_data(metering),
        replacement_data=snapshot_compaction_data(replacement),
        surface_op=snapshot_compaction_data({"op": "replace", "start": seq, "end": seq}),
        source_event_seqs=FrozenList([seq]),
        chars_before=derive_text_code_points(inner),
        chars_after=derive_text_code_points(pruned),
    )
