"""Certify a subject: ``python -m conformance --subject package.module:factory`` (in process) or
``python -m conformance --stdio "command"`` (any language, conformance/PROTOCOL.md).

Prints a per-family table of passed/failed/skipped cases, writes a JUnit XML report, and exits 1
when any case failed (0 otherwise; 2 when the command line is wrong).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.report import PROFILES, CaseResult, Options, format_table, write_junit
from conformance.runner import hello, run_suite
from conformance.subject import DEFAULT_TIMEOUT, StdioSubject, Subject, SubjectError, load_subject

DEFAULT_JUNIT = Path("conformance-report.xml")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument(
        "--subject", metavar="MODULE:FACTORY", help="a Python object with handle(request) -> response"
    )
    target.add_argument(
        "--stdio", metavar="COMMAND", help="a process speaking the line protocol on stdin/stdout"
    )
    parser.add_argument(
        "--junit",
        type=Path,
        default=DEFAULT_JUNIT,
        metavar="PATH",
        help=f"JUnit XML report (default: {DEFAULT_JUNIT})",
    )
    parser.add_argument(
        "--families", nargs="+", metavar="FAMILY", help="run only these families (default: all)"
    )
    parser.add_argument(
        "--profile", choices=PROFILES, default="ci", help="size of generated workloads (default: ci)"
    )
    parser.add_argument(
        "--vectors", type=Path, metavar="DIR", help="vectors to run (default: the suite's own)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="per-response timeout for --stdio",
    )
    parser.add_argument(
        "--trace-crashes",
        action="store_true",
        help="also run the trace family: every crash state the subject's system calls allow (--stdio, needs strace; conformance/CRASH-STATES.md)",
    )
    return parser.parse_args(argv)


def describe_not_run(results: Sequence[CaseResult]) -> list[str]:
    """Why each family that ran no case at all (every case skipped) did not run: its reasons, once each."""
    lines: list[str] = []
    for family in dict.fromkeys(result.family for result in results):
        cases = [result for result in results if result.family == family]
        if all(result.outcome == "skipped" for result in cases):
            reasons = list(dict.fromkeys(result.detail for result in cases if result.detail))
            lines += [f"{family}: {reason}" for reason in reasons[:3]]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        subject: Subject = (
            load_subject(args.subject) if args.subject else StdioSubject(args.stdio, timeout=args.timeout)
        )
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        print(f"conformance: cannot load subject {args.subject!r}: {error}", file=sys.stderr)
        return 2
    try:
        try:
            name, capabilities = hello(subject)
            print(f"subject: {name} (capabilities: {', '.join(sorted(capabilities))})")
        except SubjectError as error:
            print(f"subject: not answering hello ({error})")
        families = (
            (frozenset(args.families) | ({"trace"} if args.trace_crashes else set()))
            if args.families
            else None
        )
        extra = {"trace-crashes": "1"} if args.trace_crashes else {}
        options = Options(profile=args.profile, families=families, vectors_dir=args.vectors, extra=extra)
        results = run_suite(subject, options)
    finally:
        subject.close()
    print(format_table(results))
    for line in describe_not_run(results):
        print(line)
    write_junit(results, args.junit)
    print(f"JUnit report: {args.junit}")
    return 1 if any(result.outcome == "failed" for result in results) or not results else 0


if __name__ == "__main__":
    raise SystemExit(main())
