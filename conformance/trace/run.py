"""Driving a stdio subject: once beneath strace (the traced workload), and once per crash state
on a materialized store root (the check), both with ``CONFORMANCE_STORE_ROOT`` set.

Requests go one at a time: the next is written only once the answer to the last has arrived, so
when a crash strikes, at most one request is in flight.
"""

from __future__ import annotations

import os
import select
import shlex
import stat
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from conformance.subject import Response, SubjectError, decode_response, encode_request
from conformance.trace.calls import TraceLog, derive_trace_log
from conformance.trace.persistence import Entry, Tree
from conformance.trace.strace import StraceProbe, read_trace, strace_options
from spec.protocol import STORE_ROOT_ENV, Request

EXIT_TIMEOUT: Final = 30.0  # seconds a subject may take to exit once its stdin is closed


class _Process:
    """A subject process spoken to line by line (its stderr goes to a file, kept for reports)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], timeout: float, stderr_path: str) -> None:
        self.timeout = timeout
        self.stderr_path = stderr_path
        try:
            with open(stderr_path, "wb") as stderr:  # the child keeps its own copy
                self.process = subprocess.Popen(
                    list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=dict(env)
                )
        except OSError as error:
            raise SubjectError(f"could not start {shlex.join(argv)!r}: {error}") from None
        self.rid = 0
        self._buffer = b""

    @property
    def stdout_inode(self) -> int:
        assert self.process.stdout is not None
        return os.fstat(self.process.stdout.fileno()).st_ino

    def request(self, op: str, args: Mapping[str, Any]) -> Response:
        self.rid += 1
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((encode_request(self.rid, op, dict(args)) + "\n").encode("utf-8"))
            self.process.stdin.flush()
        except OSError as error:
            raise SubjectError(f"could not send {op!r}: {error}{self.stderr_tail()}") from None
        return decode_response(self._line(op), self.rid)

    def _line(self, op: str) -> str:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], self.timeout)
            if not ready:
                self.process.kill()
                raise SubjectError(f"no response to {op!r} within {self.timeout:g}s{self.stderr_tail()}")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise SubjectError(f"the subject exited while answering {op!r}{self.stderr_tail()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "surrogateescape")

    def finish(self) -> None:
        """Close stdin and wait for the exit (killed after :data:`EXIT_TIMEOUT`)."""
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def stderr_tail(self) -> str:
        try:
            tail = (
                Path(self.stderr_path)
                .read_text(encoding="utf-8", errors="replace")
                .strip()
                .splitlines()[-12:]
            )
        except OSError:
            return ""
        return ("; stderr ends:\n" + "\n".join(tail)) if tail else ""


@dataclass(frozen=True)
class TracedRun:
    """A workload run beneath strace: the answers (as many as were given) and the trace."""

    answers: tuple[Response, ...]
    log: TraceLog
    problem: str | None  # the subject broke the protocol; the answers stop there


def run_traced(
    probe: StraceProbe, command: str, root: str, initial: Tree, requests: Sequence[Request], timeout: float
) -> TracedRun:
    """Run ``command`` beneath strace with its store in ``root`` (holding ``initial``), send the
    requests one by one, close stdin, and read the trace."""
    assert probe.path is not None
    argv = shlex.split(command)
    cwd = os.path.realpath(os.getcwd())
    with tempfile.TemporaryDirectory(prefix="conformance-strace-") as scratch:
        trace_file = os.path.join(scratch, "trace.txt")
        strace = [probe.path, *strace_options(trace_file, probe.seccomp), "--", *argv]
        env = {**os.environ, STORE_ROOT_ENV: root}
        answers: list[Response] = []
        try:
            process = _Process(strace, env, timeout, os.path.join(scratch, "stderr.txt"))
        except SubjectError as error:
            return TracedRun((), TraceLog((), (), ()), str(error))
        problem = None
        pipe = process.stdout_inode
        try:
            for op, args in requests:
                answers.append(process.request(op, args))
        except SubjectError as error:
            problem = str(error)
        finally:
            process.finish()
        try:
            syscalls = read_trace(trace_file)
        except OSError as error:
            return TracedRun(
                tuple(answers),
                TraceLog((), (), ()),
                problem or f"strace wrote no trace ({error}){process.stderr_tail()}",
            )
        log = derive_trace_log(syscalls, os.path.realpath(root), cwd, pipe, initial)
    return TracedRun(tuple(answers), log, problem)


@dataclass(frozen=True)
class CheckAnswers:
    """What a fresh subject answered on one materialized crash state: per session, ``read``, then
    (when found) ``resume`` and ``read`` again; and the files it left when it exited."""

    reads: Mapping[str, Response]
    resumes: Mapping[str, Response]
    rereads: Mapping[str, Response]
    after: Tree | None
    problem: str | None


def run_check(
    command: str, root: str, session_ids: Sequence[str], now: int, timeout: float, scratch: str
) -> CheckAnswers:
    """Start ``command`` on ``root`` (no strace), set its clock, read every session, resume and
    re-read those it found; then close its stdin."""
    env = {**os.environ, STORE_ROOT_ENV: root}
    reads: dict[str, Response] = {}
    resumes: dict[str, Response] = {}
    rereads: dict[str, Response] = {}
    problem = None
    try:
        process = _Process(shlex.split(command), env, timeout, os.path.join(scratch, "stderr.txt"))
    except SubjectError as error:
        return CheckAnswers(reads, resumes, rereads, None, str(error))
    try:
        process.request("clock", {"now": now})
        for session_id in session_ids:
            reads[session_id] = process.request("read", {"id": session_id})
        for session_id in session_ids:
            if reads[session_id].ok:
                resumes[session_id] = process.request("resume", {"id": session_id})
                if resumes[session_id].ok:
                    rereads[session_id] = process.request("read", {"id": session_id})
    except SubjectError as error:
        problem = str(error)
    finally:
        process.finish()
    return CheckAnswers(reads, resumes, rereads, scan_tree(root), problem)


# --- trees on a real directory -------------------------------------------------------------------


def materialize(tree: Tree, root: str) -> None:
    """Write ``tree`` below the existing, empty directory ``root``: directories (mode 0o700),
    files (0o600) and hard links, parents first."""
    first_path: dict[int, str] = {}
    for entry in tree.entries:
        path = os.path.join(root, entry.path)
        if entry.directory:
            os.mkdir(path, 0o700)
        elif entry.inode in first_path:
            os.link(first_path[entry.inode], path)
        else:
            first_path[entry.inode] = path
            with open(path, "xb") as file:
                file.write(entry.data)
            os.chmod(path, 0o600)


def scan_tree(root: str) -> Tree:
    """What is below ``root`` now, as a tree (hard links share an inode; symlinks are left out)."""
    entries: list[Entry] = []
    inodes: dict[tuple[int, int], int] = {}
    for directory, subdirectories, files in os.walk(root):
        for name in sorted(subdirectories) + sorted(files):
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                continue
            inode = inodes.setdefault((info.st_dev, info.st_ino), len(inodes) + 1)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            if stat.S_ISDIR(info.st_mode):
                entries.append(Entry(relative, True, b"", inode))
            elif stat.S_ISREG(info.st_mode):
                entries.append(Entry(relative, False, Path(path).read_bytes(), inode))
    return Tree.of(entries)


__all__ = [
    "STORE_ROOT_ENV",
    "CheckAnswers",
    "TracedRun",
    "materialize",
    "run_check",
    "run_traced",
    "scan_tree",
]
