"""The ``pure-drt`` family: differential random testing of every pure function against the
specification (cedar-spec's differential testing, here with ``spec/`` as the definitions).

For each function of the protocol's ``call`` table (:data:`spec.wire.WIRE_FUNCTIONS`), Hypothesis
draws inputs of two kinds: structured ones, valid and near the interesting boundaries (logs and
surfaces, tool results sized around the prune thresholds, logs ending inside a turn, shadow
claims, v0 and v4 header lines, packed chunk rows, JSONL text with torn tails), and ones drawn
from the whole JSON value domain, edges included (:mod:`conformance.strategies`). The subject's
answer is compared with the specification's — the same result as JSON, or the same code — as
:class:`conformance.oracle.SpecOracle` gives it after the input has made the same JSON round trip.
A disagreement is shrunk by Hypothesis and shown as a ready-to-add pure vector.

One case per function (its id is the function's name). ``UNSUPPORTED_OP`` makes a function
*unsupported*; a function the subject's target does not apply to is *not run*. The example budget
per function is :data:`BUDGETS` (the run's profile picks it).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis.reporting import with_reporter

from conformance.cases.build import OK, Case, Step
from conformance.drt_edges import EDGE_INPUTS, Edge, field_edges, field_template, with_edge
from conformance.drt_inputs import INPUTS
from conformance.generate_vectors import capabilities_of
from conformance.matching import answer_fingerprint, why_not
from conformance.oracle import SpecOracle
from conformance.report import CaseResult, Options, Outcome, case_slug, check_deadline
from conformance.subject import InProcessSubject, Response, Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.format.json_text import encode_json_text
from spec.log.json import JsonObject, JsonValue
from spec.protocol import BAD_REQUEST, TYPED_FIELDS, UNSUPPORTED_OP, TypedField
from spec.wire import WIRE_FUNCTIONS

FAMILY: Final = "pure-drt"
BUDGETS: Final = {"ci": 100, "thorough": 1000}  # examples per function
NEEDS: Final[Mapping[str, frozenset[str]]] = {"spec.checker.check_log": frozenset({"pure", "checker-rules"})}
# The vector folder a disagreement's vector belongs in, by the function's module.
VECTOR_FAMILY: Final = {
    "surface": "surface",
    "pairing": "pairing",
    "prune": "prune",
    "tokens": "tokens",
    "checker": "checker",
    "repair": "repair",
    "storage": "storage",
    "chunk_rows": "storage",
    "framing": "storage",
    "legacy": "storage",
    "header": "header",
    "spill": "spill",
    "projection": "projection",
}

# --- comparing one input ---------------------------------------------------------------------------


@dataclass
class Verdict:
    """What one function's run found: how many inputs were compared, whether the subject lacks
    the function, and the (shrunk) input it disagreed on."""

    examples: int = 0
    unsupported: bool = False
    disagreement: str | None = None
    fingerprint: str = ""  # how the last disagreement differed, data left out
    problem_input: JsonObject | None = None
    expected: JsonObject | None = None
    seen: list[str] = field(default_factory=list)


class Disagreement(AssertionError):
    """The subject's answer differs from the specification's (Hypothesis shrinks the input)."""


def expectation_of(answer: Response) -> JsonObject:
    if answer.ok:
        return {"ok": True, "result": answer.result}
    return {"ok": False, "code": answer.error_code}


def compare_one(
    subject: Subject, oracle: Subject, function: str, inputs: JsonObject, target: Target, verdict: Verdict
) -> None:
    """Call ``function`` on the subject and on the spec; a difference raises :class:`Disagreement`."""
    if verdict.unsupported:
        return
    inputs = target.call_input(function, inputs)
    answer = subject.request("call", function=function, input=inputs)
    if not answer.ok and answer.error_code == UNSUPPORTED_OP:
        verdict.unsupported = True
        return
    verdict.examples += 1
    expect = expectation_of(oracle.request("call", function=function, input=inputs))
    difference = why_not(
        expect,
        answer.ok,
        answer.result,
        answer.error_code,
        answer.error_message,
        op="call",
        function=function,
        target=target,
    )
    if difference is not None:
        verdict.problem_input, verdict.expected, verdict.disagreement = inputs, expect, difference
        verdict.fingerprint = f"call {function}: " + answer_fingerprint(
            expect, bool(answer.ok), answer.error_code, difference, generated=True
        )
        raise Disagreement(difference)


def profile_settings(profile: str) -> settings:
    deterministic = profile != "thorough"
    return settings(
        max_examples=BUDGETS.get(profile, BUDGETS["ci"]),
        database=None,
        deadline=None,
        derandomize=deterministic,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        report_multiple_bugs=False,
        print_blob=False,
    )


def edge_inputs(function: str) -> list[JsonObject]:
    """The edge inputs tried before the budget's draws (:data:`conformance.drt_edges.EDGE_INPUTS`)."""
    make = EDGE_INPUTS.get(function)
    return make() if make is not None else []


