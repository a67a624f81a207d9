"""The crash points of a workload on the crash seam: every mutating-op boundary, every byte of what
it leaves unsynced, every injected fault and the damage check, each reopened log checked against
SPEC-DECISIONS D3 (see :mod:`conformance.crash`)."""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from conformance.builders import START_TIME, append_request, close_turn, turn_start
from conformance.crash.outcome import (
    CRASH_BYTE_CUTS,
    CRASH_REACHED,
    CRASH_RESET,
    CRASH_TARGET,
    CrashOutcome,
    EnoughPoints,
    answer_code,
    mark_reached,
    record_outcome,
)
from conformance.crash.workloads import (
    WORKLOAD_BYTE_CUTS,
    WORKLOAD_FORMATS,
    WORKLOAD_RESETS,
    crash_workloads,
)
from conformance.crash_rules import (
    check_d3_1_header,
    check_d3_2_prefix,
    check_d3_3_flushed_kept,
    check_d3_4_clean_reopen,
    check_d3_5_corruption_reported,
    check_d3_5_damage_undone,
    check_d3_5_no_false_corruption,
    check_d3_6_closers,
    header_of,
)
from conformance.driver import Driver, Mismatch, Unsupported, as_sent, describe_request, find_mismatch
from conformance.engine_model import model_request
from conformance.files.reader import FilesError, decode_files
from conformance.model import DurableLog, ModelStore, canonical_text, model_adopt_durable, model_crash
from conformance.targets import DEFAULT_TARGET, Target
from spec.format.naming import LOG_NAMES
from spec.lineage.store import derive_resumed_log
from spec.log.events import TURN_START, Event
from spec.log.json import JsonValue
from spec.protocol import BAD_REQUEST, CRASHED, DAMAGE_SPOTS, UNSUPPORTED_OP, Request

STORAGE_IO: Final = "STORAGE_IO"
FAULTS: Final = (("fsync", "EIO"), ("write", "ENOSPC"), ("write", "EIO"))
# How many mutating operations the power-out check's run makes at least: past the small integers
# a host language may keep a single object of (CPython: up to 256).
LONG_RUN_OPS: Final = 300
# The workloads the damage check runs on: the standard one, or, where a subject cannot replay it
# (no engine_append), the single-session one, so D3 item 5 is still reached.
DAMAGE_WORKLOADS: Final = ("standard", "single session")

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
    driver = Driver(subject, target=CRASH_TARGET.get())
    driver.step("reset", storage="file", compressed=compressed, **CRASH_RESET.get())
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
        if not answer.ok and answer.error_code == UNSUPPORTED_OP:
            raise Unsupported(op)
        problem = find_mismatch(expected, answer, op, driver.target)
        if problem is not None:
            raise Mismatch(f"{describe_request(op, args)}\n  {problem}")
        driver.model = model
    return _Run(driver, None, None, None)


def count_mutations(subject: Any, workload: Sequence[Request], compressed: bool) -> int:
    """How many mutating filesystem operations the whole workload makes."""
    return _counted(subject, workload, compressed)[1]


def _counted(subject: Any, workload: Sequence[Request], compressed: bool) -> tuple[int, int]:
    """What ``ops`` answers right after ``reset``, and how many mutating operations the whole
    workload makes."""
    driver = _start(subject, compressed)
    before = _ops(driver)
    _replay(driver, workload, ())
    return before, _ops(driver) - before


def _ops(driver: Driver) -> int:
    """What ``ops`` answers (a Mismatch when it is not an integer)."""
    answer = driver.raw("ops")
    if not (answer.ok and isinstance(answer.result, int) and not isinstance(answer.result, bool)):
        raise Mismatch(f"the ops counter answered {answer.error_code or canonical_text(answer.result)}")
    return int(answer.result)


def durable_steps(model: ModelStore, workload: Sequence[Request]) -> int:
    """The fewest writes of file bytes, and the fewest fsyncs of a file, any store on the crash seam
    makes while it runs ``workload`` from ``model``: the most requests that make one session's log
    durable further (published or grown, by the model). Each such step makes events durable that
    were appended after that log's previous step, so it needs a write made after that step, and an
    fsync after the write (a file's bytes are durable only once fsynced)."""
    steps: dict[str, int] = {}
    for op, sent in workload:
        after, _ = model_request(model, op, **as_sent(sent))
        for session_id, log in after.stored.items():
            if model.stored.get(session_id) != log:
                steps[session_id] = steps.get(session_id, 0) + 1
        model = after
    return max(steps.values(), default=0)


def check_after_power_cut(
    run: _Run, keep: Any, retry_storage_io: bool = False, survived: dict[str, Any] | None = None
) -> tuple[str, ...]:
    """Cut the power (``keep``), then read back, resume and re-crash every session, checking D3.
    With ``retry_storage_io``, a resume that meets a still-armed injected fault is tried once more
    (a fault fails one operation only). ``survived``, when given, receives under ``keep`` the files
    ``export`` shows right after the cut (``None``: no export)."""
    driver = run.driver
    answer = driver.raw("crash", keep=keep)
    if not answer.ok:
        return (f"crash keep={canonical_text(keep)} answered error {answer.error_code}",)
    if survived is not None:
        survived[str(keep)] = exported_files(driver)
    in_flight = run.in_flight or driver.model
    survivors, problems = _adopt_survivors(driver, in_flight)
    end_seeds, resume_problems = _resume_survivors(driver, in_flight, survivors, retry_storage_io)
    problems += resume_problems
    if not survivors or problems:
        return tuple(problems)
    return tuple(problems + _check_clean_reopen(driver, survivors, end_seeds))


