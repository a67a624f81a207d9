"""What a certificate may claim (issue 21, SPEC-DECISIONS D11): statuses are earned, a run the
deadline cuts certifies nothing it did not finish, a failed setup step is an error and not a
failure, and the certificate's denominator is every rule of the spec."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Final
from xml.etree import ElementTree

from certificate_subjects import RefusesFlush, ThirdSubject

from conformance.__main__ import EXIT_FAILED, EXIT_OK, main
from conformance.families import FAMILY_RULES
from conformance.files.writing import check_files
from conformance.report import Options, build_certificate, to_junit
from conformance.runner import every_rule, hello, load_vectors, run_suite, run_vector, step_under_test
from conformance.subject import InProcessSubject
from conformance.targets import Target
from reference.server import ReferenceSubject
from spec.checks.log import RULES

REFERENCE = "reference.server:ReferenceSubject"
STATEFUL = ("machine", "exhaustive")


def certificate_of(directory: Path) -> dict[str, Any]:
    document = json.loads((directory / "certificate.json").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def test_a_subject_that_implements_nothing_is_certified_for_nothing(tmp_path: Path) -> None:
    code = main(
        [
            *("--subject", "certificate_subjects:NothingSubject", "--junit", str(tmp_path / "j.xml")),
            *("--certificate", str(tmp_path), "--families", *STATEFUL, "crash", "files", "session", "fork"),
        ]
    )
    assert code == EXIT_FAILED
    document = certificate_of(tmp_path)
    assert document["counts"]["certified"] == 0
    assert len(document["rules"]) == len(every_rule())  # the fixed denominator
    outcomes = {case["key"]: case["outcome"] for rule in document["rules"] for case in rule["cases"]}
    assert outcomes["machine/agrees"] == "unsupported"
    assert outcomes["exhaustive/agrees"] == "unsupported"
    assert set(outcomes.values()) <= {"unsupported", "not run"}


def test_the_certificate_states_the_depth_its_exhaustive_search_ran_at(tmp_path: Path) -> None:
    """--exhaustive-depth N replaces the profile's depth, and the certificate says which it was
    (a certificate proves exactly what it says); a run without that family states none."""
    for depth, families in ((3, ("exhaustive",)), (None, ("session",))):
        folder = tmp_path / str(depth)
        folder.mkdir()
        flags = ("--exhaustive-depth", str(depth)) if depth is not None else ()
        argv = ["--subject", REFERENCE, "--families", *families, *flags, "--certificate", str(folder)]
        assert main([*argv, "--junit", str(folder / "j.xml"), "--json", str(folder / "run.json")]) == EXIT_OK
        assert certificate_of(folder)["exhaustiveDepth"] == depth
        summary = (folder / "certificate.md").read_text(encoding="utf-8")
        assert ("exhaustive depth 3" in summary) == (depth == 3)
    cases = json.loads((tmp_path / "3" / "run.json").read_text(encoding="utf-8"))["cases"]
    assert cases[0]["name"].startswith("every sequence of up to 3 ops")
    assert main(["--subject", REFERENCE, "--families", "exhaustive", "--exhaustive-depth", "0"]) == 2


def test_a_subject_that_supports_a_third_of_the_ops_passes_no_stateful_family() -> None:
    subject = InProcessSubject(ThirdSubject())
    said = hello(subject)
    options = Options(families=frozenset({*STATEFUL, "session"}))
    results = run_suite(subject, options, said=said)
    by_key = {result.key: result for result in results}
    for family in STATEFUL:
        main_case = by_key[f"{family}/agrees"]
        assert main_case.outcome == "unsupported", main_case.detail
        assert "refused" in main_case.detail and "driven" in main_case.detail
    assert not [r for r in results if r.outcome in ("failed", "error")]
    certificate = build_certificate(results, every_rule(), {"name": "third"}, "ci", FAMILY_RULES)
    certified = certificate.certified()
    assert not [rule for rule in certified if rule in FAMILY_RULES["machine"] + FAMILY_RULES["exhaustive"]]
    assert len(certified) < len(certificate.rules) // 3


def test_a_deadline_cuts_the_run_inside_its_families_and_certifies_nothing_it_cut(tmp_path: Path) -> None:
    began = time.monotonic()
    code = main(
        [
            *("--subject", REFERENCE, "--deadline", "3", "--junit", str(tmp_path / "j.xml")),
            *("--certificate", str(tmp_path)),
        ]
    )
    assert time.monotonic() - began < 3 + 5
    assert code == EXIT_FAILED
    document = certificate_of(tmp_path)
    assert document["cut"]
    status = {rule["rule"]: rule["status"] for rule in document["rules"]}
    for family, rules in FAMILY_RULES.items():
        if family != "trace":  # opt-in: never selected here
            assert all(status[rule] != "certified" for rule in rules), family


def _fork_vector() -> dict[str, Any]:
    """A fork vector whose step under test expects an error, after setup and before a read."""
    for vector in load_vectors():
        steps = vector.get("steps", [])
        if vector["family"] == "fork" and steps and steps[1]["request"]["op"] == "clock":
            tested = step_under_test(steps)
            if tested >= 2 and steps[tested]["expect"]["ok"] is False and tested < len(steps) - 1:
                return vector
    raise AssertionError("no fork vector with setup, an expected error and a read after it")


SETUP_VECTOR: Final = _fork_vector()
TESTED: Final = step_under_test(SETUP_VECTOR["steps"])


def _with_step(index: int, expect: dict[str, Any]) -> dict[str, Any]:
    steps = [dict(step) for step in SETUP_VECTOR["steps"]]
    steps[index] = {**steps[index], "expect": expect}
    return {**SETUP_VECTOR, "steps": steps}


def test_a_failed_setup_step_is_an_error_and_a_failed_step_under_test_a_failure() -> None:
    subject = InProcessSubject(ReferenceSubject())
    capabilities = frozenset({"core"})
    assert run_vector(subject, SETUP_VECTOR, capabilities).outcome == "passed"
    setup_broken = run_vector(subject, _with_step(1, {"ok": True, "result": 999}), capabilities)
    assert setup_broken.outcome == "error", setup_broken.detail
    assert "setup failed: step 1 (clock)" in setup_broken.detail
    tested_broken = run_vector(subject, _with_step(TESTED, {"ok": False, "code": "NOT_A_CODE"}), capabilities)
    assert tested_broken.outcome == "failed", tested_broken.detail
    after_broken = run_vector(
        subject, _with_step(TESTED + 1, {"ok": False, "code": "NOT_A_CODE"}), capabilities
    )
    assert after_broken.outcome == "failed", after_broken.detail
    junit = ElementTree.tostring(to_junit([setup_broken, tested_broken]).getroot(), encoding="unicode")
    assert junit.count("<error ") == 1 and junit.count("<failure ") == 1


def test_the_step_under_test_is_the_first_expected_error_else_the_last_step_that_is_not_a_read() -> None:
    steps = SETUP_VECTOR["steps"]
    first_error = next(n for n, step in enumerate(steps) if step["expect"]["ok"] is False)
    assert first_error >= 2 and step_under_test(steps) == first_error
    reads_after = [
        *steps[:first_error],
        steps[first_error - 1],
        {"request": {"op": "read"}, "expect": {"ok": True}},
    ]
    assert step_under_test(reads_after) == first_error


def test_list_names_the_cases_and_case_runs_only_the_matching_ones(tmp_path: Path, capsys: Any) -> None:
    assert main(["--list"]) == EXIT_OK
    listed = capsys.readouterr().out.split()
    assert "machine/*" in listed
    chosen = [key for key in listed if key.startswith("fork/")][:2]
    report = tmp_path / "run.json"
    code = main(
        [
            *("--subject", REFERENCE, "--case", chosen[0], "--case", chosen[1]),
            *("--junit", str(tmp_path / "j.xml"), "--json", str(report)),
        ]
    )
    assert code == EXIT_OK
    keys = [case["key"] for case in json.loads(report.read_text(encoding="utf-8"))["cases"]]
    assert keys == chosen
    assert (tmp_path / "run.certificate.json").is_file() and (tmp_path / "run.certificate.md").is_file()


def test_a_deadline_cuts_a_stateful_family_between_its_steps(tmp_path: Path) -> None:
    began = time.monotonic()
    code = main(
        [
            *("--subject", REFERENCE, "--deadline", "2", "--families", *STATEFUL),
            *("--junit", str(tmp_path / "j.xml"), "--certificate", str(tmp_path)),
        ]
    )
    assert time.monotonic() - began < 2 + 5
    assert code == EXIT_FAILED
    cut = certificate_of(tmp_path)["cut"]
    assert [line.split(":")[0] for line in cut] == ["machine/all", "exhaustive/all"], (
        tmp_path / "certificate.md"
    ).read_text()
    assert "after" in cut[0]  # cut inside the family, not before it


def test_a_files_workload_the_subject_refuses_is_unsupported_not_failed_or_passed() -> None:
    subject = InProcessSubject(RefusesFlush())
    said = hello(subject)
    results = check_files(subject, Options(capabilities=said.capabilities, target=said.target))
    assert results and {result.outcome for result in results} == {"unsupported"}
    assert all("UNSUPPORTED_OP for flush" in result.detail for result in results)


def test_a_format_0_target_is_handed_a_plain_log_with_its_header_line_in_format_0() -> None:
    """D11: the suite judges a subject by its target's rules. A log handed to decode_jsonl_log
    carries the suite's format 4 header line; a format 0 subject gets the same line in format 0,
    and the expected answer is the specification's own answer on the text it was handed."""
    spec = InProcessSubject(ReferenceSubject())
    format_0, format_4 = Target(0), Target()
    torn = [v for v in load_vectors() if v["name"].startswith("a last line without its newline")]
    assert len(torn) == 1
    function, given, expect = torn[0]["function"], torn[0]["input"], torn[0]["expect"]
    assert format_4.pure_case(function, given, expect) == (given, expect)
    handed: Any
    expected: Any
    handed, expected = format_0.pure_case(function, given, expect)
    assert '"version":0' in handed["text"] and "isSeeded" not in handed["text"].split("\n")[0]
    assert handed["text"].split("\n", 1)[1] == given["text"].split("\n", 1)[1]
    answer = spec.request("call", function=function, input=handed)
    assert answer.ok and answer.result == expected["result"]
    assert expected["result"]["truncateTo"] < expect["result"]["truncateTo"]
    # a header line the suite did not write canonically, and other functions, are handed as given
    spaced = {"text": given["text"].replace('"version":4', '"version": 4', 1)}
    assert format_0.call_input(function, spaced) == spaced
    assert format_0.call_input("spec.storage.encode_segment", given) == given


