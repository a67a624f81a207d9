"""Summary compaction: its policy, which span it compacts, and whether that span still stands once
the summarizer is done (SPEC-DECISIONS D8; notes/dsh-compaction-projection §4.5, §4.7, §5).

Summary compaction is lossy and comes last: a head-anchored, balanced span of the surface is
replaced by one ``user/message`` checkpoint holding a model-written summary (:mod:`spec.shrink.summary`).
The log brackets the attempt with ``compaction/start`` ... ``compaction/end``, whose rules (the
durable lock among them) are :mod:`spec.shrink.bracket`. Everything here decides; the order of the steps
is :mod:`spec.shrink.engine`. Spill, the lossless step that comes first, is
:mod:`spec.shrink.spill`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from spec.codes import Code, SpecError, reject
from spec.log.events import Event
from spec.log.json import JsonValue, is_safe_integer, js_text
from spec.log.surface import ReplaceOp, plan_replace
from spec.shrink.pairing import derive_cut_balance
from spec.shrink.tokens import PricedNode

# --- policy and the compact spec (notes §5.1) ------------------------------------------------------

DEFAULT_THRESHOLD_RATIO: Final = 0.8  # fraction of the context window that triggers compaction
DEFAULT_RETAIN_RATIO: Final = 0.16  # fraction of the context window kept verbatim at the tail
DEFAULT_MAX_TOKENS: Final = 8192  # tokens the summarizer may generate
DEFAULT_COMPACTION_RETRIES: Final = 1  # extra pressure attempts after the first
DEFAULT_MAX_OVERFLOW_RETRIES: Final = 1  # compaction-then-retry rounds per overflow sequence

CONFIG_NAME: Final = "BasicCompactionConfig"
POLICY_KEYS: Final = {
    "thresholdRatio": "threshold_ratio",
    "retainRatio": "retain_ratio",
    "retainTokens": "retain_tokens",
    "summarizationProvider": "summarization_provider",
    "summarizationModel": "summarization_model",
    "maxTokens": "max_tokens",
    "compactionRetries": "compaction_retries",
    "maxOverflowRetries": "max_overflow_retries",
}


@dataclass(frozen=True)
class CompactionPolicy:
    """The pressure policy for one target. Retention is either ``retain_tokens`` or
    ``retain_ratio``, never both; with neither, the ratio defaults to 0.16 (notes §5.1)."""

    threshold_ratio: float = DEFAULT_THRESHOLD_RATIO
    retain_ratio: float | None = None
    retain_tokens: int | None = None
    summarization_provider: str = ""
    summarization_model: str = ""
    max_tokens: int = DEFAULT_MAX_TOKENS
    compaction_retries: int = DEFAULT_COMPACTION_RETRIES
    max_overflow_retries: int = DEFAULT_MAX_OVERFLOW_RETRIES


@dataclass(frozen=True)
class CompactSpec:
    """A policy resolved against a context window, in tokens."""

    threshold_tokens: int
    retain_tokens: int


def derive_retain_ratio(policy: CompactionPolicy) -> float | None:
    """The ratio retention uses: the configured one, 0.16 when no retention is configured, none
    when ``retain_tokens`` is set (notes §5.1)."""
    if policy.retain_ratio is not None:
        return policy.retain_ratio
    return DEFAULT_RETAIN_RATIO if policy.retain_tokens is None else None


def _is_number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _is_ratio(value: object) -> bool:
    return _is_number(value) and 0 < value <= 1  # type: ignore[operator]


def validate_compaction_policy(policy: CompactionPolicy, name: str = CONFIG_NAME) -> None:
    """Both ratios lie in (0, 1], the retain ratio below the threshold ratio; retention is a ratio
    or a non-negative token count, not both; the summarization provider and model are both empty or
    both set; ``maxTokens`` is a positive integer and the two retry counts non-negative integers
    (notes §5.1)."""

    def fail(message: str) -> SpecError:
        return reject(Code.COMPACTION_CONFIG_INVALID, message)

    if not _is_ratio(policy.threshold_ratio):
        raise fail(f"{name}.thresholdRatio ({js_text(policy.threshold_ratio)}) must be a number in (0, 1]")
    if policy.retain_ratio is not None and policy.retain_tokens is not None:
        raise fail(f"{name}: retainRatio and retainTokens are mutually exclusive")
    if policy.retain_ratio is not None:
        if not _is_ratio(policy.retain_ratio):
            raise fail(f"{name}.retainRatio ({js_text(policy.retain_ratio)}) must be a number in (0, 1]")
        if policy.retain_ratio >= policy.threshold_ratio:
            raise fail(
                f"{name}: retainRatio ({js_text(policy.retain_ratio)}) must be less than the resolved thresholdRatio "
                f"({js_text(policy.threshold_ratio)})"
            )
    if policy.retain_tokens is not None and not (
        is_safe_integer(policy.retain_tokens) and policy.retain_tokens >= 0
    ):
        raise fail(f"{name}.retainTokens ({js_text(policy.retain_tokens)}) must be a non-negative integer")
    provider, model = policy.summarization_provider, policy.summarization_model
    if not isinstance(provider, str) or not isinstance(model, str) or (provider == "") != (model == ""):
        raise fail(
            f"{name}: summarizationProvider and summarizationModel must be set together as an empty or non-empty pair"
        )
    if not (is_safe_integer(policy.max_tokens) and policy.max_tokens >= 1):
        raise fail(f"{name}.maxTokens ({js_text(policy.max_tokens)}) must be a positive integer")
    for key, value in (
        ("compactionRetries", policy.compaction_retries),
        ("maxOverflowRetries", policy.max_overflow_retries),
    ):
        if not (is_safe_integer(value) and value >= 0):
            raise fail(f"{name}.{key} ({js_text(value)}) must be a non-negative integer")


def resolve_target_policy(
    default: CompactionPolicy, override: Mapping[str, JsonValue] | None
) -> CompactionPolicy:
    """A model policy override (camelCase policy keys) merges over the defaults field by field. An
    override that names ``retainTokens`` or ``retainRatio`` replaces the inherited retention form;
    otherwise the default's form is inherited. The result is validated (notes §5.1)."""
    if not override:
        validate_compaction_policy(default)
        return default
    for key in override:
        if key not in POLICY_KEYS:
            raise reject(Code.COMPACTION_CONFIG_INVALID, f'{CONFIG_NAME}: unknown key "{key}"')
    changes: dict[str, object] = {POLICY_KEYS[key]: value for key, value in override.items()}
    if "retainTokens" in override or "retainRatio" in override:
        changes.setdefault("retain_tokens", None)
        changes.setdefault("retain_ratio", None)
    merged = replace(default, **changes)  # type: ignore[arg-type]
    validate_compaction_policy(merged)
    return merged


