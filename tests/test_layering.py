"""The layers: ``spec/`` imports only the standard library and itself, ``conformance/`` never
imports ``reference/``."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Final

from spec import CHAPTERS

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


# --- the chapters of spec/, import circles, private names ----------------------------------------

PACKAGES: Final = ("spec", "reference", "conformance")


def module_of(path: Path) -> str:
    """The dotted module a file under the project root defines (a package's ``__init__`` is the
    package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of ``spec/``, ``reference/`` and ``conformance/``, by dotted name."""
    return {module_of(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))}


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def import_nodes(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement a module can run, at any depth (inside functions too), but not those
    under ``if TYPE_CHECKING:``, which never run."""
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif not is_type_checking_block(node):
            pending.extend(ast.iter_child_nodes(node))


def import_edges(importer: str, path: Path, known: Collection[str]) -> Iterator[tuple[int, str, str]]:
    """``(line, target module, name)`` for every project module ``importer`` imports; ``name`` is
    the imported name of a ``from`` import ("" otherwise). ``from package import module`` names the
    submodule as its target."""
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    for node in import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name, "") for alias in node.names if alias.name in known)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            if submodule in known:
                yield node.lineno, submodule, alias.name
            elif base in known:
                yield node.lineno, base, alias.name


def chapter_rank(module: str) -> int:
    """Where a spec module sits: ``spec.codes`` below every chapter, each chapter at its place in
    :data:`spec.CHAPTERS`, anything else in ``spec`` (the wire, the package) above them all."""
    if module == "spec.codes":
        return -1
    parts = module.split(".")
    if len(parts) > 2 and parts[1] in CHAPTERS:
        return CHAPTERS.index(parts[1])
    return len(CHAPTERS)


def layer_name(module: str) -> str:
    """A spec module's chapter, or ``spec.codes`` and the wire as themselves."""
    rank = chapter_rank(module)
    return f"chapter {CHAPTERS[rank]}" if 0 <= rank < len(CHAPTERS) else module


def back_arrows(modules: dict[str, Path]) -> list[str]:
    """Every import, at any depth of a module, from a spec module to one in a higher chapter."""
    spec_modules = {name: path for name, path in modules.items() if name.split(".")[0] == "spec"}
    return sorted(
        {
            f"{importer} (line {line}) imports {target}: {layer_name(importer)} is below {layer_name(target)}"
            for importer, path in spec_modules.items()
            if chapter_rank(importer) < len(CHAPTERS)
            for line, target, _ in import_edges(importer, path, spec_modules)
            if chapter_rank(target) > chapter_rank(importer)
        }
    )


