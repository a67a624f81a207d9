"""Mutation testing of ``spec/`` and the named parts of ``reference/`` with cosmic-ray (issue 26, item 1).

    python -m scripts.mutation run [MODULE ...] [--lanes fast,drt,stateful] [--jobs N] [--timeout S]
    python -m scripts.mutation run MODULE ... --again    judge those modules' survivors again (new vectors)
    python -m scripts.mutation run --changed BASE        the fast lane on the lines a change touches
                                                         (BASE "ledger": since the ledger was last saved; CI)
    python -m scripts.mutation report [--markdown docs/mutation.md]   from the ledger
    python -m scripts.mutation save SESSION ...          save session databases into the ledger

cosmic-ray makes the mutants (its core operators), keeps the session database (SQLite: every
mutant, and its result as soon as it has one, so an interrupted run resumes where it stopped) and
applies each mutant and runs the lane's command under a per-mutant timeout (``mutate_and_test``).
This module hands the pending mutants to ``--jobs`` worker processes, each owning a copy of the
tree (``spec/``, ``reference/``, ``conformance/``) that it mutates in place and restores.

Every lane certifies the mutated copy as a *separate stdio process* (``python -m reference.server``
run in the copy), while the suite itself runs from this unmutated tree. So the oracle never
changes: a mutant of ``spec/`` is judged by the suite's vectors (expected answers held as data), by
pure-drt's differential oracle (``spec/`` unmutated, compared with the mutated subject) and by the
stateful families' models, all unmutated. In process, a mutant of ``spec/`` would mutate pure-drt's
and the models' oracle too, and could only be judged by the vectors.

Lanes, cheapest first; a lane runs only the mutants every earlier lane let survive:
  fast      the vector cases that reach the mutant (about half a second a mutant): each worker is one
            long-lived suite process that starts only the mutated subject per mutant, and runs the
            cases a coverage map (traced once in the unmutated subject, :mod:`scripts.mutation_trace`)
            says execute the mutant's statement; a mutant none reaches is recorded *unreached* (a
            survivor, "no case reaches it") without running; ``--all-cases`` runs every case
  drt       pure-drt, the pure functions against the spec
  stateful  machine, exhaustive, files, crash
The later lanes are selective too: their units (each part of a split family, each whole family,
:func:`conformance.runner.plan_units`) are traced once per tree in a subject whose every process
appends the lines it runs (``coverage-LANE.json``, with each unit's verdict on the unmutated tree),
and a mutant runs only the units that execute its statement, cheapest first, each on a fresh
mutated subject; it is killed when a unit's verdict differs from the unmutated one.

A mutant is *killed* when the suite exits non-zero (a failing case, or a subject that does not
start), *timeout* when the lane outlives ``--timeout``, *survived* otherwise; a survivor listed in
the reviewed file ``docs/mutation-equivalents.json`` is *equivalent* (with the reason it cannot
change any answer) or carries its triage (the vector or edge that would kill it). The report per
module and per rule (the enclosing function) is written to ``docs/mutation.md``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import functools
import hashlib
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import cosmic_ray.plugins
from cosmic_ray.commands.init import _all_work_items
from cosmic_ray.commands.init import init as cosmic_ray_init
from cosmic_ray.mutating import mutate_code, use_mutation
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome, WorkItem, WorkResult

from conformance.report import CaseResult, Options
from conformance.runner import Unit, hello, load_vectors, plan_units, run_vector, unit_alone, vector_key
from conformance.subject import StdioSubject, SubjectError
from scripts.mutation_trace import read_appended
from spec.protocol import STORE_ROOT_ENV

ROOT: Final = Path(__file__).resolve().parent.parent
PYTHON: Final = sys.executable
# What is mutated: all of spec/, and of reference/ the store, the session, persistence, shrinking
# and projections (not the CLI's presentation, the HTML page, the benchmarks or the subjects).
SCOPE: Final = ("spec", "reference/store.py", "reference/session.py", "reference/persistence",
                "reference/shrink", "reference/projections")  # fmt: skip
COPIED: Final = ("spec", "reference", "conformance")  # what a worker's copy holds
VECTOR_FAMILIES: Final = tuple(
    sorted(p.name for p in (ROOT / "conformance" / "vectors").iterdir() if p.is_dir())
)
LANES: Final[dict[str, tuple[str, ...]]] = {
    "fast": VECTOR_FAMILIES,
    "drt": ("pure-drt",),
    "stateful": ("machine", "exhaustive", "files", "crash"),
}
DEFAULT_TIMEOUTS: Final = {"fast": 60.0, "drt": 300.0, "stateful": 900.0}
STATE_DIR: Final = ROOT / ".scratch" / "mutation"  # the session databases
COPIES_DIR: Final = Path(tempfile.gettempdir()) / f"dsh-mutation-{ROOT.name}"  # the workers' trees
EQUIVALENTS: Final = ROOT / "docs" / "mutation-equivalents.json"
REPORT: Final = ROOT / "docs" / "mutation.md"
# every mutant's results, kept in the repository: a fresh clone resumes from it and reports it
LEDGER: Final = ROOT / "docs" / "mutation-ledger.json"
OUTCOMES: Final = ("killed", "timeout", "survived", "equivalent", "incompetent", "skipped", "pending")
COVERAGE: Final = STATE_DIR / "coverage.json"  # the fast lane's map: which vector cases reach which line
UNIT_COVERAGE: Final = STATE_DIR / "coverage-{lane}.json"  # a later lane's map of its units
DEFAULT_BACKEND: Final = "simulated"  # the stdio subject's storage (reference.server --backend)
# the file store on a real directory (reference.directory: the server's default backend with
# CONFORMANCE_STORE_ROOT set), which reaches the real filesystem seam (reference/persistence/fs.py)
DIRECTORY_BACKEND: Final = "directory"
BACKENDS: Final = ("simulated", "sqlite", "postgres", DIRECTORY_BACKEND)
NO_CASE: Final = "no case reaches it"  # a fast-lane survivor no vector case executes (not run)
SURVIVING: Final = ("survived", "unreached")  # lane outcomes that send a mutant to the next lane
RESPONSE_TIMEOUT: Final = 20.0  # seconds a mutated subject may take to answer one request
SUBJECT_ENV: Final = {"PYTHONDONTWRITEBYTECODE": "1"}  # a mutant's bytecode is never cached
LOCK_WAIT: Final = 120.0  # seconds to wait for a session database another run is writing


# -- what to mutate ------------------------------------------------------------------------------


def scope_files(names: Sequence[str] = ()) -> list[str]:
    """The files to mutate (relative to the root): every ``.py`` file under the named modules, paths
    or dotted names, each of which must lie in :data:`SCOPE`; all of the scope when none is named."""
    wanted = [name.replace(".", "/") if not name.endswith(".py") and "/" not in name else name
              for name in names] or list(SCOPE)  # fmt: skip
    found: list[str] = []
    for name in wanted:
        path = ROOT / name
        if not path.exists() and (ROOT / f"{name}.py").exists():
            path = ROOT / f"{name}.py"
        if not path.exists():
            raise SystemExit(f"no such module: {name}")
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for file in files:
            relative = file.relative_to(ROOT).as_posix()
            if not in_scope(relative):
                raise SystemExit(f"{relative} is outside the mutation scope ({', '.join(SCOPE)})")
            if relative not in found:
                found.append(relative)
    return found


def in_scope(relative: str) -> bool:
    return relative.endswith(".py") and any(relative == s or relative.startswith(f"{s}/") for s in SCOPE)


def changed_lines(base: str) -> dict[str, set[int]]:
    """The lines of the files in scope that differ between ``base`` and the working tree (as
    cosmic-ray's ``cr-filter-git`` reads them): a change's mutants are the ones on its lines."""
    diff = subprocess.run(
        ["git", "-C", str(ROOT), "diff", "-U0", "--diff-filter=d", base, "--", *SCOPE],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    lines: dict[str, set[int]] = defaultdict(set)
    current = ""
    for line in diff.splitlines():
        if line.startswith("+++ "):
            current = line[len("+++ b/") :] if line.startswith("+++ b/") else ""
        elif line.startswith("@@") and in_scope(current):
            start, _, count = line.split()[2].lstrip("+").partition(",")
            lines[current].update(range(int(start), int(start) + int(count or 1)))
    return {name: found for name, found in lines.items() if found}


def ledger_base() -> str:
    """The commit that last saved the ledger (``--changed ledger``): the lines of the scope changed
    since are the ones no saved run judged. A checkout without that history (not a git clone, or a
    shallow one) is told so instead of judging nothing."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%H", "--", str(LEDGER.relative_to(ROOT))],
        capture_output=True, text=True,
    )  # fmt: skip
    if found.returncode != 0 or not found.stdout.strip():
        raise SystemExit(
            f"--changed ledger: no commit of {LEDGER.relative_to(ROOT)} in this checkout's history"
        )
    return found.stdout.strip()


# -- the session database -----------------------------------------------------------------------

LANE_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS lane_results (job_id TEXT, lane TEXT, outcome TEXT, seconds REAL, "
    "PRIMARY KEY (job_id, lane))"
)
META_TABLE: Final = "CREATE TABLE IF NOT EXISTS mutation_meta (key TEXT PRIMARY KEY, value TEXT)"


