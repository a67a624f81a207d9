"""Run CrossHair over the spec's contracts (PEP 316 ``pre:``/``post:`` docstring clauses) within a
fixed time budget. A counterexample fails the run; running out of budget does not."""

from __future__ import annotations

import os
import subprocess
import sys
import time

# Modules whose docstrings carry contracts; each gets an equal share of the budget.
CONTRACT_MODULES = [
    "spec.surface",
    "spec.provenance",
]
BUDGET_SECONDS = int(os.environ.get("CROSSHAIR_BUDGET", "240"))  # wall seconds for all modules
PER_CONDITION_SECONDS = 8


def main() -> int:
    share = max(20, BUDGET_SECONDS // max(1, len(CONTRACT_MODULES)))
    failed = False
    for module in CONTRACT_MODULES:
        started = time.monotonic()
        command = [
            sys.executable, "-m", "crosshair", "check", "--analysis_kind=PEP316",
            f"--per_condition_timeout={PER_CONDITION_SECONDS}", module,
        ]  # fmt: skip
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=share)
        except subprocess.TimeoutExpired:
            print(f"crosshair: {module}: budget of {share}s used up, no counterexample found")
            continue
        output = (result.stdout + result.stderr).strip()
        took = time.monotonic() - started
        if result.returncode != 0:
            failed = True
            print(f"crosshair: {module}: counterexample(s) in {took:.0f}s\n{output}")
        else:
            print(f"crosshair: {module}: no counterexample in {took:.0f}s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
