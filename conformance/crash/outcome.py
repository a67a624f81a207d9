"""What the crash checks found: each failing crash point, the tallies, and the context the checks
of one run share (its target, what each D3 item was checked, the workload's reset and byte cuts)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from conformance.targets import DEFAULT_TARGET, Target


@dataclass(frozen=True)
class CrashCase:
    """One crash point and what was wrong after it (empty: every D3 item held)."""

    name: str
    problems: tuple[str, ...]


class EnoughPoints(Exception):
    """A failure was found and the run asked to stop at the first one."""


@dataclass
class CrashOutcome:
    """Every crash point checked, and the ones that broke D3 (with ``fail_fast``, only the first)."""

    points: int = 0
    boundaries: int = 0
    byte_cuts: int = 0
    faults: int = 0
    damages: int = 0
    kills: int = 0
    failures: list[CrashCase] = field(default_factory=list)
    seconds: float = 0.0
    fail_fast: bool = False
    reached: Counter[str] = field(default_factory=Counter)  # per D3 item, the checks actually made
    not_reached: list[str] = field(default_factory=list)  # what could not be reached, and why


# The run's target and tallies, set by run_crash_checks for the checks it calls (one run at a time);
# and the workload's reset arguments beyond its storage (a batch policy: the compaction workload's).
CRASH_TARGET: ContextVar[Target] = ContextVar("crash_target", default=DEFAULT_TARGET)
CRASH_REACHED: ContextVar[Counter[str]] = ContextVar("crash_reached")
CRASH_RESET: ContextVar[Mapping[str, Any]] = ContextVar("crash_reset", default=MappingProxyType({}))
CRASH_BYTE_CUTS: ContextVar[Callable[[int], Sequence[int]]] = ContextVar(
    "crash_byte_cuts", default=lambda size: range(1, size)
)


def mark_reached(*items: str) -> None:
    """Count one check of each D3 item (so a summary can tell tested from never reached)."""
    reached = CRASH_REACHED.get(None)
    if reached is not None:
        reached.update(items)


def answer_code(answer: Any) -> str | None:
    return None if answer.ok else str(answer.error_code)


def record_outcome(outcome: CrashOutcome, name: str, problems: Sequence[str]) -> None:
    outcome.points += 1
    if problems:
        outcome.failures.append(CrashCase(name, tuple(problems)))
        if outcome.fail_fast:
            raise EnoughPoints()
