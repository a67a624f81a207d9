"""The disk beneath the persistence models: the calls a subject made, replayed with what is durable
and what is still pending (conformance/CRASH-STATES.md, "The persistence models").

The calls arrive already resolved to inodes (:mod:`conformance.trace.calls` does that): a
:class:`Disk` replays them from an initial :class:`Tree` and keeps, beside what a reader sees now,
what is durable and what is not yet:

- a file's bytes are durable up to its last ``fsync``/``fdatasync`` (or ``sync``/``syncfs``);
  the data calls since then (writes, truncates) are *pending*, in order;
- a directory's entries are durable up to its last ``fsync``; the entry changes since then
  (create, mkdir, link, unlink, rmdir, a rename's half in that directory) are pending, in order.

:meth:`Disk.crash` builds what survives when each item keeps a cut of its pending calls; which
cuts the strict and weak models take is :mod:`conformance.trace.states`.

Everything here is pure: no I/O, no clock, no randomness.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

ROOT: Final = 0  # the inode of the store root


# --- calls, resolved -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Create:
    """A new name ``name`` in directory ``parent`` for a new inode: ``open(O_CREAT)`` of a name
    that did not exist, or ``mkdir`` (``directory``)."""

    parent: int
    name: str
    inode: int
    directory: bool = False


@dataclass(frozen=True)
class Write:
    """``data`` written at byte ``offset`` of a file (an ``O_APPEND`` write's offset is the size
    the file had then)."""

    inode: int
    offset: int
    data: bytes


@dataclass(frozen=True)
class Truncate:
    """A file's size set to ``size`` (``ftruncate``, ``truncate``, ``open(O_TRUNC)``)."""

    inode: int
    size: int


@dataclass(frozen=True)
class Rename:
    """A name moved, replacing whatever ``dst_name`` named."""

    src_parent: int
    src_name: str
    dst_parent: int
    dst_name: str


@dataclass(frozen=True)
class Link:
    """A second name for an existing inode."""

    inode: int
    parent: int
    name: str


@dataclass(frozen=True)
class Unlink:
    """A name removed (``unlink``, ``rmdir``)."""

    parent: int
    name: str


@dataclass(frozen=True)
class Sync:
    """``fsync``/``fdatasync`` of a file (its data) or of a directory (its entries)."""

    inode: int


@dataclass(frozen=True)
class SyncAll:
    """``sync``/``syncfs``: everything becomes durable."""


@dataclass(frozen=True)
class Inert:
    """A call that changes nothing durable (``close``; ``sync_file_range``, which writes pages
    back without the metadata or the device flush that would make them durable)."""

    what: str


Op: TypeAlias = Create | Write | Truncate | Rename | Link | Unlink | Sync | SyncAll | Inert


@dataclass(frozen=True)
class Call:
    """One call as the models see it, how a report shows it, and where it is in the trace."""

    op: Op
    text: str
    line: int = 0