def run_function(subject: Subject, function: str, profile: str, target: Target = DEFAULT_TARGET) -> Verdict:
    """Compare ``function`` on every input Hypothesis draws under ``profile``'s budget; a
    disagreement is shrunk and kept in the verdict."""
    oracle = InProcessSubject(SpecOracle())
    verdict = Verdict()

    def agrees(inputs: JsonObject) -> None:
        check_deadline()  # between inputs: past the run's deadline, DeadlineReached ends the family
        compare_one(subject, oracle, function, inputs, target, verdict)

    test = given(INPUTS[function]())(agrees)
    for inputs in edge_inputs(function):
        test = example(inputs)(test)  # tried first, in Hypothesis's explicit phase
    test = profile_settings(profile)(test)

    with with_reporter(lambda text: None):
        try:
            test()
        except Exception:
            check_deadline()  # a cut input can leave Hypothesis complaining (flaky data): not a failure
            if verdict.disagreement is None:
                raise
            # the verdict holds the last failing input: the shrunk one (or, if the subject answered
            # the same input differently twice, the last it disagreed on)
    return verdict


def vector_text(function: str, inputs: JsonObject, expect: JsonObject) -> str:
    """The shrunk disagreement as a ready-to-add pure vector, in the vectors' layout."""
    from conformance.cases.build import PureCase
    from conformance.generate_vectors import render, why_of

    module, short_name = function.split(".")[1], function.rsplit(".", 1)[1]
    name = f"{short_name} on a shrunk generated input (rename it to say the rule it pins)"
    vector: JsonObject = {
        "name": name,
        "family": VECTOR_FAMILY.get(module, module),
        "why": why_of(PureCase(name, function, inputs, "ok")),
        "capabilities": list[JsonValue](sorted(NEEDS.get(function, frozenset({"pure"})))),
        "function": function,
        "input": inputs,
        "expect": expect,
    }
    text = render(vector)
    if expect.get("code") == BAD_REQUEST:
        text += "(the specification answers the protocol's BAD_REQUEST here, which a vector does not hold: pin it in a test)\n"
    return text


def check_pure_drt(
    subject: Subject, options: Options, functions: Collection[str] = WIRE_FUNCTIONS, fields: bool = True
) -> list[CaseResult]:
    """The runner's entry point: one case per function of the ``call`` table (or of ``functions``,
    a part of it), then the typed fields' cases (unless not ``fields``)."""
    target = options.target or DEFAULT_TARGET
    budget = BUDGETS.get(options.profile, BUDGETS["ci"])
    results: list[CaseResult] = []
    for function in functions:
        name = f"{function} answers as the specification does on every generated input"
        case_id = case_slug(function)
        missing = sorted(NEEDS.get(function, frozenset({"pure"})) - options.capabilities)
        if missing:
            results.append(
                CaseResult(
                    FAMILY,
                    name,
                    "unsupported",
                    f"the subject does not declare {', '.join(missing)}",
                    rule=function,
                    case_id=case_id,
                )
            )
            continue
        reason = target.not_applicable(function)
        if reason is not None:
            results.append(CaseResult(FAMILY, name, "not run", reason, rule=function, case_id=case_id))
            continue
        began = time.perf_counter()
        verdict = run_function(subject, function, options.profile, target)
        seconds = time.perf_counter() - began
        if verdict.unsupported:
            detail = f"the subject answered UNSUPPORTED_OP for {function}"
            results.append(CaseResult(FAMILY, name, "unsupported", detail, seconds, function, case_id))
        elif verdict.disagreement is not None:
            assert verdict.problem_input is not None and verdict.expected is not None
            detail = (
                f"{verdict.disagreement}\nthe shrunk input, as a vector the specification answers:\n"
                + vector_text(function, verdict.problem_input, verdict.expected)
            )
            failed = CaseResult(
                FAMILY, name, "failed", detail, seconds, function, case_id, verdict.fingerprint
            )
            results.append(failed)
        else:
            edges = len(edge_inputs(function))
            detail = f"{verdict.examples} inputs compared ({edges} edge inputs, then a budget of {budget})"
            results.append(CaseResult(FAMILY, name, "passed", detail, seconds, function, case_id))
    return results + (check_fields(subject, options) if fields else [])


