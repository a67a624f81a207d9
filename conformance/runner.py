"""Run the conformance suite against a subject.

A run asks the subject ``hello`` for its capabilities, then runs every *check family*: one per
folder of vectors under ``conformance/vectors/`` (each vector a case), then each family of
:data:`conformance.families.STATEFUL_FAMILIES`, the checks that generate their own workloads. Each
case ends passed, failed, error (a setup step failed: :func:`step_under_test`), unsupported (a
capability the subject does not declare, or an ``UNSUPPORTED_OP`` answer) or not run (a target it
does not apply to, a dead subject, an overrun deadline), with the reason. The deadline is checked
between cases and, through :data:`conformance.report.RUN_DEADLINE`, between a stateful family's
steps: a family it cuts is *not run*, never passed.
"""

from __future__ import annotations

import fnmatch
import json
import multiprocessing
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.util import Finalize
from pathlib import Path
from typing import Any, Final, Literal

from conformance.families import FAMILY_RULES, OPT_IN, SPLITS, STATEFUL_FAMILIES, WHOLE_WEIGHTS, CheckFn
from conformance.machine.machines import READ_ONLY_OPS
from conformance.matching import answer_fingerprint, compare, short
from conformance.progress import Progress
from conformance.report import CUT, RUN_DEADLINE, CaseResult, DeadlineReached, Options, case_slug
from conformance.spec_index import VECTORS_DIR
from conformance.subject import (
    DEFAULT_TIMEOUT,
    Response,
    StdioSubject,
    Subject,
    SubjectDead,
    SubjectError,
    load_subject,
)
from conformance.targets import DEFAULT_TARGET, Target, TargetError, decode_target
from spec.checks.log import RULES as CHECKER_RULES
from spec.protocol import CHECKER_RULE, FIRST_PROTOCOL_VERSION, PROTOCOL_VERSION, UNSUPPORTED_OP

PROTOCOL_FAMILY: Final = "protocol"  # where a run reports that the subject could not be reached


# --- vectors ---------------------------------------------------------------------------------------


class VectorFileError(ValueError):
    """A vector file that cannot be run: not UTF-8 JSON, or not a vector's shape (``code``
    ``VECTOR_MALFORMED``, and a sentence naming the file)."""

    code = "VECTOR_MALFORMED"