def test_a_format_0_target_is_handed_a_zstd_logs_frames_with_their_header_line_in_format_0() -> None:
    """D11, for a zstd log's decompressed frames (decode_compressed_log, place_compressed_log):
    the header line is rewritten across the frames that hold it, and the expected answer is the
    specification's own answer on the frames handed over (the cut, a frame's file offset, stays;
    each place's byte moves)."""
    spec = InProcessSubject(ReferenceSubject())
    format_0 = Target(0)
    framed = [
        v
        for v in load_vectors()
        if v.get("function") in {"spec.framing.decode_compressed_log", "spec.framing.place_compressed_log"}
        and v["expect"]["ok"]
    ]
    assert len(framed) >= 20
    split_header = 0
    for vector in framed:
        function, given, expect = vector["function"], vector["input"], vector["expect"]
        handed: Any
        expected: Any
        handed, expected = format_0.pure_case(function, given, expect)
        texts = [
            frame["text"] for frame in [*handed["frames"], *([handed["torn"]] if handed["torn"] else [])]
        ]
        first = "".join(texts).split("\n", 1)[0]
        assert '"version":0' in first and "isSeeded" not in first, vector["name"]
        split_header += "\n" not in texts[0]
        assert [f["offset"] for f in handed["frames"]] == [f["offset"] for f in given["frames"]]
        answer = spec.request("call", function=function, input=handed)
        assert answer.ok and answer.result == expected["result"], vector["name"]
        if function.endswith("decode_compressed_log"):
            assert expected["result"]["truncateTo"] == expect["result"]["truncateTo"]
        else:
            moved = [p["byte"] for p in expected["result"]["places"]]
            assert moved and all(
                a < b for a, b in zip(moved, (p["byte"] for p in expect["result"]["places"]))
            )
    assert split_header >= 2  # frames cut inside the header line are rewritten too


