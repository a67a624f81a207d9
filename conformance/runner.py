"""Run the conformance suite against a subject.

A run asks the subject ``hello`` for its capabilities, then runs every *check family*: one per
folder of vectors under ``conformance/vectors/`` (each vector a case), then each family of
:data:`conformance.families.STATEFUL_FAMILIES`, the checks that generate their own workloads. A
vector needing a capability the subject lacks is skipped, and says which.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from conformance.families import OPT_IN, STATEFUL_FAMILIES, CheckFn
from conformance.report import CaseResult, Options
from conformance.subject import Response, Subject, SubjectError
from spec.log.json import JsonValue, is_deep_equal_json

VECTORS_DIR: Final = Path(__file__).resolve().parent / "vectors"
PROTOCOL_FAMILY: Final = "protocol"  # where a run reports that the subject could not be reached


# --- vectors ---------------------------------------------------------------------------------------


def load_vectors(directory: Path = VECTORS_DIR) -> list[dict[str, Any]]:
    """Every vector under ``directory``, family folder by family folder, in file-name order."""
    vectors: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*/*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        vector.setdefault("family", path.parent.name)
        vectors.append(vector)
    return vectors


def run_vector(subject: Subject, vector: Mapping[str, Any], capabilities: frozenset[str]) -> CaseResult:
    """One vector: skipped when the subject lacks a capability it needs, else passed or failed
    with the first mismatch."""
    family, name, rule = str(vector["family"]), str(vector["name"]), str(vector.get("rule", ""))
    missing = sorted(set(vector.get("capabilities", ["core"])) - capabilities)
    if missing:
        return CaseResult(family, name, "skipped", f"needs capability {', '.join(missing)}", rule=rule)
    began = time.perf_counter()
    try:
        problem = _run_pure(subject, vector) if "function" in vector else _run_steps(subject, vector["steps"])
    except SubjectError as error:
        problem = f"the subject broke the protocol: {error}"
    seconds = time.perf_counter() - began
    if problem is None:
        return CaseResult(family, name, "passed", seconds=seconds, rule=rule)
    return CaseResult(family, name, "failed", f"{problem}\nrule: {rule}", seconds=seconds, rule=rule)


def _run_steps(subject: Subject, steps: Sequence[Mapping[str, Any]]) -> str | None:
    for number, step in enumerate(steps):
        args = dict(step["request"])
        op = str(args.pop("op"))
        response = subject.request(op, **args)
        problem = compare(step["expect"], response)
        if problem is not None:
            return f"step {number} ({op}): {problem}\nrequest: {_short(step['request'])}"
    return None


def _run_pure(subject: Subject, vector: Mapping[str, Any]) -> str | None:
    response = subject.request("call", function=vector["function"], input=vector["input"])
    problem = compare(vector["expect"], response)
    if problem is None:
        return None
    return f"call {vector['function']}: {problem}\ninput: {_short(vector['input'])}"


def compare(expect: Mapping[str, Any], response: Response) -> str | None:
    """``None`` when the response is what the vector expects: the same result as JSON, or the
    same error code (messages are never compared). Otherwise what differs."""
    if expect["ok"]:
        if not response.ok:
            return f"expected success, got {response.error_code}: {response.error_message}"
        difference = first_difference(expect["result"], response.result)
        return None if difference is None else f"result differs at {difference}"
    if response.ok:
        return f"expected {expect['code']}, got success with {_short(response.result)}"
    if response.error_code != expect["code"]:
        return f"expected {expect['code']}, got {response.error_code}: {response.error_message}"
    return None


def first_difference(expected: JsonValue, actual: JsonValue) -> str | None:
    """Where two JSON values first differ (a path and both values), or ``None`` when they are
    equal as JSON (object key order never matters; ``1`` and ``1.0`` are one number)."""
    if is_deep_equal_json(expected, actual):
        return None
    stack: list[tuple[str, JsonValue, JsonValue]] = [("$", expected, actual)]
    while stack:
        path, want, got = stack.pop()
        if is_deep_equal_json(want, got):
            continue
        if isinstance(want, dict) and isinstance(got, dict):
            for key in sorted(set(want) | set(got)):
                if key not in got:
                    return f"{path}.{key}: expected {_short(want[key])}, missing"
                if key not in want:
                    return f"{path}.{key}: unexpected {_short(got[key])}"
            stack.extend((f"{path}.{key}", want[key], got[key]) for key in sorted(want, reverse=True))
            continue
        if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
            stack.extend(
                (f"{path}[{index}]", w, g) for index, (w, g) in reversed(list(enumerate(zip(want, got))))
            )
            continue
        return f"{path}: expected {_short(want)}, got {_short(got)}"
    return "$"


def _short(value: object, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "…"


def run_vectors(subject: Subject, options: Options) -> list[CaseResult]:
    vectors = load_vectors(options.vectors_dir or VECTORS_DIR)
    return [
        run_vector(subject, vector, options.capabilities)
        for vector in vectors
        if options.families is None or vector["family"] in options.families
    ]


# --- a whole run -----------------------------------------------------------------------------------


def hello(subject: Subject) -> tuple[str, frozenset[str]]:
    """The subject's name and capabilities (``core`` is always assumed)."""
    response = subject.request("hello")
    if not response.ok or not isinstance(response.result, dict):
        raise SubjectError(f"hello failed: {response.error_code}: {response.error_message}")
    capabilities = response.result.get("capabilities")
    names = {str(c) for c in capabilities} if isinstance(capabilities, list) else set()
    return str(response.result.get("name", "?")), frozenset(names | {"core"})


def run_suite(
    subject: Subject, options: Options, checks: Mapping[str, CheckFn] = STATEFUL_FAMILIES
) -> list[CaseResult]:
    """Every family the options select: the vectors, then ``checks`` in order. A check that
    raises fails its family with the traceback, and the run goes on."""
    try:
        _, capabilities = hello(subject)
    except SubjectError as error:
        return [CaseResult(PROTOCOL_FAMILY, "the subject answers hello", "failed", str(error))]
    options = Options(
        profile=options.profile,
        capabilities=capabilities,
        families=options.families,
        vectors_dir=options.vectors_dir,
        extra=options.extra,
    )
    results = run_vectors(subject, options)
    for family, check in checks.items():
        if options.families is not None and family not in options.families:
            continue
        if options.families is None and family in OPT_IN and options.extra.get(OPT_IN[family]) != "1":
            continue
        began = time.perf_counter()
        try:
            results += check(subject, options)
        except Exception:
            seconds = time.perf_counter() - began
            results.append(
                CaseResult(family, f"the {family} checks run", "failed", traceback.format_exc(), seconds)
            )
    return results


def vector_families(directory: Path = VECTORS_DIR) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.is_dir())
