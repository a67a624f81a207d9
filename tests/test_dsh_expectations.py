"""scripts/dsh_expectations.py explains DSH's deviations by rule, family and detail, never one
outcome by a cause of another; and the pieces of the suite it relies on: the --json run stays
writable when a detail quotes a lone surrogate, and the crash checks compare numbers as D5 does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.crash_rules import check_d3_1_header, check_d3_2_prefix
from conformance.expectations import load_expectations
from conformance.report import KINDS, CaseResult, encode_results
from scripts import dsh_expectations
from spec.log.json import JsonObject


def case(key: str, outcome: str, detail: str = "", rule: str = "") -> dict[str, str]:
    return {"key": key, "outcome": outcome, "detail": detail, "rule": rule}


def test_an_engine_op_a_release_has_no_package_for_is_explained_as_unsupported_in_any_family() -> None:
    for key in ("compaction/x", "projection/y", "machine/z"):
        cause = dsh_expectations.cause_of(case(key, "unsupported", "the subject does not declare compaction"))
        assert cause is not None and "publishes no compaction engine" in cause.reason, key


def test_a_failure_is_never_explained_by_a_cause_of_another_status() -> None:
    said = "got INTERNAL: the subject does not declare checker-rule:closers"
    entries, problems = dsh_expectations.explain([case("checker/x", "failed", said)])
    assert entries == [] and problems == ["checker/x ended failed, its causes say unsupported"]


def test_the_wire_unit_deviation_is_found_by_its_detail_in_a_stateful_family_too() -> None:
    detail = "snapshot: result differs at $.values.sessionDigest: unexpected {...}"
    for key in ("projection/snapshot-serves-the-wire-units-only", "machine/diverges-snapshot-x"):
        cause = dsh_expectations.cause_of(case(key, "failed", detail))
        assert cause is not None and "host-only" in cause.reason, key


def test_a_case_no_cause_explains_is_refused() -> None:
    _, problems = dsh_expectations.explain([case("session/new-thing", "failed", "surprise")])
    assert problems and problems[0].startswith("no cause explains session/new-thing")


def test_the_json_run_is_utf_8_and_keeps_a_lone_surrogate_as_an_escape() -> None:
    result = CaseResult("crash", "d3-2", "failed", 'text "con\ud800tents"', case_id="d3-2")
    text = encode_results([result], {"name": "x"})
    assert text.encode("utf-8") and "\\ud800" in text
    assert json.loads(text)["cases"][0]["detail"] == 'text "con\ud800tents"'


def test_the_crash_checks_read_an_integral_float_as_the_integer_it_is() -> None:
    appended: list[JsonObject] = [{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1.0}}]
    assert (
        check_d3_2_prefix([{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}], appended) == ()
    )
    assert check_d3_2_prefix([{"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 2}}], appended)
    header: JsonObject = {"version": 4, "id": "s", "createdAt": 7.0, "delegationDepth": 0, "isSeeded": False}
    assert check_d3_1_header(True, {**header, "createdAt": 7}, header, True) == ()
    assert check_d3_1_header(True, {**header, "createdAt": 8}, header, True)


def test_every_cause_has_a_kind_and_dsh_s_files_read_with_fingerprints() -> None:
    assert {cause.kind for cause in dsh_expectations.CAUSES} <= set(KINDS)
    for name in ("dsh-0.1.0-rc.8.json", "dsh-0.1.0-rc.8-kill.json"):
        file = load_expectations(dsh_expectations.ROOT / "conformance" / "expectations" / name)
        assert not [entry for entry in file.expectations if entry.todo], name
        failing = [entry for entry in file.expectations if entry.status in ("failed", "error")]
        assert failing and all(entry.fingerprint for entry in failing), name


def test_an_empty_session_never_published_is_one_deviation_wherever_it_is_met() -> None:
    keys = ("files/layout", "exhaustive/diverges-read-expected-ok-got-session-not-found")
    cases = [case(key, "failed", "session 'z': no log at x") for key in keys]
    entries, problems = dsh_expectations.explain(cases)
    assert not problems and {entry.cause for entry in entries} == {dsh_expectations.UNPUBLISHED}


def test_what_dsh_s_store_and_meter_cannot_be_asked_stays_unsupported_with_its_own_reason() -> None:
    jsonl = case(
        "json/x", "unsupported", "the subject answered UNSUPPORTED_OP for spec.framing.decode_jsonl_log"
    )
    price = case(
        "tokens/y", "unsupported", "the subject answered UNSUPPORTED_OP for spec.tokens.price_surface"
    )
    read, meter = dsh_expectations.cause_of(jsonl), dsh_expectations.cause_of(price)
    assert read is not None and "format 0" in read.reason and read.kind == "spec-version"
    assert meter is not None and "never a list of nodes" in meter.reason and meter.kind == "harness"
    for key in (
        "storage/a-plain-log-is-a-header-line-and-one-record-per-line",
        "pure-drt/spec-tokens-price-surface",
    ):
        assert dsh_expectations.cause_of(case(key, "failed", "got INTERNAL")) is None, key


def test_a_v0_record_dsh_s_scanner_drops_is_the_damaged_line_deviation() -> None:
    for key in ("storage/a-seq-gap-in-a-stored-log-is-corruption", "pure-drt/spec-legacy-upgrade-v0-records"):
        cause = dsh_expectations.cause_of(case(key, "failed", "expected CORRUPT_LOG, got success"))
        assert cause is not None and "torn tail" in cause.reason and cause.kind == "subject-bug", key


def test_a_placed_log_s_damaged_last_line_and_a_number_past_the_largest_double_are_their_own_deviations() -> (
    None
):
    dropped = (
        "storage/even-the-last-complete-line-must-parse",
        "json/a-stored-line-that-begins-with-a-byte-order-mark-is-damage",
    )
    for key in dropped:
        cause = dsh_expectations.cause_of(case(key, "failed", "expected CORRUPT_LOG, got success"))
        assert cause is not None and "torn tail" in cause.reason and cause.kind == "subject-bug", key
    key = "json/a-stored-number-past-the-largest-double-an-exponent-is-damage-never-infinity"
    cause = dsh_expectations.cause_of(case(key, "failed", "expected CORRUPT_LOG, got success"))
    assert cause is not None and "Infinity" in cause.reason and cause.kind == "derived-rule"
    assert (
        dsh_expectations.cause_of(
            case(key, "unsupported", "UNSUPPORTED_OP for spec.framing.decode_jsonl_log")
        )
        is not None
    )


def test_a_delay_case_a_storeless_release_cannot_run_is_not_blamed_on_the_missing_byte_bound() -> None:
    said = "the subject answered UNSUPPORTED_OP for reset"
    delay = dsh_expectations.cause_of(case("pure-drt/reset-batchmaxdelayms-absent", "unsupported", said))
    assert delay is not None and "no JSONL store" in delay.reason
    size = dsh_expectations.cause_of(case("pure-drt/reset-batchmaxbytes-minus-1", "unsupported", said))
    assert size is not None and "no byte bound" in size.reason


def test_as_shipped_dsh_is_judged_on_the_companions_rules_and_fails_them_as_a_decision() -> None:
    """DSH as shipped claims the rules its published invariant companions state, as the profile with
    invariants does, so both leave the same checker vectors unanswered; a companion-rule vector it
    accepts is a decision deviation of that profile alone."""
    folder = dsh_expectations.ROOT / "conformance" / "expectations"

    def unanswered(name: str) -> set[str]:
        file = load_expectations(folder / name)
        return {
            e.case for e in file.expectations if e.case.startswith("checker/") and e.status == "unsupported"
        }

    assert unanswered("dsh-0.1.0-rc.8.json") == unanswered("dsh-0.1.0-rc.8-invariants.json")
    shipped = {e.case: e for e in load_expectations(folder / "dsh-0.1.0-rc.8.json").expectations}
    turns = shipped["checker/turn-numbering-turns-count-from-1"]
    assert (turns.status, turns.kind) == ("failed", "decision") and "as shipped" in turns.cause
    said = 'call spec.checker.check_log: result differs at $: expected [{"rule": "compaction-turn", "seq": 2}], got []'
    crossing = case(
        "checker/compaction-turn-a-turn-end-crossing-an-open-start-is-reported-when-no-end-seed-x",
        "failed",
        said,
    )
    as_shipped, with_invariants = (
        dsh_expectations.cause_of(crossing),
        dsh_expectations.cause_of(crossing, True),
    )
    assert as_shipped is not None and as_shipped.kind == "decision" and "as shipped" in as_shipped.reason
    assert with_invariants is not None and with_invariants.kind == "derived-rule"
    assert dsh_expectations.is_invariants(folder / "dsh-0.1.0-rc.8-invariants-kill.json")
    assert not dsh_expectations.is_invariants(folder / "dsh-0.1.0-rc.8-kill.json")


def test_as_shipped_a_failure_on_a_rule_the_restore_path_states_is_no_companion_decision() -> None:
    """The as-shipped decision covers the companions' rules only: DSH failing a vector of a rule its
    own restore path states (here envelope) is a new deviation, refused until someone explains it."""
    said = (
        'call spec.checker.check_log: result differs at $: expected [{"rule": "envelope", "seq": 0}], got []'
    )
    _, problems = dsh_expectations.explain([case("checker/envelope-a-new-edge", "failed", said)])
    assert problems == [f"no cause explains checker/envelope-a-new-edge (failed): {said}"]


def test_the_causes_file_names_its_texts_and_refuses_a_misspelt_field(tmp_path: Path) -> None:
    names, causes = dsh_expectations.load_causes()
    assert causes == dsh_expectations.CAUSES and "{" not in "".join(c.reason + c.source for c in causes)
    assert causes[7].reason == names["UNPUBLISHED"]
    wrong = tmp_path / "causes.toml"
    wrong.write_text(
        '[names]\nA = "a"\n[[cause]]\nstatus = "failed"\nreason = "{A}"\nsource = "s"\nkind = "decision"\n'
        'key = ["*"]\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="unknown fields"):
        dsh_expectations.load_causes(wrong)
