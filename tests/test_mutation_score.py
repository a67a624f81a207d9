"""Proof that the conformance suite catches bugs: it passes the reference and fails every broken
subject of tests/broken_subjects.py.

The reference runs the whole suite twice, in process and through its stdio server. Each broken
subject is a test of its own (pytest-xdist spreads them over its workers, scripts/test.sh) and
runs in process, family group by family group (the files family, pure-drt, the machine, crash
injection and the exhaustive checker, then the vectors), until one reports a failure; crash
injection is asked to stop at its first failing point. The mutation score (killed/total) is the
number of those tests that pass; each prints the group that caught its subject (``-s``).
(``python -m conformance.mutation`` runs every family on each and counts the cases that catch it.)
A stdio subject storing on a real directory, without a crash seam, goes through the
kill-at-random-points check, and a copy that acknowledges flush without writing must fail it.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from broken_subjects import BROKEN_POSTGRES, BROKEN_SUBJECTS

from conformance.crash import FAIL_FAST, STORE_ROOT_ENV
from conformance.crash_rules import D2_WRITER
from conformance.families import FAMILY_RULES, OPT_IN
from conformance.report import CUT, CaseResult, Options, build_certificate
from conformance.runner import every_rule, run_suite, vector_families
from conformance.subject import InProcessSubject, StdioSubject, Subject
from reference.persistence.postgres import DSN_ENV
from reference.server import ReferenceSubject

REPOSITORY = Path(__file__).resolve().parent.parent
GENERATED_FAMILIES = ("files", "pure-drt", "machine", "crash", "exhaustive")  # cheapest first


def family_groups(generated_only: bool = False) -> list[tuple[str, frozenset[str]]]:
    """The order a broken subject meets the suite in: the vectors first (a few seconds in process),
    then the generated checks; only the generated checks for a subject they must catch on their own."""
    generated = [(family, frozenset({family})) for family in GENERATED_FAMILIES]
    return generated if generated_only else [("vectors", frozenset(vector_families())), *generated]


def run_all(subject: Subject, families: frozenset[str] | None = None) -> list[CaseResult]:
    try:
        return run_suite(subject, Options(profile="ci", families=families))
    finally:
        subject.close()


def failures(results: list[CaseResult]) -> list[CaseResult]:
    return [result for result in results if result.outcome in ("failed", "error")]


def describe(results: list[CaseResult]) -> str:
    return "\n".join(f"[{r.family}] {r.name}\n{r.detail[:2000]}" for r in results)


# Broken subjects the generated checks (GENERATED_FAMILIES) must catch before the vectors run: the
# storage bugs no hand-written vector reaches (the crash seam's power cuts, byte cuts and faults).
CAUGHT_BY_GENERATED: Final = frozenset(
    {
        "EmitsClosersInWrongOrder",
        "ClosersOmitCompactionEnd",
        "LeavesTornTailOnDisk",
        "ReportsTornTailAsCorrupt",
        "TruncatesDamageThatIsNotATail",
        "AcknowledgesFlushBeforeFsync",
        "IgnoresFailedFsync",
    }
)


BROKEN_DEPTH: Final = 4
"""The exhaustive search's depth for a broken subject: every one is caught at depth 4 (the ci
profile's before it went to 5), and depth 5 would cost each that reaches that family about eight
times as much without catching another. The reference runs the ci profile's depth 5 below."""


@dataclass(frozen=True)
class Verdict:
    """What the suite said about one broken subject: the family group that caught it and the
    first failing case (``None`` when it survived)."""

    subject: str
    caught_by: str | None
    case: str


def judge(broken: type[ReferenceSubject]) -> Verdict:
    """The family groups in order until one fails the broken subject. Any failure counts: the
    reference passes every family (the two tests below), so no case that fails the reference too
    can be taken for a catch without turning the suite red."""
    for group, families in family_groups(generated_only=broken.__name__ in CAUGHT_BY_GENERATED):
        subject = InProcessSubject(broken())
        options = Options(
            profile="ci", families=families, extra={FAIL_FAST: "1"}, exhaustive_depth=BROKEN_DEPTH
        )
        try:
            results = run_suite(subject, options)
        finally:
            subject.close()
        found = failures(results)
        if found:
            return Verdict(broken.__name__, group, found[0].name)
    return Verdict(broken.__name__, None, "")


