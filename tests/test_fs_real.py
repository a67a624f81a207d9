"""RealFileSystem on a real disk: modes, short writes, cleanup, and the lock across processes."""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reference.persistence.fs import RealFileSystem

# Exits 0 when the lock at argv[1] is free (and takes it), 3 when someone holds it.
_LOCK_PROBE = (
    "import sys; from reference.persistence.fs import RealFileSystem; "
    "sys.exit(0 if RealFileSystem().try_lock(sys.argv[1]) is not None else 3)"
)


def _lock_is_free_for_another_process(path: Path) -> bool:
    project = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(project) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    probe = subprocess.run([sys.executable, "-c", _LOCK_PROBE, str(path)], env=env, timeout=60)
    assert probe.returncode in (0, 3), f"lock probe failed with exit code {probe.returncode}"
    return probe.returncode == 0


def test_write_new_creates_the_file_readable_by_its_owner_only(tmp_path: Path) -> None:
    RealFileSystem().write_new(str(tmp_path / "a"), b"x")
    assert stat.S_IMODE(os.stat(tmp_path / "a").st_mode) == 0o600


def test_makedirs_creates_directories_for_their_owner_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        RealFileSystem().makedirs(str(tmp_path / "a" / "b"))
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(os.stat(tmp_path / "a" / "b").st_mode) == 0o700


def test_append_writes_every_byte_when_the_kernel_writes_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data)[:3]))
    fs = RealFileSystem()
    fs.write_new(str(tmp_path / "log"), b"header\n")
    fs.append(str(tmp_path / "log"), b"a longer batch of events\n")
    assert (tmp_path / "log").read_bytes() == b"header\na longer batch of events\n"


def test_a_write_new_that_fails_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", no_space)
    with pytest.raises(OSError) as caught:
        RealFileSystem().write_new(str(tmp_path / "log.tmp"), b"data")
    assert caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_append_is_positioned_at_the_end_even_after_another_writer_grew_the_file(tmp_path: Path) -> None:
    fs = RealFileSystem()
    fs.write_new(str(tmp_path / "log"), b"a\n")
    with open(tmp_path / "log", "ab") as other:
        other.write(b"b\n")
    fs.append(str(tmp_path / "log"), b"c\n")
    assert (tmp_path / "log").read_bytes() == b"a\nb\nc\n"


def test_a_second_lock_in_this_process_is_refused_even_where_flock_would_grant_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fcntl, "flock", lambda fd, operation: None)
    fs = RealFileSystem()
    lock = fs.try_lock(str(tmp_path / "session.lock"))
    assert lock is not None
    assert fs.try_lock(str(tmp_path / "session.lock")) is None
    fs.unlock(lock)


def test_two_real_filesystems_in_one_process_share_the_lock(tmp_path: Path) -> None:
    lock = RealFileSystem().try_lock(str(tmp_path / "session.lock"))
    assert lock is not None
    assert RealFileSystem().try_lock(str(tmp_path / "session.lock")) is None
    RealFileSystem().unlock(lock)


def test_the_same_lock_file_under_another_path_is_the_same_lock(tmp_path: Path) -> None:
    fs = RealFileSystem()
    (tmp_path / "d").mkdir()
    lock = fs.try_lock(str(tmp_path / "d" / "session.lock"))
    assert lock is not None
    assert fs.try_lock(str(tmp_path / "d" / ".." / "d" / "session.lock")) is None
    fs.unlock(lock)


def test_another_process_cannot_lock_while_this_one_holds_the_lock(tmp_path: Path) -> None:
    fs = RealFileSystem()
    lock = fs.try_lock(str(tmp_path / "session.lock"))
    assert lock is not None
    try:
        assert not _lock_is_free_for_another_process(tmp_path / "session.lock")
    finally:
        fs.unlock(lock)


def test_another_process_can_lock_once_this_one_unlocks(tmp_path: Path) -> None:
    fs = RealFileSystem()
    lock = fs.try_lock(str(tmp_path / "session.lock"))
    assert lock is not None
    fs.unlock(lock)
    assert _lock_is_free_for_another_process(tmp_path / "session.lock")


def test_a_lock_held_by_another_process_refuses_this_one(tmp_path: Path) -> None:
    path = tmp_path / "session.lock"
    project = Path(__file__).resolve().parent.parent
    holder_code = (
        "import sys; from reference.persistence.fs import RealFileSystem; "
        "lock = RealFileSystem().try_lock(sys.argv[1]); print('held' if lock else 'busy', flush=True); "
        "sys.stdin.read()"
    )
    env = {**os.environ, "PYTHONPATH": str(project) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    holder = subprocess.Popen(
        [sys.executable, "-c", holder_code, str(path)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert RealFileSystem().try_lock(str(path)) is None
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    lock = RealFileSystem().try_lock(str(path))
    assert lock is not None
    RealFileSystem().unlock(lock)
