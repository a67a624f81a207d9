"""When the context shrinks: pressure, the order of the shrinking steps, and context-overflow
recovery (notes/dsh-compaction-projection §5.3, §6.3-§6.4, §8; SPEC-DECISIONS D8).

Shrinking is ordered by cost. Under pressure (the context holds at least the threshold) the
deterministic prune pass runs first and is measured again; only if that is not enough does a lossy
summary compaction run, and then at most ``compactionRetries + 1`` times. When the provider refuses
a request because the context window is exceeded, the same steps run without a threshold, keeping
only the newest indivisible unit, and the request is retried only if the surface really changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from spec.codes import Code, SpecError, reject
from spec.log.events import REQUEST_HEADER, Event, event_data
from spec.log.json import JsonObject
from spec.log.unclosed import has_open_turn
from spec.shrink.tokens import PricedNode, estimate_system_tokens, estimate_tools_tokens

CONTEXT_WINDOW_EXCEEDED: Final = "CONTEXT_WINDOW_EXCEEDED"  # the canonical provider failure code (notes §8.1)
FORCED_RETAIN_TOKENS: Final = (
    0  # tokens: overflow and manual compaction keep only the newest unit (notes §5.3, §9.1)
)
PRESSURE_STAGE: Final = (
    "automatic pressure compaction"  # how the pressure lock pre-check names itself (notes §4.4)
)


# --- measuring (notes §3, §5.3) --------------------------------------------------------------------


def derive_request_header(events: Sequence[Event]) -> JsonObject | None:
    """The envelope of the latest routed request: ``data.header`` of the newest ``request/header``,
    or ``None`` when there is none (notes/dsh-session-core §13.2, ``foldRequestHeader``)."""
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.get("type") == REQUEST_HEADER:
            header = event_data(event).get("header")
            return header if isinstance(header, dict) else None
    return None


def derive_context_tokens(events: Sequence[Event], priced: Sequence[PricedNode]) -> int:
    """What the next request costs, estimated: the system prompt and tools of the latest request
    header (they never sit on the surface, but they fill the window) plus every priced surface node
    (notes §3 ``measure().totalTokens``, without a provider-usage anchor: this project's choice)."""
    header = derive_request_header(events) or {}
    system, tools = header.get("system"), header.get("tools")
    return (
        estimate_system_tokens(system if isinstance(system, str) else None)
        + estimate_tools_tokens(tools if isinstance(tools, list) else None)
        + sum(tokens for _, tokens in priced)
    )


def is_under_pressure(total_tokens: int, threshold_tokens: int) -> bool:
    """Pressure compaction runs when the context holds at least the threshold; below it nothing
    happens, not even pruning (notes §5.3 step 5.4, §6.4)."""
    return total_tokens >= threshold_tokens


def validate_context_capacity(context_window: int | None) -> int:
    """Pressure needs the routed model's context window; overflow recovery does not (notes §5.1)."""
    if context_window is None:
        raise reject(
            Code.COMPACTION_NO_CAPACITY,
            "compaction: no context capacity for this session; configure the model's context window",
        )
    return context_window


def validate_pressure_relieved(total_tokens: int, threshold_tokens: int, attempts: int) -> None:
    """After its last attempt, pressure compaction must have brought the context below the
    threshold (notes §5.3 step 5.7)."""
    if is_under_pressure(total_tokens, threshold_tokens):
        raise reject(
            Code.COMPACTION_STILL_ABOVE_THRESHOLD,
            f"compaction still above threshold after {attempts} compaction attempts "
            f"({total_tokens} estimated tokens >= threshold {threshold_tokens})",
        )


# --- the prune pass's precondition (notes §1.3, §6.3) ---------------------------------------------


def validate_prune_in_turn(events: Sequence[Event]) -> None:
    """A prune replacement is a replacing ``tool/result``, and those are appended only while a turn
    is open (notes/dsh-compaction-projection §1.3; the checker's ``turn-enclosed`` rule)."""
    if not has_open_turn(events):
        raise reject(
            Code.PRUNE_OUTSIDE_TURN, "tool/result surface replacement appended outside any open turn"
        )


# --- context-overflow recovery (notes §8.2) --------------------------------------------------------


def is_context_window_exceeded(failure_code: object) -> bool:
    """Overflow is recognised only by the canonical code ``CONTEXT_WINDOW_EXCEEDED``; adapters map
    their provider's wording to it (notes §8.1)."""
    return failure_code == CONTEXT_WINDOW_EXCEEDED


def may_attempt_overflow_recovery(
    failure_code: object, aborted: bool, retries: int, max_retries: int
) -> bool:
    """Recovery is attempted for a context-window failure of a request that was not cancelled,
    while fewer than ``maxOverflowRetries`` recoveries have run since the last reset; 0 disables
    it (notes §8.2 steps 1-4)."""
    return is_context_window_exceeded(failure_code) and not aborted and retries < max_retries


def is_overflow_retry_earned(generation_before: int, generation_after: int, aborted: bool) -> bool:
    """The failed request is retried only if the surface's ``replaceGeneration`` grew during the
    recovery and the request was not cancelled: a prune that landed counts even when the summary
    then failed; a compaction that reports success without a replace does not (notes §8.2 steps
    6-7; invariant I10)."""
    return not aborted and generation_after > generation_before


def derive_failure_code(error: BaseException) -> object:
    """The failure code an exception carries (its ``code`` attribute), or ``None``: how a request
    error is matched against :data:`CONTEXT_WINDOW_EXCEEDED`."""
    code = error.code if isinstance(error, SpecError) else getattr(error, "code", None)
    return code
