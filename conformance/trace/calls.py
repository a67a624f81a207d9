"""From strace's calls to the calls the persistence models replay: only what touches the store
root, resolved to inodes, and the moments the subject answered (conformance/CRASH-STATES.md,
"Tracing").

- **Which file.** A descriptor is followed from the ``open`` that returned it (``-yy`` prints the
  opened path; ``dup`` copies it; ``close`` ends it), so a write still reaches its file after a
  rename or an unlink. A descriptor never seen opening falls back to the path ``-yy`` printed.
- **Where a write lands.** ``pwrite`` says it; an ``O_APPEND`` write lands at the file's size;
  any other write at the descriptor's offset, which the tracer moves with writes, reads (their byte
  counts) and ``lseek``.
- **Answers.** Each response is one line the subject writes to its stdout pipe, known by the
  pipe's inode (``pipe:[N]``). A response counts from the *start* of the write that ends its line:
  a call that ended after that may not have covered it.
- **What is not modelled** (``fallocate``, ``copy_file_range``, symlinks, an exchanging rename, a
  write printed cut short, a write to a descriptor whose offset is unknown, ...) under the root
  is listed in :attr:`TraceLog.unmodelled`; the family then does not judge the subject, rather
  than judge it on a wrong model.

One process is assumed to do the store's I/O (any number of threads): descriptors are followed
by number.
"""

from __future__ import annotations

import bisect
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from conformance.trace.persistence import (
    Call,
    Create,
    Disk,
    Inert,
    Link,
    Op,
    Rename,
    Sync,
    SyncAll,
    Tree,
    Truncate,
    Unlink,
    Write,
)
from conformance.trace.strace import Syscall, decode_decoration, decode_fd, decode_iovec, decode_string

AT_FDCWD: Final = -100
OPENS: Final = frozenset({"open", "openat", "openat2", "creat"})
WRITES: Final = frozenset({"write", "writev", "pwrite64", "pwritev", "pwritev2"})
UNMODELLED: Final = frozenset(
    {"fallocate", "copy_file_range", "sendfile", "splice", "symlink", "symlinkat", "mknod", "mknodat"}
)


@dataclass(frozen=True)
class TraceLog:
    """The store calls in the order they ended, when each response was sent (``acks[k]``: how many
    calls had ended before response ``k``'s line was written), and the calls under the root no
    model covers."""

    calls: tuple[Call, ...]
    acks: tuple[int, ...]
    unmodelled: tuple[str, ...]


@dataclass
class _Descriptor:
    inode: int
    append: bool
    offset: int = 0


