"""The layers: ``spec/`` imports only the standard library and itself, ``conformance/`` never
imports ``reference/``, and the module paths protocol version 1 named still import."""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """Every absolute module a file imports, with its line (relative imports stay in the package)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def forbidden_imports(package: str, allowed: frozenset[str]) -> list[str]:
    """Every import in ``package`` of a top-level module outside ``allowed``."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            if top not in allowed:
                found.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return found


def test_spec_imports_only_the_standard_library_and_itself() -> None:
    assert forbidden_imports("spec", frozenset(sys.stdlib_module_names) | {"spec"}) == []


def test_conformance_never_imports_the_reference() -> None:
    offenders = []
    for path in sorted((ROOT / "conformance").rglob("*.py")):
        offenders += [
            f"{path.relative_to(ROOT)}:{line} imports {name}"
            for line, name in imported_modules(path)
            if name.split(".")[0] == "reference"
        ]
    assert offenders == []


def test_a_forbidden_import_is_found(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "import os\nfrom reference.store import SessionStore\nimport zstandard\n", encoding="utf-8"
    )
    assert [name for _, name in imported_modules(module)] == ["os", "reference.store", "zstandard"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("spec.surface", "spec.log.surface"),
        ("spec.checker", "spec.checks.log"),
        ("spec.storage", "spec.format.naming"),
        ("spec.repair", "spec.lineage.repair"),
        ("reference.powerloss", "reference.persistence.powerloss"),
        ("reference.compaction", "reference.shrink.compaction"),
    ],
)
def test_a_moved_module_is_the_same_module_at_its_old_path(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_old_json_path_offers_the_domain_and_the_text_codec() -> None:
    old = importlib.import_module("spec.json")
    assert old.FrozenDict is importlib.import_module("spec.log.json").FrozenDict
    assert old.encode_json_text is importlib.import_module("spec.format.json_text").encode_json_text


def package_imports(package: str) -> dict[str, set[str]]:
    """Each module of ``package`` and the modules of the package it imports, anywhere in its body
    (a module imported from a subpackage counts that subpackage too: its ``__init__`` runs first)."""
    paths = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                named |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        graph[module] = set()
        for name in named:
            parts = name.split(".")
            graph[module] |= {".".join(parts[:end]) for end in range(2, len(parts) + 1)}
        graph[module] &= set(paths) - {module}
        graph[module] -= {parent for parent in graph[module] if module.startswith(f"{parent}.")}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every circle of imports in ``graph``, each once, as the path around it."""
    circles: list[list[str]] = []
    for start in sorted(graph):
        pending = [[start]]
        while pending:
            path = pending.pop()
            for module in sorted(graph[path[-1]]):
                if module == start:
                    circles.append(path)
                elif module > start and module not in path:
                    pending.append([*path, module])
    return circles


def test_the_reference_modules_import_no_circle() -> None:
    assert import_circles(package_imports("reference")) == []


def test_an_import_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_circles(graph) == [["a", "b", "c"]]


def test_no_reference_module_imports_another_modules_private_name() -> None:
    offenders = []
    for path in sorted((ROOT / "reference").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or "", *(alias.name for alias in node.names)]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            private = [
                name for name in names if any(part[:1] == "_" != part[1:2] for part in name.split("."))
            ]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} imports {name}" for name in private]
    assert offenders == []