def open_session(path: Path, files: Sequence[str], fresh: bool, ledger: Path | None = None) -> None:
    """Create the session's mutants with cosmic-ray, or resume the database when it exists (its
    results kept: a run naming one module of a whole-scope session runs that module's mutants; a
    module edited since is made again, :func:`refresh_changed`; a module it lacks is added, so a
    run naming another module never loses what the session holds). A module made anew (a new
    session's, an added one) takes its results from ``ledger`` when its mutants are the ledger's
    (:func:`load_from_ledger`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not fresh:
        with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
            db.execute(META_TABLE)
            row = db.execute("SELECT value FROM mutation_meta WHERE key = 'files'").fetchone()
        if row is not None:
            for module in drop_outside_scope(path):
                print(f"{module} is no longer in the mutation scope: its mutants dropped from the session")
            with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
                known = json.loads(
                    db.execute("SELECT value FROM mutation_meta WHERE key = 'files'").fetchone()[0]
                )
                added = [file for file in files if file not in known]
                db.execute(
                    "UPDATE mutation_meta SET value = ? WHERE key = 'files'",
                    (json.dumps(sorted({*known, *added})),),
                )
            for module in refresh_changed(path, files):
                print(
                    f"{module} {'added to the session' if module in added else 'changed since the session made its mutants: made again'}, to be judged"
                )
            take_results(path, ledger, added)
            return
    if path.exists():
        path.unlink()
    with use_db(str(path), WorkDB.Mode.create) as work_db:
        cosmic_ray_init([Path(file) for file in files], work_db, {})
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        db.execute(META_TABLE)
        db.execute(LANE_TABLE)
        db.execute("INSERT OR REPLACE INTO mutation_meta VALUES ('files', ?)", (json.dumps(sorted(files)),))
    record_sources(path, files)
    take_results(path, ledger, files)


def take_results(path: Path, ledger: Path | None, modules: Sequence[str]) -> None:
    if ledger is not None and modules:
        for module in load_from_ledger(path, ledger, modules):
            print(f"{module}: its results taken from {ledger.name}")


def source_digests(files: Sequence[str]) -> dict[str, str]:
    return {file: hashlib.sha256((ROOT / file).read_bytes()).hexdigest() for file in files}


def record_sources(path: Path, files: Sequence[str]) -> None:
    """Record the digest of each of ``files`` as the session's mutants of it were made from."""
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        row = db.execute("SELECT value FROM mutation_meta WHERE key = 'sources'").fetchone()
        known = {**(json.loads(row[0]) if row is not None else {}), **source_digests(files)}
        db.execute("INSERT OR REPLACE INTO mutation_meta VALUES ('sources', ?)", (json.dumps(known),))


Place = tuple[str, int, tuple[int, int], tuple[int, int], str]


def place_of(mutation: MutationSpec) -> Place:
    """What names a mutant across sessions: its operator, occurrence, span and rule."""
    return (mutation.operator_name, mutation.occurrence, (mutation.start_pos[0], mutation.start_pos[1]),
            (mutation.end_pos[0], mutation.end_pos[1]), mutation.definition_name or "")  # fmt: skip


def mutant_places(items: Iterable[WorkItem]) -> set[Place]:
    """What makes a module's mutants the same set: each one's place (:func:`place_of`)."""
    return {place_of(item.mutations[0]) for item in items}


def refresh_changed(path: Path, files: Sequence[str]) -> list[str]:
    """Make again the mutants of each of ``files`` whose source changed since the session made
    them (its digest differs from the recorded one, or none is recorded) and whose mutants now
    differ: cosmic-ray applies a mutant by its operator's occurrence in the module, so a recorded
    mutant of an edited module mutates another place than the line and rule it names, and the
    fast lane would choose its cases by the wrong line. Their results go with them; the new
    mutants are pending. Returns the modules whose mutants were made again."""
    digests = source_digests(files)
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        row = db.execute("SELECT value FROM mutation_meta WHERE key = 'sources'").fetchone()
    known = json.loads(row[0]) if row is not None else {}
    changed = [file for file in files if known.get(file) != digests[file]]
    remade: list[str] = []
    if changed:
        with use_db(str(path), WorkDB.Mode.open) as work_db:
            recorded: dict[str, list[WorkItem]] = defaultdict(list)
            for item in work_db.work_items:
                recorded[Path(item.mutations[0].module_path).as_posix()].append(item)
            for module in changed:
                fresh = list(_all_work_items([Path(module)], {}))
                if mutant_places(fresh) == mutant_places(recorded[module]):
                    continue
                drop_jobs(path, [item.job_id for item in recorded[module]])
                work_db.add_work_items(fresh)
                remade.append(module)
    record_sources(path, files)
    return remade


def drop_outside_scope(path: Path) -> list[str]:
    """Drop the mutants of every module the session holds that is no longer a file of the scope
    (moved out of it or removed), with their results: the report counts only what is mutated now.
    Returns those modules."""
    with use_db(str(path), WorkDB.Mode.open) as work_db:
        gone: dict[str, list[str]] = defaultdict(list)
        for item in work_db.work_items:
            module = Path(item.mutations[0].module_path).as_posix()
            if not in_scope(module) or not (ROOT / module).is_file():
                gone[module].append(item.job_id)
    if gone:
        drop_jobs(path, [job for jobs in gone.values() for job in jobs])
        with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
            row = db.execute("SELECT value FROM mutation_meta WHERE key = 'files'").fetchone()
            kept = [file for file in json.loads(row[0]) if file not in gone] if row is not None else []
            db.execute("INSERT OR REPLACE INTO mutation_meta VALUES ('files', ?)", (json.dumps(kept),))
    return sorted(gone)


def annotation_spans(module: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where ``module``'s annotations are (start and end as (line, column)), when the module
    postpones them (``from __future__ import annotations``): text never evaluated at run time."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    postponed = any(
        isinstance(node, ast.ImportFrom) and node.module == "__future__"
        and any(alias.name == "annotations" for alias in node.names)
        for node in tree.body
    )  # fmt: skip
    if not postponed:
        return []
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            found.append(node.returns)
    return [((a.lineno, a.col_offset), (a.end_lineno or a.lineno, a.end_col_offset or 0)) for a in found]


def in_annotation(spans: Sequence[tuple[tuple[int, int], tuple[int, int]]], mutation: MutationSpec) -> bool:
    """Whether ``mutation`` starts inside one of ``spans`` (:func:`annotation_spans`)."""
    start = place_of(mutation)[2]
    return any(begin <= start < end for begin, end in spans)


def skip_annotations(path: Path) -> None:
    """Mark the mutants inside a postponed annotation as skipped (cosmic-ray's ``SKIPPED``, as its
    own filters do): ``X | None`` made ``X - None`` changes no behaviour, only a string."""
    with use_db(str(path), WorkDB.Mode.open) as work_db:
        spans: dict[str, list[tuple[tuple[int, int], tuple[int, int]]]] = {}
        skipped = []
        for item in work_db.work_items:
            mutation = item.mutations[0]
            module = str(mutation.module_path)
            if module not in spans:
                spans[module] = annotation_spans(ROOT / module)
            if in_annotation(spans[module], mutation):
                skipped.append(item.job_id)
        if skipped:
            work_db.set_multiple_results(
                skipped,
                WorkResult(output="inside a postponed annotation", worker_outcome=WorkerOutcome.SKIPPED),
            )
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        db.execute(LANE_TABLE)
        db.executemany("DELETE FROM lane_results WHERE job_id = ?", [(job_id,) for job_id in skipped])


def lane_rows(path: Path) -> dict[str, dict[str, tuple[str, float]]]:
    """``job id -> lane -> (outcome, seconds)``."""
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        db.execute(LANE_TABLE)
        rows = db.execute("SELECT job_id, lane, outcome, seconds FROM lane_results").fetchall()
    found: dict[str, dict[str, tuple[str, float]]] = defaultdict(dict)
    for job_id, lane, outcome, seconds in rows:
        found[job_id][lane] = (outcome, seconds)
    return found


def record(path: Path, work_db: WorkDB, job_id: str, lane: str, result: WorkResult, seconds: float) -> str:
    """Keep a lane's result: in cosmic-ray's results (the last lane's word, what ``cr-report``
    shows) and in the lane table (every lane's)."""
    outcome = outcome_of(result)
    work_db.set_result(job_id, result)
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        db.execute(
            "INSERT OR REPLACE INTO lane_results VALUES (?, ?, ?, ?)", (job_id, lane, outcome, seconds)
        )
    return outcome


def outcome_of(result: WorkResult) -> str:
    if result.worker_outcome == WorkerOutcome.SKIPPED:
        return "skipped"
    if result.worker_outcome == WorkerOutcome.NO_TEST:
        return "incompetent"
    if result.worker_outcome != WorkerOutcome.NORMAL:
        return "incompetent"
    if result.test_outcome == TestOutcome.KILLED:
        return "timeout" if result.output == "timeout" else "killed"
    if result.test_outcome == TestOutcome.SURVIVED:
        return "unreached" if result.output == NO_CASE else "survived"
    return "incompetent"


# -- the fast lane: which vector cases reach which line -------------------------------------------


def code_digest() -> str:
    """What every case's trace depends on: the code the subject runs."""
    digest = hashlib.sha256()
    for path in sorted([*(ROOT / "spec").rglob("*.py"), *(ROOT / "reference").rglob("*.py")]):
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def vector_digest(vector: dict[str, Any]) -> str:
    """What one case's trace depends on besides the code: its vector."""
    return hashlib.sha256(json.dumps(vector, sort_keys=True).encode()).hexdigest()


