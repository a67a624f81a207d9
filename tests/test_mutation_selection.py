"""The fast lane's selection (scripts/mutation.py): a mutant runs only the vector cases that execute
its statement in the unmutated subject; a multi-line statement or a compound statement's header
counts as one; a mutant no case executes runs none (it is recorded unreached, never killed)."""

from __future__ import annotations

import ast
import json
import os
import sys
import textwrap
from pathlib import Path

from cosmic_ray.work_item import MutationSpec

from conformance.report import CaseResult
from scripts import mutation
from scripts.mutation_trace import LineRecorder, read_appended

SOURCE = textwrap.dedent(
    """\
    @decorate(
        1,
    )
    def f(x, y=(
        2
    )):
        if (x and
                y > 3):
            return g(
                x,
                4,
            )
        try:
            h()
        except (
            ValueError
        ):
            pass
        return 5
    """
)


def test_a_statement_counts_as_a_whole_and_a_compound_one_by_its_header() -> None:
    tree = ast.parse(SOURCE)
    assert mutation.statement_lines(tree, 11) == {9, 10, 11, 12}  # `4,` inside return g(...)
    assert mutation.statement_lines(tree, 8) == {7, 8}  # the if's condition, not its body
    assert mutation.statement_lines(tree, 5) == {1, 2, 3, 4, 5, 6}  # a default: decorators, signature
    assert mutation.statement_lines(tree, 16) == {15, 16, 17}  # an except clause's type
    assert mutation.statement_lines(tree, 19) == {19}


def spec(module: str, line: int) -> MutationSpec:
    return MutationSpec(
        module_path=Path(module), operator_name="core/NumberReplacer", occurrence=0,
        start_pos=(line, 0), end_pos=(line, 1),
    )  # fmt: skip


def test_a_mutant_runs_only_the_cases_that_reach_its_statement() -> None:
    module = "spec/log/provenance.py"
    lines = (mutation.ROOT / module).read_text(encoding="utf-8").splitlines()
    raise_line = next(n for n, text in enumerate(lines, 1) if "raise reject(" in text)
    argument_line = raise_line + 1  # a continuation line: no line event of its own is needed
    assert lines[argument_line - 1].strip().startswith("Code.")
    coverage = mutation.CoverageMap.of(
        [
            ("a/reaches-the-raise", {module: [raise_line]}),
            ("b/elsewhere", {module: [raise_line + 40], "spec/log/json.py": [argument_line]}),
            ("c/reaches-it-too", {module: [1, raise_line]}),
        ]
    )
    trees: dict[str, ast.Module] = {}
    assert mutation.select_cases(spec(module, argument_line), coverage, trees) == [
        "a/reaches-the-raise",
        "c/reaches-it-too",
    ]
    assert mutation.select_cases(spec(module, raise_line + 40), coverage, trees) == ["b/elsewhere"]
    assert mutation.select_cases(spec(module, raise_line - 3), coverage, trees) == []  # unreached


