"""Benchmark: the conformance suite with ``--jobs 1`` and ``--jobs N`` side by side, in one run.

Runs ``python -m conformance`` twice on the same subject (``--jobs 1``, then ``--jobs N``), each
writing its outcomes as JSON, and prints each run's wall time and CPU time, the ratio of the
wall times, and whether the two runs have the same cases, outcomes and order (family, name,
outcome, rule and fingerprint of every case). The CPU figures say what the wall times would be
on an otherwise idle machine: a run's processes sampled from ``/proc`` every
:data:`SAMPLE_SECONDS` (the run's own process, and each child: a worker, or a ``--stdio``
subject), all of them adding up under ``--jobs 1`` and the busiest bounding ``--jobs N`` (for an
in-process subject; a ``--stdio`` worker's own subject process is not counted). A busy machine (and Linux's per-session CPU groups) gives N workers about one
session's share, so the wall ratio measures the load; the CPU bound measures the split.

Usage::

    python -m scripts.jobs_bench [--jobs N] [--families F ...] [--subject MODULE:FACTORY | --stdio CMD]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

SAMPLE_SECONDS: Final = 0.2
TICKS: Final = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class Timed:
    """One run: its wall time, its own process's CPU seconds and each child process's."""

    wall: float = 0.0
    own: float = 0.0
    children: dict[int, float] = field(default_factory=dict)
    code: int = 0

    def bound(self, jobs: int) -> float:
        """The wall time it needs on an idle machine: with one job, every process's CPU seconds
        (they take turns); with more, the busiest process's (each has a core)."""
        if jobs == 1:
            return self.own + sum(self.children.values())
        return max([self.own, *self.children.values()])


def cpu_seconds(pid: int) -> float | None:
    """A live process's user and system CPU seconds (``None`` once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def run(command: list[str]) -> Timed:
    """``command``, its processes sampled until it exits."""
    timed = Timed()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while process.poll() is None:
        own = cpu_seconds(process.pid)
        timed.own = own if own is not None else timed.own
        for child in children_of(process.pid):
            seconds = cpu_seconds(child)
            if seconds is not None:
                timed.children[child] = seconds
        time.sleep(SAMPLE_SECONDS)
    timed.wall = time.perf_counter() - started
    timed.code = process.returncode
    return timed


def cases(path: Path) -> list[tuple[str, ...]]:
    """What must be the same in both runs: every case's key, outcome, rule and fingerprint, in
    report order (not its name: a stateful family's names carry run figures, like steps/s)."""
    found = json.loads(path.read_text(encoding="utf-8"))["cases"]
    keys = ("key", "outcome", "rule", "fingerprint")
    return [tuple(str(case.get(key, "")) for key in keys) for case in found]


def family_seconds(path: Path) -> str:
    """The families that took a second or more, the longest first."""
    totals: dict[str, float] = {}
    for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
        totals[case["family"]] = totals.get(case["family"], 0.0) + float(case.get("seconds", 0.0))
    ranked = sorted(totals.items(), key=lambda item: -item[1])
    return ", ".join(f"{family} {seconds:.0f}" for family, seconds in ranked if seconds >= 1) or "none"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.jobs_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--families", nargs="+", metavar="FAMILY")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--subject", default="reference.server:ReferenceSubject")
    target.add_argument("--stdio", metavar="COMMAND")
    args = parser.parse_args()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{os.cpu_count()} cores, load average {load} (at the start)")
    subject = ["--stdio", args.stdio] if args.stdio else ["--subject", args.subject]
    chosen = ["--families", *args.families] if args.families else []
    runs: dict[int, Timed] = {}
    with tempfile.TemporaryDirectory(prefix="jobs-bench-") as folder:
        for jobs in (1, args.jobs):
            report = Path(folder) / f"jobs-{jobs}"
            command = [sys.executable, "-m", "conformance", *subject, *chosen, "--jobs", str(jobs)]
            command += ["--json", f"{report}.json", "--junit", f"{report}.xml"]
            runs[jobs] = run(command)
            timed = runs[jobs]
            workers = ", ".join(f"{seconds:.1f}" for seconds in sorted(timed.children.values(), reverse=True))
            print(
                f"--jobs {jobs}: {timed.wall:.1f} s wall, exit {timed.code}; CPU s: run {timed.own:.1f}"
                + (f", workers {workers}" if workers else "")
                + f"; idle-machine estimate {timed.bound(jobs):.1f} s"
            )
        print(f"seconds per family under --jobs 1: {family_seconds(Path(folder) / 'jobs-1.json')}")
        one_cases, many_cases = (
            cases(Path(folder) / "jobs-1.json"),
            cases(Path(folder) / f"jobs-{args.jobs}.json"),
        )
        same = one_cases == many_cases
        for first, second in zip(one_cases, many_cases, strict=False):
            if first != second:
                print(f"first difference: {first} / {second}")
                break
        count = len(cases(Path(folder) / "jobs-1.json"))
    one, many = runs[1], runs[args.jobs]
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average {load} (at the end)")
    print(f"wall ratio --jobs {args.jobs} / --jobs 1: {many.wall / one.wall:.2f}")
    print(f"idle-machine ratio (estimates): {many.bound(args.jobs) / one.bound(1):.2f}")
    print(f"same cases, outcomes and order: {'yes' if same else 'NO'} ({count} cases)")
    return 0 if same and one.code == many.code else 1


if __name__ == "__main__":
    raise SystemExit(main())
