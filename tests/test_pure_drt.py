"""The pure-drt family: its budget is fixed per profile, every edge input reaches its rule, a
disagreement comes back as a vector the specification answers (tests/test_profiles.py runs it on
the reference under HYPOTHESIS_PROFILE), and every typed field of the protocol is put at every
edge of its type, the reference agreeing with the specification on each."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from conformance.drt_edges import EDGE_INPUTS, field_edges, field_template, read_path
from conformance.oracle import SpecOracle
from conformance.pure_drt import BUDGETS, FIELD_RULES, check_fields, check_pure_drt, run_function
from conformance.report import Options
from conformance.runner import hello
from conformance.subject import InProcessSubject
from reference.server import ReferenceSubject
from spec.log.json import JsonValue
from spec.protocol import TYPED_FIELDS
from spec.wire import WIRE_FUNCTIONS


def test_the_budget_is_fixed_per_profile() -> None:
    assert BUDGETS == {"ci": 100, "thorough": 1000}


def test_every_function_of_the_call_table_has_generated_inputs() -> None:
    """pure-drt runs every function of the call table: one without inputs would stop the family."""
    from conformance.drt_inputs import INPUTS

    assert set(INPUTS) == set(WIRE_FUNCTIONS)


def test_every_edge_input_reaches_its_rule_not_the_wire_decoder() -> None:
    """An edge input the wire refuses (BAD_REQUEST) would test the adapter, not the rule."""
    oracle = SpecOracle()
    assert set(EDGE_INPUTS) <= set(WIRE_FUNCTIONS)
    for function, make in EDGE_INPUTS.items():
        answers = [oracle.handle({"op": "call", "function": function, "input": i}) for i in make()]
        assert answers, function
        errors = [
            answer.get("error") for answer in answers if isinstance(answer, dict) and not answer.get("ok")
        ]
        codes = [error.get("code") for error in errors if isinstance(error, dict)]
        assert "BAD_REQUEST" not in codes, function


class CodePointSegments:
    """The specification, but encode_segment escapes an astral character as one ``~XXXXX``."""

    def __init__(self) -> None:
        self.oracle = SpecOracle()

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        answer = self.oracle.handle(request)
        if request.get("function") == "spec.storage.encode_segment" and isinstance(answer.get("result"), str):
            answer = {**answer, "result": PAIR.sub(combined, str(answer["result"]))}
        return answer


PAIR = re.compile("~(D[89AB][0-9A-F]{2})~(D[C-F][0-9A-F]{2})")


def combined(match: re.Match[str]) -> str:
    high, low = int(match.group(1), 16), int(match.group(2), 16)
    return f"~{0x10000 + (high - 0xD800) * 0x400 + (low - 0xDC00):X}"


def test_a_disagreement_is_shrunk_into_a_vector_the_specification_answers() -> None:
    verdict = run_function(InProcessSubject(CodePointSegments()), "spec.storage.encode_segment", "ci")
    assert verdict.disagreement is not None and verdict.problem_input is not None
    problem = verdict.problem_input["id"]
    assert isinstance(problem, str) and any(ord(c) > 0xFFFF for c in problem), problem
    subject = InProcessSubject(CodePointSegments())
    said = hello(subject)
    (result,) = [
        r
        for r in check_pure_drt(subject, Options(capabilities=said.capabilities))
        if r.rule == "spec.storage.encode_segment"
    ]
    assert result.outcome == "failed"
    vector = json.loads(result.detail.split("the specification answers:\n", 1)[1])
    assert vector["function"] == "spec.storage.encode_segment"
    assert vector["expect"]["ok"] and "~D83D~DE00" in vector["expect"]["result"]


# --- the typed fields' domain edges -----------------------------------------------------------------

NUMBER_EDGES = {"true", "false", "integral float", "2**53", "minus 1", "number as string"}


def test_every_typed_field_has_a_valid_value_and_the_edges_of_its_type() -> None:
    for row in TYPED_FIELDS:
        assert read_path(field_template(row).request, row.field) is not None, f"{row.name}: no valid value"
        labels = [edge.label for edge in field_edges(row)]
        assert len(set(labels)) == len(labels) and {"null", "absent"} <= set(labels), row.name
        if row.type in ("integer", "count", "seq"):
            assert set(labels) >= NUMBER_EDGES, row.name
        if row.type == "event-type":
            assert {"x-tool/result", "tool/result-x", "x-session/end-seed"} <= set(labels), row.name
    assert len(set(FIELD_RULES)) == len(TYPED_FIELDS)


def test_the_reference_answers_every_field_at_every_edge_as_the_specification_does() -> None:
    subject = InProcessSubject(ReferenceSubject())
    results = check_fields(subject, Options(capabilities=hello(subject).capabilities))
    assert len(results) == sum(len(field_edges(row)) for row in TYPED_FIELDS)
    assert len({result.key for result in results}) == len(results)
    assert [(r.name, r.detail) for r in results if r.outcome != "passed"] == []


class BooleanClock:
    """The specification, but ``clock`` takes ``true`` and ``false`` for 1 and 0; and no fork."""

    def __init__(self) -> None:
        self.oracle = SpecOracle()

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        if request.get("op") == "fork":
            return {
                "rid": request.get("rid"),
                "ok": False,
                "error": {"code": "UNSUPPORTED_OP", "message": ""},
            }
        now = request.get("now")
        if request.get("op") == "clock" and isinstance(now, bool):
            request = {**request, "now": int(now)}
        return self.oracle.handle(request)


def test_a_field_that_takes_a_boolean_for_an_integer_fails_at_both_booleans() -> None:
    subject = InProcessSubject(BooleanClock())
    results = check_fields(subject, Options(capabilities=hello(subject).capabilities))
    failed = sorted(r.name for r in results if r.outcome == "failed")
    assert failed == [
        "clock.now at false: the answers are the specification's",
        "clock.now at true: the answers are the specification's",
    ]
    forks = {r.outcome for r in results if r.rule.startswith("field/fork.")}
    assert forks == {"unsupported"}