@dataclass
class _Translator:
    root: str
    cwd: str
    pipe: str
    disk: Disk
    calls: list[Call] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # the exit line of each call
    acks: list[int] = field(default_factory=list)
    unmodelled: list[str] = field(default_factory=list)
    fds: dict[int, _Descriptor] = field(default_factory=dict)

    # --- paths ---

    def relative(self, path: str | None) -> str | None:
        """``path`` relative to the root ("" for the root itself), or ``None`` outside it."""
        if path is None:
            return None
        path = posixpath.normpath(path)
        if path == self.root:
            return ""
        return path[len(self.root) + 1 :] if path.startswith(self.root + "/") else None

    def resolve(self, name: bytes | None, directory: str | None) -> str | None:
        """An absolute path from a path argument and the directory it is relative to."""
        if name is None:
            return None
        text = name.decode("utf-8", "surrogateescape")
        if text.startswith("/"):
            return posixpath.normpath(text)
        return posixpath.normpath(posixpath.join(directory or self.cwd, text))

    def at_path(self, dirfd_arg: str, name_arg: str) -> str | None:
        """The path an ``*at`` call names: relative to its directory descriptor's decoration."""
        directory = self.cwd if decode_fd(dirfd_arg) == AT_FDCWD else decode_decoration(dirfd_arg)
        return self.resolve(decode_string(name_arg), directory)

    def plain_path(self, name_arg: str) -> str | None:
        return self.resolve(decode_string(name_arg), self.cwd)

    def named_path(self, call: Syscall) -> str | None:
        """The one path a call names: (dirfd, name) for an ``*at`` call, else a plain name."""
        return (
            self.at_path(call.args[0], call.args[1])
            if call.name.endswith("at")
            else self.plain_path(call.args[0])
        )

    def named_paths(self, call: Syscall) -> tuple[str | None, str | None]:
        """The source and target paths of a rename or link call, or of its ``*at`` variants."""
        if call.name in ("rename", "link"):
            return self.plain_path(call.args[0]), self.plain_path(call.args[1])
        return self.at_path(call.args[0], call.args[1]), self.at_path(call.args[2], call.args[3])

    def fd_inode(self, fd_arg: str) -> int | None:
        """The inode under the root a descriptor refers to, or ``None``."""
        fd = decode_fd(fd_arg)
        if fd is not None and fd in self.fds:
            return self.fds[fd].inode
        rel = self.relative(decode_decoration(fd_arg))
        return None if rel is None else self.disk.lookup(rel)

    def shown(self, inode: int) -> str:
        path = self.disk.path_of(inode)
        return path + ("/" if self.disk.is_directory(inode) else "")

    # --- recording ---

    def emit(self, op: Op, text: str, call: Syscall) -> None:
        self.disk.apply(op)
        self.calls.append(Call(op, text, call.exit + 1))
        self.ends.append(call.exit)

    def refuse(self, call: Syscall, why: str) -> None:
        self.unmodelled.append(f"trace line {call.exit + 1}: {call.name}: {why}")

    def parent_of(self, rel: str, call: Syscall) -> tuple[int, str] | None:
        head, _, name = rel.rpartition("/")
        parent = self.disk.lookup(head)
        if parent is None or not self.disk.is_directory(parent) or not name:
            self.refuse(call, f"the directory of {rel!r} is not one the trace knows")
            return None
        return parent, name

    # --- the calls ---

    def handle(self, call: Syscall) -> None:
        if call.failed:
            return
        if call.name in UNMODELLED:
            self.on_unmodelled(call)
            return
        method = _HANDLERS.get(call.name)
        if method is not None:
            getattr(self, method)(call)

    def on_read(self, call: Syscall) -> None:
        descriptor = self.descriptor(call.args[0])
        if descriptor is not None and call.value is not None:
            descriptor.offset += call.value

    def on_lseek(self, call: Syscall) -> None:
        descriptor = self.descriptor(call.args[0])
        if descriptor is not None and call.value is not None:
            descriptor.offset = call.value

    def on_dup(self, call: Syscall) -> None:
        if call.value is None:
            return
        descriptor = self.descriptor(call.args[0])
        if descriptor is not None:
            self.fds[call.value] = descriptor  # one open file description: the offset is shared
        else:
            self.fds.pop(call.value, None)

    def on_close(self, call: Syscall) -> None:
        fd = decode_fd(call.args[0])
        if fd is not None and fd in self.fds:
            inode = self.fds.pop(fd).inode
            self.emit(Inert("close"), f"close({self.shown(inode)})", call)

    def on_truncate(self, call: Syscall) -> None:
        if call.name == "ftruncate":
            inode = self.fd_inode(call.args[0])
        else:
            inode = self.path_inode(self.plain_path(call.args[0]))
        if inode is not None:
            size = int(call.args[1], 0)
            self.emit(Truncate(inode, size), f"{call.name}({self.shown(inode)}, {size})", call)

    def on_remove(self, call: Syscall) -> None:
        rel = self.relative(self.named_path(call))
        if rel:
            self.on_unlink(rel, call.name, call)

    def on_mkdir(self, call: Syscall) -> None:
        rel = self.relative(self.named_path(call))
        place = self.parent_of(rel, call) if rel else None
        if place is not None:
            self.emit(
                Create(place[0], place[1], self.disk.new_inode(), directory=True),
                f"{call.name}({rel}/)",
                call,
            )

    def on_sync(self, call: Syscall) -> None:
        inode = self.fd_inode(call.args[0]) if call.args else None
        if call.name == "sync":
            self.emit(SyncAll(), "sync()", call)
        elif inode is None:
            return
        elif call.name == "syncfs":
            self.emit(SyncAll(), f"syncfs({self.shown(inode)})", call)
        elif call.name == "sync_file_range":
            self.emit(
                Inert(call.name), f"sync_file_range({self.shown(inode)}) (not a durability barrier)", call
            )
        else:
            self.emit(Sync(inode), f"{call.name}({self.shown(inode)})", call)

    def on_chdir(self, call: Syscall) -> None:
        if call.name == "chdir":
            self.cwd = self.plain_path(call.args[0]) or self.cwd
        else:
            self.cwd = decode_decoration(call.args[0]) or self.cwd

    def on_unmodelled(self, call: Syscall) -> None:
        touched = [arg for arg in call.args if self.relative(decode_decoration(arg)) is not None]
        touched += [
            arg
            for arg in call.args
            if arg.startswith('"') and self.relative(self.plain_path(arg)) is not None
        ]
        if touched:
            self.refuse(call, "this call is not in the persistence models")

    def descriptor(self, fd_arg: str) -> _Descriptor | None:
        fd = decode_fd(fd_arg)
        return self.fds.get(fd) if fd is not None else None

    def path_inode(self, path: str | None) -> int | None:
        rel = self.relative(path)
        return None if rel is None else self.disk.lookup(rel)

    def on_open(self, call: Syscall) -> None:
        fd = call.value
        if fd is None:
            return
        self.fds.pop(fd, None)
        rel = self.relative(call.returned_fd_path)
        if rel is None:
            return
        flags = _open_flags(call)
        inode = self.disk.lookup(rel)
        if inode is None:
            if "O_CREAT" not in flags:
                self.refuse(call, f"{rel!r} was opened but the trace never saw it made")
                return
            place = self.parent_of(rel, call)
            if place is None:
                return
            inode = self.disk.new_inode()
            self.emit(Create(place[0], place[1], inode), f"{call.name}({rel}, O_CREAT) (a new file)", call)
        elif "O_TRUNC" in flags and not self.disk.is_directory(inode) and self.disk.size(inode) > 0:
            self.emit(Truncate(inode, 0), f"{call.name}({rel}, O_TRUNC)", call)
        self.fds[fd] = _Descriptor(inode, append="O_APPEND" in flags)

    def on_write(self, call: Syscall) -> None:
        target = call.args[0]
        written = call.value or 0
        data = (
            decode_string(call.args[1]) if call.name in ("write", "pwrite64") else decode_iovec(call.args[1])
        )
        if decode_decoration(target) == self.pipe:
            if data is not None:
                done = bisect.bisect_left(self.ends, call.entry)
                self.acks.extend(done for _ in range(data[:written].count(b"\n")))
            return
        inode = self.fd_inode(target)
        if inode is None:
            return
        if data is None or len(data) < written:
            self.refuse(call, "the written bytes were not printed whole")
            return
        data = data[:written]
        fd = decode_fd(target)
        descriptor = self.fds.get(fd) if fd is not None else None
        if call.name in ("pwrite64", "pwritev") or (call.name == "pwritev2" and int(call.args[3], 0) >= 0):
            offset = int(call.args[3], 0)
        elif descriptor is None:
            self.refuse(call, f"a write to {self.shown(inode)} through a descriptor whose offset is unknown")
            return
        else:
            offset = self.disk.size(inode) if descriptor.append else descriptor.offset
            descriptor.offset = offset + written
        self.emit(
            Write(inode, offset, data), f"{call.name}({self.shown(inode)}, {written} bytes at {offset})", call
        )

    def on_rename(self, call: Syscall) -> None:
        source, target = self.named_paths(call)
        if call.name == "renameat2" and "RENAME_EXCHANGE" in call.args[4]:
            if self.relative(source) is not None or self.relative(target) is not None:
                self.refuse(call, "an exchanging rename is not in the persistence models")
            return
        src, dst = self.relative(source), self.relative(target)
        if src is None and dst is None:
            return
        if src is None:
            self.refuse(call, f"a rename into the store root ({dst!r}) from outside it")
            return
        if dst is None:
            self.on_unlink(src, call.name, call)
            return
        old, new = self.parent_of(src, call), self.parent_of(dst, call)
        if old is None or new is None:
            return
        if self.disk.lookup(src) is None:
            self.refuse(call, f"a rename of {src!r}, which the trace does not know")
            return
        self.emit(Rename(old[0], old[1], new[0], new[1]), f"{call.name}({src}, {dst})", call)

    def on_link(self, call: Syscall) -> None:
        source, target = self.named_paths(call)
        src, dst = self.relative(source), self.relative(target)
        if dst is None:
            return
        inode = self.disk.lookup(src) if src is not None else None
        if inode is None:
            self.refuse(call, f"a link to {dst!r} from a file the trace does not know")
            return
        place = self.parent_of(dst, call)
        if place is not None:
            self.emit(Link(inode, place[0], place[1]), f"{call.name}({src}, {dst})", call)

    def on_unlink(self, rel: str, name: str, call: Syscall) -> None:
        place = self.parent_of(rel, call)
        if place is not None:
            self.emit(Unlink(place[0], place[1]), f"{name}({rel})", call)


