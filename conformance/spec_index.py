"""One reading of ``spec/``: every function, what it calls, the codes it names (its own and through
its callees), the checker rule ids it reports, its stable name, the part of the rules material it
cites, and where the project exercises it (vector files, case entries, test modules).

A rule's *stable name* is its function's own name (``plan_fork_seed``): public function names are
unique across ``spec/`` (``tests/test_spec_index.py``), so a vector, a case or a page names a rule
without naming the module it lives in, and moving or renaming a module changes none of them.

Everything is read from the source (``ast``), never by running a rule; :func:`spec_function`
imports a rule's module only to hand out the function object. The vector generator, the
traceability page (:mod:`conformance.coverage`), the spec book (``scripts/spec_book.py``) and the
checker's rule catalogue (``dsh-session rules``, :mod:`reference.rule_catalog`) read ``spec/``
through this module.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
SPEC_DIR: Final = ROOT / "spec"
VECTORS_DIR: Final = ROOT / "conformance" / "vectors"
CASES_DIR: Final = ROOT / "conformance" / "cases"
TESTS_DIR: Final = ROOT / "tests"
WIRE_MODULES: Final = frozenset({"spec.wire"})  # the call table's JSON forms, not rules

# A citation of the rules material as spec docstrings write it, and the notes file a bare
# ``notes §N`` means in each chapter (a module docstring that names a notes file wins).
CITATION: Final = re.compile(
    r"notes/(?P<notes>dsh-[a-z-]+?)(?:\.md)? ?§ ?(?P<section>\d+(?:\.\d+)?)"
    r"|(?P<bare>notes) ?§ ?(?P<bare_section>\d+(?:\.\d+)?)"
    r"|\b(?P<decision>D\d+)\b"
)
NOTES_OF_CHAPTER: Final[Mapping[str, str]] = {
    "log": "dsh-session-core",
    "lineage": "dsh-session-core",
    "checks": "dsh-session-core",
    "shrink": "dsh-compaction-projection",
    "projections": "dsh-compaction-projection",
    "format": "dsh-persistence",
}


@dataclass
class Graph:
    """Every spec function (public and private) by dotted path, what it names, the codes it
    names, and its docstring; ``public`` lists the rules (public functions outside the wire)."""

    public: list[str] = field(default_factory=list)
    functions: list[str] = field(default_factory=list)  # every function (not class), in source order
    calls: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    codes: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    reports: dict[str, tuple[str, ...]] = field(default_factory=dict)
    docs: dict[str, str] = field(default_factory=dict)
    module_docs: dict[str, str] = field(default_factory=dict)

    def reach(self, roots: Iterable[str]) -> set[str]:
        """``roots`` and every spec function they reach, directly or not."""
        seen: set[str] = set()
        pending = [root for root in roots if root in self.calls or root in self.codes]
        while pending:
            current = pending.pop()
            if current not in seen:
                seen.add(current)
                pending.extend(self.calls.get(current, ()))
        return seen

    def codes_of(self, functions: Iterable[str]) -> set[str]:
        return {code for function in functions for code in self.codes.get(function, ())}

    def codes_through(self, path: str) -> tuple[tuple[str, str], ...]:
        """The codes ``path`` does not name itself but its callees inside spec do, each with the
        first callee (by path) that names it."""
        found: dict[str, str] = {}
        for callee in sorted(self.reach([path]) - {path}):
            for code in self.codes.get(callee, ()):
                if code not in self.codes.get(path, ()):
                    found.setdefault(code, callee)
        return tuple(found.items())


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> ``module.name`` for every ``from spec... import`` line (at any depth)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spec"):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("spec"):
                    names[alias.asname or alias.name] = alias.name
    return names


def reported_ids(node: ast.AST) -> tuple[str, ...]:
    """Checker rule ids a function passes to ``Violation(...)`` as a literal."""
    found: list[str] = []
    for child in ast.walk(node):
        if isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == "Violation":
            first = child.args[0] if child.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value not in found:
                found.append(first.value)
    return tuple(found)


def named_in(node: ast.AST, local: Mapping[str, str]) -> tuple[set[str], list[str]]:
    """The functions (resolved through ``local``) and the codes (in order of first mention) a
    piece of code names."""
    functions: set[str] = set()
    codes: list[str] = []
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in local:
            functions.add(local[child.id])
        elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
            if child.value.id == "Code":
                if child.attr not in codes:
                    codes.append(child.attr)
            elif child.value.id in local:
                functions.add(f"{local[child.value.id]}.{child.attr}")
    return functions, codes


@cache
def read_spec() -> Graph:
    """Every module of ``spec/``, read once."""
    graph = Graph()
    for path in sorted(SPEC_DIR.rglob("*.py")):
        module = module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph.module_docs[module] = ast.get_docstring(tree) or ""
        definitions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
        local = {**imported_names(tree), **{node.name: f"{module}.{node.name}" for node in definitions}}
        for node in definitions:
            functions, codes = named_in(node, local)
            name = f"{module}.{node.name}"
            graph.calls[name] |= functions - {name}
            graph.codes[name] += [code for code in codes if code not in graph.codes[name]]
            graph.docs[name] = ast.get_docstring(node) or ""
            graph.reports[name] = reported_ids(node)
            if isinstance(node, ast.FunctionDef):
                graph.functions.append(name)
                if not node.name.startswith("_") and module not in WIRE_MODULES:
                    graph.public.append(name)
    return graph


def stable_name(path: str) -> str:
    """A rule's stable name: its function's own name."""
    return path.rpartition(".")[2]


@cache
def rule_paths() -> Mapping[str, str]:
    """Stable name -> dotted path of every rule (a name given twice keeps its first path; the
    uniqueness test names both)."""
    paths: dict[str, str] = {}
    for path in read_spec().public:
        paths.setdefault(stable_name(path), path)
    return paths


def duplicate_names() -> dict[str, list[str]]:
    """Stable names two public functions of ``spec/`` share (there must be none)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in read_spec().public:
        found[stable_name(path)].append(path)
    return {name: paths for name, paths in found.items() if len(paths) > 1}


