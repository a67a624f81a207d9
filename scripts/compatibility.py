"""Certify every published DSH release the subject can drive, in both profiles, and write
``docs/compatibility.md``: the deviations of each release and profile, each once, by kind.

  python -m scripts.compatibility                      certify every pinned release, then render
  python -m scripts.compatibility --reuse              take the runs already under .tools/reports
                                                       (a release without one keeps its stored summary)
  python -m scripts.compatibility --render             re-render the page from the stored summary
  python -m scripts.compatibility --trace-run RUN.json add a trace-family run of DSH's file store

For each pinned release (``subjects/dsh/[releases/<v>/]package-lock.json``) and each profile ("DSH as
shipped"; "DSH with invariants" where the release has expectation files for it) it runs
``scripts/certify-dsh.sh V [--invariants]`` and keeps its crash-seam run
(``.tools/reports/dsh-<V>[-invariants]-seam.json``, or ``CONFORMANCE_OUT``). Each run is summarized
into ``docs/compatibility-runs.json`` (the subject's hello, the counts per family, every case that
did not pass), which is committed: the page is rendered from it alone, so a test can check without
the network that the page is what the summary renders. ``npm view @deepseek-ai/dsh-session
versions`` gives the published releases (``--offline`` keeps the list stored before). A trace-family
run (``python -m conformance --stdio "NODE subjects/dsh/server.mjs" --families trace --json
RUN.json``) is summarized with its cases' details, which hold the state counts and the trace
excerpts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from conformance.expectations import TODO, entry_for, group_deviations
from conformance.report import KINDS, Deviation, summarize_deviations
from conformance.spec_index import UnknownRule, specification_of
from scripts.dsh_expectations import cause_of, explainer_for
from spec.checks.log import RULES as CHECKER_RULES
from spec.protocol import CHECKER_RULE

ROOT: Final = Path(__file__).resolve().parent.parent

PINS: Final = ROOT / "subjects" / "dsh"
REPORTS: Final = Path(os.environ.get("CONFORMANCE_OUT") or ROOT / ".tools" / "reports")
EXPECTATIONS: Final = ROOT / "conformance" / "expectations"
PAGE: Final = ROOT / "docs" / "compatibility.md"
SUMMARY: Final = ROOT / "docs" / "compatibility-runs.json"
OUTCOMES: Final = ("passed", "failed", "unsupported", "not run")
DETAIL: Final = 300  # characters of a deviation's detail kept in the summary
TRACE_DETAIL: Final = 4000  # a trace case's detail holds its excerpt: kept longer


def pinned_releases() -> list[str]:
    """The releases with a lock file of their own, oldest first (rc.8's pin is subjects/dsh/)."""
    found = [path.name for path in (PINS / "releases").iterdir() if (path / "package-lock.json").is_file()]
    if (PINS / "package-lock.json").is_file():
        found.append("0.1.0-rc.8")
    return sorted(found, key=release_order)


INVARIANTS: Final = " with invariants"
"""The label suffix of the profile "DSH with invariants" (``certify-dsh.sh --invariants``)."""


def release_order(release: str) -> tuple[int, ...]:
    """0.1.0-rc.6 < 0.1.0-rc.8 < 0.1.0-rc.8 with invariants < 0.1.1-rc.2 (numeric parts in order, the
    rc number, then the profile)."""
    name, profile = (release.removesuffix(INVARIANTS), 1) if release.endswith(INVARIANTS) else (release, 0)
    core, _, rc = name.partition("-rc.")
    return (*(int(part) for part in core.split(".")), int(rc or 10**6), profile)


def invariants_releases() -> list[str]:
    """The releases certified in the profile "DSH with invariants": those with its expectation file."""
    found = EXPECTATIONS.glob("dsh-*-invariants.json")
    return sorted(
        (path.name.removeprefix("dsh-").removesuffix("-invariants.json") for path in found), key=release_order
    )


def published_releases() -> list[str] | None:
    """What the npm registry lists for dsh-session, or ``None`` when it cannot be asked."""
    try:
        out = subprocess.run(
            ["npm", "view", "@deepseek-ai/dsh-session", "versions", "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    versions = json.loads(out)
    return sorted(versions if isinstance(versions, list) else [versions], key=release_order)


def certify(release: str, invariants: bool) -> Path:
    """``certify-dsh.sh`` on one release and profile (its verdict is printed, not needed here); the
    path of its crash-seam ``--json`` run."""
    flags = ["--invariants"] if invariants else []
    subprocess.run(["bash", "scripts/certify-dsh.sh", release, *flags], cwd=ROOT, check=False)
    return seam_run(release, invariants)


def seam_run(release: str, invariants: bool) -> Path:
    return REPORTS / f"dsh-{release}{'-invariants' * invariants}-seam.json"


def summarize(run: Mapping[str, Any], detail: int = DETAIL) -> dict[str, Any]:
    """What the page needs of one run: the hello, counts per family, the cases that did not pass."""
    counts: dict[str, dict[str, int]] = {}
    deviations: dict[str, dict[str, str]] = {}
    for case in run["cases"]:
        family_counts = counts.setdefault(str(case["family"]), dict.fromkeys(OUTCOMES, 0))
        outcome = str(case["outcome"])
        family_counts["failed" if outcome == "error" else outcome] += (
            1  # an error (failed setup) counts as failed
        )
        if case["outcome"] != "passed":
            deviations[str(case["key"])] = {
                "family": str(case["family"]),
                "outcome": str(case["outcome"]),
                "rule": str(case.get("rule") or ""),
                "detail": str(case.get("detail") or "")[:detail],
            }
    return {"subject": dict(run["subject"]), "counts": counts, "deviations": deviations}


def reason_of(key: str, case: Mapping[str, str], invariants: bool) -> str:
    cause = cause_of({"key": key, **case}, invariants)
    if cause is None:
        return "no recorded cause: " + case["detail"][:160].replace("\n", " ")
    return f"{cause.reason} ({cause.source})"


# --- rendering --------------------------------------------------------------------------------


def render(summary: Mapping[str, Any]) -> str:
    """The whole page, from the stored summary alone."""
    releases: Mapping[str, Any] = summary["releases"]
    lines = [
        "# DSH compatibility",
        "",
        "Generated by `python -m scripts.compatibility` from `docs/compatibility-runs.json` (do not edit:",
        "`python -m scripts.compatibility --render` rewrites it; `tests/test_compatibility.py` checks it",
        "is fresh). Each published DSH release that the subject (`subjects/dsh/`) can drive, certified by",
        f"this project's suite over stdio (profile `{summary.get('profile', 'ci')}`, the crash-seam run of",
        "`bash scripts/certify-dsh.sh VERSION [--invariants]`, each against its own expectation files",
        "`conformance/expectations/dsh-<VERSION>[-invariants][-kill].json`), in two profiles: **DSH as",
        "shipped** (its default composition) and **DSH with invariants** (its optional invariant registry",
        "`@deepseek-ai/dsh-invariants` with the session and compaction companions enabled). Both claim the",
        "checker rules DSH's restore path and its published companions state; as shipped no companion runs,",
        "so a log breaking only a companion's rule is accepted (a decision deviation). The page lists",
        "deviations, not case counts: each once, by kind, with its evidence (DSH's source and the rules",
        "material the failing rules cite; `subjects/dsh/FINDINGS.md` has the detail, `subjects/dsh/REPORT.md`",
        "the subject bugs with reproductions).",
        "",
        *render_releases(summary),
        *render_deviations(releases),
        *render_trace(summary.get("trace")),
    ]
    return "\n".join(lines).rstrip() + "\n"


def judged(run: Mapping[str, Any]) -> tuple[int, int]:
    """The cases on which DSH is judged (passed, failed or erred) and all the cases of a run."""
    counts = list(run["counts"].values())
    total = sum(sum(family.values()) for family in counts)
    return sum(family["passed"] + family["failed"] for family in counts), total


def percent_down(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage in tenths, rounded down: 829 of 922 is 89.9%, never
    90%, so a share shown at a threshold has reached it."""
    tenths = 1000 * part // max(whole, 1)
    return f"{tenths // 10}.{tenths % 10}%"


def render_releases(summary: Mapping[str, Any]) -> list[str]:
    releases: Mapping[str, Any] = summary["releases"]
    published = summary.get("published") or []
    lines = ["## Releases", ""]
    if published:
        lines.append(
            "Published (`npm view @deepseek-ai/dsh-session versions`): " + ", ".join(published) + "."
        )
    missing = [release for release in published if release not in releases]
    if missing:
        lines.append(
            "Not certified: " + ", ".join(missing) + " (no pin in `subjects/dsh/releases/`: published after "
            "0.1.1-rc.2 on a separate 0.0.1 line, its session API predates the one the protocol drives)."
        )
    lines += [
        "",
        "Judged: the share of the suite's cases on which DSH is judged (passed, failed or erred), the rest",
        "being unsupported (a package or feature DSH lacks) or not run. Deviations: each counted once.",
        "",
        "| release | profile | capabilities | judged | deviations |",
        "| --- | --- | --- | --- | --- |",
    ]
    for label, run in releases.items():
        subject = run["subject"]
        release, profile = (
            (label.removesuffix(INVARIANTS), "with invariants")
            if label.endswith(INVARIANTS)
            else (label, "as shipped")
        )
        judged_cases, total = judged(run)
        share = f"{judged_cases} of {total} ({percent_down(judged_cases, total)})"
        counts = summarize_deviations("", deviations_of(run["deviations"], label)).removeprefix(": ")
        lines.append(
            f"| {release} | {profile} | {shown_capabilities(subject.get('capabilities', []))} | {share} | {counts} |"
        )
    return [*lines, ""]


def shown_capabilities(capabilities: Sequence[str]) -> str:
    """A subject's capabilities as the table shows them: its single checker rules
    (``checker-rule:<id>``, PROTOCOL.md) counted, not listed, out of every rule id."""
    rules = [name for name in capabilities if name.startswith(CHECKER_RULE)]
    shown = [name for name in capabilities if not name.startswith(CHECKER_RULE)]
    if rules:
        shown.append(f"checker rules ({len(rules)} of {len(CHECKER_RULES)})")
    return ", ".join(shown)


def table_head(releases: Mapping[str, Any], first: str = "family") -> list[str]:
    """The two head rows of a table with a column per release."""
    return [f"| {first} | " + " | ".join(releases) + " |", "| --- |" + " --- |" * len(releases)]


def deviations_of(cases: Mapping[str, Mapping[str, str]], label: str) -> tuple[Deviation, ...]:
    """The cases that did not pass in the release and profile ``label`` names, grouped by their
    cause (one deviation, many cases), in the order of the kinds; a case no cause explains is a
    deviation of its own, kind TODO."""
    invariants = label.endswith(INVARIANTS)
    met = []
    for key, case in cases.items():
        entry = entry_for({"key": key, **case}, explainer_for(invariants))
        if entry.todo:
            entry = replace(entry, cause=reason_of(key, case, invariants))
        met.append((entry, key, str(case["outcome"])))
    return group_deviations(met)


def sections_of(rules: Sequence[str]) -> list[str]:
    """The rules material the failing rules cite (``notes/… §N``, SPEC-DECISIONS), each once."""
    found: list[str] = []
    for rule in rules:
        try:
            section = specification_of(rule)
        except UnknownRule:
            continue
        if section and section not in found:
            found.append(section)
    return found


def render_grouped(cases: Mapping[str, Mapping[str, str]], label: str) -> list[str]:
    """Each deviation once: its cause, its evidence (DSH's source, the rules material) and the cases
    it explains."""
    lines = []
    for deviation in deviations_of(cases, label):
        keys = [key for key, _ in deviation.cases]
        shown = ", ".join(f"`{key}`" for key in keys[:4]) + (
            f" and {len(keys) - 4} more" if len(keys) > 4 else ""
        )
        outcomes = ", ".join(sorted({outcome for _, outcome in deviation.cases}))
        sections = sections_of([str(cases[key].get("rule") or "") for key in keys])
        rules = f"; rules: {', '.join(sections[:3])}" if sections else ""
        lines.append(
            f"- [{deviation.kind}] {deviation.cause} (evidence: {deviation.source or 'none recorded'}{rules}); "
            f"{len(keys)} case{'s' * (len(keys) != 1)} {outcomes}: {shown}"
        )
    return lines


def render_trace(trace: Mapping[str, Any] | None) -> list[str]:
    lines = ["## DSH's file store through the trace family (issue 12)", ""]
    if not trace:
        return [*lines, "Not run: no trace run is stored (`--trace-run RUN.json`).", ""]
    subject = trace["subject"]
    lines += [
        f"`{trace.get('command', 'subjects/dsh/server.mjs')}` ({subject.get('name')} {subject.get('version')}) on the",
        "real file system beneath strace (`conformance/CRASH-STATES.md`), every crash state of each",
        "persistence model materialized and read, resumed and read again by a fresh DSH process.",
        "",
        "| case | outcome |",
        "| --- | --- |",
    ]
    for case in trace["cases"]:
        lines.append(f"| {case['name']} | {case['outcome']} |")
    lines.append("")
    notes = sorted(
        {case["detail"] for case in trace["cases"] if case["outcome"] == "passed" and case["detail"]}
    )
    lines += [*(f"Every passed case: {note}." for note in notes), ""]
    for case in trace["cases"]:
        if case["outcome"] != "passed":
            lines += [
                f"**{case['name']}** ({case['outcome']}):",
                "",
                "```text",
                case["detail"].rstrip(),
                "```",
                "",
            ]
    return lines


def render_deviations(releases: Mapping[str, Any]) -> list[str]:
    """Deviations by kind, each once (a cause of DSH's with its evidence), not case counts."""
    found = {release: deviations_of(run["deviations"], release) for release, run in releases.items()}
    lines = [
        "## Deviations by kind",
        "",
        "Each deviation counted once, however many cases it fails: a cause of DSH's, with its evidence. Kinds",
        '(`docs/choices.md`, "Fingerprints and kinds"): subject-bug, spec-version (a feature of a later spec,',
        "or a package the release lacks), derived-rule (a rule this project derived), robustness (malformed",
        "input), decision (a SPEC-DECISION not followed), harness (the adapter's own limit).",
        "",
        *table_head(releases, "deviations of kind"),
    ]
    for kind in (*KINDS, TODO):
        counts = [sum(d.kind == kind for d in deviations) for deviations in found.values()]
        if any(counts):
            lines.append(f"| {kind} | " + " | ".join(str(count) for count in counts) + " |")
    lines.append("")
    for release, deviations in found.items():
        lines += [f"### {release}", "", summarize_deviations(f"DSH {release}", deviations) + ".", ""]
        lines += [*render_grouped(releases[release]["deviations"], release), ""]
    return lines


# --- the command ------------------------------------------------------------------------------


def trace_summary(path: Path, command: str) -> dict[str, Any]:
    run = json.loads(path.read_text(encoding="utf-8"))
    cases = [
        {
            "name": str(c["name"]),
            "outcome": str(c["outcome"]),
            "detail": str(c.get("detail") or "")[:TRACE_DETAIL],
        }
        for c in run["cases"]
        if c["family"] == "trace"
    ]
    return {"subject": dict(run["subject"]), "command": command, "cases": cases}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", nargs="+", help="default: every pinned release")
    parser.add_argument("--reuse", action="store_true", help="use the runs already under .tools/reports")
    parser.add_argument("--render", action="store_true", help="only re-render the page from the summary")
    parser.add_argument("--offline", action="store_true", help="keep the stored list of published releases")
    parser.add_argument("--trace-run", type=Path, help="a --json run of the trace family on DSH")
    args = parser.parse_args(argv)
    stored = json.loads(SUMMARY.read_text(encoding="utf-8")) if SUMMARY.is_file() else {"releases": {}}
    if not args.render and (err := update(stored, args)):
        return err
    text = json.dumps(stored, indent=1, ensure_ascii=True, sort_keys=True) + "\n"
    SUMMARY.write_text(text, encoding="utf-8")
    PAGE.write_text(render(json.loads(text)), encoding="utf-8")  # what the stored summary renders
    print(f"wrote {PAGE.relative_to(ROOT)} and {SUMMARY.relative_to(ROOT)}")
    return 0


def update(stored: dict[str, Any], args: argparse.Namespace) -> int:
    """Certify (or reuse) the releases and the trace run into ``stored``; non-zero on a missing run."""
    if args.trace_run is not None:
        stored["trace"] = trace_summary(args.trace_run, "node subjects/dsh/server.mjs")
    if args.trace_run is not None and not args.releases and args.reuse is False:
        return 0  # only the trace run was given
    published = None if args.offline else published_releases()
    if published is not None:
        stored["published"] = published
    stored["profile"] = "ci"
    releases = dict(stored.get("releases", {}))
    chosen = args.releases or pinned_releases()
    profiles = [(release, False) for release in chosen]
    profiles += [(release, True) for release in invariants_releases() if release in chosen]
    for release, invariants in profiles:
        label = release + INVARIANTS * invariants
        path = seam_run(release, invariants)
        if args.reuse and not path.is_file() and label in releases:
            print(
                f"compatibility: no run for {label} in {REPORTS}: its stored summary is kept", file=sys.stderr
            )
            continue
        if not (args.reuse and path.is_file()):
            path = certify(release, invariants)
        if not path.is_file():
            print(f"compatibility: no run for {label}", file=sys.stderr)
            return 1
        releases[label] = summarize(json.loads(path.read_text(encoding="utf-8")))
    stored["releases"] = dict(sorted(releases.items(), key=lambda item: release_order(item[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
