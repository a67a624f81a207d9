"""What users meet first with python -m conformance (issue 13): no false greens, no silent
hours, no tracebacks, a partial report when interrupted."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from xml.etree import ElementTree

import pytest

from conformance.__main__ import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_UNREACHABLE, EXIT_USAGE, main
from reference.server import ReferenceSubject
from spec.log.json import JsonValue

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = "reference.server:ReferenceSubject"
HANGS_AFTER_HELLO = (
    "import sys, json\n"
    "line = sys.stdin.readline()\n"
    "rid = json.loads(line)['rid']\n"
    "hello = {'protocol': 2, 'name': 'hangs', 'version': '1', 'capabilities': ['core', 'pure']}\n"
    "print(json.dumps({'rid': rid, 'ok': True, 'result': hello}), flush=True)\n"
    "import time; time.sleep(600)\n"
)


def conformance(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conformance", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_cli_exits_0_on_the_reference_and_writes_junit_xml(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    completed = conformance(
        "--subject", REFERENCE, "--junit", str(report), "--exhaustive-depth", "4", timeout=900
    )  # the ci profile's depth 5 is tests/test_mutation_score.py's; here the certificate says 4
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert ", profile ci, exhaustive depth 4" in completed.stdout
    assert "total" in completed.stdout
    suites = ElementTree.parse(report).getroot().findall("testsuite")
    assert {suite.get("name") for suite in suites} >= {"surface", "fork", "seed", "pairing", "storage"}
    assert all(suite.get("failures") == "0" for suite in suites)


def test_a_vectors_folder_with_no_vectors_is_a_usage_error_not_a_green_run(tmp_path: Path) -> None:
    code = main(
        ["--subject", REFERENCE, "--vectors", str(tmp_path / "none"), "--junit", str(tmp_path / "r.xml")]
    )
    assert code == EXIT_USAGE


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not a readable JSON file"),
        ("[1, 2]", "a vector is a JSON object, this is a list"),
        ('{"name": "x", "family": "json"}', "either steps (a list) or a function"),
        (b"\xff\xfe{}", "not a readable JSON file"),
        (
            '{"name": "x", "family": ["pure"], "function": "spec.x"}',
            "a vector's family, when given, is a string",
        ),
    ],
)
def test_a_malformed_vector_file_is_refused_with_a_code_and_a_sentence_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes, why: str
) -> None:
    folder = tmp_path / "vectors" / "json"
    folder.mkdir(parents=True)
    bad = folder / "bad.json"
    bad.write_bytes(text if isinstance(text, bytes) else text.encode())
    code = main(
        ["--subject", REFERENCE, "--vectors", str(tmp_path / "vectors"), "--junit", str(tmp_path / "r.xml")]
    )
    error = capsys.readouterr().err
    assert code == EXIT_UNREACHABLE
    assert "[VECTOR_MALFORMED]" in error and str(bad) in error and why in error


def raising_factory() -> object:
    raise RuntimeError("no database here")


class RaisesOnCreate(ReferenceSubject):
    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        if request.get("op") == "create":
            raise RuntimeError("create blew up")
        return super().handle(request)


def test_a_subject_factory_that_raises_is_a_code_and_a_sentence_with_exit_3(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["--subject", f"{__name__}:raising_factory", "--junit", str(tmp_path / "r.xml")])
    error = capsys.readouterr().err
    assert code == EXIT_UNREACHABLE
    assert "[SUBJECT_NOT_STARTED]" in error and "no database here" in error


def test_a_handle_that_raises_mid_run_is_reported_with_the_request(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    argv = [
        "--subject",
        f"{__name__}:RaisesOnCreate",
        "--families",
        "json",
        "--junit",
        str(tmp_path / "r.xml"),
    ]
    assert main([*argv, "--json", str(report)]) == EXIT_FAILED
    cases = json.loads(report.read_text())["cases"]
    failed = [case for case in cases if case["outcome"] == "error"]  # create is every case's setup
    assert failed and all("create blew up" in case["detail"] for case in failed)
    assert all('request: {"id": "s", "op": "create"}' in case["detail"] for case in failed)


def test_an_unknown_family_is_a_usage_error_that_names_the_choices(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--subject", REFERENCE, "--families", "surfce"]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "unknown families surfce" in error and "surface" in error and "machine" in error


def test_an_empty_stdio_command_is_a_usage_error_not_a_traceback() -> None:
    run = conformance("--stdio", "")
    assert run.returncode == EXIT_USAGE and "Traceback" not in run.stderr
    assert "--stdio needs a command" in run.stderr


def test_a_junit_path_in_a_missing_folder_is_refused_before_the_run(tmp_path: Path) -> None:
    run = conformance("--subject", REFERENCE, "--junit", str(tmp_path / "missing" / "r.xml"))
    assert run.returncode == EXIT_USAGE and "does not exist" in run.stderr and "Traceback" not in run.stderr


def test_a_subject_that_hangs_after_hello_ends_the_run_in_under_a_minute_with_a_clear_verdict(
    tmp_path: Path,
) -> None:
    began = time.monotonic()
    report = tmp_path / "r.json"
    run = conformance(
        "--stdio",
        f"{sys.executable} -c {shlex.quote(HANGS_AFTER_HELLO)}",
        "--timeout",
        "2",
        "--families",
        "pairing",
        "tokens",
        "--json",
        str(report),
        "--junit",
        str(tmp_path / "r.xml"),
    )
    assert time.monotonic() - began < 60
    assert run.returncode == EXIT_FAILED
    cases = json.loads(report.read_text())["cases"]
    assert cases[0]["outcome"] == "failed" and "declared dead" in cases[0]["detail"]
    assert len(cases) > 10 and {case["outcome"] for case in cases[1:]} == {"not run"}


def test_nothing_passed_is_not_a_green_run(tmp_path: Path) -> None:
    code = main(
        [
            "--subject",
            "conformance.oracle:SpecOracle",
            "--families",
            "checker",
            "--junit",
            str(tmp_path / "r.xml"),
        ]
    )
    assert code == 0  # the oracle is the spec: everything it runs passes
    class_path = "tests.test_conformance_cli:NoPure"
    assert (
        main(["--subject", class_path, "--families", "checker", "--junit", str(tmp_path / "r.xml")])
        == EXIT_FAILED
    )


class NoPure:
    """A subject that offers only the core ops."""

    def handle(self, request: dict[str, object]) -> dict[str, object]:
        if request.get("op") == "hello":
            return {
                "rid": request["rid"],
                "ok": True,
                "result": {"protocol": 2, "name": "core", "capabilities": ["core"]},
            }
        return {"rid": request["rid"], "ok": False, "error": {"code": "UNSUPPORTED_OP", "message": "no"}}


@pytest.mark.skipif(os.name != "posix", reason="SIGINT as a terminal sends it")
def test_an_interrupted_run_writes_the_partial_report_and_says_so(tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "conformance",
            "--subject",
            REFERENCE,
            "--families",
            "machine",
            "--junit",
            str(report),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("subject:")  # hello answered: the run is under way
    time.sleep(1)  # let the machine start; the interrupt must land inside the run
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == EXIT_INTERRUPTED, out + err
    assert "interrupted" in err and report.is_file()


def test_a_replay_token_that_is_not_a_recording_is_a_usage_error_before_the_subject_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--subject", REFERENCE, "--replay", "not-a-recording"]) == EXIT_USAGE
    assert "--replay: not a recording" in capsys.readouterr().err
