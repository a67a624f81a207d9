"""The reference implementation passes the conformance suite, in process and through its stdio
server, and the command line reports, writes JUnit XML and exits with the right status."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar
from xml.etree import ElementTree

import pytest

from conformance.__main__ import main
from conformance.families import STATEFUL_FAMILIES
from conformance.report import CaseResult, Options
from conformance.runner import hello, run_suite, run_vectors
from conformance.subject import InProcessSubject, StdioSubject, Subject, SubjectError
from reference.server import ReferenceSubject

ROOT = Path(__file__).resolve().parent.parent


class AnswersOkToEverything:
    """A trivially broken subject: every request succeeds with null."""

    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if request["op"] == "hello":
            return {
                "rid": request["rid"],
                "ok": True,
                "result": {"protocol": 1, "name": "broken", "capabilities": ["core"]},
            }
        return {"rid": request["rid"], "ok": True, "result": None}


class SpeaksAnotherProtocol(AnswersOkToEverything):
    """A subject whose hello names a protocol newer than the suite's."""

    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        response = super().handle(request)
        if request["op"] == "hello":
            response["result"] = {**response["result"], "protocol": 3}
        return response


def test_a_subject_speaking_a_protocol_the_suite_does_not_is_refused_at_hello() -> None:
    assert hello(InProcessSubject(AnswersOkToEverything())).protocol == 1
    with pytest.raises(SubjectError, match="speaks protocol 3"):
        hello(InProcessSubject(SpeaksAnotherProtocol()))


def failures(results: list[CaseResult]) -> list[str]:
    return [f"[{r.family}] {r.name}: {r.detail}" for r in results if r.outcome in ("failed", "error")]


def all_capabilities() -> Options:
    return Options(capabilities=frozenset(ReferenceSubject.capabilities))


def test_the_reference_passes_every_vector_in_process() -> None:
    results = run_vectors(InProcessSubject(ReferenceSubject()), all_capabilities())
    assert failures(results) == []
    assert [r.name for r in results if r.outcome == "skipped"] == []


def test_the_reference_passes_every_vector_through_the_stdio_server() -> None:
    subject = StdioSubject(f"{sys.executable} -m reference.server", timeout=60)
    try:
        results = run_vectors(subject, all_capabilities())
    finally:
        subject.close()
    assert failures(results) == []
    assert len(results) > 300


def test_the_vectors_that_need_capabilities_the_subject_lacks_are_unsupported_not_passed() -> None:
    class CoreOnly(ReferenceSubject):
        capabilities = ("core",)

    results = run_suite(InProcessSubject(CoreOnly()), Options(families=frozenset({"storage", "pairing"})))
    unsupported = [r for r in results if r.outcome == "unsupported"]
    assert unsupported and all(r.detail.startswith("the subject does not declare") for r in unsupported)
    assert {r.family for r in unsupported} == {"storage", "pairing"}
    assert failures(results) == []


def test_a_function_the_subject_answers_unsupported_op_is_unsupported_not_failed() -> None:
    class NoPairing(ReferenceSubject):
        pure_functions: ClassVar[Mapping[str, Any]] = {
            k: v for k, v in ReferenceSubject.pure_functions.items() if "pairing" not in k
        }

    results = run_suite(InProcessSubject(NoPairing()), Options(families=frozenset({"pairing"})))
    assert results and {r.outcome for r in results} == {"unsupported"}
    assert all("UNSUPPORTED_OP" in r.detail for r in results)


def test_after_a_subject_goes_dead_every_later_case_is_not_run() -> None:
    class HangsOnCall(ReferenceSubject):
        def op_call(self, args: Any) -> Any:
            threading.Event().wait(30)

    subject = InProcessSubject(HangsOnCall(), timeout=0.3)
    results = run_suite(subject, Options(families=frozenset({"pairing", "machine"})))
    assert results[0].outcome == "failed" and "declared dead" in results[0].detail
    assert results[1:] and {r.outcome for r in results[1:]} == {"not run"}
    assert all("declared dead" in r.detail for r in results[1:])


def test_a_family_whose_check_raises_fails_with_its_traceback_and_the_next_family_still_runs() -> None:
    def broken(subject: Subject, options: Options) -> list[CaseResult]:
        raise RuntimeError("the check itself is broken")

    def fine(subject: Subject, options: Options) -> list[CaseResult]:
        return [CaseResult("fine", "it ran", "passed")]

    checks = {"broken": broken, "fine": fine}
    results = run_suite(InProcessSubject(ReferenceSubject()), Options(families=frozenset(checks)), checks)
    assert [(r.family, r.outcome) for r in results] == [("broken", "failed"), ("fine", "passed")]
    assert "RuntimeError: the check itself is broken" in results[0].detail


def test_a_run_has_every_stateful_family_of_the_table_after_the_vectors() -> None:
    results = run_suite(
        InProcessSubject(ReferenceSubject()), Options(families=frozenset({"tokens", "machine"}))
    )
    assert list(dict.fromkeys(r.family for r in results)) == ["tokens", "machine"]
    assert list(STATEFUL_FAMILIES) == ["pure-drt", "files", "machine", "exhaustive", "crash", "trace"]


def test_the_cli_exits_1_on_a_trivially_broken_subject(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.xml"
    status = main(
        [
            "--subject",
            f"{__name__}:AnswersOkToEverything",
            "--junit",
            str(report),
            "--families",
            "surface",
            "fork",
        ]
    )
    assert status == 1
    out = capsys.readouterr().out
    assert "failures:" in out or "errors (a setup step failed):" in out  # its clock answer is wrong too
    root = ElementTree.parse(report).getroot()
    assert root.findall(".//testcase/failure") + root.findall(".//testcase/error")


def test_the_cli_refuses_a_subject_it_cannot_load(tmp_path: Path) -> None:
    assert main(["--subject", "no_such_module_anywhere:factory", "--junit", str(tmp_path / "r.xml")]) == 2


def test_the_cli_runs_only_the_families_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.xml"
    subject = ["--subject", "reference.server:ReferenceSubject"]
    assert main([*subject, "--junit", str(report), "--families", "tokens"]) == 0
    names = {suite.get("name") for suite in ElementTree.parse(report).getroot().findall("testsuite")}
    assert names == {"tokens"}
