"""Write the spec book, ``docs/SPEC.md``: every rule of ``spec/`` in the README's tour order.

``python scripts/spec_book.py`` writes the book; ``--check`` exits 1 when the checked-in book
differs from a fresh one (``tests/test_spec_book.py`` runs that check). For each public function
the book shows its signature and the rule's prose, its contracts under their own heading, the
codes it can raise (with their meanings from ``spec.codes.MEANING``), the checker rule ids that
judge a log breaking it, and the vector folders that exercise it; each module's constants are a
table with the unit their comment names. The three vocabularies (function, code, checker id) meet
here, which is what someone learning the invariants reads.

Everything is read from the source (``ast``) and the vectors, never from running a rule.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The readings of spec/ the book shares with `dsh-session rules`.
from reference.rule_catalog import CORE_CHECKS, codes_in, reported_ids  # noqa: E402
from spec import MOVED_MODULES  # noqa: E402 - the project root must be on the path first
from spec.checks.log import CORE_RULES, RULES, SURFACE_RULE_OF_CODE  # noqa: E402
from spec.codes import MEANING, Code  # noqa: E402

BOOK: Final = ROOT / "docs" / "SPEC.md"
VECTORS: Final = ROOT / "conformance" / "vectors"

CHAPTERS: Final = (
    (
        "The log and its surface",
        "spec/log/",
        (
            "spec.log.json",
            "spec.log.events",
            "spec.log.surface",
            "spec.log.provenance",
            "spec.log.tool_rewrite",
            "spec.log.header",
            "spec.log.writers",
            "spec.log.seed",
            "spec.log.unclosed",
            "spec.log.session",
        ),
    ),
    (
        "The stored form",
        "spec/format/",
        (
            "spec.format.json_text",
            "spec.format.naming",
            "spec.format.framing",
            "spec.format.chunk_rows",
            "spec.format.legacy",
        ),
    ),
    (
        "Lineage",
        "spec/lineage/",
        ("spec.lineage.fork", "spec.lineage.repair", "spec.lineage.store"),
    ),
    (
        "Shrinking the context",
        "spec/shrink/",
        (
            "spec.shrink.pairing",
            "spec.shrink.tokens",
            "spec.shrink.prune",
            "spec.shrink.spill",
            "spec.shrink.summary",
            "spec.shrink.bracket",
            "spec.shrink.pressure",
            "spec.shrink.compaction",
        ),
    ),
    (
        "Projections and durability",
        "spec/projections/",
        ("spec.projections.units", "spec.projections.digest", "spec.projections.durability"),
    ),
    (
        "The checker",
        "spec/checks/",
        (
            "spec.checks.log",
            "spec.checks.turns",
            "spec.checks.compaction",
            "spec.checks.lineage",
            "spec.checks.violation",
        ),
    ),
    ("Codes and the wire", "spec/", ("spec.codes", "spec.wire")),
)
CONTRACT_LINE: Final = re.compile(r"^\s*(pre|post|raises)(\[[^\]]*\])?:")


@dataclass(frozen=True)
class Rule:
    """One public function as the book shows it."""

    path: str
    signature: str
    prose: str
    contracts: tuple[str, ...]
    codes: tuple[str, ...]
    reports: tuple[str, ...]  # checker rule ids the function itself emits


@dataclass(frozen=True)
class Constant:
    name: str
    value: str
    unit: str


def module_file(module: str) -> Path:
    return ROOT / (module.replace(".", "/") + ".py")


def split_docstring(doc: str) -> tuple[str, tuple[str, ...]]:
    """The rule's prose, and its contract clauses (``pre:``, ``post:``, ``raises:``)."""
    prose: list[str] = []
    contracts: list[str] = []
    for line in doc.splitlines():
        (contracts if CONTRACT_LINE.match(line) else prose).append(
            line.strip() if CONTRACT_LINE.match(line) else line
        )
    text = "\n".join(prose).strip()
    return re.sub(r"\n[ \t]+", "\n", text), tuple(contracts)


def signature_of(node: ast.FunctionDef) -> str:
    args = ast.unparse(node.args)
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{node.name}({args}){returns}"


def read_module(module: str) -> tuple[str, list[Rule], list[Constant]]:
    tree = ast.parse(module_file(module).read_text(encoding="utf-8"))
    source_lines = module_file(module).read_text(encoding="utf-8").splitlines()
    rules: list[Rule] = []
    constants: list[Constant] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            prose, contracts = split_docstring(ast.get_docstring(node) or "")
            rules.append(
                Rule(
                    f"{module}.{node.name}",
                    signature_of(node),
                    prose,
                    contracts,
                    codes_in(node),
                    reported_ids(node),
                )
            )
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and "Final" in ast.unparse(node.annotation)
        ):
            name = node.target.id
            if name.startswith("_") or node.value is None or node.end_lineno != node.lineno:
                continue
            line = source_lines[node.lineno - 1]
            unit = line.split("#", 1)[1].strip() if "#" in line else ""
            value = ast.unparse(node.value)
            if len(value) <= 60:
                constants.append(Constant(name, value, unit))
    return ast.get_docstring(tree) or "", rules, constants


