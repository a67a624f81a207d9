"""One reading of ``spec/``: every function, what it calls, the codes it names, its stable name and
the part of the rules material it cites.

A rule's *stable name* is its function's own name (``plan_fork_seed``): public function names are
unique across ``spec/`` (``tests/test_spec_index.py``), so a vector, a case or a page names a rule
without naming the module it lives in, and moving or renaming a module changes none of them.

Everything is read from the source (``ast``), never by running a rule; :func:`spec_function`
imports a rule's module only to hand out the function object. The vector generator, the
traceability page (:mod:`conformance.coverage`) and the spec book (``scripts/spec_book.py``) read
``spec/`` through this module.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
SPEC_DIR: Final = ROOT / "spec"
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
    calls: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    codes: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
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

    def codes_reached(self, path: str) -> tuple[str, ...]:
        """The codes ``path`` names, then those its callees inside spec name, each once."""
        found = list(self.codes.get(path, ()))
        for callee in sorted(self.reach([path]) - {path}):
            found += [code for code in self.codes.get(callee, ()) if code not in found]
        return tuple(found)


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
            if (
                isinstance(node, ast.FunctionDef)
                and not node.name.startswith("_")
                and module not in WIRE_MODULES
            ):
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