def load_vectors(directory: Path = VECTORS_DIR) -> list[dict[str, Any]]:
    """Every vector under ``directory``, family folder by family folder, in file-name order.
    Raises :class:`VectorFileError` for a file that is not JSON, not an object, has no ``name``
    and neither ``steps`` (a list) nor ``function``, or a ``family`` that is not a string."""
    vectors: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*/*.json")):
        try:
            vector = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as error:  # RecursionError: nested too deep
            raise VectorFileError(f"{path}: not a readable JSON file ({error})") from None
        if not isinstance(vector, dict):
            raise VectorFileError(f"{path}: a vector is a JSON object, this is a {type(vector).__name__}")
        if not isinstance(vector.get("name"), str) or not (
            isinstance(vector.get("steps"), list) or isinstance(vector.get("function"), str)
        ):
            raise VectorFileError(f"{path}: a vector has a name and either steps (a list) or a function")
        if not isinstance(vector.setdefault("family", path.parent.name), str):
            raise VectorFileError(f"{path}: a vector's family, when given, is a string (its folder's name)")
        vectors.append(vector)
    return vectors


def rule_of(vector: Mapping[str, Any]) -> str:
    """The spec function whose rule a vector exercises: a protocol vector's ``rule``, a pure
    vector's ``function``."""
    return str(vector.get("rule", vector.get("function", "")))


def vector_key(vector: Mapping[str, Any]) -> str:
    """The key a vector's case reports under (``family/slug``), known before it runs."""
    return f"{vector['family']}/{case_slug(str(vector['name']))}"


def step_under_test(steps: Sequence[Mapping[str, Any]]) -> int:
    """The index of the step a vector is about (vectors do not mark it): the first step that
    expects an error, else the last step that is not a read (``state``, ``read``, ...), which the
    reads after it look at. The steps before it are the case's setup."""
    for number, step in enumerate(steps):
        if step["expect"].get("ok") is False:
            return number
    changing = [n for n, step in enumerate(steps) if step["request"].get("op") not in READ_ONLY_OPS]
    return changing[-1] if changing else len(steps) - 1


class _Unsupported(Exception):
    """The subject answered ``UNSUPPORTED_OP``: it says it lacks what the case needs."""


class _SetupFailed(Exception):
    """A step before the step under test failed: the case's rule was never reached."""

    def __init__(self, text: str, fingerprint: str) -> None:
        super().__init__(text)
        self.fingerprint = fingerprint


def run_vector(
    subject: Subject, vector: Mapping[str, Any], capabilities: frozenset[str], target: Target = DEFAULT_TARGET
) -> CaseResult:
    """One vector: *unsupported* when the subject lacks a capability it needs or answers
    ``UNSUPPORTED_OP``, *not run* when the case does not apply to the subject's target, else passed
    or failed with the first mismatch (and, for the person reading the failure, the rule the vector
    pins)."""
    family, name, rule = str(vector["family"]), str(vector["name"]), rule_of(vector)
    missing = sorted(set(vector.get("capabilities", ["core"])) - capabilities)
    if missing:
        return CaseResult(
            family, name, "unsupported", f"the subject does not declare {', '.join(missing)}", rule=rule
        )
    reason = target.not_applicable(vector.get("function"))
    if reason is not None:
        return CaseResult(family, name, "not run", reason, rule=rule)
    began = time.perf_counter()
    try:
        if "function" in vector:
            problem = _run_pure(subject, vector, target)
        else:
            problem = _run_steps(subject, vector["steps"], target)
    except SubjectError as error:
        problem = (f"the subject broke the protocol: {error}", "broke the protocol")
    except _Unsupported as unsupported:
        return CaseResult(family, name, "unsupported", str(unsupported), time.perf_counter() - began, rule)
    except _SetupFailed as setup:
        detail = f"{setup}\nthe rule under test ({rule}) was never reached"
        seconds = time.perf_counter() - began
        return CaseResult(family, name, "error", detail, seconds, rule, fingerprint=setup.fingerprint)
    seconds = time.perf_counter() - began
    if problem is None:
        return CaseResult(family, name, "passed", seconds=seconds, rule=rule)
    detail, fingerprint = problem
    return CaseResult(
        family, name, "failed", f"{detail}\nrule: {rule}", seconds, rule, fingerprint=fingerprint
    )


Problem = tuple[str, str]
"""What a vector's run found: the first mismatch (for the reader) and its fingerprint (for an
expectation file: where it failed, the expected answer and the subject's, no data)."""


def _run_steps(subject: Subject, steps: Sequence[Mapping[str, Any]], target: Target) -> Problem | None:
    """The first mismatch from the step under test on; a mismatch before it (in the setup) raises
    :class:`_SetupFailed`."""
    tested = step_under_test(steps)
    for number, step in enumerate(steps):
        args = dict(step["request"])
        op = str(args.pop("op"))
        where = f"step {number} ({op})"
        try:
            response = _unless_unsupported(subject.request(op, **args), op)
            found = _mismatch(step["expect"], response, where, op, target)
        except SubjectError as error:
            found = (f"{where}: the subject broke the protocol: {error}", f"{where}: broke the protocol")
        if found is not None:
            shown = f"{found[0]}\nrequest: {short(step['request'])}"
            if number < tested:
                raise _SetupFailed(f"setup failed: {shown}", f"setup {found[1]}")
            return shown, found[1]
    return None


def _run_pure(subject: Subject, vector: Mapping[str, Any], target: Target) -> Problem | None:
    function = str(vector["function"])
    where = f"call {function}"
    handed, expect = target.pure_case(function, vector["input"], vector["expect"])
    try:
        response = _unless_unsupported(subject.request("call", function=function, input=handed), function)
        found = _mismatch(expect, response, where, "call", target, function)
    except SubjectError as error:
        found = (f"{where}: the subject broke the protocol: {error}", f"{where}: broke the protocol")
    if found is None:
        return None
    return f"{found[0]}\ninput: {short(handed)}", found[1]


def _mismatch(
    expect: Mapping[str, Any],
    response: Response,
    where: str,
    op: str,
    target: Target,
    function: str | None = None,
) -> Problem | None:
    problem = compare(expect, response, op, target, function)
    if problem is None:
        return None
    fingerprint = answer_fingerprint(expect, bool(response.ok), response.error_code, problem)
    return f"{where}: {problem}", f"{where}: {fingerprint}"


def _unless_unsupported(response: Response, what: str) -> Response:
    if not response.ok and response.error_code == UNSUPPORTED_OP:
        raise _Unsupported(f"the subject answered UNSUPPORTED_OP for {what}")
    return response


def run_vectors(subject: Subject, options: Options) -> list[CaseResult]:
    """Every vector the options select, in file order (no progress, no deadline: see run_suite)."""
    vectors = load_vectors(options.vectors_dir or VECTORS_DIR)
    target = options.target or DEFAULT_TARGET
    return [
        run_vector(subject, vector, options.capabilities, target)
        for vector in vectors
        if options.families is None or vector["family"] in options.families
    ]


# --- a whole run -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hello:
    """What a subject says about itself (PROTOCOL.md, "Hello")."""

    name: str
    version: str
    protocol: int
    capabilities: frozenset[str]
    target: Target

    def describe(self) -> str:
        return f"{self.name} {self.version}".strip()


def hello(subject: Subject) -> Hello:
    """Ask the subject who it is. ``core`` is always assumed; a protocol 1 subject's ``pure``
    includes the checker's rule ids (``checker-rules``), which claims every ``checker-rule:<id>``
    (and claiming each of them is claiming ``checker-rules``); a protocol this suite does not speak
    (none said is 1) and an unknown target are a SubjectError."""
    response = subject.request("hello", protocol=PROTOCOL_VERSION)
    if not response.ok or not isinstance(response.result, dict):
        raise SubjectError(f"hello failed: {response.error_code}: {response.error_message}")
    result = response.result
    declared = result.get("capabilities")
    names = {str(c) for c in declared} if isinstance(declared, list) else set()
    protocol = result.get("protocol")
    version = int(protocol) if isinstance(protocol, int) and not isinstance(protocol, bool) else 1
    if not FIRST_PROTOCOL_VERSION <= version <= PROTOCOL_VERSION:
        raise SubjectError(
            f"hello: the subject speaks protocol {version}; this suite speaks {FIRST_PROTOCOL_VERSION} "
            f"to {PROTOCOL_VERSION} (PROTOCOL.md, Hello)"
        )
    if version < 2 and "pure" in names:
        names.add("checker-rules")
    every_rule = {f"{CHECKER_RULE}{rule}" for rule in CHECKER_RULES}
    if "checker-rules" in names:
        names |= every_rule
    elif every_rule <= names:
        names.add("checker-rules")
    try:
        target = decode_target(result)
    except TargetError as error:
        raise SubjectError(str(error)) from None
    implementation = result.get("version")
    return Hello(
        str(result.get("name", "?")),
        implementation if isinstance(implementation, str) else "",
        version,
        frozenset(names | {"core"}),
        target,
    )


@dataclass(frozen=True)
class SubjectSpec:
    """How to make a subject (``--subject MODULE:FACTORY`` or ``--stdio COMMAND``): the run's own,
    and one more for each ``--jobs`` worker (a fresh factory call, a fresh process)."""

    kind: Literal["subject", "stdio"]
    value: str
    timeout: float = DEFAULT_TIMEOUT

    def open(self) -> Subject:
        if self.kind == "subject":
            return load_subject(self.value, timeout=self.timeout)
        return StdioSubject(self.value, timeout=self.timeout, warn=_warn)


def _warn(text: str) -> None:
    print(f"conformance: {text}", file=sys.stderr)


@dataclass(frozen=True)
class Unit:
    """A piece of a run one worker does: a vector family's cases (``part`` -1), a whole stateful
    family (``part`` 0 of 1), or one part of a split family (:data:`conformance.families.SPLITS`)."""

    family: str
    part: int
    weight: float


@dataclass(frozen=True)
class Fallen:
    """A part that ended its family: it raised, or it could not run (the cases that say so)."""

    results: list[CaseResult]


def run_suite(
    subject: Subject,
    options: Options,
    checks: Mapping[str, CheckFn] = STATEFUL_FAMILIES,
    *,
    said: Hello | None = None,
    into: list[CaseResult] | None = None,
    progress: Progress | None = None,
    jobs: int = 1,
    spec: SubjectSpec | None = None,
) -> list[CaseResult]:
    """Every family the options select: the vectors, then ``checks`` in order. Results go into
    ``into`` as each family ends (so an interrupted run still has the families that finished) and
    to ``progress``. A check that raises fails its family with the traceback and the run goes on; once
    the subject is dead (it stopped answering) or the deadline has passed, every case left is
    *not run*, with the reason, never passed. With ``jobs`` above 1 and a ``spec`` for the workers'
    subjects, the run's units (:func:`plan_units`) go to that many worker processes, each with a
    subject of its own, and the results are put back in the order one process gives them."""
    results = [] if into is None else into
    progress = progress or Progress.silent()
    if said is None:
        try:
            said = hello(subject)
        except SubjectError as error:
            results.append(CaseResult(PROTOCOL_FAMILY, "the subject answers hello", "failed", str(error)))
            return results
    options = replace(options, capabilities=said.capabilities, target=said.target)
    units = plan_units(options, checks)
    parallel = jobs > 1 and spec is not None and checks is STATEFUL_FAMILIES
    deadline = RUN_DEADLINE.set(options.deadline)
    try:
        if parallel:
            assert spec is not None
            done = _run_in_workers(units, options, jobs, spec, progress)
        else:
            done = ((unit, run_unit(subject, options, unit, checks, progress)) for unit in units)
        for family, vectors, pieces in _by_family(units, done):
            if vectors:
                found = [result for piece in pieces for result in piece]
            else:
                found = _finish(family, subject, options, pieces, checks)
            if parallel:
                progress.start(family, len(found) if vectors else None)
            for result in found if parallel or not vectors else ():
                progress.case(result)
            results.extend(found)
            progress.end(family)
    finally:
        RUN_DEADLINE.reset(deadline)
        progress.close()
    return results


def plan_units(options: Options, checks: Mapping[str, CheckFn] = STATEFUL_FAMILIES) -> list[Unit]:
    """The units of a run, in report order: each selected vector family, then each selected
    stateful family (a split family's parts in part order)."""
    vectors = _chosen_vectors(options)
    units = [Unit(family, -1, 0.1) for family in dict.fromkeys(str(vector["family"]) for vector in vectors)]
    for family, check in checks.items():
        if not _selected(family, options) or not _family_chosen(family, options):
            continue
        split = SPLITS.get(family) if check is STATEFUL_FAMILIES.get(family) else None
        if split is None:
            units.append(Unit(family, 0, WHOLE_WEIGHTS.get(family, 1.0)))
        else:
            units += [Unit(family, part, split.weight) for part in range(split.parts(options))]
    return units


def run_unit(
    subject: Subject,
    options: Options,
    unit: Unit,
    checks: Mapping[str, CheckFn] = STATEFUL_FAMILIES,
    progress: Progress | None = None,
) -> Any:
    """One unit on ``subject``: a vector family's results, a whole family's results, a split
    family's piece, or :class:`Fallen` when the part raised or cannot run (the subject is dead, the
    deadline has passed)."""
    if unit.part < 0:
        return _run_vectors(subject, options, unit.family, progress or Progress.silent())
    stop = _why_stop(subject, options)
    if stop is not None:
        return Fallen(
            [
                CaseResult(
                    unit.family,
                    f"the {unit.family} checks",
                    "not run",
                    stop,
                    rule=_main_rule(unit.family),
                    case_id="all",
                )
            ]
        )
    check = checks[unit.family]
    split = SPLITS.get(unit.family) if check is STATEFUL_FAMILIES.get(unit.family) else None
    if progress is not None and unit.part == 0:
        progress.start(unit.family)
    if split is None:
        return _guarded(unit.family, lambda: check(subject, options))
    return _guarded(unit.family, lambda: split.run(subject, options, unit.part))


def unit_alone(
    subject: Subject, options: Options, unit: Unit, checks: Mapping[str, CheckFn] = STATEFUL_FAMILIES
) -> list[CaseResult]:
    """A stateful unit run on its own (as mutation testing runs only the units that reach a
    mutant): its part on ``subject``, then its family's cases made from that one piece, under the
    options' deadline."""
    deadline = RUN_DEADLINE.set(options.deadline)
    try:
        return _finish(unit.family, subject, options, [run_unit(subject, options, unit, checks)], checks)
    finally:
        RUN_DEADLINE.reset(deadline)


def _by_family(
    units: Sequence[Unit], done: Iterator[tuple[Unit, Any]]
) -> Iterator[tuple[str, bool, list[Any]]]:
    """Each family's pieces in part order (with whether they are its vectors' results), a family
    as soon as it and every family before it are done (``done`` may come in any order)."""
    groups: dict[tuple[str, bool], list[Unit]] = {}
    for unit in units:
        groups.setdefault((unit.family, unit.part < 0), []).append(unit)
    order = list(groups)
    waiting: dict[Unit, Any] = {}
    for unit, piece in done:
        waiting[unit] = piece
        while order and all(member in waiting for member in groups[order[0]]):
            family, vectors = order.pop(0)
            yield family, vectors, [waiting.pop(member) for member in groups[(family, vectors)]]


def _finish(
    family: str, subject: Subject, options: Options, pieces: list[Any], checks: Mapping[str, CheckFn]
) -> list[CaseResult]:
    """A stateful family's cases from its units' pieces: the first :class:`Fallen` part's, a whole
    family's results, or the split family's ``finish``; each case without a rule given its
    family's."""
    fallen = next((piece for piece in pieces if isinstance(piece, Fallen)), None)
    if fallen is not None:
        found = fallen.results
    else:
        split = SPLITS.get(family) if checks[family] is STATEFUL_FAMILIES.get(family) else None
        if split is None:
            found = pieces[0]
        else:
            finished = _guarded(family, lambda: split.finish(subject, options, pieces))
            found = finished.results if isinstance(finished, Fallen) else finished
    return [result if result.rule else replace(result, rule=_rule_for(family, result)) for result in found]


# --- workers ---------------------------------------------------------------------------------------

_WORKER: dict[str, Subject] = {}  # a worker process's own subject


def _worker_start(spec: SubjectSpec) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run's process reports an interrupt
    subject = spec.open()
    _WORKER["subject"] = subject
    Finalize(subject, subject.close, exitpriority=10)
    try:
        hello(subject)  # as the run's own subject was greeted; what it says, the run already knows
    except SubjectError:
        pass  # a subject that will not answer: its units say so, as they would in one process


def _worker_run(task: tuple[int, Options, Unit]) -> tuple[int, Any]:
    index, options, unit = task
    deadline = RUN_DEADLINE.set(options.deadline)
    try:
        return index, run_unit(_WORKER["subject"], options, unit)
    finally:
        RUN_DEADLINE.reset(deadline)


def _run_in_workers(
    units: Sequence[Unit], options: Options, jobs: int, spec: SubjectSpec, progress: Progress
) -> Iterator[tuple[Unit, Any]]:
    """Every unit on ``jobs`` worker processes (spawned: nothing of this process's state is
    shared), the heaviest first; each as it is done."""
    order = sorted(range(len(units)), key=lambda index: -units[index].weight)
    context = multiprocessing.get_context("spawn")
    pool = context.Pool(jobs, initializer=_worker_start, initargs=(spec,))
    try:
        tasks = [(index, options, units[index]) for index in order]
        for index, piece in pool.imap_unordered(_worker_run, tasks, chunksize=1):
            unit = units[index]
            if unit.part >= 0:
                progress.note(unit.family, f"part {unit.part + 1} done")
            yield unit, piece
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _main_rule(family: str) -> str:
    rules = FAMILY_RULES.get(family, ())
    return rules[0] if rules else f"{family}/agrees"


def _rule_for(family: str, result: CaseResult) -> str:
    """The rule a stateful case without one belongs to: the family's rule of the case's key when it
    declares one, else its first rule (a disagreement belongs to the family's agreement rule)."""
    return result.key if result.key in FAMILY_RULES.get(family, ()) else _main_rule(family)


def case_chosen(key: str, options: Options) -> bool:
    """Whether ``--case`` (globs over case keys) lets a case run (every case without it)."""
    return options.cases is None or any(fnmatch.fnmatchcase(key, glob) for glob in options.cases)


def _family_chosen(family: str, options: Options) -> bool:
    """A stateful family runs under ``--case`` when a glob names one of its rules' keys or
    ``family/*``: its cases come from one run."""
    keys = [*FAMILY_RULES.get(family, ()), f"{family}/*"]
    return options.cases is None or any(
        fnmatch.fnmatchcase(key, glob) or glob.split("/", 1)[0] == family
        for glob in options.cases
        for key in keys
    )


def _selected(family: str, options: Options) -> bool:
    if options.families is not None:
        return family in options.families
    return family not in OPT_IN or options.extra.get(OPT_IN[family]) == "1"


def _guarded(family: str, work: Callable[[], Any]) -> Any:
    """``work()``, or :class:`Fallen` with the family's one case when it raises: *not run* when the
    deadline cut it, failed when the subject died or the check itself broke (with the traceback)."""
    began = time.perf_counter()
    try:
        return work()
    except DeadlineReached:
        seconds = time.perf_counter() - began
        why = f"{CUT} after {seconds:.1f}s: the family did not finish, so none of it is certified"
        return Fallen(
            [CaseResult(family, f"the {family} checks", "not run", why, seconds, _main_rule(family), "all")]
        )
    except SubjectDead as error:
        return Fallen(
            [CaseResult(family, f"the {family} checks", "failed", str(error), time.perf_counter() - began)]
        )
    except Exception:
        seconds = time.perf_counter() - began
        return Fallen(
            [CaseResult(family, f"the {family} checks run", "failed", traceback.format_exc(), seconds)]
        )


def _why_stop(subject: Subject, options: Options) -> str | None:
    """Why nothing more can run: the subject is dead, or the run's deadline has passed."""
    dead = getattr(subject, "dead", None)
    if isinstance(dead, str):
        return f"not reached: {dead}"
    if options.deadline is not None and time.monotonic() > options.deadline:
        return f"{CUT} (--deadline): not reached"
    return None


def _chosen_vectors(options: Options) -> list[dict[str, Any]]:
    return [
        v
        for v in load_vectors(options.vectors_dir or VECTORS_DIR)
        if _selected(str(v["family"]), options) and case_chosen(vector_key(v), options)
    ]


def _run_vectors(subject: Subject, options: Options, family: str, progress: Progress) -> list[CaseResult]:
    """The chosen vectors of ``family``, in file order; each *not run* once nothing more can run."""
    cases = [vector for vector in _chosen_vectors(options) if vector["family"] == family]
    target = options.target or DEFAULT_TARGET
    progress.start(family, len(cases))
    results = []
    for vector in cases:
        stop = _why_stop(subject, options)
        if stop is None:
            result = run_vector(subject, vector, options.capabilities, target)
        else:
            result = CaseResult(family, str(vector["name"]), "not run", stop, rule=rule_of(vector))
        results.append(result)
        progress.case(result)
    return results


def family_names(vectors_dir: Path | None = None) -> list[str]:
    """Every family a run can select: the vector folders, then the stateful families (a name that
    is both, like ``files``, once: selecting it runs its vectors and its stateful checks)."""
    directory = vectors_dir or VECTORS_DIR
    folders = vector_families(directory) if directory.is_dir() else []
    return list(dict.fromkeys([*folders, *STATEFUL_FAMILIES]))


def vector_families(directory: Path = VECTORS_DIR) -> list[str]:
    return sorted(path.name for path in directory.iterdir() if path.is_dir())


def every_rule(vectors_dir: Path | None = None) -> list[str]:
    """The certificate's fixed denominator: every rule a vector names (a protocol vector's
    ``rule``, a pure vector's ``function``) and every rule a stateful family judges, whatever
    families a run selects."""
    vectors = load_vectors(vectors_dir or VECTORS_DIR)
    rules = {rule_of(vector) for vector in vectors} | {r for rs in FAMILY_RULES.values() for r in rs}
    return sorted(rule for rule in rules if rule)


def case_names(vectors_dir: Path | None = None) -> list[str]:
    """What ``--list`` prints: every vector case's key, then ``<family>/*`` for each stateful family
    (its cases are made as it runs, so ``--case <family>/*`` runs the whole family)."""
    keys = [vector_key(vector) for vector in load_vectors(vectors_dir or VECTORS_DIR)]
    return keys + [f"{family}/*" for family in STATEFUL_FAMILIES]
