"""What a log leaves unclosed at its end: the open turn (fork's and crash repair's open-turn rule,
notes/dsh-session-core §7.1, §9) and the live compaction lock (notes/dsh-compaction-projection
§4.4). Seeds, fork, repair and the compaction bracket all ask these questions of a log.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spec.log.events import (
    COMPACTION_END,
    COMPACTION_START,
    END_SEED,
    TURN_END,
    TURN_START,
    Event,
    event_data,
)
from spec.log.json import is_safe_integer

# --- the open turn (notes/dsh-session-core §7.1 step 3, §9) --------------------------------------


def derive_open_turn_start(kinds: Sequence[object]) -> int | None:
    """The position of the turn still open after the events of types ``kinds``: the last
    ``turn/start`` or ``turn/end`` when it is a ``turn/start``, else ``None`` (§7.1 step 3). So
    ``None`` means every ``turn/start`` has a ``turn/end`` after it.

    post: __return__ is None or kinds[__return__] == TURN_START
    post: __return__ is None or all(kind not in (TURN_START, TURN_END) for kind in kinds[__return__ + 1 :])
    post: (__return__ is None) == all(TURN_END in kinds[i + 1 :] for i, kind in enumerate(kinds) if kind == TURN_START)
    """
    open_start: int | None = None
    for position, kind in enumerate(kinds):
        if kind == TURN_START:
            open_start = position
        elif kind == TURN_END:
            open_start = None
    return open_start


def has_open_turn(events: Sequence[Event]) -> bool:
    """A log ends inside a turn when a ``turn/start`` is still open after it: the open-turn rule
    of fork (:func:`derive_open_turn_start`), which crash repair and pressure share
    (notes/dsh-session-core §9, §10)."""
    return derive_open_turn_start([event.get("type") for event in events]) is not None


# --- the durable compaction lock (notes/dsh-compaction-projection §4.4) ------------------------


@dataclass(frozen=True)
class CompactionEntryState:
    """What a compaction needs to know about the log before it starts."""

    latest_end_seed_seq: int | None
    unmatched_start: Event | None
    open_turn: int | None


def derive_compaction_entry_state(events: Sequence[Event]) -> CompactionEntryState:
    """``inspectCompactionEntryState``, three facts read from the newest relevant events: the seq of
    the newest ``session/end-seed``; the newest of ``compaction/start``/``compaction/end`` if it is a
    start (an unmatched start); the newest of ``turn/start``/``turn/end`` if it is a start, as its
    ``data.turn`` (notes/dsh-compaction-projection §4.4). A turn/start whose turn is not a safe integer counts as no open turn
    (a project choice)."""
    end_seed: int | None = None
    bracket: Event | None = None
    turn: Event | None = None
    seen_bracket = seen_turn = False
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        kind = event.get("type")
        if kind == END_SEED and end_seed is None:
            end_seed = index
        elif kind in (COMPACTION_START, COMPACTION_END) and not seen_bracket:
            seen_bracket, bracket = True, event
        elif kind in (TURN_START, TURN_END) and not seen_turn:
            seen_turn, turn = True, event
        if end_seed is not None and seen_bracket and seen_turn:
            break
    unmatched = bracket if bracket is not None and bracket.get("type") == COMPACTION_START else None
    open_turn: int | None = None
    if turn is not None and turn.get("type") == TURN_START:
        number = event_data(turn).get("turn")
        open_turn = int(number) if is_safe_integer(number) else None
    return CompactionEntryState(latest_end_seed_seq=end_seed, unmatched_start=unmatched, open_turn=open_turn)


def find_active_compaction(events: Sequence[Event]) -> Event | None:
    """The live lock: the unmatched ``compaction/start``, unless a newer ``session/end-seed`` makes
    it a stale orphan of an earlier process lifecycle, which never blocks (notes/dsh-compaction-projection §4.4)."""
    state = derive_compaction_entry_state(events)
    start = state.unmatched_start
    if start is None:
        return None
    start_seq = start.get("seq")
    if (
        state.latest_end_seed_seq is not None
        and is_safe_integer(start_seq)
        and state.latest_end_seed_seq > start_seq
    ):
        return None
    return start
