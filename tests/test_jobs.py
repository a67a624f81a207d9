"""``python -m conformance --jobs N`` (issue 25): the run's units on N worker processes, each with a
subject of its own, give the same cases, outcomes, order and certificate as one process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.__main__ import EXIT_FAILED, EXIT_OK, EXIT_USAGE, main
from conformance.exhaustive import explore_part, merge_parts, run_exhaustive
from conformance.families import SPLITS
from conformance.report import Options
from conformance.runner import plan_units
from conformance.subject import InProcessSubject
from reference.server import ReferenceSubject

REFERENCE = "reference.server:ReferenceSubject"
BROKEN = "broken_subjects:ReplaceGenerationNotIncremented"  # tests/ is on the workers' sys.path too
SMALL = ("session", "surface", "tokens", "files")  # vectors and a stateful family, a few seconds


def run(tmp_path: Path, subject: str, jobs: int) -> tuple[int, list[tuple[str, ...]], object]:
    """One CLI run: its exit code, every case as it must match (no timings), and the certificate."""
    report = tmp_path / f"jobs-{jobs}"
    outputs = ["--json", f"{report}.json", "--junit", f"{report}.xml"]
    code = main(["--subject", subject, "--families", *SMALL, "--jobs", str(jobs), *outputs])
    cases = json.loads(Path(f"{report}.json").read_text(encoding="utf-8"))["cases"]
    keys = ("key", "name", "outcome", "rule", "fingerprint", "detail")
    certificate = json.loads(Path(f"{report}.certificate.json").read_text(encoding="utf-8"))
    return code, [tuple(str(case.get(key, "")) for key in keys) for case in cases], certificate


@pytest.mark.parametrize("subject, code", [(REFERENCE, EXIT_OK), (BROKEN, EXIT_FAILED)])
def test_two_jobs_give_the_same_cases_outcomes_order_and_certificate_as_one(
    tmp_path: Path, subject: str, code: int
) -> None:
    one = run(tmp_path, subject, 1)
    two = run(tmp_path, subject, 2)
    assert one[0] == two[0] == code
    assert one[1] == two[1]
    assert one[2] == two[2]
    assert {case[0].split("/")[0] for case in one[1]} == set(SMALL)
    if code == EXIT_FAILED:  # the broken subject fails the same cases, with the same fingerprints
        assert any(case[2] == "failed" for case in two[1])


def test_jobs_below_one_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--subject", REFERENCE, "--families", "tokens", "--jobs", "0"]) == EXIT_USAGE
    assert "--jobs 0" in capsys.readouterr().err


def test_the_long_families_are_split_into_parts_in_report_order() -> None:
    options = Options(capabilities=frozenset({"core", "pure", "storage", "crash-seam"}))
    units = plan_units(options)
    for family in SPLITS:
        parts = [unit.part for unit in units if unit.family == family and unit.part >= 0]
        assert parts == list(range(SPLITS[family].parts(options)))
        assert len(parts) > 1, family  # the longest part, not the whole family, bounds a run
    stateful = [unit.family for unit in units if unit.part >= 0]
    assert list(dict.fromkeys(stateful)) == ["pure-drt", "files", "machine", "exhaustive", "crash"]


def test_the_exhaustive_search_is_its_parts_merged() -> None:
    """Each part explores the sequences that begin with one letter; merged, the start counts once
    and every letter is driven from the start exactly once."""
    capabilities = ("core", "storage", "crash-seam")
    parts = [
        explore_part(InProcessSubject(ReferenceSubject()), capabilities, 2, first) for first in range(10)
    ]
    whole = run_exhaustive(InProcessSubject(ReferenceSubject()), capabilities, 2)
    merged = merge_parts(parts)
    assert (merged.states, merged.transitions) == (whole.states, whole.transitions)
    assert whole.states == 1 + sum(part.outcome.states for part in parts)
    assert whole.failure is None and len(whole.alphabet) == 10
    assert all(part.outcome.transitions >= 1 for part in parts)
