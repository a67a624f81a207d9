"""The mutation score of the suite: how many deliberately broken subjects it catches, and how well.

  python -m conformance.mutation --subjects tests.broken_subjects:BROKEN_SUBJECTS \\
      --baseline reference.server:ReferenceSubject [--markdown PATH] [--families F ...] [--jobs N]

Each ``--subjects`` spec names a sequence of subject factories (or one factory) as
``module:attribute``; ``--baseline`` names the unbroken subject they were made from. The
baseline runs the suite first: a case it fails is not counted against any broken subject. Then
every broken subject runs every selected family in process (crash injection stops at its first
failing point), and the report lists, per subject, whether it was caught, the first case that
caught it, and how many independent checks did: the failing cases, and the families they belong
to. A subject caught by a single case is *thinly covered*: one changed vector or strategy and it
would survive. The suite knows the subjects only through these specs (it never imports
``reference/``).

Each subject (and the baseline) runs in a process of its own, forked for it and ended after it, so
that what one run leaves in memory (caches, Hypothesis's example database, the subject's stores) is
not carried into the next and the report's memory stays that of one run; ``--jobs N`` runs N of
those processes at once (default 1). The table lists the subjects in the order given, whatever
the order they finish in.

Exit codes: 0 every subject caught; 1 one survived (or the baseline fails a case); 2 a spec that
does not load.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Final, TypeVar

from conformance.crash import FAIL_FAST
from conformance.report import PROFILES, CaseResult, Options
from conformance.runner import run_suite
from conformance.subject import InProcessSubject

Factory = Callable[[], Any]
THIN: Final = 1  # caught by at most this many cases: thinly covered


@dataclass(frozen=True)
class Score:
    """What the suite said about one broken subject."""

    subject: str
    rule: str
    failing: tuple[tuple[str, str], ...]  # (family, case name) of every new failure, in run order

    @property
    def caught(self) -> bool:
        return bool(self.failing)

    @property
    def families(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(family for family, _ in self.failing))

    @property
    def thin(self) -> bool:
        return 0 < len(self.failing) <= THIN

    @property
    def first(self) -> str:
        return f"[{self.failing[0][0]}] {self.failing[0][1]}" if self.failing else ""


def load_factories(spec: str) -> list[Factory]:
    """``module:attribute``: a sequence of factories, or one factory."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected 'package.module:attribute', got {spec!r}")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    factories = list(found) if isinstance(found, (list, tuple)) else [found]
    if not factories or not all(callable(factory) for factory in factories):
        raise TypeError(f"{spec!r} is not a factory or a sequence of factories")
    return factories


def run_in_process(factory: Factory, options: Options) -> list[CaseResult]:
    subject = InProcessSubject(factory())
    try:
        return run_suite(subject, options)
    finally:
        subject.close()


def failed_cases(results: Sequence[CaseResult]) -> list[tuple[str, str]]:
    return [(result.family, result.name) for result in results if result.outcome in ("failed", "error")]


def score_subject(factory: Factory, options: Options, known: frozenset[tuple[str, str]]) -> Score:
    failing = [case for case in failed_cases(run_in_process(factory, options)) if case not in known]
    name = getattr(factory, "__name__", repr(factory))
    return Score(name, str(getattr(factory, "rule", "")), tuple(dict.fromkeys(failing)))


T = TypeVar("T")


def _send_result(task: Callable[[], object], sender: Connection) -> None:
    sender.send(task())
    sender.close()


def run_forked(
    tasks: Sequence[Callable[[], T]], jobs: int, done: Callable[[int, T | None, int], None]
) -> None:
    """Run every task in a forked process of its own, at most ``jobs`` at once, and call
    ``done(index, result, exit code)`` as each ends (the result is ``None`` when the process
    died before sending it). The children inherit the tasks: nothing but the result is pickled."""
    context = multiprocessing.get_context("fork")
    waiting = list(enumerate(tasks))
    running: dict[int, tuple[int, BaseProcess, Connection]] = {}  # sentinel -> (index, process, receiver)
    while waiting or running:
        while waiting and len(running) < max(1, jobs):
            index, task = waiting.pop(0)
            receiver, sender = context.Pipe(duplex=False)
            child = context.Process(target=_send_result, args=(task, sender))
            child.start()
            sender.close()
            running[child.sentinel] = (index, child, receiver)
        ready = wait([receiver for _, _, receiver in running.values()] + list(running))
        for sentinel, (index, process, receiver) in list(running.items()):
            if receiver not in ready and sentinel not in ready:
                continue
            try:
                result: T | None = receiver.recv()
            except EOFError:
                result = None
            process.join()
            receiver.close()
            del running[sentinel]
            done(index, result, process.exitcode or 0)


