"""Which durability bugs each way of crash-testing catches: the trace family (per persistence
model), the kill check and the in-process crash seam, run on the durability-broken subjects of
reference/durability_subjects.py and on the reference. Prints a Markdown table (docs/choices.md and
conformance/CRASH-STATES.md carry its last output).

    .venv/bin/python -m scripts.trace_comparison [--kill-rounds N] [NAME ...]

It takes a few minutes: a subject the trace family does not catch under a model has every crash
state of that model checked.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time

from conformance.crash import STORE_ROOT_ENV, run_crash_checks, run_kill_check
from conformance.subject import InProcessSubject
from conformance.trace.family import TraceSettings, run_trace_checks
from conformance.trace.states import Model
from conformance.trace.strace import probe_strace
from reference.durability_subjects import BROKEN, seam_subject
from reference.server import ReferenceSubject

PYTHON = sys.executable
SUBJECTS = f"{PYTHON} -m reference.durability_subjects"


def first_problem(text: str) -> str:
    """The D3 item and sentence of a failure's first problem, without the rest."""
    line = next(
        (part.strip() for part in text.splitlines() if "D3." in part or "reader:" in part),
        text.strip().splitlines()[0],
    )
    line = line[line.find("D3.") :] if "D3." in line else line
    return line.split(" (the spec's reader", 1)[0][:100]


def trace_verdict(command: str, model: Model) -> str:
    probe = probe_strace()
    if probe.problem is not None:
        return f"not run ({probe.problem})"
    outcome = run_trace_checks(probe, TraceSettings(command, workers=2, fail_fast=True, models=(model,)))
    if outcome.not_run or outcome.replay:
        return f"not judged: {(outcome.not_run + outcome.replay)[0][:80]}"
    found = [text for texts in outcome.tallies[model].failures.values() for text in texts]
    return (
        f"caught: {first_problem(found[0])}"
        if found
        else f"not caught ({outcome.tallies[model].judged} states)"
    )


def kill_verdict(command: str, rounds: int) -> str:
    with tempfile.TemporaryDirectory(prefix="comparison-kill-") as root:
        outcome = run_kill_check(command, {STORE_ROOT_ENV: root}, rounds)
    if outcome.failures:
        return f"caught: {first_problem(outcome.failures[0].problems[0])}"
    return f"not caught ({outcome.kills} kills)"


def seam_verdict(name: str | None) -> str:
    subject = InProcessSubject(seam_subject(name) if name else ReferenceSubject())
    outcome = run_crash_checks(subject, fail_fast=True)
    if outcome.failures:
        return f"caught: {first_problem(outcome.failures[0].problems[0])}"
    return f"not caught ({outcome.points} crash points)"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kill-rounds", type=int, default=6)
    parser.add_argument("names", nargs="*", default=[*BROKEN, "reference"])
    args = parser.parse_args()
    print("| subject | what it misses | trace, strict | trace, weak | kill check | crash seam |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.names:
        started = time.perf_counter()
        if name == "reference":
            command, why, seam_name = f"{PYTHON} -m reference.server", "nothing", None
        else:
            command, why, seam_name = f"{SUBJECTS} {name}", BROKEN[name].why, name
        cells = [
            trace_verdict(command, "strict"),
            trace_verdict(command, "weak"),
            kill_verdict(command, args.kill_rounds),
            seam_verdict(seam_name),
        ]
        print(f"| `{name}` | {why} | " + " | ".join(cells) + " |", flush=True)
        print(f"<!-- {name}: {time.perf_counter() - started:.0f}s -->", file=sys.stderr)


if __name__ == "__main__":
    main()
