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
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from conformance.families import FAMILY_RULES, OPT_IN, STATEFUL_FAMILIES, CheckFn
from conformance.machine.machines import READ_ONLY_OPS
from conformance.matching import answer_fingerprint, compare, short
from conformance.progress import Progress
from conformance.report import CUT, RUN_DEADLINE, CaseResult, DeadlineReached, Options, case_slug
from conformance.subject import Response, Subject, SubjectDead, SubjectError
from conformance.targets import DEFAULT_TARGET, Target, TargetError, decode_target
from spec.protocol import PROTOCOL_VERSION

VECTORS_DIR: Final = Path(__file__).resolve().parent / "vectors"
UNSUPPORTED_OP: Final = "UNSUPPORTED_OP"
PROTOCOL_FAMILY: Final = "protocol"  # where a run reports that the subject could not be reached


# --- vectors ---------------------------------------------------------------------------------------


class VectorFileError(ValueError):
    """A vector file that cannot be run: not UTF-8 JSON, or not a vector's shape (``code``
    ``VECTOR_MALFORMED``, and a sentence naming the file)."""

    code = "VECTOR_MALFORMED"


def load_vectors(directory: Path = VECTORS_DIR) -> list[dict[str, Any]]:
    """Every vector under ``directory``, family folder by family folder, in file-name order.
    Raises :class:`VectorFileError` for a file that is not JSON, not an object, or has no
    ``name`` and neither ``steps`` (a list) nor ``function``."""
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
        vector.setdefault("family", path.parent.name)
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
    try:
        response = _unless_unsupported(
            subject.request("call", function=function, input=vector["input"]), function
        )
        found = _mismatch(vector["expect"], response, where, "call", target, function)
    except SubjectError as error:
        found = (f"{where}: the subject broke the protocol: {error}", f"{where}: broke the protocol")
    if found is None:
        return None
    return f"{found[0]}\ninput: {short(vector['input'])}", found[1]


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
    includes the checker's rule ids (``checker-rules``); an unknown target is a SubjectError."""
    response = subject.request("hello", protocol=PROTOCOL_VERSION)
    if not response.ok or not isinstance(response.result, dict):
        raise SubjectError(f"hello failed: {response.error_code}: {response.error_message}")
    result = response.result
    declared = result.get("capabilities")
    names = {str(c) for c in declared} if isinstance(declared, list) else set()
    protocol = result.get("protocol")
    version = int(protocol) if isinstance(protocol, int) and not isinstance(protocol, bool) else 1
    if version < 2 and "pure" in names:
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


def run_suite(
    subject: Subject,
    options: Options,
    checks: Mapping[str, CheckFn] = STATEFUL_FAMILIES,
    *,
    said: Hello | None = None,
    into: list[CaseResult] | None = None,
    progress: Progress | None = None,
) -> list[CaseResult]:
    """Every family the options select: the vectors, then ``checks`` in order. Results go into
    ``into`` as each case ends (so an interrupted run still has the cases that finished) and to
    ``progress``. A check that raises fails its family with the traceback and the run goes on; once
    the subject is dead (it stopped answering) or the deadline has passed, every case left is
    *not run*, with the reason, never passed."""
    results = [] if into is None else into
    progress = progress or Progress.silent()
    if said is None:
        try:
            said = hello(subject)
        except SubjectError as error:
            results.append(CaseResult(PROTOCOL_FAMILY, "the subject answers hello", "failed", str(error)))
            return results
    options = replace(options, capabilities=said.capabilities, target=said.target)
    deadline = RUN_DEADLINE.set(options.deadline)
    try:
        _run_vectors_into(subject, options, results, progress)
        for family, check in checks.items():
            if not _selected(family, options) or not _family_chosen(family, options):
                continue
            stop = _why_stop(subject, options)
            if stop is not None:
                results.append(
                    CaseResult(
                        family,
                        f"the {family} checks",
                        "not run",
                        stop,
                        rule=_main_rule(family),
                        case_id="all",
                    )
                )
                continue
            progress.start(family)
            for result in _run_check(family, check, subject, options):
                result = result if result.rule else replace(result, rule=_rule_for(family, result))
                results.append(result)
                progress.case(result)
            progress.end(family)
    finally:
        RUN_DEADLINE.reset(deadline)
        progress.close()
    return results


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


def _run_check(family: str, check: CheckFn, subject: Subject, options: Options) -> list[CaseResult]:
    began = time.perf_counter()
    try:
        return check(subject, options)
    except DeadlineReached:
        seconds = time.perf_counter() - began
        why = f"{CUT} after {seconds:.1f}s: the family did not finish, so none of it is certified"
        return [
            CaseResult(family, f"the {family} checks", "not run", why, seconds, _main_rule(family), "all")
        ]
    except SubjectDead as error:
        return [CaseResult(family, f"the {family} checks", "failed", str(error), time.perf_counter() - began)]
    except Exception:
        seconds = time.perf_counter() - began
        return [CaseResult(family, f"the {family} checks run", "failed", traceback.format_exc(), seconds)]


def _why_stop(subject: Subject, options: Options) -> str | None:
    """Why nothing more can run: the subject is dead, or the run's deadline has passed."""
    dead = getattr(subject, "dead", None)
    if isinstance(dead, str):
        return f"not reached: {dead}"
    if options.deadline is not None and time.monotonic() > options.deadline:
        return f"{CUT} (--deadline): not reached"
    return None


def _run_vectors_into(
    subject: Subject, options: Options, results: list[CaseResult], progress: Progress
) -> None:
    vectors = [
        v
        for v in load_vectors(options.vectors_dir or VECTORS_DIR)
        if _selected(str(v["family"]), options) and case_chosen(vector_key(v), options)
    ]
    target = options.target or DEFAULT_TARGET
    families = list(dict.fromkeys(str(vector["family"]) for vector in vectors))
    for family in families:
        cases = [vector for vector in vectors if vector["family"] == family]
        progress.start(family, len(cases))
        for vector in cases:
            stop = _why_stop(subject, options)
            if stop is None:
                result = run_vector(subject, vector, options.capabilities, target)
            else:
                result = CaseResult(family, str(vector["name"]), "not run", stop, rule=rule_of(vector))
            results.append(result)
            progress.case(result)
        progress.end(family)


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