Lines = dict[str, list[int]]  # module -> the lines executed in it


@dataclass(frozen=True)
class CoverageMap:
    """Which of the suite's vector cases (keys, in the suite's order) execute each line of the
    scope, as traced in the unmutated stdio subject (:mod:`scripts.mutation_trace`), one fresh
    process per case, so that no case's lines depend on the cases run before it."""

    cases: tuple[str, ...]
    lines: dict[str, dict[int, frozenset[int]]]  # module -> line -> indexes into cases

    @classmethod
    def of(cls, traced: Sequence[tuple[str, Lines]]) -> CoverageMap:
        lines: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
        for index, (_, found) in enumerate(traced):
            for module, numbers in found.items():
                for number in numbers:
                    lines[module][number].add(index)
        frozen = {
            module: {line: frozenset(cases) for line, cases in found.items()}
            for module, found in lines.items()
        }
        return cls(tuple(key for key, _ in traced), frozen)

    def reaching(self, module: str, lines: Iterable[int]) -> list[str]:
        """The cases (suite order) that execute any of ``lines`` of ``module``."""
        hit: set[int] = set()
        for line in lines:
            hit |= self.lines.get(module, {}).get(line, frozenset())
        return [self.cases[index] for index in sorted(hit)]


def trace_case(vector: dict[str, Any], backend: str = DEFAULT_BACKEND) -> tuple[str, str, Lines]:
    """One vector case against a fresh traced subject: its key, its outcome (and why, unless it
    passed) and the lines of the scope the subject executed, its imports included."""
    with tempfile.TemporaryDirectory(prefix="dsh-mutation-trace-") as scratch:
        out = Path(scratch) / "lines.json"
        subject = StdioSubject(traced_command(out, backend), timeout=120.0)
        try:
            said = hello(subject)
            result = run_vector(subject, vector, said.capabilities, said.target)
        finally:
            subject.close()
        found = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    outcome = result.outcome if result.outcome == "passed" else f"{result.outcome}: {result.detail}"
    return vector_key(vector), outcome, found


@functools.cache
def vectors_by_key() -> dict[str, dict[str, Any]]:
    """The suite's vector cases by key, loaded once a process."""
    return {vector_key(vector): vector for vector in load_vectors()}


def chosen_vectors(globs: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The suite's vector cases (its order) whose keys match ``globs`` (all of them when none)."""
    return [
        v for v in load_vectors() if not globs or any(fnmatch.fnmatchcase(vector_key(v), g) for g in globs)
    ]


def coverage_map(
    jobs: int, globs: Sequence[str] = (), path: Path = COVERAGE, backend: str = DEFAULT_BACKEND
) -> CoverageMap:
    """The map over the cases ``globs`` choose. Each case's trace is kept in ``path`` until the
    code or its vector changes: only new and changed cases are traced (``jobs`` at a time), and
    each must pass on the unmutated tree."""
    code = code_digest()
    kept = load_map(path, code, "cases")
    vectors = chosen_vectors(globs)
    missing = [v for v in vectors if kept.get(vector_key(v), {}).get("vector") != vector_digest(v)]
    if missing:
        started = time.monotonic()
        failing = []
        lost: list[Any] = []
        by_key = {vector_key(v): v for v in missing}
        trace = functools.partial(trace_case, backend=backend)
        for done, (key, outcome, found) in enumerate(
            in_workers(trace, list(by_key.items()), jobs, hard_limit(120.0), lost), 1
        ):
            if outcome.startswith("unsupported"):  # a capability the backend lacks: it reaches nothing
                found = {}
            elif outcome != "passed":
                failing.append(f"{key}: {outcome}")
            kept[key] = {"vector": vector_digest(by_key[key]), "lines": found}
            if done % 50 == 0 or done == len(missing):
                print(
                    f"coverage: {done}/{len(missing)} cases traced {time.monotonic() - started:.0f}s",
                    flush=True,
                )
        failing += [f"{key}: its tracing worker died or hung {TRIES} times" for key, _ in lost]
        if failing:
            raise SystemExit("the unmutated tree fails vector cases:\n" + "\n".join(failing[:10]))
        save_map(path, {"code": code, "cases": kept})
    return CoverageMap.of([(vector_key(v), kept[vector_key(v)]["lines"]) for v in vectors])


def statement_lines(tree: ast.Module, line: int) -> set[int]:
    """The lines one of which runs whenever a mutant on ``line`` runs: those of the statement
    holding it (of a compound statement, its header: decorators, signature, condition; of an
    ``except`` clause, its line). A line event fires on at least one line of a statement that runs,
    but not on every one (a constant folded across lines fires none of its own)."""
    found = {line}
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt | ast.ExceptHandler):
            continue
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        last = node.end_lineno or node.lineno
        inner = [child for block in ("body", "orelse", "finalbody", "handlers")
                 for child in getattr(node, block, [])]  # fmt: skip
        if inner:  # a compound statement: only its header, the lines before its first block
            last = max(first, min(child.lineno for child in inner) - 1)
        if first <= line <= last:
            found.update(range(first, last + 1))
    return found


def select_cases(mutation: MutationSpec, coverage: CoverageMap, trees: dict[str, ast.Module]) -> list[str]:
    """The vector cases that can tell ``mutation`` apart: those of the map that execute its
    statement in the unmutated tree (any other case runs exactly as it would unmutated)."""
    module = Path(mutation.module_path).as_posix()
    if module not in trees:
        trees[module] = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    return coverage.reaching(module, statement_lines(trees[module], mutation.start_pos[0]))


def certify(
    copy: Path, keys: Sequence[str], timeout: float, backend: str = DEFAULT_BACKEND
) -> tuple[TestOutcome, str]:
    """The copy's reference, as a stdio process, against the vector cases ``keys`` run from this
    (unmutated) process: killed at the first case that does not pass, or once ``timeout`` has
    passed (``output`` "timeout"), survived when every case passes."""
    subject = StdioSubject(
        subject_command(copy, backend), timeout=min(RESPONSE_TIMEOUT, timeout), env=SUBJECT_ENV
    )
    deadline = time.monotonic() + timeout
    try:
        try:
            said = hello(subject)
        except SubjectError as error:
            return TestOutcome.KILLED, "timeout" if "no answer" in str(error) else f"hello: {error}"
        for key in keys:
            if time.monotonic() > deadline:
                return TestOutcome.KILLED, "timeout"
            result = run_vector(subject, vectors_by_key()[key], said.capabilities, said.target)
            if result.outcome == "unsupported":  # ruled out by hello's capabilities (outside the scope)
                continue
            if result.outcome != "passed":
                if subject.dead is not None and "no answer" in subject.dead:
                    return TestOutcome.KILLED, "timeout"
                why = f"{key}: {result.outcome}: {result.detail}"
                # the session database keeps UTF-8: a lone surrogate in the detail as its escape
                return TestOutcome.KILLED, why.encode("utf-8", "backslashreplace").decode("utf-8")
        return TestOutcome.SURVIVED, f"{len(keys)} cases passed"
    finally:
        subject.close()


def operator_of(mutation: MutationSpec) -> Any:
    operator_class = cosmic_ray.plugins.get_operator(mutation.operator_name)
    return operator_class(**(getattr(mutation, "operator_args", None) or {}))


def mutation_diff(original: str, mutated: str, module: str) -> str:
    """The mutant as cosmic-ray's ``mutate_and_test`` shows it (a unified diff)."""
    lines = difflib.unified_diff(original.split("\n"), mutated.split("\n"), fromfile=f"a/{module}",
                                 tofile=f"b/{module}", lineterm="")  # fmt: skip
    return "\n".join(["--- mutation diff ---", *lines])


def mutate_and_run(
    copy: Path, mutation: MutationSpec, judge: Callable[[], tuple[TestOutcome, str]]
) -> WorkResult:
    """cosmic-ray's ``mutate_and_test`` with the suite in this process instead of a command: the
    mutant applied to the copy, ``judge`` run (:func:`certify`, :func:`certify_units`), the copy
    restored."""
    try:
        path = copy / mutation.module_path
        with use_mutation(path, operator_of(mutation), mutation.occurrence) as (original, mutated):
            if mutated is None:
                return WorkResult(worker_outcome=WorkerOutcome.NO_TEST)
            outcome, output = judge()
        diff = mutation_diff(original, mutated, Path(mutation.module_path).as_posix())
        return WorkResult(output=output, diff=diff, test_outcome=outcome, worker_outcome=WorkerOutcome.NORMAL)
    except Exception:
        return WorkResult(
            output=traceback.format_exc(), test_outcome=TestOutcome.INCOMPETENT,
            worker_outcome=WorkerOutcome.EXCEPTION,
        )  # fmt: skip


def unreached(mutation: MutationSpec) -> WorkResult:
    """A fast-lane survivor no vector case executes: recorded without running (its diff made in memory)."""
    module = Path(mutation.module_path).as_posix()
    original = (ROOT / module).read_text(encoding="utf-8")
    try:
        mutated = mutate_code(original, operator_of(mutation), mutation.occurrence)
    except Exception:  # cosmic-ray's operator fails on this node: as mutate_and_run records it
        return WorkResult(
            output=traceback.format_exc(), test_outcome=TestOutcome.INCOMPETENT,
            worker_outcome=WorkerOutcome.EXCEPTION,
        )  # fmt: skip
    if mutated is None:
        return WorkResult(worker_outcome=WorkerOutcome.NO_TEST)
    return WorkResult(output=NO_CASE, diff=mutation_diff(original, mutated, module),
                      test_outcome=TestOutcome.SURVIVED, worker_outcome=WorkerOutcome.NORMAL)  # fmt: skip


