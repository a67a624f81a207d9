"""The ``crash`` family: the runner's entry point and one case per SPEC-DECISIONS D3 item."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from typing import Final

from conformance.crash.kill import KILL_ROUNDS, KILL_SEED, run_kill_check
from conformance.crash.outcome import CrashOutcome
from conformance.crash.points import run_crash_checks
from conformance.crash.writers import run_writers_check
from conformance.crash_rules import D2_WRITER, D2_WRITER_SENTENCE, D3_ITEMS
from conformance.report import CaseResult, Options
from conformance.subject import StdioSubject, Subject
from conformance.targets import DEFAULT_TARGET
from spec.protocol import STORE_ROOT_ENV

OTHER: Final = "replay"
FAIL_FAST: Final = "fail-fast"
"""``Options.extra[FAIL_FAST] == "1"``: stop at the first failing crash point (for mutation testing)."""
SUBJECT_ARGUMENT: Final = "subject-argument"
"""``Options.extra[SUBJECT_ARGUMENT]``: how the command line named the subject (``--subject X`` or
``--stdio "command"``), for the replay commands a failing stateful case shows."""


def subject_argument(options: Options) -> str:
    return options.extra.get(SUBJECT_ARGUMENT, "--subject MODULE:FACTORY")


def with_fixed_replay(cases: list[CaseResult], options: Options, flags: str = "") -> list[CaseResult]:
    """Each failed case of a family whose workloads are fixed (crash, files, trace: the same
    requests, crash points and seed on every run) with the command that replays it: the family
    again (``flags`` added, like ``--trace-crashes``)."""
    command = f"python -m conformance {subject_argument(options)}"
    return [
        replace(case, detail=f"{case.detail}\nreplay: {command} --families {case.family}{flags}")
        if case.outcome == "failed"
        else case
        for case in cases
    ]


def summarise_crash_outcome(outcome: CrashOutcome, how: str) -> list[CaseResult]:
    """One case per D3 item: failed when a crash point broke it (with the first points that did),
    passed when it was checked and held (with how many times), *not run* when no crash point
    reached it (with why); and one case for disagreements that are not about D3 (a workload
    request answered unexpectedly). The case ids are the items', stable from run to run."""
    counts = f"{outcome.points} crash points"
    if outcome.boundaries or outcome.byte_cuts or outcome.faults or outcome.damages:
        counts += (
            f": {outcome.boundaries} op boundaries, {outcome.byte_cuts} byte cuts, {outcome.faults} injected faults, "
            f"{outcome.damages} damaged logs"
        )
    if outcome.kills:
        counts += f": {outcome.kills} SIGKILLs"
    by_item: dict[str, list[str]] = {item: [] for item in (*D3_ITEMS, OTHER)}
    for case in outcome.failures:
        for problem in case.problems:
            item = next((key for key in D3_ITEMS if key + ":" in problem), OTHER)
            by_item[item].append(f"{case.name}\n    {problem}")
    results: list[CaseResult] = []
    seconds = outcome.seconds / (len(D3_ITEMS) + 1)
    unreached = "\n".join(outcome.not_reached)
    for item, found in by_item.items():
        sentence = D3_ITEMS.get(item, "the workload answers as the spec model says up to each crash point")
        checked = outcome.reached[item] if item != OTHER else outcome.points
        name = f"{item}: {sentence} ({how}, {counts})" if item != OTHER else f"{sentence} ({how}, {counts})"
        case_id = item.lower().replace(".", "-") if item != OTHER else "replay"
        if found:
            shown = "\n".join(found[:8]) + (f"\n... and {len(found) - 8} more" if len(found) > 8 else "")
            results.append(CaseResult("crash", name, "failed", shown, seconds, item, case_id))
        elif checked == 0:
            reasons = [line for line in outcome.not_reached if line.startswith(item + ":")] or [
                unreached or "no crash point reached this check"
            ]
            results.append(CaseResult("crash", name, "not run", "\n".join(reasons), seconds, item, case_id))
        else:
            detail = f"checked {checked} times" + (f"; not reached: {unreached}" if unreached else "")
            results.append(CaseResult("crash", name, "passed", detail, seconds, item, case_id))
    return results


def check_crash(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: power cuts through the crash seam, or SIGKILLs of a stdio subject
    that stores without a seam; skipped for a subject with neither."""
    fail_fast = options.extra.get(FAIL_FAST) == "1"
    target = options.target or DEFAULT_TARGET
    if "crash-seam" in options.capabilities:
        outcome = run_crash_checks(
            subject, fail_fast=fail_fast, target=target, capabilities=options.capabilities
        )
        return with_fixed_replay(
            summarise_crash_outcome(outcome, "power cuts through the crash seam"), options
        )
    if "storage" in options.capabilities and isinstance(subject, StdioSubject):
        rounds = KILL_ROUNDS.get(options.profile, KILL_ROUNDS["ci"])
        with tempfile.TemporaryDirectory(prefix="conformance-kill-") as root:
            outcome = run_kill_check(subject.command, {STORE_ROOT_ENV: root}, rounds, KILL_SEED)
        cases = summarise_crash_outcome(outcome, f"SIGKILL while appending and flushing, seed {KILL_SEED}")
        return with_fixed_replay([*cases, check_writers(subject, options)], options)
    reason = "needs capability crash-seam, or capability storage over stdio"
    return [CaseResult("crash", "crash injection (SPEC-DECISIONS D3)", "unsupported", reason, case_id="all")]


def check_writers(subject: StdioSubject, options: Options) -> CaseResult:
    """D2's one writer across processes (:func:`conformance.crash.writers.run_writers_check`), on
    a store root of its own: one case. A subject over the crash seam stores in its own memory, so
    two of its processes share no store and the rule is *not run* for it."""
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="conformance-writers-") as root:
        problems = run_writers_check(
            subject.command,
            {STORE_ROOT_ENV: root},
            "list" in options.capabilities,
            options.target or DEFAULT_TARGET,
            "commit-fault" in options.capabilities,
        )
    name = f"{D2_WRITER}: {D2_WRITER_SENTENCE} (two processes on one store root)"
    seconds = time.perf_counter() - began
    if problems:
        return CaseResult("crash", name, "failed", "\n".join(problems), seconds, D2_WRITER, "d2-writer")
    return CaseResult("crash", name, "passed", "every answer held", seconds, D2_WRITER, "d2-writer")
