"""Generate the conformance vectors from the specification:
``python -m conformance.generate_vectors [--out DIR]``.

The cases live in ``conformance/cases/``, one module per family (:data:`FAMILIES`); each case is
a name that says the rule, the requests, and the outcome its author means (success or a named
code). This driver computes the outcome written into each vector by running the requests through
:class:`conformance.oracle.SpecOracle`, the protocol answered by ``spec`` alone, and refuses a
case whose computed outcome is not the one its author meant. It then holds the whole set to the
coverage rule (:mod:`conformance.cases.coverage`: every code expected by some vector or excused
with a reason, every checker rule reported) and writes each vector as JSON in reading order. The
clock is pinned and ids are fixed, so two runs write the same bytes;
``tests/test_vectors_fresh.py`` fails when the checked-in vectors differ from a fresh generation.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from conformance.cases import (
    checker,
    fork,
    header,
    pairing,
    provenance,
    prune,
    repair,
    seed,
    session,
    storage,
    surface,
    tokens,
    tool_rewrite,
)
from conformance.cases import json as json_domain
from conformance.cases.build import OK, Case, Cases, GenerationError, PureCase, as_why
from conformance.cases.coverage import validate_coverage
from conformance.oracle import SpecOracle
from conformance.subject import InProcessSubject
from spec.log.json import JsonObject, JsonValue

VECTORS_DIR: Final = Path(__file__).resolve().parent / "vectors"

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
    "checker": checker.cases,
}

PROTOCOL_CODES: Final = frozenset({"UNSUPPORTED_OP", "BAD_REQUEST", "CRASHED", "INTERNAL"})
STORAGE_OPS: Final = frozenset({"flush", "close", "resume", "read"})
CRASH_OPS: Final = frozenset({"unsynced", "crash", "arm_crash", "fail_next", "ops"})


# --- the oracle run and the intent checks ----------------------------------------------------------


def capabilities_of(case: Case | PureCase) -> list[str]:
    """What a subject must support to run the vector: the ops it sends decide."""
    if isinstance(case, PureCase):
        return ["pure"]
    needed = {"core"}
    for step in case.steps:
        op = step.request["op"]
        if op in STORAGE_OPS:
            needed.add("storage")
        if op in CRASH_OPS or (op == "reset" and step.request.get("storage") == "file"):
            needed.update({"storage", "crash-seam"})
    return sorted(needed)


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
    """The vector's JSON, every outcome computed by the oracle."""
    oracle = InProcessSubject(SpecOracle())
    where = f"[{family}] {case.name}"
    rule = case.rule if isinstance(case, Case) else case.function
    vector: JsonObject = {"name": case.name, "family": family, "rule": rule}
    vector["capabilities"] = list[JsonValue](capabilities_of(case))
    if isinstance(case, PureCase):
        response = oracle.request("call", function=case.function, input=case.input)
        check_intent(where, case.intent, response.ok, response.error_code)
        vector["function"] = case.function
        vector["input"] = case.input
        vector["expect"] = expectation(response.ok, response.result, response.error_code)
        return _plain(vector)
    steps: list[JsonValue] = []
    for number, step in enumerate(case.steps):
        args = {key: value for key, value in step.request.items() if key != "op"}
        response = oracle.request(str(step.request["op"]), **args)
        check_intent(f"{where}, step {number}", step.intent, response.ok, response.error_code)
        expect = expectation(response.ok, response.result, response.error_code)
        steps.append({"request": step.request, "expect": expect})
    vector["steps"] = steps
    return _plain(vector)


def _plain(value: JsonObject) -> JsonObject:
    """The vector as plain JSON (tuples and frozen containers become lists and dicts)."""
    plain = json.loads(json.dumps(value))
    assert isinstance(plain, dict)
    return plain


def why_of(case: Case | PureCase) -> str:
    """The rule the case pins: its author's sentence, else the first sentence of the docstring of
    the spec function it exercises."""
    if case.why is not None:
        return case.why
    return as_why(inspect.getdoc(spec_function(case.rule if isinstance(case, Case) else case.function)) or "")


def spec_function(name: str) -> Callable[..., object]:
    """The function of the specification a dotted name names."""
    module_name, _, function = name.rpartition(".")
    found: object = None
    if module_name.startswith("spec."):
        found = getattr(importlib.import_module(module_name), function, None)
    if not callable(found):
        raise GenerationError(f"rule {name!r} is not a function of the specification")
    return found


def validate_rule_name(rule: str) -> None:
    """A vector's rule names a function of the specification."""
    spec_function(rule)


# --- rendering and writing -------------------------------------------------------------------------


def slug(name: str) -> str:
    """A vector's file name, from its sentence."""
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return text[:90].rstrip("-")


def render(vector: JsonObject) -> str:
    return json.dumps(vector, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generate() -> dict[str, str]:
    """Every vector file, relative path to text."""
    files: dict[str, str] = {}
    for family, cases in FAMILIES.items():
        for case in cases():
            validate_rule_name(case.rule if isinstance(case, Case) else case.function)
            path = f"{family}/{slug(case.name)}.json"
            if path in files:
                raise GenerationError(f"two cases share the file {path}")
            files[path] = render(build_vector(family, case))
    validate_coverage(files)
    return files


def write(files: Mapping[str, str], out: Path) -> None:
    """Replace the vector files under ``out`` (other files there, like README.md, are kept)."""
    for family_dir in out.iterdir() if out.is_dir() else ():
        if family_dir.is_dir():
            shutil.rmtree(family_dir)
    for relative, text in sorted(files.items()):
        path = out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.generate_vectors", description=__doc__)
    parser.add_argument(
        "--out",
        type=Path,
        default=VECTORS_DIR,
        help="where to write the vectors (default: conformance/vectors)",
    )
    args = parser.parse_args(argv)
    try:
        files = generate()
    except GenerationError as error:
        print(f"generate_vectors: {error}", file=sys.stderr)
        return 1
    write(files, args.out)
    by_family: dict[str, int] = {}
    for relative in files:
        by_family[relative.split("/")[0]] = by_family.get(relative.split("/")[0], 0) + 1
    print(
        f"wrote {len(files)} vectors to {args.out}: "
        + ", ".join(f"{family} {count}" for family, count in sorted(by_family.items()))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
