"""Crash injection: a storage workload cut short at every point a power loss can strike, each
reopened log checked against SPEC-DECISIONS D3, item by item (:mod:`conformance.crash_rules`).

For a subject with the ``crash-seam`` capability (storage on a simulated power-loss filesystem):

- **every boundary** — the workload runs once to count its mutating filesystem operations; then,
  for each of them, it runs again with ``arm_crash`` set to stop it there, and the power is cut
  keeping nothing unsynced, then keeping everything;
- **every byte** — wherever a cut leaves unsynced bytes, the power is cut again keeping each
  possible prefix of them (``crash keep {path, bytes}``), byte by byte;
- **faults** — the n-th ``fsync`` fails with EIO and the n-th write with ENOSPC (and EIO), for every
  n the workload reaches: the request that meets the fault must answer ``STORAGE_IO``, and after a
  power cut nothing flushed before it is lost.

- **damage** — the workload runs to the end, the power is cut, and ``damage`` flips a byte in the
  middle of the longest log: ``read`` and ``resume`` must answer ``CORRUPT_LOG``, and once the
  byte is flipped back the log must read as before (damage that is not a tail is never cut off).

After each cut every session is read back (D3 items 1-3; a torn tail is never corruption, item 5),
resumed (item 6: closers, then the end-seed rule), and the power cut once more, keeping nothing:
the log must now read exactly as the resume repaired it (item 4).

For a subject with storage but no seam, driven over stdio, :func:`run_kill_check` kills the
process (SIGKILL) at seeded random points while it appends and flushes, restarts it, resumes, and
checks that nothing flushed is lost and the log is a valid prefix.
"""

from __future__ import annotations

import os
import random
import select
import shlex
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from conformance import builders as build
from conformance import strategies as values
from conformance.crash_rules import (
    D3_ITEMS,
    check_d3_1_header,
    check_d3_2_prefix,
    check_d3_3_flushed_kept,
    check_d3_4_clean_reopen,
    check_d3_5_corruption_reported,
    check_d3_5_damage_undone,
    check_d3_5_no_false_corruption,
    check_d3_6_closers,
)
from conformance.driver import Driver, Mismatch, Unsupported, as_sent, describe_request, find_mismatch
from conformance.model import (
    DurableLog,
    ModelStore,
    canonical_text,
    model_adopt_durable,
    model_crash,
    model_request,
)
from conformance.report import CaseResult, Options
from conformance.subject import StdioSubject, Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.format.json_text import decode_json_text, encode_json_text
from spec.lineage.store import derive_resumed_log
from spec.log.events import ASSISTANT_MESSAGE, TOOL_CALL, TOOL_RESULT, TURN_START, USER_MESSAGE, Event
from spec.log.json import FrozenDict, JsonValue

START_TIME: Final = 1_000  # ms
CRASHED: Final = "CRASHED"
STORAGE_IO: Final = "STORAGE_IO"
FAULTS: Final = (("fsync", "EIO"), ("write", "ENOSPC"), ("write", "EIO"))
KILL_ROUNDS: Final = {"ci": 6, "thorough": 60}
DAMAGE_SPOTS: Final = ("middle", "start", "end")  # where in a log's second unit damage flips a byte
KILL_TEXT: Final = f"{values.NON_BMP}\u2028\ud800 "  # each kill round's messages start with edges

Request = tuple[str, dict[str, Any]]


