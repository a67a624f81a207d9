"""Surface planning and application: what the model sees, as a fold of the log
(notes/dsh-session-core §3, §6).

The surface is an ordered list of seqs (the *nodes*) plus ``replaceGeneration``, the count of
replaces so far. A surface-eligible event joins it by ``append`` (push its seq) or by
``{op:"replace", start, end}`` (splice the nodes from ``start`` to ``end``, positions looked up on
the current surface, and put its own seq in their place). Planning decides; applying changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from spec.codes import Code, SpecError, reject  # noqa: F401 - SpecError is named by the contracts
from spec.log.events import Event, Message, derive_event_message, is_surface_eligible_type
from spec.log.json import is_event_seq, js_text
from spec.log.nodes import SurfaceNodes
from spec.log.provenance import validate_provenance
from spec.log.tool_rewrite import validate_tool_result_rewrite

APPEND: Final = "append"
REPLACE_KEYS: Final = frozenset({"op", "start", "end"})


@dataclass(frozen=True)
class ReplaceOp:
    """``{op: "replace", start, end}``: start and end are seqs of nodes on the current surface."""

    start: int
    end: int


SurfaceOp: TypeAlias = Literal["append"] | ReplaceOp


@dataclass(frozen=True)
class Surface:
    """The fold state: the nodes in model-visible order, and how many replaces have landed."""

    nodes: tuple[int, ...] = ()
    replace_generation: int = 0


@dataclass(frozen=True)
class AppendPlan:
    seq: int


@dataclass(frozen=True)
class ReplacePlan:
    """A replace, resolved: positions ``first..last`` (inclusive) hold the ``shadowed`` nodes."""

    seq: int
    start: int
    end: int
    first: int
    last: int
    shadowed: tuple[int, ...]


SurfacePlan: TypeAlias = AppendPlan | ReplacePlan | None
"""``None`` is the plan of a log-only event: the surface does not change."""


@dataclass(frozen=True)
class Replacement:
    """One landed replace, as recorded by :func:`fold_surface`."""

    seq: int
    start: int
    end: int
    shadowed: tuple[int, ...]


@dataclass(frozen=True)
class SurfaceFold:
    """The whole-log fold: the surface, and every replacement in log order."""

    nodes: tuple[int, ...]
    replace_generation: int
    replacements: tuple[Replacement, ...] = field(default=())


def read_surface_op(event: Event) -> SurfaceOp | None:
    """A log-only event carries neither ``surfaceOp`` nor ``sourceEventSeqs`` and has no op
    (``None``). A surface-eligible event must carry ``"append"`` or an object with exactly the keys
    ``op: "replace"``, ``start`` and ``end``, both event seqs (notes/dsh-session-core §3.4)."""
    kind = event.get("type")
    if not is_surface_eligible_type(kind):
        if "surfaceOp" in event:
            raise reject(
                Code.SURFACE_OP_ON_LOG_ONLY,
                f'session event "{kind}" is not surface-eligible and cannot carry surfaceOp',
            )
        if "sourceEventSeqs" in event:
            raise reject(
                Code.PROVENANCE_ON_LOG_ONLY,
                f'session event "{kind}" is not surface-eligible and cannot carry sourceEventSeqs',
            )
        return None
    if "surfaceOp" not in event:
        raise reject(
            Code.SURFACE_OP_MISSING,
            f'session event "{kind}" is surface-eligible and requires a surfaceOp marker',
        )
    op = event["surfaceOp"]
    if op == APPEND:
        return APPEND
    if not isinstance(op, dict):
        raise reject(Code.SURFACE_OP_INVALID, f'session event "{kind}" carries an invalid surfaceOp')
    if (
        set(op) != REPLACE_KEYS
        or op["op"] != "replace"
        or not is_event_seq(op["start"])
        or not is_event_seq(op["end"])
    ):
        raise reject(Code.REPLACE_OP_INVALID, f'session event "{kind}" carries an invalid replace surfaceOp')
    return ReplaceOp(start=int(op["start"]), end=int(op["end"]))


def plan_replace(nodes: Sequence[int], op: ReplaceOp) -> tuple[int, int]:
    """A replace names two nodes currently on the surface, the start node not after the end node;
    it shadows every node between them, both included (notes/dsh-session-core §3.5).
    Returns the positions ``(first, last)``.

    raises: SpecError
    post: 0 <= __return__[0] <= __return__[1] < len(nodes)
    post: nodes[__return__[0]] == op.start and nodes[__return__[1]] == op.end
    """
    first = position_of(nodes, op.start)
    if first < 0:
        raise reject(
            Code.REPLACE_START_NOT_FOUND, f"surface replace: start seq {op.start} not found in surface"
        )
    last = position_of(nodes, op.end)
    if last < 0:
        raise reject(Code.REPLACE_END_NOT_FOUND, f"surface replace: end seq {op.end} not found in surface")
    if first > last:
        raise reject(
            Code.REPLACE_INVERTED,
            f"surface replace: start seq {op.start} (index {first}) is after end seq {op.end} (index {last})",
        )
    return first, last


def position_of(nodes: Sequence[int], seq: int) -> int:
    """Where ``seq`` stands on the surface, or -1 (JavaScript's ``indexOf``). A long fold passes a
    :class:`spec.log.nodes.SurfaceNodes`, whose lookup does not scan."""
    try:
        return nodes.index(seq)
    except ValueError:
        return -1


def plan_surface_event(
    nodes: Sequence[int], event: Event, expected_seq: int, events: Sequence[Event], base_seq: int = 0
) -> SurfacePlan:
    """Decide how ``event`` changes the surface, without changing it. In order: its seq is the next
    one; its op is well formed (log-only events stop here); an append has valid provenance; a
    replace resolves on the surface, then its provenance covers every shadowed node, then a
    tool/result replace obeys the rewrite rule. ``events[s - base_seq]`` is the log event at seq
    ``s`` (notes/dsh-session-core §3.3)."""
    seq = event.get("seq")
    # An int equal to the expected seq (nearly every event) is an event seq: decided without a call.
    if not (type(seq) is int and seq == expected_seq) and not (is_event_seq(seq) and seq == expected_seq):
        raise reject(
            Code.SEQ_NOT_CONTIGUOUS,
            f"session event seq {js_text(seq)} is not contiguous; expected {expected_seq}",
        )
    op = read_surface_op(event)
    if op is None:
        return None
    if op == APPEND:
        validate_provenance(event, ())
        return AppendPlan(seq=expected_seq)
    assert isinstance(op, ReplaceOp)
    first, last = plan_replace(nodes, op)
    shadowed = tuple(nodes[first : last + 1])
    validate_provenance(event, shadowed)
    if len(shadowed) == 1:
        position = shadowed[0] - base_seq
        original = events[position] if 0 <= position < len(events) else None
    else:
        original = None
    validate_tool_result_rewrite(event, shadowed, original)
    return ReplacePlan(
        seq=expected_seq, start=op.start, end=op.end, first=first, last=last, shadowed=shadowed
    )


def apply_surface_plan(surface: Surface, plan: SurfacePlan) -> Surface:
    """An append pushes the seq; a replace puts its seq where the first shadowed node stood,
    removes the rest of the span, and adds one to ``replaceGeneration``; log-only changes nothing
    (notes/dsh-session-core §3.8).

    pre: not isinstance(plan, ReplacePlan) or 0 <= plan.first <= plan.last < len(surface.nodes)
    post: plan is not None or __return__ == surface
    post: not isinstance(plan, AppendPlan) or __return__.nodes == surface.nodes + (plan.seq,)
    post: not isinstance(plan, ReplacePlan) or len(__return__.nodes) == len(surface.nodes) - (plan.last - plan.first)
    post: not isinstance(plan, ReplacePlan) or __return__.replace_generation == surface.replace_generation + 1
    post: not isinstance(plan, ReplacePlan) or __return__.nodes[plan.first] == plan.seq
    """
    if plan is None:
        return surface
    nodes = list(surface.nodes)
    generation = splice_plan(nodes, plan, surface.replace_generation)
    return Surface(nodes=tuple(nodes), replace_generation=generation)


def splice_plan(nodes: list[int] | SurfaceNodes, plan: AppendPlan | ReplacePlan, generation: int = 0) -> int:
    """:func:`apply_surface_plan` on a mutable node list, for folds over long logs: returns the
    ``replaceGeneration`` after it, ``generation`` (the one before) plus one for a replace."""
    if isinstance(plan, AppendPlan):
        nodes.append(plan.seq)
        return generation
    nodes[plan.first : plan.last + 1] = [plan.seq]
    return generation + 1


def fold_surface(events: Sequence[Event], base_seq: int = 0) -> SurfaceFold:
    """Replay a contiguous run of events starting at ``base_seq`` (0 for a whole log) from an empty
    surface, planning and applying each in turn; the first invalid event raises
    (notes/dsh-session-core §3.9, §3.10)."""
    nodes = SurfaceNodes()
    generation = 0
    replacements: list[Replacement] = []
    for index, event in enumerate(events):
        plan = plan_surface_event(nodes, event, base_seq + index, events, base_seq)
        if plan is None:
            continue
        generation = splice_plan(nodes, plan, generation)
        if isinstance(plan, ReplacePlan):
            replacements.append(
                Replacement(seq=plan.seq, start=plan.start, end=plan.end, shadowed=plan.shadowed)
            )
    return SurfaceFold(nodes=tuple(nodes), replace_generation=generation, replacements=tuple(replacements))


def derive_messages(events: Sequence[Event], nodes: Sequence[int], base_seq: int = 0) -> list[Message]:
    """The model-visible messages: one per surface node, in surface order, leaving out nodes that
    derive no message. Shadowed and log-only events never appear (notes/dsh-session-core §6)."""
    messages: list[Message] = []
    for seq in nodes:
        message = derive_event_message(events[seq - base_seq])
        if message is not None:
            messages.append(message)
    return messages
