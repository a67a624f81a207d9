"""An in-memory filesystem that can lose power: the ground for crash-injection tests.

:class:`PowerLossFileSystem` implements ``reference.persistence.fs.FileSystem`` and remembers, besides what a
reader sees now, what would survive a power cut. The model is SPEC-DECISIONS D3's: bytes written
but not yet fsynced may be lost, or kept only as a prefix cut at any byte.

- A file's content is durable up to its last ``fsync``. Since then it has kept its first
  ``kept`` bytes unchanged and holds ``pending`` bytes after them (appends, or zeros from an
  extending ``truncate``). A crash keeps ``kept + k`` bytes for any ``k`` in ``0..pending``; when
  a ``truncate`` cut below the durable size, the crash may instead lose the change whole and bring
  back the durable content (cut ``None``).
- A directory's entries (a name created, linked, renamed or removed, a new subdirectory) are
  durable only after ``fsync_dir`` of that directory. A crash keeps, per directory, either all of
  its unsynced entry changes or none of them. ``fsync`` of a file never makes its name durable.
  A rename across two directories is therefore modelled per directory (both must be synced);
  the store renames within one directory only.
- Nothing decides by chance. :meth:`PowerLossFileSystem.crash` takes a :class:`CrashPlan` naming
  the cut of each file and the fate of each directory.

Stopping a workload (:meth:`PowerLossFileSystem.crash_at_op`): the n-th mutating call from then on
raises :class:`SimulatedCrash` before it takes effect, and every later call raises it too — the
process is dead. ``SimulatedCrash`` is a ``BaseException`` so that a store's ``except Exception``
cleanup cannot swallow it. The observers (``crash``, ``unsynced_files``, ``unsynced_dirs``,
``mutation_count``) keep working.

This is the crash seam the reference answers the protocol's crash ops with (conformance/PROTOCOL.md,
"Crash ops"; faults are :mod:`reference.persistence.faulty`'s). What only tests ask for (every
crash state, a workload cut before each of its calls, a record of the calls, faults on any call)
is in ``tests/powerloss_harness.py``.

Paths are absolute POSIX paths. Not thread-safe: a test drives it from one thread.
"""

from __future__ import annotations

import errno
import itertools
import os
import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from reference.persistence.fs import LockHandle

__all__ = [
    "DROP_ALL",
    "KEEP_ALL",
    "MUTATING_OPS",
    "CrashPlan",
    "PowerLossFileSystem",
    "SimulatedCrash",
    "UnsyncedFile",
]

# The calls that change what is on disk or make it durable; crash_at_op counts these.
MUTATING_OPS: Final = frozenset(
    {"makedirs", "write_new", "append", "truncate", "fsync", "fsync_dir", "rename", "link", "remove"}
)

_ROOT: Final = 0  # node id of "/"


class SimulatedCrash(BaseException):
    """The power went out: raised by the call :meth:`PowerLossFileSystem.crash_at_op` chose, and
    by every call after it."""


@dataclass(frozen=True)
class UnsyncedFile:
    """A file whose content has changed since its last fsync. ``path`` is the name to use in a
    :class:`CrashPlan`: its smallest current name, or, for a file no current name reaches, its
    smallest name in any directory state a crash could bring back."""

    path: str
    durable: int  # bytes: size after the last fsync
    kept: int  # bytes: leading bytes unchanged since the last fsync
    pending: int  # bytes: written after those ``kept`` bytes since the last fsync

    @property
    def can_revert(self) -> bool:
        """A truncate cut below the durable size, so losing the change whole (cut None) is a
        different outcome from keeping none of the pending bytes (cut 0)."""
        return self.kept < self.durable

    def cuts(self) -> tuple[int | None, ...]:
        """Every cut a crash can make: ``None`` if the change can be lost whole, then
        ``0..pending`` pending bytes kept."""
        reverted: tuple[int | None, ...] = (None,) if self.can_revert else ()
        return reverted + tuple(range(self.pending + 1))


@dataclass(frozen=True)
class CrashPlan:
    """What survives a crash. ``cuts`` maps an unsynced file (by :attr:`UnsyncedFile.path`) to the
    number of its pending bytes kept, or ``None`` to lose its unsynced change whole; ``dirs`` maps
    a directory with unsynced entries to whether those entries survive. Every file and directory
    not named gets all of its unsynced changes if ``keep_all``, none of them otherwise."""

    keep_all: bool = False
    cuts: Mapping[str, int | None] = field(default_factory=dict)
    dirs: Mapping[str, bool] = field(default_factory=dict)


DROP_ALL: Final = CrashPlan()  # every unsynced byte and entry is lost
KEEP_ALL: Final = CrashPlan(keep_all=True)  # everything written reached the disk