def traced(tmp_path: Path, recorder: LineRecorder, calls: int) -> None:
    """``f(0)`` of a module ``pkg/m.py`` under ``tmp_path``, called ``calls`` times under ``recorder``
    (and a call outside the scope)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("def f(x):\n    if x:\n        return 1\n    return 2\n", encoding="utf-8")
    namespace: dict[str, object] = {}
    exec(compile((package / "m.py").read_text(encoding="utf-8"), str(package / "m.py"), "exec"), namespace)
    sys.settrace(recorder)
    try:
        for _ in range(calls):
            namespace["f"](0)  # type: ignore[operator]
        sorted([3, 1])  # outside the scope: not recorded
    finally:
        sys.settrace(None)


def test_the_recorder_sees_the_lines_a_call_runs_and_only_in_scope(tmp_path: Path) -> None:
    recorder = LineRecorder(tmp_path, ["pkg"])
    traced(tmp_path, recorder, 1)
    assert recorder.lines() == {"pkg/m.py": [1, 2, 4]}


def test_an_appending_recorder_writes_each_line_once_and_its_reader_reads_them(tmp_path: Path) -> None:
    out = tmp_path / "lines.txt"
    sink = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        traced(tmp_path, recorder := LineRecorder(tmp_path, ["pkg"], sink), 2)  # the second: nothing new
    finally:
        os.close(sink)
    assert out.read_text(encoding="utf-8").splitlines() == ["pkg/m.py\t1", "pkg/m.py\t2", "pkg/m.py\t4"]
    assert read_appended(out) == recorder.lines() == {"pkg/m.py": [1, 2, 4]}


def test_a_unit_map_runs_the_cheapest_units_first_and_a_verdict_counts_outcomes() -> None:
    units = mutation.unit_map_of(
        {
            "machine#0": {"verdict": ["passed: 1"], "seconds": 30.0, "lines": {"spec/a.py": [3]}},
            "files#0": {"verdict": ["passed: 9"], "seconds": 2.0, "lines": {"spec/a.py": [3, 4]}},
        }
    )
    assert units.coverage.reaching("spec/a.py", [3]) == ["files#0", "machine#0"]
    assert units.coverage.reaching("spec/a.py", [4]) == ["files#0"]
    results = [
        CaseResult("f", "a", "passed", ""),
        CaseResult("f", "b", "failed", ""),
        CaseResult("f", "c", "passed", ""),
    ]
    assert mutation.verdict(results) == ["failed: 1", "passed: 2"]


def test_a_backend_has_its_own_map_where_a_case_its_hello_rules_out_reaches_nothing(tmp_path: Path) -> None:
    assert mutation.with_backend(tmp_path / "coverage.json", "sqlite") == tmp_path / "coverage-sqlite.json"
    assert (
        mutation.with_backend(tmp_path / "coverage.json", mutation.DEFAULT_BACKEND)
        == tmp_path / "coverage.json"
    )
    assert mutation.subject_command(tmp_path, "sqlite").endswith("-m reference.server --backend sqlite")
    ruled_out = "storage/a-batch-bound-must-be-a-non-negative-integer"  # needs batch-policy
    coverage = mutation.coverage_map(1, [ruled_out], tmp_path / "coverage-sqlite.json", "sqlite")
    assert coverage.cases == (ruled_out,) and coverage.lines == {}
    simulated = mutation.coverage_map(1, [ruled_out], tmp_path / "coverage.json")
    assert simulated.reaching("reference/persistence/common.py", range(1, 200)) == [ruled_out]


def test_a_unit_map_traces_only_the_units_its_globs_choose_and_keeps_those_traced_before(
    tmp_path: Path,
) -> None:
    """A later lane run with ``--case files#*`` traces the files unit alone, not the whole lane; a
    unit the map already holds for this tree is kept as it was (never traced again)."""
    path = tmp_path / "coverage-stateful.json"
    kept = {"verdict": ["passed: 99"], "seconds": 1.0, "lines": {"spec/a.py": [1]}}
    path.write_text(
        json.dumps({"code": mutation.suite_digest(), "units": {"machine#0": kept}}), encoding="utf-8"
    )
    files = mutation.unit_map("stateful", 1, path, globs=["files#*"])
    assert files.coverage.cases == ("files#0",)
    assert files.verdicts["files#0"] == ["passed: 7"]
    assert set(json.loads(path.read_text(encoding="utf-8"))["units"]) == {"machine#0", "files#0"}
    machine = mutation.unit_map("stateful", 1, path, globs=["machine#*"])
    assert machine.verdicts == {"machine#0": ["passed: 99"]}


def test_the_directory_backend_serves_the_file_store_on_a_fresh_real_directory(tmp_path: Path) -> None:
    """``--backend directory``: each subject process gets an empty ``store`` directory as its
    ``CONFORMANCE_STORE_ROOT``, and a stored session's case reaches the real filesystem seam."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "left-over").write_text("x", encoding="utf-8")
    command = mutation.subject_command(tmp_path, mutation.DIRECTORY_BACKEND)
    assert f"CONFORMANCE_STORE_ROOT={tmp_path / 'store'} " in command
    assert command.endswith("-m reference.server --backend simulated")
    assert list((tmp_path / "store").iterdir()) == []
    case = "files/a-compressed-dsh-v0-child-of-an-empty-seed-seedlength-0-reads-as-seeded"  # file storage
    coverage = mutation.coverage_map(
        1, [case], tmp_path / "coverage-directory.json", mutation.DIRECTORY_BACKEND
    )
    write_new = range(164, 173)  # RealFileSystem.write_new's body
    assert "def write_new" in (mutation.ROOT / "reference/persistence/fs.py").read_text().splitlines()[162]
    assert coverage.reaching("reference/persistence/fs.py", write_new) == [case]
    simulated = mutation.coverage_map(1, [case], tmp_path / "coverage.json")
    assert simulated.reaching("reference/persistence/fs.py", write_new) == []