def resolve_compact_spec(
    policy: CompactionPolicy, context_window: int, target_key: str | None = None
) -> CompactSpec:
    """``thresholdTokens = floor(window × thresholdRatio)``; ``retainTokens`` is the configured
    count or ``floor(window × retainRatio)`` and must stay below the threshold. The window is a
    positive integer (notes §5.1). ``target_key`` (``provider/model``) names the target in messages."""
    if not (is_safe_integer(context_window) and context_window >= 1):
        raise reject(
            Code.COMPACTION_CONFIG_INVALID,
            f"{CONFIG_NAME}: contextWindow ({js_text(context_window)}) must be a positive integer",
        )
    window = int(context_window)
    threshold = math.floor(window * policy.threshold_ratio)
    ratio = derive_retain_ratio(policy)
    retain = (
        int(policy.retain_tokens) if policy.retain_tokens is not None else math.floor(window * (ratio or 0))
    )
    if retain >= threshold:
        target = f" {target_key}" if target_key else ""
        raise reject(
            Code.COMPACTION_CONFIG_INVALID,
            f"{CONFIG_NAME}:{target} retainTokens ({retain}) must be less than threshold tokens {threshold}",
        )
    return CompactSpec(threshold_tokens=threshold, retain_tokens=retain)


# --- which span to compact (notes §5.2, §4.5 step 2) -----------------------------------------------