class ChecksTurnOpening(ReferenceSubject):
    """The reference, claiming one checker rule of all: turn-open (PROTOCOL.md, ``checker-rule:<id>``)."""

    capabilities = ("core", "pure", "checker-rule:turn-open")


def test_a_subject_claiming_one_checker_rule_is_judged_on_the_vectors_whose_verdict_needs_only_it() -> None:
    """A checker vector needs the rules of the violations it expects and the rule its why explains;
    a log valid as a whole needs every rule. ``checker-rules`` claims every ``checker-rule:<id>``,
    and the other way round."""
    subject = InProcessSubject(ChecksTurnOpening())
    said = hello(subject)
    assert "checker-rules" not in said.capabilities
    checker = [vector for vector in load_vectors() if vector["family"] == "checker"]
    judged = {vector["name"]: run_vector(subject, vector, said.capabilities).outcome for vector in checker}
    needs_turn_open = {
        vector["name"]
        for vector in checker
        if set(vector["capabilities"]) == {"pure", "checker-rule:turn-open"}
    }
    assert needs_turn_open and all(judged[name] == "passed" for name in needs_turn_open)
    assert {outcome for name, outcome in judged.items() if name not in needs_turn_open} == {"unsupported"}
    assert judged["a well-formed log has no violations"] == "unsupported"
    assert judged["every problem is reported, not only the first"] == "unsupported"
    reference = hello(InProcessSubject(ReferenceSubject()))
    assert {"checker-rule:turn-open", "checker-rule:shadow-price"} <= reference.capabilities

    class ChecksEveryRule(ReferenceSubject):
        capabilities = ("core", "pure", *sorted(f"checker-rule:{rule}" for rule in RULES))

    assert "checker-rules" in hello(InProcessSubject(ChecksEveryRule())).capabilities