# --- the value domain of every typed op argument ---------------------------------------------------


def field_rule(row: TypedField) -> str:
    """The certificate's rule for a typed field's domain: ``field/op.field``."""
    return f"field/{row.name}"


FIELD_RULES: Final = tuple(field_rule(row) for row in TYPED_FIELDS)


def field_case(row: TypedField, edge: Edge) -> tuple[str, str]:
    """The name and the key of the case of typed field ``row`` at ``edge``."""
    return f"{row.name} at {edge.label}: the answers are the specification's", case_slug(
        f"{row.name} {edge.label}"
    )


def field_requests(row: TypedField, edge: Edge) -> tuple[list[JsonObject], list[JsonObject]]:
    """The setup and the tested requests of typed field ``row`` at ``edge``: the template's request
    with the field at the edge, then the template's reads (:func:`conformance.drt_edges.field_template`)."""
    template = field_template(row)
    return list(template.setup), [with_edge(template.request, row.field, edge), *template.after]


def _sent(subject: Subject, request: JsonObject) -> tuple[str, Response]:
    args = dict(request)
    op = str(args.pop("op"))
    return op, subject.request(op, **args)


def _expected(oracle: InProcessSubject, request: JsonObject) -> JsonObject:
    """The specification's answer to ``request`` as an expectation (with the timing tolerance the
    model leaves a store, as a vector holds it)."""
    expect = expectation_of(_sent(oracle, request)[1])
    tolerance = getattr(oracle.target, "last", None)
    if tolerance is not None and (tolerance.events_at_least is not None or tolerance.alternatives):
        return dict(tolerance.as_json())
    return expect


def check_field_edge(subject: Subject, row: TypedField, edge: Edge, target: Target) -> CaseResult:
    """Typed field ``row`` at ``edge``: every answer the subject gives is the specification's. A setup
    request the subject answers otherwise makes the case an *error*; ``UNSUPPORTED_OP``
    *unsupported*, unless it is the specification's answer too (a ``call`` of a function name that
    names no function)."""
    (name, case_id), rule = field_case(row, edge), field_rule(row)
    setup, tested = field_requests(row, edge)
    oracle = InProcessSubject(SpecOracle())
    began = time.perf_counter()
    for number, request in enumerate([*setup, *tested]):
        expect = _expected(oracle, request)
        op, answer = _sent(subject, request)
        if not answer.ok and answer.error_code == UNSUPPORTED_OP and expect.get("code") != UNSUPPORTED_OP:
            detail = f"the subject answered UNSUPPORTED_OP for {op}"
            return CaseResult(FAMILY, name, "unsupported", detail, time.perf_counter() - began, rule, case_id)
        difference = why_not(
            expect, answer.ok, answer.result, answer.error_code, answer.error_message, op=op, target=target
        )
        if difference is not None:
            found = f"step {number} ({op}): {difference}\nrequest: {encode_json_text(request)[:300]}"
            outcome: Outcome = "error" if number < len(setup) else "failed"
            return CaseResult(FAMILY, name, outcome, found, time.perf_counter() - began, rule, case_id)
    return CaseResult(FAMILY, name, "passed", "", time.perf_counter() - began, rule, case_id)


def check_fields(subject: Subject, options: Options) -> list[CaseResult]:
    """One case per edge of every typed field (:data:`spec.protocol.TYPED_FIELDS`), each run when
    its requests, with the field at that edge, need only capabilities the subject declares."""
    target = options.target or DEFAULT_TARGET
    results: list[CaseResult] = []
    for row in TYPED_FIELDS:
        for edge in field_edges(row):
            check_deadline()
            setup, tested = field_requests(row, edge)
            needed = set(capabilities_of(Case(row.name, "", tuple(Step(r, OK) for r in [*setup, *tested]))))
            missing = sorted(needed - {"core"} - options.capabilities)
            if missing:
                name, slug = field_case(row, edge)
                detail = f"the subject does not declare {', '.join(missing)}"
                results.append(CaseResult(FAMILY, name, "unsupported", detail, 0.0, field_rule(row), slug))
                continue
            results.append(check_field_edge(subject, row, edge, target))
    return results


__all__ = ["BUDGETS", "FIELD_RULES", "INPUTS", "check_pure_drt", "run_function", "vector_text"]