def select_compactable_range(
    priced: Sequence[PricedNode], nodes: Sequence[int], events: Sequence[Event], retain_tokens: int
) -> tuple[int, int] | None:
    """``selectCompactableRange``: walking from the tail, keep nodes until their price reaches
    ``retain_tokens`` (at least one node is always kept); then move the cut head-ward until it is
    balanced. The region is everything before the cut, from the head: ``(nodes[0], nodes[cut-1])``,
    or ``None`` when nothing is left to compact. The priced seqs must be the current surface
    (notes §5.2)."""
    if not priced:
        return None
    if tuple(seq for seq, _ in priced) != tuple(nodes):
        raise reject(
            Code.COMPACTION_SURFACE_MISMATCH,
            "compaction: token-meter surface does not match the current session surface",
        )
    keep_from = 0
    accumulated = 0
    for index in range(len(priced) - 1, -1, -1):
        accumulated += priced[index][1]
        if accumulated >= retain_tokens:
            keep_from = index
            break
    if keep_from == 0:
        return None
    cuts = derive_cut_balance(nodes, events)
    while keep_from > 0 and not cuts[keep_from]:
        keep_from -= 1
    if keep_from == 0:
        return None
    return nodes[0], nodes[keep_from - 1]


@dataclass(frozen=True)
class CompactionRegion:
    """A validated span: positions ``first..last`` of the surface hold the ``shadowed`` nodes."""

    start: int
    end: int
    first: int
    last: int
    shadowed: tuple[int, ...]


def plan_compaction_region(
    nodes: Sequence[int], events: Sequence[Event], start: int, end: int
) -> CompactionRegion:
    """``validateSurfaceRegion``: ``start`` and ``end`` are current nodes, start not after end,
    the cut before ``start`` and the cut after ``end`` are balanced (notes §4.5 step 2). Each
    refusal is a message of its own, as DSH's are, so a failed bracket's ``error`` text (a chain of
    causes) is the same as DSH writes."""
    try:
        first, last = plan_replace(nodes, ReplaceOp(start=start, end=end))
    except SpecError as error:
        if error.code == Code.REPLACE_START_NOT_FOUND:
            raise reject(
                Code.COMPACTION_RANGE_INVALID, f"compactRegion: start seq {start} not found in surface"
            ) from None
        if error.code == Code.REPLACE_END_NOT_FOUND:
            raise reject(
                Code.COMPACTION_RANGE_INVALID, f"compactRegion: end seq {end} not found in surface"
            ) from None
        first, last = list(nodes).index(start), list(nodes).index(end)
        raise reject(
            Code.COMPACTION_RANGE_INVALID,
            f"compactRegion: start seq {start} (position {first}) is after end seq {end} (position {last}) on the surface",
        ) from None
    cuts = derive_cut_balance(nodes, events)
    if not cuts[first]:
        raise reject(
            Code.COMPACTION_RANGE_INVALID,
            f"compactRegion: start seq {start} is not a balanced boundary (would split a step's tool-call/result pair)",
        )
    if not cuts[last + 1]:
        raise reject(
            Code.COMPACTION_RANGE_INVALID,
            f"compactRegion: end seq {end} is not a balanced boundary (would split a step, or the step is still open)",
        )
    return CompactionRegion(
        start=start, end=end, first=first, last=last, shadowed=tuple(nodes[first : last + 1])
    )


# --- re-validation after the summarizer (notes §4.7) ----------------------------------------------


def validate_surface_stable(
    before: Sequence[PricedNode],
    after: Sequence[PricedNode],
    span: CompactionRegion,
    automatic: bool,
    events: Sequence[Event],
) -> None:
    """``assertStable``. Automatic compaction requires the whole priced surface (seqs and tokens of
    every node) to be unchanged; log-only appends are fine. Manual compaction requires only the
    selected span: still a valid region on the current surface, with the same nodes at the same
    prices; appends elsewhere are fine (notes §4.7). ``before`` is the priced surface the
    compaction was prepared from, ``after`` the current one, ``events`` the current log."""
    if automatic:
        if tuple(before) != tuple(after):
            raise reject(
                Code.COMPACTION_SURFACE_CHANGED, "compaction: session surface changed during summarization"
            )
        return
    try:
        now = plan_compaction_region(tuple(seq for seq, _ in after), events, span.start, span.end)
    except SpecError as error:
        raise reject(
            Code.COMPACTION_SURFACE_CHANGED,
            "compaction: the selected span is no longer a valid replacement target",
        ) from error
    if now.shadowed != span.shadowed:
        raise reject(
            Code.COMPACTION_SURFACE_CHANGED, "compaction: the selected span changed during summarization"
        )
    if tuple(after[now.first : now.last + 1]) != tuple(before[span.first : span.last + 1]):
        raise reject(
            Code.COMPACTION_SURFACE_CHANGED,
            "compaction: the selected span was rewritten during summarization",
        )
