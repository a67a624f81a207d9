"""SPEC-DECISIONS D3, item by item: what a log reopened after a crash must look like.

Each ``check_d3_*`` function tests one item and returns the violations it finds as sentences (an
empty tuple when the item holds), so a report can say *which* item a subject broke. They compare
what the subject shows with what the suite appended and flushed; they never look at bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from conformance.model import ModelStore
from conformance.model import canonical_text as model_text
from conformance.targets import DEFAULT_TARGET, Target
from spec.lineage.store import derive_resumed_log
from spec.log.events import END_SEED, Event
from spec.log.json import FrozenDict, JsonValue
from spec.log.seed import needs_end_seed
from spec.protocol import INTERNAL

D3_ITEMS: Final = {
    "D3.1": "after a crash there is either no session or an intact header",
    "D3.2": "the reopened events are a prefix of what was appended",
    "D3.3": "every event appended before a completed flush survives",
    "D3.4": "a torn tail is dropped and the file rewritten, so the next open sees a clean log",
    "D3.5": "damage that is not a tail is a corrupt-log error, never silent loss (and a torn tail is not damage)",
    "D3.6": "an open turn is kept and closed by the repair closers, appended as new events",
}
D2_WRITER: Final = "D2.writer"
D2_WRITER_SENTENCE: Final = (
    "one writer per session: a second writer in another process gets LOCKED, and readers read while it writes"
)


def header_of(model: ModelStore, session_id: str) -> FrozenDict | None:
    """The header ``session_id`` has in the model: its live state's, else its stored log's."""
    entry = model.live.get(session_id)
    if entry is not None:
        return entry.state.header
    log = model.stored.get(session_id)
    return log.header if log is not None else None


def canonical_text(value: object) -> str:
    """The suite's canonical text with D5's numbers: an integral float is the integer it equals
    (``1.0`` is ``1``), as JSON text reads it, so a store in a language that writes ``1`` for it
    (JavaScript) keeps what was appended."""
    return model_text(_integral_floats_as_ints(value))


def _integral_floats_as_ints(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    return value


def check_d3_1_header(
    found: bool,
    header: JsonValue,
    expected_header: JsonValue,
    was_flushed: bool,
    target: Target = DEFAULT_TARGET,
) -> tuple[str, ...]:
    """D3 item 1: a session that was flushed is still there with the header it was created with (as
    the subject's target writes it); one never flushed may be missing."""
    if not found:
        return ("D3.1: a session that had been flushed is gone after the crash",) if was_flushed else ()
    wanted = target.header(expected_header, header)
    if canonical_text(header) != canonical_text(wanted):
        return (f"D3.1: the header changed across the crash: {canonical_text(header)[:200]}",)
    return ()


def check_d3_2_prefix(events: Sequence[JsonValue], appended: Sequence[Event]) -> tuple[str, ...]:
    """D3 item 2: the events a reader sees after the crash are a prefix of the appended ones."""
    if len(events) > len(appended):
        return (f"D3.2: {len(events)} events survived but only {len(appended)} were appended",)
    for position, (seen, made) in enumerate(zip(events, appended)):
        if canonical_text(seen) != canonical_text(made):
            return (
                f"D3.2: event {position} after the crash is not the one appended: {canonical_text(seen)[:200]}",
            )
    return ()


def check_d3_3_flushed_kept(events: Sequence[JsonValue], flushed: int) -> tuple[str, ...]:
    """D3 item 3: at least the ``flushed`` events that a completed flush made durable survive."""
    if len(events) < flushed:
        return (f"D3.3: {flushed} events were flushed but only {len(events)} survived",)
    return ()


def check_d3_4_clean_reopen(
    events_after_resume: Sequence[JsonValue], durable: Sequence[JsonValue], end_seed: JsonValue = None
) -> tuple[str, ...]:
    """D3 item 4: once a resume has dropped the torn tail and written its closers, a second crash
    (losing everything unsynced) and a fresh read show exactly that clean log; the resume's
    ``end_seed``, when it appended one, may have been made durable at once as well (a store may
    make things durable earlier than it must)."""
    seen = [canonical_text(event) for event in events_after_resume]
    clean = [canonical_text(event) for event in durable]
    if seen == clean or (end_seed is not None and seen == [*clean, canonical_text(end_seed)]):
        return ()
    also = " (or with the resume's end-seed after it)" if end_seed is not None else ""
    return (
        f"D3.4: after resume and another crash the log reads {len(events_after_resume)} events, "
        f"expected the {len(durable)} of the repaired log{also}",
    )


def check_d3_5_no_false_corruption(code: str | None) -> tuple[str, ...]:
    """D3 item 5, the half a crash can test: a crash only tears tails, so reopening after one is
    never a corrupt-log error (and never an internal failure)."""
    if code in ("CORRUPT_LOG", INTERNAL):
        return (f"D3.5: reopening a log whose only damage is a torn tail answered {code}",)
    return ()


def check_d3_5_corruption_reported(op: str, code: str | None) -> tuple[str, ...]:
    """D3 item 5: damage in the middle of a log is a corrupt-log error, not a silent repair: ``op``
    (a ``read`` or a ``resume`` of a log the crash seam's ``damage`` changed) answered ``code``."""
    if code != "CORRUPT_LOG":
        return (
            f"D3.5: {op} of a log damaged before its tail answered {code or 'success'} instead of CORRUPT_LOG",
        )
    return ()


def check_d3_5_damage_undone(
    events_after: Sequence[JsonValue], events_before: Sequence[JsonValue]
) -> tuple[str, ...]:
    """D3 item 5, the other half of "never silent loss": once the damaged byte is restored, the log
    reads exactly as before the damage, so meeting the damage changed nothing on storage."""
    if [canonical_text(event) for event in events_after] != [
        canonical_text(event) for event in events_before
    ]:
        return (
            f"D3.5: with the damaged byte restored the log reads {len(events_after)} events, expected the "
            f"{len(events_before)} it held before the damage: meeting the damage changed the stored log",
        )
    return ()


def check_d3_6_closers(resumed: Sequence[JsonValue], survived: Sequence[Event], now: int) -> tuple[str, ...]:
    """D3 item 6: a resume hands back the surviving events, then exactly the closers repair derives
    for them (times from the last event), then ``session/end-seed`` unless the log already ends
    with one."""
    durable = derive_resumed_log(survived)
    expected = [canonical_text(event) for event in durable]
    if needs_end_seed(True, durable):
        expected.append(canonical_text({"type": END_SEED, "seq": len(durable), "time": now, "data": {}}))
    seen = [canonical_text(event) for event in resumed]
    if seen[: len(survived)] != expected[: len(survived)]:
        return ("D3.6: the resumed log does not start with the events that survived",)
    if seen != expected:
        return (
            f"D3.6: after the {len(survived)} surviving events the resume appended "
            f"{[_kind(event) for event in resumed[len(survived) :]]}, expected {[_kind(event) for event in _tail(durable, survived)]}",
        )
    return ()


def _tail(durable: Sequence[Event], survived: Sequence[Event]) -> list[JsonValue]:
    tail: list[JsonValue] = list(durable[len(survived) :])
    if needs_end_seed(True, durable):
        tail.append({"type": END_SEED})
    return tail


def _kind(event: JsonValue) -> str:
    return str(event.get("type")) if isinstance(event, dict) else repr(event)