def test_the_reference_passes_every_family_in_process() -> None:
    """... and so its certificate lists every rule of the spec as certified (PROTOCOL.md,
    "Certificate": the fixed denominator, whatever the families), but for the rules only an opt-in
    family judges (the trace family's ``reader``: tests/test_trace_family.py runs it)."""
    results = run_all(InProcessSubject(ReferenceSubject()))
    assert {r.family for r in results} >= {"machine", "exhaustive", "crash"}
    assert not failures(results), describe(failures(results))
    searched = next(r.name for r in results if r.key == "exhaustive/agrees")
    assert searched.startswith("every sequence of up to 5 ops"), searched  # the ci profile's depth
    certificate = build_certificate(results, every_rule(), {"name": "reference"}, "ci", FAMILY_RULES)
    judged = {rule for rule, (_, cases) in certificate.rules.items() if cases}
    opt_in_only = {rule for family in OPT_IN for rule in FAMILY_RULES[family]} - judged
    # Two processes on one store: the crash family judges D2's writer lock over stdio only, on a
    # real store root (tests/test_crash_writers.py); in process, over the seam, no case reaches it.
    opt_in_only |= {D2_WRITER} - judged
    # The simulated stores cannot fail a commit of their own (capability commit-fault: the database
    # subjects', tests/test_db_conformance.py runs those cases), so a rule may be unsupported here
    # through those cases alone, and the certificate says so; through any other case, it may not.
    uncertified = {
        rule: status
        for rule, (status, cases) in certificate.rules.items()
        if status != "certified"
        and rule not in opt_in_only
        and not (
            status == "unsupported"
            and all(
                case.outcome == "passed" or case.detail == "the subject does not declare commit-fault"
                for case in cases
            )
        )
    }
    assert set(certificate.rules) >= set(every_rule()) and not uncertified, uncertified


def test_the_reference_passes_every_family_through_its_stdio_server() -> None:
    results = run_all(
        StdioSubject(f"{sys.executable} -m reference.server", env={"PYTHONPATH": str(REPOSITORY)})
    )
    assert {r.family for r in results} >= {"machine", "exhaustive", "crash"}
    assert not failures(results), describe(failures(results))


def test_there_are_at_least_forty_broken_subjects_each_naming_its_rule() -> None:
    assert len(BROKEN_SUBJECTS) >= 40
    assert all(broken.rule and broken.__doc__ for broken in BROKEN_SUBJECTS)
    assert len({broken.__name__ for broken in BROKEN_SUBJECTS}) == len(BROKEN_SUBJECTS)


def test_every_swap_replaces_a_name_its_module_still_holds() -> None:
    """A swap of a name the reference no longer calls through that module would make a subject that
    is not broken, or (when the name is gone) one that fails every request and is 'caught' for it."""
    import importlib

    gone = [
        f"{broken.__name__}: {swap.module}.{swap.name}"
        for broken in BROKEN_SUBJECTS
        for swap in getattr(broken, "swaps", ())
        if not hasattr(importlib.import_module(swap.module), swap.name)
    ]
    # and every ``swapped(module, "name", ...)`` a broken store or engine makes while it runs
    for helpers in ("tests.broken_subjects", "tests.broken_engines"):
        module = importlib.import_module(helpers)
        source = Path(module.__file__ or "").read_text(encoding="utf-8")
        for alias, name in re.findall(r'swapped\((\w+), "(\w+)"', source):
            if not hasattr(getattr(module, alias), name):
                gone.append(f"{helpers}: {alias}.{name}")
    assert gone == []


@pytest.mark.parametrize("broken", BROKEN_SUBJECTS, ids=lambda broken: broken.__name__)
def test_the_suite_fails_the_broken_subject(broken: type[ReferenceSubject]) -> None:
    """One broken subject, judged on its own (so that xdist spreads them over its workers); the
    mutation score is how many of these pass. One the generated checks must catch meets only them."""
    verdict = judge(broken)
    print(f"{verdict.subject}: {verdict.caught_by or 'SURVIVED'}  {verdict.case[:100]}")
    assert verdict.caught_by is not None, (
        f"{broken.__name__} ({broken.rule}) passed every family of the suite"
    )
    if broken.__name__ in CAUGHT_BY_GENERATED:
        assert verdict.caught_by in GENERATED_FAMILIES, (
            f"{broken.__name__} escaped the generated checks; the vectors caught it ({verdict.case})"
        )


