"""The families of a run that are not vectors: checks that generate their own workloads.

Each is a function of the subject and the run's options that returns its cases; the runner runs
them after the vectors, in this order. A new family is a new row here.

A long family is also a :class:`Split` (:data:`SPLITS`): parts that run independently, each on a
subject of its own (``--jobs``), and a ``finish`` that makes the family's cases from the parts'
pieces in part order. Its check is its parts run one after another, then ``finish``: one run or
many workers, the same cases.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from conformance.crash import check_crash
from conformance.crash.family import FAIL_FAST, summarise_crash_outcome, with_fixed_replay
from conformance.crash.outcome import CrashOutcome
from conformance.crash.points import run_crash_checks
from conformance.crash_rules import D2_WRITER, D3_ITEMS
from conformance.exhaustive import check_exhaustive, exhaustive_part, exhaustive_parts, finish_exhaustive
from conformance.files.writing import CHECKS, check_files
from conformance.machine import check_machine
from conformance.pure_drt import FIELD_RULES, check_pure_drt
from conformance.report import CaseResult, Options
from conformance.subject import Subject
from conformance.targets import DEFAULT_TARGET
from conformance.trace.family import check_trace
from conformance.trace.summary import ITEM_SENTENCES
from spec.wire import WIRE_FUNCTIONS

CheckFn = Callable[[Subject, Options], list[CaseResult]]

STATEFUL_FAMILIES: Final[Mapping[str, CheckFn]] = {
    "pure-drt": check_pure_drt,  # every pure function against the spec, on generated inputs
    "files": check_files,  # the bytes a storage subject writes, read by the spec's reader
    "machine": check_machine,  # a Hypothesis state machine beside the spec model
    "exhaustive": check_exhaustive,  # every short operation sequence, states deduplicated
    "crash": check_crash,  # power cuts at every point, or SIGKILLs over stdio (SPEC-DECISIONS D3)
    "trace": check_trace,  # every crash state the subject's system calls allow (CRASH-STATES.md)
}
# Families that run only when named in --families, or when their flag is set in Options.extra
# (the trace family needs strace and takes longer than the rest of a run).
OPT_IN: Final[Mapping[str, str]] = {"trace": "trace-crashes"}

# The rules each family judges, for the certificate's fixed denominator: a case without a rule of
# its own belongs to the rule its key names, else to its family's first rule (a machine's or the
# exhaustive checker's disagreement belongs to its agreement rule).
FAMILY_RULES: Final[Mapping[str, tuple[str, ...]]] = {
    "pure-drt": (*WIRE_FUNCTIONS, *FIELD_RULES),
    "files": ("files/replay", *(f"files/{key}" for key in CHECKS)),
    "machine": ("machine/agrees",),
    "exhaustive": ("exhaustive/agrees",),
    "crash": (*D3_ITEMS, "replay", D2_WRITER),
    "trace": tuple(ITEM_SENTENCES),
}


# --- families in parts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """A family in parts: how many (``parts``, from the options), one part's piece (``run``: any
    picklable value) and the family's cases from every piece in part order (``finish``: it may
    use a subject to replay a disagreement). ``weight`` is a part's expected share of a run's time
    (for the order parts are handed to workers: the heaviest first)."""

    parts: Callable[[Options], int]
    run: Callable[[Subject, Options, int], Any]
    finish: Callable[[Subject, Options, Sequence[Any]], list[CaseResult]]
    weight: float


def _concatenated(subject: Subject, options: Options, pieces: Sequence[Any]) -> list[CaseResult]:
    return [result for piece in pieces for result in piece]


def _pure_drt_part(subject: Subject, options: Options, index: int) -> list[CaseResult]:
    """Part ``index`` of pure-drt: one function of the call table, the last part the typed fields."""
    functions = list(WIRE_FUNCTIONS)
    if index < len(functions):
        return check_pure_drt(subject, options, functions[index : index + 1], fields=False)
    return check_pure_drt(subject, options, (), fields=True)


COMPRESSIONS: Final = (True, False)  # the crash family's parts over the crash seam: zstd, then plain
CRASH_SEAM_HOW: Final = "power cuts through the crash seam"


def _crash_parts(options: Options) -> int:
    """Power cuts through the seam split by log format (each format's points and damage check are
    its own); fail-fast (one first failure) and the SIGKILL check stay whole."""
    whole = "crash-seam" not in options.capabilities or options.extra.get(FAIL_FAST) == "1"
    return 1 if whole else len(COMPRESSIONS)


def _crash_part(subject: Subject, options: Options, index: int) -> Any:
    if _crash_parts(options) == 1:
        return check_crash(subject, options)
    target = options.target or DEFAULT_TARGET
    compressions = (COMPRESSIONS[index],)
    return run_crash_checks(
        subject, compressions=compressions, target=target, capabilities=options.capabilities
    )


def _crash_finish(subject: Subject, options: Options, pieces: Sequence[Any]) -> list[CaseResult]:
    if _crash_parts(options) == 1:
        return list(pieces[0])
    return with_fixed_replay(summarise_crash_outcome(merge_crash_outcomes(pieces), CRASH_SEAM_HOW), options)


def merge_crash_outcomes(outcomes: Sequence[CrashOutcome]) -> CrashOutcome:
    """One outcome of crash checks run in parts: every count summed, failures and what was not
    reached in part order."""
    merged = CrashOutcome(
        **{
            name: sum(getattr(outcome, name) for outcome in outcomes)
            for name in ("points", "boundaries", "byte_cuts", "faults", "damages", "kills", "seconds")
        }
    )
    for outcome in outcomes:
        merged.failures.extend(outcome.failures)
        merged.reached.update(outcome.reached)
        merged.not_reached.extend(outcome.not_reached)
    return merged


SPLITS: Final[Mapping[str, Split]] = {
    "pure-drt": Split(lambda options: len(WIRE_FUNCTIONS) + 1, _pure_drt_part, _concatenated, 3.0),
    "exhaustive": Split(exhaustive_parts, exhaustive_part, finish_exhaustive, 30.0),
    "crash": Split(_crash_parts, _crash_part, _crash_finish, 45.0),
}
WHOLE_WEIGHTS: Final[Mapping[str, float]] = {"machine": 25.0, "files": 1.0, "trace": 60.0}
"""The expected seconds of a family that runs whole (a vector family's: about none)."""
