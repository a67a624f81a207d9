"""The two ways into an implementation under test (conformance/PROTOCOL.md; SPEC-DECISIONS D10).

Both transports expose ``request(op, **args) -> Response`` and ``pipeline(requests) -> [Response]``,
which sends a run of requests without waiting for each answer, then reads every answer in order
(over stdio the lines go out in one write; in process they simply run in order):

- :class:`InProcessSubject` wraps a Python object with ``handle(request: dict) -> dict``. Requests
  and responses still travel as JSON text, so the subject shares nothing with the suite and sees
  exactly what a stdio subject would; each call runs on a worker thread so that a subject that
  hangs is timed out like a process.
- :class:`StdioSubject` runs a command and speaks one JSON request per line on its stdin, one JSON
  response per line on its stdout. Responses are matched by ``rid``: a line that is not JSON (a
  stray debug print) is skipped, and the report says once that logs belong on stderr; an answer
  to an earlier request is skipped too. A process that dies raises :class:`SubjectError` naming
  what happened and the tail of its stderr, and the next request starts it again.

A subject that does not answer within the timeout is *dead*: :class:`SubjectDead` is raised for
that request and, at once, for every later one, so a hung subject costs one timeout, not one per
case (the runner reports the cases after it as not run).

:func:`load_subject` builds an in-process subject from ``"package.module:factory"``.
"""

from __future__ import annotations

import importlib
import os
import queue
import shlex
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any, Final, Protocol

from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.json import JsonValue

DEFAULT_TIMEOUT: Final = 30.0  # seconds to wait for one response
STDERR_TAIL: Final = 64  # lines of the subject's stderr kept for reports
STRAY_LINES_KEPT: Final = 3  # non-protocol stdout lines quoted in the warning


class SubjectError(Exception):
    """The subject broke the protocol itself: it died, timed out or answered something that is
    not a response. Any case that meets one fails."""


class SubjectDead(SubjectError):
    """The subject stopped answering (a timeout); every later request is refused at once."""


@dataclass(frozen=True)
class Response:
    """One answer: ``ok`` with a ``result``, or an error ``code`` and ``message``."""

    ok: bool
    result: JsonValue = None
    error_code: str | None = None
    error_message: str | None = None


class Subject(Protocol):
    """What the suite drives."""

    def request(self, op: str, **args: JsonValue) -> Response: ...

    def pipeline(self, requests: Sequence[tuple[str, dict[str, JsonValue]]]) -> list[Response]: ...

    def close(self) -> None: ...


def encode_request(rid: int, op: str, args: dict[str, JsonValue]) -> str:
    """One request line's text (without the newline)."""
    if "rid" in args or "op" in args:
        raise ValueError("'rid' and 'op' are not op arguments")
    return encode_json_text({"rid": rid, "op": op, **args})


def decode_response(text: str, rid: int) -> Response:
    """Read one response line; anything but a well-formed response with the expected ``rid`` is a
    :class:`SubjectError`."""
    value = _parse(text)
    if not isinstance(value, dict):
        raise SubjectError(f"response is not a JSON object: {text[:200]!r}")
    if value.get("rid") != rid:
        raise SubjectError(f"response rid {value.get('rid')!r} does not answer request rid {rid}")
    return _response_of(value, text)


def _parse(text: str) -> JsonValue:
    try:
        return decode_json_text(text)
    except ValueError as problem:
        raise SubjectError(f"response is not JSON ({problem}): {text[:200]!r}") from None


def _response_of(value: dict[str, JsonValue], text: str) -> Response:
    ok = value.get("ok")
    if ok is True:
        return Response(ok=True, result=value.get("result"))
    error = value.get("error")
    if ok is not False or not isinstance(error, dict) or not isinstance(error.get("code"), str):
        raise SubjectError(f"malformed response: {text[:200]!r}")
    message = error.get("message")
    return Response(
        ok=False, error_code=str(error["code"]), error_message=message if isinstance(message, str) else None
    )


class _Expired(BaseException):
    """Raised into a subject's ``handle`` by the timer when its answer is late (a BaseException,
    so that a subject catching ``Exception`` does not swallow it)."""


def _expire(signum: int, frame: object) -> None:
    raise _Expired


