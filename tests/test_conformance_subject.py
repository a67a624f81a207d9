"""The two transports, the reference server's protocol handling, and the run report."""

from __future__ import annotations

import shlex
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest

from conformance.matching import compare, first_difference
from conformance.report import (
    CaseResult,
    build_certificate,
    format_certificate,
    format_table,
    tally,
    write_junit,
)
from conformance.subject import (
    InProcessSubject,
    Response,
    StdioSubject,
    SubjectDead,
    SubjectError,
    load_subject,
)
from reference.server import ReferenceSubject
from spec.format.json_text import decode_json_text
from spec.log.json import JsonValue

PY = sys.executable


def python_subject(code: str, timeout: float = 10) -> StdioSubject:
    return StdioSubject(f"{PY} -c {code!r}", timeout=timeout)


# --- stdio ---------------------------------------------------------------------------------------


def test_a_stdio_subject_answers_in_order_with_its_request_ids() -> None:
    subject = StdioSubject(f"{PY} -m reference.server")
    try:
        assert subject.request("create", id="s").ok
        answer = subject.request("append", id="s", type="", data={})
        assert (answer.ok, answer.error_code) == (False, "EVENT_TYPE_INVALID")
        answer = subject.request("state", id="s")
        assert isinstance(answer.result, dict) and answer.result["seq"] == 0
    finally:
        subject.close()


def test_a_subject_that_exits_is_reported_with_its_exit_status_and_stderr() -> None:
    subject = python_subject("import sys; sys.stdin.readline(); print('dying', file=sys.stderr); sys.exit(3)")
    with pytest.raises(SubjectError, match=r"exit status 3[\s\S]*dying"):
        subject.request("hello")
    subject.close()


def test_a_subject_that_does_not_answer_in_time_is_declared_dead_once() -> None:
    subject = python_subject("import time; time.sleep(60)", timeout=0.5)
    with pytest.raises(SubjectDead, match=r"no answer to .hello. within 0\.5s"):
        subject.request("hello")
    with pytest.raises(SubjectDead):  # at once: a hung subject costs one timeout, not one per case
        subject.request("state", id="s")
    assert subject.dead is not None
    subject.close()


def test_a_subject_is_started_again_after_it_died() -> None:
    # It answers one request, then dies while reading the next: deterministic, whatever the timing.
    code = (
        "import sys, json; line = sys.stdin.readline(); "
        "print(json.dumps({'rid': json.loads(line)['rid'], 'ok': True, 'result': 1}), flush=True); "
        "sys.stdin.readline(); sys.exit(0)"
    )
    subject = python_subject(code)
    assert subject.request("hello").result == 1
    with pytest.raises(SubjectError):
        subject.request("hello")
    assert subject.request("hello").result == 1
    subject.close()


def test_a_stray_line_on_stdout_is_skipped_with_one_warning_to_log_on_stderr() -> None:
    code = (
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    rid = json.loads(line)['rid']\n"
        "    print('debug: got', rid, flush=True)\n"
        "    print(json.dumps({'rid': rid, 'ok': True, 'result': rid}), flush=True)\n"
    )
    warnings: list[str] = []
    subject = StdioSubject(f"{sys.executable} -c {shlex.quote(code)}", timeout=10, warn=warnings.append)
    assert [subject.request("hello").result for _ in range(3)] == [1, 2, 3]
    assert len(warnings) == 1 and "stderr" in warnings[0]
    assert subject.stray_lines[0] == "debug: got 1"
    subject.close()


def test_a_subject_that_only_prints_noise_and_exits_is_reported_as_exited() -> None:
    subject = python_subject("import sys; sys.stdin.readline(); print('hello there', flush=True)")
    with pytest.raises(SubjectError, match="exited while answering"):
        subject.request("hello")
    subject.close()


def test_an_answer_to_an_earlier_request_is_skipped() -> None:
    code = (
        "import sys, json\n"
        "for line in sys.stdin:\n"
        "    rid = json.loads(line)['rid']\n"
        "    print(json.dumps({'rid': rid - 1, 'ok': True, 'result': 'late'}), flush=True)\n"
        "    print(json.dumps({'rid': rid, 'ok': True, 'result': 'now'}), flush=True)\n"
    )
    subject = StdioSubject(f"{sys.executable} -c {shlex.quote(code)}", timeout=10)
    assert subject.request("hello").result == "now"
    subject.close()


