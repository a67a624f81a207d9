"""Crash injection without a seam: a stdio subject that stores on a real directory, killed with
SIGKILL at seeded random points while it appends and flushes, restarted and resumed."""

from __future__ import annotations

import os
import random
import select
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from typing import Any, Final

from conformance import builders as build
from conformance import strategies as values
from conformance.builders import START_TIME
from conformance.crash.outcome import CRASH_REACHED, CrashCase, CrashOutcome, mark_reached
from conformance.crash_rules import (
    check_d3_1_header,
    check_d3_2_prefix,
    check_d3_3_flushed_kept,
    check_d3_5_no_false_corruption,
    check_d3_6_closers,
)
from conformance.driver import Mismatch, as_sent
from conformance.engine_model import model_request
from conformance.model import ModelStore, canonical_text
from conformance.report import check_deadline
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.events import ASSISTANT_MESSAGE, TURN_START, USER_MESSAGE, Event
from spec.log.json import JsonValue
from spec.protocol import Request

KILL_ROUNDS: Final = {"ci": 6, "thorough": 60}
KILL_SEED: Final = 0  # every run kills at the same points (the timing inside a request aside)
KILL_TEXT: Final = f"{values.NON_BMP}\u2028\ud800 "  # each kill round's messages start with edges


class SubjectProcess:
    """A stdio subject process, driven request by request, that can be killed mid-request."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], timeout: float = 30.0) -> None:
        self.process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.rid = 0
        self.timeout = timeout  # seconds an answer may take

    def send(self, op: str, args: dict[str, Any]) -> None:
        self.rid += 1
        assert self.process.stdin is not None
        line = encode_json_text({"rid": self.rid, "op": op, **args}) + "\n"
        self.process.stdin.write(line.encode("utf-8"))
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], self.timeout)
        if not ready:
            raise Mismatch("the subject did not answer within the timeout")
        line = self.process.stdout.readline()
        if not line:
            raise Mismatch("the subject exited while answering")
        value = decode_json_text(line)
        if not isinstance(value, dict):
            raise Mismatch(f"the subject answered a non-object: {line[:200]!r}")
        return value

    def request(self, op: str, **args: Any) -> dict[str, Any]:
        self.send(op, args)
        return self.receive()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def run_kill_check(
    command: str, env: dict[str, str] | None = None, rounds: int = 6, seed: int = KILL_SEED
) -> CrashOutcome:
    """For each round: a fresh store, a seeded random run of appends and flushes, a SIGKILL while
    the k-th request is in flight (k random), a restart of the command, a resume. What the resume
    shows must keep every acknowledged flush (D3.3), be a prefix of what was appended (D3.2) and
    end with the repair closers and the end-seed rule (D3.6). The run's deadline is checked
    between rounds (:func:`conformance.report.check_deadline`)."""
    outcome = CrashOutcome()
    outcome.not_reached += [
        "D3.4: a kill tears no file on disk, so no clean reopen of a torn tail is observed",
        "D3.5: a kill never damages the middle of a log",
    ]
    reached_token = CRASH_REACHED.set(outcome.reached)
    started = time.perf_counter()
    argv = shlex.split(command)
    full_env = {**os.environ, **(env or {})}
    generator = random.Random(seed)
    try:
        for round_index in range(rounds):
            check_deadline()  # between rounds: a cut run reports the family as not run
            outcome.points += 1
            outcome.kills += 1
            name = f"kill round {round_index + 1}"
            try:
                problems = _kill_round(argv, full_env, generator)
            except Mismatch as error:
                problems = (str(error),)
            if problems:
                outcome.failures.append(CrashCase(name, tuple(problems)))
    finally:
        CRASH_REACHED.reset(reached_token)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _kill_round(argv: Sequence[str], env: dict[str, str], generator: random.Random) -> tuple[str, ...]:
    model = ModelStore(storage="file")
    process = SubjectProcess(argv, env)
    try:
        for op, args in (
            ("reset", {"storage": "file"}),
            ("clock", {"now": START_TIME}),
            ("create", {"id": "k"}),
        ):
            answer = process.request(op, **args)
            if answer.get("ok") is not True:
                return (f"{op} answered {canonical_text(answer.get('error'))}",)
            model, _ = model_request(model, op, **args)
        plan = _kill_plan(generator)
        kill_at = generator.randrange(len(plan))
        for index, (op, args) in enumerate(plan):
            if index == kill_at:
                process.send(op, args)
                in_flight, _ = model_request(model, op, **args)
                time.sleep(generator.random() * 0.004)
                process.kill()
                break
            answer = process.request(op, **args)
            model, expected = model_request(model, op, **args)
            if answer.get("ok") is not expected.ok:
                return (f"{op} answered {canonical_text(answer)[:200]}, expected {expected.describe()}",)
        else:
            in_flight = model
            process.kill()
    finally:
        process.stop()
    entry = in_flight.live.get("k")
    appended = entry.state.events if entry is not None else ()
    log = model.stored.get("k")
    flushed = len(log.events) if log is not None else 0
    restarted = SubjectProcess(argv, env)
    try:
        restarted.request("clock", now=model.now)
        answer = restarted.request("resume", id="k")
    finally:
        restarted.stop()
    if answer.get("ok") is not True:
        error = answer.get("error")
        code = str(error.get("code")) if isinstance(error, dict) else None
        if code == "SESSION_NOT_FOUND":
            return check_d3_1_header(False, None, None, log is not None)
        return check_d3_5_no_false_corruption(code) or (f"resume after the kill answered {code}",)
    result = answer.get("result")
    events = result.get("events", []) if isinstance(result, dict) else []
    mark_reached("D3.1", "D3.2", "D3.3", "D3.6")
    survived = _surviving_prefix(events, appended)
    problems = check_d3_3_flushed_kept(survived, flushed)
    problems += check_d3_2_prefix(survived, appended)
    problems += check_d3_6_closers(events, tuple(appended[: len(survived)]), model.now)
    return problems


def _surviving_prefix(events: Sequence[JsonValue], appended: Sequence[Event]) -> list[JsonValue]:
    """The resumed events that match what was appended, position by position."""
    survived: list[JsonValue] = []
    for seen, made in zip(events, appended):
        if canonical_text(seen) != canonical_text(made):
            break
        survived.append(seen)
    return survived


def _kill_plan(generator: random.Random) -> list[Request]:
    """A random run of appends (some turns, some calls) and flushes on session ``k``."""
    plan: list[Request] = []
    seq = 0
    turn = 0
    for _ in range(generator.randint(4, 24)):
        choice = generator.random()
        if choice < 0.3:
            plan.append(("flush", {"id": "k"}))
            continue
        if choice < 0.45:
            turn += 1
            plan.append(build.append_request("k", TURN_START, build.turn_start(turn)))
        elif choice < 0.7:
            data = build.user_message(f"u{seq}", KILL_TEXT + "x" * generator.randint(1, 4000))
            plan.append(build.append_request("k", USER_MESSAGE, data, surfaceOp="append"))
        else:
            data = build.assistant_message(f"a{seq}", "calling", (f"c{seq}",), max(turn, 1))
            plan.append(build.append_request("k", ASSISTANT_MESSAGE, data, surfaceOp="append"))
        seq += 1
    return [(op, as_sent(args)) for op, args in plan]
