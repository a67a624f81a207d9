"""Crash repair: the synthetic events that close what a crash left open
(notes/dsh-session-core §9; SPEC-DECISIONS D3 item 6).

A log read after a crash may end inside a turn: calls without results, a step without its
``step/end``, a turn without its ``turn/end``, a compaction without its ``compaction/end``. Repair
never drops those events; it appends *closers*, computed purely from the log:

1. one error ``tool/result`` per call still pending in the open turn, in the order the calls were
   announced (``TOOL_OUTCOME_UNKNOWN`` if its ``tool/call`` was logged, else ``TOOL_NOT_STARTED``);
2. one ``compaction/end`` with an ``error`` per unmatched ``compaction/start`` (this project's
   rule; DSH 0.1 leaves them open);
3. ``step/end`` if a step is open;
4. ``turn/end {kind: "interrupted"}``.

With no open turn only the ``compaction/end`` closers remain. Closers close everything, so
repairing a repaired log adds nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from spec.format.json_text import encode_json_text
from spec.log.events import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_START,
    END_SEED,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
    event_data,
    is_named,
)
from spec.log.json import JsonObject, JsonValue, freeze_parsed_json, is_event_seq, js_text
from spec.log.session import ABSENT, Absent
from spec.log.writers import (
    INTERRUPTED_REASON_KIND as INTERRUPTED_REASON_KIND,
)  # closers' words, kept here too
from spec.log.writers import TOOL_NOT_STARTED as TOOL_NOT_STARTED
from spec.log.writers import TOOL_OUTCOME_UNKNOWN as TOOL_OUTCOME_UNKNOWN

TOOL_NOT_STARTED_ERROR_NAME: Final = "ToolNotStartedError"
TOOL_OUTCOME_UNKNOWN_ERROR_NAME: Final = "ToolOutcomeUnknownError"
TOOL_NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)
TOOL_OUTCOME_UNKNOWN_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is "
    "unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or "
    "idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
)
INTERRUPTED_TOOL_RESULT_ID_PREFIX: Final = "interrupted-tool-result-"
COMPACTION_INTERRUPTED_ERROR: Final = "interrupted: the session stopped before this compaction finished"


REPAIR_SCAN_TYPES: Final = frozenset(
    {
        TURN_START,
        TURN_END,
        STEP_START,
        STEP_END,
        ASSISTANT_MESSAGE,
        TOOL_CALL,
        TOOL_RESULT,
        COMPACTION_START,
        COMPACTION_END,
        END_SEED,
    }
)
"""The event types the repair scan reads; every other type leaves it as it is."""


Field: TypeAlias = JsonValue | Absent


@dataclass(frozen=True)
class PendingCall:
    """A tool call announced by an assistant message of the open turn and not yet answered."""

    call_id: Field
    step: Field  # the assistant message's data.step
    call_seq: int | None = None  # seq of its logged tool/call; None while it has not started


@dataclass(frozen=True)
class RepairScan:
    """What a crash may have left open, after reading some prefix of the log."""

    open_turn: JsonObject | None = None  # data of the turn/start of the open turn
    open_step: JsonObject | None = None  # data of the step/start of the open step
    pending_calls: tuple[PendingCall, ...] = ()  # in announcement order
    open_compactions: tuple[JsonObject, ...] = ()  # data of each unmatched compaction/start, in order


def field_of(data: JsonObject, key: str) -> Field:
    """``data[key]``, or ``ABSENT`` when the key is missing."""
    return data.get(key, ABSENT)


def identity_key(value: Field) -> Hashable:
    """A hashable stand-in for a call or compaction id, equal exactly when JavaScript's ``Map``
    would treat the two ids as one key (numbers by value, ``true`` never equal to ``1``)."""
    if value is ABSENT:
        return ("absent",)
    if value is None or isinstance(value, (bool, str)):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", float(value))
    return ("json", encode_json_text(value))


def result_call_id(event: Event) -> Field:
    """The call a tool/result answers, ``data.message.source.callId`` (``ABSENT`` if missing)."""
    message = event_data(event).get("message")
    source = message.get("source") if isinstance(message, dict) else None
    return field_of(source, "callId") if isinstance(source, dict) else ABSENT


def apply_repair_scan(scan: RepairScan, event: Event) -> RepairScan:
    """Read one event (notes/dsh-session-core §9): a turn boundary resets the open step and the
    pending calls; ``step/end`` clears the pending calls; each ``tool-call`` block of an assistant
    message registers (or re-registers, keeping its place) a pending call; a ``tool/call`` marks its
    pending call started; a ``tool/result`` answers its call, whatever its surfaceOp. A
    ``compaction/start`` opens a compaction and the ``compaction/end`` with its id closes it; a
    ``session/end-seed`` makes every open compaction a stale orphan of an earlier lifecycle, which is
    never closed (notes/dsh-compaction-projection §4.4, §4.6)."""
    kind = event.get("type")
    if not is_named(kind, REPAIR_SCAN_TYPES):
        return scan
    data = event_data(event)
    if kind == TURN_START:
        return RepairScan(data, None, (), scan.open_compactions)
    if kind == TURN_END:
        return RepairScan(None, None, (), scan.open_compactions)
    if kind == STEP_START:
        return RepairScan(scan.open_turn, data, scan.pending_calls, scan.open_compactions)
    if kind == STEP_END:
        return RepairScan(scan.open_turn, None, (), scan.open_compactions)
    if kind == ASSISTANT_MESSAGE:
        calls = _announce_calls(scan.pending_calls, data)
        if calls is scan.pending_calls:
            return scan
        return RepairScan(scan.open_turn, scan.open_step, calls, scan.open_compactions)
    if kind == TOOL_CALL:
        key = identity_key(field_of(data, "callId"))
        calls = tuple(
            replace(call, call_seq=_seq_of(event)) if identity_key(call.call_id) == key else call
            for call in scan.pending_calls
        )
        return RepairScan(scan.open_turn, scan.open_step, calls, scan.open_compactions)
    if kind == TOOL_RESULT:
        key = identity_key(result_call_id(event))
        calls = tuple(c for c in scan.pending_calls if identity_key(c.call_id) != key)
        return RepairScan(scan.open_turn, scan.open_step, calls, scan.open_compactions)
    if kind == COMPACTION_START:
        return replace(scan, open_compactions=_open_compaction(scan.open_compactions, data))
    if kind == COMPACTION_END:
        key = identity_key(field_of(data, "compactionId"))
        remaining = tuple(start for start in scan.open_compactions if _compaction_key(start) != key)
        return replace(scan, open_compactions=remaining)
    if kind == END_SEED:
        return replace(scan, open_compactions=())
    return scan


def fold_repair_scan(events: Sequence[Event]) -> RepairScan:
    """Read a whole log with :func:`apply_repair_scan`, from nothing open. A turn boundary sets the
    open turn, step and calls afresh and only the compaction events reach across it, so up to the
    last boundary only those are read (the same scan, without walking every turn); and a
    ``session/end-seed`` after the last boundary forgets every compaction open before it, so then
    none before the boundary is read at all (issue 24: a resumed log ends with its end-seed)."""
    last_boundary = next(
        (at for at in range(len(events) - 1, -1, -1) if events[at].get("type") in (TURN_START, TURN_END)),
        -1,
    )
    tail = events[last_boundary + 1 :]
    scan = RepairScan()
    if not any(event.get("type") == END_SEED for event in tail):
        for event in events[: last_boundary + 1]:
            if event.get("type") in (COMPACTION_START, COMPACTION_END, END_SEED):
                scan = apply_repair_scan(scan, event)
    if last_boundary >= 0:
        scan = apply_repair_scan(scan, events[last_boundary])
    for event in tail:
        scan = apply_repair_scan(scan, event)
    return scan


def derive_closers(events: Sequence[Event]) -> tuple[Event, ...]:
    """The synthetic events that close everything the log leaves open, to be appended after it;
    empty for a balanced or empty log (notes/dsh-session-core §9; SPEC-DECISIONS D3 item 6)."""
    if not events:
        return ()
    last = events[-1]
    last_seq = last.get("seq")
    next_seq = int(last_seq) + 1 if is_event_seq(last_seq) else len(events)
    return derive_closers_after(fold_repair_scan(events), last, next_seq)


def derive_closers_after(scan: RepairScan, last: Event, next_seq: int) -> tuple[Event, ...]:
    """The closers for a log read into ``scan`` whose final event is ``last``: seqs count on from
    ``next_seq`` and every closer reuses ``last``'s time. In order: a tool/result per pending call,
    a compaction/end per open compaction, step/end if a step is open, then turn/end."""
    time: JsonValue = last.get("time", 0)
    closers: list[Event] = []
    if scan.open_turn is not None:
        for call in scan.pending_calls:
            closers.append(
                derive_interrupted_tool_result(
                    call, field_of(scan.open_turn, "turn"), next_seq + len(closers), time
                )
            )
    for start in scan.open_compactions:
        closers.append(derive_interrupted_compaction_end(start, next_seq + len(closers), time))
    if scan.open_turn is None:
        return tuple(closers)
    turn = field_of(scan.open_turn, "turn")
    if scan.open_step is not None:
        step_data = _present({"turn": turn, "step": field_of(scan.open_step, "step")})
        closers.append(_event(STEP_END, next_seq + len(closers), time, step_data))
    reason: JsonObject = {"kind": INTERRUPTED_REASON_KIND}
    closers.append(
        _event(TURN_END, next_seq + len(closers), time, _present({"turn": turn, "reason": reason}))
    )
    return tuple(closers)


def derive_interrupted_tool_result(call: PendingCall, turn: Field, seq: int, time: JsonValue) -> Event:
    """The error result of a call a crash left unanswered: ``TOOL_OUTCOME_UNKNOWN``, citing its
    tool/call, when the call was logged as started; ``TOOL_NOT_STARTED`` otherwise. Its message id
    is ``interrupted-tool-result-{callId}-{seq}`` (notes/dsh-session-core §9)."""
    started = call.call_seq is not None
    text = TOOL_OUTCOME_UNKNOWN_TEXT if started else TOOL_NOT_STARTED_TEXT
    error: JsonObject = (
        {"name": TOOL_OUTCOME_UNKNOWN_ERROR_NAME, "code": TOOL_OUTCOME_UNKNOWN}
        if started
        else {"name": TOOL_NOT_STARTED_ERROR_NAME, "code": TOOL_NOT_STARTED}
    )
    call_text = "undefined" if call.call_id is ABSENT else js_text(call.call_id)
    block = _present(
        {
            "type": "tool-result",
            "toolCallId": call.call_id,
            "isError": True,
            "content": [{"type": "text", "text": text}],
        }
    )
    message: JsonObject = {
        "id": f"{INTERRUPTED_TOOL_RESULT_ID_PREFIX}{call_text}-{seq}",
        "role": "user",
        "source": _present({"kind": "tool", "callId": call.call_id}),
        "content": [block],
    }
    data = _present({"turn": turn, "step": call.step, "message": message, "error": error})
    # Closers write surfaceOp before sourceEventSeqs (notes/dsh-persistence §3.2).
    envelope: dict[str, JsonValue] = {
        "type": TOOL_RESULT,
        "seq": seq,
        "time": time,
        "data": data,
        "surfaceOp": "append",
    }
    if started:
        envelope["sourceEventSeqs"] = [call.call_seq]
    return _frozen(envelope)


def derive_interrupted_compaction_end(start: JsonObject, seq: int, time: JsonValue) -> Event:
    """The ``compaction/end`` that closes a compaction a crash left open: the start's
    ``compactionId``, its ``sourceCommandId`` if it had one, its owner ``turn`` (null when it had
    none) and an ``error`` (SPEC-DECISIONS D3 item 6; notes/dsh-compaction-projection §4.2)."""
    data: JsonObject = {}
    for key in ("compactionId", "sourceCommandId"):
        if key in start:
            data[key] = start[key]
    data["turn"] = start.get("turn")
    data["error"] = COMPACTION_INTERRUPTED_ERROR
    return _event(COMPACTION_END, seq, time, data)


def _announce_calls(pending: tuple[PendingCall, ...], data: JsonObject) -> tuple[PendingCall, ...]:
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return pending
    if not any(isinstance(block, dict) and block.get("type") == "tool-call" for block in content):
        return pending
    calls = list(pending)
    step = field_of(data, "step")
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool-call":
            continue
        call_id = field_of(block, "id")
        key = identity_key(call_id)
        fresh = PendingCall(call_id=call_id, step=step)
        position = next((i for i, call in enumerate(calls) if identity_key(call.call_id) == key), None)
        if position is None:
            calls.append(fresh)
        else:
            calls[position] = fresh
    return tuple(calls)


def _open_compaction(open_starts: tuple[JsonObject, ...], data: JsonObject) -> tuple[JsonObject, ...]:
    key = _compaction_key(data)
    if any(_compaction_key(start) == key for start in open_starts):
        return tuple(data if _compaction_key(start) == key else start for start in open_starts)
    return (*open_starts, data)


def _compaction_key(data: JsonObject) -> Hashable:
    return identity_key(field_of(data, "compactionId"))


def _seq_of(event: Event) -> int | None:
    seq = event.get("seq")
    return int(seq) if is_event_seq(seq) else None


def _present(fields: dict[str, Field]) -> JsonObject:
    """The fields that are not ``ABSENT``, in order (JSON drops an undefined value)."""
    return {key: value for key, value in fields.items() if not isinstance(value, Absent)}


def _event(kind: str, seq: int, time: JsonValue, data: JsonObject) -> Event:
    return _frozen({"type": kind, "seq": seq, "time": time, "data": data})


def _frozen(event: dict[str, JsonValue]) -> Event:
    frozen = freeze_parsed_json(event)
    assert isinstance(frozen, dict)
    return frozen