def worker(copy: Path, judge: Callable[[Path, Sequence[str]], tuple[TestOutcome, str]],
           connection: Any) -> None:  # fmt: skip
    """One long-lived suite process: per mutant it is handed on its own pipe, ``judge``
    (:func:`certify` in the fast lane, :func:`certify_units` in a later one) with the copy mutated,
    over the cases or units that reach the mutant (none: recorded unreached without running), each
    on a fresh subject process; the result goes back on the same pipe."""
    os.chdir(ROOT)
    previous = ""
    while (item := connection.recv()) is not None:
        job_id, mutation, keys = item
        started = time.monotonic()
        if not intact(copy):  # something removed part of it: judge no mutant on a broken tree
            print(f"{copy}: damaged after job {previous}, copied again", file=sys.stderr, flush=True)
            make_copy(copy)
        previous = job_id
        if not keys:  # nothing run: no time spent certifying
            connection.send((job_id, unreached(mutation), 0.0))
            continue
        result = mutate_and_run(copy, mutation, functools.partial(judge, copy, keys))
        connection.send((job_id, result, time.monotonic() - started))


# -- the later lanes: which units of the stateful families reach which line -----------------------


def unit_key(unit: Unit) -> str:
    """A stateful unit's name in a coverage map: its family and part (``exhaustive#3``)."""
    return f"{unit.family}#{unit.part}"


def lane_units(lane: str, said: Any) -> list[Unit]:
    """The units a later lane runs against a subject that said ``said`` to hello: each part of its
    split families, each of its whole ones (a vector family of the same name, like files, left to
    the fast lane)."""
    options = lane_options(lane, said)
    return [unit for unit in plan_units(options) if unit.part >= 0]


def lane_options(lane: str, said: Any, deadline: float | None = None) -> Options:
    return Options(families=frozenset(LANES[lane]), capabilities=said.capabilities, target=said.target,
                   deadline=deadline)  # fmt: skip


def verdict(results: Sequence[CaseResult]) -> list[str]:
    """What a unit's run came to, to compare with the unmutated tree's: its cases' outcomes, counted
    (a unit alone may fail a check of the whole family, a coverage minimum, on the unmutated tree
    too; what tells a mutant apart is a change)."""
    counts = Counter(result.outcome for result in results)
    return [f"{outcome}: {count}" for outcome, count in sorted(counts.items())]


def trace_unit(task: tuple[str, str], backend: str = DEFAULT_BACKEND) -> tuple[str, list[str], float, Lines]:
    """One stateful unit against a fresh traced subject (every process it starts, restarts after a
    SIGKILL included, appending its lines to one file): its key, verdict, seconds and lines."""
    lane, key = task
    with tempfile.TemporaryDirectory(prefix="dsh-mutation-trace-") as scratch:
        out = Path(scratch) / "lines.txt"
        subject = StdioSubject(traced_command(out, backend, append=True), timeout=600.0)
        started = time.monotonic()
        try:
            said = hello(subject)
            unit = next(u for u in lane_units(lane, said) if unit_key(u) == key)
            results = unit_alone(subject, lane_options(lane, said), unit)
        finally:
            subject.close()
        seconds = time.monotonic() - started
        found = read_appended(out)
    return key, verdict(results), seconds, found


@dataclass(frozen=True)
class UnitMap:
    """A later lane's coverage map (:class:`CoverageMap` over its units, cheapest first), with each
    unit's verdict on the unmutated tree and the seconds it took traced."""

    coverage: CoverageMap
    verdicts: dict[str, list[str]]
    seconds: dict[str, float]


def unit_map(
    lane: str, jobs: int, path: Path | None = None, backend: str = DEFAULT_BACKEND, globs: Sequence[str] = ()
) -> UnitMap:
    """The map of ``lane``'s units that ``globs`` choose (all of them when none), each traced
    (``jobs`` at a time) unless ``path`` holds it for this tree: the code the subject runs and the
    suite's own (the units are code, not data). The units traced before for the same tree are kept,
    so a run naming a few units (``--case crash#*``) traces only those, and a later one the rest."""
    path = path or with_backend(Path(str(UNIT_COVERAGE).format(lane=lane)), backend)
    code = suite_digest()
    units = load_map(path, code, "units")
    with tempfile.TemporaryDirectory(prefix="dsh-mutation-hello-") as scratch:
        subject = StdioSubject(server_command(backend, Path(scratch)), timeout=60.0)
        try:
            keys = [unit_key(unit) for unit in lane_units(lane, hello(subject))]
        finally:
            subject.close()
    keys = [key for key in keys if not globs or any(fnmatch.fnmatchcase(key, glob) for glob in globs)]
    missing = [key for key in keys if key not in units]
    if missing:
        started = time.monotonic()
        lost: list[Any] = []
        trace = functools.partial(trace_unit, backend=backend)
        for done, (key, said, seconds, found) in enumerate(
            in_workers(trace, [(k, (lane, k)) for k in missing], jobs, hard_limit(600.0), lost), 1
        ):
            units[key] = {"verdict": said, "seconds": seconds, "lines": found}
            print(f"coverage ({lane}): {done}/{len(missing)} units traced, {key} {seconds:.0f}s "
                  f"{said} ({time.monotonic() - started:.0f}s)", flush=True)  # fmt: skip
            save_map(path, {"code": code, "units": units})  # a unit traced is kept, even if the run stops
        if lost:
            raise SystemExit(f"coverage ({lane}): the workers tracing {' '.join(k for k, _ in lost)} died or "
                             f"hung {TRIES} times; run the same command again")  # fmt: skip
    return unit_map_of({key: units[key] for key in keys})


def load_map(path: Path, code: str, key: str) -> dict[str, dict[str, Any]]:
    """What a coverage map's file keeps under ``key``, if it was traced for ``code``; else nothing."""
    if not path.exists():
        return {}
    cache = json.loads(path.read_text(encoding="utf-8"))
    return dict(cache[key]) if cache.get("code") == code else {}


def save_map(path: Path, traced: dict[str, Any]) -> None:
    """A coverage map's file, written whole or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(traced), encoding="utf-8")
    partial.replace(path)


def suite_digest() -> str:
    """What a unit's trace depends on: the code the subject runs and the suite's own."""
    digest = hashlib.sha256(code_digest().encode())
    for file in sorted((ROOT / "conformance").rglob("*.py")):
        digest.update(file.relative_to(ROOT).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def unit_map_of(units: dict[str, dict[str, Any]]) -> UnitMap:
    cheapest = sorted(units, key=lambda key: units[key]["seconds"])
    return UnitMap(
        CoverageMap.of([(key, units[key]["lines"]) for key in cheapest]),
        {key: units[key]["verdict"] for key in cheapest},
        {key: units[key]["seconds"] for key in cheapest},
    )


def certify_units(
    copy: Path,
    keys: Sequence[str],
    lane: str,
    verdicts: dict[str, list[str]],
    timeout: float,
    backend: str = DEFAULT_BACKEND,
) -> tuple[TestOutcome, str]:
    """The copy's reference, as a stdio process (a fresh one per unit, as traced), through the
    units ``keys`` (cheapest first) run from this unmutated process: killed at the first whose
    verdict is not the unmutated tree's, or once ``timeout`` has passed; survived otherwise."""
    deadline = time.monotonic() + timeout
    for key in keys:
        subject = StdioSubject(
            subject_command(copy, backend), timeout=min(RESPONSE_TIMEOUT, timeout), env=SUBJECT_ENV
        )
        try:
            try:
                said = hello(subject)
            except SubjectError as error:
                return TestOutcome.KILLED, "timeout" if "no answer" in str(error) else f"hello: {error}"
            unit = next((u for u in lane_units(lane, said) if unit_key(u) == key), None)
            if unit is None:
                return TestOutcome.KILLED, f"{key}: the subject's hello plans no such unit"
            results = unit_alone(subject, lane_options(lane, said, deadline), unit)
            if time.monotonic() > deadline:
                return TestOutcome.KILLED, "timeout"
            found = verdict(results)
            if found != verdicts[key]:
                if subject.dead is not None and "no answer" in subject.dead:
                    return TestOutcome.KILLED, "timeout"
                failing = next((r for r in results if r.outcome != "passed"), None)
                why = f"{failing.name}: {failing.detail[:300]}" if failing is not None else ""
                return TestOutcome.KILLED, f"{key}: {found} (unmutated {verdicts[key]}) {why}"
        finally:
            subject.close()
    return TestOutcome.SURVIVED, f"{len(keys)} units agreed"


# -- running ------------------------------------------------------------------------------------


def make_copies(jobs: int, state: Path = COPIES_DIR) -> list[Path]:
    """One fresh copy of the tree per worker (fresh each run: a worker killed mid-mutant leaves its
    copy mutated)."""
    return [make_copy(state / f"worker-{index}") for index in range(jobs)]


