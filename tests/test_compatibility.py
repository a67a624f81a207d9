"""docs/compatibility.md is what scripts/compatibility.py renders from the stored summary of the
DSH runs (docs/compatibility-runs.json), and every deviation on it has a recorded cause (issue 9
part 6). No network and no DSH install are needed: the runs are stored, and the page is checked
against them. The runs themselves are refreshed by `python -m scripts.compatibility` (which
certifies each pinned release) when DSH or the suite changes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scripts import compatibility

ROOT = Path(__file__).resolve().parent.parent

STORED = compatibility.SUMMARY.is_file() and compatibility.PAGE.is_file()
needs_runs = pytest.mark.skipif(
    not STORED, reason="docs/compatibility-runs.json or docs/compatibility.md is absent: nothing to check"
)


def stored() -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(compatibility.SUMMARY.read_text(encoding="utf-8"))
    return summary


@needs_runs
def test_the_page_is_what_the_stored_runs_render() -> None:
    rendered = compatibility.render(stored())
    assert compatibility.PAGE.read_text(encoding="utf-8") == rendered, (
        "docs/compatibility.md is stale: run python -m scripts.compatibility --render"
    )


@needs_runs
def test_every_pinned_release_is_on_the_page() -> None:
    releases = stored()["releases"]
    assert set(compatibility.pinned_releases()) <= set(releases), "a pinned release has no stored run"


@needs_runs
def test_every_deviation_of_every_release_has_a_recorded_cause() -> None:
    unexplained = [
        f"{release}: {key} ({case['outcome']})"
        for release, run in stored()["releases"].items()
        for key, case in run["deviations"].items()
        if compatibility.reason_of(key, case, release.endswith(compatibility.INVARIANTS)).startswith(
            "no recorded cause"
        )
    ]
    assert not unexplained, "\n".join(unexplained)


@needs_runs
def test_the_counts_agree_with_the_deviations() -> None:
    for release, run in stored()["releases"].items():
        for family, counts in run["counts"].items():
            listed = sum(1 for case in run["deviations"].values() if case["family"] == family)
            assert listed == counts["failed"] + counts["unsupported"] + counts["not run"], (release, family)


def test_a_summary_keeps_every_case_that_did_not_pass_and_counts_the_rest() -> None:
    run = {
        "subject": {"name": "dsh", "version": "9"},
        "cases": [
            {"key": "a/x", "family": "a", "outcome": "passed", "rule": "r", "detail": ""},
            {"key": "a/y", "family": "a", "outcome": "failed", "rule": "r", "detail": "d" * 999},
            {"key": "b/z", "family": "b", "outcome": "not run", "rule": None, "detail": None},
        ],
    }
    summary = compatibility.summarize(run)
    assert summary["counts"] == {
        "a": {"passed": 1, "failed": 1, "unsupported": 0, "not run": 0},
        "b": {"passed": 0, "failed": 0, "unsupported": 0, "not run": 1},
    }
    assert sorted(summary["deviations"]) == ["a/y", "b/z"]
    assert len(summary["deviations"]["a/y"]["detail"]) == compatibility.DETAIL


def test_releases_sort_by_version_with_the_candidate_number_last() -> None:
    given = ["0.1.1-rc.2", "0.1.0-rc.8", "0.0.1-rc.1", "0.1.0-rc.6", "0.1.0"]
    assert sorted(given, key=compatibility.release_order) == [
        "0.0.1-rc.1",
        "0.1.0-rc.6",
        "0.1.0-rc.8",
        "0.1.0",
        "0.1.1-rc.2",
    ]


def test_the_page_counts_a_deviation_once_however_many_cases_it_fails() -> None:
    failed = {"family": "session", "outcome": "failed", "rule": "", "detail": ""}
    keys = (
        "session/an-empty-event-type-is-rejected",
        "session/an-event-type-that-is-not-a-string-is-rejected",
    )
    run = {"subject": {}, "counts": {"session": {}}, "deviations": dict.fromkeys(keys, failed)}
    lines = compatibility.render_deviations({"9": run})
    assert "| subject-bug | 1 |" in lines and "DSH 9: 1 subject bug." in lines
    assert len([line for line in lines if line.startswith("- [subject-bug]")]) == 1


def test_a_profile_sorts_after_its_release_and_before_the_next() -> None:
    given = ["0.1.1-rc.2", "0.1.0-rc.8 with invariants", "0.1.0-rc.8"]
    assert sorted(given, key=compatibility.release_order) == [
        "0.1.0-rc.8",
        "0.1.0-rc.8 with invariants",
        "0.1.1-rc.2",
    ]


def test_the_judged_share_counts_passed_and_failed_of_every_case() -> None:
    run = {
        "counts": {
            "a": {"passed": 6, "failed": 1, "unsupported": 2, "not run": 0},
            "b": {"passed": 0, "failed": 0, "unsupported": 0, "not run": 1},
        }
    }
    assert compatibility.judged(run) == (7, 10)
    summary = {"releases": {"9 with invariants": {"subject": {}, **run, "deviations": {}}}}
    assert "| 9 | with invariants |  | 7 of 10 (70.0%) | no deviations |" in compatibility.render_releases(
        summary
    )


def test_a_share_is_shown_in_tenths_rounded_down_never_up_to_a_threshold() -> None:
    assert compatibility.percent_down(829, 922) == "89.9%"
    assert compatibility.percent_down(8999, 10000) == "89.9%"
    assert compatibility.percent_down(828, 920) == "90.0%"
    assert compatibility.percent_down(0, 0) == "0.0%"


def test_a_deviation_s_evidence_names_the_rules_material_its_failing_rules_cite() -> None:
    failed = {"family": "prune", "outcome": "failed", "rule": "decode_prune_config", "detail": ""}
    lines = compatibility.render_grouped({"prune/x": failed}, "0.1.0-rc.8")
    assert "rules: notes/dsh-compaction-projection.md §6.1" in lines[0], lines


def test_every_pinned_release_and_profile_has_its_own_expectation_files() -> None:
    """``certify-dsh.sh VERSION [--invariants]`` needs both files (CI runs rc.8 only)."""
    names = [f"dsh-{release}" for release in compatibility.pinned_releases()]
    names += [f"dsh-{release}-invariants" for release in compatibility.invariants_releases()]
    missing = [
        f"{name}{mode}.json"
        for name in names
        for mode in ("", "-kill")
        if not (compatibility.EXPECTATIONS / f"{name}{mode}.json").is_file()
    ]
    assert not missing, missing
