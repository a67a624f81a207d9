"""Generate the conformance vectors from the specification:
``python -m conformance.generate_vectors [--out DIR]``.

The cases live in ``conformance/cases/``, one module per family (:data:`FAMILIES`); each case is a
name that says the rule, the requests, and the outcome its author means (success or a named code).
Each vector names its rule by the function's stable name (:mod:`conformance.spec_index`) and cites
the part of the rules material it enforces (``specification``: the first citation in its why, else
in its rule's docstrings), so moving a spec module changes no vector. This driver computes the
outcome written into each vector by running the requests through
:class:`conformance.oracle.SpecOracle`, the protocol answered by ``spec`` alone, and refuses a case
whose computed outcome is not the one its author meant. It then holds the whole set to the coverage
rule (:mod:`conformance.cases.coverage`: every code expected by some vector or excused with a
reason, every checker rule reported) and writes each vector as JSON in reading order. The clock is
pinned and ids are fixed, so two runs write the same bytes;
``tests/test_vectors_fresh.py`` fails when the checked-in vectors differ from a fresh generation.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from conformance.cases import (
    checker,
    checkpoint,
    compaction,
    fork,
    header,
    overflow,
    pairing,
    projection,
    provenance,
    prune,
    prune_pass,
    repair,
    seed,
    session,
    spill,
    storage,
    surface,
    tokens,
    tool_rewrite,
)
from conformance.cases import files as file_sets
from conformance.cases import json as json_domain
from conformance.cases.build import OK, Case, Cases, GenerationError, PureCase, as_why
from conformance.cases.coverage import validate_coverage
from conformance.engine_model import ENGINE_CAPABILITY_OF
from conformance.oracle import SpecOracle
from conformance.report import case_slug
from conformance.spec_index import (
    VECTORS_DIR,
    UnknownRule,
    rule_of,
    rule_path,
    spec_function,
    specification_of,
)
from conformance.subject import InProcessSubject
from spec.checks.log import RULES as CHECKER_RULES
from spec.log.json import JsonObject, JsonValue
from spec.protocol import CHECKER_RULE, PROTOCOL_CODES
from spec.wire import WIRE_TABLE

CHECK_LOG: Final = "spec.checker.check_log"
PROTOCOL_RULES: Final = {row.name: rule_of(row.function) for row in WIRE_TABLE}  # call name -> rule

REFERENCE_FILES_DIR: Final = Path(__file__).resolve().parent / "reference-files"

FAMILIES: Final[Mapping[str, Callable[[], Cases]]] = {
    "session": session.cases,
    "json": json_domain.cases,
    "header": header.cases,
    "surface": surface.cases,
    "provenance": provenance.cases,
    "tool-rewrite": tool_rewrite.cases,
    "seed": seed.cases,
    "fork": fork.cases,
    "repair": repair.cases,
    "storage": storage.cases,
    "pairing": pairing.cases,
    "prune": prune.cases,
    "tokens": tokens.cases,
    "spill": spill.cases,
    "projection": projection.cases,
    "checker": checker.cases,
    "compaction": compaction.cases,
    "prune-pass": prune_pass.cases,
    "overflow": overflow.cases,
    "checkpoint": checkpoint.cases,
    "files": file_sets.cases,
}

STORAGE_OPS: Final = frozenset({"flush", "close", "resume", "read"})
CRASH_OPS: Final = frozenset({"unsynced", "crash", "arm_crash", "fail_next", "ops"})


# --- the oracle run and the intent checks ----------------------------------------------------------


def capabilities_of(case: Case | PureCase, expect: JsonValue = None) -> list[str]:
    """What a subject must support to run the vector: the ops it sends decide, and for a checker
    vector the rules its verdict depends on (:func:`checker_rules_of`)."""
    if isinstance(case, PureCase):
        if case.function != CHECK_LOG:
            return ["pure"]
        return sorted({"pure", *checker_rules_of(case, expect)})
    needed = {"core"}
    for step in case.steps:
        op = step.request["op"]
        if op in STORAGE_OPS:
            needed.add("storage")
        if op == "reset" and ("batchMaxDelayMs" in step.request or "batchMaxBytes" in step.request):
            needed.update({"storage", "batch-policy"})
        if op == "reset" and "files" in step.request:
            needed.update({"storage", "import"})  # a store over placed files: no crash seam needed
        elif op in CRASH_OPS or (op == "reset" and step.request.get("storage") == "file"):
            needed.update({"storage", "crash-seam"})
        if isinstance(op, str) and op in ENGINE_CAPABILITY_OF:
            needed.add(ENGINE_CAPABILITY_OF[op])
        if op == "state_of_stored":
            needed.add("storage")
        if op == "fail_commit":
            needed.update({"storage", "commit-fault"})
        if op == "list":
            needed.update({"storage", "list"})
        if op == "check":
            needed.update({"storage", "check", "checker-rules"})
    return sorted(needed)


def checker_rules_of(case: PureCase, expect: JsonValue) -> list[str]:
    """The capabilities a checker vector needs (PROTOCOL.md, ``checker-rule:<id>``): one per rule its
    verdict depends on, the rules of the violations it expects and the rule whose explanation is
    its why (a valid log built beside that rule's edge); a verdict that names no rule (a log
    expected valid as a whole, an error) needs every rule, ``checker-rules``."""
    rules = {rule for rule, text in CHECKER_RULES.items() if case.why == as_why(text)}
    found = expect.get("result") if isinstance(expect, dict) and expect.get("ok") is True else None
    if isinstance(found, list):
        rules.update(str(violation["rule"]) for violation in found if isinstance(violation, dict))
        if rules:
            return sorted(f"{CHECKER_RULE}{rule}" for rule in rules)
    return ["checker-rules"]


def expectation(ok: bool, result: JsonValue, code: str | None) -> JsonObject:
    return {"ok": True, "result": result} if ok else {"ok": False, "code": code}


def check_intent(where: str, intent: str, ok: bool, code: str | None) -> None:
    """Refuse an outcome that is not the one the case's author meant."""
    if code in PROTOCOL_CODES:
        raise GenerationError(f"{where}: the oracle answered protocol code {code}")
    if intent == OK and not ok:
        raise GenerationError(f"{where}: meant to succeed, the specification says {code}")
    if intent != OK and code != intent:
        raise GenerationError(
            f"{where}: meant to fail with {intent}, the specification says {code if code else 'ok'}"
        )