def intact(copy: Path) -> bool:
    """Whether ``copy`` still holds every file of the tree it was made from."""
    return all((copy / name).is_dir() for name in COPIED) and all(
        (copy / path.relative_to(ROOT)).is_file() for name in COPIED for path in (ROOT / name).rglob("*.py")
    )


def make_copy(copy: Path) -> Path:
    """A fresh copy of the tree at ``copy``, its bytecode compiled."""
    shutil.rmtree(copy, ignore_errors=True)
    for name in COPIED:
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    # bytecode checked against the source's hash: a subject never runs a stale mutant (a timestamp
    # check can miss a same-size mutant written in the same second)
    subprocess.run(
        [PYTHON, "-m", "compileall", "-q", "--invalidation-mode", "checked-hash", *COPIED],
        cwd=copy, check=True, capture_output=True,
    )  # fmt: skip
    return copy


def subject_command(copy: Path, backend: str = DEFAULT_BACKEND) -> str:
    """The copy's reference as a stdio process on ``backend`` (its bytecode never written: see
    :func:`make_copies`)."""
    return f"env -C {copy} PYTHONDONTWRITEBYTECODE=1 {server_command(backend, copy)}"


def traced_command(out: Path, backend: str, append: bool = False) -> str:
    """The unmutated reference on ``backend``, traced into ``out`` (:mod:`scripts.mutation_trace`)."""
    flag = " --append" if append else ""
    return server_command(backend, out.parent, f"scripts.mutation_trace{flag}", f" {out} {' '.join(SCOPE)}")


def server_command(backend: str, scratch: Path, module: str = "reference.server", rest: str = "") -> str:
    """``module`` serving the protocol on ``backend``; the directory backend is the server's default
    one on a fresh, empty ``scratch/store`` (``CONFORMANCE_STORE_ROOT``), made here: every subject
    process starts on an empty directory, as every one on the simulated filesystem starts empty."""
    if backend != DIRECTORY_BACKEND:
        return f"{PYTHON} -m {module} --backend {backend}{rest}"
    store = scratch / "store"
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    return f"env {STORE_ROOT_ENV}={store} {PYTHON} -m {module} --backend {DEFAULT_BACKEND}{rest}"


def with_backend(path: Path, backend: str) -> Path:
    """A coverage map's file for ``backend`` (the default backend's keeps its plain name)."""
    return path if backend == DEFAULT_BACKEND else path.with_name(f"{path.stem}-{backend}{path.suffix}")


def baseline(copy: Path, timeout: float, cases: Sequence[str], backend: str = DEFAULT_BACKEND) -> None:
    """The unmutated copy must pass the fast lane, or every mutant would look killed (a later
    lane's baseline is each unit's verdict, traced with its map)."""
    outcome, output = certify(
        copy, [vector_key(v) for v in chosen_vectors(cases)], max(timeout, 600.0), backend
    )
    if outcome != TestOutcome.SURVIVED:
        raise SystemExit(f"the unmutated tree fails the fast lane: {output}")


def run_lane(path: Path, lane: str, earlier: Sequence[str], jobs: int, timeout: float,
             cases: Sequence[str], limit: int | None, rules: Sequence[str] = (),
             select: bool = True, coverage_path: Path = COVERAGE,
             modules: Sequence[str] = (), unit_coverage: Path | None = None,
             backend: str = DEFAULT_BACKEND) -> None:  # fmt: skip
    """Run ``lane`` on every mutant that survived all ``earlier`` lanes and has no result for it
    (only those inside the functions ``rules`` names, when it names any, and of the files
    ``modules`` names, when it names any, in their order). The fast lane runs, for
    each mutant, only the vector cases that reach its statement (every case unless ``select``); a
    mutant none reaches is recorded *unreached* (a survivor, :data:`NO_CASE`) without running. The
    later lanes do the same with their units (:func:`unit_map`; ``cases`` globs over unit keys,
    like ``exhaustive#*``)."""
    rows = lane_rows(path)
    with use_db(str(path), WorkDB.Mode.open) as work_db:
        items: list[WorkItem] = sorted(
            work_db.work_items, key=lambda i: (i.mutations[0].module_path, i.job_id)
        )
        skipped = {item.job_id for item, result in work_db.completed_work_items
                   if result.worker_outcome == WorkerOutcome.SKIPPED}  # fmt: skip
        if earlier:  # a survivor the reviewed file calls equivalent goes no further
            triage = read_triage()
            skipped |= {m.job_id for m in read_mutants(path) if final_outcome(m, triage) == "equivalent"}
        pending = [
            item for item in items
            if item.job_id not in skipped and lane not in rows[item.job_id]
            and (not rules or item.mutations[0].definition_name in rules)
            and (not modules or Path(item.mutations[0].module_path).as_posix() in modules)
            and all(rows[item.job_id].get(e, ("",))[0] in SURVIVING for e in earlier)
        ]  # fmt: skip
        if modules:
            order = {module: index for index, module in enumerate(modules)}
            pending.sort(key=lambda i: order[Path(i.mutations[0].module_path).as_posix()])
        if limit is not None:
            pending = pending[:limit]
        if not pending:
            print(f"{lane}: nothing to run")
            return
        chosen: dict[str, list[str]] = {}
        units = None
        if lane == "fast":
            coverage = (
                coverage_map(jobs, cases, with_backend(coverage_path, backend), backend) if select else None
            )
            every = [vector_key(v) for v in chosen_vectors(cases)]
        else:  # the lane's units, cheapest first (its map traced once per tree)
            units = unit_map(lane, jobs, unit_coverage, backend, cases)
            coverage = units.coverage if select else None
            every = list(units.coverage.cases)
        if cases and not every:  # else every mutant would be recorded unreached without running
            raise SystemExit(f"{lane}: --case {' '.join(cases)} chooses none of this lane's cases or units")
        trees: dict[str, ast.Module] = {}
        for item in pending:
            chosen[item.job_id] = (
                every if coverage is None else select_cases(item.mutations[0], coverage, trees)
            )
            if units is not None and cases:
                chosen[item.job_id] = [
                    k for k in chosen[item.job_id] if any(fnmatch.fnmatchcase(k, g) for g in cases)
                ]
        reached = len([item for item in pending if chosen[item.job_id]])
        print(f"{lane}: {len(pending) - reached} of {len(pending)} mutants reached by no case "
              f"(recorded unreached without running); {reached} to run", flush=True)  # fmt: skip
        workers = min(jobs, len(pending))
        # one set of copies a run (two runs may share a session; each removes its own copies)
        digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
        copies_dir = COPIES_DIR / f"{path.stem}-{digest}-{os.getpid()}"
        copies = make_copies(workers, copies_dir)
        if units is None:
            baseline(copies[0], timeout, cases, backend)
        judge = (
            functools.partial(certify, timeout=timeout, backend=backend)
            if units is None
            else functools.partial(
                certify_units, lane=lane, verdicts=units.verdicts, timeout=timeout, backend=backend
            )
        )

        def start(index: int, again: bool) -> tuple[Any, Any]:
            if again:  # the worker it replaces may have left its copy mutated
                make_copy(copies[index])
            return start_worker(worker, (copies[index], judge))

        tasks = [(item.job_id, item.mutations[0], chosen[item.job_id]) for item in pending]
        started = time.monotonic()
        counts: Counter[str] = Counter()
        lost: list[Any] = []
        results = judged(tasks, start, len(copies), hard_limit(timeout), lost)
        try:
            for done, (job_id, result, seconds) in enumerate(results, 1):
                counts[record(path, work_db, job_id, lane, result, seconds)] += 1
                print(
                    f"{lane}: {done}/{len(pending)} {dict(counts)} {time.monotonic() - started:.0f}s",
                    flush=True,
                )
        finally:
            results.close()  # its workers ended (an interrupted run's too)
            shutil.rmtree(copies_dir, ignore_errors=True)
        print(f"{lane}: {len(pending)} mutants in {time.monotonic() - started:.0f}s on {workers} workers")
        if lost:
            raise SystemExit(
                f"{lane}: {len(lost)} mutants have no result, their worker having died or hung "
                f"{TRIES} times ({' '.join(task[0] for task in lost[:10])}); run the same command again to judge them"
            )


TRIES: Final = 2  # a mutant is handed out at most this often (its worker died or hung: once more)


def hard_limit(timeout: float) -> float:
    """How long a worker may spend on one mutant before it is taken for hung and killed: well past
    the lane's ``timeout``, which the judge checks only between cases (and a subject's silence is
    bounded by its response timeout), so that only a worker stuck outside them (a lock, a pipe)
    reaches it."""
    return 3 * timeout + 300.0


def start_worker(target: Callable[..., None], args: tuple[Any, ...]) -> tuple[Any, Any]:
    """A worker process running ``target(*args, connection)`` and the run's end of its own pipe.
    It is *spawned*, not forked: the run's process has had threads (a subject's readers), and a
    forked copy of a lock one of them held would hang the worker for ever."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=target, args=(*args, theirs))
    process.start()
    theirs.close()
    return process, ours


def serve(function: Callable[[Any], Any], connection: Any) -> None:
    """A worker of :func:`in_workers`: ``function`` of each task's payload, sent back."""
    os.chdir(ROOT)
    while (task := connection.recv()) is not None:
        connection.send(function(task[1]))


