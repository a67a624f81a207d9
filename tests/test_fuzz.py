"""The fuzz harnesses (``fuzz/``, issue 23 item 4): each harness's oracle holds on its seed corpus
and on every regression input (a past finding), replayed in-process; ``scripts/fuzz.sh`` fuzzes
every harness for a short budget without a finding, and says where it saved the input of one."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fuzz import TARGETS

ROOT = Path(__file__).resolve().parent.parent
FUZZ = ROOT / "fuzz"
SECONDS_PER_INPUT = 10  # scripts/fuzz.sh's -timeout
NO_ATHERIS = importlib.util.find_spec("atheris") is None
needs_atheris = pytest.mark.skipif(
    NO_ATHERIS, reason="atheris is not installed (pip install -e '.[dev]'): the fuzzer cannot run"
)


OPEN_FINDINGS: dict[str, tuple[type[BaseException], str]] = {}
"""Regression inputs whose finding is not fixed yet (in a file another change owns): each fails as
its oracle says until the fix, then passes and must leave this list (the xfail is strict)."""


def _open_finding(folder: str, name: str) -> list[pytest.MarkDecorator]:
    if folder != "regressions" or name not in OPEN_FINDINGS:
        return []
    raises, reason = OPEN_FINDINGS[name]
    return [pytest.mark.xfail(raises=raises, reason=reason, strict=True)]


def _inputs() -> list[object]:
    return [
        pytest.param(
            target,
            path,
            id=f"{folder}/{target}/{path.name}",
            marks=_open_finding(folder, f"{target}/{path.name}"),
        )
        for target in TARGETS
        for folder in ("corpus", "regressions")
        if (FUZZ / folder / target).is_dir()
        for path in sorted((FUZZ / folder / target).iterdir())
    ]


def test_every_target_has_seeds() -> None:
    assert {path.name for path in (FUZZ / "corpus").iterdir()} == set(TARGETS)
    for target in TARGETS:
        assert len(list((FUZZ / "corpus" / target).iterdir())) >= 4, target


@pytest.mark.parametrize(("target", "path"), _inputs())
def test_oracle_holds_on_seeds_and_regressions(target: str, path: Path) -> None:
    harness = importlib.import_module(f"fuzz.{target}")
    start = time.perf_counter()
    harness.one_input(path.read_bytes())
    assert time.perf_counter() - start < SECONDS_PER_INPUT


def _fuzz_sh(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``root/scripts/fuzz.sh ARGS``, the project's packages importable from ``ROOT``."""
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [str(root / "scripts" / "fuzz.sh"), *args], capture_output=True, text=True, env=env, timeout=120
    )


@needs_atheris
def test_fuzz_sh_runs_every_target_without_a_finding() -> None:
    run = _fuzz_sh(ROOT, "all", "3")
    assert run.returncode == 0, run.stdout + run.stderr
    for target in TARGETS:
        match = re.search(rf"^{target}: (\d+) inputs in 3 s, libFuzzer exit 0$", run.stdout, re.MULTILINE)
        assert match is not None and int(match.group(1)) > 0, run.stdout


@needs_atheris
def test_fuzz_sh_reports_a_finding_and_where_its_input_is(tmp_path: Path) -> None:
    # a copy of the fuzz folder and the script, its JSON harness planted with a finding on "["
    shutil.copytree(FUZZ, tmp_path / "fuzz", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "scripts").mkdir()
    shutil.copy2(ROOT / "scripts" / "fuzz.sh", tmp_path / "scripts")
    harness = tmp_path / "fuzz" / "json_text.py"
    harness.write_text(
        harness.read_text().replace(
            "    as_bytes = _answer(data)\n",
            "    if b'[' in data:\n        raise Finding('planted')\n    as_bytes = _answer(data)\n",
        )
    )
    run = _fuzz_sh(tmp_path, "json_text", "30")
    assert run.returncode == 1, run.stdout + run.stderr
    saved = re.search(r"^json_text: finding saved at (\S+)$", run.stdout, re.MULTILINE)
    assert saved is not None, run.stdout
    assert b"[" in Path(saved.group(1)).read_bytes()
    shutil.rmtree(Path(saved.group(1)).parent.parent)
