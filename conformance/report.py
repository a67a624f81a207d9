"""What a conformance run found: one :class:`CaseResult` per case, the per-family table, the
certificate, and the JUnit XML report.

Every kind of check (the vectors, and the families that generate their own workloads) reports
through these types, so the table, the certificate and the XML treat them alike. A case ends in
one of five outcomes (SPEC-DECISIONS D11): ``passed`` (it ran and held), ``failed`` (it ran and
the subject disagreed on what the case is about), ``error`` (a setup step failed, so the case's
rule was never reached), ``unsupported`` (the subject said it lacks what the case needs) or
``not run`` (the suite could not reach it, with the reason). Only ``passed`` certifies.

A stateful family earns its ``passed``: :class:`Coverage` counts, per op kind of its alphabet, the
transitions it drove and the ones the subject refused, and :func:`earned` turns a pass below the
family's minimum coverage into ``unsupported`` or ``not run``. The run's deadline is
:data:`RUN_DEADLINE`, checked between cases and between stateful steps by :func:`check_deadline`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from xml.etree import ElementTree

if TYPE_CHECKING:
    from conformance.targets import Target

Outcome = Literal["passed", "failed", "error", "unsupported", "not run"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("passed", "failed", "error", "unsupported", "not run")
PROFILES: Final = ("ci", "thorough")


SLUG_LENGTH: Final = 90  # characters of a case's key part (a vector's file name), at most


def case_slug(name: str) -> str:
    """A case's stable key part, from its sentence (a vector's file name is the same slug): cut
    after the last whole word that fits."""
    text = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if len(text) <= SLUG_LENGTH:
        return text
    cut = text[: SLUG_LENGTH + 1]
    return cut[: cut.rfind("-")] if "-" in cut else text[:SLUG_LENGTH]


@dataclass(frozen=True)
class CaseResult:
    """One case: the rule family it belongs to, its name (a sentence), what happened, and why
    (the first mismatch of a failed case, the reason for an unsupported or not-run one).
    ``case_id`` names the case for expectation files when the name carries run figures (counts,
    speeds); otherwise the name's slug does.

    A failed or erred case has a ``fingerprint``: how it failed, stable from run to run (no
    timings, paths or drawn values), so that an expectation file can tell the same failure from
    another one of the same case. A vector's names its first failing step, the expected answer and
    the subject's (``step 2 (append): expected EVENT_TYPE_INVALID, got ok``; ``call f: result
    differs at $.changed``); a stateful family's disagreement its signature (op and codes, or op
    and path with indexes dropped). Where the producer gives none, it is the coarse
    ``<rule or family> <outcome>``."""

    family: str
    name: str
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0
    rule: str = ""
    case_id: str = ""
    fingerprint: str = ""

    def __post_init__(self) -> None:
        if self.outcome in ("failed", "error") and not self.fingerprint:
            object.__setattr__(self, "fingerprint", f"{self.rule or self.family} {self.outcome}")

    @property
    def key(self) -> str:
        """``family/slug``: stable from run to run, so an expectation file can name the case."""
        return f"{self.family}/{self.case_id or case_slug(self.name)}"


@dataclass(frozen=True)
class Options:
    """How a run is asked to go. ``profile`` sizes generated workloads (``ci`` is quick,
    ``thorough`` is not); ``capabilities`` and ``target`` are the subject's own, from ``hello``;
    ``families`` limits the run (``None``: every family)."""

    profile: str = "ci"
    capabilities: frozenset[str] = frozenset()
    families: frozenset[str] | None = None
    vectors_dir: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)
    target: Target | None = None
    deadline: float | None = None  # time.monotonic() after which nothing more is started
    cases: tuple[str, ...] | None = None  # --case: globs over case keys (None: every case)
    exhaustive_depth: int | None = None  # --exhaustive-depth (None: the profile's, exhaustive.DEPTHS)


@dataclass(frozen=True)
class FamilyTotals:
    family: str
    passed: int
    failed: int
    error: int
    unsupported: int
    not_run: int

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.error + self.unsupported + self.not_run

    @property
    def counts(self) -> tuple[int, int, int, int, int]:
        """In the order of :data:`OUTCOMES`."""
        return (self.passed, self.failed, self.error, self.unsupported, self.not_run)


def tally(results: Iterable[CaseResult]) -> list[FamilyTotals]:
    """Counts per family, in the order families first appear."""
    counts: dict[str, dict[str, int]] = {}
    for result in results:
        counts.setdefault(result.family, dict.fromkeys(OUTCOMES, 0))[result.outcome] += 1
    return [FamilyTotals(family, *(c[outcome] for outcome in OUTCOMES)) for family, c in counts.items()]


def format_table(results: Sequence[CaseResult]) -> str:
    """The per-family table, a total line, and each failure and error with its detail."""
    totals = tally(results)
    width = max([len("family"), *(len(t.family) for t in totals)])
    lines = [f"{'family':<{width}}  " + "  ".join(f"{head:>11}" for head in OUTCOMES)]
    for t in [*totals, _sum(totals)]:
        lines.append(f"{t.family:<{width}}  " + "  ".join(f"{count:>11}" for count in t.counts))
    for outcome, head in (("failed", "failures"), ("error", "errors (a setup step failed)")):
        shown = [r for r in results if r.outcome == outcome]
        if shown:
            lines += ["", f"{head}:"]
            for result in shown:
                lines.append(f"- [{result.family}] {result.name}")
                lines.extend(f"    {line}" for line in result.detail.splitlines())
    return "\n".join(lines)


def _sum(totals: Sequence[FamilyTotals]) -> FamilyTotals:
    return FamilyTotals("total", *(sum(t.counts[i] for t in totals) for i in range(len(OUTCOMES))))


# --- earned statuses: coverage and the deadline -------------------------------------------------------

RUN_DEADLINE: ContextVar[float | None] = ContextVar("RUN_DEADLINE", default=None)
"""The run's deadline (a ``time.monotonic()`` value), set by the runner around every family so
that a stateful family stops between its steps, not only between families."""


class DeadlineReached(BaseException):
    """The run's deadline passed inside a family. A ``BaseException``, so that no family (and no
    Hypothesis run) takes it for a failure of the subject: it unwinds to the runner, which reports
    the family as *not run*, cut."""


def check_deadline(deadline: float | None = None) -> None:
    """Raise :class:`DeadlineReached` once the run's deadline (:data:`RUN_DEADLINE`, or
    ``deadline`` in a worker thread, where the context variable is not inherited) has passed."""
    deadline = RUN_DEADLINE.get() if deadline is None else deadline
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineReached


@dataclass
class Coverage:
    """What a stateful family drove, per op kind of its alphabet: the transitions the subject
    answered (agreeing or not) and those it refused with ``UNSUPPORTED_OP``."""

    driven: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)

    def drive(self, kind: str) -> None:
        self.driven[kind] = self.driven.get(kind, 0) + 1

    def refuse(self, kind: str) -> None:
        self.refused[kind] = self.refused.get(kind, 0) + 1

    def describe(self, alphabet: Sequence[str]) -> str:
        kinds = list(dict.fromkeys([*alphabet, *sorted(self.driven), *sorted(self.refused)]))
        return "; ".join(
            f"{kind} {self.driven.get(kind, 0)} driven"
            + (f", {self.refused[kind]} refused" if self.refused.get(kind) else "")
            for kind in kinds
        )


def earned(result: CaseResult, coverage: Coverage, alphabet: Sequence[str], minimum: int) -> CaseResult:
    """A stateful family's case as its coverage earns it. A failure stays failed. A pass stands only
    when every op kind of ``alphabet`` was driven at least ``minimum`` times; otherwise it is
    *unsupported* when the subject refused some kind of the alphabet (every kind refused or never
    driven: it supports none of the family's ops) and *not run* when the kinds were merely driven too
    rarely. The coverage is appended to the detail either way."""
    figures = f"coverage (minimum {minimum} per op kind): {coverage.describe(alphabet)}"
    detail = f"{result.detail}\n{figures}".strip()
    if result.outcome != "passed":
        return replace(result, detail=detail)
    short = [kind for kind in alphabet if coverage.driven.get(kind, 0) < minimum]
    if not short:
        return replace(result, detail=detail)
    refused = [kind for kind in alphabet if coverage.refused.get(kind)]
    if not any(coverage.driven.get(kind, 0) for kind in alphabet):
        why = "the subject supports none of the family's ops, so it drove nothing"
        return replace(result, outcome="unsupported", detail=f"{why}\n{figures}")
    if refused:
        why = f"the subject refused {', '.join(refused)}; below the minimum coverage: {', '.join(short)}"
        return replace(result, outcome="unsupported", detail=f"{why}\n{figures}")
    why = f"below the minimum coverage: {', '.join(short)}"
    return replace(result, outcome="not run", detail=f"{why}\n{figures}")


# --- deviations, each once -------------------------------------------------------------------------

KINDS: Final = ("subject-bug", "spec-version", "derived-rule", "robustness", "decision", "harness")
"""What kind of deviation an expectation file's entry is (docs/choices.md, "Fingerprints and
kinds"): a bug of the subject; a feature of a later spec than the subject's release; a rule this
project derived from the seeds, not stated in them; malformed input the subject refuses elsewhere;
a SPEC-DECISION the subject does not follow; the subject adapter's own limit."""

KIND_NAMES: Final = {
    "subject-bug": ("subject bug", "subject bugs"),
    "spec-version": ("spec-version feature", "spec-version features"),
    "derived-rule": ("derived rule", "derived rules"),
    "robustness": ("robustness gap", "robustness gaps"),
    "decision": ("decision not followed", "decisions not followed"),
    "harness": ("harness limit", "harness limits"),
    "TODO": ("deviation without a cause", "deviations without a cause"),
}


def counted(count: int, kind: str) -> str:
    """``1 subject bug``, ``3 subject bugs``."""
    singular, plural = KIND_NAMES.get(kind, (kind, kind))
    return f"{count} {singular if count == 1 else plural}"


@dataclass(frozen=True)
class Deviation:
    """One known deviation met by a run, once: its kind, cause and source (an expectation file's
    entry, or several entries that share the cause), and the cases (key, outcome) behind it."""

    kind: str
    cause: str
    source: str
    cases: tuple[tuple[str, str], ...]


def summarize_deviations(subject: str, deviations: Sequence[Deviation]) -> str:
    """``DSH 0.1.0-rc.8: 3 subject bugs, 2 spec-version features, …`` (each deviation counted once,
    however many cases it fails)."""
    counts: dict[str, int] = {}
    for deviation in deviations:
        counts[deviation.kind] = counts.get(deviation.kind, 0) + 1
    shown = ", ".join(counted(count, kind) for kind, count in counts.items())
    return f"{subject}: {shown or 'no deviations'}"


def format_deviations(subject: str, deviations: Sequence[Deviation]) -> list[str]:
    """The summary line, then each deviation once with its kind, cause and cases."""
    lines = [f"deviations (each once): {summarize_deviations(subject, deviations)}"]
    for deviation in deviations:
        outcomes = ", ".join(sorted({outcome for _, outcome in deviation.cases}))
        cases = "1 case" if len(deviation.cases) == 1 else f"{len(deviation.cases)} cases"
        lines.append(f"  [{deviation.kind}] {deviation.cause} ({cases}, {outcomes})")
    return lines


# --- the certificate ---------------------------------------------------------------------------------

RuleStatus = Literal["certified", "failed", "error", "unsupported", "not run"]
RULE_STATUSES: Final[tuple[RuleStatus, ...]] = ("certified", "failed", "error", "unsupported", "not run")


def rule_status(cases: Sequence[CaseResult]) -> RuleStatus:
    """A rule is *certified* when it has cases and every one passed; otherwise the worst of its
    cases' outcomes, in the order failed, error, unsupported, not run (a rule no case reached is
    not run)."""
    if cases and all(case.outcome == "passed" for case in cases):
        return "certified"
    outcomes = {case.outcome for case in cases}
    for outcome in ("failed", "error", "unsupported"):
        if outcome in outcomes:
            return outcome
    return "not run"


@dataclass(frozen=True)
class Certificate:
    """What a run certifies: every rule of the spec (the fixed denominator, whatever families ran)
    with its status and the cases behind it, the families run, the profile, the subject's hello,
    and what a deadline cut."""

    subject: Mapping[str, object]
    profile: str
    families: tuple[str, ...]
    rules: Mapping[str, tuple[RuleStatus, tuple[CaseResult, ...]]]
    cut: tuple[str, ...] = ()
    deviations: tuple[Deviation, ...] = ()  # with an expectation file: its deviations the run met
    exhaustive_depth: int | None = None  # the exhaustive search's depth, when that family ran

    @property
    def claimed(self) -> str:
        return f"{self.subject.get('name', '?')} {self.subject.get('version', '')}".strip()

    def count(self, status: RuleStatus) -> int:
        return sum(entry[0] == status for entry in self.rules.values())

    def certified(self) -> list[str]:
        return [rule for rule, (status, _) in self.rules.items() if status == "certified"]


def build_certificate(
    results: Sequence[CaseResult],
    every_rule: Iterable[str],
    subject: Mapping[str, object],
    profile: str,
    family_rules: Mapping[str, Sequence[str]] | None = None,
) -> Certificate:
    """The certificate of ``results`` over ``every_rule`` (a case whose rule is not among them is
    listed too). A case that stands for a whole family (key ``family/all``: it did not run, or the
    deadline cut it) stands behind every rule of ``family_rules[family]``, so that a rule judged
    by a family that did not finish is not certified by the other families' cases."""
    by_rule: dict[str, list[CaseResult]] = {rule: [] for rule in sorted(set(every_rule))}
    for result in results:
        whole = family_rules.get(result.family, ()) if family_rules and result.case_id == "all" else ()
        for rule in dict.fromkeys([result.rule, *whole]):
            if rule:
                by_rule.setdefault(rule, []).append(result)
    rules = {rule: (rule_status(cases), tuple(cases)) for rule, cases in by_rule.items()}
    families = tuple(dict.fromkeys(result.family for result in results))
    cut = tuple(f"{r.key}: {r.detail.splitlines()[0]}" for r in results if r.detail.startswith(CUT))
    return Certificate(dict(subject), profile, families, rules, cut)


CUT: Final = "cut by the run's deadline"
"""How the detail of a case the deadline cut begins."""


def format_certificate(certificate: Certificate) -> str:
    """The certificate's summary for the terminal: the counts per status out of every rule, the
    rules that are not certified and not merely not run, and what the deadline cut."""
    subject = certificate.subject
    depth = (
        f", exhaustive depth {certificate.exhaustive_depth}"
        if certificate.exhaustive_depth is not None
        else ""
    )
    lines = [
        f"certificate for {certificate.claimed}, {subject.get('target', 'format 4')}, profile {certificate.profile}{depth}"
    ]
    total = len(certificate.rules)
    lines.append(f"  certified rules: {certificate.count('certified')} of {total} (every rule of the spec)")
    lines.append("  " + ", ".join(f"{certificate.count(status)} {status}" for status in RULE_STATUSES[1:]))
    for rule, (status, _) in certificate.rules.items():
        if status in ("failed", "error"):
            lines.append(f"  {status}: {rule}")
    if certificate.cut:
        lines.append(f"  cut by the deadline (not certified): {len(certificate.cut)} cases")
        lines.extend(f"    {line}" for line in certificate.cut[:10])
    if certificate.deviations:
        lines += [f"  {line}" for line in format_deviations(certificate.claimed, certificate.deviations)]
    return "\n".join(lines)


def certificate_json(certificate: Certificate) -> str:
    """The certificate as JSON: hello, profile, families, cut, counts, and per rule its status and
    its cases (key and outcome)."""
    document = {
        "subject": dict(certificate.subject),
        "profile": certificate.profile,
        "exhaustiveDepth": certificate.exhaustive_depth,
        "families": list(certificate.families),
        "cut": list(certificate.cut),
        "counts": {status: certificate.count(status) for status in RULE_STATUSES},
        "deviations": [
            {
                "kind": d.kind,
                "cause": d.cause,
                "source": d.source,
                "cases": [{"key": key, "outcome": outcome} for key, outcome in d.cases],
            }
            for d in certificate.deviations
        ],
        "rules": [
            {"rule": rule, "status": status, "cases": [{"key": c.key, "outcome": c.outcome} for c in cases]}
            for rule, (status, cases) in certificate.rules.items()
        ],
    }
    return _LONE_SURROGATE.sub(
        lambda found: f"\\u{ord(found.group()):04x}",
        json.dumps(document, ensure_ascii=False, indent=1) + "\n",
    )


def certificate_markdown(certificate: Certificate) -> str:
    """The certificate as a Markdown page: the summary, then one table row per rule."""
    lines = ["# Conformance certificate", "", "```", format_certificate(certificate), "```", ""]
    lines += [f"Families run: {', '.join(certificate.families) or 'none'}.", ""]
    lines += ["| rule | status | cases |", "| --- | --- | --- |"]
    for rule, (status, cases) in certificate.rules.items():
        shown = ", ".join(f"`{c.key}` {c.outcome}" for c in cases[:6])
        shown += f", and {len(cases) - 6} more" if len(cases) > 6 else ""
        lines.append(f"| `{rule}` | {status} | {shown or 'no case ran'} |")
    if certificate.deviations:
        lines += ["", "## Deviations by kind (each once)", "", "| kind | cause | source | cases |"]
        lines.append("| --- | --- | --- | --- |")
        for d in certificate.deviations:
            shown = ", ".join(f"`{key}` {outcome}" for key, outcome in d.cases[:6])
            shown += f", and {len(d.cases) - 6} more" if len(d.cases) > 6 else ""
            lines.append(f"| {d.kind} | {d.cause} | {d.source or '—'} | {shown} |")
    return "\n".join(lines) + "\n"


def write_certificate(certificate: Certificate, base: Path) -> tuple[Path, Path]:
    """``<base>.json`` and ``<base>.md``."""
    as_json, as_markdown = Path(f"{base}.json"), Path(f"{base}.md")
    as_json.write_text(certificate_json(certificate), encoding="utf-8")
    as_markdown.write_text(certificate_markdown(certificate), encoding="utf-8")
    return as_json, as_markdown


_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` as XML 1.0 can hold it: a character XML forbids (a control character, a lone
    surrogate from a generated workload) is shown as its escape."""
    return _NOT_XML.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def to_junit(results: Sequence[CaseResult], suite_name: str = "conformance") -> ElementTree.ElementTree:
    """JUnit XML: one ``testsuite`` per family, one ``testcase`` per case (class name
    ``conformance.<family>``, name its key), with a ``failure`` element for a failed case, an
    ``error`` element for an error (a failed setup step), and a ``skipped`` element, its message
    starting with the outcome, for an unsupported or not-run one."""
    root = ElementTree.Element("testsuites", name=suite_name)
    by_family: dict[str, list[CaseResult]] = {}
    for result in results:
        by_family.setdefault(result.family, []).append(result)
    for family, cases in by_family.items():
        suite = ElementTree.SubElement(
            root,
            "testsuite",
            name=family,
            tests=str(len(cases)),
            failures=str(sum(c.outcome == "failed" for c in cases)),
            errors=str(sum(c.outcome == "error" for c in cases)),
            skipped=str(sum(c.outcome in ("unsupported", "not run") for c in cases)),
            time=f"{sum(c.seconds for c in cases):.3f}",
        )
        for case in cases:
            element = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"{suite_name}.{family}",
                name=xml_text(case.key),
                time=f"{case.seconds:.3f}",
            )
            if case.outcome in ("failed", "error"):
                first = case.detail.splitlines()[0] if case.detail else case.outcome
                tag = "failure" if case.outcome == "failed" else "error"
                failure = ElementTree.SubElement(element, tag, message=xml_text(first))
                failure.text = xml_text(f"{case.name}\n{case.detail}")
            elif case.outcome != "passed":
                ElementTree.SubElement(element, "skipped", message=xml_text(f"{case.outcome}: {case.detail}"))
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def write_junit(results: Sequence[CaseResult], path: Path, suite_name: str = "conformance") -> None:
    to_junit(results, suite_name).write(path, encoding="utf-8", xml_declaration=True)


def case_record(result: CaseResult) -> dict[str, object]:
    """One case as ``--json`` writes it (and expectation files are judged and written from)."""
    return {
        "key": result.key,
        "family": result.family,
        "name": result.name,
        "outcome": result.outcome,
        "rule": result.rule,
        "detail": result.detail,
        "fingerprint": result.fingerprint,
        "seconds": round(result.seconds, 3),
    }


def encode_results(results: Sequence[CaseResult], subject: Mapping[str, object]) -> str:
    """The run as JSON, for tools (``--json``): the subject's hello and one object per case. A lone
    surrogate (a rich value a failure's detail quotes) is written as its ``\\uXXXX`` escape, so that
    the text is UTF-8 and reads back to the same strings."""
    cases = [case_record(result) for result in results]
    text = json.dumps({"subject": dict(subject), "cases": cases}, ensure_ascii=False, indent=1) + "\n"
    return _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
