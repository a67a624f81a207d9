"""The ``machine`` family: the machine that fits a subject's capabilities, run under a named
profile of Hypothesis settings, reported as one case named with how much ran and how fast.

The case is earned (:func:`conformance.report.earned`): it passes only when every op kind of the
machine's alphabet (:func:`machine_alphabet`) was driven at least :data:`MINIMUM_COVERAGE` times."""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Final, cast

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from conformance.divergence import Divergences
from conformance.machine.engine import EngineCrashMachine, EngineSessionMachine, EngineStorageMachine
from conformance.machine.machines import (
    CrashMachine,
    MachineRun,
    MachineStats,
    SessionMachine,
    StorageMachine,
)
from conformance.machine.replay import Recording, Step, replay_program, with_replays
from conformance.report import CaseResult, Coverage, Options, check_deadline, earned
from conformance.subject import Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.protocol import ENGINE_CAPABILITIES

EVERY_RUN: Final = settings(
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    report_multiple_bugs=False,
    print_blob=False,
)
GENERATE: Final = (Phase.explicit, Phase.reuse, Phase.generate)

MACHINE_PROFILES: Final[Mapping[str, settings]] = {
    # deterministic and small: the same programs on every run, reported as they were found
    "ci": settings(EVERY_RUN, max_examples=100, stateful_step_count=50, derandomize=True, phases=GENERATE),
    # long and random, and a failing program is shrunk before it is reported
    "thorough": settings(
        EVERY_RUN,
        max_examples=400,
        stateful_step_count=60,
        derandomize=False,
        phases=(*GENERATE, Phase.shrink),
    ),
}


MINIMUM_COVERAGE: Final = 20
"""Every op kind of the machine's alphabet is driven at least this often, or nothing is certified
(the reference drives each far more often under the ci profile: see docs/choices.md)."""
SETUP_OPS: Final = frozenset({"reset", "clock"})  # every example's own start, not a transition


def machine_alphabet(machine: type[SessionMachine], stats: MachineStats) -> list[str]:
    """The op kinds the machine must drive: the ops its class always sends (create, append and
    fork; flush and resume on storage; crash through the seam), then every other op the subject
    refused (an op the machine sends only now and then, like an engine's, is not held to the
    minimum, but refusing it is not a pass)."""
    core = ["create", "append", "fork"]
    if issubclass(machine, StorageMachine):
        core += ["flush", "resume"]
    if issubclass(machine, CrashMachine):
        core.append("crash")
    return list(dict.fromkeys([*core, *sorted(set(stats.refused) - SETUP_OPS)]))


def machine_coverage(stats: MachineStats) -> Coverage:
    """Per op, the steps the subject answered and the ones it refused."""
    coverage = Coverage(refused=dict(stats.refused))
    for outcome, count in stats.outcomes.items():
        op = outcome.split(" ", 1)[0]
        if op not in SETUP_OPS:
            coverage.driven[op] = coverage.driven.get(op, 0) + count
    return coverage


@dataclass(frozen=True)
class MachineOutcome:
    """One machine run: ``failure`` is the failing program and why it failed, ``None`` when every
    step agreed; ``storage`` is what the machine reset the subject to."""

    stats: MachineStats
    failure: str | None
    storage: str
    machine: type[SessionMachine] = SessionMachine
    recorded: Mapping[str, tuple[Step, ...]] = field(default_factory=dict)  # signature -> its steps


def profile_name() -> str:
    """The profile to run under: ``HYPOTHESIS_PROFILE`` when it names one, else ``ci``."""
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    return name if name in MACHINE_PROFILES else "ci"


def machine_settings(profile: str) -> settings:
    """The named profile's settings (``ci``'s for a name that is not a profile)."""
    return MACHINE_PROFILES.get(profile, MACHINE_PROFILES["ci"])


def machine_for(capabilities: Collection[str]) -> type[SessionMachine]:
    """A crash-seam subject gets the crash machine (on file storage), a storage subject the
    storage machine (in memory), any other the session machine; a subject that declares an
    engine capability gets that machine with the engine's rules
    (:mod:`conformance.machine.engine`)."""
    engine = any(capability in capabilities for capability in ENGINE_CAPABILITIES)
    if "crash-seam" in capabilities:
        return EngineCrashMachine if engine else CrashMachine
    if "storage" in capabilities:
        return EngineStorageMachine if engine else StorageMachine
    return EngineSessionMachine if engine else SessionMachine


