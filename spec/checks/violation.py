"""What the whole-log checker reports: a violation, where it points, and how the JSON values it
read from events are compared and printed, as DSH's JavaScript compares and prints them
(SPEC-DECISIONS D9).

Each family of checker rules (:mod:`spec.checks.log` and the ``spec.checks`` modules) builds its
violations from these, so that a seq, a comparison or a printed value means the same in each.
"""

from __future__ import annotations

from dataclasses import dataclass

from spec.lineage.repair import Field
from spec.log.events import Event
from spec.log.json import is_event_seq, js_text
from spec.log.session import ABSENT


@dataclass(frozen=True)
class Violation:
    """One broken rule: its id (a key of :data:`spec.checks.log.RULES`), the seq of the offending event
    (``None`` for the log as a whole) and what is wrong."""

    rule: str
    seq: int | None
    message: str


def violation_seq(event: Event, position: int) -> int:
    """Where a violation points: the event's own seq, or its position when it has no usable seq."""
    seq = event.get("seq")
    return int(seq) if is_event_seq(seq) else position


def is_strict_equal(a: Field | None, b: Field | None) -> bool:
    """JavaScript's ``===`` on JSON values read from events: numbers by value, ``true`` never equal
    to ``1``, ``undefined`` never equal to ``null``, objects and arrays never equal."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a is b if (a is ABSENT or b is ABSENT) else a == b


def field_text(value: Field | None) -> str:
    """A value read from an event as a message shows it: as JavaScript prints it, ``undefined``
    when the field is absent."""
    return "undefined" if value is ABSENT else js_text(value)
