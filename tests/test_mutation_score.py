"""Proof that the conformance suite catches bugs: it passes the reference and fails every broken
subject of tests/broken_subjects.py.

The reference runs the whole suite twice, in process and through its stdio server. Each broken
subject runs in process, family group by family group (the files family, the machine, pure-drt, the
exhaustive checker and crash injection, then the vectors), until one reports a failure the reference
does not have; crash injection is asked to stop at its first failing point.
(``python -m conformance.mutation`` runs every family on each and counts the cases that catch it.) The mutation score (killed/total) is
printed. A stdio subject storing on a real directory, without a crash seam, goes through the
kill-at-random-points check, and a copy that acknowledges flush without writing must fail it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from broken_subjects import BROKEN_SUBJECTS, MutantSubject

from conformance.crash import FAIL_FAST
from conformance.report import CUT, CaseResult, Options
from conformance.runner import run_suite, vector_families
from conformance.subject import InProcessSubject, StdioSubject, Subject
from reference.server import ReferenceSubject

REPOSITORY = Path(__file__).resolve().parent.parent
GENERATED_FAMILIES = ("files", "machine", "pure-drt", "exhaustive", "crash")


def family_groups() -> list[tuple[str, frozenset[str]]]:
    """The order a broken subject meets the suite in: the generated checks first (so the score
    shows what they catch without the hand-written vectors), then the vectors."""
    return [
        *((family, frozenset({family})) for family in GENERATED_FAMILIES),
        ("vectors", frozenset(vector_families())),
    ]


def run_all(subject: Subject) -> list[CaseResult]:
    try:
        return run_suite(subject, Options(profile="ci"))
    finally:
        subject.close()


def failures(results: list[CaseResult]) -> list[CaseResult]:
    return [result for result in results if result.outcome in ("failed", "error")]


def describe(results: list[CaseResult]) -> str:
    return "\n".join(f"[{r.family}] {r.name}\n{r.detail[:2000]}" for r in results)


@dataclass(frozen=True)
class Verdict:
    """What the suite said about one broken subject: the family group that caught it and the
    first failing case (``None`` when it survived)."""

    subject: str
    caught_by: str | None
    case: str


@pytest.fixture(scope="module")
def reference_results() -> list[CaseResult]:
    return run_all(InProcessSubject(ReferenceSubject()))


@pytest.fixture(scope="module")
def verdicts(reference_results: list[CaseResult]) -> dict[str, Verdict]:
    known = {(r.family, r.name) for r in failures(reference_results)}
    found: dict[str, Verdict] = {}
    for broken in BROKEN_SUBJECTS:
        found[broken.__name__] = judge(broken, known)
    killed = sum(verdict.caught_by is not None for verdict in found.values())
    print(f"\nmutation score: {killed}/{len(found)} broken subjects caught")
    for verdict in found.values():
        print(f"  {verdict.subject}: {verdict.caught_by or 'SURVIVED'}  {verdict.case[:100]}")
    return found


def judge(broken: type[MutantSubject], known: set[tuple[str, str]]) -> Verdict:
    options_extra = {FAIL_FAST: "1"}
    for group, families in family_groups():
        subject = InProcessSubject(broken())
        try:
            results = run_suite(subject, Options(profile="ci", families=families, extra=options_extra))
        finally:
            subject.close()
        new = [r for r in failures(results) if (r.family, r.name) not in known]
        if new:
            return Verdict(broken.__name__, group, new[0].name)
    return Verdict(broken.__name__, None, "")


def test_the_reference_passes_every_family_in_process(reference_results: list[CaseResult]) -> None:
    assert {r.family for r in reference_results} >= {"machine", "exhaustive", "crash"}
    assert not failures(reference_results), describe(failures(reference_results))


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


@pytest.mark.parametrize("broken", BROKEN_SUBJECTS, ids=lambda broken: broken.__name__)
def test_the_suite_fails_the_broken_subject(
    broken: type[MutantSubject], verdicts: dict[str, Verdict]
) -> None:
    verdict = verdicts[broken.__name__]
    assert verdict.caught_by is not None, (
        f"{broken.__name__} ({broken.rule}) passed every family of the suite"
    )


def test_the_mutation_score_is_every_broken_subject(verdicts: dict[str, Verdict]) -> None:
    survivors = [name for name, verdict in verdicts.items() if verdict.caught_by is None]
    assert survivors == []


def test_the_generated_checks_alone_catch_most_broken_subjects(verdicts: dict[str, Verdict]) -> None:
    """The machine, the exhaustive checker and crash injection are not decoration: the vectors
    alone miss some of these breaks (storage and cache bugs), and the generated checks find them."""
    caught_late = [name for name, verdict in verdicts.items() if verdict.caught_by in GENERATED_FAMILIES]
    assert len(caught_late) >= 4, caught_late


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
    assert results and all("SIGKILL" in r.name for r in results)
    assert not failures(results), describe(failures(results))


def test_a_subject_acknowledging_flush_without_writing_fails_the_kill_check() -> None:
    results = kill_check(" --lazy-flush")
    assert any(r.rule in ("D3.1", "D3.3") for r in failures(results)), describe(results)


def test_the_kill_check_stops_between_rounds_once_the_deadline_has_passed() -> None:
    """Its 60 thorough rounds take a minute or more; cut after 2 s, it stops at the next round and
    certifies nothing (the whole family is not run, said to be cut)."""
    started = time.monotonic()
    results = kill_check("", profile="thorough", deadline=started + 2)
    assert time.monotonic() - started < 20
    assert [(r.family, r.outcome) for r in results] == [("crash", "not run")], describe(results)
    assert results[0].detail.startswith(CUT), results[0].detail
