"""The ``trace`` family: crash-test a stdio subject from its system calls (conformance/CRASH-STATES.md).

For each workload — a session written and flushed (the crash family's standard workload), then a
torn log resumed, repaired and written on — in each log format:

1. the subject runs the workload beneath strace, on a fresh ``CONFORMANCE_STORE_ROOT``;
2. its calls under the root, and the moments it answered, are read from the trace;
3. each persistence model (strict, weak) builds every crash state its rule allows;
4. each distinct state is written to a fresh root, where a fresh subject (same command, no strace)
   reads, resumes and reads again every session; the spec's own reader reads the same files;
5. every state is judged, item by item of SPEC-DECISIONS D3 (:mod:`conformance.d3`), against
   what the subject had acknowledged before the crash point.

Entry point: :func:`check_trace` (the runner's family interface, ``(subject, options)`` to a list
of :class:`~conformance.report.CaseResult`). Nothing is passed that did not run: without strace,
without ptrace, for a subject that is not a stdio process or lacks ``storage``, or for a trace
holding calls no model covers, the cases say why they did not run.

The workloads are :mod:`conformance.trace.workloads`, the crash states each model builds
:mod:`conformance.trace.states`, and the cases reported from what was found
:mod:`conformance.trace.summary`; this module runs the workloads and judges every state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from conformance.crash import FAIL_FAST, with_fixed_replay
from conformance.crash_rules import D3_ITEMS
from conformance.model import DurableLog, ModelStore
from conformance.report import RUN_DEADLINE, CaseResult, Options, check_deadline
from conformance.subject import Subject, SubjectError
from conformance.targets import DEFAULT_TARGET, Target
from conformance.trace.calls import TraceLog
from conformance.trace.judge import (
    READER,
    REPLAY,
    Expectation,
    durable_log_of,
    expectation_at,
    header_of,
    judge_state,
    replay_models,
    session_ids,
)
from conformance.trace.persistence import Disk, Tree
from conformance.trace.run import CheckAnswers, materialize, run_check, run_traced
from conformance.trace.specread import read_with_spec
from conformance.trace.states import (
    MODELS,
    NOTHING_UNSYNCED,
    RANDOM_CUTS,
    CrashState,
    Model,
    enumerate_states,
    seeded_sampler,
)
from conformance.trace.strace import StraceProbe, TraceUnreadable, probe_strace
from conformance.trace.summary import ModelTally, TraceOutcome, not_run, summarise_trace_outcome
from conformance.trace.workloads import Workload, resuming_workload, torn_last_write, writing_workload
from spec.protocol import UNSUPPORTED_OP

SEED: Final = 0
LOG_FORMATS: Final = {"ci": (True, False), "thorough": (True, False)}


# --- running it all ------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceSettings:
    """How a run goes: the subject's command and response timeout, the profile (it sets the log
    formats and how many seeded byte cuts a write gets), how many subjects check states at once,
    and, for quick tests, which workloads are judged and whether to stop at the first failure."""

    command: str
    timeout: float = 30.0
    profile: str = "ci"
    workers: int = 2
    seed: int = SEED
    formats: tuple[bool, ...] | None = None  # compressed or not; None: the profile's
    judged: tuple[str, ...] = ("writing", "resuming")
    fail_fast: bool = False
    models: tuple[Model, ...] = MODELS
    target: Target = DEFAULT_TARGET  # what the subject declared it writes (hello)
    engine_append: bool = True  # whether the subject answers engine_append (check_trace asks)


class _Enough(Exception):
    """A failure was found and the run was asked to stop at the first one."""


def run_trace_checks(probe: StraceProbe, settings: TraceSettings) -> TraceOutcome:
    """Both workloads in each log format, every state of both models, judged."""
    outcome = TraceOutcome()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="conformance-trace-") as scratch:
        checker = _StateChecker(settings, scratch)
        try:
            for compressed in settings.formats or LOG_FORMATS.get(settings.profile, LOG_FORMATS["ci"]):
                _run_both(probe, settings, compressed, scratch, outcome, checker)
        except _Enough:
            outcome.not_run.append(
                "the run stopped at its first failure (fail-fast), so the other cases were not judged"
            )
    outcome.seconds = time.perf_counter() - started
    return outcome


def _run_both(
    probe: StraceProbe,
    settings: TraceSettings,
    compressed: bool,
    scratch: str,
    outcome: TraceOutcome,
    checker: _StateChecker,
) -> None:
    """The writing workload, then the resuming one over a state of the first."""
    writing = writing_workload(compressed, settings.engine_append)
    traced = _run_workload(probe, settings, writing, scratch, outcome, checker, "writing" in settings.judged)
    if traced is None:
        return
    log, models = traced
    torn = torn_last_write(writing.initial, log.calls)
    if torn is None:
        outcome.not_run.append(f"{writing.name}: the trace shows no write to resume from")
        return
    tree, how = torn
    answers = checker.answers(tree, session_ids(models), writing.now)
    # The subject's events, under the header the spec model gave the session: a subject's header
    # is written as its target says (v0 for DSH), which the spec model would refuse to resume.
    stored = {
        session_id: DurableLog(header_of(models[-1], session_id) or durable.header, durable.events)
        for session_id, answer in answers.reads.items()
        if (durable := durable_log_of(answer)) is not None
    }
    target = "w" if "w" in stored else next(iter(sorted(stored)), None)
    if target is None:
        outcome.not_run.append(f"{writing.name}: no session survives {how}, so there is nothing to resume")
        return
    if "resuming" in settings.judged:
        _run_workload(
            probe,
            settings,
            resuming_workload(compressed, tree, stored, target),
            scratch,
            outcome,
            checker,
            True,
        )


def _run_workload(
    probe: StraceProbe,
    settings: TraceSettings,
    workload: Workload,
    scratch: str,
    outcome: TraceOutcome,
    checker: _StateChecker,
    judge: bool,
) -> tuple[TraceLog, list[ModelStore]] | None:
    """Trace ``workload`` and replay its answers on the spec model; when ``judge`` is set, judge
    every crash state its trace allows. The trace and the models after each request, or ``None``
    when the workload could not be traced (``outcome`` says why)."""
    check_deadline()
    traced = _trace_workload(probe, settings, workload, scratch, outcome)
    if traced is None or not judge:
        return traced
    log, models = traced
    outcome.calls += len(log.calls)
    layout_known = _layout_known(workload, log, models)
    outcome.reader_checked |= layout_known
    judging = _Judging(settings, workload, log, models, session_ids(models), layout_known, checker)
    states = _crash_states(settings, workload, log)
    if not settings.fail_fast:
        checker.check_all(
            {state.tree.key(): state.tree for found in states.values() for state in found},
            judging.ids,
            workload.now,
        )
    for model, model_states in states.items():
        _judge_states(judging, model_states, outcome.tallies[model])
    return traced


def _trace_workload(
    probe: StraceProbe, settings: TraceSettings, workload: Workload, scratch: str, outcome: TraceOutcome
) -> tuple[TraceLog, list[ModelStore]] | None:
    """Run ``workload`` beneath strace on a fresh root, and check its answers against the spec
    model and its trace against what the persistence models cover."""
    root = tempfile.mkdtemp(prefix="traced-", dir=scratch)
    try:
        materialize(workload.initial, root)
        traced = run_traced(
            probe, settings.command, root, workload.initial, workload.requests, settings.timeout
        )
    except TraceUnreadable as error:
        outcome.not_run.append(f"{workload.name}: strace's output did not parse ({error})")
        return None
    finally:
        shutil.rmtree(root, ignore_errors=True)
    outcome.workloads.append(workload.name)
    if traced.problem is not None:
        outcome.replay.append(f"{workload.name}: the traced subject broke the protocol: {traced.problem}")
        return None
    models, mismatch = replay_models(workload.model, workload.requests, traced.answers, settings.target)
    if mismatch is not None:
        outcome.replay.append(f"{workload.name}: {mismatch}")
        return None
    log = traced.log
    if log.unmodelled:
        outcome.not_run.append(
            f"{workload.name}: the trace holds calls no persistence model covers:\n    "
            + "\n    ".join(log.unmodelled[:5])
        )
        return None
    if len(log.acks) < len(traced.answers):
        outcome.not_run.append(
            f"{workload.name}: the trace shows {len(log.acks)} of the {len(traced.answers)} answers on the subject's stdout pipe"
        )
        return None
    return log, models


def _crash_states(
    settings: TraceSettings, workload: Workload, log: TraceLog
) -> dict[Model, list[CrashState]]:
    """Every state each model builds from the trace, in the order they are judged."""
    sampler = seeded_sampler(settings.seed, RANDOM_CUTS.get(settings.profile, RANDOM_CUTS["ci"]))
    states: dict[Model, list[CrashState]] = {
        model: list(enumerate_states(model, workload.initial, log.calls, sampler))
        for model in settings.models
    }
    if settings.fail_fast:
        # Quickest to a failure: the weak model first, and its "nothing unsynced kept" states first.
        states = {
            model: sorted(states[model], key=lambda state: state.survived != NOTHING_UNSYNCED)
            for model in reversed(settings.models)
        }
    return states


@dataclass(frozen=True)
class _Judging:
    """One traced workload under judgement: what each of its crash states is judged with."""

    settings: TraceSettings
    workload: Workload
    log: TraceLog
    models: list[ModelStore]  # the spec model after each request (models[i]: after the first i)
    ids: list[str]  # every session the workload knew
    layout_known: bool  # whether the spec's reader finds the logs where D1 puts them
    checker: _StateChecker


def _judge_states(judging: _Judging, states: Sequence[CrashState], tally: ModelTally) -> None:
    """Judge each (state, acknowledgements) pair once, and tally what was built and found."""
    tally.states += len(states)
    seen: set[tuple[str, int]] = set()
    for state in states:
        key = state.tree.key()
        tally.distinct.add(f"{judging.workload.name}:{key}")
        expectation = expectation_at(judging.models, judging.log.acks, state.point)
        if (key, expectation.acked) in seen:
            continue
        seen.add((key, expectation.acked))
        tally.judged += 1
        for problem in _problems(judging, state, expectation):
            described = _describe_state(state, judging.log, judging.workload, expectation)
            text = f"{judging.workload.name}: {described}\n    {problem}"
            tally.failures.setdefault(_item_of(problem), []).append(text)
            if judging.settings.fail_fast:
                raise _Enough()


def _problems(judging: _Judging, state: CrashState, expectation: Expectation) -> tuple[str, ...]:
    """What a fresh subject, and the spec's reader, make of one state, judged against what was
    acknowledged before its crash point."""
    answers = judging.checker.answers(state.tree, judging.ids, judging.workload.now)
    views = {
        session_id: read_with_spec(state.tree, header)
        for session_id in judging.ids
        if (header := header_of(expectation.in_flight, session_id)) is not None
    }
    return judge_state(
        answers, views, expectation, judging.workload.now, judging.layout_known, judging.settings.target
    )


def _item_of(problem: str) -> str:
    """The D3 item (or the spec-reader comparison) a problem names; else the replay."""
    return next(
        (name for name in (*D3_ITEMS, READER) if problem.split(": ", 1)[-1].startswith(name + ":")),
        REPLAY,
    )


def _layout_known(workload: Workload, log: TraceLog, models: Sequence[ModelStore]) -> bool:
    """Whether the spec's reader finds, where D1 puts them, the logs of the sessions the workload
    flushed (in the state after the whole trace); if not, its verdicts are left out."""
    disk = Disk(workload.initial)
    for call in log.calls:
        disk.apply(call.op)
    final = disk.current()
    stored = models[-1].stored
    return bool(stored) and all(read_with_spec(final, log_.header).found for log_ in stored.values())


def _describe_state(state: CrashState, log: TraceLog, workload: Workload, expectation: Expectation) -> str:
    """Where the crash struck and what it kept, with the calls just before it and the last
    acknowledged request: the trace excerpt that shows why."""
    calls = log.calls
    point = state.point
    recent = [f"#{index + 1} {calls[index].text}" for index in range(max(0, point - 3), point)]
    flushes = [
        index + 1
        for index, (op, _) in enumerate(workload.requests[: expectation.acked])
        if op in ("flush", "close", "resume")
    ]
    acked = {0: "no request answered", 1: "request 1 answered"}.get(
        expectation.acked, f"requests 1-{expectation.acked} answered"
    )
    if flushes:
        acked += f" (the last flush, close or resume: request {flushes[-1]}, {workload.requests[flushes[-1] - 1][0]})"
    where = f"{state.model} model, crash after call {point} of {len(calls)}"
    return f"{where}, keeping {state.survived}; {acked}\n    trace before it: " + (
        "; ".join(recent) if recent else "(the start)"
    )


class _StateChecker:
    """Runs a fresh subject on each distinct tree once (in parallel), and remembers its answers."""

    def __init__(self, settings: TraceSettings, scratch: str) -> None:
        self.settings = settings
        self.scratch = scratch
        self._answers: dict[str, CheckAnswers] = {}

    def answers(self, tree: Tree, ids: Sequence[str], now: int) -> CheckAnswers:
        key = f"{tree.key()}:{','.join(ids)}:{now}"
        if key not in self._answers:
            self._answers[key] = self._check(tree, ids, now)
        return self._answers[key]

    def check_all(self, trees: Mapping[str, Tree], ids: Sequence[str], now: int) -> None:
        todo = [tree for tree in trees.values() if f"{tree.key()}:{','.join(ids)}:{now}" not in self._answers]
        deadline = RUN_DEADLINE.get()  # the pool's threads do not inherit the context
        with ThreadPoolExecutor(max_workers=max(1, self.settings.workers)) as pool:
            for tree, answers in zip(
                todo, pool.map(lambda tree: self._check(tree, ids, now, deadline), todo)
            ):
                self._answers[f"{tree.key()}:{','.join(ids)}:{now}"] = answers

    def _check(self, tree: Tree, ids: Sequence[str], now: int, deadline: float | None = None) -> CheckAnswers:
        check_deadline(deadline)
        place = tempfile.mkdtemp(prefix="state-", dir=self.scratch)
        root = os.path.join(place, "root")
        os.mkdir(root)
        try:
            materialize(tree, root)
            return run_check(self.settings.command, root, ids, now, self.settings.timeout, place)
        finally:
            shutil.rmtree(place, ignore_errors=True)


# --- the entry point -----------------------------------------------------------------------------


def _answers_engine_append(subject: Subject) -> bool:
    """Whether the subject has ``engine_append``: asked of a session no subject has, so nothing
    changes (SESSION_NOT_FOUND from one that has it, UNSUPPORTED_OP from one that lacks it)."""
    try:
        answer = subject.request(
            "engine_append", id="\x00no-such-session", type="compaction/start", data={"compactionId": "p"}
        )
    except SubjectError:
        return True  # the traced run will say what the subject does
    return answer.ok or answer.error_code != UNSUPPORTED_OP


def check_trace(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: trace a stdio storage subject and judge every crash state."""
    command = getattr(subject, "command", None)
    if not isinstance(command, str):
        return not_run(
            "not run: the trace family runs a stdio subject's command beneath strace (use --stdio)"
        )
    if "storage" not in options.capabilities:
        return not_run("not run: the subject does not offer capability storage")
    probe = probe_strace()
    if probe.problem is not None:
        return not_run(f"not run: {probe.problem}")
    timeout = getattr(subject, "timeout", 30.0)
    settings = TraceSettings(
        command,
        float(timeout) if isinstance(timeout, (int, float)) else 30.0,
        options.profile,
        os.cpu_count() or 1,
        fail_fast=options.extra.get(FAIL_FAST) == "1",
        target=options.target or DEFAULT_TARGET,
        engine_append=_answers_engine_append(subject),
    )
    return with_fixed_replay(
        summarise_trace_outcome(run_trace_checks(probe, settings)), options, " --trace-crashes"
    )


__all__: Sequence[str] = [
    "Expectation",
    "TraceOutcome",
    "TraceSettings",
    "Workload",
    "check_trace",
    "expectation_at",
    "judge_state",
    "replay_models",
    "resuming_workload",
    "run_trace_checks",
    "summarise_trace_outcome",
    "torn_last_write",
    "writing_workload",
]