class UnknownRule(LookupError):
    """A stable name no public function of ``spec/`` has."""


def rule_path(name: str) -> str:
    """The dotted path of the rule named ``name``."""
    path = rule_paths().get(name)
    if path is None:
        raise UnknownRule(f"rule {name!r} is not a public function of the specification")
    return path


def spec_function(name: str) -> Callable[..., object]:
    """The function object of the rule named ``name``."""
    module, _, function = rule_path(name).rpartition(".")
    found: object = getattr(importlib.import_module(module), function)
    assert callable(found)
    return found


def rule_of(function: Callable[..., object]) -> str:
    """The stable name of a spec function given as an object (checked to be a rule)."""
    rule_path(function.__name__)
    return function.__name__


def citations(text: str, module: str) -> list[str]:
    """The rules material ``text`` (a docstring of ``module``, or a vector's why) cites, in order:
    ``notes/<file>.md §N`` or ``SPEC-DECISIONS.md Dn``."""
    named_notes = re.search(r"notes/(dsh-[a-z-]+)", read_spec().module_docs.get(module, ""))
    chapter = module.split(".")[1] if module.count(".") >= 1 else ""
    default_notes = named_notes.group(1) if named_notes else NOTES_OF_CHAPTER.get(chapter)
    found: list[str] = []
    for match in CITATION.finditer(text):
        if match.group("notes"):
            cited = f"notes/{match.group('notes')}.md §{match.group('section')}"
        elif match.group("bare"):
            if default_notes is None:
                continue
            cited = f"notes/{default_notes}.md §{match.group('bare_section')}"
        else:
            cited = f"SPEC-DECISIONS.md {match.group('decision')}"
        if cited not in found:
            found.append(cited)
    return found


def specification_of(name: str, why: str = "") -> str:
    """What the rule named ``name`` enforces, as a citation of the rules material: the first one
    the vector's ``why`` makes, else its docstring's, else its module docstring's ("" when none
    does)."""
    path = rule_path(name)
    module = path.rpartition(".")[0]
    graph = read_spec()
    for text in (why, graph.docs.get(path, ""), graph.module_docs.get(module, "")):
        found = citations(text, module)
        if found:
            return found[0]
    return ""


# --- where the project exercises a rule ---------------------------------------------------------


@cache
def vector_files() -> Mapping[str, tuple[str, ...]]:
    """Stable name -> the vector files (``family/file.json``) whose ``rule`` it is."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(VECTORS_DIR.glob("*/*.json")):
        rule = json.loads(path.read_text(encoding="utf-8"))["rule"]
        found[str(rule)].append(f"{path.parent.name}/{path.name}")
    return {rule: tuple(files) for rule, files in found.items()}


@cache
def case_lines() -> Mapping[str, str]:
    """A case's name (a sentence written as a string in a case module) -> ``path:line``."""
    found: dict[str, str] = {}
    for path in sorted(CASES_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.setdefault(node.value, f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@cache
def case_entries() -> Mapping[str, tuple[str, ...]]:
    """Stable name -> where its cases are written (``conformance/cases/<module>.py:<line>``; a
    case whose name is composed at run time gives its family's module)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(VECTORS_DIR.glob("*/*.json")):
        vector = json.loads(path.read_text(encoding="utf-8"))
        module = f"conformance/cases/{str(vector['family']).replace('-', '_')}"
        entry = case_lines().get(str(vector["name"]), module)
        if entry not in found[str(vector["rule"])]:
            found[str(vector["rule"])].append(entry)
    return {rule: tuple(sorted(entries, key=_by_line)) for rule, entries in found.items()}


def _by_line(entry: str) -> tuple[str, int]:
    path, _, line = entry.partition(":")
    return path, int(line or 0)


@cache
def test_modules() -> Mapping[str, tuple[str, ...]]:
    """Stable name -> the test modules (``tests/**/test_*.py``) that import the rule from ``spec``."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(TESTS_DIR.rglob("test_*.py")):
        for local in imported_names(ast.parse(path.read_text(encoding="utf-8"))).values():
            rule = stable_name(local)
            test = path.relative_to(ROOT).as_posix()
            if rule_paths().get(rule) == local and test not in found[rule]:
                found[rule].append(test)
    return {rule: tuple(paths) for rule, paths in found.items()}