_HANDLERS: Final = {
    **dict.fromkeys(OPENS, "on_open"),
    **dict.fromkeys(WRITES, "on_write"),
    "read": "on_read",
    "readv": "on_read",
    "lseek": "on_lseek",
    "dup": "on_dup",
    "dup2": "on_dup",
    "dup3": "on_dup",
    "close": "on_close",
    "ftruncate": "on_truncate",
    "truncate": "on_truncate",
    "rename": "on_rename",
    "renameat": "on_rename",
    "renameat2": "on_rename",
    "link": "on_link",
    "linkat": "on_link",
    "unlink": "on_remove",
    "unlinkat": "on_remove",
    "rmdir": "on_remove",
    "mkdir": "on_mkdir",
    "mkdirat": "on_mkdir",
    "fsync": "on_sync",
    "fdatasync": "on_sync",
    "sync_file_range": "on_sync",
    "syncfs": "on_sync",
    "sync": "on_sync",
    "chdir": "on_chdir",
    "fchdir": "on_chdir",
}


def _open_flags(call: Syscall) -> frozenset[str]:
    if call.name == "creat":
        return frozenset({"O_CREAT", "O_WRONLY", "O_TRUNC"})
    position = {"open": 1, "openat": 2, "openat2": 2}[call.name]
    text = call.args[position] if len(call.args) > position else ""
    if call.name == "openat2":
        text = text.split("flags=", 1)[-1].split(",", 1)[0]
    return frozenset(part.strip() for part in text.split("|"))


def derive_trace_log(
    syscalls: Sequence[Syscall], root: str, cwd: str, response_pipe: int, initial: Tree
) -> TraceLog:
    """The store calls of a trace, resolved against ``initial`` (what was under ``root`` when the
    subject started), and the positions of the responses written to the pipe with inode
    ``response_pipe``. ``root`` and ``cwd`` are real paths (no symlinks), as ``-yy`` prints them."""
    translator = _Translator(posixpath.normpath(root), cwd, f"pipe:[{response_pipe}]", Disk(initial))
    for call in syscalls:
        translator.handle(call)
    return TraceLog(tuple(translator.calls), tuple(translator.acks), tuple(translator.unmodelled))


__all__ = ["TraceLog", "derive_trace_log"]