def test_a_pipeline_sends_every_request_before_it_reads_an_answer_then_reads_them_in_order() -> None:
    """The subject answers only once it holds all three lines: waiting for each answer before
    sending the next request would time out."""
    code = (
        "import sys, json\n"
        "lines = [json.loads(sys.stdin.readline()) for _ in range(3)]\n"
        "for request in lines:\n"
        "    print(json.dumps({'rid': request['rid'], 'ok': True, 'result': request['op']}), flush=True)\n"
        "for line in sys.stdin:\n"
        "    print(json.dumps({'rid': json.loads(line)['rid'], 'ok': True, 'result': 'one'}), flush=True)\n"
    )
    subject = StdioSubject(f"{sys.executable} -c {shlex.quote(code)}", timeout=5)
    try:
        answers = subject.pipeline([("a", {}), ("b", {"x": 1}), ("c", {})])
        assert [answer.result for answer in answers] == ["a", "b", "c"]
        assert subject.request("d").result == "one"  # the request ids go on after the pipeline's
    finally:
        subject.close()


def test_a_command_that_cannot_start_is_reported() -> None:
    with pytest.raises(SubjectError, match="could not start"):
        StdioSubject("/no/such/program").request("hello")


# --- in process ----------------------------------------------------------------------------------


class Echo:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        self.seen.append(request)
        return {"rid": request["rid"], "ok": True, "result": request}


def test_an_in_process_subject_sees_plain_json_and_absent_keys_stay_absent() -> None:
    echo = Echo()
    subject = InProcessSubject(echo)
    result = subject.request("append", id="s", type="x", data={"a": (1, 2)})  # type: ignore[dict-item]
    assert result.result == {"rid": 1, "op": "append", "id": "s", "type": "x", "data": {"a": [1, 2]}}
    assert "surfaceOp" not in echo.seen[0]


def test_an_in_process_subject_that_raises_breaks_the_protocol() -> None:
    class Raises:
        def handle(self, request: dict[str, Any]) -> dict[str, Any]:
            raise RuntimeError("boom")

    with pytest.raises(SubjectError, match="boom"):
        InProcessSubject(Raises()).request("hello")


def test_an_in_process_subject_that_hangs_is_timed_out_and_declared_dead() -> None:
    release = threading.Event()

    class Hangs:
        def handle(self, request: dict[str, Any]) -> dict[str, Any]:
            release.wait(30)
            return {"rid": request["rid"], "ok": True, "result": None}

    subject = InProcessSubject(Hangs(), timeout=0.2)
    try:
        with pytest.raises(SubjectDead, match=r"within 0\.2s"):
            subject.request("hello")
        with pytest.raises(SubjectDead):
            subject.request("hello")
    finally:
        release.set()


def test_a_hung_in_process_subject_is_timed_out_on_any_thread_even_if_it_catches_exceptions() -> None:
    """On the main thread a timer interrupts the call (and a subject catching ``Exception`` does not
    swallow it); on another thread the call runs on a worker the caller stops waiting for."""
    release = threading.Event()

    class HangsAndCatches:
        def handle(self, request: dict[str, Any]) -> dict[str, Any]:
            try:
                release.wait(30)
            except Exception:
                pass
            return {"rid": request["rid"], "ok": True, "result": None}

    outcomes: list[str] = []

    def hello_once() -> None:
        subject = InProcessSubject(HangsAndCatches(), timeout=0.2)
        try:
            subject.request("hello")
        except SubjectDead as dead:
            outcomes.append(str(dead))

    try:
        hello_once()
        elsewhere = threading.Thread(target=hello_once)
        elsewhere.start()
        elsewhere.join(10)
    finally:
        release.set()
    assert len(outcomes) == 2 and all("within 0.2s" in outcome for outcome in outcomes)
    assert InProcessSubject(ReferenceSubject(), timeout=5).request("hello").ok  # an answer in time


def test_an_answer_with_the_wrong_request_id_breaks_the_protocol() -> None:
    class Wrong:
        def handle(self, request: dict[str, Any]) -> dict[str, Any]:
            return {"rid": 99, "ok": True, "result": None}

    with pytest.raises(SubjectError, match="rid"):
        InProcessSubject(Wrong()).request("hello")