def standard_workload() -> tuple[Request, ...]:
    """A session that is published, grows across several flushes and is left inside an open turn
    with an open step, a started call without its result and an open compaction; beside it, a
    session created from an empty seed (so its log ends with ``session/end-seed``), flushed."""
    w = "w"
    return (
        ("create", {"id": w, "meta": {"cwd": "/work/project"}}),
        ("append", {"id": w, "type": TURN_START, "data": build.turn_start(1)}),
        (
            "append",
            {
                "id": w,
                "type": USER_MESSAGE,
                "data": build.user_message(
                    "u1", f"read {values.NON_BMP}\u2028\u2029\x85 it", more=(values.IMAGE_BLOCK,)
                ),
                "surfaceOp": "append",
            },
        ),
        ("flush", {"id": w}),
        ("append", {"id": w, "type": "step/start", "data": build.step_start(1, 1)}),
        (
            "append",
            {
                "id": w,
                "type": ASSISTANT_MESSAGE,
                "data": build.assistant_message("a1", "reading", ("c1", "c2"), more=(values.UNKNOWN_BLOCK,)),
                "surfaceOp": "append",
            },
        ),
        ("append", {"id": w, "type": TOOL_CALL, "data": build.tool_call("c1")}),
        ("flush", {"id": w}),
        (
            "append",
            {
                "id": w,
                "type": TOOL_RESULT,
                "data": {
                    **build.tool_result(
                        "c1", "con\ud800tents", build.ABSENT_FLAG, 1.0, 1, (values.IMAGE_BLOCK,)
                    ),
                    "bounds": [values.SAFE_BOUND, -values.SAFE_BOUND, values.UNSAFE_INTEGER],
                },
                "surfaceOp": "append",
                "sourceEventSeqs": [4],
            },
        ),
        ("append", {"id": w, "type": TOOL_CALL, "data": build.tool_call("c2")}),
        ("engine_append", {"id": w, "type": "compaction/start", "data": build.compaction_start("k1", 1)}),
        ("flush", {"id": w}),
        ("create", {"id": "e", "seed": []}),
        ("flush", {"id": "e"}),
        (
            "append",
            {
                "id": w,
                "type": "assistant/chunk",
                "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
            },
        ),
        ("flush", {"id": w}),
    )


COMPACTION_TEXT: Final = "The earlier work read the parser and wrote down what each failing test showed. " * 7
COMPACTION_SUMMARY: Final = "The parser tests fail in the tokenizer."


def compaction_workload() -> tuple[Request, ...]:
    """Summary compaction cut short by power loss at every point: two closed turns and ``/compact``
    (its bracket, summary and checkpoint, then its flush), a third turn whose automatic
    compaction fails and closes its bracket with the error, and a manual compaction that fails
    between turns. Run under a batch policy that writes every append at once (``reset`` with
    ``batchMaxDelayMs`` 0), so that a cut falls between any two events of a bracket, and resume
    must close a bracket a crash left open (SPEC-DECISIONS D3 item 6)."""
    c = "c"

    def ask(turn: int, text: str = COMPACTION_TEXT) -> list[Request]:
        return [
            ("append", {"id": c, "type": TURN_START, "data": build.turn_start(turn)}),
            (
                "append",
                {
                    "id": c,
                    "type": USER_MESSAGE,
                    "data": build.user_message(f"u{turn}", text),
                    "surfaceOp": "append",
                },
            ),
        ]

    def answer(turn: int) -> list[Request]:
        return [
            ("append", {"id": c, "type": "step/start", "data": build.step_start(turn, 1)}),
            (
                "append",
                {
                    "id": c,
                    "type": ASSISTANT_MESSAGE,
                    "data": build.assistant_message(f"a{turn}", "done", (), turn),
                    "surfaceOp": "append",
                },
            ),
            ("append", {"id": c, "type": "step/end", "data": build.step_end(turn, 1)}),
            ("append", {"id": c, "type": "turn/end", "data": build.turn_end(turn)}),
        ]

    return (
        ("create", {"id": c}),
        *ask(1),
        *answer(1),
        *ask(2),
        *answer(2),
        ("compact", {"id": c, "attempt": {"compactionId": "k1", "text": COMPACTION_SUMMARY}}),
        *ask(3),
        (
            "compact_region",
            {"id": c, "start": 16, "end": 16, "attempt": {"compactionId": "k2", "fail": "down"}},
        ),
        *answer(3),
        ("compact", {"id": c, "attempt": {"compactionId": "k3", "timeout": 30}}),
        ("flush", {"id": c}),
    )


