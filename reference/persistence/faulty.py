"""A power-loss filesystem whose next write or fsync can be made to fail once: the protocol's
``fail_next`` (conformance/PROTOCOL.md, "Crash ops") over :mod:`reference.persistence.powerloss`."""

from __future__ import annotations

import errno

from reference.persistence.fs import LockHandle
from reference.persistence.powerloss import PowerLossFileSystem


class FaultyFileSystem:
    """A :class:`PowerLossFileSystem` whose next write or fsync can be made to fail once, as the
    protocol's ``fail_next`` asks: ``"write"`` is the next ``write_new`` or ``append`` (creating a
    file or appending to one), ``"fsync"`` the next file fsync. A failing call has no effect."""

    def __init__(self, inner: PowerLossFileSystem) -> None:
        self.inner = inner
        self._faults: list[list[int | str]] = []  # [kind, errno, calls to let through first]

    def fail_next(self, kind: str, code: int, after: int) -> None:
        self._faults.append([kind, code, after])

    def _gate(self, kind: str, path: str) -> None:
        for fault in self._faults:
            if fault[0] != kind:
                continue
            if fault[2] == 0:
                self._faults.remove(fault)
                code = int(fault[1])
                raise OSError(code, f"injected {errno.errorcode[code]}", path)
            fault[2] = int(fault[2]) - 1

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