def in_workers(function: Callable[[Any], Any], tasks: Sequence[tuple[str, Any]], jobs: int, limit: float,
               lost: list[Any]) -> Generator[Any]:  # fmt: skip
    """``function`` of each ``(key, payload)`` task's payload, in ``jobs`` workers (as
    :func:`judged` runs them: a worker that dies or hangs replaced, its task handed out again),
    in the order they finish."""
    results = judged(
        tasks, lambda index, again: start_worker(serve, (function,)), min(jobs, len(tasks)), limit, lost
    )
    try:
        yield from results
    finally:
        results.close()


@dataclass
class Slot:
    """One worker: its process, the run's end of its pipe, the task it was handed and when."""

    process: Any
    connection: Any
    task: Any = None
    since: float = 0.0


def judged(tasks: Sequence[Any], start: Callable[[int, bool], tuple[Any, Any]], workers: int,
           limit: float, lost: list[Any], wait: float = 5.0) -> Generator[tuple[str, WorkResult, float]]:  # fmt: skip
    """Each task's ``(job_id, result, seconds)`` as its worker sends it back. A task is a tuple
    whose first item is its job id; ``start(index, again)`` starts worker ``index`` (``again``: in
    place of one that died). Each worker has its own pipe and holds one task at a time, so the run
    knows what each is doing and no worker can block another (a shared queue's lock held by a
    worker that died stops every other worker in a futex): a worker that exits, closes its pipe or
    spends ``limit`` seconds on one task is killed and replaced, and its task handed out again, at
    most :data:`TRIES` times in all; a task that used them gets no result and goes into ``lost``."""
    waiting = list(tasks)[::-1]  # popped from the end: in their order
    tries: Counter[str] = Counter()
    slots = [Slot(*start(index, False)) for index in range(workers)]
    try:
        while waiting or any(slot.task is not None for slot in slots):
            for index, slot in enumerate(slots):
                if slot.task is None and waiting:
                    if not slot.process.is_alive():  # it died idle
                        end_worker(slot)
                        slot = slots[index] = Slot(*start(index, True))
                    slot.task, slot.since = waiting.pop(), time.monotonic()
                    tries[slot.task[0]] += 1
                    try:
                        slot.connection.send(slot.task)
                    except OSError:  # it died since: the wait below finds its pipe closed
                        pass
            busy = [index for index, slot in enumerate(slots) if slot.task is not None]
            ready = multiprocessing.connection.wait(
                [slots[i].connection for i in busy] + [slots[i].process.sentinel for i in busy], timeout=wait
            )
            for index in busy:
                slot = slots[index]
                if slot.connection in ready:
                    try:
                        answer = slot.connection.recv()
                    except (EOFError, OSError):
                        pass  # its pipe closed: it died (below)
                    else:
                        slot.task = None
                        yield answer
                        continue
                hung = time.monotonic() - slot.since > limit
                if slot.connection in ready or slot.process.sentinel in ready or hung:
                    print(
                        f"worker {index} (pid {slot.process.pid}) "
                        + ("hung" if hung else f"died (exit code {slot.process.exitcode})")
                        + f" on job {slot.task[0]}: replaced",
                        file=sys.stderr, flush=True,
                    )  # fmt: skip
                    end_worker(slot)
                    (waiting if tries[slot.task[0]] < TRIES else lost).append(slot.task)
                    slots[index] = Slot(*start(index, True))
    finally:
        for slot in slots:
            try:
                slot.connection.send(None)
            except OSError:
                pass
        for slot in slots:
            end_worker(slot, grace=5.0)


def end_worker(slot: Slot, grace: float = 0.0) -> None:
    """The worker ended: given ``grace`` seconds to finish, then killed; its pipe closed."""
    slot.process.join(timeout=grace)
    if slot.process.is_alive():
        slot.process.kill()
        slot.process.join()
    slot.connection.close()


# -- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mutant:
    job_id: str
    module: str
    rule: str
    line: int
    operator: str
    before: str
    after: str
    lanes: dict[str, tuple[str, float]]
    skipped: bool
    place: Place  # what names it across sessions (:func:`place_of`)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.module, self.rule, self.before, self.after)