def _ends_of(size: int) -> Sequence[int]:
    """The byte cuts of the compaction workload: its first byte, its middle and all but its last,
    of each unsynced write (every byte of its events would be thousands of replays)."""
    return sorted({cut for cut in (1, size // 2, size - 1) if 0 < cut < size})


@dataclass(frozen=True)
class CrashCase:
    """One crash point and what was wrong after it (empty: every D3 item held)."""

    name: str
    problems: tuple[str, ...]


class _Enough(Exception):
    """A failure was found and the run asked to stop at the first one."""


@dataclass
class CrashOutcome:
    """Every crash point checked, and the ones that broke D3 (with ``fail_fast``, only the first)."""

    points: int = 0
    boundaries: int = 0
    byte_cuts: int = 0
    faults: int = 0
    damages: int = 0
    kills: int = 0
    failures: list[CrashCase] = field(default_factory=list)
    seconds: float = 0.0
    fail_fast: bool = False
    reached: Counter[str] = field(default_factory=Counter)  # per D3 item, the checks actually made
    not_reached: list[str] = field(default_factory=list)  # what could not be reached, and why


# The run's target and tallies, set by run_crash_checks for the checks it calls (one run at a time);
# and the workload's reset arguments beyond its storage (a batch policy: the compaction workload's).
_TARGET: ContextVar[Target] = ContextVar("crash_target", default=DEFAULT_TARGET)
_REACHED: ContextVar[Counter[str]] = ContextVar("crash_reached")
_RESET: ContextVar[Mapping[str, Any]] = ContextVar("crash_reset", default=MappingProxyType({}))
_BYTE_CUTS: ContextVar[Callable[[int], Sequence[int]]] = ContextVar(
    "crash_byte_cuts", default=lambda size: range(1, size)
)


def _reach(*items: str) -> None:
    """Count one check of each D3 item (so a summary can tell tested from never reached)."""
    reached = _REACHED.get(None)
    if reached is not None:
        reached.update(items)


# --- replaying a workload on the seam --------------------------------------------------------------


@dataclass
class _Run:
    """A workload driven up to where it stopped: the driver (its model holds what completed), the
    request that stopped it (``None``: it ran to the end) and that request's answer code."""

    driver: Driver
    stopped_at: int | None
    code: str | None
    in_flight: ModelStore | None  # the model as if the stopped request had completed


def _start(subject: Any, compressed: bool) -> Driver:
    driver = Driver(subject, target=_TARGET.get())
    driver.step("reset", storage="file", compressed=compressed, **_RESET.get())
    driver.step("clock", now=START_TIME)
    return driver


def _replay(driver: Driver, workload: Sequence[Request], stop_codes: Sequence[str]) -> _Run:
    """Drive ``workload``; the first request answering one of ``stop_codes`` ends the run (the
    model keeps only what completed). Any other disagreement with the model is a Mismatch."""
    for index, (op, sent) in enumerate(workload):
        args = as_sent(sent)
        model, expected = model_request(driver.model, op, **args)
        answer = driver.raw(op, **args)
        if not answer.ok and answer.error_code in stop_codes:
            return _Run(driver, index, answer.error_code, model)
        if not answer.ok and answer.error_code == "UNSUPPORTED_OP":
            raise Unsupported(op)
        if not answer.ok and answer.error_code == "UNSUPPORTED_OP":
            raise Unsupported(op)
        problem = find_mismatch(expected, answer, op, driver.target)
        if problem is not None:
            raise Mismatch(f"{describe_request(op, args)}\n  {problem}")
        driver.model = model
    return _Run(driver, None, None, None)


def count_mutations(subject: Any, workload: Sequence[Request], compressed: bool) -> int:
    """How many mutating filesystem operations the whole workload makes."""
    driver = _start(subject, compressed)
    before = driver.raw("ops")
    _replay(driver, workload, ())
    after = driver.raw("ops")
    if not (before.ok and after.ok and isinstance(before.result, int) and isinstance(after.result, int)):
        raise Mismatch(
            f"the ops counter answered {before.error_code or before.result} / {after.error_code or after.result}"
        )
    return int(after.result) - int(before.result)


def check_after_power_cut(run: _Run, keep: Any, retry_storage_io: bool = False) -> tuple[str, ...]:
    """Cut the power (``keep``), then read back, resume and re-crash every session, checking D3.
    With ``retry_storage_io``, a resume that meets a still-armed injected fault is tried once more
    (a fault fails one operation only)."""
    driver = run.driver
    before = driver.model
    in_flight = run.in_flight or before
    answer = driver.raw("crash", keep=keep)
    if not answer.ok:
        return (f"crash keep={canonical_text(keep)} answered error {answer.error_code}",)
    problems: list[str] = []
    model, _ = model_crash(before)
    ids = sorted(set(before.live) | set(before.stored) | set(in_flight.live))
    survivors: dict[str, tuple[Event, ...]] = {}
    for session_id in ids:
        found, events, found_problems = _read_back(driver, before, in_flight, session_id)
        problems += found_problems
        if found_problems:
            continue
        if found:
            header = _header_of(in_flight, session_id)
            assert header is not None  # found on storage, so the model knew the session
            survivors[session_id] = events
            model = model_adopt_durable(model, session_id, DurableLog(header, events))
        else:
            model = model_adopt_durable(model, session_id, None)
    driver.model = model
    appended_end_seed: dict[str, JsonValue] = {}
    for session_id, events in survivors.items():
        answer = driver.raw("resume", id=session_id)
        if retry_storage_io and not answer.ok and answer.error_code == STORAGE_IO:
            answer = driver.raw("resume", id=session_id)
        if not answer.ok:
            problems += check_d3_5_no_false_corruption(answer.error_code) or (
                f"D3.1: resume {session_id} after the crash answered {answer.error_code}",
            )
            continue
        resumed = answer.result.get("events", []) if isinstance(answer.result, dict) else []
        _reach("D3.6", "D3.1")
        problems += [f"{session_id}: {p}" for p in check_d3_6_closers(resumed, events, driver.model.now)]
        header = answer.result.get("header") if isinstance(answer.result, dict) else None
        expected_header = _header_of(in_flight, session_id)
        problems += [
            f"{session_id}: {p}"
            for p in check_d3_1_header(True, header, expected_header, True, driver.target)
        ]
        appended_end_seed[session_id] = (
            resumed[-1] if len(resumed) > len(derive_resumed_log(events)) else None
        )
    if not survivors or problems:
        return tuple(problems)
    answer = driver.raw("crash", keep="none")
    if not answer.ok:
        return (*problems, f"the second crash answered error {answer.error_code}")
    for session_id, events in survivors.items():
        answer = driver.raw("read", id=session_id)
        if not answer.ok:
            problems.append(
                f"{session_id}: D3.4: after resume and another crash, read answered {answer.error_code}"
            )
            continue
        seen = answer.result.get("events", []) if isinstance(answer.result, dict) else []
        _reach("D3.4")
        end_seed = appended_end_seed.get(session_id)
        problems += [
            f"{session_id}: {p}" for p in check_d3_4_clean_reopen(seen, derive_resumed_log(events), end_seed)
        ]
    return tuple(problems)


def _header_of(model: ModelStore, session_id: str) -> FrozenDict | None:
    entry = model.live.get(session_id)
    if entry is not None:
        return entry.state.header
    log = model.stored.get(session_id)
    return log.header if log is not None else None


def _read_back(
    driver: Driver, before: ModelStore, in_flight: ModelStore, session_id: str
) -> tuple[bool, tuple[Event, ...], list[str]]:
    """Read one session after a cut: D3 items 1-3 against what was appended (the in-flight request
    included) and what completed flushes made durable (before it)."""
    entry = in_flight.live.get(session_id)
    log = before.stored.get(session_id)
    appended: tuple[Event, ...] = (
        entry.state.events if entry is not None else log.events if log is not None else ()
    )
    flushed = len(log.events) if log is not None else 0
    answer = driver.raw("read", id=session_id)
    _reach("D3.5")
    if not answer.ok and answer.error_code != "SESSION_NOT_FOUND":
        return (
            False,
            (),
            [f"{session_id}: {p}" for p in check_d3_5_no_false_corruption(answer.error_code)]
            or [f"{session_id}: read after the crash answered {answer.error_code}"],
        )
    found = bool(answer.ok)
    result = answer.result if found and isinstance(answer.result, dict) else {}
    events = result.get("events") if isinstance(result.get("events"), list) else []
    assert isinstance(events, list)
    expected_header = _header_of(in_flight, session_id)
    problems = list(
        check_d3_1_header(found, result.get("header"), expected_header, log is not None, driver.target)
    )
    _reach("D3.1")
    if found:
        _reach("D3.2", "D3.3")
        problems += check_d3_2_prefix(events, appended) + check_d3_3_flushed_kept(events, flushed)
    return found, tuple(appended[: len(events)]), [f"{session_id}: {p}" for p in problems]


# --- the enumerations -------------------------------------------------------------------------------


def _unsynced(driver: Driver) -> list[tuple[str, int]]:
    answer = driver.raw("unsynced")
    files = answer.result if answer.ok and isinstance(answer.result, list) else []
    return [
        (str(entry["path"]), int(entry["bytes"]))
        for entry in files
        if isinstance(entry, dict) and int(entry.get("bytes", 0)) > 0
    ]


def _armed_run(subject: Any, workload: Sequence[Request], compressed: bool, after: int) -> _Run:
    driver = _start(subject, compressed)
    armed = driver.raw("arm_crash", after=after)
    if not armed.ok:
        raise Mismatch(f"arm_crash after={after} answered {armed.error_code}")
    return _replay(driver, workload, (CRASHED,))


def run_boundary_crashes(
    subject: Any,
    workload: Sequence[Request],
    compressed: bool,
    outcome: CrashOutcome,
    every_byte: bool = True,
) -> None:
    """A power cut at every mutating-op boundary of the workload (keeping nothing, then all that
    was written), and at every byte of whatever unsynced bytes that boundary leaves."""
    total = count_mutations(subject, workload, compressed)
    label = "zstd" if compressed else "plain"
    for after in range(total):
        probe = _armed_run(subject, workload, compressed, after)
        stopped = (
            "the end"
            if probe.stopped_at is None
            else f"request {probe.stopped_at} ({workload[probe.stopped_at][0]})"
        )
        pending = _unsynced(probe.driver)
        outcome.boundaries += 1
        for keep in ("none", "all"):
            run = probe if keep == "none" else _armed_run(subject, workload, compressed, after)
            _record(
                outcome,
                f"{label}: crash before mutating op {after + 1} of {total}, at {stopped}, keep {keep}",
                check_after_power_cut(run, keep),
            )
        if not every_byte:
            continue
        for position, (path, size) in enumerate(pending):
            for kept in _BYTE_CUTS.get()(size):
                run = _armed_run(subject, workload, compressed, after)
                files = _unsynced(run.driver)
                if position >= len(files):
                    _record(
                        outcome,
                        f"{label}: replay of op {after + 1}",
                        ("the unsynced files differ between identical replays",),
                    )
                    break
                outcome.byte_cuts += 1
                keep_cut = {"path": files[position][0], "bytes": kept}
                name = f"{label}: crash before mutating op {after + 1} of {total}, at {stopped}, keep {kept} of {size} unsynced bytes of {path}"
                _record(outcome, name, check_after_power_cut(run, keep_cut))


def run_fault_injection(
    subject: Any, workload: Sequence[Request], compressed: bool, outcome: CrashOutcome
) -> None:
    """The n-th fsync fails (EIO), the n-th write fails (ENOSPC, EIO), for every n up to the
    number of mutating operations the workload makes: the request that meets the fault must
    answer ``STORAGE_IO``, and after a power cut nothing flushed before it is lost. A run in which
    no request answered ``STORAGE_IO`` is cut too: had the fault been swallowed, a flush would
    have been acknowledged without being durable."""
    label = "zstd" if compressed else "plain"
    total = count_mutations(subject, workload, compressed)
    for fs_op, errno_name in FAULTS:
        for index in range(total):
            driver = _start(subject, compressed)
            armed = driver.raw("fail_next", fsOp=fs_op, errno=errno_name, after=index)
            name = f"{label}: {fs_op} number {index + 1} fails with {errno_name}"
            if not armed.ok:
                _record(outcome, name, (f"fail_next answered {armed.error_code}",))
                break
            outcome.faults += 1
            try:
                run = _replay(driver, workload, (STORAGE_IO,))
            except Mismatch as error:
                _record(
                    outcome, name, (f"the request that met the fault did not answer {STORAGE_IO}: {error}",)
                )
                continue
            if run.stopped_at is not None:
                name += f" during request {run.stopped_at} ({workload[run.stopped_at][0]})"
            run.in_flight = None  # a failed request completed nothing
            _record(outcome, name, check_after_power_cut(run, "none", retry_storage_io=True))


def run_damage_check(
    subject: Any, workload: Sequence[Request], compressed: bool, outcome: CrashOutcome, spot: str = "middle"
) -> None:
    """D3 item 5, the half a crash cannot test: the workload runs to the end, the power is cut,
    and ``damage`` flips a byte of the longest log's second unit (``spot``: its middle, its first
    byte, which breaks the JSON structure or the frame's magic, or its last, the newline or the
    checksum).
    Then ``read`` and ``resume`` must both answer ``CORRUPT_LOG``; a second ``damage`` at the same
    offset restores the byte, and the log must read exactly as before and resume with its closers
    (a subject that cut the damage off as if it were a torn tail would have lost the events after
    it)."""
    label = "zstd" if compressed else "plain"
    name = f"{label}: a byte flipped inside a durable log"
    driver = _start(subject, compressed)
    _replay(driver, workload, ())
    driver.crash("none")
    session_id = max(driver.model.stored, key=lambda key: len(driver.model.stored[key].events))
    before = driver.raw("read", id=session_id)
    if not before.ok:
        _record(outcome, name, (f"read {session_id} before the damage answered {before.error_code}",))
        return
    events = before.result.get("events", []) if isinstance(before.result, dict) else []
    damaged = driver.raw("damage", id=session_id, at=spot)
    offset = damaged.result.get("offset") if damaged.ok and isinstance(damaged.result, dict) else None
    if not isinstance(offset, int):
        _record(
            outcome,
            name,
            (f"damage {session_id} answered {damaged.error_code or canonical_text(damaged.result)[:200]}",),
        )
        return
    outcome.damages += 1
    _reach("D3.5")
    name += f" (byte {offset} of {session_id}, at {spot})"
    problems = [
        *check_d3_5_corruption_reported("read", _code(driver.raw("read", id=session_id))),
        *check_d3_5_corruption_reported("resume", _code(driver.raw("resume", id=session_id))),
    ]
    restored = driver.raw("damage", id=session_id, offset=offset)
    if not restored.ok:
        problems.append(
            f"D3.5: damage {session_id} at offset {offset}, undoing the first, answered {restored.error_code}: was the log cut back?"
        )
        _record(outcome, name, problems)
        return
    after = driver.raw("read", id=session_id)
    seen = after.result.get("events", []) if after.ok and isinstance(after.result, dict) else []
    if not after.ok:
        problems.append(f"D3.5: with the damaged byte restored, read answered {after.error_code}")
    else:
        problems += check_d3_5_damage_undone(seen, events)
    resumed = driver.raw("resume", id=session_id)
    if not resumed.ok:
        problems.append(f"D3.5: with the damaged byte restored, resume answered {resumed.error_code}")
    elif not problems:
        shown = resumed.result.get("events", []) if isinstance(resumed.result, dict) else []
        problems += check_d3_6_closers(shown, driver.model.stored[session_id].events, driver.model.now)
    _record(outcome, name, problems)


def _code(answer: Any) -> str | None:
    return None if answer.ok else str(answer.error_code)


def _record(outcome: CrashOutcome, name: str, problems: Sequence[str]) -> None:
    outcome.points += 1
    if problems:
        outcome.failures.append(CrashCase(name, tuple(problems)))
        if outcome.fail_fast:
            raise _Enough()


def crash_workloads(capabilities: Collection[str] = ()) -> tuple[tuple[str, tuple[Request, ...]], ...]:
    """The workloads the crash checks cut short, each enumerated on its own so that one a subject
    answers differently leaves the others to run: the standard workload, and a shorter one with a
    single session, no seed and no compaction (so a difference about seeded sessions, or a subject
    without ``engine_append``, does not hide the rest); for a subject with capability
    ``compaction``, the compaction workload too."""
    standard = standard_workload()
    single = tuple(
        request for request in standard if request[1].get("id") == "w" and request[0] != "engine_append"
    )
    workloads: list[tuple[str, tuple[Request, ...]]] = [("standard", standard), ("single session", single)]
    if "compaction" in capabilities:
        workloads.append(("compaction", compaction_workload()))
    return tuple(workloads)


# How each workload is run beyond its requests: the reset's batch policy, the byte cuts tried, and
# the formats (the compaction workload's points are about its brackets, not about the framing).
WORKLOAD_RESETS: Final[dict[str, dict[str, Any]]] = {"compaction": {"batchMaxDelayMs": 0}}
WORKLOAD_BYTE_CUTS: Final[dict[str, Callable[[int], Sequence[int]]]] = {"compaction": _ends_of}
WORKLOAD_FORMATS: Final[dict[str, tuple[bool, ...]]] = {"compaction": (False,)}


def run_crash_checks(
    subject: Any,
    every_byte: bool = True,
    compressions: Sequence[bool] = (True, False),
    fail_fast: bool = False,
    target: Target = DEFAULT_TARGET,
    capabilities: Collection[str] = (),
) -> CrashOutcome:
    """Every boundary, every byte and every fault of each crash workload, in each format
    (zstd-compressed and plain JSONL), and the damage check at three spots; with ``fail_fast``,
    up to the first failing point. A workload whose replay the subject answers differently from
    the model is reported, and its remaining points are not reached; the other workloads still run.
    ``capabilities`` adds the workloads of the engine capabilities the subject declares."""
    outcome = CrashOutcome(fail_fast=fail_fast)
    started = time.perf_counter()
    target_token, reached_token = _TARGET.set(target), _REACHED.set(outcome.reached)
    try:
        for compressed in compressions:
            label = "zstd" if compressed else "plain"
            for workload_name, workload in crash_workloads(capabilities):
                if compressed not in WORKLOAD_FORMATS.get(workload_name, (True, False)):
                    continue
                where = f"{label}, {workload_name} workload"
                reset = _RESET.set(WORKLOAD_RESETS.get(workload_name, {}))
                cuts = _BYTE_CUTS.set(WORKLOAD_BYTE_CUTS.get(workload_name, lambda size: range(1, size)))
                try:
                    for spot in DAMAGE_SPOTS if workload_name == "standard" else ():
                        run_damage_check(subject, workload, compressed, outcome, spot)
                    run_boundary_crashes(subject, workload, compressed, outcome, every_byte)
                    run_fault_injection(subject, workload, compressed, outcome)
                except Mismatch as error:
                    _record(outcome, f"{where}: replaying the workload", (str(error),))
                    outcome.not_reached.append(
                        f"{where}: the rest of its crash points (its replay disagreed)"
                    )
                except Unsupported as unsupported:
                    outcome.not_reached.append(f"{where}: its crash points (the subject lacks {unsupported})")
                finally:
                    _RESET.reset(reset)
                    _BYTE_CUTS.reset(cuts)
    except _Enough:
        outcome.not_reached.append("the points after the first failure (fail-fast)")
    finally:
        _TARGET.reset(target_token)
        _REACHED.reset(reached_token)
    outcome.seconds = time.perf_counter() - started
    return outcome


# --- killing a real process ---------------------------------------------------------------------------


class _Process:
    """A stdio subject process, driven request by request, that can be killed mid-request."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self.rid = 0

    def send(self, op: str, args: dict[str, Any]) -> None:
        self.rid += 1
        assert self.process.stdin is not None
        line = encode_json_text({"rid": self.rid, "op": op, **args}) + "\n"
        self.process.stdin.write(line.encode("utf-8"))
        self.process.stdin.flush()

    def receive(self, timeout: float = 30.0) -> dict[str, Any]:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
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
    command: str, env: dict[str, str] | None = None, rounds: int = 6, seed: int = 0
) -> CrashOutcome:
    """For each round: a fresh store, a seeded random run of appends and flushes, a SIGKILL while
    the k-th request is in flight (k random), a restart of the command, a resume. What the resume
    shows must keep every acknowledged flush (D3.3), be a prefix of what was appended (D3.2) and
    end with the repair closers and the end-seed rule (D3.6)."""
    outcome = CrashOutcome()
    outcome.not_reached += [
        "D3.4: a kill tears no file on disk, so no clean reopen of a torn tail is observed",
        "D3.5: a kill never damages the middle of a log",
    ]
    reached_token = _REACHED.set(outcome.reached)
    started = time.perf_counter()
    argv = shlex.split(command)
    full_env = {**os.environ, **(env or {})}
    generator = random.Random(seed)
    for round_index in range(rounds):
        outcome.points += 1
        outcome.kills += 1
        name = f"kill round {round_index + 1}"
        try:
            problems = _kill_round(argv, full_env, generator)
        except Mismatch as error:
            problems = (str(error),)
        if problems:
            outcome.failures.append(CrashCase(name, tuple(problems)))
    _REACHED.reset(reached_token)
    outcome.seconds = time.perf_counter() - started
    return outcome


def _kill_round(argv: Sequence[str], env: dict[str, str], generator: random.Random) -> tuple[str, ...]:
    model = ModelStore(storage="file")
    process = _Process(argv, env)
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
    restarted = _Process(argv, env)
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
    _reach("D3.1", "D3.2", "D3.3", "D3.6")
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
            plan.append(("append", {"id": "k", "type": TURN_START, "data": build.turn_start(turn)}))
        elif choice < 0.7:
            plan.append(
                (
                    "append",
                    {
                        "id": "k",
                        "type": USER_MESSAGE,
                        "data": build.user_message(f"u{seq}", KILL_TEXT + "x" * generator.randint(1, 4000)),
                        "surfaceOp": "append",
                    },
                )
            )
        else:
            data = build.assistant_message(f"a{seq}", "calling", (f"c{seq}",), max(turn, 1))
            plan.append(
                ("append", {"id": "k", "type": ASSISTANT_MESSAGE, "data": data, "surfaceOp": "append"})
            )
        seq += 1
    return [(op, as_sent(args)) for op, args in plan]


# --- the "crash" family ------------------------------------------------------------------------------

STORE_ROOT_ENV: Final = "CONFORMANCE_STORE_ROOT"
"""Set for every process :func:`run_kill_check` starts: a fresh directory the subject should keep its
file store in (``reset`` with ``storage: "file"`` empties it; a restart must find it again)."""
OTHER: Final = "replay"
FAIL_FAST: Final = "fail-fast"
"""``Options.extra[FAIL_FAST] == "1"``: stop at the first failing crash point (for mutation testing)."""


def summarise_crash_outcome(outcome: CrashOutcome, how: str) -> list[CaseResult]:
    """One case per D3 item: failed when a crash point broke it (with the first points that did),
    passed when it was checked and held (with how many times), *not run* when no crash point
    reached it (with why); and one case for disagreements that are not about D3 (a workload
    request answered unexpectedly). The case ids are the items', stable from run to run."""
    counts = f"{outcome.points} crash points"
    if outcome.boundaries or outcome.byte_cuts or outcome.faults or outcome.damages:
        counts += (
            f": {outcome.boundaries} op boundaries, {outcome.byte_cuts} byte cuts, {outcome.faults} injected faults, "
            f"{outcome.damages} damaged logs"
        )
    if outcome.kills:
        counts += f": {outcome.kills} SIGKILLs"
    by_item: dict[str, list[str]] = {item: [] for item in (*D3_ITEMS, OTHER)}
    for case in outcome.failures:
        for problem in case.problems:
            item = next((key for key in D3_ITEMS if key + ":" in problem), OTHER)
            by_item[item].append(f"{case.name}\n    {problem}")
    results: list[CaseResult] = []
    seconds = outcome.seconds / (len(D3_ITEMS) + 1)
    unreached = "\n".join(outcome.not_reached)
    for item, found in by_item.items():
        sentence = D3_ITEMS.get(item, "the workload answers as the spec model says up to each crash point")
        checked = outcome.reached[item] if item != OTHER else outcome.points
        name = f"{item}: {sentence} ({how}, {counts})" if item != OTHER else f"{sentence} ({how}, {counts})"
        case_id = item.lower().replace(".", "-") if item != OTHER else "replay"
        if found:
            shown = "\n".join(found[:8]) + (f"\n... and {len(found) - 8} more" if len(found) > 8 else "")
            results.append(CaseResult("crash", name, "failed", shown, seconds, item, case_id))
        elif checked == 0:
            reasons = [line for line in outcome.not_reached if line.startswith(item + ":")] or [
                unreached or "no crash point reached this check"
            ]
            results.append(CaseResult("crash", name, "not run", "\n".join(reasons), seconds, item, case_id))
        else:
            detail = f"checked {checked} times" + (f"; not reached: {unreached}" if unreached else "")
            results.append(CaseResult("crash", name, "passed", detail, seconds, item, case_id))
    return results


def check_crash(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: power cuts through the crash seam, or SIGKILLs of a stdio subject
    that stores without a seam; skipped for a subject with neither."""
    fail_fast = options.extra.get(FAIL_FAST) == "1"
    target = options.target or DEFAULT_TARGET
    if "crash-seam" in options.capabilities:
        outcome = run_crash_checks(
            subject, fail_fast=fail_fast, target=target, capabilities=options.capabilities
        )
        return summarise_crash_outcome(outcome, "power cuts through the crash seam")
    if "storage" in options.capabilities and isinstance(subject, StdioSubject):
        rounds = KILL_ROUNDS.get(options.profile, KILL_ROUNDS["ci"])
        with tempfile.TemporaryDirectory(prefix="conformance-kill-") as root:
            outcome = run_kill_check(subject.command, {STORE_ROOT_ENV: root}, rounds)
        return summarise_crash_outcome(outcome, "SIGKILL while appending and flushing")
    reason = "needs capability crash-seam, or capability storage over stdio"
    return [CaseResult("crash", "crash injection (SPEC-DECISIONS D3)", "unsupported", reason, case_id="all")]


__all__ = [
    "CrashCase",
    "CrashOutcome",
    "check_after_power_cut",
    "check_crash",
    "compaction_workload",
    "count_mutations",
    "run_boundary_crashes",
    "run_crash_checks",
    "run_damage_check",
    "run_fault_injection",
    "run_kill_check",
    "standard_workload",
    "summarise_crash_outcome",
]
