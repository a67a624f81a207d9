"""The checker, :func:`spec.checks.log.check_log`, on logs decoded from the fuzzer's bytes: the
first line, when it is a JSON object, is the header; every later line that is a JSON object is
one event (frozen as a restore freezes it), whatever its shape — the checker's input is any
sequence of events, valid or not, and it must say what is wrong with them.

Oracle, for any bytes ``data``: ``check_log`` returns (never raises), both with the relational
rules and without, and for the v4 and the v0 format; each violation names a rule of ``RULES``
and a seq that is ``None`` or an event's place as every rule reports it
(:func:`spec.checks.violation.violation_seq`: its seq, or its position when it has no usable seq);
the core violations are a subset of the full check's.
"""

from __future__ import annotations

from fuzz import Finding
from spec.checks.log import RULES, check_log
from spec.checks.violation import violation_seq
from spec.codes import SpecError
from spec.format.json_text import decode_json_text
from spec.log.events import Event
from spec.log.json import FrozenDict, JsonObject, freeze_parsed_json


def decoded_log(data: bytes) -> tuple[JsonObject | None, list[Event]]:
    """The header (the first line, when it is an object) and the events (every later object line)."""
    header: JsonObject | None = None
    events: list[Event] = []
    for index, line in enumerate(data.split(b"\n")):
        try:
            value = freeze_parsed_json(decode_json_text(line))
        except SpecError:
            continue
        if not isinstance(value, FrozenDict):
            continue
        if index == 0:
            header = value
        else:
            events.append(value)
    return header, events


def one_input(data: bytes) -> None:
    header, events = decoded_log(data)
    places = {violation_seq(event, position) for position, event in enumerate(events)}
    core = check_log(events, relational=False)
    for format_version in (4, 0):
        full = check_log(events, header, relational=True, format_version=format_version)
        for violation in full:
            if violation.rule not in RULES:
                raise Finding(f"a violation of a rule the checker does not list: {violation!r}")
            if violation.seq is not None and violation.seq not in places:
                raise Finding(f"a violation at seq {violation.seq}, no event's place: {violation!r}")
        missing = set(core) - set(full)
        if missing:
            raise Finding(f"core violations the full check lost: {missing!r}")