# --- trees: a state on disk ----------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One name below the root: a directory, or a file and its bytes. Names of one file inode are
    hard links of each other."""

    path: str  # relative to the root, "/"-separated
    directory: bool
    data: bytes
    inode: int


@dataclass(frozen=True)
class Tree:
    """Everything below the store root, in path order."""

    entries: tuple[Entry, ...]

    @staticmethod
    def of(entries: Iterable[Entry]) -> Tree:
        """The tree of ``entries`` in any order."""
        return Tree(tuple(sorted(entries, key=lambda entry: entry.path)))

    def key(self) -> str:
        """Equal for two trees a reader cannot tell apart (same names, kinds, bytes and links)."""
        digest = hashlib.sha256()
        first_name: dict[int, str] = {}
        for entry in self.entries:
            link = first_name.setdefault(entry.inode, entry.path)
            head = f"{entry.path}\0{'d' if entry.directory else 'f'}\0{link}\0{len(entry.data)}\0"
            digest.update(head.encode("utf-8", "surrogateescape"))
            digest.update(entry.data)
        return digest.hexdigest()

    def files(self) -> dict[str, bytes]:
        return {entry.path: entry.data for entry in self.entries if not entry.directory}


EMPTY_TREE: Final = Tree(())


# --- the disk ------------------------------------------------------------------------------------

Item: TypeAlias = tuple[
    Literal["data", "entries"], int
]  # a file's pending data, or a directory's pending entries


@dataclass(frozen=True)
class Cut:
    """How much of one item's pending calls a crash keeps: the first ``calls`` whole, then, when
    ``torn`` is set, that many bytes of the next one (a write)."""

    calls: int
    torn: int | None = None


_EntryChange: TypeAlias = tuple[tuple[str, int | None], ...]  # names set (inode) or removed (None), at once


class Disk:
    """Calls replayed from an initial tree: what a reader sees now, what is durable, and what is
    pending. The initial tree is durable as a whole."""

    def __init__(self, initial: Tree = EMPTY_TREE) -> None:
        self.data: dict[int, bytearray] = {}
        self.entries: dict[int, dict[str, int]] = {ROOT: {}}
        by_path: dict[str, int] = {"": ROOT}
        for entry in initial.entries:
            parent_path, _, name = entry.path.rpartition("/")
            parent = by_path[parent_path]
            if entry.directory:
                self.entries[entry.inode] = {}
            elif entry.inode not in self.data:
                self.data[entry.inode] = bytearray(entry.data)
            self.entries[parent][name] = entry.inode
            by_path[entry.path] = entry.inode
        self.durable_data: dict[int, bytes] = {inode: bytes(data) for inode, data in self.data.items()}
        self.durable_entries: dict[int, dict[str, int]] = {
            inode: dict(names) for inode, names in self.entries.items()
        }
        self.pending_data: dict[int, list[Write | Truncate]] = {}
        self.pending_entries: dict[int, list[_EntryChange]] = {}
        self._next_inode = max([ROOT, *self.data, *self.entries]) + 1

    # --- looking ---

    def lookup(self, path: str) -> int | None:
        """The inode a relative path names now (``""`` is the root), or ``None``."""
        inode = ROOT
        for name in (part for part in path.split("/") if part):
            names = self.entries.get(inode)
            if names is None or name not in names:
                return None
            inode = names[name]
        return inode

    def is_directory(self, inode: int) -> bool:
        return inode in self.entries

    def size(self, inode: int) -> int:
        return len(self.data[inode])

    def new_inode(self) -> int:
        inode = self._next_inode
        self._next_inode += 1
        return inode

    def path_of(self, inode: int) -> str:
        """A current name of ``inode`` (the first in path order; ``.`` for the root), for reports."""
        if inode == ROOT:
            return "."
        for entry in self.current().entries:
            if entry.inode == inode:
                return entry.path
        return "an unnamed file" if inode in self.data else "an unnamed directory"

    # --- replaying ---

    def apply(self, op: Op) -> None:
        """One call's effect on what a reader sees, and on what is pending."""
        if isinstance(op, Create):
            if op.directory:
                self.entries[op.inode] = {}
                self.durable_entries[op.inode] = {}
            else:
                self.data[op.inode] = bytearray()
                self.durable_data[op.inode] = b""
            self._change(op.parent, ((op.name, op.inode),))
        elif isinstance(op, (Write, Truncate)):
            _apply_data(self.data[op.inode], op)
            self.pending_data.setdefault(op.inode, []).append(op)
        elif isinstance(op, Rename):
            inode = self.entries[op.src_parent][op.src_name]
            if op.src_parent == op.dst_parent:
                self._change(op.src_parent, ((op.src_name, None), (op.dst_name, inode)))
            else:
                self._change(op.src_parent, ((op.src_name, None),))
                self._change(op.dst_parent, ((op.dst_name, inode),))
        elif isinstance(op, Link):
            self._change(op.parent, ((op.name, op.inode),))
        elif isinstance(op, Unlink):
            self._change(op.parent, ((op.name, None),))
        elif isinstance(op, Sync):
            if op.inode in self.entries:
                self.durable_entries[op.inode] = dict(self.entries[op.inode])
                self.pending_entries.pop(op.inode, None)
            else:
                self.durable_data[op.inode] = bytes(self.data[op.inode])
                self.pending_data.pop(op.inode, None)
        elif isinstance(op, SyncAll):
            self.durable_data = {inode: bytes(data) for inode, data in self.data.items()}
            self.durable_entries = {inode: dict(names) for inode, names in self.entries.items()}
            self.pending_data.clear()
            self.pending_entries.clear()

    def _change(self, directory: int, change: _EntryChange) -> None:
        _apply_change(self.entries[directory], change)
        self.pending_entries.setdefault(directory, []).append(change)

    # --- crashing ---

    def unsynced(self) -> list[Item]:
        """Every item with pending calls, directories first, each group in inode order."""
        return [("entries", inode) for inode in sorted(self.pending_entries)] + [
            ("data", inode) for inode in sorted(self.pending_data)
        ]

    def full_cut(self, item: Item) -> Cut:
        kind, inode = item
        return Cut(
            len(self.pending_entries.get(inode, ()))
            if kind == "entries"
            else len(self.pending_data.get(inode, ()))
        )

    def cuts(self, item: Item, sample: Callable[[Write], Sequence[int]]) -> list[Cut]:
        """Every cut of ``item`` the weak model builds: each whole-call boundary, and for a pending
        write the byte cuts ``sample`` picks for it."""
        kind, inode = item
        if kind == "entries":
            return [Cut(calls) for calls in range(len(self.pending_entries.get(inode, ())) + 1)]
        found: list[Cut] = []
        for index, op in enumerate(self.pending_data.get(inode, ())):
            found.append(Cut(index))
            if isinstance(op, Write):
                found += [Cut(index, torn) for torn in sample(op)]
        return [*found, self.full_cut(item)]

    def crash(self, cuts: Mapping[Item, Cut], rest_full: bool) -> Tree:
        """What survives when each item in ``cuts`` keeps that much of its pending calls, and every
        other item keeps all of them (``rest_full``) or none."""
        names: dict[int, dict[str, int]] = {}
        for inode, durable in self.durable_entries.items():
            changes = self.pending_entries.get(inode, [])
            cut = cuts.get(("entries", inode), Cut(len(changes) if rest_full else 0))
            kept = dict(durable)
            for change in changes[: cut.calls]:
                _apply_change(kept, change)
            names[inode] = kept
        contents: dict[int, bytes] = {}
        for inode, durable_bytes in self.durable_data.items():
            ops = self.pending_data.get(inode, [])
            cut = cuts.get(("data", inode), Cut(len(ops) if rest_full else 0))
            content = bytearray(durable_bytes)
            for op in ops[: cut.calls]:
                _apply_data(content, op)
            if cut.torn is not None:
                torn = ops[cut.calls]
                assert isinstance(torn, Write)
                _apply_data(content, Write(torn.inode, torn.offset, torn.data[: cut.torn]))
            contents[inode] = bytes(content)
        return _walk(names, contents)

    def current(self) -> Tree:
        """What a reader sees now."""
        return _walk(self.entries, {inode: bytes(data) for inode, data in self.data.items()})


