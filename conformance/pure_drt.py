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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter

from conformance import strategies as values
from conformance.matching import why_not
from conformance.oracle import SpecOracle
from conformance.report import CaseResult, Options, case_slug
from conformance.subject import InProcessSubject, Response, Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.format.json_text import encode_json_text
from spec.format.naming import encode_header_line
from spec.log.json import JsonObject, JsonValue
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

Inputs = st.SearchStrategy[JsonObject]


# --- the inputs ------------------------------------------------------------------------------------


def anything(*keys: str) -> Inputs:
    """An input of the whole JSON domain: each key absent or any value, and now and then a key no
    row names."""
    return values.with_optional({}, {key: values.json_values() for key in (*keys, "other")})


def either(structured: Inputs, *keys: str) -> Inputs:
    """Structured inputs four times in five, the whole domain otherwise."""
    return values.mostly(structured, anything(*keys))


@st.composite
def log_and_nodes(draw: st.DrawFn, large: bool = False, seq: bool = False) -> JsonObject:
    events = draw(values.logs(large_results=large))
    drawn: JsonObject = {"events": events, "nodes": draw(values.surface_nodes(events))}
    if seq:
        nodes = drawn["nodes"]
        choices = st.sampled_from(nodes) if isinstance(nodes, list) and nodes else values.seq_like(3)
        drawn["seq"] = draw(st.one_of(choices, values.seq_like(len(events) + 1)))
    return drawn


def prune_configs() -> st.SearchStrategy[JsonValue]:
    """Prune configurations near their rules' edges: defaults, sizes that exactly fit the threshold,
    edge numbers, unknown keys, null."""
    sizes = st.one_of(
        st.sampled_from((0, 1, 5, 50, 1024, 4096, 8192, 9000, -1, 2.0, 0.5, True, None, "5")),
        values.numbers(),
    )
    keyed = values.with_optional({}, {"thresholdChars": sizes, "headChars": sizes, "tailChars": sizes})
    fitting = st.builds(
        lambda head, tail, slack: {
            "thresholdChars": head + 39 + tail + slack,
            "headChars": head,
            "tailChars": tail,
        },
        st.integers(0, 50),
        st.integers(0, 50),
        st.sampled_from((0, 0, 1, 8000)),
    )
    usual = st.one_of(st.none(), fitting, st.just({"thresholdChars": 9000}), keyed)
    return values.mostly(usual, values.json_values(), 3)


def exact_configs() -> st.SearchStrategy[JsonValue]:
    """``plan_pruned_content``'s config, taken as given: safe integers (the defaults most often)."""
    default = {"thresholdChars": 8192, "headChars": 4096, "tailChars": 1024}
    small = st.fixed_dictionaries(
        {key: st.integers(0, 60) for key in ("thresholdChars", "headChars", "tailChars")}
    )
    return values.mostly(st.one_of(st.just(default), small), prune_configs(), odds=3)


