"""Stdio subjects that each miss one durability step, on the real filesystem: the proof that the
trace family (conformance/trace) catches what a killed process never shows.

``python -m reference.durability_subjects NAME`` serves the protocol with its file store in
``$CONFORMANCE_STORE_ROOT`` (the kill check's rules, as ``python -m reference.server`` follows
them), with the one step ``NAME`` says removed (``BROKEN`` lists them all). Each break is made the
way a real bug would be: a call skipped, or a repair written the short way. The same broken store
runs on the simulated power-loss filesystem through :func:`seam_subject`, for the in-process
crash family, so one table can compare the three ways of testing durability
(scripts/trace_comparison.py).
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar, cast

from reference.database_subjects import SqliteSubject
from reference.directory import DirectorySubject
from reference.persistence.filestore import FileStore
from reference.persistence.fs import FileSystem, RealFileSystem
from reference.persistence.sqlite import SqliteStore
from reference.server import STORE_ROOT, ReferenceSubject, serve_stdio
from reference.store import SessionStore
from spec.log.events import Event
from spec.log.json import FrozenDict
from spec.protocol import STORE_ROOT_ENV


class SkippingFileSystem:
    """A filesystem that passes every call through, except ``fsync`` and ``fsync_dir`` while a
    :meth:`skipping` block names them: the store above it believes they happened."""

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner
        self._skipped: set[str] = set()

    @contextmanager
    def skipping(self, *names: str) -> Iterator[None]:
        before = set(self._skipped)
        self._skipped.update(names)
        try:
            yield
        finally:
            self._skipped = before

    def fsync(self, path: str) -> None:
        if "fsync" not in self._skipped:
            self.inner.fsync(path)

    def fsync_dir(self, path: str) -> None:
        if "fsync_dir" not in self._skipped:
            self.inner.fsync_dir(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def skipping_fs(inner: FileSystem) -> FileSystem:
    """``inner`` behind a :class:`SkippingFileSystem`, which passes every other call through."""
    return cast(FileSystem, SkippingFileSystem(inner))


class _Broken(FileStore):
    def skipping(self, *names: str) -> AbstractContextManager[None]:
        assert isinstance(self.fs, SkippingFileSystem), "a broken store runs on a SkippingFileSystem"
        return self.fs.skipping(*names)


class NoFileFsyncStore(_Broken):
    """A flush appends its batch and answers without fsyncing the file (D2: flush is the barrier)."""

    def _append_batch(self, path: str, events: Sequence[Event], compressed: bool) -> None:
        with self.skipping("fsync"):
            super()._append_batch(path, events, compressed)


class NoDirFsyncStore(_Broken):
    """The first flush links the new log into its directory and never fsyncs the directory (D2)."""

    def _publish(self, path: str, header: FrozenDict, events: Sequence[Event]) -> None:
        with self.skipping("fsync_dir"):
            super()._publish(path, header, events)


class LinkUnsyncedTempStore(_Broken):
    """The first flush links the temp file to the log's name without fsyncing the temp file (D2)."""

    def _publish(self, path: str, header: FrozenDict, events: Sequence[Event]) -> None:
        with self.skipping("fsync"):
            super()._publish(path, header, events)


class RenameUnsyncedTempStore(_Broken):
    """The repair of a torn log renames its rewritten temp file over the log without fsyncing it
    (D3 item 4: the rewrite must be durable)."""

    def _rewrite_clean(self, path: str, keep: int, tail: Sequence[Event], compressed: bool) -> None:
        with self.skipping("fsync"):
            super()._rewrite_clean(path, keep, tail, compressed)


class UnsyncedTruncateRepairStore(_Broken):
    """The repair of a torn log cuts the file back with ``ftruncate`` and appends the recovered
    events and the closers, with no fsync at all (DSH's repair, notes/dsh-persistence §6.5, minus
    its fsyncs): the resume answers while its repair is not durable (D3 item 4)."""

    def _rewrite_clean(self, path: str, keep: int, tail: Sequence[Event], compressed: bool) -> None:
        self.fs.truncate(path, keep)
        if tail:
            self.fs.append(path, self._batch_bytes(tail, compressed))


class CreateInPlaceStore(_Broken):
    """The first flush creates the log under its final name and writes it there (no temp file, no
    link), so a crash can leave an empty or half-written log (D2: a new log appears only whole)."""

    def _publish(self, path: str, header: FrozenDict, events: Sequence[Event]) -> None:
        from spec.format.naming import encode_header_line

        compressed = path.endswith(".zstd")
        data = self._batch_bytes([encode_header_line(header)], compressed)
        if events:
            data += self._batch_bytes(events, compressed)
        self._ensure_dirs(path.rsplit("/", 1)[0])
        self.fs.write_new(path, data)
        self.fs.fsync(path)
        self.fs.fsync_dir(path.rsplit("/", 1)[0])


