"""Certify every published DSH release the subject can drive and write ``docs/compatibility.md``.

  python -m scripts.compatibility                      certify every pinned release, then render
  python -m scripts.compatibility --reuse              take the runs already under .tools/reports
  python -m scripts.compatibility --render             re-render the page from the stored summary
  python -m scripts.compatibility --trace-run RUN.json add a trace-family run of DSH's file store

For each pinned release (``subjects/dsh/[releases/<v>/]package-lock.json``) it installs the packages
(``scripts/install-dsh.sh``), runs the suite over stdio against ``subjects/dsh/server.mjs --release
V`` (on the crash seam where the release has a storage backend, else what it has), and keeps the
``--json`` run under ``.tools/reports/dsh-<V>-matrix.json``. Each run is then summarized into
``docs/compatibility-runs.json`` (the subject's hello, the counts per family, every case that did not
pass), which is committed: the page is rendered from it alone, so a test can check without the
network that the page is what the summary renders. ``npm view @deepseek-ai/dsh-session versions``
gives the published releases (``--offline`` keeps the list stored before). A trace-family run
(``python -m conformance --stdio "NODE subjects/dsh/server.mjs" --families trace --json RUN.json``)
is summarized with its cases' details, which hold the state counts and the trace excerpts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from conformance.expectations import TODO, entry_for, group_deviations
from conformance.report import KINDS, Deviation, summarize_deviations
from scripts.dsh_expectations import cause_of, explainer

ROOT: Final = Path(__file__).resolve().parent.parent

PINS: Final = ROOT / "subjects" / "dsh"
REPORTS: Final = ROOT / ".tools" / "reports"
PAGE: Final = ROOT / "docs" / "compatibility.md"
SUMMARY: Final = ROOT / "docs" / "compatibility-runs.json"
OUTCOMES: Final = ("passed", "failed", "unsupported", "not run")
ENGINE: Final = ("prune", "prune-pass", "projection", "compaction", "spill", "overflow", "checkpoint")
DETAIL: Final = 300  # characters of a deviation's detail kept in the summary
TRACE_DETAIL: Final = 4000  # a trace case's detail holds its excerpt: kept longer


def pinned_releases() -> list[str]:
    """The releases with a lock file of their own, oldest first (rc.8's pin is subjects/dsh/)."""
    found = [path.name for path in (PINS / "releases").iterdir() if (path / "package-lock.json").is_file()]
    if (PINS / "package-lock.json").is_file():
        found.append("0.1.0-rc.8")
    return sorted(found, key=release_order)


def release_order(release: str) -> tuple[int, ...]:
    """0.1.0-rc.6 < 0.1.0-rc.8 < 0.1.1-rc.2 (numeric parts in order, the rc number last)."""
    core, _, rc = release.partition("-rc.")
    return (*(int(part) for part in core.split(".")), int(rc or 10**6))


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


def certify(release: str, profile: str) -> Path:
    """Run the suite against one release; the path of its ``--json`` run."""
    subprocess.run(["bash", "scripts/install-dsh.sh", release], cwd=ROOT, check=True)
    node = subprocess.run(
        ["bash", "scripts/install-dsh.sh", release, "--print-node"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    out = REPORTS / f"dsh-{release}-matrix.json"
    REPORTS.mkdir(parents=True, exist_ok=True)
    # --seam is harmless where a release has no store: the subject then declares no storage.
    command = f"{node} subjects/dsh/server.mjs --release {release} --seam"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance",
            "--stdio",
            command,
            "--profile",
            profile,
            "--json",
            str(out),
            "--junit",
            str(out.with_suffix(".xml")),
        ],
        cwd=ROOT,
        check=False,
    )
    return out


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


def reason_of(key: str, case: Mapping[str, str]) -> str:
    cause = cause_of({"key": key, **case})
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
        f"this project's suite over stdio, profile `{summary.get('profile', 'ci')}`. DSH 0.1.0-rc.8 is",
        "certified in CI against `conformance/expectations/dsh-0.1.0-rc.8[-kill].json`",
        "(`bash scripts/certify-dsh.sh`); the evidence for each cause is in `subjects/dsh/FINDINGS.md`.",
        "",
        *render_releases(summary),
        *render_table(releases),
        *render_changes(releases),
        *render_engine(releases),
        *render_trace(summary.get("trace")),
        *render_deviations(releases),
    ]
    return "\n".join(lines).rstrip() + "\n"


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
            "Not certified: " + ", ".join(missing) + " (no pin in `subjects/dsh/releases/`: it predates "
            "the session API the protocol drives)."
        )
    lines += ["", "| release | capabilities | target |", "| --- | --- | --- |"]
    for release, run in releases.items():
        subject = run["subject"]
        lines.append(
            f"| {release} | {', '.join(subject.get('capabilities', []))} | {subject.get('target')} |"
        )
    return [*lines, ""]


def family_rows(releases: Mapping[str, Any], families: Sequence[str]) -> list[str]:
    """A table row per family: its counts in each release, passed / failed / unsupported / not run
    (``—`` where the family did not run)."""
    rows = []
    for family in families:
        cells = []
        for run in releases.values():
            counts = run["counts"].get(family)
            cells.append("—" if counts is None else " / ".join(str(counts[o]) for o in OUTCOMES))
        rows.append(f"| {family} | " + " | ".join(cells) + " |")
    return rows


def render_table(releases: Mapping[str, Any]) -> list[str]:
    families = list(dict.fromkeys(family for run in releases.values() for family in run["counts"]))
    lines = [
        "## Release by family",
        "",
        "A cell is passed / failed / unsupported / not run; `—`: the family did not run.",
        "",
        *table_head(releases),
    ]
    return [*lines, *family_rows(releases, families), ""]


