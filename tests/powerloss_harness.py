"""What the tests ask of the power-loss filesystem and no protocol op does.

:class:`reference.persistence.powerloss.PowerLossFileSystem` is the crash seam the reference
answers the protocol's crash ops with; this module holds the test harness around it:

- :func:`snapshot`: what a reader sees now, every path to its bytes (works after a simulated
  crash, too);
- :func:`crash_states`: every distinct filesystem a power cut now could leave;
- :func:`crash_at_every_op`: a workload replayed with the power cut before each of its mutating
  calls in turn, and every crash state of each;
- :class:`ProbedFileSystem`: a power-loss filesystem that also records its mutating calls
  (:attr:`~ProbedFileSystem.ops`, :attr:`~ProbedFileSystem.crashed_at`), fails any call on demand
  (:meth:`~ProbedFileSystem.fail_next`, with the prefix a failing ``append`` leaves);
- :func:`sync_all`: everything durable at once, as a test's setup.

Faults here are the tests' own: the subject's ``fail_next`` (a next write or fsync) is
:class:`reference.persistence.faulty.FaultyFileSystem`'s.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Final

from reference.persistence.powerloss import (
    KEEP_ALL,
    MUTATING_OPS,
    CrashPlan,
    PowerLossFileSystem,
    SimulatedCrash,
    UnsyncedFile,
    _File,
)

# Every FileSystem call; fail_next accepts any of these.
OPS: Final = MUTATING_OPS | {"read_bytes", "exists", "is_dir", "listdir", "size", "try_lock", "unlock"}


@dataclass(frozen=True)
class Op:
    """One mutating call as it happened: its name, path, bytes written (by a failed call: the
    bytes that landed before the error), the destination of a rename or link, and the errno when
    an injected fault made it fail."""

    name: str
    path: str
    nbytes: int = 0
    target: str | None = None
    errno: int | None = None


@dataclass
class _Fault:
    op: str
    errno: int
    remaining: int  # matching calls to let through before failing
    written: int  # bytes: of a failing append, how many land before the error


def snapshot(fs: PowerLossFileSystem) -> dict[str, bytes | None]:
    """What a reader of ``fs`` sees now: every path (root excluded) to its bytes, ``None`` for a
    directory, in path order. Read from a crash that keeps everything, so it works on a
    filesystem whose power is out."""
    seen = fs.crash(KEEP_ALL)
    found: dict[str, bytes | None] = {}
    stack = ["/"]
    while stack:
        directory = stack.pop()
        for name in seen.listdir(directory):
            path = posixpath.join(directory, name)
            if seen.is_dir(path):
                found[path] = None
                stack.append(path)
            else:
                found[path] = seen.read_bytes(path)
    return dict(sorted(found.items()))


def _digest(fs: PowerLossFileSystem) -> bytes:
    digest = hashlib.sha256()
    for path, content in snapshot(fs).items():
        digest.update(path.encode() + b"\0")
        digest.update(b"d" if content is None else b"f%d:" % len(content) + content)
    return digest.digest()


def crash_states(
    fs: PowerLossFileSystem, cut_choices: Callable[[UnsyncedFile], Iterable[int | None]] | None = None
) -> Iterator[tuple[CrashPlan, PowerLossFileSystem]]:
    """Every distinct filesystem a power cut of ``fs`` now could leave, each with a plan that makes
    it: every cut of every unsynced file (or those ``cut_choices`` picks) times both fates of every
    directory with unsynced entries. Outcomes equal to one already yielded are skipped."""
    files = fs.unsynced_files()
    dirs = fs.unsynced_dirs()
    choices = [tuple(cut_choices(f)) if cut_choices is not None else f.cuts() for f in files]
    seen: set[bytes] = set()
    for cuts in itertools.product(*choices):
        for fates in itertools.product((False, True), repeat=len(dirs)):
            plan = CrashPlan(cuts=dict(zip((f.path for f in files), cuts)), dirs=dict(zip(dirs, fates)))
            after = fs.crash(plan)
            digest = _digest(after)
            if digest not in seen:
                seen.add(digest)
                yield plan, after


def sync_all(fs: PowerLossFileSystem) -> None:
    """Make everything in ``fs`` durable, as a clean shutdown would (a test's setup; not a call)."""
    for node in fs._nodes.values():
        if isinstance(node, _File):
            node.kept, node.lost = len(node.data), b""
        else:
            node.durable = dict(node.current)


class ProbedFileSystem(PowerLossFileSystem):
    """A power-loss filesystem that records its mutating calls and fails any call on demand.

    A fault (:meth:`fail_next`) fires after the call passed the power gate (so a failed mutating
    call counts for :meth:`crash_at_op`) and before it takes effect: the call raises
    ``OSError(errno)`` and changes nothing, except that a failing ``append`` first writes its
    first ``written`` bytes (unsynced), as a disk that fills up mid-write does. A failed ``fsync``
    leaves both the durable and the visible content as they were; a later successful ``fsync``
    makes them durable."""

    def __init__(self) -> None:
        super().__init__()
        self._ops: list[Op] = []
        self._faults: list[_Fault] = []
        self._call = Op("", "")  # the mutating call in progress
        self._data = b""  # the bytes it appends
        self.crashed_at: Op | None = None  # the call crash_at_op stopped, once it has

    @property
    def ops(self) -> tuple[Op, ...]:
        """Every mutating call that took effect or failed by an injected fault, in order."""
        return tuple(self._ops)

    def fail_next(self, op: str, errno: int, after: int = 0, written: int = 0) -> None:
        """The (after+1)-th call of ``op`` from now on raises ``OSError(errno)`` and has no effect
        (but for ``written`` bytes of a failing ``append``). Each armed fault counts on its own;
        when two fire on one call, the earlier armed wins and both are spent."""
        if op not in OPS:
            raise ValueError(f"unknown filesystem op {op!r}; one of {sorted(OPS)}")
        if after < 0 or written < 0:
            raise ValueError(f"after and written must be >= 0, got {after} and {written}")
        if written and op != "append":
            raise ValueError("only a failing append can leave a written prefix")
        self._faults.append(_Fault(op, errno, after, written))

    def _enter(self, op: str, path: str) -> None:
        try:
            super()._enter(op, path)
        except SimulatedCrash:
            if self.crashed_at is None:
                self.crashed_at = self._call
            raise
        fired = [fault for fault in self._faults if fault.op == op and fault.remaining == 0]
        for fault in self._faults:
            if fault.op == op:
                fault.remaining -= 1
        self._faults = [fault for fault in self._faults if fault.remaining >= 0]
        if fired:
            fault = fired[0]
            partial = self._data[: fault.written] if op == "append" else b""
            if partial:
                self._file(path).data += partial
            if op in MUTATING_OPS:
                self._ops.append(replace(self._call, nbytes=len(partial), errno=fault.errno))
            raise OSError(fault.errno, os.strerror(fault.errno), path)

    def _recorded(self, call: Op, run: Callable[[], None], data: bytes = b"") -> None:
        """Run one mutating call of the seam (``data``: the bytes it appends), recording it once
        it took effect."""
        self._call, self._data = call, data
        run()
        self._ops.append(call)

    def makedirs(self, path: str) -> None:
        self._recorded(Op("makedirs", path), lambda: PowerLossFileSystem.makedirs(self, path))

    def write_new(self, path: str, data: bytes) -> None:
        self._recorded(
            Op("write_new", path, len(data)), lambda: PowerLossFileSystem.write_new(self, path, data)
        )

    def append(self, path: str, data: bytes) -> None:
        self._recorded(
            Op("append", path, len(data)), lambda: PowerLossFileSystem.append(self, path, data), data
        )

    def truncate(self, path: str, size: int) -> None:
        self._recorded(Op("truncate", path), lambda: PowerLossFileSystem.truncate(self, path, size))

    def fsync(self, path: str) -> None:
        self._recorded(Op("fsync", path), lambda: PowerLossFileSystem.fsync(self, path))

    def fsync_dir(self, path: str) -> None:
        self._recorded(Op("fsync_dir", path), lambda: PowerLossFileSystem.fsync_dir(self, path))

    def rename(self, src: str, dst: str) -> None:
        self._recorded(Op("rename", src, target=dst), lambda: PowerLossFileSystem.rename(self, src, dst))

    def link(self, src: str, dst: str) -> None:
        self._recorded(Op("link", src, target=dst), lambda: PowerLossFileSystem.link(self, src, dst))

    def remove(self, path: str) -> None:
        self._recorded(Op("remove", path), lambda: PowerLossFileSystem.remove(self, path))


@dataclass(frozen=True)
class CrashPoint:
    """One outcome of :func:`crash_at_every_op`: the workload stopped before its ``op_number``-th
    mutating call (``crashed_at``; None when it ran to the end), then ``plan`` left ``after``."""

    op_number: int
    crashed_at: Op | None
    plan: CrashPlan
    after: PowerLossFileSystem


def crash_at_every_op(
    setup: Callable[[], ProbedFileSystem],
    workload: Callable[[ProbedFileSystem], object],
    cut_choices: Callable[[UnsyncedFile], Iterable[int | None]] | None = None,
) -> Iterator[CrashPoint]:
    """Run ``workload`` on a fresh ``setup()`` once per mutating call it makes, cutting the power
    before that call, and once more to its end; yield every crash state of each run. The workload
    must be deterministic: it is replayed from the start for each crash point."""
    probe = setup()
    start = probe.mutation_count
    workload(probe)
    for n in range(1, probe.mutation_count - start + 2):
        fs = setup()
        fs.crash_at_op(n)
        try:
            workload(fs)
        except SimulatedCrash:
            pass
        for plan, after in crash_states(fs, cut_choices):
            yield CrashPoint(n, fs.crashed_at, plan, after)
