"""The compaction engine's plans: the order of its steps, written once (notes/dsh-compaction-projection
§4.5, §5.3, §6.3, §8.2, §9.1; SPEC-DECISIONS D8).

Each plan is a sans-I/O generator. It yields an effect request — read the session
(:class:`Observe`), append an event (:class:`Append`), mint an id (:class:`MintId`), call the
summarizer (:class:`Summarize`), ask whether the caller cancelled (:class:`Cancellation`), flush
(:class:`Flush`) — and receives the effect's answer through ``send()``; an effect that fails is
thrown into the plan (``generator.throw()``), so the plan's own ``try``/``except`` decides how the
bracket closes. :func:`run_plan` drives a plan with an executor's ``perform``. The reference engine
(``reference.shrink.compaction``) performs the effects on a live session, the conformance model
(``conformance.engine_model``) on its model state; neither restates the order. Every decision inside
a plan is a call into the rule modules (:mod:`spec.shrink.bracket`, :mod:`spec.shrink.compaction`,
:mod:`spec.shrink.pressure`, :mod:`spec.shrink.prune`, :mod:`spec.shrink.summary`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol, TypeAlias, TypeVar, cast

from spec.codes import Code, reject
from spec.log.events import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
)
from spec.log.session import ABSENT
from spec.log.writers import CALLER, COMPACTION_ENGINE, Writer
from spec.shrink.bracket import (
    MANUAL_FAILURE_TEXT,
    CompactionResult,
    Stage,
    derive_compaction_end,
    derive_compaction_lifecycle,
    derive_error_chain,
    derive_manual_outcome,
    plan_compaction_owner,
    should_flush_after_close,
    validate_compaction_inactive,
)
from spec.shrink.compaction import (
    CompactionPolicy,
    CompactionRegion,
    plan_compaction_region,
    resolve_compact_spec,
    select_compactable_range,
    validate_surface_stable,
)
from spec.shrink.pressure import (
    FORCED_RETAIN_TOKENS,
    PRESSURE_STAGE,
    derive_context_tokens,
    is_overflow_retry_earned,
    is_under_pressure,
    may_attempt_overflow_recovery,
    validate_context_capacity,
    validate_pressure_relieved,
    validate_prune_in_turn,
)
from spec.shrink.prune import PruneConfig, PrunedEntry, plan_prune_events
from spec.shrink.summary import (
    SummarizerOutput,
    derive_checkpoint_message,
    derive_shadowed_token_count,
    derive_summary_blocks,
    plan_summary_replacement,
    validate_summary_smaller,
)
from spec.shrink.tokens import price_surface

T = TypeVar("T")
E = TypeVar("E")
Trigger = Literal["pressure", "context-overflow"]

# --- what a plan reads -----------------------------------------------------------------------------


class SurfaceView(Protocol):
    """A surface as a plan reads it: its nodes in model-visible order and its replace count."""

    @property
    def nodes(self) -> Sequence[int]: ...

    @property
    def replace_generation(self) -> int: ...


class SessionView(Protocol):
    """A session as a plan reads it: its log and its surface (a live session or a model state)."""

    @property
    def events(self) -> Sequence[Event]: ...

    @property
    def surface(self) -> SurfaceView: ...


def derive_view_tokens(view: SessionView) -> int:
    """What the next request costs, estimated, for the session as it is now (notes §3, §5.3)."""
    return derive_context_tokens(view.events, price_surface(view.surface.nodes, view.events))


def _select_range(view: SessionView, retain_tokens: int) -> tuple[int, int] | None:
    """The head-anchored span to compact on the session as it is now, keeping ``retain_tokens``
    (:func:`spec.shrink.compaction.select_compactable_range`)."""
    nodes = view.surface.nodes
    return select_compactable_range(price_surface(nodes, view.events), nodes, view.events, retain_tokens)


# --- the effects a plan requests -------------------------------------------------------------------


@dataclass(frozen=True)
class Observe:
    """Answer the session as it is now (a :class:`SessionView`)."""


@dataclass(frozen=True)
class Append:
    """Append one event as ``writer`` and answer it; a refusal is thrown into the plan. The fields
    are the append op's, judged by the rules when the event is appended."""

    event_type: object
    data: object
    surface_op: object = ABSENT
    source_event_seqs: object = ABSENT
    writer: Writer = CALLER


