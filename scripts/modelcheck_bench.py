"""Benchmark: how many distinct states of the spec the model checker explores in a budget.

Runs :mod:`conformance.modelcheck` breadth first from the initial state for ``--seconds``
(default 300) or until ``--states`` distinct states are found, whichever comes first, and prints TLC's table: progress lines, then distinct states, states generated,
queue, depth reached, distinct states per second and the coverage per action; then the CPU time
spent (this process and its workers) and the distinct states per CPU second, the figure that a
loaded machine does not distort. ``--profile``
runs the same budget under cProfile and prints where the time goes.

Usage::

    python -m scripts.modelcheck_bench [--seconds S] [--states N] [--max-depth N] [--workers N]
        [--cluster ADDRESS] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

from conformance.modelcheck import explore, printer, start_search


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.modelcheck_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--states", type=int, help="stop once this many distinct states are found")
    parser.add_argument("--max-depth", type=int)
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=1, help="parts of the search, a process each")
    parser.add_argument("--cluster", metavar="ADDRESS", help="a Dask scheduler: a part on each worker")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    target = "" if args.states is None else f", target {args.states} distinct states"
    where = f"cluster {args.cluster}" if args.cluster else f"{args.workers} worker(s)"
    print(f"{os.cpu_count()} cores, load average {load}; budget {args.seconds:g} s{target}, {where}")
    search = start_search()
    profile = cProfile.Profile() if args.profile else None
    if profile is not None:
        profile.enable()
    report = printer(sys.stdout)
    explore(
        search,
        args.max_depth,
        args.states,
        args.seconds,
        report,
        args.interval,
        args.workers,
        args.cluster,
        keep=False,
    )
    if profile is not None:
        profile.disable()
        pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    times = os.times()  # the workers' processes are joined: their time is the children's
    cpu = times.user + times.system + times.children_user + times.children_system
    print(
        f"CPU time (this process and its workers): {cpu:.1f} s, {search.distinct / cpu:.0f} distinct states "
        f"per CPU second; load average at the end {', '.join(f'{value:.2f}' for value in os.getloadavg())}"
    )
    return 1 if search.violation is not None else 0


if __name__ == "__main__":
    sys.exit(main())