def test_load_subject_calls_the_named_factory() -> None:
    subject = load_subject("reference.server:ReferenceSubject")
    assert isinstance(subject.target, ReferenceSubject)
    with pytest.raises(ValueError):
        load_subject("reference.server")


# --- the reference server ------------------------------------------------------------------------


def handle(subject: ReferenceSubject, **request: Any) -> dict[str, Any]:
    return subject.handle({"rid": 1, **request})


def test_the_server_answers_an_unknown_op_as_unsupported() -> None:
    assert handle(ReferenceSubject(), op="teleport")["error"]["code"] == "UNSUPPORTED_OP"


def test_the_server_answers_an_unknown_pure_function_as_unsupported() -> None:
    assert (
        handle(ReferenceSubject(), op="call", function="spec.nothing", input={})["error"]["code"]
        == "UNSUPPORTED_OP"
    )


def test_the_server_answers_a_session_id_that_is_not_a_string_as_a_bad_request() -> None:
    assert handle(ReferenceSubject(), op="state", id=5)["error"]["code"] == "BAD_REQUEST"


def test_the_server_refuses_crash_ops_without_file_storage() -> None:
    assert handle(ReferenceSubject(), op="crash")["error"]["code"] == "BAD_REQUEST"


def test_an_unexpected_exception_is_answered_internal() -> None:
    class Buggy(ReferenceSubject):
        def op_state(self, args: Any) -> Any:
            raise ZeroDivisionError("oops")

    answer = handle(Buggy(), op="state", id="s")
    assert answer["error"]["code"] == "INTERNAL" and "ZeroDivisionError" in answer["error"]["message"]


def test_an_armed_crash_stops_the_request_in_flight_and_crash_restarts_the_store() -> None:
    subject = ReferenceSubject()
    handle(subject, op="reset", storage="file")
    handle(subject, op="create", id="s")
    assert handle(subject, op="flush", id="s")["ok"]
    handle(subject, op="append", id="s", type="turn/start", data={"turn": 1})
    handle(subject, op="arm_crash", after=0)
    assert handle(subject, op="flush", id="s")["error"]["code"] == "CRASHED"
    assert handle(subject, op="crash")["ok"]
    assert handle(subject, op="read", id="s")["result"]["events"] == []
    assert handle(subject, op="resume", id="s")["result"]["seq"] == 1


def test_ops_counts_mutating_filesystem_calls_and_unsynced_lists_pending_bytes() -> None:
    subject = ReferenceSubject()
    handle(subject, op="reset", storage="file")
    before = handle(subject, op="ops")["result"]
    handle(subject, op="create", id="s")
    handle(subject, op="flush", id="s")
    assert handle(subject, op="ops")["result"] > before
    assert handle(subject, op="unsynced")["result"] == []


def test_the_stdio_loop_answers_a_line_that_is_not_json_as_a_bad_request() -> None:
    from reference.server import serve

    lines = iter(['{"rid": 1, "op": "hello"}\n', "nonsense\n", "[1]\n", ""])
    written: list[str] = []
    serve(ReferenceSubject(), lambda: next(lines), written.append)
    assert [('"ok":true' in line, "BAD_REQUEST" in line) for line in written] == [
        (True, False),
        (False, True),
        (False, True),
    ]


class _Raising(ReferenceSubject):
    """Handling ``boom`` raises; ``inf`` answers a value no JSON text holds."""

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        if request.get("op") == "boom":
            raise RuntimeError("handling failed")
        if request.get("op") == "inf":
            return {"rid": request.get("rid"), "ok": True, "result": float("inf")}
        return super().handle(request)


def test_the_stdio_loop_answers_a_raising_request_as_internal_with_its_rid_and_keeps_serving() -> None:
    from reference.server import serve

    lines = iter(
        ['{"rid": 7, "op": "boom"}\n', '{"rid": 8, "op": "inf"}\n', '{"rid": 9, "op": "hello"}\n', ""]
    )
    written: list[str] = []
    serve(_Raising(), lambda: next(lines), written.append)
    answers: list[Any] = [decode_json_text(line) for line in written]
    assert [(a["rid"], a["ok"], a.get("error", {}).get("code")) for a in answers] == [
        (7, False, "INTERNAL"),
        (8, False, "INTERNAL"),
        (9, True, None),
    ]
    assert "handling failed" in written[0]


