"""What the ``trace`` family found, and the cases it reports (conformance/CRASH-STATES.md, "Results").

:class:`TraceOutcome` collects, per persistence model, the states built and judged and the
failures found, with the reasons a workload could not be judged; :func:`summarise_trace_outcome`
turns it into one case per model and D3 item. A case passes only when every workload was judged:
anything the run could not reach is reported as not run, never as passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from conformance.crash_rules import D3_ITEMS
from conformance.report import CaseResult
from conformance.trace.judge import READER, REPLAY
from conformance.trace.states import MODELS
from conformance.trace.workloads import WITHOUT_ENGINE_APPEND

FAMILY: Final = "trace"
NOT_RUN: Final = "not run"  # the outcome of a case the suite could not reach (with its reason)
ITEM_SENTENCES: Final = {
    **D3_ITEMS,
    REPLAY: "the traced workload answers as the spec model says",
    READER: "the subject reads every crash state as the spec's own reader does",
}
SHOWN_FAILURES: Final = 6


@dataclass
class ModelTally:
    """What one model built and found across the workloads."""

    states: int = 0
    distinct: set[str] = field(default_factory=set)
    judged: int = 0
    failures: dict[str, list[str]] = field(default_factory=dict)  # item -> failure texts


@dataclass
class TraceOutcome:
    """Everything the family found; ``not_run`` holds the reasons a workload could not be judged."""

    tallies: dict[str, ModelTally] = field(default_factory=lambda: {model: ModelTally() for model in MODELS})
    calls: int = 0
    workloads: list[str] = field(default_factory=list)
    replay: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)
    reader_checked: bool = False
    seconds: float = 0.0


def summarise_trace_outcome(outcome: TraceOutcome) -> list[CaseResult]:
    """One case per model and D3 item (and for the replay and the spec-reader comparison): failed
    with the first failing states, passed only when every workload was judged, else not run."""
    results: list[CaseResult] = []
    seconds = outcome.seconds / (len(MODELS) * len(ITEM_SENTENCES))
    incomplete = "; ".join(outcome.not_run)
    for model in MODELS:
        tally = outcome.tallies[model]
        counts = (
            f"{model} model: {tally.states} crash states, {len(tally.distinct)} distinct, {tally.judged} judged, "
            f"from {outcome.calls} traced calls in {len(outcome.workloads)} workloads"
        )
        for item, sentence in ITEM_SENTENCES.items():
            name = f"{item}: {sentence} ({counts})" if item.startswith("D3") else f"{sentence} ({counts})"
            found = list(tally.failures.get(item, []))
            if item == REPLAY:
                found = outcome.replay + found
            if found:
                shown = "\n".join(found[:SHOWN_FAILURES]) + (
                    f"\n... and {len(found) - SHOWN_FAILURES} more" if len(found) > SHOWN_FAILURES else ""
                )
                results.append(CaseResult(FAMILY, name, "failed", shown, seconds, rule=item))
            elif incomplete:
                results.append(
                    CaseResult(FAMILY, name, NOT_RUN, f"not run: {incomplete}", seconds, rule=item)
                )
            elif item == READER and not outcome.reader_checked:
                why = "not run: the subject's files are not where SPEC-DECISIONS D1 puts them, so the spec's reader has nothing to compare"
                results.append(CaseResult(FAMILY, name, NOT_RUN, why, seconds, rule=item))
            elif tally.judged == 0:
                results.append(
                    CaseResult(
                        FAMILY, name, NOT_RUN, "not run: no crash state was judged", seconds, rule=item
                    )
                )
            else:
                reduced = [w for w in outcome.workloads if WITHOUT_ENGINE_APPEND in w]
                note = f"judged on: {', '.join(reduced)}: no compaction was left open" if reduced else ""
                results.append(CaseResult(FAMILY, name, "passed", note, seconds, rule=item))
    return results


def not_run(reason: str) -> list[CaseResult]:
    return [
        CaseResult(
            FAMILY, "crash states from the subject's system calls (SPEC-DECISIONS D3)", NOT_RUN, reason
        )
    ]


__all__ = [
    "FAMILY",
    "ITEM_SENTENCES",
    "NOT_RUN",
    "ModelTally",
    "TraceOutcome",
    "not_run",
    "summarise_trace_outcome",
]
