"""Requirement traceability: ``conformance/coverage.md``, which checks exercise each rule.

  python -m conformance.coverage           write conformance/coverage.md
  python -m conformance.coverage --check   exit 1 when the file differs from a fresh one

A *rule* is a public function of ``spec/`` or a stable code of :class:`spec.codes.Code`. Three
kinds of check exercise rules:

- **vectors** (``conformance/vectors``): a vector exercises the function its ``rule`` names, and every code one of its steps expects;
- **properties** (the ``pure-drt`` family): the property of a ``call`` row exercises the spec
  functions the row's adapter in :mod:`spec.wire` calls, and everything they call in turn;
- **stateful checks** (``machine``, ``exhaustive``, ``crash``, ``files``, ``trace``): a family
  exercises the spec functions its modules (and the spec model they share) call to compute what a
  subject must answer, and everything those call.

Calls are read from the source (``ast``), never by running anything: a function reaches another
when its body names it (called or passed on), through the module's own definitions or its
``from spec... import`` lines, and a function reaches a code when its body names ``Code.X``. So
the properties and stateful columns say which checks *can* exercise a rule — a static, generous
reading — while the vectors column is exact. A rule with no check, or with exactly one, is
flagged. Last, the typed fields of the protocol's ops and the domain edges each is put at.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from conformance.drt_edges import field_edges, field_template, read_path
from conformance.spec_index import ROOT, SPEC_DIR, VECTORS_DIR, imported_names, named_in, read_spec, rule_path
from spec.codes import Code
from spec.format.json_text import encode_json_text
from spec.protocol import TYPED_FIELDS

DOCUMENT: Final = ROOT / "conformance" / "coverage.md"
# The modules each stateful family computes its expectations with (the model is shared).
MODEL: Final = ("conformance/model.py", "conformance/driver.py", "conformance/builders.py")
STATEFUL: Final[Mapping[str, tuple[str, ...]]] = {
    "machine": ("conformance/machine", "conformance/engine_model.py", *MODEL),
    "exhaustive": ("conformance/exhaustive.py", *MODEL),
    "crash": ("conformance/crash", "conformance/crash_rules.py", *MODEL),
    "files": ("conformance/files", *MODEL),
    "trace": ("conformance/trace", *MODEL),
}
WIRE_MODULE: Final = "spec.wire"
SHOWN: Final = 4  # names listed in a cell before the rest are counted


# --- the checks ------------------------------------------------------------------------------------


def wire_rows() -> dict[str, set[str]]:
    """Each ``call`` row of :data:`spec.wire.WIRE_TABLE`: the functions its function and adapter
    name."""
    path = SPEC_DIR / "wire.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    local = {
        **imported_names(tree),
        **{
            node.name: f"{WIRE_MODULE}.{node.name}" for node in tree.body if isinstance(node, ast.FunctionDef)
        },
    }
    rows: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "WireRow":
            name, function, adapter = node.args[:3]
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                rows[name.value] = named_in(function, local)[0] | named_in(adapter, local)[0]
    return rows


def family_roots(paths: Sequence[str]) -> set[str]:
    """The spec functions a stateful family's modules name."""
    roots: set[str] = set()
    for entry in paths:
        path = ROOT / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            tree = ast.parse(file.read_text(encoding="utf-8"))
            roots |= named_in(tree, imported_names(tree))[0]
    return roots