def build_vector(family: str, case: Case | PureCase) -> JsonObject:
    """The vector's JSON in reading order, every outcome computed by the oracle."""
    oracle = InProcessSubject(SpecOracle())
    where = f"[{family}] {case.name}"
    rule, why = rule_name(case), why_of(case)
    vector: JsonObject = {"name": case.name, "family": family, "why": why}
    if case.comment is not None:
        vector["comment"] = case.comment
    vector["rule"] = rule
    vector["specification"] = specification_of(rule, why)
    if not vector["specification"]:
        raise GenerationError(
            f"{where}: neither the why nor rule {rule}'s docstrings cite the rules material"
        )
    if isinstance(case, PureCase):
        response = oracle.request("call", function=case.function, input=case.input)
        check_intent(where, case.intent, response.ok, response.error_code)
        expect = expectation(response.ok, response.result, response.error_code)
        vector["capabilities"] = list[JsonValue](capabilities_of(case, _plain(expect)))
        vector["function"] = case.function
        vector["input"] = case.input
        vector["expect"] = expect
        return _plain(vector)
    vector["capabilities"] = list[JsonValue](capabilities_of(case))
    steps: list[JsonValue] = []
    for number, step in enumerate(case.steps):
        args = {key: value for key, value in step.request.items() if key != "op"}
        response = oracle.request(str(step.request["op"]), **args)
        check_intent(f"{where}, step {number}", step.intent, response.ok, response.error_code)
        expect = expectation(response.ok, response.result, response.error_code)
        tolerance = oracle.target.last
        if tolerance is not None and (tolerance.events_at_least is not None or tolerance.alternatives):
            expect = tolerance.as_json()  # the timing rules leave the store room here (PROTOCOL.md)
        steps.append({"request": step.request, "expect": expect})
    vector["steps"] = steps
    return _plain(vector)


def _plain(value: JsonObject) -> JsonObject:
    """The vector as plain JSON (tuples and frozen containers become lists and dicts)."""
    plain = json.loads(json.dumps(value))
    assert isinstance(plain, dict)
    return plain


def rule_name(case: Case | PureCase) -> str:
    """The rule a vector exercises, by its stable name (:mod:`conformance.spec_index`): a
    protocol case's own, a pure case's function's."""
    if isinstance(case, PureCase):
        if case.function not in PROTOCOL_RULES:
            raise GenerationError(f"{case.function!r} is not a function of the protocol's call table")
        return PROTOCOL_RULES[case.function]
    try:
        rule_path(case.rule)
    except UnknownRule as error:
        raise GenerationError(f"[{case.name}] {error}") from None
    return case.rule


def why_of(case: Case | PureCase) -> str:
    """The rule the case pins: its author's sentence, else the first sentence of the docstring of
    the spec function it exercises."""
    if case.why is not None:
        return case.why
    return as_why(inspect.getdoc(spec_function(rule_name(case))) or "")


# --- rendering and writing -------------------------------------------------------------------------


