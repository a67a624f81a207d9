"""The trace family end to end: the reference's stdio server passes under both persistence models,
every durability-broken subject is caught, and without strace (or ptrace) nothing passes."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from conformance.report import CaseResult, Options
from conformance.subject import StdioSubject
from conformance.trace.family import (
    TraceOutcome,
    TraceSettings,
    check_trace,
    run_trace_checks,
    summarise_trace_outcome,
)
from conformance.trace.strace import probe_strace
from reference.durability_subjects import BROKEN

PROBE = probe_strace()
needs_strace = pytest.mark.skipif(
    PROBE.problem is not None, reason=f"the trace family cannot run here: {PROBE.problem}"
)
PYTHON = sys.executable
SUBJECTS = f"{PYTHON} -m reference.durability_subjects"
REFERENCE = f"{PYTHON} -m reference.server"
REPAIR_BREAKS = {
    "rename-unsynced-temp",
    "truncate-repair-unsynced",
}  # they show only when a torn log is resumed


def outcomes(results: list[CaseResult]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for result in results:
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
    return counts


@needs_strace
def test_the_reference_stdio_server_passes_the_trace_family_under_both_models() -> None:
    outcome = run_trace_checks(PROBE, TraceSettings(REFERENCE, workers=os.cpu_count() or 1))
    results = summarise_trace_outcome(outcome)
    failed = [f"{result.name}\n{result.detail}" for result in results if result.outcome != "passed"]
    assert not failed, "\n".join(failed)
    assert (
        outcome.tallies["strict"].judged > 0
        and outcome.tallies["weak"].judged > outcome.tallies["strict"].judged
    )
    assert len(outcome.workloads) == 4
    print(
        f"\ntrace family on the reference: strict {outcome.tallies['strict'].states} states "
        f"({len(outcome.tallies['strict'].distinct)} distinct), weak {outcome.tallies['weak'].states} states "
        f"({len(outcome.tallies['weak'].distinct)} distinct), {outcome.seconds:.1f}s"
    )


@needs_strace
@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_subject_missing_a_durability_step_fails_the_trace_family(name: str) -> None:
    judged = ("resuming",) if name in REPAIR_BREAKS else ("writing",)
    settings = TraceSettings(f"{SUBJECTS} {name}", formats=(True,), judged=judged, fail_fast=True)
    outcome = run_trace_checks(PROBE, settings)
    assert outcome.replay == []
    results = summarise_trace_outcome(outcome)
    failed = [result for result in results if result.outcome == "failed"]
    assert failed, f"{name} ({BROKEN[name].why}) was not caught: {outcome.not_run}"
    assert not [result for result in results if result.outcome == "passed"], (
        "a run stopped at its first failure passes nothing"
    )


def fake_path(tmp_path: Path, strace_script: str | None) -> str:
    """A PATH with python on it and, if given, a fake strace."""
    directory = tmp_path / "bin"
    directory.mkdir()
    (directory / "python").symlink_to(PYTHON)
    if strace_script is not None:
        fake = directory / "strace"
        fake.write_text(strace_script)
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return str(directory)


def test_without_strace_on_the_path_the_family_does_not_run_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", fake_path(tmp_path, None))
    results = check_trace(StdioSubject(REFERENCE), Options(capabilities=frozenset({"core", "storage"})))
    assert outcomes(results) == {"not run": 1}
    assert "strace is not installed" in results[0].detail and "apt-get install strace" in results[0].detail


def test_where_ptrace_is_denied_the_family_does_not_run_and_gives_strace_s_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    denied = "#!/bin/sh\necho 'strace: ptrace(PTRACE_TRACEME, ...): Operation not permitted' >&2\nexit 1\n"
    monkeypatch.setenv("PATH", fake_path(tmp_path, denied))
    results = check_trace(StdioSubject(REFERENCE), Options(capabilities=frozenset({"core", "storage"})))
    assert outcomes(results) == {"not run": 1}
    assert "Operation not permitted" in results[0].detail and "ptrace" in results[0].detail


def test_an_in_process_subject_or_one_without_storage_is_not_traced() -> None:
    class NotAProcess:
        def request(self, op: str, **args: object) -> object:
            raise AssertionError("never asked")

        def close(self) -> None:
            pass

    assert outcomes(check_trace(NotAProcess(), Options(capabilities=frozenset({"core", "storage"})))) == {
        "not run": 1
    }
    assert outcomes(check_trace(StdioSubject(REFERENCE), Options(capabilities=frozenset({"core"})))) == {
        "not run": 1
    }


def test_a_workload_that_could_not_be_judged_leaves_every_case_not_run_rather_than_passed() -> None:
    outcome = TraceOutcome(not_run=["zstd, writing: the trace holds calls no persistence model covers"])
    outcome.tallies["weak"].judged = 10
    results = summarise_trace_outcome(outcome)
    assert results and all(result.outcome == "not run" for result in results)
    assert "no persistence model covers" in results[0].detail


def test_the_cli_flag_adds_the_trace_family_and_prints_why_it_did_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from conformance.__main__ import main

    subject = ["--subject", "reference.server:ReferenceSubject", "--families", "tokens"]
    assert main([*subject, "--trace-crashes", "--junit", str(tmp_path / "report.xml")]) == 0
    out = capsys.readouterr().out
    assert (
        "trace: not run: the trace family runs a stdio subject's command beneath strace (use --stdio)" in out
    )
    assert "tokens" in out


def test_the_trace_family_runs_only_when_named_or_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import conformance.runner as runner
    from conformance.subject import InProcessSubject
    from reference.server import ReferenceSubject

    ran: list[str] = []

    def fake_trace(subject: object, options: Options) -> list[CaseResult]:
        ran.append("trace")
        return []

    checks = {"trace": fake_trace}
    subject = InProcessSubject(ReferenceSubject())
    runner.run_suite(subject, Options(vectors_dir=tmp_path), checks)
    assert ran == []
    runner.run_suite(subject, Options(vectors_dir=tmp_path, extra={"trace-crashes": "1"}), checks)
    runner.run_suite(subject, Options(vectors_dir=tmp_path, families=frozenset({"trace"})), checks)
    assert ran == ["trace", "trace"]