class InProcessSubject:
    """A Python object with ``handle(request) -> response``, driven through JSON text, each call
    bounded by ``timeout``. On the main thread the call runs right there under a one-shot
    ``SIGALRM`` timer, which interrupts a late answer; elsewhere (signals reach only the main
    thread) it runs on a worker thread the caller waits for. Handing every request to a thread
    costs two thread switches, which on a loaded machine doubled the crash family's time."""

    def __init__(self, target: Any, timeout: float | None = None) -> None:
        if not callable(getattr(target, "handle", None)):
            raise TypeError(f"{target!r} has no handle(request) method")
        self.target = target
        self.timeout = timeout
        self._rid = 0
        self._dead: str | None = None

    def request(self, op: str, **args: JsonValue) -> Response:
        if self._dead is not None:
            raise SubjectDead(self._dead)
        self._rid += 1
        request = decode_json_text(encode_request(self._rid, op, args))
        text = self._call(op, request) if self.timeout is not None else self._handle(request)
        return decode_response(text, self._rid)

    def pipeline(self, requests: Sequence[tuple[str, dict[str, JsonValue]]]) -> list[Response]:
        """Every request in order, each bounded by the timeout (nothing to gain from not waiting)."""
        return [self.request(op, **args) for op, args in requests]

    @property
    def dead(self) -> str | None:
        """Why the subject is dead (it stopped answering), or ``None`` while it answers."""
        return self._dead

    def _handle(self, request: JsonValue) -> str:
        try:
            answer = self.target.handle(request)
            return encode_json_text(answer)
        except Exception as error:
            raise SubjectError(f"handle() raised {error!r}") from error

    def _declare_dead(self, op: str) -> SubjectDead:
        self._dead = f"the subject gave no answer to {op!r} within {self.timeout:g}s and is declared dead"
        return SubjectDead(self._dead)

    def _call(self, op: str, request: JsonValue) -> str:
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            return self._call_under_timer(op, request)
        return self._call_on_thread(op, request)

    def _call_under_timer(self, op: str, request: JsonValue) -> str:
        assert self.timeout is not None
        previous = signal.signal(signal.SIGALRM, _expire)
        try:
            signal.setitimer(signal.ITIMER_REAL, self.timeout)
            try:
                return self._handle(request)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except _Expired:
            raise self._declare_dead(op) from None
        finally:
            signal.signal(signal.SIGALRM, previous)

    def _call_on_thread(self, op: str, request: JsonValue) -> str:
        outcome: queue.Queue[tuple[str | None, BaseException | None]] = queue.Queue(maxsize=1)

        def work() -> None:
            try:
                outcome.put((self._handle(request), None))
            except BaseException as error:
                outcome.put((None, error))

        threading.Thread(target=work, daemon=True, name=f"subject-{op}").start()
        try:
            text, error = outcome.get(timeout=self.timeout)
        except queue.Empty:
            raise self._declare_dead(op) from None
        if error is not None:
            raise error
        assert text is not None
        return text

    def close(self) -> None:
        close = getattr(self.target, "close", None)
        if callable(close) and self._dead is None:
            close()

    def stderr_tail(self) -> str:
        return ""