@dataclass
class _File:
    # The durable content is data[:kept] + lost: a truncate below ``kept`` moves the durable
    # bytes it cut into ``lost``, so appends never copy the file.
    data: bytearray
    kept: int
    lost: bytes = b""

    def durable(self) -> bytes:
        return bytes(self.data[: self.kept]) + self.lost

    def cut(self, cut: int | None) -> bytes:
        """The content a crash leaves when it keeps ``cut`` pending bytes (None: the durable one)."""
        return self.durable() if cut is None else bytes(self.data[: self.kept + cut])

    def is_unsynced(self) -> bool:
        return self.kept < len(self.data) or bool(self.lost)


@dataclass
class _Dir:
    path: str
    durable: dict[str, int]
    current: dict[str, int]


class PowerLossFileSystem:
    """A ``FileSystem`` in memory that records what is durable and can crash (see the module
    docstring)."""

    def __init__(self) -> None:
        self._nodes: dict[int, _File | _Dir] = {_ROOT: _Dir(path="/", durable={}, current={})}
        self._next_node = 1
        self._mutations = 0  # mutating calls attempted
        self._crash_after: int | None = None  # the value of _mutations whose call crashes
        self._crashed = False
        self._locks: dict[int, int] = {}  # lock token -> node id
        self._lock_tokens = itertools.count(1)

    # --- observing ---
    @property
    def mutation_count(self) -> int:
        """How many mutating calls have been attempted (the crashing one included)."""
        return self._mutations

    def unsynced_files(self) -> tuple[UnsyncedFile, ...]:
        """The files a crash could change, in path order."""
        named = self._crash_names()
        found: list[UnsyncedFile] = []
        for node_id, path in named.items():
            node = self._nodes[node_id]
            if isinstance(node, _File) and node.is_unsynced():
                durable = node.kept + len(node.lost)
                found.append(UnsyncedFile(path, durable, node.kept, len(node.data) - node.kept))
        return tuple(sorted(found, key=lambda f: f.path))

    def unsynced_dirs(self) -> tuple[str, ...]:
        """The directories whose entries a crash could change, in path order."""
        return tuple(
            sorted(
                node.path
                for node_id in self._crash_names()
                if isinstance(node := self._nodes[node_id], _Dir) and node.current != node.durable
            )
        )

    # --- crashing ---
    def crash(self, plan: CrashPlan = DROP_ALL) -> PowerLossFileSystem:
        """A new filesystem holding what survives a power cut now, as ``plan`` says; everything in
        it is durable and no lock is held. This filesystem is left as it was."""
        self._validate(plan)
        cut_of = {
            node_id: plan.cuts[path] for node_id, path in self._crash_names().items() if path in plan.cuts
        }
        after = PowerLossFileSystem()
        renumbered: dict[int, int] = {_ROOT: _ROOT}
        stack = [_ROOT]
        while stack:
            old_id = stack.pop()
            old_dir, new_dir = self._nodes[old_id], after._nodes[renumbered[old_id]]
            assert isinstance(old_dir, _Dir) and isinstance(new_dir, _Dir)
            entries = old_dir.current if plan.dirs.get(old_dir.path, plan.keep_all) else old_dir.durable
            for name, child_id in sorted(entries.items()):
                if child_id not in renumbered:
                    child = self._nodes[child_id]
                    if isinstance(child, _Dir):
                        renumbered[child_id] = after._add(_Dir(path=child.path, durable={}, current={}))
                        stack.append(child_id)
                    else:
                        if child_id in cut_of:
                            content = child.cut(cut_of[child_id])
                        else:
                            content = bytes(child.data) if plan.keep_all else child.durable()
                        renumbered[child_id] = after._add(_File(data=bytearray(content), kept=len(content)))
                new_dir.current[name] = renumbered[child_id]
            new_dir.durable = dict(new_dir.current)
        return after

    # --- injecting ---
    def crash_at_op(self, n: int) -> None:
        """The n-th mutating call from now on (n >= 1) raises :class:`SimulatedCrash` before it
        takes effect, and so does every call after it."""
        if n < 1:
            raise ValueError(f"crash_at_op counts from 1, got {n}")
        self._crash_after = self._mutations + n

    def rot_byte(self, path: str, offset: int) -> None:
        """Bit rot: the byte at ``offset`` of the file becomes its complement (``b ^ 0xFF``), in
        what a reader sees and, where that byte is durable, in what a crash keeps. The disk did
        it, not a writer: it is not a mutating call and no fault or armed crash sees it."""
        file = self._file(path)
        if not 0 <= offset < len(file.data):
            raise ValueError(f"offset {offset} is outside {path} ({len(file.data)} bytes)")
        file.data[offset] ^= 0xFF

    # --- FileSystem: reading ---
    def read_bytes(self, path: str) -> bytes:
        self._enter("read_bytes", path)
        return bytes(self._file(path).data)

    def exists(self, path: str) -> bool:
        self._enter("exists", path)
        return self._find(path) is not None

    def is_dir(self, path: str) -> bool:
        self._enter("is_dir", path)
        node_id = self._find(path)
        return node_id is not None and isinstance(self._nodes[node_id], _Dir)

    def listdir(self, path: str) -> list[str]:
        self._enter("listdir", path)
        return sorted(self._dir(path).current)

    def size(self, path: str) -> int:
        self._enter("size", path)
        return len(self._file(path).data)

    # --- FileSystem: writing ---
    def makedirs(self, path: str) -> None:
        self._enter("makedirs", path)
        parts = _parts(path)
        current = self._nodes[_ROOT]
        for depth, name in enumerate(parts):
            assert isinstance(current, _Dir)
            child_id = current.current.get(name)
            if child_id is None:
                child_path = "/" + "/".join(parts[: depth + 1])
                child_id = self._add(_Dir(path=child_path, durable={}, current={}))
                current.current[name] = child_id
            child = self._nodes[child_id]
            if isinstance(child, _File):
                code = errno.EEXIST if depth == len(parts) - 1 else errno.ENOTDIR
                raise _error(code, path)
            current = child

    def write_new(self, path: str, data: bytes) -> None:
        self._enter("write_new", path)
        parent, name = self._parent(path)
        if name in parent.current:
            raise _error(errno.EEXIST, path)
        parent.current[name] = self._add(_File(data=bytearray(data), kept=0))

    def append(self, path: str, data: bytes) -> None:
        self._enter("append", path)
        self._file(path).data += data

    def truncate(self, path: str, size: int) -> None:
        self._enter("truncate", path)
        file = self._file(path)
        if size < 0:
            raise _error(errno.EINVAL, path)
        if size < file.kept:
            file.lost = bytes(file.data[size : file.kept]) + file.lost
            file.kept = size
        if size <= len(file.data):
            del file.data[size:]
        else:
            file.data += bytes(size - len(file.data))

    def fsync(self, path: str) -> None:
        self._enter("fsync", path)
        file = self._file(path)
        file.kept, file.lost = len(file.data), b""

    def fsync_dir(self, path: str) -> None:
        self._enter("fsync_dir", path)
        directory = self._dir(path)
        directory.durable = dict(directory.current)

    def rename(self, src: str, dst: str) -> None:
        self._enter("rename", src)
        src_parent, src_name = self._parent(src)
        node_id = self._file_id(src_parent, src_name, src)
        dst_parent, dst_name = self._parent(dst)
        replaced = dst_parent.current.get(dst_name)
        if replaced is not None and isinstance(self._nodes[replaced], _Dir):
            raise _error(errno.EISDIR, dst)
        if replaced != node_id:  # POSIX: renaming onto another name of the same file does nothing
            del src_parent.current[src_name]
            dst_parent.current[dst_name] = node_id

    def link(self, src: str, dst: str) -> None:
        self._enter("link", src)
        src_parent, src_name = self._parent(src)
        node_id = src_parent.current.get(src_name)
        if node_id is None:
            raise _error(errno.ENOENT, src)
        if isinstance(self._nodes[node_id], _Dir):
            raise _error(errno.EPERM, src)
        dst_parent, dst_name = self._parent(dst)
        if dst_name in dst_parent.current:
            raise _error(errno.EEXIST, dst)
        dst_parent.current[dst_name] = node_id

    def remove(self, path: str) -> None:
        self._enter("remove", path)
        parent, name = self._parent(path)
        self._file_id(parent, name, path)
        del parent.current[name]

    # --- FileSystem: one writer ---
    def try_lock(self, path: str) -> LockHandle | None:
        self._enter("try_lock", path)
        parent, name = self._parent(path)
        if name not in parent.current:
            parent.current[name] = self._add(_File(data=bytearray(), kept=0))
        node_id = self._file_id(parent, name, path)
        if node_id in self._locks.values():
            return None
        token = next(self._lock_tokens)
        self._locks[token] = node_id
        return LockHandle(path=path, token=token)

    def unlock(self, lock: LockHandle) -> None:
        self._enter("unlock", lock.path)
        if self._locks.pop(lock.token, None) is None:
            raise ValueError(f"{lock.path!r} is not locked by this handle")

    # --- the gate every call passes ---
    def _enter(self, op: str, path: str) -> None:
        if self._crashed:
            raise SimulatedCrash(f"{op} {path}: the power is already out")
        if op in MUTATING_OPS:
            self._mutations += 1
            if self._mutations == self._crash_after:
                self._crashed = True
                raise SimulatedCrash(f"power cut at mutating op #{self._mutations}: {op} {path}")

    # --- the namespace ---
    def _add(self, node: _File | _Dir) -> int:
        node_id = self._next_node
        self._next_node += 1
        self._nodes[node_id] = node
        return node_id

    def _find(self, path: str) -> int | None:
        """The node a current name reaches; None when a component is missing or not a directory."""
        node_id = _ROOT
        for name in _parts(path):
            node = self._nodes[node_id]
            if not isinstance(node, _Dir) or name not in node.current:
                return None
            node_id = node.current[name]
        return node_id

    def _parent(self, path: str) -> tuple[_Dir, str]:
        parts = _parts(path)
        if not parts:
            raise _error(errno.EISDIR, path)
        node_id = _ROOT
        for name in parts[:-1]:
            node = self._nodes[node_id]
            assert isinstance(node, _Dir)
            if name not in node.current:
                raise _error(errno.ENOENT, path)
            node_id = node.current[name]
            if isinstance(self._nodes[node_id], _File):
                raise _error(errno.ENOTDIR, path)
        parent = self._nodes[node_id]
        assert isinstance(parent, _Dir)
        return parent, parts[-1]

    def _file_id(self, parent: _Dir, name: str, path: str) -> int:
        node_id = parent.current.get(name)
        if node_id is None:
            raise _error(errno.ENOENT, path)
        if isinstance(self._nodes[node_id], _Dir):
            raise _error(errno.EISDIR, path)
        return node_id

    def _file(self, path: str) -> _File:
        parent, name = self._parent(path)
        node = self._nodes[self._file_id(parent, name, path)]
        assert isinstance(node, _File)
        return node

    def _dir(self, path: str) -> _Dir:
        if not _parts(path):
            root = self._nodes[_ROOT]
            assert isinstance(root, _Dir)
            return root
        parent, name = self._parent(path)
        node_id = parent.current.get(name)
        if node_id is None:
            raise _error(errno.ENOENT, path)
        node = self._nodes[node_id]
        if isinstance(node, _File):
            raise _error(errno.ENOTDIR, path)
        return node

    def _walk_current(self) -> Iterator[tuple[str, int]]:
        stack = [("", _ROOT)]
        while stack:
            prefix, dir_id = stack.pop()
            directory = self._nodes[dir_id]
            assert isinstance(directory, _Dir)
            for name, node_id in directory.current.items():
                path = f"{prefix}/{name}"
                yield path, node_id
                if isinstance(self._nodes[node_id], _Dir):
                    stack.append((path, node_id))

    def _crash_names(self) -> dict[int, str]:
        """Each node some crash outcome can reach, with its name for a CrashPlan: its smallest
        current path if it has one, else its smallest path through durable or current entries."""
        names: dict[int, str] = {}
        for path, node_id in self._walk_current():
            if node_id not in names or path < names[node_id]:
                names[node_id] = path
        other: dict[int, str] = {}
        stack = [("", _ROOT)]
        visited = {_ROOT}
        while stack:
            prefix, dir_id = stack.pop()
            directory = self._nodes[dir_id]
            assert isinstance(directory, _Dir)
            for name, node_id in itertools.chain(directory.current.items(), directory.durable.items()):
                path = f"{prefix}/{name}"
                if node_id not in other or path < other[node_id]:
                    other[node_id] = path
                if isinstance(self._nodes[node_id], _Dir) and node_id not in visited:
                    visited.add(node_id)
                    stack.append((path, node_id))
        names[_ROOT] = "/"
        return {**other, **names}

    # --- building a crash outcome ---
    def _validate(self, plan: CrashPlan) -> None:
        files = {f.path: f for f in self.unsynced_files()}
        for path, cut in plan.cuts.items():
            if path not in files:
                raise ValueError(f"{path!r} is not a file with unsynced changes; those are {sorted(files)}")
            if cut not in files[path].cuts():
                raise ValueError(f"cut {cut!r} of {path!r} is not one of {files[path].cuts()}")
        dirs = self.unsynced_dirs()
        for path in plan.dirs:
            if path not in dirs:
                raise ValueError(f"{path!r} is not a directory with unsynced entries; those are {list(dirs)}")


def _parts(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"PowerLossFileSystem takes absolute paths, got {path!r}")
    return [part for part in posixpath.normpath(path).split("/") if part]


def _error(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)