def import_circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that reach each other through imports (strongly connected, Tarjan's
    algorithm), with a module that imports itself as a group of one."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(graph.get(node, ())):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def circle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A path inside ``group`` from its first module back to itself (breadth first)."""
    start = min(group)
    paths = {successor: [start, successor] for successor in graph[start] if successor in group}
    frontier = list(paths)
    while start not in paths:
        following = []
        for node in frontier:
            for successor in sorted(graph[node] & group):
                if successor not in paths:
                    paths[successor] = [*paths[node], successor]
                    following.append(successor)
        frontier = following
    return paths[start]


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which project modules each one imports, at any depth (outside ``if TYPE_CHECKING:``)."""
    return {
        importer: {target for _, target, _ in import_edges(importer, path, modules)} - {importer}
        for importer, path in modules.items()
    }


def private_imports(modules: dict[str, Path]) -> set[tuple[str, str, str]]:
    """``(importer, module, name)`` for every name with a leading underscore that a module imports
    from another project module (a private module counts too)."""
    found = set()
    for importer, path in modules.items():
        for _, target, name in import_edges(importer, path, modules):
            private = name or target.rpartition(".")[2]
            if private.startswith("_") and not private.startswith("__") and target != importer:
                found.add((importer, target, private))
    return found


def test_the_chapters_are_the_subpackages_of_spec() -> None:
    subpackages = {path.parent.name for path in (ROOT / "spec").glob("*/__init__.py")}
    assert sorted(CHAPTERS) == sorted(subpackages)


def test_no_spec_chapter_imports_a_higher_one() -> None:
    assert back_arrows(project_modules()) == []


def test_a_back_arrow_is_found(tmp_path: Path) -> None:
    probe = tmp_path / "spec" / "log" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text("def f() -> None:\n    from spec.shrink.bracket import find_x\n", encoding="utf-8")
    modules = {"spec.log.probe": probe, "spec.shrink.bracket": ROOT / "spec" / "shrink" / "bracket.py"}
    assert back_arrows(modules) == [
        "spec.log.probe (line 2) imports spec.shrink.bracket: chapter log is below chapter shrink"
    ]


def test_no_import_circles() -> None:
    graph = module_graph(project_modules())
    found = {frozenset(group) for group in import_circles(graph)}
    assert sorted(" -> ".join(circle_in(graph, set(group))) for group in found) == [], "import circles"


def test_an_import_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert sorted(map(sorted, import_circles(graph))) == [["a", "b", "c"], ["e"]]
    assert circle_in(graph, {"a", "b", "c"}) == ["a", "b", "c", "a"]


def test_imports_inside_functions_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from typing import TYPE_CHECKING\nimport b\nif TYPE_CHECKING:\n    import c\n", encoding="utf-8"
    )
    (tmp_path / "b.py").write_text("def f():\n    import a\n", encoding="utf-8")
    modules = {"a": tmp_path / "a.py", "b": tmp_path / "b.py", "c": tmp_path / "a.py"}
    assert module_graph(modules) == {"a": {"b"}, "b": {"a"}, "c": {"b"}}
    assert [sorted(group) for group in import_circles(module_graph(modules))] == [["a", "b"]]


def test_no_private_name_is_imported_across_modules() -> None:
    assert sorted(private_imports(project_modules())) == []


def test_a_private_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "probe.py").write_text(
        "from spec.log.session import _hidden, shown\nfrom spec import _moved\n", encoding="utf-8"
    )
    (tmp_path / "empty.py").write_text("", encoding="utf-8")
    modules = dict.fromkeys(("spec", "spec._moved", "spec.log.session"), tmp_path / "empty.py")
    modules["spec.probe"] = tmp_path / "probe.py"
    assert private_imports(modules) == {
        ("spec.probe", "spec.log.session", "_hidden"),
        ("spec.probe", "spec._moved", "_moved"),
    }


def test_the_readme_tours_the_chapters_in_their_order() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = readme[readme.index("## A short tour of the spec") :].split("\n## ")[0]
    assert re.findall(r"^\d\. \*\*[^*]*`spec/(\w+)/`", tour, re.MULTILINE) == list(CHAPTERS)


# --- each spec module has its test module --------------------------------------------------------

MODULES_WITHOUT_A_TEST_MODULE: Final = frozenset(
    {
        "spec.checks.compaction",
        "spec.checks.lineage",
        "spec.checks.turns",
        "spec.checks.violation",
        "spec.format.tables",
        "spec.lineage.transfer",
        "spec.log.events",
        "spec.log.header",
        "spec.log.nodes",
        "spec.log.provenance",
        "spec.log.seed",
        "spec.log.tool_rewrite",
        "spec.log.unclosed",
        "spec.log.writers",
        "spec.projections.catalogue",
        "spec.projections.digest",
        "spec.projections.durability",
        "spec.projections.units",
        "spec.shrink.bracket",
        "spec.shrink.compaction",
        "spec.shrink.pressure",
        "spec.shrink.summary",
    }
)
"""Spec modules whose tests still live in files about several modules (tests/test_*.py) or in
their chapter's other test modules; take a module off this list when it gets its own test module."""


def test_every_spec_module_has_its_test_module() -> None:
    """``spec/<chapter>/<name>.py`` is tested by ``tests/spec/<chapter>/test_<name>.py``, and every
    test module there is named after a spec module."""
    modules = {
        f"spec.{path.parent.name}.{path.stem}": path
        for chapter in CHAPTERS
        for path in sorted((ROOT / "spec" / chapter).glob("*.py"))
        if path.stem != "__init__"
    }
    tested = {
        f"spec.{path.parent.name}.{path.stem.removeprefix('test_')}"
        for path in (ROOT / "tests" / "spec").glob("*/test_*.py")
    }
    assert sorted(tested - set(modules)) == [], "test modules named after no spec module"
    assert sorted(set(modules) - tested - MODULES_WITHOUT_A_TEST_MODULE) == [], "spec modules without tests"
    assert sorted(MODULES_WITHOUT_A_TEST_MODULE & tested) == [], "remove from MODULES_WITHOUT_A_TEST_MODULE"