WIDTH: Final = 110  # columns: a value that fits stays on one line
LARGE: Final = 200  # characters: an outcome longer than this is spread out, one entry per line


def render(vector: JsonObject) -> str:
    """The vector as a person reads it: its fields in order, one line each; each step on one line,
    or its request and its expect on one line each; a pure vector's input spread out when it is
    wide, and only a large final outcome spread out."""
    fields = []
    for key, value in vector.items():
        if key == "steps" and isinstance(value, list):
            text = _steps(value)
        elif key == "input" or (key == "expect" and len(one_line(value)) > LARGE):
            text = _spread(value, indent=2)
        else:
            text = one_line(value)
        fields.append(f"  {one_line(key)}: {text}")
    return "{\n" + ",\n".join(fields) + "\n}\n"


def _steps(steps: list[JsonValue]) -> str:
    rows = []
    for number, step in enumerate(steps):
        assert isinstance(step, dict)
        request, expect = one_line(step["request"]), step["expect"]
        if number == len(steps) - 1 and len(one_line(expect)) > LARGE:
            rows.append(f'    {{\n      "request": {request},\n      "expect": {_spread(expect, 6)}\n    }}')
        elif len(one_line(step)) + 4 <= WIDTH:
            rows.append(f"    {one_line(step)}")
        else:
            rows.append(f'    {{"request": {request},\n     "expect": {one_line(expect)}}}')
    return "[\n" + ",\n".join(rows) + "\n  ]"


def _spread(value: JsonValue, indent: int) -> str:
    """``value`` on one line when it fits, else one entry per line; an object inside an array
    (an event, a message, a violation) always stays on one line."""
    line = one_line(value)
    if not isinstance(value, (dict, list)) or not value or indent + len(line) <= WIDTH:
        return line
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        entries = [f"{pad}{one_line(key)}: {_spread(item, indent + 2)}" for key, item in value.items()]
        return "{\n" + ",\n".join(entries) + "\n" + " " * indent + "}"
    items = [one_line(item) if isinstance(item, dict) else _spread(item, indent + 2) for item in value]
    return "[\n" + ",\n".join(pad + item for item in items) + "\n" + " " * indent + "]"


def one_line(value: JsonValue) -> str:
    """``value`` as one line of JSON, its keys in the order the case author wrote them; a lone
    surrogate, which UTF-8 text cannot hold, as its escape (``\\ud800``)."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def generate() -> dict[str, str]:
    """Every vector file, relative path to text."""
    files: dict[str, str] = {}
    for family, cases in FAMILIES.items():
        for case in cases():
            path = f"{family}/{case_slug(case.name)}.json"
            if path in files:
                raise GenerationError(f"two cases share the file {path}")
            vector = build_vector(family, case)
            files[path] = render(vector)
            if one_line(json.loads(files[path])) != one_line(
                vector
            ):  # the text holds the vector, key order included
                raise GenerationError(f"{path}: the rendered text does not read back as the vector")
    validate_coverage(files)
    return files


def generate_reference_files() -> dict[str, bytes]:
    """Every file set of the ``files`` vectors as a store root of its own, under the vector's file
    name: ``<slug>/<project dir>/<session dir>/<log file>`` to bytes."""
    return {
        f"{case_slug(name)}/{path}": data
        for name, placed in file_sets.reference_files().items()
        for path, data in sorted(placed.items())
    }


def write(files: Mapping[str, str | bytes], out: Path) -> None:
    """Replace the folders under ``out`` with ``files``, text as UTF-8 (files directly under
    ``out``, like README.md, are kept)."""
    for folder in out.iterdir() if out.is_dir() else ():
        if folder.is_dir():
            shutil.rmtree(folder)
    for relative, content in sorted(files.items()):
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.generate_vectors", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=VECTORS_DIR,
        help="where to write the vectors (default: conformance/vectors)",
    )
    parser.add_argument(
        "--files-out",
        type=Path,
        default=REFERENCE_FILES_DIR,
        help="where to write the files vectors' file sets (default: conformance/reference-files)",
    )
    args = parser.parse_args(argv)
    try:
        vectors = generate()
        placed = generate_reference_files()
    except GenerationError as error:
        print(f"generate_vectors: {error}", file=sys.stderr)
        return 1
    write(vectors, args.out)
    write(placed, args.files_out)
    files = vectors
    by_family: dict[str, int] = {}
    for relative in files:
        by_family[relative.split("/")[0]] = by_family.get(relative.split("/")[0], 0) + 1
    print(
        f"wrote {len(files)} vectors to {args.out}: "
        + ", ".join(f"{family} {count}" for family, count in sorted(by_family.items()))
        + f"; {len(placed)} reference files to {args.files_out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
