"""Certify a subject against the conformance suite.

  python -m conformance --subject package.module:factory   a Python object with handle(request)
  python -m conformance --stdio "command"                  any language, JSON lines (PROTOCOL.md)

The run asks the subject who it is (hello), runs every family the options select, prints a table
per family (passed, failed, error, unsupported, not run) and the certificate's summary: every rule
of the spec, certified or not (PROTOCOL.md, "Certificate"), and writes a JUnit XML report. With
--certificate DIR (or next to --json) the certificate is also written as JSON and Markdown.
--list lists the cases; --case GLOB runs only the cases whose key matches. --exhaustive-depth N
runs the exhaustive family at N ops instead of the profile's depth (the certificate states it). --jobs N runs the
families, and the parts of the long ones, on N worker processes with a subject each: the same
cases, outcomes, order and certificate as one process. A failing machine or
exhaustive case shows its steps shrunk and a command that replays them: --replay TOKEN runs only
that sequence and says whether it passes. With --expect FILE it
compares every case with that implementation's expectation file instead: an unexpected failure, a
failure with another fingerprint, an unexpected pass and an entry whose cause is TODO all fail the
run, and the certificate lists the file's deviations by kind, each once. --write-expectations FILE
writes a file that expects the run as it ended (each entry's cause and kind TODO);
--update-expectations FILE rewrites only what changed in an existing one and prints the diff.

Families: the vector folders (session, json, header, surface, provenance, tool-rewrite, seed,
fork, repair, storage, pairing, prune, tokens, checker, files, …) and the stateful checks (pure-drt,
files, machine, exhaustive, crash; trace only with --trace-crashes or when named). A name that is
both, like files, runs its vectors and its stateful checks.

Exit codes: 0 no case failed or erred, at least one passed and the deadline cut nothing (or, with
--expect, every case ended as expected); 1 a case failed or erred, nothing passed, the deadline
cut the run, or the expectations were not met (with --write-expectations or
--update-expectations: 0 once the file is written from a run the deadline did not cut); 2 the command line is wrong (an unknown family, a
vectors folder with no vectors, an output path that cannot be written); 3 the subject could not
be reached (it does not start, its factory raises, or it does not answer hello) or a vector file
is malformed (each said with a code and a sentence, no traceback); 130 interrupted (the partial
report is written).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from conformance.crash import SUBJECT_ARGUMENT
from conformance.exhaustive import exhaustive_depth, replay_letters
from conformance.expectations import (
    ExpectationError,
    ExpectationFile,
    Record,
    encode_expectations,
    format_verdict,
    judge,
    load_expectations,
    update_expectations,
    write_expectations,
)
from conformance.families import FAMILY_RULES
from conformance.machine.replay import (
    Recording,
    Replayer,
    ReplayTokenError,
    decode_recording,
    replay_program,
)
from conformance.progress import Progress
from conformance.report import (
    PROFILES,
    CaseResult,
    Options,
    build_certificate,
    case_record,
    encode_results,
    format_certificate,
    format_table,
    write_certificate,
    write_junit,
)
from conformance.runner import (
    Hello,
    SubjectSpec,
    VectorFileError,
    case_names,
    every_rule,
    family_names,
    hello,
    load_vectors,
    run_suite,
)
from conformance.subject import DEFAULT_TIMEOUT, Subject, SubjectError

DEFAULT_JUNIT = Path("conformance-report.xml")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """A command line the suite cannot run: the message says what to do instead."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--list", action="store_true", help="list every case's key and exit")
    target.add_argument("--subject", metavar="MODULE:FACTORY", help="a Python object with handle(request)")
    target.add_argument("--stdio", metavar="COMMAND", help="a process speaking the protocol on stdin/stdout")
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
        help=f"per-response timeout, in process and over stdio (default: {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="SECONDS",
        help="stop the whole run after this long (the rest is not run)",
    )
    expectations = parser.add_mutually_exclusive_group()
    expectations.add_argument(
        "--expect", type=Path, metavar="FILE", help="an expectation file to certify against"
    )
    expectations.add_argument(
        "--write-expectations",
        type=Path,
        metavar="FILE",
        help="write an expectation file that expects this run (new entries' cause and kind: TODO)",
    )
    expectations.add_argument(
        "--update-expectations",
        type=Path,
        metavar="FILE",
        help="rewrite an expectation file to expect this run, keeping unchanged entries; prints the diff",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every case's outcome as JSON")
    parser.add_argument(
        "--certificate",
        type=Path,
        metavar="DIR",
        help="write the certificate as DIR/certificate.json and DIR/certificate.md "
        "(default with --json: <json stem>.certificate.json and .md beside it)",
    )
    parser.add_argument(
        "--case",
        action="append",
        metavar="GLOB",
        help="run only the cases whose key (family/slug, see --list) matches; repeatable",
    )
    parser.add_argument(
        "--replay",
        metavar="TOKEN",
        help="replay one recorded stateful sequence (printed with a failing machine or exhaustive case) and exit",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="run families and their parts on N worker processes, each with a subject of its own "
        "(a fresh factory call, or a fresh --stdio process); the same cases, outcomes and order as "
        "--jobs 1 (default: 1)",
    )
    parser.add_argument(
        "--exhaustive-depth",
        type=int,
        metavar="N",
        help="the exhaustive family's sequence length, instead of the profile's (ci and thorough: 5); "
        "the certificate states the depth its search ran at",
    )
    parser.add_argument(
        "--trace-crashes",
        action="store_true",
        help="also run the trace family: every crash state the subject's system calls allow "
        "(--stdio, needs strace; conformance/CRASH-STATES.md)",
    )
    return parser.parse_args(argv)


def check_usage(args: argparse.Namespace) -> None:
    """Refuse what would run nothing or lose the report, before anything runs."""
    if args.stdio is not None and not shlex.split(args.stdio):
        raise UsageError('--stdio needs a command, e.g. --stdio "python -m reference.server"')
    if args.vectors is not None and (not args.vectors.is_dir() or not load_vectors(args.vectors)):
        raise UsageError(f"--vectors {args.vectors}: no vectors there (expected <family>/<case>.json files)")
    known = family_names(args.vectors)
    if args.families:
        unknown = sorted(set(args.families) - set(known))
        if unknown:
            raise UsageError(f"unknown families {', '.join(unknown)}; choose from: {', '.join(known)}")
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: at least 1 worker")
    if args.exhaustive_depth is not None and args.exhaustive_depth < 1:
        raise UsageError(f"--exhaustive-depth {args.exhaustive_depth}: at least 1 op")
    if args.certificate is not None and not args.certificate.is_dir():
        raise UsageError(f"--certificate {args.certificate}: no such folder")
    for flag, path in (("--junit", args.junit), ("--json", args.json)):
        if path is not None and not (path.parent if str(path.parent) else Path(".")).is_dir():
            raise UsageError(f"{flag} {path}: the folder {path.parent} does not exist")
    if args.replay is not None:
        recording = decode_recording(args.replay)
        if recording.family not in REPLAYERS:
            raise UsageError(f"--replay: no replay for family {recording.family!r}")
    for flag, path in (("--expect", args.expect), ("--update-expectations", args.update_expectations)):
        if path is not None and not path.is_file():
            raise UsageError(f"{flag} {path}: no such file (--write-expectations writes a new one)")
    written = args.write_expectations
    if written is not None and not (written.parent if str(written.parent) else Path(".")).is_dir():
        raise UsageError(f"--write-expectations {written}: the folder {written.parent} does not exist")


def subject_spec(args: argparse.Namespace) -> SubjectSpec:
    if args.subject:
        return SubjectSpec("subject", args.subject, args.timeout)
    return SubjectSpec("stdio", args.stdio, args.timeout)


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            # a report quotes generated values, lone surrogates among them: escape what cannot print
            stream.reconfigure(errors="backslashreplace")
    args = parse_args(argv)
    if args.list:
        try:
            print("\n".join(case_names(args.vectors)))
        except VectorFileError as error:
            print(f"conformance: [{error.code}] {error}", file=sys.stderr)
            return EXIT_UNREACHABLE
        return EXIT_OK
    try:
        check_usage(args)
        known = args.expect or args.update_expectations
        expectations = load_expectations(known) if known is not None else None
    except (UsageError, ExpectationError, ReplayTokenError) as error:
        print(f"conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    except VectorFileError as error:
        print(f"conformance: [{error.code}] {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    try:
        subject = subject_spec(args).open()
    except SubjectError as error:
        print(f"conformance: [SUBJECT_NOT_STARTED] the subject could not be made: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        print(f"conformance: cannot load subject {args.subject!r}: {error}", file=sys.stderr)
        return EXIT_USAGE
    results: list[CaseResult] = []
    interrupted = False
    try:
        try:
            said = hello(subject)
        except SubjectError as error:
            print(f"conformance: the subject does not answer hello: {error}", file=sys.stderr)
            return EXIT_UNREACHABLE
        print(describe_subject(said))
        if args.replay is not None:
            return replay(subject, said, decode_recording(args.replay))
        options = build_options(args)
        try:
            run_suite(
                subject,
                options,
                said=said,
                into=results,
                progress=Progress.for_terminal(sys.stderr),
                jobs=args.jobs,
                spec=subject_spec(args),
            )
        except KeyboardInterrupt:
            interrupted = True
    finally:
        subject.close()
    return report(args, said, results, expectations, interrupted)


def describe_subject(said: Hello) -> str:
    capabilities = ", ".join(sorted(said.capabilities))
    return f"subject: {said.describe()} (protocol {said.protocol}; {said.target.describe()}; capabilities: {capabilities})"


def build_options(args: argparse.Namespace) -> Options:
    families = (
        frozenset(args.families) | ({"trace"} if args.trace_crashes else set()) if args.families else None
    )
    extra = {"trace-crashes": "1"} if args.trace_crashes else {}
    extra[SUBJECT_ARGUMENT] = (
        f"--subject {args.subject}" if args.subject else f"--stdio {shlex.quote(args.stdio)}"
    )
    deadline = time.monotonic() + args.deadline if args.deadline else None
    return Options(
        profile=args.profile,
        families=families,
        vectors_dir=args.vectors,
        extra=extra,
        deadline=deadline,
        cases=tuple(args.case) if args.case else None,
        exhaustive_depth=args.exhaustive_depth,
    )


REPLAYERS: dict[str, Replayer] = {"machine": replay_program, "exhaustive": replay_letters}


def replay(subject: Subject, said: Hello, recording: Recording) -> int:
    """Run one recorded sequence on the subject: passed (exit 0) when every step agrees with the
    spec model, else failed with the first disagreement's signature (exit 1)."""
    try:
        found = REPLAYERS[recording.family](subject, recording.steps, recording.storage, said.target)
    except ReplayTokenError as error:
        print(f"conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    steps = f"{len(recording.steps)} steps, storage {recording.storage}"
    if found is None:
        print(f"replay of a {recording.family} case ({steps}): passed")
        return EXIT_OK
    print(f"replay of a {recording.family} case ({steps}): failed: {found}")
    return EXIT_FAILED


def describe_not_run(results: Sequence[CaseResult]) -> list[str]:
    """Why each family that ran no check at all (every case unsupported or not run) did not run:
    ``family: outcome: reason``, each reason once."""
    lines: list[str] = []
    for family in dict.fromkeys(result.family for result in results):
        cases = [result for result in results if result.family == family]
        if all(result.outcome in ("unsupported", "not run") for result in cases):
            reasons = dict.fromkeys(
                (result.outcome, result.detail.splitlines()[0].removeprefix(f"{result.outcome}: "))
                for result in cases
                if result.detail
            )
            lines += [f"{family}: {outcome}: {reason}" for outcome, reason in list(reasons)[:3]]
    return lines


def report(
    args: argparse.Namespace,
    said: Hello,
    results: list[CaseResult],
    expectations: ExpectationFile | None,
    interrupted: bool,
) -> int:
    print(format_table(results))
    for line in describe_not_run(results):
        print(line)
    hello_json = {"name": said.name, "version": said.version, "protocol": said.protocol}
    hello_json |= {"capabilities": sorted(said.capabilities), "target": said.target.describe()}
    records = [case_record(result) for result in results]
    verdict = judge(expectations, records) if args.expect is not None and expectations is not None else None
    certificate = build_certificate(results, every_rule(args.vectors), hello_json, args.profile, FAMILY_RULES)
    if "exhaustive" in certificate.families:
        depth = exhaustive_depth(Options(profile=args.profile, exhaustive_depth=args.exhaustive_depth))
        certificate = replace(certificate, exhaustive_depth=depth)
    if verdict is not None:
        certificate = replace(certificate, deviations=verdict.deviations)
    print(format_certificate(certificate))
    write_junit(results, args.junit)
    print(f"JUnit report: {args.junit}")
    if args.json is not None:
        args.json.write_text(encode_results(results, hello_json), encoding="utf-8")
    base = (
        args.certificate / "certificate"
        if args.certificate is not None
        else args.json.parent / f"{args.json.stem}.certificate"
        if args.json is not None
        else None
    )
    if base is not None:
        as_json, as_markdown = write_certificate(certificate, base)
        print(f"certificate: {as_json} and {as_markdown}")
    if interrupted:
        print(
            f"conformance: interrupted; the report holds the {len(results)} cases that finished",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if not results:
        print("conformance: no case ran", file=sys.stderr)
        return EXIT_FAILED
    if certificate.cut:
        print("conformance: the deadline cut the run; what it cut is not certified", file=sys.stderr)
        return EXIT_FAILED
    if args.write_expectations is not None or args.update_expectations is not None:
        return write_from_run(args, said, records, expectations)
    if verdict is not None and expectations is not None:
        print(format_verdict(expectations, verdict))
        return EXIT_OK if verdict.ok else EXIT_FAILED
    if any(result.outcome in ("failed", "error") for result in results):
        return EXIT_FAILED
    if not any(result.outcome == "passed" for result in results):
        print("conformance: no case passed, so nothing is certified (see the reasons above)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def write_from_run(
    args: argparse.Namespace, said: Hello, records: Sequence[Record], old: ExpectationFile | None
) -> int:
    """--write-expectations or --update-expectations: the file that expects this run."""
    if old is None:
        path = args.write_expectations
        written = write_expectations(said.name, said.version, records)
    else:
        path = args.update_expectations
        updated, diff = update_expectations(old, records)
        written = replace(updated, implementation=said.name, version=said.version)
        print(f"expectations {path}: {len(diff)} changed")
        print("\n".join(diff) if diff else "(no change)")
    path.write_text(encode_expectations(written), encoding="utf-8")
    todo = sum(entry.todo for entry in written.expectations)
    print(
        f"wrote {path}: {len(written.expectations)} entries, {todo} with cause TODO (fill in cause and kind)"
    )
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
