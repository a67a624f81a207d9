"""Rules have names of their own: a public function's name is unique across spec/, every vector
names its rule by that name and cites the section of the rules material it enforces, and its file
name is its sentence cut at a word."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance import generate_vectors as gen
from conformance import spec_index
from conformance.cases import build
from conformance.report import SLUG_LENGTH, case_slug
from conformance.spec_index import VECTORS_DIR
from tests.shared_material import shared_dir

VECTORS = sorted(VECTORS_DIR.glob("*/*.json"))


def vectors() -> dict[str, dict[str, object]]:
    return {
        f"{path.parent.name}/{path.name}": json.loads(path.read_text(encoding="utf-8")) for path in VECTORS
    }


def test_every_public_function_of_spec_has_a_name_of_its_own() -> None:
    assert spec_index.duplicate_names() == {}
    assert spec_index.rule_path("plan_fork_seed") == "spec.lineage.fork.plan_fork_seed"


def test_a_name_two_modules_share_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = spec_index.Graph(public=["spec.a.plan_x", "spec.b.plan_x", "spec.b.plan_y"])
    monkeypatch.setattr(spec_index, "read_spec", lambda: graph)
    assert spec_index.duplicate_names() == {"plan_x": ["spec.a.plan_x", "spec.b.plan_x"]}


def test_every_vector_names_its_rule_by_a_stable_name_not_a_module_path() -> None:
    rules = {path: str(vector["rule"]) for path, vector in vectors().items()}
    assert {path: rule for path, rule in rules.items() if rule not in spec_index.rule_paths()} == {}


def test_a_case_that_names_its_rule_by_a_module_path_is_refused() -> None:
    with pytest.raises(build.GenerationError, match="is not a public function"):
        gen.build_vector("fork", build.case("x", "spec.lineage.fork.plan_fork_seed", []))


def cited_section(document: Path, section: str) -> bool:
    """Whether ``document`` has a heading for ``section`` (``§7.1``, ``D3``, or a heading's text)."""
    wanted = re.escape(section.removeprefix("§"))
    return (
        re.search(rf"^#+ {wanted}(\.|\s|$)", document.read_text(encoding="utf-8"), re.MULTILINE) is not None
    )


def test_every_vector_cites_a_section_of_the_rules_material_that_exists() -> None:
    shared = shared_dir()  # skips, saying so, where ../shared is absent
    problems = []
    for path, vector in vectors().items():
        document, _, section = str(vector.get("specification", "")).partition(" ")
        if not section:
            problems.append(f"{path}: no specification")
        elif not (shared / document).is_file():
            problems.append(f"{path}: {document} is not under {shared}")
        elif not cited_section(shared / document, section):
            problems.append(f"{path}: {document} has no heading {section}")
    assert problems == []


def test_a_citation_of_a_missing_heading_is_found(tmp_path: Path) -> None:
    document = tmp_path / "notes.md"
    document.write_text("# Title\n## 7. Fork\n### 7.1 `fork`\n## D3 Crash semantics\n", encoding="utf-8")
    assert [cited_section(document, s) for s in ("§7.1", "§7", "D3", "§7.2", "D31", "§1")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]


def test_a_rules_citation_comes_from_the_why_then_its_docstrings() -> None:
    assert spec_index.specification_of("plan_fork_seed", "see SPEC-DECISIONS D3") == "SPEC-DECISIONS.md D3"
    assert spec_index.specification_of("plan_fork_seed").startswith("notes/dsh-session-core.md §")


def test_a_file_name_is_its_sentence_cut_at_a_word() -> None:
    words = "a compressed log whose last frame is cut inside its first block is read and resumed nothing lost"
    name = case_slug(words)
    assert len(name) <= SLUG_LENGTH and name == "-".join(words.split()[: name.count("-") + 1])
    assert case_slug("short sentence") == "short-sentence"
    for path, vector in vectors().items():
        whole = re.sub(r"[^a-z0-9]+", "-", str(vector["name"]).lower()).strip("-")
        stem = path.split("/")[1].removesuffix(".json")
        assert whole == stem or whole.startswith(stem + "-"), path


def test_a_rule_raises_the_codes_of_its_callees_inside_spec() -> None:
    graph = spec_index.read_spec()
    path = spec_index.rule_path("plan_fork_seed")
    assert graph.codes[path] == ["INVALID_BOUNDARY"]
    assert dict(graph.codes_through(path)) == {
        "OPEN_COMPACTION": "spec.lineage.fork.validate_boundary_outside_open_compaction",
        "OPEN_TURN": "spec.lineage.fork.validate_boundary_outside_open_turn",
    }


def test_the_reader_finds_a_rules_vectors_case_entries_and_test_module() -> None:
    assert spec_index.vector_files()["plan_fork_seed"]
    assert all(file.startswith("fork/") for file in spec_index.vector_files()["plan_fork_seed"])
    entries = spec_index.case_entries()["plan_fork_seed"]
    assert entries and all(entry.startswith("conformance/cases/fork.py:") for entry in entries)
    assert "tests/spec/lineage/test_fork.py" in spec_index.test_modules()["plan_fork_seed"]