def table_head(releases: Mapping[str, Any], first: str = "family") -> list[str]:
    """The two head rows of a table with a column per release."""
    return [f"| {first} | " + " | ".join(releases) + " |", "| --- |" + " --- |" * len(releases)]


def is_met(key: str) -> bool:
    """A stateful family's disagreement case (``machine/diverges-…``): it exists only in a run that
    met it, so its absence elsewhere says "not met", not "passed"."""
    return "/diverges-" in key


def outcome_in(run: Mapping[str, Any], key: str) -> str | None:
    """A case's outcome in a run: its deviation, passed when its family ran, else absent."""
    if key in run["deviations"]:
        return str(run["deviations"][key]["outcome"])
    return "passed" if key.split("/", 1)[0] in run["counts"] and not is_met(key) else None


def render_changes(releases: Mapping[str, Any]) -> list[str]:
    lines = ["## What changed between releases", ""]
    names = list(releases)
    for before, after in itertools.pairwise(names):
        old, new = releases[before], releases[after]
        moves: dict[str, list[str]] = {}
        for key in sorted(set(old["deviations"]) | set(new["deviations"])):
            was, now = outcome_in(old, key), outcome_in(new, key)
            if was != now and was is not None and now is not None:
                moves.setdefault(f"{was} → {now}", []).append(key)
        met_before = {key for key in old["deviations"] if is_met(key)}
        met_after = {key for key in new["deviations"] if is_met(key)}
        for label, met in (("only before", met_before - met_after), ("only after", met_after - met_before)):
            if met:
                moves[f"stateful disagreement met {label}"] = sorted(met)
        gained = sorted(set(new["counts"]) - set(old["counts"]))
        lines.append(
            f"**{before} → {after}**" + (f" (families gained: {', '.join(gained)})" if gained else "") + ":"
        )
        if not moves:
            lines.append("- no case changed its outcome")
        for move, keys in sorted(moves.items()):
            shown = ", ".join(f"`{key}`" for key in keys[:12])
            more = f" and {len(keys) - 12} more" if len(keys) > 12 else ""
            lines.append(f"- {move} ({len(keys)}): {shown}{more}")
        lines.append("")
    return lines


def render_engine(releases: Mapping[str, Any]) -> list[str]:
    lines = [
        "## The engine (issue 11)",
        "",
        "DSH 0.1 publishes two engine packages: `@deepseek-ai/dsh-compaction-tool-result-pruner` (capability",
        "`prune`: the op `prune` runs its `pruneSession`) and `@deepseek-ai/dsh-session-projection`",
        "(capability `projection`: `project`, `unproject`, `state_of`, `snapshot`, `state_of_stored` over",
        "its `SessionProjectionRegistry`, and the pure `spec.projection.derive_projection_changes` through",
        "its change feed); `subjects/dsh/lib/engine.mjs` maps them. Summary compaction, spill, overflow",
        "recovery and durability checkpoints have no DSH package and answer unsupported.",
        "",
        *table_head(releases),
    ]
    lines += [*family_rows(releases, ENGINE), ""]
    for release, run in releases.items():
        failed = {
            k: c for k, c in run["deviations"].items() if c["family"] in ENGINE and c["outcome"] == "failed"
        }
        if failed:
            lines.append(f"Engine deviations of {release}:")
            lines += render_grouped(failed)
            lines.append("")
    return lines


def deviations_of(cases: Mapping[str, Mapping[str, str]]) -> tuple[Deviation, ...]:
    """The cases that did not pass, grouped by their cause (one deviation, many cases), in the
    order of the kinds; a case no cause explains is a deviation of its own, kind TODO."""
    met = []
    for key, case in cases.items():
        entry = entry_for({"key": key, **case}, explainer)
        if entry.todo:
            entry = replace(entry, cause=reason_of(key, case))
        met.append((entry, key, str(case["outcome"])))
    return group_deviations(met)


def render_grouped(cases: Mapping[str, Mapping[str, str]]) -> list[str]:
    """Each deviation once: its cause, its source (the evidence) and the cases it fails."""
    lines = []
    for deviation in deviations_of(cases):
        keys = [key for key, _ in deviation.cases]
        shown = ", ".join(f"`{key}`" for key in keys[:6]) + (
            f" and {len(keys) - 6} more" if len(keys) > 6 else ""
        )
        outcomes = ", ".join(sorted({outcome for _, outcome in deviation.cases}))
        lines.append(
            f"- [{deviation.kind}] {deviation.cause} (evidence: {deviation.source or 'none recorded'}); "
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
    """Deviations by kind, each once (a cause of DSH's with its source), not case counts."""
    found = {release: deviations_of(run["deviations"]) for release, run in releases.items()}
    lines = [
        "## Deviations by kind",
        "",
        "Each deviation counted once, however many cases it fails: a cause of DSH's, with its source as the",
        'evidence. Kinds (`docs/choices.md`, "Fingerprints and kinds"): subject-bug, spec-version (a feature',
        "of a later spec), derived-rule (a rule this project derived), robustness (malformed input),",
        "decision (a SPEC-DECISION not followed), harness (the adapter's own limit).",
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
        lines += [*render_grouped(releases[release]["deviations"]), ""]
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
    parser.add_argument("--profile", default="ci")
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
    stored["profile"] = args.profile
    releases = dict(stored.get("releases", {}))
    for release in args.releases or pinned_releases():
        path = REPORTS / f"dsh-{release}-matrix.json"
        if not (args.reuse and path.is_file()):
            path = certify(release, args.profile)
        if not path.is_file():
            print(f"compatibility: no run for {release}", file=sys.stderr)
            return 1
        releases[release] = summarize(json.loads(path.read_text(encoding="utf-8")))
    stored["releases"] = dict(sorted(releases.items(), key=lambda item: release_order(item[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
