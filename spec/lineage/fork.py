"""Fork: a new session whose seed is a prefix of a live session's log (notes/dsh-session-core §7.1).

The store checks, in order: the child id is free, neither live nor stored (only when one is
given), the source is live, the boundary names an event, the boundary is not inside an open turn
nor inside an open compaction bracket. The child's seed is the source log up to and including the
boundary; its header names the parent and the seed length. The parent is never changed.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Sequence

from spec.codes import Code, SpecError, reject  # noqa: F401 - SpecError is named by the contracts
from spec.log.events import Event, event_data
from spec.log.json import JsonObject, JsonValue, is_event_seq, js_text
from spec.log.session import ABSENT, validate_new_session_id
from spec.log.unclosed import derive_open_turn_start, find_active_compaction


def validate_fork_request(
    live_ids: Collection[str], source_id: str, child_id: str | None, stored_ids: Container[str] = ()
) -> None:
    """A given child id must be free, checked before anything else: not live, and not held by a
    stored log (a store with persistence passes its stored ids; without, none); then the source
    must be a live session (§7.1 steps 1-2, §14.8; the seed: "子 session id 已经被占用（这个检查在验证
    boundary 之前）"). Whether a session *object* is the live instance (``SESSION_NOT_LIVE``) is a
    question of identity, answered by the store that holds it."""
    if child_id is not None:
        validate_new_session_id(live_ids, child_id)
        if child_id in stored_ids:
            raise reject(Code.SESSION_ALREADY_EXISTS, f'session "{child_id}" already exists on storage')
    if source_id not in live_ids:
        raise reject(Code.SESSION_NOT_FOUND, f'session "{source_id}" not found')


def plan_fork_seed(source_id: str, events: Sequence[Event], boundary: object = ABSENT) -> tuple[Event, ...]:
    """The child's seed: the source log up to and including ``boundary`` (default: the last event;
    an empty source with no boundary gives an empty seed). The boundary must be an event seq, then
    name a matching event (:func:`plan_fork_seed_length`), then not lie inside an open turn
    (§7.1 step 3, §14.9), then not inside an open compaction bracket
    (:func:`validate_boundary_outside_open_compaction`)."""
    if boundary is ABSENT:
        if not events:
            return ()
        boundary = events[-1].get("seq")
    if not is_event_seq(boundary):
        raise reject(
            Code.INVALID_BOUNDARY,
            f'fork boundary for session "{source_id}" must be a non-negative safe integer, got {js_text(boundary)}',
        )
    cut = int(boundary)
    length = plan_fork_seed_length(source_id, [event.get("seq") for event in events], cut)
    validate_boundary_outside_open_turn(source_id, events, cut)
    validate_boundary_outside_open_compaction(source_id, events, cut)
    return tuple(events[:length])


def plan_fork_seed_length(source_id: str, seqs: Sequence[object], boundary: int) -> int:
    """The seed is the first ``boundary + 1`` events, so the boundary must name an event that
    exists (``seqs`` are the log's seqs in order) and whose position matches its seq (§7.1 step 3,
    §14.9).

    raises: SpecError
    pre: boundary >= 0
    post: __return__ == boundary + 1 <= len(seqs)
    post: seqs[__return__ - 1] == boundary
    """
    if boundary >= len(seqs):
        last = js_text(seqs[-1]) if seqs else "none"
        raise reject(
            Code.INVALID_BOUNDARY,
            f'fork boundary {boundary} does not exist in session "{source_id}" (last seq: {last})',
        )
    if seqs[boundary] != boundary:
        raise reject(
            Code.INVALID_BOUNDARY,
            f'fork boundary {boundary} does not match a contiguous event seq in session "{source_id}"',
        )
    return boundary + 1


def validate_boundary_outside_open_turn(source_id: str, events: Sequence[Event], boundary: int) -> None:
    """No turn may be open at the boundary (:func:`spec.log.unclosed.derive_open_turn_start` over the
    types of the events up to it): a fork never inherits half a turn. Steps, tool pairing and
    everything after the boundary are not looked at (§7.1 step 3, §14.10)."""
    start = derive_open_turn_start([event.get("type") for event in events[: boundary + 1]])
    if start is not None:
        turn = event_data(events[start]).get("turn", ABSENT)
        shown = "undefined" if turn is ABSENT else js_text(turn)
        raise reject(
            Code.OPEN_TURN,
            f'fork boundary {boundary} in session "{source_id}" ends inside open turn {shown}',
        )


def validate_boundary_outside_open_compaction(source_id: str, events: Sequence[Event], boundary: int) -> None:
    """No compaction bracket may be open at the boundary (the live lock of
    :func:`spec.log.unclosed.find_active_compaction` over the events up to it). A bracket inside a
    turn is already refused as an open turn, so this is the standalone one, between turns. A fork
    refuses it rather than give the child a closer the parent never wrote: the seed's child is
    "源 session 事件的 [0, boundary] 切片", a slice and nothing else, and its answer to a boundary
    inside an unfinished unit is a refusal ("为什么不能在 open turn 内 fork？… 子 session 继承了一个
    '说了一半话'的状态"); the marker the child then gets would leave the start dangling, which the seed
    forbids ("日志里不会出现悬挂的 start")."""
    start = find_active_compaction(events[: boundary + 1])
    if start is not None:
        compaction_id = event_data(start).get("compactionId", ABSENT)
        shown = "undefined" if compaction_id is ABSENT else js_text(compaction_id)
        raise reject(
            Code.OPEN_COMPACTION,
            f'fork boundary {boundary} in session "{source_id}" ends inside open compaction {shown}',
        )


def derive_child_meta(source_header: JsonObject, source_id: str, seed_length: int) -> dict[str, JsonValue]:
    """The child's lineage: the parent's ``cwd`` when it has one, ``parentSession`` = the parent's
    id, ``seedLength`` = the seed's length — the seed's "meta 包含三个字段" and nothing more.
    ``createdAt`` is the child's own; ``delegationDepth``, ``origin`` and ``agentPreset`` are NOT
    inherited (§7.1 step 4, §14.7): a fork's child is a new conversation, not a sub-agent, so it
    starts at the top level (depth 0, no ``origin``); a sub-agent seeded from a prefix is created
    with its own ``origin: "subagent"`` and depth (``create`` with a seed and meta), and a resume
    keeps whatever depth was stored (``spec.checks.lineage.is_delegation_depth_consistent``)."""
    meta: dict[str, JsonValue] = {}
    cwd = source_header.get("cwd")
    if cwd is not None:
        meta["cwd"] = cwd
    meta["parentSession"] = source_id
    meta["seedLength"] = seed_length
    return meta
