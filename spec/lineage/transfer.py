"""Copying sessions between stores: when a copy may be written, when it is already there, and when
it is a faithful copy (SPEC-DECISIONS D2, D5, D9; this project's choice, docs/choices.md
"Copying between backends").

A copy writes a session's whole durable log in one flush, so on any store it is published whole or
not at all. A destination that already holds the session is left alone: if it holds exactly the
source's log the copy is already done (an interrupted run is completed by running it again); if it
holds anything else, that is a different session and nothing overwrites it. A copy is checked by
reading it back (:func:`spec.checks.log.check_session_copy`, in the checker's chapter): the same
header, the same event texts, and the whole-log checker's verdict unchanged, so a copy neither
loses nor adds a thing the checker would see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from spec.codes import Code, reject
from spec.format.json_text import encode_json_text
from spec.log.events import Event
from spec.log.json import JsonObject

CopyPlan = Literal["write", "already-copied"]
WRITE: Final = "write"
ALREADY_COPIED: Final = "already-copied"


def is_same_log(
    header: JsonObject, events: Sequence[Event], other_header: JsonObject, other_events: Sequence[Event]
) -> bool:
    """Two logs are the same when their headers and their events have the same JSON text, one by
    one (D5: the text, not a looser notion of equal numbers)."""
    if encode_json_text(header) != encode_json_text(other_header) or len(events) != len(other_events):
        return False
    return all(
        encode_json_text(mine) == encode_json_text(theirs) for mine, theirs in zip(events, other_events)
    )


def plan_session_copy(
    header: JsonObject,
    events: Sequence[Event],
    found: tuple[JsonObject, Sequence[Event]] | None,
) -> CopyPlan:
    """Copy a session when the destination does not hold it; skip it when the destination holds
    exactly the source's log (a completed earlier copy); refuse it, writing nothing, when the
    destination holds anything else under that id (D2: a new session never replaces a stored one)."""
    if found is None:
        return WRITE
    if is_same_log(header, events, found[0], found[1]):
        return ALREADY_COPIED
    session_id = header.get("id")
    raise reject(
        Code.SESSION_ALREADY_EXISTS,
        f'session "{session_id}" already exists at the destination with a different log '
        f"({len(found[1])} events there, {len(events)} in the source); nothing was overwritten",
    )
