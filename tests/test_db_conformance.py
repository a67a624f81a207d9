"""The database backends pass the conformance suite: every family in process (vectors, the
model-checking machine, the exhaustive check — all of them on the database, since the subjects
serve the protocol's storages from it), and over stdio the storage vectors and the crash family,
which for a subject without the crash seam is the kill check (SIGKILL at seeded random points,
restart, resume; conformance/PROTOCOL.md).

The crash family in process is skipped by the suite itself, with its reason: a subject without the
seam can only be killed as a process. Every other family must pass, with nothing left unjudged but
the cases that need a capability the subject does not declare.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from conformance.crash import STORE_ROOT_ENV
from conformance.report import CaseResult, Options
from conformance.runner import run_suite
from conformance.subject import InProcessSubject, StdioSubject
from reference.database_subjects import PostgresSubject, SqliteSubject
from reference.persistence.postgres import DSN_ENV
from reference.server import ReferenceSubject

STDIO_FAMILIES = frozenset({"storage", "crash"})


def failures(results: list[CaseResult]) -> list[str]:
    return [f"[{r.family}] {r.name}: {r.detail}" for r in results if r.outcome in ("failed", "error")]


def unexpected_skips(results: list[CaseResult]) -> list[str]:
    """Cases not judged for any reason but a capability the subject does not declare (the seam,
    compaction, spill and the rest a database subject leaves out): a declared op the subject
    answered UNSUPPORTED_OP, or a case that did not run, would show here."""
    allowed = ("the subject does not declare ", "needs capability ")
    return [
        f"[{r.family}] {r.name}: {r.outcome}: {r.detail}"
        for r in results
        if r.outcome not in ("passed", "failed", "error") and not r.detail.startswith(allowed)
    ]


@pytest.fixture
def postgres_env(postgres_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(DSN_ENV, postgres_cluster.dsn)
    monkeypatch.delenv(STORE_ROOT_ENV, raising=False)
    return str(postgres_cluster.dsn)


def run_in_process(subject: Any) -> list[CaseResult]:
    """Every family at the ci profile, but the exhaustive search at depth 4: depth 5 on the
    reference's own store is tests/test_mutation_score.py's, and here it would cost each database
    about eight times as much to drive the same store code over another backend."""
    return run_suite(InProcessSubject(subject), Options(exhaustive_depth=4))


def run_over_stdio(backend: str) -> list[CaseResult]:
    subject = StdioSubject(f"{sys.executable} -m reference.server --backend {backend}", timeout=120)
    try:
        return run_suite(subject, Options(families=STDIO_FAMILIES))
    finally:
        subject.close()


def assert_passes_every_family(subject: ReferenceSubject) -> None:
    results = run_in_process(subject)
    assert failures(results) == []
    assert unexpected_skips(results) == []
    passed = {r.family for r in results if r.outcome == "passed"}
    assert passed >= {"storage", "machine", "exhaustive", "session", "fork"}


def test_the_sqlite_subject_passes_every_family_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORE_ROOT_ENV, raising=False)
    assert_passes_every_family(SqliteSubject())


def test_the_postgres_subject_passes_every_family_in_process(postgres_env: str) -> None:
    assert_passes_every_family(PostgresSubject())


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_stdio_server_on_a_database_passes_storage_and_survives_the_kill_check(
    backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        request.getfixturevalue("postgres_env")
    results = run_over_stdio(backend)
    assert failures(results) == []
    crash = {r.key: r for r in results if r.family == "crash"}
    assert crash.pop("crash/d2-writer").outcome == "passed"  # a second process gets LOCKED
    kills = [r for r in crash.values() if r.outcome == "passed"]
    assert kills and all("SIGKILL" in r.name for r in kills), [r.name for r in crash.values()]
    assert [r for r in results if r.family == "storage" and r.outcome == "passed"]


def test_only_an_undeclared_capability_leaves_a_case_unjudged() -> None:
    results = [
        CaseResult("storage", "a", "unsupported", "the subject does not declare crash-seam"),
        CaseResult(
            "crash", "b", "unsupported", "needs capability crash-seam, or capability storage over stdio"
        ),
        CaseResult("fork", "c", "unsupported", "the subject answered UNSUPPORTED_OP to fork"),
        CaseResult("session", "d", "not run", "no vectors"),
        CaseResult("machine", "e", "passed"),
    ]
    assert unexpected_skips(results) == [
        "[fork] c: unsupported: the subject answered UNSUPPORTED_OP to fork",
        "[session] d: not run: no vectors",
    ]