# --- comparing and reporting ---------------------------------------------------------------------


def test_results_compare_as_json_regardless_of_key_order_and_number_spelling() -> None:
    assert compare({"ok": True, "result": {"a": 1, "b": [1.0]}}, Response(True, {"b": [1], "a": 1.0})) is None


def test_a_different_result_names_the_first_path_where_it_differs() -> None:
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "$.a[1].b: expected 2, got 3"
    assert first_difference({"a": 1}, {"a": 1, "c": 2}) == "$.c: unexpected 2"
    assert first_difference(True, 1) == "$: expected true, got 1"


def test_an_error_code_is_compared_and_its_message_is_not() -> None:
    assert compare({"ok": False, "code": "X"}, Response(False, None, "X", "anything")) is None
    assert compare({"ok": False, "code": "X"}, Response(False, None, "Y", "m")) is not None
    assert compare({"ok": False, "code": "X"}, Response(True, None)) is not None


def test_the_table_counts_the_four_outcomes_of_each_family_and_lists_failures(tmp_path: Path) -> None:
    results = [
        CaseResult("surface", "a", "passed"),
        CaseResult("surface", "b", "failed", "step 3: boom"),
        CaseResult("fork", "c", "unsupported", "the subject does not declare storage"),
        CaseResult("fork", "d", "not run", "not reached: the subject is dead"),
    ]
    assert [(t.family, t.passed, t.failed, t.unsupported, t.not_run) for t in tally(results)] == [
        ("surface", 1, 1, 0, 0),
        ("fork", 0, 0, 1, 1),
    ]
    table = format_table(results)
    assert "[surface] b" in table and "step 3: boom" in table
    write_junit(results, tmp_path / "r.xml")
    root = ElementTree.parse(tmp_path / "r.xml").getroot()
    surface = root.find("testsuite[@name='surface']")
    assert surface is not None and surface.get("failures") == "1" and surface.get("tests") == "2"
    skipped = root.find(".//testcase[@name='fork/c']/skipped")
    assert skipped is not None and skipped.get("message", "").startswith("unsupported:")
    not_run = root.find(".//testcase[@name='fork/d']/skipped")
    assert not_run is not None and not_run.get("message", "").startswith("not run:")


def test_the_certificate_names_what_was_certified_and_what_was_not() -> None:
    results = [
        CaseResult("surface", "a", "passed", rule="spec.log.surface.plan_replace"),
        CaseResult("fork", "b", "passed", rule="spec.lineage.fork.plan_fork_seed"),
        CaseResult("fork", "c", "not run", "not reached", rule="spec.lineage.fork.plan_fork_seed"),
    ]
    every = [
        "spec.log.surface.plan_replace",
        "spec.lineage.fork.plan_fork_seed",
        "spec.log.surface.fold_surface",
    ]
    certificate = build_certificate(results, every, {"name": "demo", "version": "1.0"}, "ci")
    text = format_certificate(certificate)
    assert "certificate for demo 1.0" in text
    assert "certified rules: 1 of 3" in text
    assert "0 failed, 0 error, 0 unsupported, 2 not run" in text
    assert certificate.rules["spec.lineage.fork.plan_fork_seed"][0] == "not run"
    assert certificate.rules["spec.log.surface.fold_surface"] == ("not run", ())


def test_a_torn_tail_after_a_crash_mid_flush_is_repaired_on_resume() -> None:
    subject = ReferenceSubject()
    handle(subject, op="reset", storage="file")
    handle(subject, op="create", id="w", meta={"cwd": "/work/project"})
    handle(subject, op="append", id="w", type="turn/start", data={"turn": 1})
    handle(subject, op="flush", id="w")
    handle(subject, op="append", id="w", type="custom/x", data={"text": "x" * 200})
    handle(subject, op="arm_crash", after=1)  # the append lands, its fsync never happens
    assert handle(subject, op="flush", id="w")["error"]["code"] == "CRASHED"
    [torn] = handle(subject, op="unsynced")["result"]
    handle(subject, op="crash", keep={"path": torn["path"], "bytes": 1})
    resumed = handle(subject, op="resume", id="w")
    assert resumed["ok"], resumed
    assert [event["type"] for event in resumed["result"]["events"]] == [
        "turn/start",
        "turn/end",
        "session/end-seed",
    ]
