"""Two processes on one store (SPEC-DECISIONS D2: one writer per session, "same or another
process"; readers read while a writer holds it), for a stdio subject that stores in
``CONFORMANCE_STORE_ROOT``, as the kill check's does.

Process A takes session ``s`` (stored) and ``n`` (live, never flushed); a process B started on the
same store root reads ``s``, and its ``resume`` of ``s`` and ``create`` of ``n`` are refused as
``LOCKED``; both write sessions of their own at once; once A closes ``s``, B resumes it and A's
``resume`` of it is ``LOCKED`` in turn; once B closes it, A resumes it and sees what B wrote.
Every other answer is the spec model's, one model for the store both processes share: within one
process the protocol never shows a lock (a second writer there is ``SESSION_ALREADY_EXISTS``), so
this is where ``LOCKED`` is observed.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any, Final

from conformance import builders as build
from conformance.builders import START_TIME
from conformance.crash.kill import SubjectProcess
from conformance.driver import Mismatch, as_sent
from conformance.engine_model import model_request
from conformance.matching import short, why_not
from conformance.model import ModelStore
from conformance.targets import DEFAULT_TARGET, Target
from spec.codes import Code
from spec.log.events import USER_MESSAGE

A: Final = "A"
B: Final = "B"


@dataclass(frozen=True)
class Step:
    """One request of the check: the process that sends it, the op and its arguments, and the
    codes it must be refused with when another process holds the session (empty: the model's
    answer, applied to the model)."""

    process: str
    op: str
    args: dict[str, Any]
    refused: tuple[str, ...] = ()
    why: str = ""


def _say(session_id: str, text: str) -> dict[str, Any]:
    _, args = build.append_request(
        session_id, USER_MESSAGE, build.user_message(text, text), surfaceOp="append"
    )
    return as_sent(args)


HELD: Final = "A holds it"


def writer_steps(listing: bool, commit_fault: bool = False) -> list[Step]:
    """The check's requests in order (B's first request starts B, on the store A reset); with
    ``listing``, B lists the store while A writes; with ``commit_fault``, A's commit fails once and
    B is refused again."""
    return [
        Step(A, "reset", {"storage": "file"}),
        Step(A, "clock", {"now": START_TIME}),
        Step(A, "create", {"id": "s"}),
        Step(A, "append", _say("s", "u1")),
        Step(A, "flush", {"id": "s"}),
        Step(A, "create", {"id": "n"}),
        Step(A, "append", _say("n", "u2")),
        Step(B, "clock", {"now": START_TIME}),
        Step(B, "read", {"id": "s"}),
        *([Step(B, "list", {})] if listing else []),
        Step(B, "resume", {"id": "s"}, (Code.LOCKED,), f"s is stored and {HELD}"),
        # n was never flushed: a store that shows a new session early may call it existing.
        Step(B, "create", {"id": "n"}, (Code.LOCKED, Code.SESSION_ALREADY_EXISTS), f"n is live and {HELD}"),
        Step(B, "create", {"id": "s"}),
        Step(B, "create", {"id": "b"}),
        Step(A, "create", {"id": "a"}),
        Step(A, "append", _say("a", "ua")),
        Step(B, "append", _say("b", "ub")),
        Step(B, "flush", {"id": "b"}),
        Step(A, "flush", {"id": "a"}),
        Step(A, "append", _say("s", "u3")),
        Step(A, "flush", {"id": "s"}),
        Step(B, "read", {"id": "s"}),
        Step(B, "read", {"id": "a"}),
        Step(A, "read", {"id": "b"}),
        Step(A, "close", {"id": "s"}),
        Step(B, "resume", {"id": "s"}),
        Step(A, "resume", {"id": "s"}, (Code.LOCKED,), "B holds it now"),
        Step(B, "append", _say("s", "u4")),
        Step(B, "close", {"id": "s"}),
        Step(A, "resume", {"id": "s"}),
        *([Step(A, "list", {})] if listing else []),
        *(_commit_fault_steps() if commit_fault else []),
    ]


def _commit_fault_steps() -> list[Step]:
    """A writer whose commit failed (capability ``commit-fault``: a database's, whose connection
    may be lost with it) still holds its session once it is answering again."""
    return [
        Step(A, "fail_commit", {}),
        Step(A, "append", _say("s", "u5")),
        Step(A, "flush", {"id": "s"}),
        Step(A, "read", {"id": "s"}),
        Step(B, "resume", {"id": "s"}, (Code.LOCKED,), "A still holds it after its failed commit"),
        Step(A, "flush", {"id": "s"}),
        Step(B, "read", {"id": "s"}),
    ]


def run_writers_check(
    command: str,
    env: dict[str, str],
    listing: bool,
    target: Target = DEFAULT_TARGET,
    commit_fault: bool = False,
) -> tuple[str, ...]:
    """The steps of :func:`writer_steps` on two processes of ``command`` sharing ``env``'s store
    root (added to this process's environment): the problems found (empty: D2's one writer held),
    the first wrong answer ending the run."""
    argv = shlex.split(command)
    full_env = {**os.environ, **env}
    processes: dict[str, SubjectProcess] = {}
    model = ModelStore(storage="file")
    try:
        for number, step in enumerate(writer_steps(listing, commit_fault), 1):
            process = processes.get(step.process)
            if process is None:
                process = processes[step.process] = SubjectProcess(argv, full_env)
            answer = process.request(step.op, **step.args)
            ok = answer.get("ok") is True
            error = answer.get("error")
            code = str(error.get("code")) if isinstance(error, dict) else None
            where = f"step {number}, process {step.process}: {step.op} {short(step.args, 120)}"
            if step.refused:
                if ok or code not in step.refused:
                    got = f"success with {short(answer.get('result'), 200)}" if ok else code
                    return (f"{where} answered {got}; expected {' or '.join(step.refused)} ({step.why})",)
                continue
            model, expected = model_request(model, step.op, **step.args)
            result = answer.get("result")
            message = str(error.get("message")) if isinstance(error, dict) else None
            difference = why_not(expected.as_json(), ok, result, code, message, op=step.op, target=target)
            if difference is not None:
                return (f"{where}: {difference} (expected {expected.describe()[:300]})",)
    except Mismatch as error:
        return (f"{error}",)
    finally:
        for process in processes.values():
            process.stop()
    return ()