@st.composite
def valid_headers(draw: st.DrawFn, version: int = 4) -> JsonObject:
    """A header every rule accepts, its optional fields present or not."""
    header: JsonObject = {
        "version": version,
        "id": draw(values.identifiers()),
        "createdAt": draw(values.safe_integers(0)),
    }
    optional: Mapping[str, st.SearchStrategy[JsonValue]] = {
        "cwd": st.sampled_from(("/work", "/a//b", "/", f"/{values.NON_BMP}/\u2028", "/C:\\x")),
        "parentSession": values.identifiers(),
        "seedLength": st.one_of(values.safe_integers(0, 20), st.just(3.0)),
        "origin": st.just("subagent"),
        "agentPreset": values.texts(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            header[key] = draw(strategy)
    if version == 4 or draw(st.booleans()):
        header["delegationDepth"] = draw(st.sampled_from((0, 1, 2, 1.0)))
    if version == 4:
        header["isSeeded"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        header["extra"] = draw(values.json_values(4))
    return header


def header_records(version: int = 4) -> st.SearchStrategy[JsonObject]:
    """Headers: valid ones most of the time, else one near its rules' edges."""
    return values.mostly(valid_headers(version), edge_headers(version), odds=2)


@st.composite
def edge_headers(draw: st.DrawFn, version: JsonValue = 4) -> JsonObject:
    """A header near its rules' edges: every optional field absent, null or drawn."""
    session_id = draw(values.identifiers())
    required: Mapping[str, st.SearchStrategy[JsonValue]] = {
        "version": values.mostly(st.just(version), st.sampled_from((4, 4.0, 0, 5, "4", True, None)), 2),
        "id": st.one_of(st.just(session_id), values.identifiers()),
        "createdAt": st.one_of(values.safe_integers(0), st.sampled_from(values.NUMBER_EDGES)),
    }
    optional: Mapping[str, st.SearchStrategy[JsonValue]] = {
        "cwd": st.sampled_from(("/work", "/a//b", "relative", "/", f"/{values.NON_BMP}", "C:\\x")),
        "parentSession": values.identifiers(),
        "seedLength": st.one_of(values.safe_integers(0, 20), st.sampled_from(values.NUMBER_EDGES)),
        "origin": st.sampled_from(("subagent", "other")),
        "delegationDepth": st.one_of(values.safe_integers(0, 3), st.sampled_from((1.0, True, -1))),
        "agentPreset": values.texts(),
        "isSeeded": st.one_of(st.booleans(), st.sampled_from((0, 1, "true"))),
        "extra": values.json_values(4),
    }
    return draw(values.with_optional(required, optional))


@st.composite
def header_lines(draw: st.DrawFn) -> JsonObject:
    version = draw(st.sampled_from((4, 0)))
    header = draw(header_records(version))
    line = dict(encode_header_line(header)) if draw(st.booleans()) else {"type": "session", **header}
    if draw(st.integers(0, 6)) == 0:
        line[draw(st.sampled_from(("sandboxMode", "type")))] = draw(values.json_scalars())
    drawn: JsonObject = {"line": line}
    if draw(st.booleans()):
        drawn["sessionId"] = header["id"] if draw(st.booleans()) else draw(values.identifiers())
    if draw(st.booleans()):
        drawn["fileName"] = draw(
            st.sampled_from(
                ("session.v4.jsonl.zstd", "session.v4.jsonl", "session.jsonl.zstd", "session.jsonl", "x.log")
            )
        )
    return drawn


@st.composite
def chunk_rows(draw: st.DrawFn) -> JsonValue:
    """DSH v0's packed chunk rows, most fields near their edges."""
    kind = draw(st.sampled_from(("text-chunks", "reasoning-chunks", "tool-call-chunks", "custom/x")))
    members = draw(st.lists(values.texts(4), max_size=4))
    gap: st.SearchStrategy[JsonValue] = st.one_of(
        values.safe_integers(0, 9), st.sampled_from((1.0, True, -1))
    )
    gaps = st.lists(gap, max_size=4)
    data: JsonObject = {"turn": 1, "step": 1, "index": draw(st.sampled_from((0, 1, 1.0, -1)))}
    dt: list[JsonValue] = [1] * max(len(members) - 1, 0)
    data["dt"] = dt if draw(st.booleans()) else draw(gaps)
    data["args" if kind == "tool-call-chunks" else "texts"] = list[JsonValue](members)
    if kind == "tool-call-chunks":
        data.update(id=draw(st.sampled_from(("c1", 1, None))), name="read")
    row: JsonObject = {
        "type": kind,
        "seq0": draw(values.seq_like(9)),
        "time0": draw(values.numbers()),
        "data": data,
    }
    if draw(st.integers(0, 5)) == 0:
        row[draw(st.sampled_from(("extra", "data", "seq0")))] = draw(values.json_scalars())
    return row


@st.composite
def jsonl_texts(draw: st.DrawFn) -> str:
    """A plain log as text: a header line, records (events with edge texts, chunk rows), then
    perhaps a damaged line, a torn last line cut at any point, or a line end other than ``\\n``."""
    header = draw(header_records(draw(st.sampled_from((4, 0)))))
    lines = [encode_json_text(encode_header_line(header))]
    events = draw(values.logs(max_events=4))
    records: list[JsonValue] = [*events, *draw(st.lists(chunk_rows(), max_size=1))]
    lines += [encode_json_text(record) for record in records]
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
    ends = st.sampled_from(("\n", "\n", "\n", "\r\n", "\u2028"))
    text = "".join(line + draw(ends) for line in lines)
    if draw(st.booleans()):
        torn = encode_json_text(draw(values.logs(max_events=1)) or {"type": "x"})
        text += torn[: draw(st.integers(0, len(torn)))]
    return text


@st.composite
def v0_records(draw: st.DrawFn) -> list[JsonValue]:
    """Records after a v0 header: events in the current and the legacy vocabulary (steering
    messages, messages from before identity, legacy turn/end reasons), chunk rows, unknown types."""
    records = list(draw(values.logs(max_events=5)))
    for _ in range(draw(st.integers(0, 2))):
        seq = len(records)
        legacy: JsonObject = draw(
            st.sampled_from(
                (
                    {
                        "type": "user/message",
                        "data": {"content": [values.text_block("old")], "source": {"kind": "user"}},
                        "surfaceOp": "append",
                    },
                    {
                        "type": "steering/message",
                        "data": {"turn": 1, "content": [values.text_block("w")], "source": {"kind": "user"}},
                        "surfaceOp": "append",
                    },
                    {
                        "type": "turn/end",
                        "data": {
                            "turn": 1,
                            "reason": {"kind": draw(st.sampled_from(("disposed", "error", "completed")))},
                        },
                    },
                    {"type": "custom/x", "data": {}, "ignorable": draw(st.sampled_from((True, False, None)))},
                    {"type": "mode/set", "data": {"mode": "plan"}},
                )
            )
        )
        records.append(
            {
                "type": legacy["type"],
                "seq": seq,
                "time": 5,
                **{k: v for k, v in legacy.items() if k != "type"},
            }
        )
    if draw(st.booleans()):
        row = draw(chunk_rows())
        if isinstance(row, dict):
            row["seq0"] = len(records)
        records.append(row)
    return records


@st.composite
def shadow_steps(draw: st.DrawFn) -> JsonObject:
    events = draw(values.logs(max_events=6))
    event: JsonValue = (
        draw(st.sampled_from(events)) if events else {"type": "x", "seq": 0, "time": 0, "data": {}}
    )
    tokens: st.SearchStrategy[JsonValue] = st.one_of(
        values.safe_integers(0, 100), st.sampled_from((1.5, True, None))
    )
    seqs = st.integers(0, max(len(events) - 1, 0))
    complete = st.fixed_dictionaries({"start": seqs, "end": seqs, "tokens": st.integers(0, 100)})
    edged = values.with_optional(
        {}, {"start": values.seq_like(8), "end": values.seq_like(8), "tokens": tokens}
    )
    claim: st.SearchStrategy[JsonValue] = st.one_of(st.none(), values.mostly(complete, edged))
    return {"claim": draw(claim), "event": event}


def checker_inputs() -> Inputs:
    @st.composite
    def build(draw: st.DrawFn) -> JsonObject:
        events = draw(values.logs())
        drawn: JsonObject = {"events": events}
        if draw(st.booleans()):
            drawn["header"] = draw(st.one_of(header_records(), st.none(), values.json_values(3)))
        if draw(st.booleans()):
            drawn["relational"] = draw(st.sampled_from((True, False, None, 0)))
        if draw(st.integers(0, 3)) == 0:
            drawn["formatVersion"] = draw(st.sampled_from((4, 0, 4.0, 1, True)))
        return drawn

    return build()


def spill_inputs() -> Inputs:
    edges: tuple[JsonValue, ...] = (0, 1, 12500, -1, 1.0, 0.5, True, "5")
    limits: st.SearchStrategy[JsonValue] = st.one_of(st.sampled_from(edges), values.numbers())
    not_booleans: tuple[JsonValue, ...] = (0, None, "true")
    has_store: st.SearchStrategy[JsonValue] = values.mostly(st.booleans(), st.sampled_from(not_booleans))
    return values.with_optional(
        {"hasStore": has_store}, {"maxInlineTokens": values.mostly(values.safe_integers(0, 20000), limits, 1)}
    )


INPUTS: Final[Mapping[str, Callable[[], Inputs]]] = {
    "spec.surface.fold_surface": lambda: either(
        st.builds(lambda events: {"events": events}, values.logs()), "events"
    ),
    "spec.pairing.derive_cut_balance": lambda: either(log_and_nodes(), "nodes", "events"),
    "spec.pairing.is_balanced_before": lambda: either(log_and_nodes(seq=True), "nodes", "events", "seq"),
    "spec.pairing.is_balanced_after": lambda: either(log_and_nodes(seq=True), "nodes", "events", "seq"),
    "spec.prune.decode_prune_config": lambda: st.builds(lambda config: {"config": config}, prune_configs()),
    "spec.prune.plan_pruned_content": lambda: either(
        st.fixed_dictionaries(
            {
                "blocks": st.one_of(values.pruned_text_blocks(), values.content_blocks()),
                "config": exact_configs(),
            }
        ),
        "blocks",
        "config",
    ),
    "spec.prune.plan_prune_events": lambda: either(
        st.builds(
            lambda drawn, config: {**drawn, "config": config}, log_and_nodes(large=True), prune_configs()
        ),
        "nodes",
        "events",
        "config",
    ),
    "spec.tokens.price_surface": lambda: either(log_and_nodes(), "nodes", "events"),
    "spec.tokens.fold_shadow_price": lambda: either(shadow_steps(), "claim", "event"),
    "spec.checker.check_log": lambda: either(checker_inputs(), "events", "header"),
    "spec.repair.derive_closers": lambda: either(
        st.builds(lambda events: {"events": events}, values.logs()), "events"
    ),
    "spec.storage.encode_segment": lambda: either(st.builds(lambda text: {"id": text}, values.texts()), "id"),
    "spec.storage.encode_project_key": lambda: either(
        st.builds(lambda text: {"cwd": "/" + text}, values.texts())
        | st.builds(lambda text: {"cwd": text}, values.texts()),
        "cwd",
    ),
    "spec.storage.derive_session_relpath": lambda: either(
        st.fixed_dictionaries(
            {"header": header_records()}, optional={"compressed": st.sampled_from((True, False, None, 0))}
        ),
        "header",
        "compressed",
    ),
    "spec.storage.decode_header_line": lambda: either(header_lines(), "line", "sessionId", "fileName"),
    "spec.chunk_rows.decode_storage_record": lambda: either(
        st.builds(lambda row: {"record": row}, chunk_rows()), "record"
    ),
    "spec.framing.decode_jsonl_log": lambda: either(
        st.builds(lambda text: {"text": text}, jsonl_texts()), "text"
    ),
    "spec.legacy.upgrade_v0_records": lambda: either(
        st.fixed_dictionaries({"sessionId": values.identifiers(), "records": v0_records()}),
        "sessionId",
        "records",
    ),
    "spec.header.validate_header": lambda: either(
        st.builds(
            lambda header: {
                "sessionId": header.get("id", "s") if isinstance(header.get("id"), str) else "s",
                "header": header,
            },
            header_records(),
        ),
        "sessionId",
        "header",
    ),
    "spec.spill.plan_max_inline_tokens": lambda: either(spill_inputs(), "maxInlineTokens", "hasStore"),
    "spec.projection.derive_projection_changes": lambda: either(
        st.builds(lambda events: {"unit": "sessionDigest", "events": events}, values.logs()), "unit", "events"
    ),
}


# --- comparing one input ---------------------------------------------------------------------------


@dataclass
class Verdict:
    """What one function's run found: how many inputs were compared, whether the subject lacks
    the function, and the (shrunk) input it disagreed on."""

    examples: int = 0
    unsupported: bool = False
    disagreement: str | None = None
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
    answer = subject.request("call", function=function, input=inputs)
    if not answer.ok and answer.error_code == "UNSUPPORTED_OP":
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


def run_function(subject: Subject, function: str, profile: str, target: Target = DEFAULT_TARGET) -> Verdict:
    """Compare ``function`` on every input Hypothesis draws under ``profile``'s budget; a
    disagreement is shrunk and kept in the verdict."""
    oracle = InProcessSubject(SpecOracle())
    verdict = Verdict()

    @profile_settings(profile)
    @given(INPUTS[function]())
    def agrees(inputs: JsonObject) -> None:
        compare_one(subject, oracle, function, inputs, target, verdict)

    with with_reporter(lambda text: None):
        try:
            agrees()
        except Exception:
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
    if expect.get("code") == "BAD_REQUEST":
        text += "(the specification answers the protocol's BAD_REQUEST here, which a vector does not hold: pin it in a test)\n"
    return text


def check_pure_drt(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: one case per function of the ``call`` table."""
    target = options.target or DEFAULT_TARGET
    budget = BUDGETS.get(options.profile, BUDGETS["ci"])
    results: list[CaseResult] = []
    for function in WIRE_FUNCTIONS:
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
            results.append(CaseResult(FAMILY, name, "failed", detail, seconds, function, case_id))
        else:
            detail = f"{verdict.examples} inputs compared (budget {budget})"
            results.append(CaseResult(FAMILY, name, "passed", detail, seconds, function, case_id))
    return results


__all__ = ["BUDGETS", "INPUTS", "check_pure_drt", "run_function", "vector_text"]