def diff_lines(diff: str) -> tuple[str, str]:
    """The removed and the added line of a one-line mutant's unified diff (stripped)."""
    before = [
        line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")
    ]
    after = [
        line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    return " / ".join(before), " / ".join(after)


def read_mutants(path: Path) -> list[Mutant]:
    rows = lane_rows(path)
    mutants = []
    with use_db(str(path), WorkDB.Mode.open) as work_db:
        results = dict(work_db.results)
        for item in work_db.work_items:
            mutation = item.mutations[0]
            result = results.get(item.job_id)
            before, after = diff_lines(result.diff or "") if result is not None else ("", "")
            mutants.append(
                Mutant(
                    job_id=item.job_id,
                    module=Path(mutation.module_path).as_posix(),
                    rule=mutation.definition_name or "(module)",
                    line=mutation.start_pos[0],
                    operator=mutation.operator_name.removeprefix("core/"),
                    before=before,
                    after=after,
                    lanes=rows.get(item.job_id, {}),
                    skipped=result is not None and result.worker_outcome == WorkerOutcome.SKIPPED,
                    place=place_of(mutation),
                )
            )
    return sorted(mutants, key=lambda m: (m.module, m.line, m.operator, m.after))


def read_triage(path: Path = EQUIVALENTS) -> dict[tuple[str, str, str, str], dict[str, str]]:
    """The reviewed survivors: ``verdict`` ``equivalent`` (with the reason no answer can change) or
    ``needs-kill`` (with what would kill it), keyed by module, rule and the line before and after
    (``*``: any mutant of that line)."""
    if not path.exists():
        return {}
    entries = json.loads(path.read_text(encoding="utf-8"))["mutants"]
    return {(e["module"], e["rule"], e["before"], e["after"]): e for e in entries}


def review_of(
    mutant: Mutant, triage: dict[tuple[str, str, str, str], dict[str, str]]
) -> dict[str, str] | None:
    """The reviewed entry for this mutant, or for every mutant of its line (``"after": "*"``)."""
    return triage.get(mutant.key) or triage.get((*mutant.key[:3], "*"))


def final_outcome(mutant: Mutant, triage: dict[tuple[str, str, str, str], dict[str, str]]) -> str:
    if mutant.skipped:
        return "skipped"
    outcomes = [outcome for outcome, _ in mutant.lanes.values()]
    if not outcomes:
        return "pending"
    for decisive in ("killed", "timeout", "incompetent"):
        if decisive in outcomes:
            return decisive
    entry = review_of(mutant, triage)
    return "equivalent" if entry is not None and entry["verdict"] == "equivalent" else "survived"


def score(counts: Counter[str]) -> str:
    judged = counts["killed"] + counts["timeout"] + counts["survived"]
    return f"{100 * (counts['killed'] + counts['timeout']) / judged:.1f}%" if judged else "-"


def table(title: str, groups: dict[str, Counter[str]]) -> list[str]:
    """One row a group: its mutants by outcome, how many of its survivors no vector case reaches
    (``unreached``, counted among the survivors too) and its score."""
    lines = [f"| {title} | mutants | " + " | ".join(OUTCOMES) + " | of which no case reaches | score |",
             "|---|" + "---:|" * (len(OUTCOMES) + 3)]  # fmt: skip
    for name, counts in groups.items():
        cells = [counts[o] for o in OUTCOMES]
        lines.append(
            f"| {name} | {sum(cells)} | "
            + " | ".join(map(str, cells))
            + f" | {counts['unreached']} | {score(counts)} |"
        )
    return lines


def unreached_only(mutant: Mutant) -> bool:
    """Whether every lane that ran on ``mutant`` found no case reaching it."""
    return bool(mutant.lanes) and all(outcome == "unreached" for outcome, _ in mutant.lanes.values())


def render(mutants: Sequence[Mutant], triage: dict[tuple[str, str, str, str], dict[str, str]]) -> str:
    outcome = {m.job_id: final_outcome(m, triage) for m in mutants}
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    by_rule: dict[str, Counter[str]] = defaultdict(Counter)
    by_area: dict[str, Counter[str]] = defaultdict(Counter)
    for m in mutants:
        found = [outcome[m.job_id]] + (
            ["unreached"] if outcome[m.job_id] == "survived" and unreached_only(m) else []
        )
        for name in found:
            by_module[m.module][name] += 1
            by_rule[f"{m.module}: `{m.rule}`"][name] += 1
            by_area[m.module.split("/")[0] + "/"][name] += 1
    seconds: dict[str, list[float]] = defaultdict(list)
    for m in mutants:
        for lane, (lane_outcome, took) in m.lanes.items():
            if lane_outcome != "unreached":  # recorded without running
                seconds[lane].append(took)
    lines = [
        "# Mutation report",
        "",
        "Generated by `scripts/mutation.sh` (`python -m scripts.mutation report`) from the ledger",
        "`docs/mutation-ledger.json` (every mutant's results, saved by each run from its cosmic-ray",
        "session database; a session made anew resumes from it); the survivors' verdicts come from",
        "the reviewed file `docs/mutation-equivalents.json`. Score: killed (or timed out) over killed,",
        "timed out and survived (equivalent and incompetent mutants left out). *Pending*: not judged",
        "since its module's mutants were last made. Do not edit by hand.",
        "",
        "The fast lane runs, for each mutant, the vector cases that execute its statement in the",
        "unmutated subject (a coverage map traced once per tree); a mutant no case executes is",
        "recorded as a survivor without running (*no case reaches it*) and goes on to the later lanes.",
        "The drt and stateful lanes run, likewise, only the units of their families (a part of a split",
        "family, or a whole one) that execute the mutant's statement. `--backend sqlite` and",
        "`--backend postgres` judge the database stores' mutants with the reference on that database,",
        "`--backend directory` the real filesystem's (reference/persistence/fs.py) with its file store",
        "on a real directory.",
        "",
        "Wall time per mutant, by lane (mean, on the run's workers): "
        + (", ".join(f"{lane} {sum(t) / len(t):.1f}s over {len(t)}" for lane, t in seconds.items()) or "-")
        + ".",
        "",
        "## By area",
        "",
        *table("area", dict(sorted(by_area.items()))),
        "",
        "## By module",
        "",
        *table("module", dict(sorted(by_module.items()))),
        "",
        "## By rule (the enclosing function)",
        "",
        *table("rule", dict(sorted(by_rule.items()))),
        "",
        "## Survivors and equivalents",
        "",
        "One row a mutated line and verdict (its mutants' operators and new lines joined); the",
        "survivors no vector case reaches are counted per rule after it, awaiting the later lanes.",
        "",
        "| module:line | rule | operators | before | after | survived | verdict | why / what would kill it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows: dict[tuple[str, int, str, str, str, str, str], list[Mutant]] = defaultdict(list)
    far: dict[tuple[str, str], list[Mutant]] = defaultdict(list)
    for m in mutants:
        if outcome[m.job_id] not in ("survived", "equivalent"):
            continue
        entry = review_of(m, triage) or {}
        if outcome[m.job_id] == "survived" and not entry and unreached_only(m):
            far[(m.module, m.rule)].append(m)
            continue
        key = (
            m.module,
            m.line,
            m.rule,
            m.before,
            lanes_shown(m),
            entry.get("verdict", "untriaged"),
            entry.get("reason", ""),
        )
        rows[key].append(m)
    for (module, line, rule, before, shown, verdict, reason), group in rows.items():
        operators = ", ".join(dict.fromkeys(m.operator for m in group))
        afters = " ; ".join(f"`{cell(m.after)}`" for m in group)
        lines.append(
            f"| {module}:{line} | `{rule}` | {operators} | `{cell(before)}` | {afters} | {shown} | {verdict} | {cell(reason)} |"
        )
    if far:
        lines += ["", "### Survivors no vector case reaches (awaiting the drt and stateful lanes)", "",
                  "| module | rule | mutants | lines | survived |", "|---|---|---:|---|---|"]  # fmt: skip
        for (module, rule), group in far.items():
            numbers = sorted({m.line for m in group})
            lines.append(
                f"| {module} | `{rule}` | {len(group)} | {', '.join(map(str, numbers))} | {lanes_shown(group[0])} |"
            )
    return "\n".join(lines) + "\n"


def lanes_shown(mutant: Mutant) -> str:
    return ", ".join(f"{lane} ({NO_CASE})" if outcome == "unreached" else lane
                     for lane, (outcome, _) in mutant.lanes.items())  # fmt: skip


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def write_report(path: Path | None, markdown: Path | None) -> None:
    """The report of a session database, or of the ledger when ``path`` is None."""
    mutants = read_mutants(path) if path is not None else ledger_mutants()
    text = render(mutants, read_triage())
    if markdown is None:
        sys.stdout.write(text)
    else:
        markdown.write_text(text, encoding="utf-8")
        print(f"report: {markdown}")


# -- the ledger: every mutant's results, kept in the repository ----------------------------------
#
# A session database lives in .scratch/ and goes with the machine; the ledger keeps each module's
# mutants (by place: operator, occurrence, span and rule) with every lane's outcome, and for a
# mutant no lane killed its line before and after (what the reviewed equivalents are keyed by).
# A run saves its session into it; a session made anew starts from it; the report is made from it.


def ledger_place(row: dict[str, Any]) -> Place:
    at = row["at"]
    return (row["op"], row["n"], (at[0], at[1]), (at[2], at[3]), row["rule"])


def decisive(lanes: dict[str, tuple[str, float]]) -> bool:
    """Whether a lane ended the mutant's judging (killed, timed out or could not be made)."""
    return any(outcome in ("killed", "timeout", "incompetent") for outcome, _ in lanes.values())


def place_row(place: Place) -> dict[str, Any]:
    """A mutant's place as the ledger writes it (:func:`ledger_place` reads it back)."""
    (operator, occurrence, start, end, rule) = place
    return {"op": operator, "n": occurrence, "at": [*start, *end], "rule": rule}


def ledger_row(mutant: Mutant) -> dict[str, Any]:
    row = place_row(mutant.place)
    if mutant.skipped:
        row["skipped"] = True
    if mutant.lanes:
        row["lanes"] = {lane: [outcome, round(took, 2)] for lane, (outcome, took) in mutant.lanes.items()}
    if not mutant.skipped and not decisive(mutant.lanes):
        row |= {"before": mutant.before, "after": mutant.after}
    return row


def read_ledger(path: Path = LEDGER) -> dict[str, dict[str, Any]]:
    """``module -> {"sha256": digest of the source judged, "mutants": [row, ...]}``."""
    if not path.exists():
        return {}
    modules: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["modules"]
    return modules


def write_ledger(modules: dict[str, dict[str, Any]], path: Path = LEDGER) -> None:
    """One mutant a line, modules and mutants in a fixed order, so that a run's change to the
    ledger is a change to the lines of the mutants it judged."""
    lines = ['{"about": "scripts/mutation.py keeps here every mutant\'s results (docs/mutation.md is '
             'made from them); do not edit by hand",', ' "modules": {']  # fmt: skip
    names = sorted(modules)
    for index, module in enumerate(names):
        entry = modules[module]
        rows = sorted(entry["mutants"], key=lambda r: (r["at"], r["op"], r["n"]))
        lines.append(f'  {json.dumps(module)}: {{"sha256": {json.dumps(entry["sha256"])}, "mutants": [')
        lines += [f"   {json.dumps(row, ensure_ascii=False, separators=(',', ':'))}" + ("," if i < len(rows) - 1 else "")
                  for i, row in enumerate(rows)]  # fmt: skip
        lines.append("  ]}" + ("," if index < len(names) - 1 else ""))
    lines.append(" }}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def save_to_ledger(session: Path, path: Path = LEDGER, modules: Sequence[str] | None = None) -> list[str]:
    """Save the session's results into the ledger, module by module (of ``modules``, when given: a
    run saves the modules it was asked to judge, so a module the session holds from an older run
    never overwrites what another tree's session saved since): a module whose mutants are the
    ledger's has each mutant's lanes updated (the session's word for each lane it ran, the
    ledger's for the others); any other module's entry is replaced. A module edited since the
    session made its mutants is left out (its results belong to another text). Returns the
    modules saved."""
    with sqlite3.connect(session, timeout=LOCK_WAIT) as db:
        db.execute(META_TABLE)
        found = db.execute("SELECT value FROM mutation_meta WHERE key = 'sources'").fetchone()
    sources = json.loads(found[0]) if found is not None else {}
    by_module: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for mutant in read_mutants(session):
        if modules is None or mutant.module in modules:
            by_module[mutant.module].append(ledger_row(mutant))
    ledger = read_ledger(path)
    saved = []
    for module, made in sorted(by_module.items()):
        digest = source_digests([module])[module] if (ROOT / module).is_file() else None
        if sources.get(module) != digest:
            print(f"{module}: changed since the session made its mutants, not saved to the ledger")
            continue
        kept = {ledger_place(row): row for row in ledger.get(module, {}).get("mutants", [])}
        if set(kept) == {ledger_place(row) for row in made}:
            for row in made:
                old = kept[ledger_place(row)]
                lanes = {**old.get("lanes", {}), **row.pop("lanes", {})}
                # the mutant's lines from the session when it made its diff, else from the ledger
                judged = row if row.get("before") or row.get("after") else old
                lines = {key: judged[key] for key in ("before", "after") if key in judged}
                for key in ("before", "after"):
                    row.pop(key, None)
                if lanes:
                    row["lanes"] = lanes
                if not decisive(lanes):
                    row |= lines
        ledger[module] = {"sha256": digest, "mutants": made}
        saved.append(module)
    write_ledger(ledger, path)
    return saved


def result_of(outcome: str, before: str, after: str) -> WorkResult:
    """The cosmic-ray result a lane's outcome stands for (its diff the mutant's one line)."""
    diff = f"--- mutation diff ---\n-{before}\n+{after}" if before or after else ""
    if outcome == "incompetent":
        return WorkResult(worker_outcome=WorkerOutcome.NO_TEST)
    test = TestOutcome.KILLED if outcome in ("killed", "timeout") else TestOutcome.SURVIVED
    output = {"timeout": "timeout", "unreached": NO_CASE}.get(outcome, "")
    return WorkResult(output=output, diff=diff, test_outcome=test, worker_outcome=WorkerOutcome.NORMAL)


def load_from_ledger(session: Path, path: Path = LEDGER, modules: Sequence[str] | None = None) -> list[str]:
    """Give a session's mutants (of ``modules``, when given) their results from the ledger, for
    every module whose mutants are the ledger's (by place: a module edited so that its mutants
    moved is judged anew). Returns the modules whose results were taken."""
    ledger = read_ledger(path)
    taken = []
    with use_db(str(session), WorkDB.Mode.open) as work_db:
        items: dict[str, list[WorkItem]] = defaultdict(list)
        for item in work_db.work_items:
            items[Path(item.mutations[0].module_path).as_posix()].append(item)
        lanes_found = []
        for module, made in sorted(items.items()):
            if modules is not None and module not in modules:
                continue
            rows = {ledger_place(row): row for row in ledger.get(module, {}).get("mutants", [])}
            if not rows or set(rows) != mutant_places(made):
                continue
            for item in made:
                row = rows[place_of(item.mutations[0])]
                lanes = row.get("lanes", {})
                if row.get("skipped"):
                    work_db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
                elif lanes:
                    last = lanes[list(lanes)[-1]][0]
                    work_db.set_result(
                        item.job_id, result_of(last, row.get("before", ""), row.get("after", ""))
                    )
                    lanes_found += [
                        (item.job_id, lane, outcome, seconds) for lane, (outcome, seconds) in lanes.items()
                    ]
            taken.append(module)
    with sqlite3.connect(session, timeout=LOCK_WAIT) as db:
        db.execute(LANE_TABLE)
        db.executemany("INSERT OR REPLACE INTO lane_results VALUES (?, ?, ?, ?)", lanes_found)
    return taken


def ledger_mutants(path: Path = LEDGER, files: Sequence[str] | None = None) -> list[Mutant]:
    """Every mutant of the scope as the ledger has it; a module the ledger lacks, or whose mutants
    moved since it was judged, has its mutants made again, pending."""
    ledger = read_ledger(path)
    files = scope_files() if files is None else files
    digests = source_digests(files)
    stale = [module for module in files if ledger.get(module, {}).get("sha256") != digests[module]]
    fresh: dict[str, list[WorkItem]] = defaultdict(list)
    for item in _all_work_items([Path(module) for module in stale], {}):
        fresh[Path(item.mutations[0].module_path).as_posix()].append(item)
    mutants = []
    for module in files:
        rows = ledger.get(module, {}).get("mutants", [])
        if module in stale and {ledger_place(row) for row in rows} != mutant_places(fresh[module]):
            spans = annotation_spans(ROOT / module)
            rows = [place_row(place_of(m)) | ({"skipped": True} if in_annotation(spans, m) else {})
                    for m in (item.mutations[0] for item in fresh[module])]  # fmt: skip
        for index, row in enumerate(rows):
            mutants.append(Mutant(
                job_id=f"{module}#{index}", module=module, rule=row["rule"] or "(module)", line=row["at"][0],
                operator=row["op"].removeprefix("core/"), before=row.get("before", ""), after=row.get("after", ""),
                lanes={lane: (outcome, seconds) for lane, (outcome, seconds) in row.get("lanes", {}).items()},
                skipped=bool(row.get("skipped")), place=ledger_place(row),
            ))  # fmt: skip
    return sorted(mutants, key=lambda m: (m.module, m.line, m.operator, m.after))


# -- the command line ---------------------------------------------------------------------------


def stop_on_sigterm() -> None:
    """SIGTERM ends a run as Ctrl-C does: its workers stopped, its copies removed, the results
    recorded so far kept (the run resumes from them)."""

    main_process = os.getpid()

    def stop(signum: int, frame: object) -> None:
        if os.getpid() != main_process:  # a worker (or a tracer) the run ends: just go
            os._exit(128 + signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutation.sh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="make (or resume) the session and run its lanes")
    run.add_argument("modules", nargs="*", help="files, folders or dotted modules in scope (default: all)")
    run.add_argument(
        "--changed",
        metavar="BASE",
        help="mutate only the lines changed since BASE ('ledger': the commit that last saved the ledger); fast lane",
    )
    run.add_argument("--lanes", default="fast,drt,stateful", help="comma-separated, cheapest first")
    run.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: cores)"
    )
    run.add_argument("--timeout", type=float, help="seconds per mutant and lane (default per lane)")
    run.add_argument("--session", type=Path, help="the session database (default under .scratch/mutation)")
    run.add_argument("--fresh", action="store_true", help="start over even if the session can be resumed")
    run.add_argument("--limit", type=int, help="run at most this many mutants per lane (a sample)")
    run.add_argument(
        "--again",
        action="store_true",
        help="judge the named modules' survivors again (after new vectors or edges)",
    )
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        default=DEFAULT_BACKEND,
        help="the mutated subject's storage (reference.server --backend; directory: the file store on a "
        "real directory, $CONFORMANCE_STORE_ROOT): sqlite reaches the database store, directory the real filesystem",
    )
    run.add_argument("--rule", action="append", default=[], help="run only the mutants inside this function")
    run.add_argument("--case", action="append", default=[], help="only the suite's cases matching this glob")
    run.add_argument(
        "--all-cases",
        action="store_true",
        help="fast lane: every vector case for each mutant, not only those reaching it",
    )
    run.add_argument(
        "--markdown", type=Path, help="the report (default: docs/mutation.md; printed with --changed)"
    )
    report = commands.add_parser("report", help="write the report from the ledger (or a session database)")
    report.add_argument("--session", type=Path, help="report this session database instead of the ledger")
    report.add_argument("--markdown", type=Path, help="write the report here (default: print it)")
    save = commands.add_parser("save", help="save session databases' results into the ledger")
    save.add_argument("sessions", nargs="+", type=Path, help="session databases (e.g. another tree's)")
    options = parser.parse_args(list(argv) if argv is not None else None)
    if options.command == "report":
        write_report(options.session, options.markdown)
        return 0
    if options.command == "save":
        for path in options.sessions:
            print(f"{path}: saved {', '.join(save_to_ledger(path)) or 'no module'}")
        return 0
    changed: dict[str, set[int]] | None = None
    if options.changed:
        if options.changed == "ledger":
            options.changed = ledger_base()
        changed = changed_lines(options.changed)
        files = sorted(changed)
        lanes = ["fast"]
        session = options.session or STATE_DIR / "changed.sqlite"
        fresh = True
        if not files:
            print(f"no line in the mutation scope changed since {options.changed}")
            return 0
    else:
        files = scope_files(options.modules)
        lanes = [lane for lane in options.lanes.split(",") if lane]
        session = options.session or STATE_DIR / "session.sqlite"
        fresh = options.fresh
    unknown = [lane for lane in lanes if lane not in LANES]
    if unknown:
        parser.error(f"unknown lane {unknown[0]!r}; lanes: {', '.join(LANES)}")
    os.chdir(ROOT)
    stop_on_sigterm()
    open_session(session, files, fresh, ledger=None if fresh else LEDGER)
    skip_annotations(session)
    if options.again:
        print(
            f"judging again: {forget_survivors(session, lanes, files, options.rule)} survivors' results dropped"
        )
    if changed is not None:
        lines = changed
        keep(
            session,
            lambda mutation: mutation.start_pos[0] in lines.get(Path(mutation.module_path).as_posix(), ()),
        )
    for index, lane in enumerate(lanes):
        timeout = options.timeout or DEFAULT_TIMEOUTS[lane]
        run_lane(session, lane, lanes[:index], options.jobs, timeout, options.case, options.limit,
                 options.rule, select=not options.all_cases,
                 modules=files if options.modules else (), backend=options.backend)  # fmt: skip
    if changed is None:
        save_to_ledger(session, modules=files)
        write_report(None, options.markdown or REPORT)
    else:
        write_report(session, options.markdown)
    triage = read_triage()
    counts = Counter(final_outcome(m, triage) for m in read_mutants(session))
    return 1 if counts["survived"] else 0


