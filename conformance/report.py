"""What a conformance run found: one :class:`CaseResult` per case, the per-family table, and the
JUnit XML report.

Every kind of check (the vectors, and the families of :data:`conformance.families.STATEFUL_FAMILIES`)
reports through these types, so the table and the XML treat them alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal
from xml.etree import ElementTree

Outcome = Literal["passed", "failed", "skipped"]
PROFILES: Final = ("ci", "thorough")


@dataclass(frozen=True)
class CaseResult:
    """One case: the rule family it belongs to, its name (a sentence), what happened, and why
    (the first mismatch of a failed case, the missing capability of a skipped one)."""

    family: str
    name: str
    outcome: Outcome
    detail: str = ""
    seconds: float = 0.0
    rule: str = ""


@dataclass(frozen=True)
class Options:
    """How a run is asked to go. ``profile`` sizes generated workloads (``ci`` is quick,
    ``thorough`` is not); ``capabilities`` are the subject's own, from ``hello``; ``families``
    limits the run (``None``: every family)."""

    profile: str = "ci"
    capabilities: frozenset[str] = frozenset()
    families: frozenset[str] | None = None
    vectors_dir: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FamilyTotals:
    family: str
    passed: int
    failed: int
    skipped: int


def tally(results: Iterable[CaseResult]) -> list[FamilyTotals]:
    """Counts per family, in the order families first appear."""
    counts: dict[str, dict[str, int]] = {}
    for result in results:
        counts.setdefault(result.family, {"passed": 0, "failed": 0, "skipped": 0})[result.outcome] += 1
    return [FamilyTotals(family, c["passed"], c["failed"], c["skipped"]) for family, c in counts.items()]


def format_table(results: Sequence[CaseResult]) -> str:
    """The per-family table, a total line, and each failure with its detail."""
    totals = tally(results)
    width = max([len("family"), *(len(t.family) for t in totals)])
    lines = [f"{'family':<{width}}  {'passed':>6}  {'failed':>6}  {'skipped':>7}"]
    for t in totals:
        lines.append(f"{t.family:<{width}}  {t.passed:>6}  {t.failed:>6}  {t.skipped:>7}")
    passed = sum(t.passed for t in totals)
    failed = sum(t.failed for t in totals)
    skipped = sum(t.skipped for t in totals)
    lines.append(f"{'total':<{width}}  {passed:>6}  {failed:>6}  {skipped:>7}")
    failures = [r for r in results if r.outcome == "failed"]
    if failures:
        lines.append("")
        lines.append("failures:")
        for result in failures:
            lines.append(f"- [{result.family}] {result.name}")
            lines.extend(f"    {line}" for line in result.detail.splitlines())
    return "\n".join(lines)


def to_junit(results: Sequence[CaseResult], suite_name: str = "conformance") -> ElementTree.ElementTree:
    """JUnit XML: one ``testsuite`` per family, one ``testcase`` per case (class name
    ``conformance.<family>``), with a ``failure`` or ``skipped`` element where it applies."""
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
            skipped=str(sum(c.outcome == "skipped" for c in cases)),
            time=f"{sum(c.seconds for c in cases):.3f}",
        )
        for case in cases:
            element = ElementTree.SubElement(
                suite,
                "testcase",
                classname=f"{suite_name}.{family}",
                name=case.name,
                time=f"{case.seconds:.3f}",
            )
            if case.outcome == "failed":
                failure = ElementTree.SubElement(
                    element, "failure", message=case.detail.splitlines()[0] if case.detail else "failed"
                )
                failure.text = case.detail
            elif case.outcome == "skipped":
                ElementTree.SubElement(element, "skipped", message=case.detail)
    ElementTree.indent(root)
    return ElementTree.ElementTree(root)


def write_junit(results: Sequence[CaseResult], path: Path, suite_name: str = "conformance") -> None:
    to_junit(results, suite_name).write(path, encoding="utf-8", xml_declaration=True)