class NoDirFsyncRealFileSystem(RealFileSystem):
    """The store's logic is right, but its I/O layer's directory fsync does nothing (a port that
    met ``EINVAL`` on some platform and silenced it): a bug below the crash seam."""

    def fsync_dir(self, path: str) -> None:
        return None


@dataclass(frozen=True)
class Broken:
    """One broken subject: its store class, the real I/O layer it runs on, and what it breaks."""

    store: type[FileStore]
    io: Callable[[], FileSystem]
    why: str


BROKEN: dict[str, Broken] = {
    "no-file-fsync": Broken(NoFileFsyncStore, RealFileSystem, "no file fsync before acknowledging a flush"),
    "no-dir-fsync": Broken(NoDirFsyncStore, RealFileSystem, "no directory fsync after creating the log"),
    "link-unsynced-temp": Broken(
        LinkUnsyncedTempStore, RealFileSystem, "link of the new log without fsyncing the temp file"
    ),
    "rename-unsynced-temp": Broken(
        RenameUnsyncedTempStore, RealFileSystem, "rename of the repaired log without fsyncing the temp file"
    ),
    "truncate-repair-unsynced": Broken(
        UnsyncedTruncateRepairStore, RealFileSystem, "ftruncate repair (and its re-append) never fsynced"
    ),
    "create-in-place": Broken(
        CreateInPlaceStore, RealFileSystem, "the new log written in place under its final name"
    ),
    "io-dir-fsync-noop": Broken(
        FileStore, NoDirFsyncRealFileSystem, "the I/O layer's directory fsync does nothing (below the seam)"
    ),
}


class BrokenDirectorySubject(DirectorySubject):
    """The reference on ``$CONFORMANCE_STORE_ROOT`` with one durability step missing."""

    broken: ClassVar[Broken]

    def make_store(self, root: str, compressed: bool) -> FileStore:
        return self.broken.store(root, fs=skipping_fs(self.broken.io()), compressed=compressed)


def directory_subject(name: str) -> DirectorySubject:
    root = os.environ.get(STORE_ROOT_ENV)
    if not root:
        raise SystemExit(
            f"durability_subjects: set {STORE_ROOT_ENV} to the directory the store should live in"
        )
    return broken_class(BrokenDirectorySubject, name, f"broken: {name}")(root)


class BrokenSeamSubject(ReferenceSubject):
    """The same broken store on the simulated power-loss filesystem (capability ``crash-seam``).
    A break in the real I/O layer does not exist here: the seam replaces that layer."""

    broken: ClassVar[Broken]

    def _open_store(self) -> None:
        super()._open_store()
        if self.fs is not None:
            names = getattr(self, "_seam_temp_names", None) or itertools.count(1)
            self._seam_temp_names = names
            self.persistence = self.broken.store(
                STORE_ROOT,
                fs=skipping_fs(self.fs),
                compressed=self._compressed,
                temp_token=lambda: f"{next(names):06d}",
            )
            self.store = SessionStore(self.persistence, clock=self._clock)


def seam_subject(name: str) -> ReferenceSubject:
    return broken_class(BrokenSeamSubject, name, f"broken (seam): {name}")()


Subject = TypeVar("Subject", BrokenDirectorySubject, BrokenSeamSubject)


def broken_class(base: type[Subject], name: str, label: str) -> type[Subject]:
    """``base`` with the break ``name`` (the class attribute its stores are made from), as a class:
    the stores are opened while the subject is made."""
    attributes = {"broken": BROKEN[name], "name": label}
    return cast(type[Subject], type(f"{base.__name__}_{name.replace('-', '_')}", (base,), attributes))


class NormalSyncSqliteStore(SqliteStore):
    """Commits under ``synchronous=NORMAL``: in WAL mode a commit is acknowledged before its WAL
    frames are fsynced (they are synced at the next checkpoint), so a power loss can undo it."""

    synchronous = "NORMAL"


class NormalSyncSqliteSubject(SqliteSubject):
    """The SQLite subject with its commits under ``synchronous=NORMAL`` (D2: flush is the barrier)."""

    name = "broken: sqlite-synchronous-normal"

    def _store_class(self) -> type[SqliteStore]:
        return NormalSyncSqliteStore


# Database subjects with one durability setting wrong (stdio, on $CONFORMANCE_STORE_ROOT as well).
BROKEN_DATABASES: dict[str, type[SqliteSubject]] = {"sqlite-synchronous-normal": NormalSyncSqliteSubject}


def main(argv: Sequence[str]) -> None:
    if len(argv) != 1 or argv[0] not in (*BROKEN, *BROKEN_DATABASES):
        raise SystemExit(
            "usage: python -m reference.durability_subjects NAME, where NAME is one of: "
            f"{', '.join((*BROKEN, *BROKEN_DATABASES))}"
        )
    database = BROKEN_DATABASES.get(argv[0])
    serve_stdio(directory_subject(argv[0]) if database is None else database())


if __name__ == "__main__":
    main(sys.argv[1:])
