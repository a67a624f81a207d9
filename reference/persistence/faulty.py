"""A power-loss filesystem whose next write or fsync can be made to fail once: the protocol's
``fail_next`` (conformance/PROTOCOL.md, "Crash ops") over :mod:`reference.persistence.powerloss`."""

from __future__ import annotations

import errno

from reference.persistence.fs import LockHandle
from reference.persistence.powerloss import PowerLossFileSystem


class Countdown:
    """A fault armed to fail one call, after letting ``after`` matching calls through (``None``:
    not armed). The protocol's ``fail_next`` and ``fail_commit`` both count this way."""

    def __init__(self, after: int | None = None) -> None:
        self.after = after

    def spend(self) -> bool:
        """A matching call is about to happen: whether it must fail (the fault is then spent)."""
        if self.after is None:
            return False
        if self.after > 0:
            self.after -= 1
            return False
        self.after = None
        return True


class FaultyFileSystem:
    """A :class:`PowerLossFileSystem` whose next write or fsync can be made to fail once, as the
    protocol's ``fail_next`` asks: ``"write"`` is the next ``write_new`` or ``append`` (creating a
    file or appending to one), ``"fsync"`` the next file fsync. A failing call has no effect."""

    def __init__(self, inner: PowerLossFileSystem) -> None:
        self.inner = inner
        self._faults: list[tuple[str, int, Countdown]] = []  # kind, errno, its countdown

    def fail_next(self, kind: str, code: int, after: int) -> None:
        self._faults.append((kind, code, Countdown(after)))

    def _gate(self, kind: str, path: str) -> None:
        for fault in self._faults:
            if fault[0] == kind and fault[2].spend():
                self._faults.remove(fault)
                raise OSError(fault[1], f"injected {errno.errorcode[fault[1]]}", path)

    def read_bytes(self, path: str) -> bytes:
        return self.inner.read_bytes(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def makedirs(self, path: str) -> None:
        self.inner.makedirs(path)

    def write_new(self, path: str, data: bytes) -> None:
        self._gate("write", path)
        self.inner.write_new(path, data)

    def append(self, path: str, data: bytes) -> None:
        self._gate("write", path)
        self.inner.append(path, data)

    def truncate(self, path: str, size: int) -> None:
        self.inner.truncate(path, size)

    def fsync(self, path: str) -> None:
        self._gate("fsync", path)
        self.inner.fsync(path)

    def fsync_dir(self, path: str) -> None:
        self.inner.fsync_dir(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def link(self, src: str, dst: str) -> None:
        self.inner.link(src, dst)

    def remove(self, path: str) -> None:
        self.inner.remove(path)

    def try_lock(self, path: str) -> LockHandle | None:
        return self.inner.try_lock(path)

    def unlock(self, lock: LockHandle) -> None:
        self.inner.unlock(lock)