@dataclass(frozen=True)
class MintId:
    """Answer a fresh id: a compaction's (``purpose`` ``compaction``, which starts an attempt), or
    the checkpoint message's of compaction ``compaction_id``."""

    purpose: Literal["compaction", "checkpoint"]
    compaction_id: str | None = None


@dataclass(frozen=True)
class Summarize:
    """Call the summarizer on ``region`` (priced ``shadowed_token_count``) and answer its output."""

    region: CompactionRegion
    shadowed_token_count: int


@dataclass(frozen=True)
class Cancellation:
    """Answer the caller's abort reason, or ``None`` while the operation is not cancelled."""


@dataclass(frozen=True)
class Flush:
    """Make every appended event durable; a failure is thrown into the plan."""


Effect: TypeAlias = Observe | Append | MintId | Summarize | Cancellation | Flush
Plan: TypeAlias = Generator[Effect, object, T]


def run_plan(plan: Generator[E, object, T], perform: Callable[[E], object]) -> T:
    """Drive ``plan`` to its end: each effect it yields is ``perform``-ed and the answer sent back;
    an effect that raises is thrown into the plan, which handles it or lets it out of here."""
    answer: object = None
    failure: BaseException | None = None
    while True:
        try:
            effect = plan.send(answer) if failure is None else plan.throw(failure)
        except StopIteration as stop:
            return cast(T, stop.value)
        try:
            answer, failure = perform(effect), None
        except BaseException as error:
            answer, failure = None, error


def _observe() -> Plan[SessionView]:
    return cast(SessionView, (yield Observe()))


def _append(request: Append) -> Plan[Event]:
    return cast(Event, (yield request))


def _seq_of(event: Event) -> int:
    seq = event.get("seq")
    assert isinstance(seq, int)
    return seq


def _raise_if_cancelled() -> Plan[None]:
    reason = yield Cancellation()
    if isinstance(reason, BaseException):
        raise reason


# --- the prune pass (notes §6.3) -------------------------------------------------------------------


def plan_prune_pass(config: PruneConfig) -> Plan[tuple[PrunedEntry, ...]]:
    """Prune every oversized tool result on the surface: for each, its ``compaction/prune`` (priced
    from the original) and at once the single-node replace that changes only the inner content.
    Refused outside a turn before anything is appended when there is anything to prune (a project
    choice); replacements that landed before a failing append stay. No bracket, no lock."""
    view = yield from _observe()
    plans = plan_prune_events(view.surface.nodes, view.events, config)
    if plans:
        validate_prune_in_turn(view.events)
    pruned: list[PrunedEntry] = []
    for plan in plans:
        yield from _append(Append(COMPACTION_PRUNE, plan.prune_data))
        replacement = yield from _append(
            Append(TOOL_RESULT, plan.replacement_data, plan.surface_op, plan.source_event_seqs)
        )
        seq = _seq_of(replacement)
        pruned.append(PrunedEntry(plan.original_seq, seq, plan.call_id, plan.chars_before, plan.chars_after))
    return tuple(pruned)


# --- the summary transaction (notes §4.5, §9.1) ----------------------------------------------------


def _summarize(region: CompactionRegion, shadowed_tokens: int) -> Plan[SummarizerOutput]:
    output = yield Summarize(region, shadowed_tokens)
    if not isinstance(output, SummarizerOutput):
        raise reject(Code.COMPACTION_SUMMARY_EMPTY, "summarizer returned no SummarizerOutput")
    # Whatever a summarizer says, only its text blocks become the summary (notes §4.8).
    return replace(output, summary=derive_summary_blocks(output.summary))


