"""Expectation files with fingerprints, causes and kinds (issue 21 items 3 and 4): a failure with
another fingerprint than the expected one is a surprise, an entry whose cause is TODO fails the
run, ``--write-expectations`` and ``--update-expectations`` work for any subject (here a broken
one, in process, on the fork vectors), and deviations are counted once per cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.__main__ import EXIT_FAILED, EXIT_OK, main
from conformance.expectations import (
    ExpectationError,
    decode_expectations,
    judge,
    update_expectations,
    write_expectations,
)
from conformance.report import summarize_deviations

BROKEN = "broken_subjects:ForksInsideOpenTurn"  # forks inside an open turn: 4 fork vectors fail
REFERENCE = "reference.server:ReferenceSubject"
FINGERPRINT = "step 9 (fork): expected OPEN_TURN, got ok"


def run(tmp_path: Path, subject: str, *flags: str) -> int:
    return main(["--subject", subject, "--families", "fork", "--junit", str(tmp_path / "j.xml"), *flags])


def entries(path: Path) -> list[dict[str, str]]:
    found: list[dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))["expectations"]
    return found


def explained(path: Path) -> None:
    """What a person does with a written file: fill in every cause and kind."""
    document = json.loads(path.read_text(encoding="utf-8"))
    for entry in document["expectations"]:
        entry |= {"cause": "fork checks no open turn", "kind": "subject-bug", "source": "broken_subjects.py"}
    path.write_text(json.dumps(document), encoding="utf-8")


def record(key: str, outcome: str, fingerprint: str = "") -> dict[str, str]:
    return {"key": key, "outcome": outcome, "fingerprint": fingerprint}


def test_a_written_file_round_trips_and_its_todo_causes_fail_until_filled_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    assert run(tmp_path, BROKEN, "--write-expectations", str(path)) == EXIT_OK
    written = entries(path)
    assert {entry["status"] for entry in written} == {"failed"} and len(written) == 4
    assert all(entry["cause"] == entry["kind"] == "TODO" and entry["fingerprint"] for entry in written)
    assert FINGERPRINT in {entry["fingerprint"] for entry in written}
    assert json.loads(path.read_text(encoding="utf-8"))["implementation"] == "dsh-session-spec reference"
    capsys.readouterr()
    assert run(tmp_path, BROKEN, "--expect", str(path)) == EXIT_FAILED
    assert "4 without a cause" in capsys.readouterr().out
    explained(path)
    assert run(tmp_path, BROKEN, "--expect", str(path)) == EXIT_OK
    out = capsys.readouterr().out
    assert "expectations: met" in out and "0.1.0: 1 subject bug\n" in out  # one cause, four cases


def test_update_keeps_unchanged_entries_marks_a_changed_one_and_drops_what_now_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.json"
    assert run(tmp_path, BROKEN, "--write-expectations", str(path)) == EXIT_OK
    explained(path)
    document = json.loads(path.read_text(encoding="utf-8"))
    changed = document["expectations"][0]
    changed["fingerprint"] = "step 9 (fork): expected OPEN_TURN, got INVALID_BOUNDARY"
    document["expectations"].append(
        {"case": "session/*", "status": "unsupported", "cause": "x", "kind": "harness", "source": "y"}
    )
    path.write_text(json.dumps(document), encoding="utf-8")
    capsys.readouterr()
    assert run(tmp_path, BROKEN, "--update-expectations", str(path)) == EXIT_OK
    out = capsys.readouterr().out
    assert f"~ {changed['case']}: was failed [step 9 (fork): expected OPEN_TURN, got INVALID_BOUNDARY]" in out
    assert "1 changed" in out
    updated = {entry["case"]: entry for entry in entries(path)}
    assert updated[changed["case"]]["cause"] == "TODO (was: fork checks no open turn)"
    assert sum(entry["cause"] == "fork checks no open turn" for entry in updated.values()) == 3
    assert "session/*" in updated  # a family the run did not run keeps its entries
    assert run(tmp_path, REFERENCE, "--update-expectations", str(path)) == EXIT_OK
    out = capsys.readouterr().out
    assert out.count(": now passes (was ") == 4
    assert [entry["case"] for entry in entries(path)] == ["session/*"]


def test_a_failure_with_another_fingerprint_is_a_surprise() -> None:
    file = write_expectations("x", "1", [record("fork/a", "failed", FINGERPRINT)])
    assert not judge(file, [record("fork/a", "failed", FINGERPRINT)]).surprises
    verdict = judge(file, [record("fork/a", "failed", "step 9 (fork): expected OPEN_TURN, got INTERNAL")])
    assert not verdict.ok and len(verdict.surprises) == 1
    assert verdict.surprises[0].describe().startswith("failed differently: fork/a ended failed")


def test_an_entry_whose_cause_is_todo_fails_the_verdict_and_the_rest_is_as_expected() -> None:
    file = write_expectations("x", "1", [record("fork/a", "unsupported")])
    verdict = judge(file, [record("fork/a", "unsupported")])
    assert not verdict.surprises and not verdict.unused and len(verdict.todo) == 1 and not verdict.ok
    done = write_expectations("x", "1", [record("fork/a", "unsupported")], lambda _: ("c", "harness", "s"))
    assert judge(done, [record("fork/a", "unsupported")]).ok


def test_deviations_are_counted_once_per_cause_by_kind() -> None:
    causes = {
        "a": ("bug one", "subject-bug"),
        "b": ("bug one", "subject-bug"),
        "c": ("later", "spec-version"),
    }

    def explain(case: Any) -> tuple[str, str, str]:
        cause, kind = causes[case["key"].split("/")[1]]
        return cause, kind, "src"

    records = [record("f/a", "failed", "p"), record("f/b", "failed", "q"), record("f/c", "unsupported")]
    verdict = judge(write_expectations("x", "1", records, explain), records)
    assert [(d.kind, len(d.cases)) for d in verdict.deviations] == [("subject-bug", 2), ("spec-version", 1)]
    assert summarize_deviations("X 1", verdict.deviations) == "X 1: 1 subject bug, 1 spec-version feature"


def test_an_update_adds_a_new_failure_as_todo_and_drops_a_stale_entry() -> None:
    old = write_expectations("x", "1", [record("f/gone", "failed", "p")], lambda _: ("c", "robustness", "s"))
    new, diff = update_expectations(
        old, [record("f/new", "error", "setup step 0 (create): expected ok, got X")]
    )
    assert [(e.case, e.status, e.cause) for e in new.expectations] == [("f/new", "error", "TODO")]
    assert diff[0].startswith("+ f/new: error [setup step 0 (create)")
    assert diff[1].startswith("- f/gone: failed [p] (robustness: c): matched no case")


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"status": "failed"}, "names its fingerprint"),
        ({"status": "unsupported", "fingerprint": "p"}, "names its fingerprint"),
        ({"status": "unsupported", "kind": "bug"}, "kind 'bug' is not one of"),
        ({"status": "unsupported", "reason": "old format"}, "must have the keys"),
    ],
)
def test_a_malformed_entry_is_refused(entry: dict[str, str], says: str) -> None:
    full = {"case": "f/a", "cause": "c", "kind": "harness", "source": "s", **entry}
    with pytest.raises(ExpectationError, match=says):
        decode_expectations({"implementation": "x", "version": "1", "expectations": [full]})


def test_an_entry_of_a_family_the_run_did_not_run_is_not_stale() -> None:
    file = write_expectations(
        "x", "1", [record("a/x", "unsupported"), record("b/y", "unsupported")], explain_all
    )
    verdict = judge(file, [record("a/x", "unsupported")])
    assert verdict.ok
    assert [entry.case for entry in judge(file, [record("b/z", "passed")]).unused] == ["b/y"]


def explain_all(case: Any) -> tuple[str, str, str]:
    return "c", "harness", "s"
