"""What a store decides: the order of create's checks, the ids it mints, and what a resume hands
back (notes/dsh-session-core §4.4, §4.6, §7.1; SPEC-DECISIONS D2, D3 item 6).

A store is the registry of live sessions and, with persistence, the stored logs. These rules are
the decisions it makes; the reference store and the conformance suite's model both call them, so
there is one answer to "which id", "which check first" and "which log after a resume".
"""

from __future__ import annotations

from collections.abc import Collection, Container, Sequence

from spec.codes import Code, reject
from spec.lineage.repair import derive_closers
from spec.log.events import Event
from spec.log.header import plan_header_record
from spec.log.json import FrozenDict, JsonValue
from spec.log.session import SessionState, create_session_state, plan_session_id, validate_new_session_id


def mint_session_id(
    counter: int, live_ids: Collection[str], stored_ids: Container[str] = ()
) -> tuple[str, int]:
    """A store with persistence mints as a store without (:func:`spec.log.session.plan_session_id`)
    and also skips ids a stored log holds, so a minted id never names an existing session; returns
    the id and the new counter."""
    while True:
        candidate, counter = plan_session_id(counter, live_ids)
        if candidate not in stored_ids:
            return candidate, counter


def plan_create(
    session_id: str,
    live_ids: Collection[str],
    stored_ids: Container[str],
    seed: Sequence[object] | None,
    meta: JsonValue,
    now: int,
    shared: bool = False,
) -> SessionState:
    """Create, in the store's order, once the id is chosen (given, or minted by
    :func:`mint_session_id`, which spends the counter even when create then fails): refuse an id
    that is live; plan the header record; build the session from the seed (a seed is validated
    before the header it names; a fork's seed, a prefix of a live log, is ``shared``); then refuse
    an id a stored log already holds (notes §4.6; a store without persistence passes no stored ids)."""
    validate_new_session_id(live_ids, session_id)
    header = plan_header_record(session_id, meta, now, is_seeded=seed is not None)
    state = create_session_state(session_id, seed, header, now, "shared" if shared else "snapshot")
    if session_id in stored_ids:
        raise reject(Code.SESSION_ALREADY_EXISTS, f'session "{session_id}" already exists on storage')
    return state


def validate_resume_request(session_id: str, live_ids: Collection[str], is_stored: bool) -> None:
    """Resume takes over a stored log that no live session holds: a live id is refused first,
    then an id with no stored log (SPEC-DECISIONS D2; a store without persistence stores none)."""
    if session_id in live_ids:
        raise reject(Code.SESSION_ALREADY_EXISTS, f'cannot resume session "{session_id}" while it is live')
    if not is_stored:
        raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found on storage')


def derive_resumed_log(events: Sequence[Event]) -> tuple[Event, ...]:
    """What a resume makes durable before it returns: the stored log and its crash-repair closers
    (SPEC-DECISIONS D3 items 4, 6)."""
    return (*events, *derive_closers(events))


def derive_resumed_state(
    session_id: str, header: FrozenDict, events: Sequence[Event], now: int
) -> SessionState:
    """The session a resume of the stored ``events`` hands back: the log and its closers restored
    as the seed, then ``session/end-seed`` unless that log already ends with one
    (notes/dsh-session-core §4.4, §8; SPEC-DECISIONS D3 item 6)."""
    return create_session_state(session_id, derive_resumed_log(events), header, now, "restore")
