"""Run CrossHair over the spec's contracts (PEP 316 ``pre:``/``post:`` docstring clauses) within a
fixed time budget, and fail unless every contract was checked and none has a counterexample.

CrossHair checks each ``post:`` clause on its own, for ``--per_condition_timeout`` seconds of CPU
time, so a module's share of the budget is its number of clauses times that timeout, plus start-up.
Modules run ``JOBS`` at a time. With ``--report_all`` CrossHair reports on every clause it checked;
the run fails when it reports a counterexample (``error:``), when a module's clause gets no report
(a module with "no checkable functions", a clause whose precondition CrossHair could never meet, a
crash), when a module overruns its share several times over and is stopped, or when the whole run
takes longer than its budget (it says by how much). The plugin
scripts/crosshair_plugin.py keeps rejection messages from eating the search (see there).

Environment: ``CROSSHAIR_BUDGET`` (wall seconds for the whole run, default 240) and
``CROSSHAIR_JOBS`` (modules at a time, default: up to 2 CPUs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
PLUGIN: Final = ROOT / "scripts" / "crosshair_plugin.py"

# Modules whose docstrings carry contracts, in the order they are started (longest first).
CONTRACT_MODULES: Final = (
    "spec.log.surface",
    "spec.shrink.prune",
    "spec.lineage.fork",
    "spec.log.unclosed",
    "spec.log.provenance",
    "spec.shrink.pairing",
)
BUDGET_SECONDS: Final = int(os.environ.get("CROSSHAIR_BUDGET", "240"))  # wall seconds for the whole run
JOBS: Final = int(os.environ.get("CROSSHAIR_JOBS", str(min(2, os.cpu_count() or 1))))
PER_CONDITION_SECONDS: Final = 10.0  # CPU seconds per post clause, before scaling to the budget
MIN_PER_CONDITION_SECONDS: Final = 3.0  # below this CrossHair finds too little to be worth running
STARTUP_SECONDS: Final = 5.0  # wall seconds to start CrossHair and import a module
OVERRUN_FACTOR: Final = 3.0  # a module still running after this many shares is stopped (and fails)

POST_CLAUSE: Final = re.compile(r"^\s*post(\[[^\]]*\])?:")
REPORT_LINE: Final = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<level>info|error): (?P<text>.*)$")
CHECKED: Final = ("Confirmed over all paths.", "Not confirmed.")
NO_CHECKABLES: Final = "no checkable functions"


@dataclass(frozen=True)
class ModuleResult:
    module: str
    share: float  # wall seconds planned
    took: float  # wall seconds used
    clauses: int
    confirmed: int  # clauses proved over all paths
    problems: tuple[str, ...]  # why the module fails; empty when it passes
    notes: tuple[str, ...] = ()  # what CrossHair said on the way that does not fail the run


def module_path(module: str) -> Path:
    path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
    if not path.is_file():
        raise SystemExit(f"crosshair: cannot find module {module} at {path}")
    return path


def post_clause_lines(path: Path) -> list[int]:
    """The line numbers of the module's ``post:`` clauses: the lines CrossHair must report on."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [number for number, text in enumerate(lines, start=1) if POST_CLAUSE.match(text)]


def check_module(module: str, per_condition: float) -> ModuleResult:
    path = module_path(module)
    expected = post_clause_lines(path)
    share = len(expected) * per_condition + STARTUP_SECONDS
    command = [
        sys.executable,
        "-m",
        "crosshair",
        "check",
        "--analysis_kind=PEP316",
        "--report_all",
        f"--per_condition_timeout={per_condition:g}",
        f"--extra_plugin={PLUGIN}",
        module,
    ]
    started = time.monotonic()
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, cwd=ROOT, timeout=share * OVERRUN_FACTOR
        )
    except subprocess.TimeoutExpired:
        took = time.monotonic() - started
        return ModuleResult(
            module,
            share,
            took,
            len(expected),
            0,
            (f"stopped after {took:.0f}s: its contracts were not all checked",),
        )
    took = time.monotonic() - started
    problems: list[str] = []
    reported: set[int] = set()
    confirmed = 0
    for text in result.stdout.splitlines():
        match = REPORT_LINE.match(text)
        if match is None or Path(match["path"]).resolve() != path:
            problems.append(f"unexpected output: {text}")
        elif match["level"] == "error":
            reported.add(int(match["line"]))
            problems.append(f"counterexample: {text}")
        elif match["text"] in CHECKED:
            reported.add(int(match["line"]))
            confirmed += match["text"] == CHECKED[0]
        else:
            problems.append(f"not checked: {text}")
    notes = [line for line in result.stderr.splitlines() if line.startswith("crosshair_plugin:")]
    if NO_CHECKABLES in result.stderr:
        problems.append("CrossHair found no checkable functions")
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        tail = "\n".join(result.stderr.strip().splitlines()[-12:])
        problems.append(f"CrossHair failed (exit {result.returncode}), ending:\n{tail}")
    unreported = [line for line in expected if line not in reported]
    if unreported:
        problems.append("no report for the post clause(s) at line(s) " + ", ".join(map(str, unreported)))
    return ModuleResult(module, share, took, len(expected), confirmed, tuple(problems), tuple(notes))


def plan_per_condition() -> float:
    """The per-clause timeout, scaled down when the modules' shares would not fit the budget."""
    clauses = sum(len(post_clause_lines(module_path(module))) for module in CONTRACT_MODULES)
    available = BUDGET_SECONDS * max(1, JOBS) - STARTUP_SECONDS * len(CONTRACT_MODULES)
    return max(MIN_PER_CONDITION_SECONDS, min(PER_CONDITION_SECONDS, available / max(1, clauses)))


def main() -> int:
    per_condition = plan_per_condition()
    print(
        f"crosshair: {len(CONTRACT_MODULES)} modules, {JOBS} at a time, {per_condition:g}s CPU per post clause"
    )
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, JOBS)) as pool:
        results = list(pool.map(lambda module: check_module(module, per_condition), CONTRACT_MODULES))
    for result in results:
        verdict = "FAILED" if result.problems else "ok"
        print(
            f"crosshair: {result.module}: {verdict}, {result.clauses} post clauses "
            f"({result.confirmed} proved over all paths), {result.took:.0f}s (share {result.share:.0f}s)"
        )
        for line in (*result.notes, *result.problems):
            print(f"    {line}")
    total = time.monotonic() - started
    overrun = budget_overrun(total, BUDGET_SECONDS)
    print(
        f"crosshair: whole run {total:.0f}s (budget {BUDGET_SECONDS}s)"
        + (f": FAILED, {overrun}" if overrun else "")
    )
    return 1 if overrun or any(result.problems for result in results) else 0


def budget_overrun(took: float, budget: float) -> str | None:
    """Why a run that took ``took`` wall seconds fails its budget, or ``None`` when it kept to it:
    a budget is a promise about CI time, so a run past it fails even when every contract held."""
    if took <= budget:
        return None
    return f"the run took {took:.0f}s, {took - budget:.0f}s over its {budget:g}s budget (CROSSHAIR_BUDGET)"


if __name__ == "__main__":
    raise SystemExit(main())