def new_path(old: str) -> str:
    """A dotted function path under the module paths of today (protocol v1 names use the old ones)."""
    module, _, function = old.rpartition(".")
    targets = MOVED_MODULES.get(module)
    if not targets:
        return old
    for target in targets:
        if hasattr(importlib.import_module(target), function):
            return f"{target}.{function}"
    return f"{targets[0]}.{function}"


def vector_index() -> dict[str, set[str]]:
    """For each spec function, the vector folders whose cases name it as their rule or function."""
    index: dict[str, set[str]] = defaultdict(set)
    for path in sorted(VECTORS.glob("*/*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        for key in ("rule", "function"):
            name = vector.get(key)
            if isinstance(name, str):
                index[new_path(name)].add(path.parent.name)
    return index


def judging_ids(rule: Rule) -> list[str]:
    ids = [SURFACE_RULE_OF_CODE[Code(code)] for code in rule.codes if Code(code) in SURFACE_RULE_OF_CODE]
    if rule.path in CORE_CHECKS:
        ids.append(CORE_CHECKS[rule.path])
    return sorted(set(ids))


def anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9 -]", "", text.lower()).replace(" ", "-")


def render_rule(rule: Rule, vectors: Mapping[str, set[str]]) -> Iterator[str]:
    yield f"#### `{rule.path.rsplit('.', 1)[1]}`"
    yield ""
    yield "```python"
    yield rule.signature
    yield "```"
    yield ""
    if rule.prose:
        yield rule.prose
        yield ""
    if rule.contracts:
        yield "*Contracts* (checked by CrossHair):"
        yield ""
        yield from (f"- `{clause}`" for clause in rule.contracts)
        yield ""
    facts: list[str] = []
    if rule.codes:
        facts.append(
            "**Codes:** " + "; ".join(f"`{code}`: {MEANING.get(Code(code), '')}" for code in rule.codes)
        )
    ids = judging_ids(rule)
    if ids:
        facts.append("**Judged in a log by:** " + ", ".join(f"`{rule_id}`" for rule_id in ids))
    if rule.reports:
        facts.append("**Reports:** " + ", ".join(f"`{rule_id}`" for rule_id in rule.reports))
    folders = sorted(vectors.get(rule.path, ()))
    if folders:
        facts.append("**Vectors:** " + ", ".join(f"`{folder}/`" for folder in folders))
    for fact in facts:
        yield f"- {fact}"
    if facts:
        yield ""


def render_constants(constants: Sequence[Constant]) -> Iterator[str]:
    if not constants:
        return
    yield "| constant | value | unit, or what it is |"
    yield "| --- | --- | --- |"
    for constant in constants:
        value = constant.value.replace("|", "\\|").replace("\n", " ")
        yield f"| `{constant.name}` | `{value}` | {constant.unit.replace('|', '/')} |"
    yield ""


def render_checker_ids() -> Iterator[str]:
    yield "## The checker's rule ids"
    yield ""
    yield "| rule id | level | what it says |"
    yield "| --- | --- | --- |"
    for rule_id, text in RULES.items():
        level = "core" if rule_id in CORE_RULES else "relational"
        yield f"| `{rule_id}` | {level} | {text} |"
    yield ""


def render_book() -> str:
    vectors = vector_index()
    lines = [
        "# The specification, rule by rule",
        "",
        "Generated by `python scripts/spec_book.py` from the docstrings of `spec/`, `spec/codes.py` and the",
        "vectors; `tests/test_spec_book.py` fails when this file is stale. The chapters follow the README's",
        "tour. Each rule shows its signature, the rule in prose, its contracts, the codes it can raise, the",
        "checker rule ids that judge a log that breaks it, and the vector folders that exercise it.",
        "",
        "## Contents",
        "",
    ]
    for title, folder, modules in CHAPTERS:
        lines.append(
            f"- [{title}](#{anchor(title)}) (`{folder}`): "
            + ", ".join(f"`{m.rsplit('.', 1)[1]}`" for m in modules)
        )
    lines.append("- [The checker's rule ids](#the-checkers-rule-ids)")
    lines.append("")
    for title, _, modules in CHAPTERS:
        lines += [f"## {title}", ""]
        for module in modules:
            doc, rules, constants = read_module(module)
            lines += [f"### `{module}`", "", re.sub(r"\n[ \t]+", "\n", doc).strip(), ""]
            lines += list(render_constants(constants))
            for rule in rules:
                lines += list(render_rule(rule, vectors))
    lines += list(render_checker_ids())
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/spec_book.py", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when docs/SPEC.md is stale, writing nothing"
    )
    args = parser.parse_args(argv)
    book = render_book()
    if args.check:
        if not BOOK.is_file() or BOOK.read_text(encoding="utf-8") != book:
            print("docs/SPEC.md is stale: run python scripts/spec_book.py", file=sys.stderr)
            return 1
        return 0
    BOOK.write_text(book, encoding="utf-8")
    print(f"wrote {BOOK.relative_to(ROOT)} ({len(book.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