def expected_codes(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        expect = value.get("expect")
        if isinstance(expect, dict) and isinstance(expect.get("code"), str):
            yield expect["code"]
        for child in value.values():
            yield from expected_codes(child)
    elif isinstance(value, list):
        for child in value:
            yield from expected_codes(child)


def vector_index() -> dict[str, list[str]]:
    """Rule (function path or code) -> the folders of the vectors exercising it, one per vector: a
    vector exercises the function its ``rule`` names and every code it expects."""
    index: dict[str, list[str]] = defaultdict(list)
    for path in sorted(VECTORS_DIR.glob("*/*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        rules = {rule_path(vector["rule"]), *expected_codes(vector)}
        for rule in sorted(rules):
            index[rule].append(path.parent.name)
    return index


@dataclass(frozen=True)
class Evidence:
    vectors: tuple[str, ...]  # a folder per vector
    properties: tuple[str, ...]  # call rows
    stateful: tuple[str, ...]  # families

    @property
    def count(self) -> int:
        return len(self.vectors) + len(self.properties) + len(self.stateful)


def gather() -> tuple[dict[str, Evidence], dict[str, Evidence]]:
    """Every public spec function's evidence, and every code's."""
    graph = read_spec()
    vectors = vector_index()
    row_reach = {row: graph.reach(names) for row, names in wire_rows().items()}
    family_reach = {family: graph.reach(family_roots(paths)) for family, paths in STATEFUL.items()}

    def evidence(rule: str, reaches: Mapping[str, set[str]], by_code: bool) -> tuple[str, ...]:
        return tuple(
            name
            for name, reached in reaches.items()
            if (rule in graph.codes_of(reached) if by_code else rule in reached)
        )

    functions = {
        rule: Evidence(
            tuple(vectors.get(rule, ())),
            evidence(rule, row_reach, False),
            evidence(rule, family_reach, False),
        )
        for rule in graph.public
    }
    codes = {
        code.value: Evidence(
            tuple(vectors.get(code.value, ())),
            evidence(code.value, row_reach, True),
            evidence(code.value, family_reach, True),
        )
        for code in Code
    }
    return functions, codes


# --- the document ------------------------------------------------------------------------------------


def folders(vectors: Sequence[str]) -> str:
    if not vectors:
        return "—"
    counted = Counter(vectors)
    return f"{len(vectors)}: " + ", ".join(
        f"{folder} ×{n}" if n > 1 else folder for folder, n in sorted(counted.items())
    )


def names(items: Sequence[str]) -> str:
    if not items:
        return "—"
    shown = [item.rsplit(".", 1)[-1] for item in items[:SHOWN]]
    rest = f" +{len(items) - SHOWN}" if len(items) > SHOWN else ""
    return f"{len(items)}: " + ", ".join(shown) + rest


def flag(evidence: Evidence) -> str:
    if evidence.count == 0:
        return "**no check**"
    return "**one check only**" if evidence.count == 1 else ""


def table(rows: Mapping[str, Evidence], label: str) -> Iterator[str]:
    yield f"| {label} | vectors | properties (pure-drt) | stateful checks | flag |"
    yield "| --- | --- | --- | --- | --- |"
    for rule, evidence in rows.items():
        cells = (
            f"`{rule}`",
            folders(evidence.vectors),
            names(evidence.properties),
            ", ".join(evidence.stateful) or "—",
            flag(evidence),
        )
        yield "| " + " | ".join(cells) + " |"


def tally(rows: Mapping[str, Evidence]) -> str:
    none = sum(evidence.count == 0 for evidence in rows.values())
    one = sum(evidence.count == 1 for evidence in rows.values())
    return f"{len(rows)} rules: {none} with no check, {one} with one check only, {len(rows) - none - one} with two or more"


def field_table() -> Iterator[str]:
    """Per typed field of the protocol (:data:`spec.protocol.TYPED_FIELDS`): its type, the valid
    value its request template gives it, and the edges ``pure-drt`` puts it at, one case each; a
    field its template does not give a value is flagged (its edges are then edges of nothing)."""
    yield "| field | type | valid value | edges (one `pure-drt` case each) | flag |"
    yield "| --- | --- | --- | --- | --- |"
    for row in TYPED_FIELDS:
        usual = read_path(field_template(row).request, row.field)
        shown = encode_json_text(usual)
        shown = shown if len(shown) <= 24 else shown[:21] + "..."
        edges = ", ".join(edge.label for edge in field_edges(row))
        flag = "**no valid value**" if usual is None else ""
        yield f"| `{row.name}` | {row.type} | `{shown}` | {edges} | {flag} |"


def render() -> str:
    functions, codes = gather()
    edges = sum(len(field_edges(row)) for row in TYPED_FIELDS)
    lines = [
        "# Requirement traceability",
        "",
        "Generated by `python -m conformance.coverage` (do not edit; `tests/test_coverage_doc.py` keeps it",
        "fresh). For each rule — a public function of `spec/`, then a stable code — the checks that",
        "exercise it: the vectors (by folder, one per vector naming the function or expecting the code),",
        "the `pure-drt` properties (the `call` rows whose adapter reaches it) and the stateful families",
        "(whose model reaches it). Reaching is read statically from the source: the vectors column is",
        "exact, the other two say what can exercise the rule. A rule with no check, or with one only, is",
        "flagged.",
        "",
        f"- functions: {tally(functions)}",
        f"- codes: {tally(codes)}",
        "",
        "## Spec functions",
        "",
        *table(functions, "function"),
        "",
        "## Codes",
        "",
        *table(codes, "code"),
        "",
        "## Typed fields",
        "",
        "The value domain of every typed op argument (`spec.protocol.TYPED_FIELDS`): each field, in its",
        "op's request template (`conformance.drt_edges.field_template`), at each edge of its type",
        "(`conformance.drt_edges.type_edges`), every answer compared with the specification's.",
        f"{len(TYPED_FIELDS)} fields, {edges} edges.",
        "",
        *field_table(),
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.coverage", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when coverage.md is stale")
    args = parser.parse_args(argv)
    fresh = render()
    if args.check:
        current = DOCUMENT.read_text(encoding="utf-8") if DOCUMENT.is_file() else ""
        if current != fresh:
            print(f"{DOCUMENT} is stale: run python -m conformance.coverage", file=sys.stderr)
            return 1
        return 0
    DOCUMENT.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
