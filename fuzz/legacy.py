"""The v0 (DSH 0.1) record upgrade, :func:`spec.format.legacy.upgrade_v0_records`, reached
directly: each line of ``data`` that is JSON is one stored record (no header needed, so the
fuzzer spends its time in the conversions rather than in finding a valid header).

Oracle, for any bytes ``data``: the upgrade returns events or raises
:class:`spec.codes.SpecError` with a :class:`spec.codes.Code`; nothing else. The events it returns
hold seqs 0, 1, 2… in order, and upgrading is idempotent on their JSON: the events, as records,
pass :func:`spec.format.legacy.validate_stored_events`.
"""

from __future__ import annotations

from fuzz import Finding
from fuzz.oracles import typed_refusal
from spec.codes import SpecError
from spec.format.json_text import decode_json_text
from spec.format.legacy import upgrade_v0_records, validate_stored_events
from spec.log.json import JsonValue


def records_of(data: bytes) -> list[JsonValue]:
    """Every line of ``data`` that is JSON text, read."""
    records: list[JsonValue] = []
    for line in data.split(b"\n"):
        try:
            records.append(decode_json_text(line))
        except SpecError:
            continue
    return records


def one_input(data: bytes) -> None:
    try:
        events = upgrade_v0_records("s", records_of(data))
    except SpecError as error:
        typed_refusal(error)
        return
    if [event.get("seq") for event in events] != list(range(len(events))):
        raise Finding(f"upgraded events are not numbered 0, 1, 2…: {events!r}")
    validate_stored_events("s", events)
