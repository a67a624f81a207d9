"""Broken compaction engines: each a :class:`~reference.server.ReferenceSubject` whose engine breaks
one rule of docs/compaction.md, through the override points the server keeps for it
(``engine_class``, ``recovery_class``, ``projections_class``, ``cache_class``,
``spill_store_class``, ``checkpoints_class``, or one ``op_<name>``). Each class's docstring says
which rule it breaks; ``rule`` names it and ``caught_by`` the family expected to catch it
(tests/test_broken_engines.py proves that it does).

A break that the reference's session would refuse on its own (a replace that changes ``isError``,
a span that splits a pair) is made with the session's guard off for the length of the op, as an
implementation whose engine and session are one would have it: the suite must catch what lands
in the log, not what the reference happens to refuse.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from broken_subjects import swapped

import spec.log.surface as surface_module
import spec.shrink.engine as engine_module
from reference.projections.checkpoints import DurabilityCheckpoints
from reference.projections.registry import Projections
from reference.server import Args, ReferenceSubject
from reference.session import Session
from reference.shrink.compaction import AbortSignal, CompactionEngine, OverflowRecovery
from reference.shrink.spill import MemorySpillStore
from spec.codes import SpecError
from spec.log.events import COMPACTION_END, Event
from spec.log.json import JsonValue, thaw_json
from spec.log.writers import CALLER, COMPACTION_ENGINE, Writer
from spec.projections.durability import Moment
from spec.projections.units import ProjectionCell, ProjectionUnit
from spec.shrink.compaction import CompactionRegion, plan_compaction_region
from spec.shrink.prune import PrunePlan


class _SessionView:
    """A live session as the broken engine sees it: every attribute the session's, except that
    each engine append goes through ``engine_append(session, type, data)``."""

    def __init__(self, session: Session, engine_append: Callable[[Session, object, Any], Event]) -> None:
        self._session = session
        self._engine_append = engine_append

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def append(self, event_type: object, data: Any, *ops: object, writer: Writer = CALLER) -> Event:
        if writer != COMPACTION_ENGINE:
            return self._session.append(event_type, data, *ops, writer=writer)
        return self._engine_append(self._session, event_type, data)


class _ViewEngine(CompactionEngine):
    """An engine whose transactions see the session through :class:`_SessionView`."""

    def engine_append(self, session: Session, event_type: object, data: Any) -> Event:
        return session.append(event_type, data, writer=COMPACTION_ENGINE)

    def run(self, session: Session, plan: Any, signal: AbortSignal | None = None) -> Any:
        view: Any = _SessionView(session, self.engine_append)
        return super().run(view, plan, signal)


class BrokenEngine(ReferenceSubject):
    """The base of every broken engine: the rule it breaks, and the family and case that catch it."""

    rule: ClassVar[str] = ""
    caught_by: ClassVar[str] = ""  # the family
    case: ClassVar[str] = ""  # a case of that family that fails on it (its key)


# --- the bracket ----------------------------------------------------------------------------------


class _OpenOnTimeoutEngine(_ViewEngine):
    def engine_append(self, session: Session, event_type: object, data: Any) -> Event:
        if event_type == COMPACTION_END and "timed out" in str(data.get("error", "")):
            return session.events[-1]  # the failed attempt's close is never written
        return session.append(event_type, data, writer=COMPACTION_ENGINE)


class LeavesBracketOpenOnTimeout(BrokenEngine):
    """A summariser timeout skips the closing ``compaction/end``: the lock stays held forever.
    Breaks "every compaction/start is closed by exactly one compaction/end, on every failure
    path" (notes §4.5 step 7; docs/compaction.md, the bracket)."""

    rule = "bracket always paired"
    caught_by = "compaction"
    case = "compaction/when-the-summarizer-times-out-manual-compaction-closes-its-bracket-with-the-error-and"
    engine_class = _OpenOnTimeoutEngine


class _SecondEndEngine(_ViewEngine):
    def engine_append(self, session: Session, event_type: object, data: Any) -> Event:
        event = session.append(event_type, data, writer=COMPACTION_ENGINE)
        if event_type == COMPACTION_END and "error" not in data:
            session.append(event_type, data, writer=COMPACTION_ENGINE)
        return event


class WritesSecondCompactionEnd(BrokenEngine):
    """A committed compaction writes its ``compaction/end`` twice. Breaks "one compaction/end per
    start" (notes §4.2; docs/compaction.md, the bracket)."""

    rule = "one compaction/end per start"
    caught_by = "compaction"
    case = "compaction/manual-compaction-summarizes-all-but-the-newest-unit-under-a-standalone-bracket"
    engine_class = _SecondEndEngine


# --- the prune pass -------------------------------------------------------------------------------


def _flip_is_error(plan: PrunePlan) -> PrunePlan:
    data: Any = thaw_json(plan.replacement_data)
    block = data["message"]["content"][0]
    block["isError"] = not block.get("isError", False)
    return dataclasses.replace(plan, replacement_data=data)


class PruneChangesIsError(BrokenEngine):
    """The prune pass's replacement flips the result's ``isError`` (and the session's rewrite
    guard is off, as in an implementation that trusts its own pruner). Breaks the tool-rewrite
    rule: a prune changes only a tool result's inner content (notes §6.3; spec.log.tool_rewrite)."""

    rule = "prune changes only the inner content"
    caught_by = "prune-pass"
    case = "prune-pass/a-pruned-result-keeps-its-call-its-ids-and-its-error-flag"

    def op_prune(self, args: Args) -> JsonValue:
        plan = engine_module.plan_prune_events

        def flipped(*given: Any, **options: Any) -> tuple[PrunePlan, ...]:
            return tuple(_flip_is_error(one) for one in plan(*given, **options))

        with (
            swapped(engine_module, "plan_prune_events", flipped),
            swapped(surface_module, "validate_tool_result_rewrite", lambda *given: None),
        ):
            return super().op_prune(args)


