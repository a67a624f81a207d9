"""The crash family's two-process check (conformance/crash/writers.py, SPEC-DECISIONS D2): the
reference on a real directory and on SQLite holds one writer per session across processes, and a
store whose writer lock never refuses fails the check at the second process's resume. PostgreSQL
runs it in tests/test_db_conformance.py's stdio run."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Final

import pytest

from conformance.crash.writers import run_writers_check
from spec.protocol import STORE_ROOT_ENV

SERVER: Final = f"{shlex.quote(sys.executable)} -m reference.server"
# The reference whose writer lock never refuses: every try_lock hands out a lock, in any process.
NO_LOCK: Final = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
    "import sys; import reference.persistence.fs as fs; from reference.server import main; "
    "fs.RealFileSystem.try_lock = lambda self, path: fs.LockHandle(path, 0); "
    "fs.RealFileSystem.unlock = lambda self, lock: None; main(sys.argv[1:])"
)


@pytest.mark.parametrize("backend", ["", " --backend sqlite"])
def test_two_processes_of_the_reference_keep_one_writer(backend: str, tmp_path: Path) -> None:
    env = {STORE_ROOT_ENV: str(tmp_path)}
    # the SQLite subject declares commit-fault: its writer fails a commit and still holds its session
    assert run_writers_check(SERVER + backend, env, listing=True, commit_fault=bool(backend)) == ()


@pytest.mark.parametrize("backend", ["", " --backend sqlite"])
def test_a_lock_that_never_refuses_lets_the_second_process_resume(backend: str, tmp_path: Path) -> None:
    env = {STORE_ROOT_ENV: str(tmp_path)}
    problems = run_writers_check(NO_LOCK + backend, env, listing=True)
    assert len(problems) == 1
    assert (
        "process B: resume" in problems[0] and "expected LOCKED (s is stored and A holds it)" in problems[0]
    )