class StdioSubject:
    """A subject process speaking the line protocol on stdin/stdout (``command`` is split like a
    shell would, then run without a shell)."""

    def __init__(
        self,
        command: str,
        timeout: float = DEFAULT_TIMEOUT,
        env: dict[str, str] | None = None,
        warn: Callable[[str], None] | None = None,
    ) -> None:
        self.command = command
        self.timeout = timeout
        self._argv = shlex.split(command)
        if not self._argv:
            raise ValueError("the subject command is empty")
        self._env = env
        self._process: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL)
        self._rid = 0
        self._dead: str | None = None
        self._warn = warn
        self.stray_lines: list[str] = []  # stdout lines that were not protocol responses

    def request(self, op: str, **args: JsonValue) -> Response:
        if self._dead is not None:
            raise SubjectDead(self._dead)
        return self.pipeline([(op, args)])[0]

    def pipeline(self, requests: Sequence[tuple[str, dict[str, JsonValue]]]) -> list[Response]:
        """The requests' lines in one write, then their answers in order (each within the
        timeout of the one before): a run of requests costs one round trip, not one each."""
        if self._dead is not None:
            raise SubjectDead(self._dead)
        if not requests:
            return []
        process = self._running()
        first = self._rid + 1
        lines = "".join(encode_request(first + n, op, args) + "\n" for n, (op, args) in enumerate(requests))
        self._rid += len(requests)
        try:
            assert process.stdin is not None
            process.stdin.write(lines)
            process.stdin.flush()
        except OSError as error:
            raise self._died(f"could not send {requests[0][0]!r}: {error}") from None
        return [self._answer(op, first + n) for n, (op, _) in enumerate(requests)]

    @property
    def dead(self) -> str | None:
        """Why the subject is dead (it stopped answering), or ``None`` while it answers."""
        return self._dead

    def _answer(self, op: str, expected: int) -> Response:
        """The next line that answers rid ``expected``, skipping stray output and late answers."""
        while True:
            try:
                text = self._lines.get(timeout=self.timeout)
            except queue.Empty:
                self._kill()
                self._dead = f"the subject gave no answer to {op!r} within {self.timeout:g}s and is declared dead{self._tail()}"
                raise SubjectDead(self._dead) from None
            if text is None:
                raise self._died(f"the subject exited while answering {op!r}")
            try:
                value = decode_json_text(text)
            except ValueError:
                self._stray(text)
                continue
            if not isinstance(value, dict) or "rid" not in value:
                self._stray(text)
                continue
            rid = value.get("rid")
            if isinstance(rid, int) and not isinstance(rid, bool) and rid < expected:
                continue  # the answer to an earlier request that had already failed
            if rid != expected:
                raise SubjectError(f"response rid {rid!r} does not answer request rid {expected}")
            return _response_of(value, text)

    def _stray(self, text: str) -> None:
        if not self.stray_lines and self._warn is not None:
            self._warn(
                f"the subject wrote a line that is not a protocol response to stdout ({text.strip()[:120]!r}); "
                "it was skipped. Write logs and debug output to stderr: stdout carries the protocol."
            )
        if len(self.stray_lines) < STRAY_LINES_KEPT:
            self.stray_lines.append(text.rstrip("\n"))

    def close(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        try:
            if process.stdin is not None:
                process.stdin.close()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()

    def stderr_tail(self) -> str:
        return "".join(self._stderr)

    def _running(self) -> subprocess.Popen[str]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._lines = queue.Queue()
        env = None if self._env is None else {**os.environ, **self._env}
        try:
            process = subprocess.Popen(
                self._argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="surrogateescape",
                bufsize=1,
                env=env,
            )
        except OSError as error:
            raise SubjectError(f"could not start {self.command!r}: {error}") from None
        self._process = process
        assert process.stdout is not None and process.stderr is not None
        threading.Thread(target=_pump_lines, args=(process.stdout, self._lines), daemon=True).start()
        threading.Thread(target=_pump_stderr, args=(process.stderr, self._stderr), daemon=True).start()
        return process

    def _died(self, what: str) -> SubjectError:
        process, self._process = self._process, None
        code = None
        if process is not None:
            try:
                code = process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
        return SubjectError(f"{what} (exit status {code}){self._tail()}")

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()

    def _tail(self) -> str:
        tail = self.stderr_tail().strip()
        return f"; stderr ends:\n{tail}" if tail else ""


def _pump_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _pump_stderr(stream: IO[str], tail: deque[str]) -> None:
    for line in stream:
        tail.append(line)


def load_subject(spec: str, timeout: float | None = None) -> InProcessSubject:
    """``"package.module:factory"``: import the module and call ``factory()`` (a class or a
    function) to get the object that handles requests."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"expected 'package.module:factory', got {spec!r}")
    module = importlib.import_module(module_name)
    factory = module
    for part in attribute.split("."):
        factory = getattr(factory, part)
    if not callable(factory):
        raise TypeError(f"{spec!r} is not callable")
    try:
        target = factory()
    except Exception as error:
        raise SubjectError(f"{spec}() raised {error!r}") from error
    return InProcessSubject(target, timeout=timeout)