def _adopt_survivors(driver: Driver, in_flight: ModelStore) -> tuple[dict[str, tuple[Event, ...]], list[str]]:
    """Every session read back after the cut (D3 items 1-3), and what survived adopted by the
    model: the survivors' logs, and what was wrong."""
    before = driver.model
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
            header = header_of(in_flight, session_id)
            assert header is not None  # found on storage, so the model knew the session
            survivors[session_id] = events
            model = model_adopt_durable(model, session_id, DurableLog(header, events))
        else:
            model = model_adopt_durable(model, session_id, None)
    driver.model = model
    return survivors, problems


def _resume_survivors(
    driver: Driver, in_flight: ModelStore, survivors: Mapping[str, tuple[Event, ...]], retry: bool
) -> tuple[dict[str, JsonValue], list[str]]:
    """Every survivor resumed (D3 items 6 and 1): the end-seed each resume appended (``None``:
    none), and what was wrong."""
    problems: list[str] = []
    appended_end_seed: dict[str, JsonValue] = {}
    for session_id, events in survivors.items():
        answer = driver.raw("resume", id=session_id)
        if retry and not answer.ok and answer.error_code == STORAGE_IO:
            answer = driver.raw("resume", id=session_id)
        if not answer.ok:
            problems += check_d3_5_no_false_corruption(answer.error_code) or (
                f"D3.1: resume {session_id} after the crash answered {answer.error_code}",
            )
            continue
        resumed = answer.result.get("events", []) if isinstance(answer.result, dict) else []
        mark_reached("D3.6", "D3.1")
        problems += [f"{session_id}: {p}" for p in check_d3_6_closers(resumed, events, driver.model.now)]
        header = answer.result.get("header") if isinstance(answer.result, dict) else None
        expected_header = header_of(in_flight, session_id)
        problems += [
            f"{session_id}: {p}"
            for p in check_d3_1_header(True, header, expected_header, True, driver.target)
        ]
        appended_end_seed[session_id] = (
            resumed[-1] if len(resumed) > len(derive_resumed_log(events)) else None
        )
    return appended_end_seed, problems


def _check_clean_reopen(
    driver: Driver, survivors: Mapping[str, tuple[Event, ...]], end_seeds: Mapping[str, JsonValue]
) -> list[str]:
    """D3 item 4: after the resumes, another cut keeping nothing must leave each log exactly as its
    resume repaired it."""
    answer = driver.raw("crash", keep="none")
    if not answer.ok:
        return [f"the second crash answered error {answer.error_code}"]
    problems: list[str] = []
    for session_id, events in survivors.items():
        answer = driver.raw("read", id=session_id)
        if not answer.ok:
            problems.append(
                f"{session_id}: D3.4: after resume and another crash, read answered {answer.error_code}"
            )
            continue
        seen = answer.result.get("events", []) if isinstance(answer.result, dict) else []
        mark_reached("D3.4")
        problems += [
            f"{session_id}: {p}"
            for p in check_d3_4_clean_reopen(seen, derive_resumed_log(events), end_seeds.get(session_id))
        ]
    return problems


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
    mark_reached("D3.5")
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
    expected_header = header_of(in_flight, session_id)
    problems = list(
        check_d3_1_header(found, result.get("header"), expected_header, log is not None, driver.target)
    )
    mark_reached("D3.1")
    if found:
        mark_reached("D3.2", "D3.3")
        problems += check_d3_2_prefix(events, appended) + check_d3_3_flushed_kept(events, flushed)
    return found, tuple(appended[: len(events)]), [f"{session_id}: {p}" for p in problems]


# --- the enumerations -------------------------------------------------------------------------------