def _apply_data(content: bytearray, op: Write | Truncate) -> None:
    if isinstance(op, Truncate):
        del content[op.size :]
        content.extend(bytes(op.size - len(content)))
        return
    if op.offset > len(content):
        content.extend(bytes(op.offset - len(content)))
    content[op.offset : op.offset + len(op.data)] = op.data


def _apply_change(names: dict[str, int], change: _EntryChange) -> None:
    for name, inode in change:
        if inode is None:
            names.pop(name, None)
        else:
            names[name] = inode


def _walk(names: Mapping[int, Mapping[str, int]], contents: Mapping[int, bytes]) -> Tree:
    """The tree reachable from the root. A directory reachable twice (a rename whose two halves a
    crash split) is kept at its first path only: directories cannot be hard-linked."""
    entries: list[Entry] = []
    seen_directories = {ROOT}
    stack: list[tuple[str, int]] = [("", ROOT)]
    while stack:
        prefix, directory = stack.pop()
        for name, inode in sorted(names[directory].items(), reverse=True):
            path = f"{prefix}{name}"
            if inode in names:
                if inode in seen_directories:
                    continue
                seen_directories.add(inode)
                entries.append(Entry(path, True, b"", inode))
                stack.append((path + "/", inode))
            elif inode in contents:
                entries.append(Entry(path, False, contents[inode], inode))
    return Tree.of(entries)


__all__ = [
    "EMPTY_TREE",
    "ROOT",
    "Call",
    "Create",
    "Cut",
    "Disk",
    "Entry",
    "Inert",
    "Item",
    "Link",
    "Op",
    "Rename",
    "Sync",
    "SyncAll",
    "Tree",
    "Truncate",
    "Unlink",
    "Write",
]