@contextmanager
def no_local_constants() -> Iterator[None]:
    """While it lasts, Hypothesis draws no literal from the project's own source. Hypothesis
    (6.1xx) draws, one time in twenty, a literal taken from the source of every project module
    loaded in the process so far (``hypothesis.internal.conjecture.providers``, "local
    constants"), a pool that grows as modules are imported, during the run too. So a derandomized
    machine would run other programs in a process that had imported more of the project (a whole
    test run, a worker of ``--jobs``), or after any literal of any loaded module changed: a
    subject's certificate and expectation file (its ``diverges-`` cases) would move with unrelated
    edits. Here the pool is empty, so the programs depend on the seed and the subject's answers
    only. A Hypothesis without that internal raises RuntimeError rather than run unpinned
    (docs/choices.md)."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
    except ImportError as error:
        raise RuntimeError(f"the machine cannot pin Hypothesis's local constants: {error}") from error
    pool = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if pool is None or cache is None:
        raise RuntimeError(
            "the machine cannot pin Hypothesis's local constants: "
            "hypothesis.internal.conjecture.providers has no _get_local_constants or CONSTANTS_CACHE"
        )
    cache.cache.clear()  # it holds the pool's values per kind of draw
    providers._get_local_constants = Constants
    try:
        yield
    finally:
        providers._get_local_constants = pool
        cache.cache.clear()


def run_machine(
    subject: Subject,
    capabilities: Collection[str],
    profile: str | None = None,
    target: Target = DEFAULT_TARGET,
    divergences: Divergences | None = None,
) -> MachineOutcome:
    """Run the machine that fits ``capabilities`` against ``subject`` under ``profile``. With
    ``divergences``, each example stops at its first disagreement, recorded there, and the run
    goes on; without, the first disagreement ends the run as its failure."""
    machine, stats = machine_for(capabilities), MachineStats()
    # Hypothesis makes each example's machine by calling what it is given with no arguments: a
    # class or any function (run_state_machine_as_test's docstring), though it is annotated as a class.
    run = MachineRun(subject, stats, target, divergences, frozenset(capabilities))
    new_machine = cast(type[SessionMachine], partial(machine, run))
    started = time.perf_counter()
    failure: str | None = None
    with no_local_constants():
        try:
            run_state_machine_as_test(new_machine, settings=machine_settings(profile or profile_name()))
        except Exception as error:
            check_deadline()  # a cut example can leave Hypothesis complaining (flaky data): not a failure
            failure = describe_failure(error)
    stats.seconds = time.perf_counter() - started
    return MachineOutcome(stats, failure, machine.storage, machine, run.recorded)


def describe_failure(error: BaseException) -> str:
    """Why the run failed, then the failing program Hypothesis printed (in its notes)."""
    notes = "\n".join(getattr(error, "__notes__", ()))
    return f"{type(error).__name__}: {error}\n{notes}".strip()


def check_machine(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point. Every example runs to its end or to its first disagreement with
    the spec model, which is recorded; the run goes on. One case says whether every step agreed
    (named with how much ran and how fast), and each distinct disagreement is a case of its own,
    shown with the first program that met it. Under a profile that shrinks, the first disagreement
    is also run again as a failure so that Hypothesis shrinks its program."""
    target = options.target or DEFAULT_TARGET
    divergences = Divergences()
    outcome = run_machine(subject, options.capabilities, options.profile, target, divergences)
    stats = outcome.stats
    alphabet, coverage = machine_alphabet(outcome.machine, stats), machine_coverage(stats)

    def earn(result: CaseResult) -> CaseResult:
        return earned(result, coverage, alphabet, MINIMUM_COVERAGE)

    name = (
        f"every generated step agrees with the spec model ({stats.steps} steps in {stats.examples} runs, "
        f"{stats.steps_per_second:.0f} steps/s, storage {outcome.storage})"
    )
    if stats.unsupported:
        name += f"; answered UNSUPPORTED_OP: {', '.join(sorted(stats.unsupported))}"
    if outcome.failure is not None:
        return [earn(CaseResult("machine", name, "failed", outcome.failure, stats.seconds, case_id="agrees"))]
    if not divergences:
        return [earn(CaseResult("machine", name, "passed", seconds=stats.seconds, case_id="agrees"))]
    detail = (
        f"{len(divergences.found)} distinct disagreements; {divergences.stops} of {stats.examples} runs "
        "stopped at one (a disagreement on a read-only op is recorded and the run goes on)"
    )
    if Phase.shrink in machine_settings(options.profile).phases:
        shrunk = run_machine(subject, options.capabilities, options.profile, target)
        detail += f"\nthe first, shrunk:\n{shrunk.failure}" if shrunk.failure else ""
    else:
        detail += (
            f"\n(not shrunk by Hypothesis under the {options.profile} profile; --profile thorough shrinks "
            "the first; each disagreement below shows its steps shrunk by dropping steps, and a replay command)"
        )
    main = earn(CaseResult("machine", name, "failed", detail, stats.seconds, case_id="agrees"))
    recordings = {
        signature: Recording("machine", outcome.storage, steps)
        for signature, steps in outcome.recorded.items()
    }
    cases = divergences.cases("machine", f"{stats.examples} runs")
    return [main, *with_replays(cases, recordings, subject, replay_program, options)]
