"""Benchmark: the exhaustive search on the reference at one depth, in process or over stdio.

Runs :func:`conformance.exhaustive.run_exhaustive` (every part, disagreements recorded) and prints
its distinct states, transitions and requests, whether it agreed, and the CPU seconds of the
suite's process and of the subject's (over stdio, the reference server's process), besides the
wall time. On a loaded machine the CPU seconds are the figures (docs/choices.md, "The suite on
every core, and the exhaustive family at depth 5").

Usage::

    python -m scripts.exhaustive_bench [--depth N] [--stdio]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from conformance.divergence import Divergences
from conformance.exhaustive import DEPTHS, run_exhaustive
from conformance.runner import hello
from conformance.subject import StdioSubject, Subject, load_subject

ROOT: Final = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.exhaustive_bench", description=__doc__)
    parser.add_argument("--depth", type=int, default=DEPTHS["ci"], help="ops per sequence (default: ci's)")
    parser.add_argument("--stdio", action="store_true", help="drive `python -m reference.server` over stdio")
    args = parser.parse_args(argv)
    subject: Subject
    if args.stdio:
        subject = StdioSubject(f"{sys.executable} -m reference.server", env={"PYTHONPATH": str(ROOT)})
    else:
        subject = load_subject("reference.server:ReferenceSubject", timeout=30.0)
    said = hello(subject)
    cpu, wall = time.process_time(), time.perf_counter()
    divergences = Divergences()
    try:
        outcome = run_exhaustive(subject, sorted(said.capabilities), args.depth, said.target, divergences)
    finally:
        own = time.process_time() - cpu
        subject.close()
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    agreed = outcome.failure is None and not divergences
    print(
        f"{'stdio' if args.stdio else 'in process'}, depth {args.depth}: {outcome.states:,} states, "
        f"{outcome.transitions:,} transitions, {outcome.requests:,} requests, "
        f"{'agreed' if agreed else f'{len(divergences.found)} disagreements'}; "
        f"CPU {own:.1f} s suite + {child.ru_utime + child.ru_stime:.1f} s subject, "
        f"wall {time.perf_counter() - wall:.1f} s, load {os.getloadavg()[0]:.1f}"
    )
    return 0 if agreed else 1


if __name__ == "__main__":
    raise SystemExit(main())