def forget_survivors(
    path: Path, lanes: Sequence[str], modules: Sequence[str], rules: Sequence[str] = ()
) -> int:
    """Drop the ``lanes`` results of the mutants of ``modules`` (inside the functions ``rules``
    names, when it names any: the run judges only those) that survived them (or were unreached),
    so that the run judges them again with the suite as it is now (new vectors, new edges);
    returns how many results were dropped."""
    with use_db(str(path), WorkDB.Mode.open) as work_db:
        jobs = [item.job_id for item in work_db.work_items
                if Path(item.mutations[0].module_path).as_posix() in modules
                and (not rules or item.mutations[0].definition_name in rules)]  # fmt: skip
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        before = db.total_changes
        for lane in lanes:
            db.executemany(
                "DELETE FROM lane_results WHERE job_id = ? AND lane = ? AND outcome IN ('survived', 'unreached')",
                [(job, lane) for job in jobs],
            )
        return db.total_changes - before


def keep(path: Path, wanted: Callable[[MutationSpec], bool]) -> None:
    """Drop the session's mutants ``wanted`` says no to (a focused run)."""
    with use_db(str(path), WorkDB.Mode.open) as work_db:
        dropped = [item.job_id for item in work_db.work_items if not wanted(item.mutations[0])]
    drop_jobs(path, dropped)


def drop_jobs(path: Path, job_ids: Sequence[str]) -> None:
    """Remove these mutants from the session: each one's item, spec and every lane's result."""
    with sqlite3.connect(path, timeout=LOCK_WAIT) as db:
        for table in ("work_results", "mutation_specs", "work_items", "lane_results"):
            db.executemany(f"DELETE FROM {table} WHERE job_id = ?", [(job_id,) for job_id in job_ids])


if __name__ == "__main__":
    sys.exit(main())