def score_all(
    factories: Sequence[Factory],
    baseline: Factory,
    options: Options,
    progress: Callable[[Score], None] = lambda score: None,
    jobs: int = 1,
) -> tuple[list[tuple[str, str]], list[Score]]:
    """The baseline's failures, and every broken subject's score, in the order of ``factories``;
    each run in a forked process of its own, ``jobs`` at a time. A run whose process dies counts
    as one failing case (``process``), for a broken subject; for the baseline it is an error."""
    options = Options(
        profile=options.profile,
        families=options.families,
        extra={**options.extra, FAIL_FAST: "1"},
        exhaustive_depth=options.exhaustive_depth,
    )
    known_runs: list[list[tuple[str, str]] | None] = []

    def baseline_done(index: int, found: list[tuple[str, str]] | None, code: int) -> None:
        if found is None:
            raise RuntimeError(f"the baseline's run ended without a result (exit code {code})")
        known_runs.append(found)

    run_forked([lambda: failed_cases(run_in_process(baseline, options))], 1, baseline_done)
    known = known_runs[0] or []
    scores: dict[int, Score] = {}

    def subject_done(index: int, score: Score | None, code: int) -> None:
        factory = factories[index]
        if score is None:
            name = getattr(factory, "__name__", repr(factory))
            died = ("process", f"the run ended without a result (exit code {code})")
            score = Score(name, str(getattr(factory, "rule", "")), (died,))
        scores[index] = score
        progress(score)

    known_set = frozenset(known)
    tasks = [partial(score_subject, factory, options, known_set) for factory in factories]
    run_forked(tasks, jobs, subject_done)
    return known, [scores[index] for index in range(len(factories))]


def summary(scores: Sequence[Score]) -> str:
    caught = sum(score.caught for score in scores)
    twice = sum(len(score.failing) >= 2 for score in scores)
    thin = sum(score.thin for score in scores)
    return (
        f"mutation score: {caught}/{len(scores)} broken subjects caught; "
        f"{twice} by two or more independent checks, {thin} thinly covered (one case)"
    )


def verdict_of(score: Score) -> str:
    if not score.caught:
        return "SURVIVED"
    return "caught, thinly covered" if score.thin else "caught"


def format_text(scores: Sequence[Score]) -> str:
    width = max((len(score.subject) for score in scores), default=10)
    lines = [summary(scores)]
    for score in scores:
        counts = f"{len(score.failing)} cases in {len(score.families)} families"
        lines.append(f"  {score.subject:<{width}}  {verdict_of(score):<22}  {counts:<24}  {score.first[:90]}")
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def format_markdown(scores: Sequence[Score]) -> str:
    lines = [
        summary(scores),
        "",
        "| broken subject | rule | verdict | cases | families | first caught by |",
        "| --- | --- | --- | ---: | --- | --- |",
    ]
    for score in scores:
        cells = (
            score.subject,
            score.rule,
            verdict_of(score),
            str(len(score.failing)),
            ", ".join(score.families),
            score.first[:120],
        )
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.mutation",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--subjects", nargs="+", required=True, metavar="MODULE:ATTR")
    parser.add_argument("--baseline", required=True, metavar="MODULE:FACTORY")
    parser.add_argument("--families", nargs="+", metavar="FAMILY", help="run only these (default: all)")
    parser.add_argument("--profile", choices=PROFILES, default="ci")
    parser.add_argument(
        "--exhaustive-depth",
        type=int,
        metavar="N",
        help="the exhaustive family's depth (default: the profile's)",
    )
    parser.add_argument("--jobs", type=int, default=1, metavar="N", help="subjects run at once (default 1)")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="also write the table as markdown")
    parser.add_argument("--path", action="append", default=[], metavar="DIR", help="prepend to sys.path")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path[:0] = [str(Path(entry).resolve()) for entry in args.path]
    sys.path.insert(0, str(Path.cwd()))
    try:
        factories = [factory for spec in args.subjects for factory in load_factories(spec)]
        (baseline,) = load_factories(args.baseline)
    except (ImportError, AttributeError, ValueError, TypeError) as error:
        print(f"python -m conformance.mutation: {error}", file=sys.stderr)
        return 2
    options = Options(
        profile=args.profile,
        families=frozenset(args.families) if args.families else None,
        exhaustive_depth=args.exhaustive_depth,
    )
    known, scores = score_all(
        factories,
        baseline,
        options,
        lambda score: print(format_markdown([score]).splitlines()[-1], file=sys.stderr, flush=True),
        jobs=args.jobs,
    )
    print(format_text(scores))
    if args.markdown is not None:
        args.markdown.write_text(format_markdown(scores), encoding="utf-8")
    if known:
        print(f"the baseline fails {len(known)} cases: {known[:3]}", file=sys.stderr)
    return 0 if all(score.caught for score in scores) and not known else 1


if __name__ == "__main__":
    sys.exit(main())
