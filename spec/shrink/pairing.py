"""Tool-pairing balance: where the surface may be cut without separating a tool call from its
result (notes/dsh-compaction-projection §2).

Balance is a counter over the current surface in surface order, never over raw log order and never
over call ids: every top-level ``tool-call`` block of an assistant/message opens one call, every
tool/result node (a prune replacement included) closes one. A cut is balanced when no call is open
across it. A surface of N nodes has N+1 cuts; cut ``i`` lies just before position ``i``.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.codes import Code, SpecError, reject  # noqa: F401 - SpecError is named by the contracts
from spec.log.events import ASSISTANT_MESSAGE, TOOL_RESULT, Event, event_data, tool_call_ids_of
from spec.log.json import index_of, is_event_seq


def derive_pairing_delta(event: Event) -> int:
    """An assistant/message opens one call per top-level ``tool-call`` block of its message
    (nested blocks do not count); a tool/result closes one, whatever call it names; every other
    event is neutral (notes/dsh-compaction-projection §2.1 step 2)."""
    kind = event.get("type")
    if kind == ASSISTANT_MESSAGE:
        return len(tool_call_ids_of(event_data(event).get("message")))
    if kind == TOOL_RESULT:
        return -1
    return 0


def derive_cut_balance(nodes: Sequence[int], events: Sequence[Event]) -> tuple[bool, ...]:
    """Whether each of the N+1 cuts of the surface is balanced, by
    :func:`derive_cut_balance_from_deltas` over the nodes' deltas. Every node must name the log
    event with that seq (``events[seq].seq == seq``); the walk goes node by node, so an orphan
    result before a corrupt node is the error reported (notes/dsh-compaction-projection §2.1
    steps 1-3)."""
    deltas: list[int] = []
    for seq in nodes:
        event = events[seq] if 0 <= seq < len(events) else None
        if event is None or not is_event_seq(event.get("seq")) or event.get("seq") != seq:
            derive_cut_balance_from_deltas(nodes[: len(deltas)], deltas)
            raise reject(
                Code.PAIRING_SURFACE_CORRUPT,
                f"tool-pairing balance: surface seq {seq} has no matching session event (corrupt surface)",
            )
        deltas.append(derive_pairing_delta(event))
    return derive_cut_balance_from_deltas(nodes, deltas)


def derive_cut_balance_from_deltas(nodes: Sequence[int], deltas: Sequence[int]) -> tuple[bool, ...]:
    """Balance is a counter: the count of open calls starts at 0 and adds each node's delta in
    surface order; it must never go below zero (an orphan result), and cut ``i`` is balanced when
    the count over the first ``i`` nodes is 0, so cut 0 always is (notes/dsh-compaction-projection
    §2.1 step 3). ``deltas[i]`` is the delta of the node ``nodes[i]``.

    raises: SpecError
    pre: len(nodes) == len(deltas)
    post: len(__return__) == len(deltas) + 1
    post: all(__return__[i] == (sum(deltas[:i]) == 0) for i in range(len(__return__)))
    post: all(sum(deltas[:i]) >= 0 for i in range(len(__return__)))
    """
    cuts = [True]
    open_calls = 0
    for seq, delta in zip(nodes, deltas):
        open_calls += delta
        if open_calls < 0:
            raise reject(
                Code.PAIRING_ORPHAN_RESULT,
                f"tool-pairing balance: tool/result at surface seq {seq} has no matching tool-call (corrupt surface)",
            )
        cuts.append(open_calls == 0)
    return tuple(cuts)


def _position_on_surface(nodes: Sequence[int], seq: int) -> int:
    position = index_of(list(nodes), seq)
    if position < 0:
        raise reject(Code.PAIRING_SEQ_NOT_ON_SURFACE, f"tool-pairing balance: surface seq {seq} not found")
    return position


def is_balanced_before(nodes: Sequence[int], events: Sequence[Event], seq: int) -> bool:
    """Is the cut just before the node ``seq`` balanced? The whole surface is checked first; then
    ``seq`` must be on the current surface (a node a replace removed is not)
    (notes/dsh-compaction-projection §2.1 step 4)."""
    cuts = derive_cut_balance(nodes, events)
    return cuts[_position_on_surface(nodes, seq)]


def is_balanced_after(nodes: Sequence[int], events: Sequence[Event], seq: int) -> bool:
    """Is the cut just after the node ``seq`` balanced? Same preconditions as
    :func:`is_balanced_before` (notes/dsh-compaction-projection §2.1 step 4)."""
    cuts = derive_cut_balance(nodes, events)
    return cuts[_position_on_surface(nodes, seq) + 1]