def plan_transaction(
    start: int, end: int, manual: bool, source_command_id: str | None = None
) -> Plan[CompactionResult]:
    """One summary compaction of the surface span ``start..end``: the span validated, the lock and
    the owner checked, an id minted, then ``compaction/start``; from there exactly one
    ``compaction/end`` is attempted on every path — after the summary, its shrink check, the
    surface re-validated, ``compaction/summary`` and the checkpoint; with ``error`` on any failure
    (a failing close leaves the start as the durable busy marker). An interrupt (a
    ``BaseException``) passes through once the close was attempted. A manual compaction then
    flushes once its bracket is closed and answers by :func:`derive_manual_outcome`; an automatic
    one raises its failure as it is (notes §4.5 steps 2-12, §9.1)."""
    if manual:
        yield from _raise_if_cancelled()
    view = yield from _observe()
    region = plan_compaction_region(view.surface.nodes, view.events, start, end)
    validate_compaction_inactive(view.events, "compaction")
    turn = plan_compaction_owner(view.events, manual)
    compaction_id = cast(str, (yield MintId("compaction")))
    lifecycle = derive_compaction_lifecycle(compaction_id, turn, source_command_id)
    start_seq = _seq_of((yield from _append(Append(COMPACTION_START, lifecycle, writer=COMPACTION_ENGINE))))
    stage: Stage = "summary"
    closing = closed = False
    failure: tuple[Stage, BaseException] | None = None
    result: CompactionResult | None = None
    try:
        view = yield from _observe()
        priced = price_surface(view.surface.nodes, view.events)
        shadowed_tokens = derive_shadowed_token_count(priced, region)
        output = yield from _summarize(region, shadowed_tokens)
        message_id = cast(str, (yield MintId("checkpoint", compaction_id)))
        checkpoint = derive_checkpoint_message(message_id, output.summary, compaction_id, source_command_id)
        validate_summary_smaller(checkpoint, shadowed_tokens)
        if manual:
            yield from _raise_if_cancelled()
        view = yield from _observe()
        validate_surface_stable(
            priced, price_surface(view.surface.nodes, view.events), region, not manual, view.events
        )
        stage = "commit"
        plan = plan_summary_replacement(
            region, start_seq, len(view.events), lifecycle, output, shadowed_tokens, message_id
        )
        summary_event = yield from _append(
            Append(COMPACTION_SUMMARY, plan.summary_data, writer=COMPACTION_ENGINE)
        )
        yield from _append(
            Append(USER_MESSAGE, plan.checkpoint_data, plan.surface_op, plan.source_event_seqs)
        )
        closing = True
        end_event = yield from _append(
            Append(COMPACTION_END, derive_compaction_end(lifecycle), writer=COMPACTION_ENGINE)
        )
        closed = True
        result = CompactionResult(
            compaction_id=compaction_id,
            source_command_id=source_command_id,
            start_seq=start_seq,
            summary_seq=_seq_of(summary_event),
            end_seq=_seq_of(end_event),
            summary=output.summary,
            shadowed_range=(region.start, region.end),
            shadowed_seqs=region.shadowed,
            shadowed_token_count=shadowed_tokens,
        )
    except GeneratorExit:
        raise
    except BaseException as error:
        failure = ("commit" if closing else stage, error)
        if not closing:
            closing = True
            closer = derive_compaction_end(lifecycle, derive_error_chain(error))
            try:
                yield from _append(Append(COMPACTION_END, closer, writer=COMPACTION_ENGINE))
                closed = True
            except Exception as close_error:
                # The start stays unmatched on purpose: it is the durable busy marker.
                failure = ("commit", close_error)
        if not isinstance(error, Exception):
            raise error  # an interrupt or a crash: the close was attempted, now let it through
    flush_failure: Exception | None = None
    if should_flush_after_close(manual, closed):
        try:
            yield Flush()
        except Exception as error:
            flush_failure = error
    if not manual:
        if failure is not None:
            raise failure[1]
        assert result is not None
        return result
    reason = yield Cancellation()
    outcome = derive_manual_outcome(reason is not None, failure, flush_failure is not None)
    if outcome is Code.ABORTED and isinstance(reason, BaseException):
        raise reason
    if outcome is not None:
        raise reject(outcome, MANUAL_FAILURE_TEXT[outcome]) from (
            failure[1] if failure is not None else flush_failure
        )
    assert result is not None
    return result


