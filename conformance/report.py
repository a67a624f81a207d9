"""What a conformance run found: one :class:`CaseResult` per case, the per-family table, the
certificate, and the JUnit XML report.

Every kind of check (the vectors, and the families that generate their own workloads) reports
through these types, so the table, the certificate and the XML treat them alike. A case ends in
one of four outcomes (SPEC-DECISIONS D11): ``passed`` (it ran and held), ``failed`` (it ran and
the subject disagreed), ``unsupported`` (the subject said it lacks what the case needs) or
``not run`` (the suite could not reach it, with the reason). Only ``passed`` certifies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal
from xml.etree import ElementTree

if TYPE_CHECKING:
    from conformance.targets import Target

Outcome = Literal["passed", "failed", "unsupported", "not run"]
OUTCOMES: Final[tuple[Outcome, ...]] = ("passed", "failed", "unsupported", "not run")
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
    speeds); otherwise the name's slug does."""

    family: str
    name: str
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0
    rule: str = ""
    case_id: str = ""

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


@dataclass(frozen=True)
class FamilyTotals:
    family: str
    passed: int
    failed: int
    unsupported: int
    not_run: int

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.unsupported + self.not_run


def tally(results: Iterable[CaseResult]) -> list[FamilyTotals]:
    """Counts per family, in the order families first appear."""
    counts: dict[str, dict[str, int]] = {}
    for result in results:
        counts.setdefault(result.family, dict.fromkeys(OUTCOMES, 0))[result.outcome] += 1
    return [
        FamilyTotals(family, c["passed"], c["failed"], c["unsupported"], c["not run"])
        for family, c in counts.items()
    ]


def format_table(results: Sequence[CaseResult]) -> str:
    """The per-family table, a total line, and each failure with its detail."""
    totals = tally(results)
    width = max([len("family"), *(len(t.family) for t in totals)])
    heads = ("passed", "failed", "unsupported", "not run")
    lines = [f"{'family':<{width}}  " + "  ".join(f"{head:>11}" for head in heads)]
    for t in [*totals, _sum(totals)]:
        counts = (t.passed, t.failed, t.unsupported, t.not_run)
        lines.append(f"{t.family:<{width}}  " + "  ".join(f"{count:>11}" for count in counts))
    failures = [r for r in results if r.outcome == "failed"]
    if failures:
        lines += ["", "failures:"]
        for result in failures:
            lines.append(f"- [{result.family}] {result.name}")
            lines.extend(f"    {line}" for line in result.detail.splitlines())
    return "\n".join(lines)


def _sum(totals: Sequence[FamilyTotals]) -> FamilyTotals:
    return FamilyTotals(
        "total",
        sum(t.passed for t in totals),
        sum(t.failed for t in totals),
        sum(t.unsupported for t in totals),
        sum(t.not_run for t in totals),
    )


def format_certificate(
    results: Sequence[CaseResult], subject: str, target: Target | None, profile: str
) -> str:
    """What the run certifies: the families whose every case passed, the rules (spec functions)
    whose every case passed, and, for everything else, why it is not certified."""
    totals = tally(results)
    certified = [t.family for t in totals if t.passed and t.passed == t.total]
    partial = [t for t in totals if t.family not in certified]
    rules: dict[str, list[CaseResult]] = {}
    for result in results:
        if result.rule:
            rules.setdefault(result.rule, []).append(result)
    good_rules = sorted(rule for rule, cases in rules.items() if all(c.outcome == "passed" for c in cases))
    claimed = f"{subject}, {target.describe() if target is not None else 'format 4'}, profile {profile}"
    lines = [f"certificate for {claimed}"]
    lines.append(f"  certified families ({len(certified)}): {', '.join(certified) or 'none'}")
    for t in partial:
        why = ", ".join(
            f"{count} {label}"
            for count, label in ((t.failed, "failed"), (t.unsupported, "unsupported"), (t.not_run, "not run"))
            if count
        )
        lines.append(f"  not certified: {t.family} ({t.passed} of {t.total} passed; {why})")
    lines.append(f"  certified rules: {len(good_rules)} of {len(rules)}")
    for rule in sorted(set(rules) - set(good_rules)):
        outcomes = sorted({c.outcome for c in rules[rule] if c.outcome != "passed"})
        lines.append(f"  not certified: {rule} ({', '.join(outcomes)})")
    return "\n".join(lines)


_NOT_XML: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """``text`` as XML 1.0 can hold it: a character XML forbids (a control character, a lone
    surrogate from a generated workload) is shown as its escape."""
    return _NOT_XML.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


def to_junit(results: Sequence[CaseResult], suite_name: str = "conformance") -> ElementTree.ElementTree:
    """JUnit XML: one ``testsuite`` per family, one ``testcase`` per case (class name
    ``conformance.<family>``, name its key), with a ``failure`` element for a failed case and a
    ``skipped`` element, its message starting with the outcome, for an unsupported or not-run one."""
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
            errors="0",
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
            if case.outcome == "failed":
                first = case.detail.splitlines()[0] if case.detail else "failed"
                failure = ElementTree.SubElement(element, "failure", message=xml_text(first))
                failure.text = xml_text(f"{case.name}\n{case.detail}")
            elif case.outcome != "passed":
                ElementTree.SubElement(element, "skipped", message=xml_text(f"{case.outcome}: {case.detail}"))
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def write_junit(results: Sequence[CaseResult], path: Path, suite_name: str = "conformance") -> None:
    to_junit(results, suite_name).write(path, encoding="utf-8", xml_declaration=True)


def encode_results(results: Sequence[CaseResult], subject: Mapping[str, object]) -> str:
    """The run as JSON, for tools (``--json``): the subject's hello and one object per case. A lone
    surrogate (a rich value a failure's detail quotes) is written as its ``\\uXXXX`` escape, so that
    the text is UTF-8 and reads back to the same strings."""
    cases = [
        {
            "key": result.key,
            "family": result.family,
            "name": result.name,
            "outcome": result.outcome,
            "rule": result.rule,
            "detail": result.detail,
            "seconds": round(result.seconds, 3),
        }
        for result in results
    ]
    text = json.dumps({"subject": dict(subject), "cases": cases}, ensure_ascii=False, indent=1) + "\n"
    return _LONE_SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")
