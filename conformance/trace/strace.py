"""Running a subject beneath ``strace`` and reading what it wrote down.

The options are chosen so that the output parses without guessing (conformance/CRASH-STATES.md,
"Tracing"):

- ``-f``: follow every thread and child, one output file, lines in the order strace saw the events;
- ``-yy``: every file descriptor is printed with what it is (``3</root/a/b>``, ``1<pipe:[4711]>``);
- ``-xx``: every string and path is printed as ``\\xHH`` escapes, so written bytes are exact and no
  quote, comma or bracket inside data can confuse the reader;
- ``-s`` large: written data is printed whole (a cut string, marked ``...``, is refused);
- ``-e raw=read,readv``: a read shows only its byte count (it moves a descriptor's offset, and its
  data is not needed);
- ``-qq -e signal=none``: no attach, exit or signal lines;
- ``--seccomp-bpf`` when it works: the subject stops only at the traced calls.

A call another thread interrupts is printed in two lines (``<unfinished ...>``, then
``<... name resumed>``); :func:`parse_strace` joins them and keeps both line numbers, since a
call's effect is known at its exit while a response was sent from its entry on.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

TRACED_CALLS: Final = (
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "write",
    "writev",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readv",
    "lseek",
    "ftruncate",
    "truncate",
    "fallocate",
    "rename",
    "renameat",
    "renameat2",
    "link",
    "linkat",
    "symlink",
    "symlinkat",
    "unlink",
    "unlinkat",
    "rmdir",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "fsync",
    "fdatasync",
    "sync_file_range",
    "syncfs",
    "sync",
    "copy_file_range",
    "sendfile",
    "splice",
    "chdir",
    "fchdir",
    "dup",
    "dup2",
    "dup3",
)
"""Every call the trace records. The ones :mod:`conformance.trace.calls` does not model (a
``fallocate`` or a ``copy_file_range`` under the store root, say) stop the family with a reason."""

STRING_LIMIT: Final = (
    1 << 22
)  # bytes: the longest write printed whole (-s; strace keeps 4 output bytes per byte)
PROBE_TIMEOUT: Final = 30.0  # seconds


@dataclass(frozen=True)
class Syscall:
    """One completed call: who made it, its name, its arguments as printed (one string each), its
    return value, and the output lines where it started (``entry``) and ended (``exit``)."""

    pid: int
    name: str
    args: tuple[str, ...]
    result: str  # as printed after "= ": "3</a/b>", "0", "-1 ENOENT (No such file or directory)", "?"
    entry: int
    exit: int

    @property
    def failed(self) -> bool:
        """The call returned an error, or strace could not tell what it returned."""
        return self.result.startswith("-") or self.result.startswith("?")

    @property
    def value(self) -> int | None:
        """The return value as a number (``None`` when it failed or is not a number)."""
        match = _NUMBER.match(self.result)
        if match is None or self.failed:
            return None
        return int(match.group(0), 0)

    @property
    def returned_fd_path(self) -> str | None:
        """For an ``open``: the path of the descriptor it returned (from ``-yy``)."""
        return decode_decoration(self.result)


class TraceUnreadable(Exception):
    """A line of strace's output that this reader cannot take apart; the message says which."""


_LINE: Final = re.compile(r"^(\d+)\s+(.*)$")
_RESUMED: Final = re.compile(r"^<\.\.\. ([A-Za-z0-9_]+) resumed>(.*)$")
_CALL: Final = re.compile(r"^([A-Za-z0-9_]+)\((.*)$")
_NUMBER: Final = re.compile(r"-?(0x[0-9a-fA-F]+|\d+)")
_UNFINISHED: Final = " <unfinished ...>"
_HEX: Final = re.compile(r"(?:\\x[0-9a-fA-F]{2})+")


def parse_strace(lines: Iterable[str]) -> list[Syscall]:
    """Every call in ``strace -f`` output, in the order the calls ended. Lines that are not calls
    (an exit or signal notice) are skipped; a call strace never saw end is left out."""
    calls: list[tuple[int, Syscall]] = []
    pending: dict[int, tuple[str, str, int]] = {}  # pid -> (name, text so far, entry line)
    for number, raw in enumerate(lines):
        match = _LINE.match(raw.rstrip("\n"))
        if match is None:
            continue
        pid, rest = int(match.group(1)), match.group(2)
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            started = pending.pop(pid, None)
            if started is None or started[0] != resumed.group(1):
                continue  # resumed without a start we saw (strace was attached mid-call)
            name, text, entry = started
            text += resumed.group(2)
        else:
            call = _CALL.match(rest)
            if call is None:
                continue  # "+++ exited +++", "--- SIGCHLD ---", "<... resumed>" of another kind
            name, text, entry = call.group(1), call.group(2), number
        if text.endswith(_UNFINISHED):
            pending[pid] = (name, text[: -len(_UNFINISHED)], entry)
            continue
        args, result = split_call_text(text, number)
        calls.append((number, Syscall(pid, name, args, result, entry, number)))
    return [call for _, call in calls]


def split_call_text(text: str, line: int) -> tuple[tuple[str, ...], str]:
    """``"a, b, [c, d]) = 3<...>"`` into ``("a", "b", "[c, d]")`` and ``"3<...>"``: arguments
    end at the first ``)`` outside brackets, strings and fd decorations."""
    args: list[str] = []
    depth = 0
    start = 0
    index = 0
    while index < len(text):
        char = text[index]
        if char == '"':
            index = text.index('"', index + 1) + 1  # -xx: no quote inside a string
            continue
        if char == "<":
            index = _decoration_end(text, index, line)
            continue
        if char in "[{(":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == ")":
            if depth == 0:
                if text[start:index].strip():
                    args.append(text[start:index].strip())
                tail = text[index + 1 :].strip()
                if not tail.startswith("="):
                    raise TraceUnreadable(f"trace line {line + 1}: no return value after the arguments")
                return tuple(args), tail[1:].strip()
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:index].strip())
            start = index + 1
        index += 1
    raise TraceUnreadable(f"trace line {line + 1}: the arguments never close")


