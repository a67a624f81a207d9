"""The layers: ``spec/`` imports only the standard library and itself, ``conformance/`` never
imports ``reference/``."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

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
