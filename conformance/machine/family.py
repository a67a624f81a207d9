"""The ``machine`` family: the machine that fits a subject's capabilities, run under a named
profile of Hypothesis settings, reported as one case named with how much ran and how fast."""

from __future__ import annotations

import os
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Final, cast

from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from conformance.machine.machines import (
    CrashMachine,
    MachineRun,
    MachineStats,
    SessionMachine,
    StorageMachine,
)
from conformance.report import CaseResult, Options
from conformance.subject import Subject

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


@dataclass(frozen=True)
class MachineOutcome:
    """One machine run: ``failure`` is the failing program and why it failed, ``None`` when every
    step agreed; ``storage`` is what the machine reset the subject to."""

    stats: MachineStats
    failure: str | None
    storage: str


def profile_name() -> str:
    """The profile to run under: ``HYPOTHESIS_PROFILE`` when it names one, else ``ci``."""
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    return name if name in MACHINE_PROFILES else "ci"


def machine_settings(profile: str) -> settings:
    """The named profile's settings (``ci``'s for a name that is not a profile)."""
    return MACHINE_PROFILES.get(profile, MACHINE_PROFILES["ci"])


def machine_for(capabilities: Collection[str]) -> type[SessionMachine]:
    """A crash-seam subject gets the crash machine (on file storage), a storage subject the
    storage machine (in memory), any other the session machine."""
    if "crash-seam" in capabilities:
        return CrashMachine
    if "storage" in capabilities:
        return StorageMachine
    return SessionMachine


def run_machine(
    subject: Subject, capabilities: Collection[str], profile: str | None = None
) -> MachineOutcome:
    """Run the machine that fits ``capabilities`` against ``subject`` under ``profile``."""
    machine, stats = machine_for(capabilities), MachineStats()
    # Hypothesis makes each example's machine by calling what it is given with no arguments: a
    # class or any function (run_state_machine_as_test's docstring), though it is annotated as a class.
    new_machine = cast(type[SessionMachine], partial(machine, MachineRun(subject, stats)))
    started = time.perf_counter()
    failure: str | None = None
    try:
        run_state_machine_as_test(new_machine, settings=machine_settings(profile or profile_name()))
    except Exception as error:
        failure = describe_failure(error)
    stats.seconds = time.perf_counter() - started
    return MachineOutcome(stats, failure, machine.storage)


def describe_failure(error: BaseException) -> str:
    """Why the run failed, then the failing program Hypothesis printed (in its notes)."""
    notes = "\n".join(getattr(error, "__notes__", ()))
    return f"{type(error).__name__}: {error}\n{notes}".strip()


def check_machine(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: one case, named with how much ran and how fast."""
    outcome = run_machine(subject, options.capabilities, options.profile)
    stats = outcome.stats
    name = (
        f"every generated step agrees with the spec model ({stats.steps} steps in {stats.examples} runs, "
        f"{stats.steps_per_second:.0f} steps/s, storage {outcome.storage})"
    )
    if outcome.failure is None:
        return [CaseResult("machine", name, "passed", seconds=stats.seconds)]
    shrinks = Phase.shrink in machine_settings(options.profile).phases
    hint = (
        ""
        if shrinks
        else f"\n(not shrunk under the {options.profile} profile; --profile thorough shrinks it)"
    )
    return [CaseResult("machine", name, "failed", outcome.failure + hint, seconds=stats.seconds)]