def _decoration_end(text: str, start: int, line: int) -> int:
    """The index just past the ``>`` closing the decoration that opens at ``start`` (a socket's
    ``<UNIX-STREAM:[1->2]>`` holds a ``>`` inside brackets)."""
    depth = 0
    for index in range(start + 1, len(text)):
        char = text[index]
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == ">" and depth <= 0:
            return index + 1
    raise TraceUnreadable(f"trace line {line + 1}: an fd decoration never closes")


def decode_string(arg: str) -> bytes | None:
    """The bytes of a ``-xx`` string argument (``"\\x61\\x62"``), or ``None`` when the argument is
    not a whole string (a pointer, or a string strace cut short with ``...``)."""
    if len(arg) < 2 or not arg.startswith('"') or not arg.endswith('"'):
        return None
    return decode_hex_text(arg[1:-1])


def decode_hex_text(text: str) -> bytes:
    """``\\xHH`` escapes (with ``-xx`` every byte is one) and any plain characters, as bytes."""
    parts: list[bytes] = []
    position = 0
    for match in _HEX.finditer(text):
        parts.append(text[position : match.start()].encode("utf-8", "surrogateescape"))
        parts.append(bytes.fromhex(match.group(0).replace("\\x", "")))
        position = match.end()
    parts.append(text[position:].encode("utf-8", "surrogateescape"))
    return b"".join(parts)


def decode_decoration(arg: str) -> str | None:
    """What ``-yy`` printed for a descriptor (``3</root/a>`` -> ``/root/a``; ``1<pipe:[7]>`` ->
    ``pipe:[7]``), or ``None`` without a decoration."""
    start = arg.find("<")
    if start < 0 or not arg.endswith(">"):
        return None
    return decode_hex_text(arg[start + 1 : -1]).decode("utf-8", "surrogateescape")


def decode_fd(arg: str) -> int | None:
    """The descriptor number in front of its decoration (``AT_FDCWD`` is -100)."""
    head = arg.split("<", 1)[0].strip()
    if head == "AT_FDCWD":
        return -100
    match = _NUMBER.fullmatch(head)
    return int(head, 0) if match else None


def decode_iovec(arg: str) -> bytes | None:
    """The bytes of a ``writev`` vector ``[{iov_base="…", iov_len=3}, …]``, joined in order; ``None``
    when any part is not printed whole."""
    if not arg.startswith("["):
        return None
    pieces: list[bytes] = []
    for match in re.finditer(r'iov_base=("[^"]*"(?:\.\.\.)?|[^,}]+)', arg):
        data = decode_string(match.group(1))
        if data is None:
            return None
        pieces.append(data)
    return b"".join(pieces)


# --- running strace ----------------------------------------------------------------------------------


def strace_options(trace_file: str, seccomp: bool) -> list[str]:
    """strace's own arguments (before ``--`` and the subject's command)."""
    calls = ",".join(f"?{name}" for name in TRACED_CALLS)  # "?": a name this architecture lacks is fine
    options = [
        "-f",
        "-qq",
        "-yy",
        "-xx",
        "-s",
        str(STRING_LIMIT),
        "-e",
        "signal=none",
        "-e",
        "raw=read,readv",
    ]
    options += ["-e", f"trace={calls}", "-o", trace_file]
    return (["--seccomp-bpf"] if seccomp else []) + options


@dataclass(frozen=True)
class StraceProbe:
    """Whether strace can trace here: its path and whether ``--seccomp-bpf`` works, or why not."""

    path: str | None
    seccomp: bool
    problem: str | None


def probe_strace(search_path: str | None = None) -> StraceProbe:
    """Find ``strace`` on the PATH and run ``strace -f true`` once: a container that denies ptrace
    fails here, with strace's own message."""
    path = shutil.which("strace", path=search_path)
    if path is None:
        return StraceProbe(
            None, False, "strace is not installed (on Debian or Ubuntu: apt-get install strace)"
        )
    for seccomp in (True, False):
        argv = [path, *(["--seccomp-bpf"] if seccomp else []), "-f", "-qq", "-o", "/dev/null", "--", "true"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PROBE_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return StraceProbe(path, False, f"could not run strace: {error}")
        if done.returncode == 0:
            return StraceProbe(path, seccomp, None)
    message = (done.stderr or done.stdout).strip().splitlines()
    why = message[-1] if message else f"exit status {done.returncode}"
    return StraceProbe(
        path, False, f"strace cannot trace here ({why}); ptrace may be denied in this container"
    )


def read_trace(path: str) -> list[Syscall]:
    with open(path, encoding="utf-8", errors="surrogateescape") as file:
        return parse_strace(file)


__all__: Sequence[str] = [
    "STRING_LIMIT",
    "TRACED_CALLS",
    "StraceProbe",
    "Syscall",
    "TraceUnreadable",
    "decode_decoration",
    "decode_fd",
    "decode_hex_text",
    "decode_iovec",
    "decode_string",
    "parse_strace",
    "probe_strace",
    "read_trace",
    "split_call_text",
    "strace_options",
]
