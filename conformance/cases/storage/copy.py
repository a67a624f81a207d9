"""Copying a session to another store (SPEC-DECISIONS D2, D5; docs/choices.md "Copying between
backends"): the copy is written when the destination holds no session of that id, skipped when
it holds exactly the source's log (a re-run completes an interrupted copy), and refused, nothing
overwritten, when it holds any other log under that id, however small the difference: one
header field, one event more or fewer, one event's text (key order, ``true`` for ``1``).
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import Cases, chained, event, log, pure
from conformance.cases.storage.naming import V4_LINE
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue

COPY = "spec.transfer.plan_session_copy"
HEADER: Final = V4_LINE  # the source's header
EVENTS: Final = log(msg.user("u1", "hello"), msg.assistant("a1"), msg.user("u2", "again"))
LATER_LAST: Final = log(msg.user("u1", "hello"), msg.assistant("a1"), msg.user("u3", "again"))  # sorts after
REFUSED: Final = (
    "a destination that holds another log under the session's id is left untouched: a new session "
    "never replaces a stored one (SPEC-DECISIONS D2)"
)
SAME_TEXT: Final = (
    "two logs are the same when their header and their events have the same JSON text, one by one "
    "(SPEC-DECISIONS D5: the text, not a looser equality)"
)
LONG: Final = 300  # events: more than the small integers a runtime may share as one object


def held(header: JsonObject, events: list[JsonValue]) -> JsonObject:
    """The ``found`` input: the log a destination holds."""
    return {"header": header, "events": events}


def notes(count: int) -> list[JsonValue]:
    """``count`` plugin events ``x/note``, seqs from 0."""
    return [event(seq, "x/note", {"n": seq}) for seq in range(count)]


def plan_cases() -> Cases:
    yield pure(
        "a session the destination does not hold is written",
        COPY,
        header=HEADER,
        events=EVENTS,
        found=None,
    )
    yield pure(
        "a destination that holds the very same log has it already: the copy is skipped",
        COPY,
        why="running a copy again completes an interrupted one instead of refusing what it wrote",
        header=HEADER,
        events=EVENTS,
        found=held(HEADER, EVENTS),
    )
    yield pure(
        "a destination that holds the same header and no events has an empty source's log already",
        COPY,
        header=HEADER,
        events=[],
        found=held(HEADER, []),
    )
    yield pure(
        "a long log the destination holds whole is already copied",
        COPY,
        why=SAME_TEXT,
        comment=f"{LONG} events: a length compared by identity would differ",
        header=HEADER,
        events=notes(LONG),
        found=held(HEADER, notes(LONG)),
    )


def refused_cases() -> Cases:
    later = {**HEADER, "createdAt": 2_000}
    refused: list[tuple[str, JsonObject, list[JsonValue], JsonObject]] = [
        (
            "a destination whose header was created later holds another session: refused",
            HEADER,
            EVENTS,
            held(later, EVENTS),
        ),
        (
            "a destination whose header was created earlier holds another session: refused",
            later,
            EVENTS,
            held(HEADER, EVENTS),
        ),
        (
            "a destination whose header differs only in its key order holds another log: refused",
            HEADER,
            EVENTS,
            held({**dict(reversed(list(HEADER.items())))}, EVENTS),
        ),
        (
            "a destination that holds a prefix of the source's log holds another log: refused",
            HEADER,
            EVENTS,
            held(HEADER, EVENTS[:2]),
        ),
        (
            "a destination that holds the source's log and more holds another log: refused",
            HEADER,
            EVENTS[:2],
            held(HEADER, EVENTS),
        ),
        (
            "a destination that holds events under a header with no events at the source: refused",
            HEADER,
            [],
            held(HEADER, EVENTS[:1]),
        ),
        (
            "a destination whose last event's text sorts after the source's holds another log: refused",
            HEADER,
            EVENTS,
            held(HEADER, LATER_LAST),
        ),
        (
            "a destination whose last event's text sorts before the source's holds another log: refused",
            HEADER,
            LATER_LAST,
            held(HEADER, EVENTS),
        ),
        (
            "a destination whose event holds 1 where the source holds true holds another log: refused",
            HEADER,
            [*notes(2)[:1], event(1, "x/note", {"n": True})],
            held(HEADER, notes(2)),
        ),
        (
            "a destination whose event holds the same keys in another order holds another log: refused",
            HEADER,
            [event(0, "x/note", {"a": 1, "b": 2})],
            held(HEADER, [event(0, "x/note", {"b": 2, "a": 1})]),
        ),
    ]
    for name, header, events, found in refused:
        why = REFUSED if "was created" in name else SAME_TEXT
        yield pure(
            name, COPY, Code.SESSION_ALREADY_EXISTS, why=why, header=header, events=events, found=found
        )


cases: Final = chained(plan_cases, refused_cases)
