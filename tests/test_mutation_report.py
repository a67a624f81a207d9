"""The mutation report (python -m conformance.mutation): each subject runs in a forked process of
its own, the table keeps the order the subjects were given in, a survivor is reported as such, and
a run whose process dies is counted, not lost."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from broken_subjects import AcceptsForkBoundaryPastTheEnd

from conformance.mutation import main, score_all, verdict_of
from conformance.report import Options
from reference.server import ReferenceSubject

FORK_ONLY = Options(families=frozenset({"fork"}))


class DiesOnFork(ReferenceSubject):
    """Ends its process at the first fork, as a port with a fatal bug might."""

    def handle(self, request: Any) -> Any:
        if isinstance(request, dict) and request.get("op") == "fork":
            os._exit(3)
        return super().handle(request)


def test_every_subject_gets_its_verdict_in_the_order_given() -> None:
    known, scores = score_all(
        [ReferenceSubject, AcceptsForkBoundaryPastTheEnd, DiesOnFork], ReferenceSubject, FORK_ONLY, jobs=2
    )
    assert known == []
    assert [score.subject for score in scores] == [
        "ReferenceSubject",
        "AcceptsForkBoundaryPastTheEnd",
        "DiesOnFork",
    ]
    assert [verdict_of(score) for score in scores] == [
        "SURVIVED",
        "caught",
        "caught, thinly covered",
    ]
    assert scores[1].first == "[fork] a boundary past the end of a log of one event is invalid"
    assert scores[2].failing == (("process", "the run ended without a result (exit code 3)"),)


def test_the_command_writes_the_table_and_fails_on_a_survivor(tmp_path: Path) -> None:
    table = tmp_path / "mutation.md"
    argv = ["--baseline", "reference.server:ReferenceSubject", "--families", "fork", "--markdown", str(table)]
    assert main(["--subjects", "tests.broken_subjects:AcceptsForkBoundaryPastTheEnd", *argv]) == 0
    assert "| AcceptsForkBoundaryPastTheEnd | INVALID_BOUNDARY | caught | 2 | fork |" in table.read_text()
    assert main(["--subjects", "reference.server:ReferenceSubject", *argv]) == 1
    assert "| ReferenceSubject |  | SURVIVED | 0 |" in table.read_text()