def _unsynced(driver: Driver, listed: list[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
    """The files ``unsynced`` shows with unsynced bytes; ``listed``, when given, receives every
    entry it answered, those showing none included."""
    answer = driver.raw("unsynced")
    files = answer.result if answer.ok and isinstance(answer.result, list) else []
    entries = [(str(entry["path"]), int(entry.get("bytes", 0))) for entry in files if isinstance(entry, dict)]
    if listed is not None:
        listed += entries
    return [(path, size) for path, size in entries if size > 0]


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
    was written), and at every byte of whatever unsynced bytes that boundary leaves. The seam
    itself is held to the protocol too (:func:`check_seam_boundaries`)."""
    origin, total = _counted(subject, workload, compressed)
    label = "zstd" if compressed else "plain"
    unfired: list[int] = []
    stops: dict[int, int | None] = {}
    listed: list[tuple[str, int]] = []
    bounds_checked = False
    for after in range(total):
        probe = _armed_run(subject, workload, compressed, after)
        stops[after] = probe.stopped_at
        stopped = (
            "the end"
            if probe.stopped_at is None
            else f"request {probe.stopped_at} ({workload[probe.stopped_at][0]})"
        )
        if probe.stopped_at is None:
            unfired.append(after)
        pending = _unsynced(probe.driver, listed)
        outcome.boundaries += 1
        survived: dict[str, Any] = {}
        replayed = pending  # what the keep-all run's unsynced names (a temporary file's name may differ)
        for keep in ("none", "all"):
            run = probe if keep == "none" else _armed_run(subject, workload, compressed, after)
            if keep == "all" and pending:
                replayed = _unsynced(run.driver)
            record_outcome(
                outcome,
                f"{label}: crash before mutating op {after + 1} of {total}, at {stopped}, keep {keep}",
                check_after_power_cut(run, keep, survived=survived if pending else None),
            )
        if pending:
            record_outcome(
                outcome,
                f"{label}: crash before mutating op {after + 1} of {total}: what keep none and keep all kept",
                check_crash_keeps(pending, survived.get("none"), survived.get("all"), replayed),
            )
        if pending and not bounds_checked:
            bounds_checked = True
            record_outcome(
                outcome,
                f"{label}: crash before mutating op {after + 1} of {total}: the bounds of a byte cut",
                check_cut_bounds(
                    _armed_run(subject, workload, compressed, after), 0, pending[0][1], survived.get("none")
                ),
            )
        if not every_byte:
            continue
        for position, (path, size) in enumerate(pending):
            for kept in CRASH_BYTE_CUTS.get()(size):
                run = _armed_run(subject, workload, compressed, after)
                files = _unsynced(run.driver)
                if position >= len(files):
                    record_outcome(
                        outcome,
                        f"{label}: replay of op {after + 1}",
                        ("the unsynced files differ between identical replays",),
                    )
                    break
                outcome.byte_cuts += 1
                keep_cut = {"path": files[position][0], "bytes": kept}
                name = f"{label}: crash before mutating op {after + 1} of {total}, at {stopped}, keep {kept} of {size} unsynced bytes of {path}"
                cut: dict[str, Any] = {}
                problems = check_after_power_cut(run, keep_cut, survived=cut)
                record_outcome(
                    outcome,
                    name,
                    problems
                    or check_byte_cut(path, kept, survived.get("none"), next(iter(cut.values()), None)),
                )
    record_outcome(
        outcome,
        f"{label}: the seam's armed crashes and unsynced bytes",
        check_seam_boundaries(total, unfired, listed, origin),
    )
    record_outcome(
        outcome,
        f"{label}: a crash armed midway",
        check_armed_midway(subject, workload, compressed, stops),
    )


def check_crash_keeps(
    pending: Sequence[tuple[str, int]],
    none: Mapping[str, bytes] | None,
    every: Mapping[str, bytes] | None,
    replayed: Sequence[tuple[str, int]] | None = None,
) -> tuple[str, ...]:
    """The crash seam keeps what ``crash`` was asked to (PROTOCOL.md, "Crash ops"): at one point,
    each file ``unsynced`` showed with ``pending`` bytes holds at least that many more bytes after
    a cut that keeps ``"all"`` (``every``) than after one that keeps ``"none"`` (``none``; a file
    gone counts as empty), as ``export`` shows them; a file gone after both (a temporary file the
    restarted store removed) shows nothing. A seam that kept the same whatever the plan would make
    the point's two cuts one outcome checked twice. ``replayed``: what ``unsynced`` showed in the
    run cut keeping all, replayed to the same point, file for file in the same order (a temporary
    file's name may differ from replay to replay); by default the names of ``pending``. Without
    ``export`` nothing is checked."""
    if none is None or every is None:
        return ()
    replayed = pending if replayed is None else replayed
    if [size for _, size in replayed] != [size for _, size in pending]:
        return (
            f"the unsynced files differ between identical replays: {list(pending)[:3]} and {list(replayed)[:3]}",
        )
    problems: list[str] = []
    for (name, size), (again, _) in zip(pending, replayed, strict=True):
        kept_none = next((len(none[path]) for path in none if _names(name, path)), 0)
        kept_all = next((len(every[path]) for path in every if _names(again, path)), None)
        if kept_all is None and not any(_names(name, path) for path in none):
            continue  # gone after either cut (a temporary file the restarted store removed)
        if (kept_all or 0) - kept_none < size:
            problems.append(
                f"{name}: keep all left {kept_all or 0} bytes and keep none {kept_none}, though {size} were unsynced"
            )
    return tuple(problems)


def _names(name: str, path: str) -> bool:
    """Whether ``unsynced``'s ``name`` (a path on the subject's disk) is ``export``'s ``path``
    (relative to the store's root)."""
    return name == path or name.endswith(f"/{path}")


def check_byte_cut(
    name: str, kept: int, none: Mapping[str, bytes] | None, cut: Mapping[str, bytes] | None
) -> tuple[str, ...]:
    """A power cut that keeps ``kept`` of the unsynced bytes of the file ``unsynced`` calls
    ``name`` leaves that file exactly ``kept`` bytes longer than a cut that keeps none (PROTOCOL.md,
    "Crash ops"), as ``export`` shows them right after each cut. A file neither cut left (a name
    that was not durable yet) shows nothing; without ``export`` nothing is checked."""
    if none is None or cut is None:
        return ()
    for path in (*cut, *none):
        if name == path or name.endswith(f"/{path}"):
            before, after = len(none.get(path, b"")), len(cut.get(path, b""))
            if after != before + kept:
                return (f"{name}: keeping {kept} unsynced bytes left {after} bytes, keeping none {before}",)
            return ()
    return ()


def check_seam_boundaries(
    total: int, unfired: Sequence[int], listed: Sequence[tuple[str, int]], origin: int = 0
) -> tuple[str, ...]:
    """The crash seam (PROTOCOL.md, "Crash ops") over one workload of ``total`` mutating
    operations (``ops``) that makes sessions durable: ``arm_crash`` with ``after`` below ``total``
    stops the request that meets that operation with ``CRASHED`` (``unfired``: the values of
    ``after`` whose replay ran to the end), and some boundary shows unsynced bytes (before the
    fsync that follows a write of file bytes, they are written and not durable). A seam that
    crashed nowhere, or never reported unsynced bytes, would leave every power cut and every byte
    cut of the workload checking nothing. ``listed``: every entry ``unsynced`` answered at the
    boundaries, each of which must show at least one byte (a file with none is not listed);
    ``origin``: what ``ops`` answered right after ``reset``, which counts nothing yet (0)."""
    problems: list[str] = []
    unsynced_seen = any(size > 0 for _, size in listed)
    empty = sorted({path for path, size in listed if size < 1})
    if empty:
        problems.append(
            f"unsynced listed {empty[:3]} with no unsynced bytes; it lists only files that have some"
        )
    if origin != 0:
        problems.append(f"ops answered {origin} right after reset, though nothing was done since")
    if unfired:
        problems.append(
            f"arm_crash after {list(unfired[:5])}{' …' if len(unfired) > 5 else ''} stopped no request with "
            f"{CRASHED}, though the workload makes {total} mutating operations (ops)"
        )
    if total and not unsynced_seen:
        problems.append(
            f"unsynced showed no unsynced bytes before any of the workload's {total} mutating operations, "
            "though it writes file bytes and fsyncs them"
        )
    return tuple(problems)


def arm_fault(
    driver: Driver, fs_op: str, errno_name: str, after: int, outcome: CrashOutcome, name: str
) -> bool:
    """``fail_next`` armed (counted among the outcome's faults), or its refusal recorded under ``name``."""
    armed = driver.raw("fail_next", fsOp=fs_op, errno=errno_name, after=after)
    if not armed.ok:
        record_outcome(outcome, name, (f"fail_next answered {armed.error_code}",))
        return False
    outcome.faults += 1
    return True


def check_cut_bounds(
    run: _Run, position: int, size: int, none: Mapping[str, bytes] | None
) -> tuple[str, ...]:
    """A byte cut's bounds (PROTOCOL.md, "Crash ops"), at a boundary where ``unsynced`` showed
    ``size`` bytes of its ``position``-th file (``none``: the files ``export`` showed after that
    point's cut keeping none; ``run`` replayed to the same point, whose ``unsynced`` names the
    file again, as a temporary file's name may differ from replay to replay): keeping one byte
    more than that, or naming a file ``unsynced`` did not list, answers ``BAD_REQUEST`` and changes
    nothing; keeping every one of them is a cut like any other, leaving the file exactly that many
    bytes longer than keeping none; and ``ops`` answers 0 right after a ``crash``, which counts
    nothing yet."""
    files = _unsynced(run.driver)
    if position >= len(files) or files[position][1] != size:
        return ("the unsynced files differ between identical replays",)
    path = files[position][0]
    problems: list[str] = []
    for keep in ({"path": path, "bytes": size + 1}, {"path": f"{path}.never-written", "bytes": 0}):
        answer = run.driver.raw("crash", keep=keep)
        if answer.ok or answer.error_code != BAD_REQUEST:
            problems.append(
                f"crash keep={canonical_text(keep)}, past what unsynced showed ({size} bytes of {path}), "
                f"answered {answer.error_code or 'ok'}, expected {BAD_REQUEST}"
            )
    if problems:
        return tuple(problems)
    cut: dict[str, Any] = {}
    problems += check_after_power_cut(run, {"path": path, "bytes": size}, survived=cut)
    problems += check_byte_cut(path, size, none, next(iter(cut.values()), None))
    if not problems:
        run.driver.raw("crash", keep="none")
        after = run.driver.raw("ops")
        if not after.ok or after.result != 0:
            problems.append(
                f"ops answered {after.error_code or canonical_text(after.result)} right after a crash"
            )
    return tuple(problems)


def check_armed_midway(
    subject: Any, workload: Sequence[Request], compressed: bool, stops: Mapping[int, int | None]
) -> tuple[str, ...]:
    """``arm_crash`` counts from when it is sent (PROTOCOL.md, "Crash ops": the operation after
    the next ``after`` mutating ones): armed after the workload's first ``p`` requests made ``d``
    operations, with ``after`` ``d - 1``, it stops the request that a crash armed at ``reset`` with
    ``after`` ``2d - 1`` stopped (``stops``: the request each ``after`` armed at ``reset``
    stopped). A seam that counted from ``reset`` instead, or added the counts another way, would
    agree with the crashes armed at the start only."""
    driver = _start(subject, compressed)
    origin = _ops(driver)
    for prefix in range(1, len(workload)):
        _replay(driver, workload[prefix - 1 : prefix], ())
        done = _ops(driver) - origin
        if done >= 1:
            break
    else:
        return ()
    if 2 * done - 1 not in stops:
        return ()
    armed = driver.raw("arm_crash", after=done - 1)
    if not armed.ok:
        return (f"arm_crash after={done - 1} answered {armed.error_code}",)
    run = _replay(driver, workload[prefix:], (CRASHED,))
    stopped = None if run.stopped_at is None else prefix + run.stopped_at
    expected = stops[2 * done - 1]
    if stopped != expected:
        return (
            f"arm_crash after={done - 1}, sent after the first {prefix} requests made {done} mutating "
            f"operations, stopped {'no request' if stopped is None else f'request {stopped}'}; armed at reset "
            f"with after={2 * done - 1} it stopped {'no request' if expected is None else f'request {expected}'}",
        )
    return ()


def run_power_out_check(subject: Any, compressed: bool, outcome: CrashOutcome) -> None:
    """A crash armed past :data:`LONG_RUN_OPS` mutating operations fires, and the power then stays
    out until ``crash`` (PROTOCOL.md, "Crash ops"): sessions are created and flushed, one after the
    other, until the run has made that many operations (``ops``); the same run, armed at ``reset``
    to stop its last operation, must answer ``CRASHED``, and after it a session created and flushed
    is not made durable (its flush does not succeed, some request answers ``CRASHED``) and ``ops``
    does not grow. A seam that compared the counts by identity, or failed only the one operation
    and let the rest of the run write on, would pass the shorter workloads. A subject whose created
    and flushed sessions make fewer operations than that is not judged here, and is told so."""
    label = "zstd" if compressed else "plain"
    name = f"{label}: a crash armed past {LONG_RUN_OPS} operations, and the power out after it"
    driver = _start(subject, compressed)
    origin = _ops(driver)
    workload: list[Request] = []
    while _ops(driver) - origin < LONG_RUN_OPS and len(workload) < 2 * LONG_RUN_OPS:
        session_id = f"p{len(workload) // 2}"
        pair: tuple[Request, ...] = (("create", {"id": session_id}), ("flush", {"id": session_id}))
        _replay(driver, pair, ())
        workload += pair
    total = _ops(driver) - origin
    # A store that writes nothing for an empty session (DSH publishes at its first event).
    if total < LONG_RUN_OPS:
        outcome.not_reached.append(
            f"{name} ({len(workload) // 2} sessions created and flushed made only {total} mutating operations)"
        )
        return
    problems: list[str] = []
    driver = _start(subject, compressed)
    armed = driver.raw("arm_crash", after=total - 1)
    run = _replay(driver, workload, (CRASHED,)) if armed.ok else None
    if run is None:
        problems.append(f"arm_crash after={total - 1} answered {armed.error_code or 'ok'}")
    elif run.stopped_at is None:
        problems.append(
            f"arm_crash after={total - 1} stopped no request with {CRASHED}, though the run makes {total} "
            "mutating operations"
        )
    else:
        before = _ops(driver)
        late = [driver.raw("create", id="after-the-cut"), driver.raw("flush", id="after-the-cut")]
        if late[1].ok or all(answer.ok or answer.error_code != CRASHED for answer in late):
            problems.append(
                "after a request answered CRASHED, a session created and flushed answered "
                f"{[answer.error_code or 'ok' for answer in late]}: the power is out until crash"
            )
        if _ops(driver) != before:
            problems.append(f"after a request answered CRASHED, ops grew from {before} to {_ops(driver)}")
    record_outcome(outcome, name, problems)


def run_fault_injection(
    subject: Any, workload: Sequence[Request], compressed: bool, outcome: CrashOutcome
) -> None:
    """The n-th fsync fails (EIO), the n-th write fails (ENOSPC, EIO), for every n up to the
    number of mutating operations the workload makes: the request that meets the fault must
    answer ``STORAGE_IO``, and after a power cut nothing flushed before it is lost. A run in which
    no request answered ``STORAGE_IO`` is cut too: had the fault been swallowed, a flush would
    have been acknowledged without being durable. Without a batch policy, a fault armed on one of
    the first :func:`durable_steps` writes (or fsyncs) must meet a request: a run that ends clean
    there means the seam never failed the call it was asked to."""
    label = "zstd" if compressed else "plain"
    total = count_mutations(subject, workload, compressed)
    required: int | None = None  # every run starts from the same reset, so its model's count holds for all
    for fs_op, errno_name in FAULTS:
        for index in range(total):
            driver = _start(subject, compressed)
            if required is None:
                # Without a batch policy only a request writes, so the fault must meet one while the
                # workload still needs more than ``index`` writes (or fsyncs): a seam that let it
                # pass would make every later point vacuous.
                required = durable_steps(driver.model, workload) if driver.model.batch is None else 0
            name = f"{label}: {fs_op} number {index + 1} fails with {errno_name}"
            if not arm_fault(driver, fs_op, errno_name, index, outcome, name):
                break
            try:
                run = _replay(driver, workload, (STORAGE_IO,))
            except Mismatch as error:
                record_outcome(
                    outcome, name, (f"the request that met the fault did not answer {STORAGE_IO}: {error}",)
                )
                continue
            if run.stopped_at is not None:
                name += f" during request {run.stopped_at} ({workload[run.stopped_at][0]})"
            elif index < required:
                record_outcome(
                    outcome,
                    name,
                    (f"no request answered {STORAGE_IO}, though the workload makes one log durable "
                     f"{required} times, each needing a {fs_op} of its own",),
                )  # fmt: skip
                continue
            run.in_flight = None  # a failed request completed nothing
            record_outcome(outcome, name, check_after_power_cut(run, "none", retry_storage_io=True))


COUNTDOWN_ROUNDS: Final = 3  # rounds of one append and a flush the countdown's faults are armed over
TWO_FAULTS: Final = (("fsync", "fsync"), ("write", "fsync"))  # armed at once: the first meets round 1


def countdown_workload() -> tuple[tuple[Request, ...], tuple[Request, ...]]:
    """The countdown's opening (a session created, published, and grown by one event and a flush,
    so that a store's first append, which may make more of a log than later ones, is behind it)
    and its rounds: turns opened and closed, one event and a flush a round."""
    flush: Request = ("flush", {"id": "n"})
    events = [
        request
        for turn in (1, 2)
        for request in (append_request("n", TURN_START, turn_start(turn)), close_turn("n", turn))
    ]
    rounds = tuple(request for event in events for request in (event, flush))
    return (("create", {"id": "n"}), flush, *rounds[:2]), rounds[2 : 2 + 2 * COUNTDOWN_ROUNDS]


def run_fault_countdown(subject: Any, compressed: bool, outcome: CrashOutcome) -> None:
    """``fail_next``'s ``after`` counted exactly (PROTOCOL.md, "Crash ops": the fault fails the
    operation after the next ``after`` ones of its kind). A session is created, published and
    grown once, then driven in rounds of one append and a flush. A round that makes exactly two
    mutating operations (``ops``) makes exactly one write of file bytes and one fsync of a file:
    its event, appended in the round, is durable at its end, so a write made after the append and
    an fsync after that write are in the round. Over such rounds, a fault armed after ``n`` writes
    (or fsyncs) must stop round ``n + 1``, no earlier and no later (:func:`run_fault_injection`
    can only bound it: over a workload whose requests make several of each it cannot say which one
    failed). Two faults armed at once (:data:`TWO_FAULTS`) stop round 1 too: the second may meet
    what the subject does after the first failed (the reference's rollback fsyncs), and the request
    still answers ``STORAGE_IO``. A subject whose rounds make other counts is not judged here, and
    is told so."""
    label = "zstd" if compressed else "plain"
    opening, rounds = countdown_workload()
    driver = _start(subject, compressed)
    _replay(driver, opening, ())
    counts = []
    for index in range(0, len(rounds), 2):
        before = _ops(driver)
        _replay(driver, rounds[index : index + 2], ())
        counts.append(_ops(driver) - before)
    if any(count != 2 for count in counts):
        outcome.not_reached.append(
            f"{label}: fail_next's after counted exactly (a round of one append and a flush made {counts} "
            "mutating operations, not one write and one fsync)"
        )
        return
    for fs_op, errno_name in FAULTS:
        for armed_after in range(COUNTDOWN_ROUNDS):
            name = f"{label}: fail_next {fs_op} {errno_name} after {armed_after}, over rounds of one {fs_op} each"
            driver = _start(subject, compressed)
            _replay(driver, opening, ())
            if arm_fault(driver, fs_op, errno_name, armed_after, outcome, name):
                record_outcome(outcome, name, countdown_problems(driver, rounds, fs_op, armed_after))
    for first, second in TWO_FAULTS:
        name = f"{label}: fail_next {first} and {second} armed at once, over rounds of one of each"
        driver = _start(subject, compressed)
        _replay(driver, opening, ())
        if arm_fault(driver, first, "EIO", 0, outcome, name) and arm_fault(
            driver, second, "EIO", 0, outcome, name
        ):
            record_outcome(outcome, name, countdown_problems(driver, rounds, first, 0))


def countdown_problems(
    driver: Driver, rounds: Sequence[Request], fs_op: str, armed_after: int
) -> tuple[str, ...]:
    """What is wrong with where a fault armed after ``armed_after`` calls stops ``rounds`` (one
    ``fs_op`` each): it must stop round ``armed_after + 1``."""
    try:
        run = _replay(driver, rounds, (STORAGE_IO,))
    except Mismatch as error:
        return (f"a round disagreed with the model: {error}",)
    met = None if run.stopped_at is None else run.stopped_at // 2 + 1
    if met == armed_after + 1:
        return ()
    where = f"round {met}" if met is not None else "no round"
    return (
        f"the fault stopped {where}, not round {armed_after + 1}: each round makes one {fs_op}, "
        f"and it lets {armed_after} through",
    )


def exported_files(driver: Driver) -> dict[str, bytes] | None:
    """Every file ``export`` shows, by path; ``None`` when its answer is not a set of files."""
    answer = driver.raw("export")
    try:
        return decode_files(answer.result) if answer.ok else None
    except FilesError:
        return None


def stored_logs(driver: Driver) -> dict[str, bytes] | None:
    """The log files (``session.v4.jsonl[.zstd]``, ``session.jsonl[.zstd]``) ``export`` shows, by
    path; ``None`` when its answer is not a set of files."""
    files = exported_files(driver)
    if files is None:
        return None
    return {path: data for path, data in files.items() if path.rsplit("/", 1)[-1] in LOG_NAMES}


def check_damage_flips_one_byte(
    before: Mapping[str, bytes], after: Mapping[str, bytes], offset: int
) -> tuple[str, ...]:
    """``damage`` (PROTOCOL.md, "Crash ops"): of the stored logs, exactly one changes, in exactly
    the byte at ``offset``, which becomes its bitwise complement (``b XOR 0xFF``)."""
    changed = [path for path in sorted(before.keys() | after.keys()) if before.get(path) != after.get(path)]
    if len(changed) != 1:
        return (f"damage at offset {offset} changed {len(changed)} stored logs, expected one: {changed}",)
    old, new = before.get(changed[0], b""), after.get(changed[0], b"")
    differing = [index for index, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
    if len(old) != len(new) or differing != [offset] or new[offset] != old[offset] ^ 0xFF:
        return (
            f"damage at offset {offset} of {changed[0]} changed bytes {differing[:5]} of {len(old)} "
            f"(now {len(new)} bytes), expected only byte {offset}, to its complement",
        )
    return ()


def check_damage_offsets(
    driver: Driver, session_id: str, logs: Mapping[str, bytes], damaged: Mapping[str, bytes]
) -> list[str]:
    """``damage``'s ``offset`` (PROTOCOL.md, "Crash ops"; ``logs``: the stored logs, intact, and
    ``damaged`` as the first damage left them, which names the session's file): the log's first
    byte can be flipped, to its complement, and flipped back; an offset not below the file's size
    is ``BAD_REQUEST`` and changes nothing."""
    paths = [path for path in logs if logs[path] != damaged.get(path)]
    if len(paths) != 1:
        return []  # check_damage_flips_one_byte has said why
    size = len(logs[paths[0]])
    problems: list[str] = []
    for offset in (size, size + 1):
        past = driver.raw("damage", id=session_id, offset=offset)
        if past.ok or past.error_code != BAD_REQUEST:
            problems.append(
                f"damage at offset {offset} of a {size}-byte log answered {past.error_code or 'ok'}, expected BAD_REQUEST"
            )
    first = driver.raw("damage", id=session_id, offset=0)
    flipped = stored_logs(driver)
    if not first.ok or flipped is None:
        return [*problems, f"damage at offset 0 of {session_id} answered {first.error_code}"]
    problems += check_damage_flips_one_byte(logs, flipped, 0)
    if not driver.raw("damage", id=session_id, offset=0).ok or stored_logs(driver) != logs:
        problems.append(
            f"damage at offset 0 of {session_id}, done twice, did not give the log back as it was"
        )
    return problems


def run_damage_check(
    subject: Any,
    workload: Sequence[Request],
    compressed: bool,
    outcome: CrashOutcome,
    spot: str = "middle",
    export: bool = False,
) -> None:
    """D3 item 5, the half a crash cannot test: the workload runs to the end, the power is cut,
    and ``damage`` flips a byte of the longest log's second unit (``spot``: its middle, its first
    byte, which breaks the JSON structure or the frame's magic, or its last, the newline or the
    checksum).
    Then ``read`` and ``resume`` must both answer ``CORRUPT_LOG``; a second ``damage`` at the same
    offset restores the byte, and the log must read exactly as before and resume with its closers
    (a subject that cut the damage off as if it were a torn tail would have lost the events after
    it). With ``export``, the stored logs are compared too: the damage flips exactly its byte, to
    the complement, and the refused ``read`` and ``resume`` leave the damaged log as it is."""
    label = "zstd" if compressed else "plain"
    name = f"{label}: a byte flipped inside a durable log"
    driver = _start(subject, compressed)
    _replay(driver, workload, ())
    driver.crash("none")
    session_id = max(driver.model.stored, key=lambda key: len(driver.model.stored[key].events))
    before = driver.raw("read", id=session_id)
    if not before.ok:
        record_outcome(outcome, name, (f"read {session_id} before the damage answered {before.error_code}",))
        return
    events = before.result.get("events", []) if isinstance(before.result, dict) else []
    logs_before = stored_logs(driver) if export else None
    damaged = driver.raw("damage", id=session_id, at=spot)
    offset = damaged.result.get("offset") if damaged.ok and isinstance(damaged.result, dict) else None
    if not isinstance(offset, int):
        record_outcome(
            outcome,
            name,
            (f"damage {session_id} answered {damaged.error_code or canonical_text(damaged.result)[:200]}",),
        )
        return
    outcome.damages += 1
    mark_reached("D3.5")
    name += f" (byte {offset} of {session_id}, at {spot})"
    logs_damaged = stored_logs(driver) if export else None
    problems = [
        *check_d3_5_corruption_reported("read", answer_code(driver.raw("read", id=session_id))),
        *check_d3_5_corruption_reported("resume", answer_code(driver.raw("resume", id=session_id))),
    ]
    if export:
        logs_refused = stored_logs(driver)
        if logs_before is None or logs_damaged is None or logs_refused is None:
            problems.append("export around the damage did not answer a set of files")
        else:
            problems += check_damage_flips_one_byte(logs_before, logs_damaged, offset)
            if logs_refused != logs_damaged:
                problems.append(
                    "D3.5: read and resume of the damaged log changed the stored logs "
                    f"({sorted(p for p in logs_damaged.keys() | logs_refused.keys() if logs_damaged.get(p) != logs_refused.get(p))})"
                )
    restored = driver.raw("damage", id=session_id, offset=offset)
    if not restored.ok:
        problems.append(
            f"D3.5: damage {session_id} at offset {offset}, undoing the first, answered {restored.error_code}: was the log cut back?"
        )
        record_outcome(outcome, name, problems)
        return
    if logs_before is not None and logs_damaged is not None:
        problems += check_damage_offsets(driver, session_id, logs_before, logs_damaged)
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
    record_outcome(outcome, name, problems)


def run_crash_checks(
    subject: Any,
    every_byte: bool = True,
    compressions: Sequence[bool] = (True, False),
    fail_fast: bool = False,
    target: Target = DEFAULT_TARGET,
    capabilities: Collection[str] = (),
    workloads: Collection[str] | None = None,
) -> CrashOutcome:
    """Every boundary, every byte and every fault of each crash workload, in each format
    (zstd-compressed and plain JSONL), and the damage check at three spots; with ``fail_fast``,
    up to the first failing point. A workload whose replay the subject answers differently from
    the model is reported, and its remaining points are not reached; the other workloads still run.
    The damage check runs on the standard workload, or on the single-session one when the subject
    could not replay the standard one. ``capabilities`` adds the workloads of the engine capabilities the subject declares;
    ``workloads`` names the ones to run (``None``: all)."""
    outcome = CrashOutcome(fail_fast=fail_fast)
    started = time.perf_counter()
    damaged: set[bool] = set()  # the formats whose damage check ran
    power_checked = False  # the power-out check runs once, in the first format
    target_token, reached_token = CRASH_TARGET.set(target), CRASH_REACHED.set(outcome.reached)
    try:
        for compressed in compressions:
            label = "zstd" if compressed else "plain"
            if workloads is None:
                try:
                    run_fault_countdown(subject, compressed, outcome)
                except Mismatch as error:
                    record_outcome(outcome, f"{label}: fail_next's after counted exactly", (str(error),))
                except Unsupported as unsupported:
                    outcome.not_reached.append(
                        f"{label}: fail_next's after (the subject lacks {unsupported})"
                    )
            for workload_name, workload in crash_workloads(capabilities):
                if compressed not in WORKLOAD_FORMATS.get(workload_name, (True, False)):
                    continue
                if workloads is not None and workload_name not in workloads:
                    continue
                where = f"{label}, {workload_name} workload"
                reset = CRASH_RESET.set(WORKLOAD_RESETS.get(workload_name, {}))
                cuts = CRASH_BYTE_CUTS.set(WORKLOAD_BYTE_CUTS.get(workload_name, lambda size: range(1, size)))
                try:
                    if not power_checked:
                        power_checked = True
                        run_power_out_check(subject, compressed, outcome)
                    if workload_name in DAMAGE_WORKLOADS and compressed not in damaged:
                        for spot in DAMAGE_SPOTS:
                            run_damage_check(
                                subject, workload, compressed, outcome, spot, "export" in capabilities
                            )
                        damaged.add(compressed)
                    run_boundary_crashes(subject, workload, compressed, outcome, every_byte)
                    run_fault_injection(subject, workload, compressed, outcome)
                except Mismatch as error:
                    record_outcome(outcome, f"{where}: replaying the workload", (str(error),))
                    outcome.not_reached.append(
                        f"{where}: the rest of its crash points (its replay disagreed)"
                    )
                except Unsupported as unsupported:
                    outcome.not_reached.append(f"{where}: its crash points (the subject lacks {unsupported})")
                finally:
                    CRASH_RESET.reset(reset)
                    CRASH_BYTE_CUTS.reset(cuts)
    except EnoughPoints:
        outcome.not_reached.append("the points after the first failure (fail-fast)")
    finally:
        CRASH_TARGET.reset(target_token)
        CRASH_REACHED.reset(reached_token)
    outcome.seconds = time.perf_counter() - started
    return outcome