def plan_manual_compaction(source_command_id: str | None = None) -> Plan[CompactionResult | None]:
    """Manual compaction (``/compact``) between turns: everything but the newest indivisible unit
    under a standalone bracket; ``None``, nothing written, when there is nothing to compact. Never
    prunes (notes §9.1)."""
    yield from _raise_if_cancelled()
    span = _select_range((yield from _observe()), FORCED_RETAIN_TOKENS)
    if span is None:
        return None
    return (yield from plan_transaction(span[0], span[1], True, source_command_id))


# --- compactIfNeeded (notes §5.3) ------------------------------------------------------------------


def plan_compact_if_needed(
    trigger: Trigger, policy: CompactionPolicy, prune: PruneConfig | None, context_window: int | None
) -> Plan[CompactionResult | None]:
    """``context-overflow``: prune (unless ``prune`` is ``None``), then force one automatic summary
    keeping only the newest indivisible unit. ``pressure``: the lock checked, the window resolved;
    at or above the threshold prune and measure again, then summarize head-anchored spans keeping
    the retained tail until below it, at most ``compactionRetries + 1`` times, and refuse if still
    above after the last. Both run inside the open turn (notes §5.3)."""
    if trigger == "context-overflow":
        if prune is not None:
            yield from plan_prune_pass(prune)
        span = _select_range((yield from _observe()), FORCED_RETAIN_TOKENS)
        return None if span is None else (yield from plan_transaction(span[0], span[1], False))
    validate_compaction_inactive((yield from _observe()).events, PRESSURE_STAGE)
    spec = resolve_compact_spec(policy, validate_context_capacity(context_window))
    if not is_under_pressure(derive_view_tokens((yield from _observe())), spec.threshold_tokens):
        return None
    if prune is not None:
        yield from plan_prune_pass(prune)
        if not is_under_pressure(derive_view_tokens((yield from _observe())), spec.threshold_tokens):
            return None
    result: CompactionResult | None = None
    attempts = policy.compaction_retries + 1
    for _ in range(attempts):
        span = _select_range((yield from _observe()), spec.retain_tokens)
        if span is None:
            if result is None:
                return None
            break
        result = yield from plan_transaction(span[0], span[1], False)
        if not is_under_pressure(derive_view_tokens((yield from _observe())), spec.threshold_tokens):
            return result
    validate_pressure_relieved(derive_view_tokens((yield from _observe())), spec.threshold_tokens, attempts)
    return result


# --- context-overflow recovery (notes §8.2) --------------------------------------------------------


@dataclass(frozen=True)
class OverflowVerdict:
    """Whether the failed request is retried, and the recovery's own failure if it had one (the
    caller then raises its original request error unless ``retry``)."""

    retry: bool
    failure: Exception | None = None


def plan_overflow_recovery(
    failure_code: object, retries: int, max_retries: int, policy: CompactionPolicy, prune: PruneConfig | None
) -> Plan[OverflowVerdict]:
    """For a request that failed with ``failure_code``, after ``retries`` recoveries since the last
    reset: if recovery may run, note ``replaceGeneration``, compact for context overflow, and earn a
    retry only when the generation grew and the caller did not cancel — a prune that landed before a
    failing summary counts (notes §8.2)."""
    cancelled = (yield Cancellation()) is not None
    if not may_attempt_overflow_recovery(failure_code, cancelled, retries, max_retries):
        return OverflowVerdict(False)
    before = (yield from _observe()).surface.replace_generation
    failure: Exception | None = None
    try:
        yield from plan_compact_if_needed("context-overflow", policy, prune, None)
    except Exception as error:
        failure = error
    after = (yield from _observe()).surface.replace_generation
    cancelled = (yield Cancellation()) is not None
    return OverflowVerdict(is_overflow_retry_earned(before, after, cancelled), failure)