# The storage vectors that read back a session longer than the PostgreSQL subject's read page.
PAGE_BOUNDARY_CASES: Final = frozenset(
    {
        "a closed session can be resumed and appended to",
        "a long closed session reads back whole",
        "a long session resumed inside an open turn is closed after its last event and grows from there",
        "a session read back after each flush, one event longer each time, is read whole",
    }
)


@pytest.mark.parametrize("broken", BROKEN_POSTGRES, ids=lambda broken: broken.__name__)
def test_the_suite_fails_the_broken_postgres_subject(
    broken: type[ReferenceSubject], postgres_cluster: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database subject reading across a page boundary wrong is caught by the vectors, among
    them two or more of the storage vectors that read a session longer than a page
    (tests/broken_subjects.py BROKEN_POSTGRES)."""
    monkeypatch.setenv(DSN_ENV, postgres_cluster.dsn)
    monkeypatch.delenv(STORE_ROOT_ENV, raising=False)
    verdict = judge(broken)
    print(f"{verdict.subject}: {verdict.caught_by or 'SURVIVED'}  {verdict.case[:100]}")
    assert verdict.caught_by == "vectors", verdict
    storage = run_all(InProcessSubject(broken()), families=frozenset({"storage"}))
    caught = {result.name for result in failures(storage)} & PAGE_BOUNDARY_CASES
    print(f"  storage: {sorted(caught)}")
    assert len(caught) >= 2, describe(failures(storage))


def test_the_generated_checks_alone_catch_at_least_four_broken_subjects() -> None:
    """The machine, the exhaustive checker and crash injection are not decoration: the vectors
    alone miss some of these breaks (storage bugs), and the generated checks find them. Stated per
    subject: each of CAUGHT_BY_GENERATED is a broken subject whose own test above demands it."""
    names = {broken.__name__ for broken in BROKEN_SUBJECTS}
    assert len(CAUGHT_BY_GENERATED) >= 4 and names >= CAUGHT_BY_GENERATED, sorted(CAUGHT_BY_GENERATED - names)


def kill_check(flag: str, profile: str = "ci", deadline: float | None = None) -> list[CaseResult]:
    """The crash family against tests/stdio_file_subject.py: no seam, so it kills the process."""
    subject = StdioSubject(
        f"{sys.executable} -m tests.stdio_file_subject{flag}", env={"PYTHONPATH": str(REPOSITORY)}
    )
    try:
        options = Options(profile=profile, families=frozenset({"crash"}), deadline=deadline)
        return run_suite(subject, options)
    finally:
        subject.close()


def test_a_real_directory_store_over_stdio_survives_being_killed_at_random_points() -> None:
    results = kill_check("")
    kills = [r for r in results if r.key != "crash/d2-writer"]  # beside them, two processes on one store
    assert kills and all("SIGKILL" in r.name for r in kills) and len(results) == len(kills) + 1
    assert not failures(results), describe(failures(results))


def test_a_subject_acknowledging_flush_without_writing_fails_the_kill_check() -> None:
    results = kill_check(" --lazy-flush")
    assert any(r.rule in ("D3.1", "D3.3") for r in failures(results)), describe(results)
    replays = [r.detail.splitlines()[-1] for r in failures(results)]
    assert all(line.startswith("replay: python -m conformance ") for line in replays), replays
    assert all(line.endswith(" --families crash") for line in replays), replays


def test_the_kill_check_stops_between_rounds_once_the_deadline_has_passed() -> None:
    """Its 60 thorough rounds take a minute or more; cut after 2 s, it stops at the next round and
    certifies nothing (the whole family is not run, said to be cut)."""
    started = time.monotonic()
    results = kill_check("", profile="thorough", deadline=started + 2)
    assert time.monotonic() - started < 20
    assert [(r.family, r.outcome) for r in results] == [("crash", "not run")], describe(results)
    assert results[0].detail.startswith(CUT), results[0].detail