# --- the summary span -----------------------------------------------------------------------------


def _unbalanced_region(nodes: Sequence[int], events: Sequence[Event], start: int, end: int) -> Any:
    """``plan_compaction_region`` without its two balance checks: any span of current nodes."""
    try:
        return plan_compaction_region(nodes, events, start, end)
    except SpecError as error:
        if "balanced boundary" not in str(error):
            raise
    first, last = list(nodes).index(start), list(nodes).index(end)
    return CompactionRegion(
        start=start, end=end, first=first, last=last, shadowed=tuple(nodes[first : last + 1])
    )


class _SpanCuttingEngine(CompactionEngine):
    def run(self, session: Session, plan: Any, signal: AbortSignal | None = None) -> Any:
        with swapped(engine_module, "plan_compaction_region", _unbalanced_region):
            return super().run(session, plan, signal)


class SummarySpanCutsCallFromResult(BrokenEngine):
    """The summary span is any run of surface nodes: a span may end between a tool call and its
    result. Breaks "the span never cuts a tool call from its result" (notes §4.5 step 2;
    spec.shrink.compaction.plan_compaction_region)."""

    rule = "the span keeps each call with its result"
    caught_by = "compaction"
    case = (
        "compaction/a-region-whose-end-falls-between-a-tool-call-and-its-result-is-refused-before-anything-is"
    )
    engine_class = _SpanCuttingEngine


# --- overflow recovery ----------------------------------------------------------------------------


class _RetryAlwaysRecovery(OverflowRecovery):
    def on_request_error(
        self, session: Session, error: BaseException, signal: AbortSignal | None = None
    ) -> bool:
        with swapped(engine_module, "is_overflow_retry_earned", lambda before, after, aborted: not aborted):
            return super().on_request_error(session, error, signal)


class RetriesWithoutGrowth(BrokenEngine):
    """The overflow recovery retries after any compaction that did not raise, whether or not
    ``replaceGeneration`` grew. Breaks "retry only when replaceGeneration grew" (notes §8.2
    steps 6-7; invariant I10)."""

    rule = "retry only when replaceGeneration grew"
    caught_by = "overflow"
    case = "overflow/a-summary-that-fails-with-nothing-pruned-earns-no-retry"
    recovery_class = _RetryAlwaysRecovery


# --- projections ----------------------------------------------------------------------------------


class _StaleRowProjections(Projections):
    """A cell read from a cache row behind the log is taken as folded up to the log's end."""

    def _first_cell(
        self, unit: ProjectionUnit, header: Mapping[str, JsonValue], last_seq: int
    ) -> ProjectionCell:
        cell = super()._first_cell(unit, header, last_seq)
        if 0 <= cell.cursor < last_seq:
            return ProjectionCell(state=cell.state, cursor=last_seq)
        return cell


class CacheAnswersFromStaleRow(BrokenEngine):
    """The projection cache answers from its row without folding the events past the row's
    cursor. Breaks "a cache may be stale but never wrong" (seed 002; notes §11.3): the state
    from a stale cache must equal the full replay's."""

    rule = "a stale cache row is caught up, never served"
    caught_by = "projection"
    case = "projection/after-a-crash-a-state-read-from-a-stale-cache-row-equals-a-full-replay"
    projections_class = _StaleRowProjections


# --- spill ----------------------------------------------------------------------------------------


class _TruncatingSpillStore(MemorySpillStore):
    def read_text(self, locator: str) -> str:
        text = super().read_text(locator)
        return text[: max(0, len(text) - 1)]


class SpillTruncatesReadback(BrokenEngine):
    """Reading a spilled text back loses its last character. Breaks "spill readback is byte for
    byte what was saved" (notes §10.2)."""

    rule = "spill readback byte for byte"
    caught_by = "spill"
    case = "spill/a-spilled-text-reads-back-byte-for-byte-multi-byte-and-astral-characters-included"
    spill_store_class = _TruncatingSpillStore


# --- checkpoints ----------------------------------------------------------------------------------


class _FailOpenCheckpoints(DurabilityCheckpoints):
    def guard(self, moment: Moment, action: Callable[[], Any]) -> Any:
        with contextlib.suppress(SpecError):
            self.checkpoint(moment)
        return action()


class CheckpointFailsOpen(BrokenEngine):
    """A checkpoint whose flush failed still runs the guarded action. Breaks "a checkpoint fails
    closed" (seed 002; notes §11.5 item 2; spec.projections.durability)."""

    rule = "checkpoint fails closed"
    caught_by = "checkpoint"
    case = "checkpoint/a-checkpoint-whose-flush-fails-fails-closed-its-action-never-runs"
    checkpoints_class = _FailOpenCheckpoints


BROKEN_ENGINES: tuple[type[BrokenEngine], ...] = (
    LeavesBracketOpenOnTimeout,
    WritesSecondCompactionEnd,
    PruneChangesIsError,
    SummarySpanCutsCallFromResult,
    RetriesWithoutGrowth,
    CacheAnswersFromStaleRow,
    SpillTruncatesReadback,
    CheckpointFailsOpen,
)
