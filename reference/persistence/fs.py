"""The filesystem seam of the reference store (STYLE: one seam per resource).

Every byte the file store reads or writes goes through a :class:`FileSystem`. The interface is
shaped for an append-only log store and is just large enough for its four write patterns
(notes/dsh-persistence.md §5.2, §5.3, §6.5; SPEC-DECISIONS D2):

- publish a new file whole: ``write_new(tmp)``, ``fsync(tmp)``, ``link(tmp, final)``,
  ``fsync_dir(dir)``, ``remove(tmp)``;
- append a frame: ``append(path, data)``, then ``fsync(path)`` as the durability barrier;
- drop a torn tail or roll back a failed append: ``truncate(path, size)``, ``fsync(path)``;
- rewrite a file atomically: ``write_new(tmp)``, ``fsync(tmp)``, ``rename(tmp, final)``,
  ``fsync_dir(dir)``.

Two implementations ship: :class:`RealFileSystem` here (``os`` calls) and
``reference.persistence.powerloss.PowerLossFileSystem`` (in memory, can crash and fail on demand).

Shared contract of both:

- Paths are ``str``. Failures raise the ``OSError`` subclass the POSIX call would raise
  (``FileNotFoundError``, ``FileExistsError``, ``IsADirectoryError``, ``NotADirectoryError``),
  with ``errno`` and ``filename`` set.
- Nothing is durable until it is fsynced: file bytes by ``fsync(file)``, directory entries
  (a created, linked, renamed or removed name, a new directory) by ``fsync_dir(parent)``.
  ``fsync`` of a file does not make its name durable.
- ``append`` and ``write_new`` write all of ``data`` or raise; a write that raises has written
  nothing (the real one removes the file ``write_new`` created; a failed ``append`` may leave a
  prefix on a real disk, which is why the store rolls back with ``truncate``).
- ``rename`` and ``link`` are for files, within one directory in the store's use.
- ``try_lock`` is an advisory exclusive lock on a lock file it creates (empty) if missing. At most
  one holder at a time, whether the other holder is this process or another one. It never waits.
  ``unlock`` releases it; the lock file stays (removing it would let two holders lock two
  different files under one name).
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import stat
import threading
from dataclasses import dataclass
from typing import Protocol

__all__ = ["FileSystem", "LockHandle", "RealFileSystem"]


@dataclass(frozen=True)
class LockHandle:
    """A held lock: the lock file's path and a token only the issuing filesystem understands."""

    path: str
    token: int


class FileSystem(Protocol):
    """What the store may do to a filesystem. See the module docstring for the shared contract."""

    # --- reading ---
    def read_bytes(self, path: str) -> bytes:
        """The whole content of the file at ``path``."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` names a file or a directory."""
        ...

    def is_dir(self, path: str) -> bool:
        """Whether ``path`` names a directory."""
        ...

    def listdir(self, path: str) -> list[str]:
        """The names in the directory ``path``, sorted."""
        ...

    def size(self, path: str) -> int:
        """The size in bytes of the file at ``path``."""
        ...

    # --- writing ---
    def makedirs(self, path: str) -> None:
        """Create ``path`` and its missing parents (mode 0o700); an existing directory is fine."""
        ...

    def write_new(self, path: str, data: bytes) -> None:
        """Create the file ``path`` exclusively (mode 0o600) holding ``data``; FileExistsError if
        the name is taken."""
        ...

    def append(self, path: str, data: bytes) -> None:
        """Append ``data`` at the end of the existing file ``path`` (O_APPEND)."""
        ...

    def truncate(self, path: str, size: int) -> None:
        """Cut (or zero-extend) the file ``path`` to ``size`` bytes."""
        ...

    def fsync(self, path: str) -> None:
        """Make the content of the file ``path`` durable."""
        ...

    def fsync_dir(self, path: str) -> None:
        """Make the entries of the directory ``path`` durable."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Move the file ``src`` to ``dst`` atomically, replacing a file already there."""
        ...

    def link(self, src: str, dst: str) -> None:
        """Give the file ``src`` a second name ``dst``; FileExistsError if ``dst`` exists."""
        ...

    def remove(self, path: str) -> None:
        """Remove the file name ``path``."""
        ...

    # --- one writer ---
    def try_lock(self, path: str) -> LockHandle | None:
        """Take the exclusive lock on the lock file ``path``, or None if someone holds it."""
        ...

    def unlock(self, lock: LockHandle) -> None:
        """Release a lock taken by ``try_lock``."""
        ...


# flock alone would already refuse a second lock from this process (locks belong to open file
# descriptions, and each try_lock opens its own), but the registry makes that explicit and
# portable, and lets unlock reject handles it did not issue.
# Tokens are never reused, so a stale handle cannot release a later lock that got the same fd.
_held_locks: dict[int, tuple[int, tuple[int, int]]] = {}  # token -> (fd, (st_dev, st_ino) of the file)
_held_locks_guard = threading.Lock()
_lock_tokens = itertools.count(1)


class RealFileSystem:
    """:class:`FileSystem` on the operating system's filesystem, with ``os`` calls."""

    def read_bytes(self, path: str) -> bytes:
        with open(path, "rb") as file:
            return file.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def size(self, path: str) -> int:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
        return info.st_size

    def makedirs(self, path: str) -> None:
        os.makedirs(path, mode=0o700, exist_ok=True)

    def write_new(self, path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            _write_all(fd, data)
        except BaseException:
            os.close(fd)
            _remove_quietly(path)
            raise
        os.close(fd)

    def append(self, path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(path, size)

    def fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def link(self, src: str, dst: str) -> None:
        os.link(src, dst, follow_symlinks=False)

    def remove(self, path: str) -> None:
        os.remove(path)

    def try_lock(self, path: str) -> LockHandle | None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        with _held_locks_guard:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            if any(held == identity for _, held in _held_locks.values()):
                os.close(fd)
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
            except BaseException:
                os.close(fd)
                raise
            token = next(_lock_tokens)
            _held_locks[token] = (fd, identity)
        return LockHandle(path=path, token=token)

    def unlock(self, lock: LockHandle) -> None:
        with _held_locks_guard:
            if lock.token not in _held_locks:
                raise ValueError(f"{lock.path!r} is not locked by this handle")
            fd, _ = _held_locks.pop(lock.token)
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked; loop until every byte is out."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
