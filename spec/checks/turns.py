"""The checker's relational rules for turns, steps and tool calls: how well-behaved writers nest
them (notes/dsh-session-core §10, §11.1; SPEC-DECISIONS D9). The rule ids are in
:data:`spec.checks.log.RULES`; :func:`spec.checks.log.check_log` runs this family with the others.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from spec.checks.violation import Violation, field_text, is_strict_equal, violation_seq
from spec.lineage.repair import TOOL_NOT_STARTED, Field, field_of, identity_key, result_call_id
from spec.log.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    Event,
    event_data,
    is_named,
)
from spec.log.json import is_safe_integer

STEP_SCOPED_TYPES: Final = frozenset({STEP_END, ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL})
TURN_ENCLOSED_TYPES: Final = frozenset({TODO_WRITE, REQUEST_HEADER, REQUEST_CONTEXT})


@dataclass(frozen=True)
class TurnTrace:
    """Where the log stands between events: the open turn and step (``None`` when none is open),
    the numbers the next turn and step should carry, and the calls started in the open step."""

    open_turn: Field | None = None
    open_step: Field | None = None
    next_turn: int = 1
    next_step: int = 1
    pending_calls: frozenset[Hashable] = frozenset()


def check_turn_structure(events: Sequence[Event]) -> Iterator[Violation]:
    """Follow the open turn, the open step and the calls started in that step; each event must fit
    them (notes/dsh-session-core §11.1). As in DSH, each event is first checked against the trace,
    then the trace moves on."""
    trace = TurnTrace()
    for position, event in enumerate(events):
        yield from check_turn_event(trace, violation_seq(event, position), event)
        trace = apply_turn_event(trace, event)


TurnRule: TypeAlias = Callable[[TurnTrace, int, Event], Violation | None]
"""One checker rule of this family: the violation event ``at`` commits against the trace, if any."""


def check_turn_event(trace: TurnTrace, at: int, event: Event) -> Iterator[Violation]:
    """One event against the trace, by the rules for its kind (:func:`derive_turn_rules`), in
    order: turn boundaries nest and count from 1; steps live in the open turn, never overlap and
    count from 1 in each turn; step-scoped events name the open turn and step; an appended
    tool/result answers a call started in the step (or is repair's not-started result); execution
    records sit inside a turn. ``user/message``, ``session/end-seed`` and every other type are
    free (notes/dsh-session-core §11.1)."""
    for rule in derive_turn_rules(event):
        violation = rule(trace, at, event)
        if violation is not None:
            yield violation


def derive_turn_rules(event: Event) -> tuple[TurnRule, ...]:
    """The rules an event answers to, in the order they are reported: a ``turn/start``, a
    ``turn/end`` and a ``step/start`` those of its kind; a step-scoped event
    (:func:`is_step_scoped`) the step's rules; anything else the turn-enclosed rule, which leaves
    every type but the execution records and a replacing tool/result free."""
    kind = event.get("type")
    if kind == TURN_START:
        return (check_turn_not_open, check_turn_numbering)
    if kind == TURN_END:
        return (check_turn_end, check_step_closed)
    if kind == STEP_START:
        return (check_step_in_turn, check_step_closed, check_step_numbering)
    if is_step_scoped(event):
        return (check_step_scoped, check_tool_result_pairing)
    return (check_turn_enclosed,)


def turn_and_step(event: Event) -> tuple[Field, Field]:
    """``data.turn`` and ``data.step``, ``ABSENT`` where missing."""
    data = event_data(event)
    return field_of(data, "turn"), field_of(data, "step")


def check_turn_not_open(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``turn-open``: a turn starts only when no turn is open; turns never nest or overlap."""
    if trace.open_turn is None:
        return None
    turn, _ = turn_and_step(event)
    return Violation(
        "turn-open",
        at,
        f"turn/start {field_text(turn)} while turn {field_text(trace.open_turn)} is still open",
    )


def check_turn_numbering(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``turn-numbering``: turns are numbered 1, 2, 3... in the order they start; a turn/start
    while a turn is open counts that turn as closed."""
    turn, _ = turn_and_step(event)
    expected = trace.next_turn + (1 if trace.open_turn is not None else 0)
    if is_strict_equal(turn, expected):
        return None
    return Violation("turn-numbering", at, f"turn/start expected turn {expected}, got {field_text(turn)}")


def check_turn_end(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``turn-end``: a turn/end names the turn that is open; there is no turn/end without an open
    turn."""
    turn, _ = turn_and_step(event)
    if trace.open_turn is not None and is_strict_equal(trace.open_turn, turn):
        return None
    return Violation(
        "turn-end", at, f"turn/end {field_text(turn)} does not match open turn {field_text(trace.open_turn)}"
    )


def check_step_closed(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``step-open``: a step closes before the next step starts (a ``step/start``) and before its
    turn ends (a ``turn/end``)."""
    if trace.open_step is None:
        return None
    kind = event.get("type")
    turn, step = turn_and_step(event)
    number = turn if kind == TURN_END else step
    return Violation(
        "step-open", at, f"{kind} {field_text(number)} while step {field_text(trace.open_step)} is still open"
    )


def check_step_in_turn(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``step-in-turn``: a step/start names the open turn; steps live inside turns."""
    turn, _ = turn_and_step(event)
    if trace.open_turn is not None and is_strict_equal(trace.open_turn, turn):
        return None
    return Violation(
        "step-in-turn",
        at,
        f"step/start in turn {field_text(turn)} but open turn is {field_text(trace.open_turn)}",
    )


def check_step_numbering(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``step-numbering``: steps are numbered 1, 2, 3... afresh in every turn; a step/start while
    a step is open counts that step as closed."""
    turn, step = turn_and_step(event)
    expected = trace.next_step + (1 if trace.open_step is not None else 0)
    if is_strict_equal(step, expected):
        return None
    return Violation(
        "step-numbering",
        at,
        f"step/start expected step {expected} in turn {field_text(turn)}, got {field_text(step)}",
    )


def is_in_open_step(trace: TurnTrace, event: Event) -> bool:
    """The event names the open turn and the open step, and both are open."""
    turn, step = turn_and_step(event)
    return (
        trace.open_turn is not None
        and trace.open_step is not None
        and is_strict_equal(trace.open_turn, turn)
        and is_strict_equal(trace.open_step, step)
    )


def check_step_scoped(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``step-scoped``: a step-scoped event (:func:`is_step_scoped`) names the open turn and the
    open step (:func:`is_in_open_step`)."""
    if is_in_open_step(trace, event):
        return None
    turn, step = turn_and_step(event)
    return Violation(
        "step-scoped",
        at,
        f"{event.get('type')} names turn {field_text(turn)}/step {field_text(step)} but open is turn "
        f"{field_text(trace.open_turn)}/step {field_text(trace.open_step)}",
    )


def check_tool_result_pairing(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``tool-result-pairing``: an appended tool/result in the open step answers a tool/call
    logged earlier in that step, unless it is crash repair's result for a call that never started
    (:func:`is_not_started_result`). One outside the open step is the step-scoped rule's."""
    if (
        event.get("type") != TOOL_RESULT
        or not is_in_open_step(trace, event)
        or identity_key(result_call_id(event)) in trace.pending_calls
        or is_not_started_result(event)
    ):
        return None
    call_id = field_text(result_call_id(event))
    return Violation(
        "tool-result-pairing", at, f"tool/result for {call_id} with no prior tool/call in this step"
    )


def check_turn_enclosed(trace: TurnTrace, at: int, event: Event) -> Violation | None:
    """``turn-enclosed``: execution records — todo/write, request/header, request/context — and a
    tool/result that replaces are appended only inside an open turn."""
    if trace.open_turn is not None:
        return None
    kind = event.get("type")
    if kind == TOOL_RESULT and isinstance(event.get("surfaceOp"), dict):
        return Violation(
            "turn-enclosed", at, "tool/result surface replacement appended outside any open turn"
        )
    if is_named(kind, TURN_ENCLOSED_TYPES):
        return Violation(
            "turn-enclosed",
            at,
            f"{kind} appended outside any open turn (core execution events must be turn-enclosed)",
        )
    return None


def apply_turn_event(trace: TurnTrace, event: Event) -> TurnTrace:
    """The trace after one event. It follows what the event says even when the event broke a rule:
    a turn/start while a turn is open first closes that turn (likewise for steps), and the numbers
    resume from the ones the event carries, so that one mistake is reported once."""
    kind = event.get("type")
    data = event_data(event)
    turn, step = field_of(data, "turn"), field_of(data, "step")
    if kind == TURN_START:
        closed = _closed_turn(trace) if trace.open_turn is not None else trace
        next_turn = int(turn) if is_safe_integer(turn) else closed.next_turn
        return TurnTrace(open_turn=turn, next_turn=next_turn)
    if kind == TURN_END:
        return _closed_turn(trace) if trace.open_turn is not None else trace
    if kind == STEP_START:
        closed = _closed_step(trace) if trace.open_step is not None else trace
        next_step = int(step) if is_safe_integer(step) else closed.next_step
        return replace(closed, open_step=step, next_step=next_step)
    if kind == STEP_END:
        return _closed_step(trace) if trace.open_step is not None else trace
    if kind == TOOL_CALL:
        return replace(trace, pending_calls=trace.pending_calls | {identity_key(field_of(data, "callId"))})
    if kind == TOOL_RESULT and event.get("surfaceOp") == "append":
        return replace(trace, pending_calls=trace.pending_calls - {identity_key(result_call_id(event))})
    return trace


def _closed_turn(trace: TurnTrace) -> TurnTrace:
    return TurnTrace(next_turn=trace.next_turn + 1)


def _closed_step(trace: TurnTrace) -> TurnTrace:
    return replace(trace, open_step=None, pending_calls=frozenset(), next_step=trace.next_step + 1)


def is_step_scoped(event: Event) -> bool:
    """step/end, assistant/chunk, assistant/message, tool/call and an appended tool/result belong
    to one step (notes/dsh-session-core §11.1)."""
    kind = event.get("type")
    return is_named(kind, STEP_SCOPED_TYPES) or (kind == TOOL_RESULT and event.get("surfaceOp") == "append")


def is_not_started_result(event: Event) -> bool:
    """Crash repair's result for a call that never started: its first content block is an error
    and ``data.error.code`` is ``TOOL_NOT_STARTED`` (notes/dsh-session-core §11.1)."""
    data = event_data(event)
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    error = data.get("error")
    return (
        isinstance(first, dict)
        and first.get("isError") is True
        and isinstance(error, dict)
        and error.get("code") == TOOL_NOT_STARTED
    )
