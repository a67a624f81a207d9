"""The whole-log checker: every violation of every rule, each with a stable rule id
(SPEC-DECISIONS D9).

A session enforces its *core* rules as events arrive (notes/dsh-session-core §11.2): seqs count
0, 1, 2..., the envelope and message shapes a restore accepts, and the surface rules. The
*relational* rules describe how well-behaved writers nest their events — turns, steps, tool calls,
compaction brackets, shadow prices, repair closers, the lineage in the header. DSH checks those
only in optional companions (§11.1; notes/dsh-compaction-projection §4.6, §7), and some of them
not at all, so ``check_log(..., relational=False)`` checks the core alone.

The checker never stops at the first problem. Each family below folds the whole log; after a
violation it resynchronises on what the offending event says (a ``turn/start`` while a turn is open
is read as closing that turn first; a refused surface event leaves the surface unchanged), so one
mistake gives one violation rather than a cascade. A violation's ``seq`` is the offending event's
own seq (its position, when it has no usable seq), or ``None`` for the log as a whole.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final

from spec.codes import Code, SpecError
from spec.events import (
    ASSISTANT_CHUNK,
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    REQUEST_CONTEXT,
    REQUEST_HEADER,
    STEP_END,
    STEP_START,
    TODO_WRITE,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    event_data,
)
from spec.json import JsonObject, JsonValue, is_event_seq, is_safe_integer, js_text
from spec.repair import (
    ABSENT,
    INTERRUPTED_REASON_KIND,
    TOOL_NOT_STARTED,
    Field,
    RepairScan,
    apply_repair_scan,
    derive_closers_after,
    field_of,
    identity_key,
    result_call_id,
)
from spec.seed import validate_seed_envelope, validate_seed_llm_shape, validate_seed_request_header_reason
from spec.surface import plan_surface_event, splice_plan


@dataclass(frozen=True)
class Violation:
    """One broken rule: its id (a key of :data:`RULES`), the seq of the offending event (``None``
    for the log as a whole) and what is wrong."""

    rule: str
    seq: int | None
    message: str


RULES: Final[Mapping[str, str]] = MappingProxyType(
    {
        # --- core: a session refuses these as they arrive (notes/dsh-session-core §11.2) ---
        "seq-contiguous": "The log is numbered by position: the event at index i has seq i, so seqs start at 0 and "
        "rise by exactly 1 with no gaps or repeats.",
        "envelope": "An event is {type, seq, time, data, surfaceOp?, sourceEventSeqs?, ignorable?} and nothing "
        "else: type a string, time a safe integer, data present, ignorable only ever true; retired vocabulary "
        "(request/header-delta, request/header reason 'fallback') is refused (§1.3).",
        "message-shape": "Every message an event shows the model has a non-empty id, the role its type needs, a "
        "source with a kind and an array content; an assistant's source names provider and model, a tool result's "
        "source names its call and holds one tool-result block for that same call; a request/header names its "
        "provider and model (§1.4).",
        "surface-op": "Only user/message, assistant/message and tool/result join the surface, and each of them says "
        "how: surfaceOp 'append' or exactly {op:'replace', start, end}. Every other event carries neither surfaceOp "
        "nor sourceEventSeqs (§2.1, §3.4).",
        "surface-replace": "A replace names two nodes that are on the surface right now, the start not after the "
        "end; it swaps that whole span for itself (§3.5).",
        "provenance": "sourceEventSeqs, when present, is a non-empty list (empty only on assistant/message) of "
        "distinct earlier seqs, and a replace cites every node it shadows: nothing leaves the model's view "
        "without a trace of where it went (§3.6).",
        "tool-rewrite": "A tool/result that replaces rewrites exactly one tool/result node and changes only the text "
        "inside its first content block: same call, same ids, same error flag (§3.7).",
        # --- relational: how turns, steps and tool calls nest (notes/dsh-session-core §10, §11.1) ---
        "turn-numbering": "Turns are numbered 1, 2, 3... in the order they start.",
        "turn-open": "A turn starts only when no turn is open: turns never nest or overlap.",
        "turn-end": "A turn/end names the turn that is open; there is no turn/end without an open turn.",
        "step-open": "A step closes before the next step starts and before its turn ends.",
        "step-in-turn": "A step/start names the open turn: steps live inside turns.",
        "step-numbering": "Steps are numbered 1, 2, 3... afresh in every turn.",
        "step-scoped": "step/end, assistant/chunk, assistant/message, tool/call and an appended tool/result name "
        "the open turn and the open step: a model response and its tool calls belong to exactly one step.",
        "tool-result-pairing": "An appended tool/result answers a tool/call logged earlier in the same step; only "
        "crash repair's TOOL_NOT_STARTED result may answer a call that never started. Calls may stay unanswered "
        "when their step ends.",
        "turn-enclosed": "Execution records — todo/write, request/header, request/context and a replacing "
        "tool/result — happen inside an open turn (a step is not needed).",
        # --- relational: compaction (notes/dsh-compaction-projection §4.2, §4.4, §4.6, §7) ---
        "compaction-bracket": "A compaction is a bracket: compaction/start, at most one compaction/summary, then "
        "compaction/end, all with the same compactionId and sourceCommandId (non-empty strings when present). "
        "Brackets never nest, and an end without an error needs the summary. The open bracket is the session's "
        "durable lock; a session/end-seed turns a bracket left open by an earlier lifecycle into a stale orphan "
        "that is never closed.",
        "compaction-turn": "A compaction belongs to one owner: a turn number (it runs inside that open turn) or null "
        "(standalone, between turns). Its summary and end name the same owner, and no turn starts or ends while a "
        "compaction is open.",
        "compaction-summary": "A compaction/summary prices what it replaces: shadowedSeqs is non-empty, "
        "shadowedRange runs from its first to its last seq, shadowedTokenCount is a non-negative safe integer.",
        "compaction-checkpoint": "A replacing user/message whose source is the compact plugin's checkpoint belongs to "
        "the open compaction: same compactionId and sourceCommandId.",
        "shadow-price": "Every surface replace is metered: the event immediately before it is its "
        "compaction/summary (for a user/message) or compaction/prune (for a tool/result) whose shadowedRange has "
        "the replace's start and end, so that a token count can follow the surface in O(1) per event. A metering "
        "event whose replace never came (a failed commit, a crash) prices nothing and is allowed (§7).",
        # --- relational: crash repair and lineage (SPEC-DECISIONS D3 item 6; notes/dsh-session-core §4.3-§4.5) ---
        "closers": "A turn/end with reason 'interrupted' is written only by crash repair, as the last of a block of "
        "closers equal to what repair derives from the log before the block.",
        "seed-length": "The header's seedLength, when present, is a seq no larger than the number of events: it "
        "counts the events inherited from a parent.",
        "end-seed": "The inherited events of a forked or seeded session end with a session/end-seed: at "
        "seedLength - 1 or seedLength when the header has a seedLength, somewhere when isSeeded is true.",
    }
)

CORE_RULES: Final = frozenset(
    {"seq-contiguous", "envelope", "message-shape", "surface-op", "surface-replace", "provenance", "tool-rewrite"}
)
RELATIONAL_RULES: Final = frozenset(RULES) - CORE_RULES

SURFACE_RULE_OF_CODE: Final[Mapping[Code, str]] = MappingProxyType(
    {
        Code.SEQ_NOT_CONTIGUOUS: "seq-contiguous",
        Code.REPLACE_START_NOT_FOUND: "surface-replace",
        Code.REPLACE_END_NOT_FOUND: "surface-replace",
        Code.REPLACE_INVERTED: "surface-replace",
        Code.PROVENANCE_NOT_ARRAY: "provenance",
        Code.PROVENANCE_EMPTY: "provenance",
        Code.PROVENANCE_NOT_SEQ: "provenance",
        Code.PROVENANCE_DUPLICATE: "provenance",
        Code.PROVENANCE_NOT_EARLIER: "provenance",
        Code.PROVENANCE_MISSING_SHADOWED: "provenance",
        Code.TOOL_REWRITE_NOT_ONE_NODE: "tool-rewrite",
        Code.TOOL_REWRITE_NOT_A_RESULT: "tool-rewrite",
        Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT: "tool-rewrite",
    }
)  # every other surface code is a "surface-op" violation

STEP_SCOPED_TYPES: Final = frozenset({STEP_END, ASSISTANT_CHUNK, ASSISTANT_MESSAGE, TOOL_CALL})
TURN_ENCLOSED_TYPES: Final = frozenset({TODO_WRITE, REQUEST_HEADER, REQUEST_CONTEXT})
METERED_REPLACEMENT_TYPE: Final[Mapping[str, str]] = MappingProxyType(
    {COMPACTION_SUMMARY: USER_MESSAGE, COMPACTION_PRUNE: TOOL_RESULT}
)


def check_log(events: Sequence[Event], header: JsonObject | None = None, relational: bool = True) -> tuple[Violation, ...]:
    """Every violation in the log, ordered by seq (log-wide ones first) (SPEC-DECISIONS D9).
    The core rules (:data:`CORE_RULES`, what a DSH session itself refuses) are always checked.
    ``relational=True`` (the default) adds :data:`RELATIONAL_RULES`, which DSH leaves to optional
    companions or does not check at all; given a ``header`` it also ties the header's lineage to the
    log. ``relational=False`` answers "would DSH load this log?", the default "is it well formed?"."""
    found = list(check_core(events))
    if relational:
        found += check_turn_structure(events)
        found += check_compaction(events)
        found += check_shadow_price(events)
        found += check_closers(events)
        if header is not None:
            found += check_header_lineage(events, header)
    return tuple(sorted(found, key=lambda violation: -1 if violation.seq is None else violation.seq))


# --- core ----------------------------------------------------------------------------------------


def check_core(events: Sequence[Event]) -> Iterator[Violation]:
    """Replay the log the way a restore does: each event's seq follows the one before it, its
    envelope and message are checked, then its surface effect is planned against the surface so far
    and applied; a refused event changes nothing (notes/dsh-session-core §4.2, §11.2). After a gap
    the count resumes from the event's own seq, so a gap is one violation, not one per later event."""
    nodes: list[int] = []
    by_seq: dict[int, Event] = {}
    length = 0  # one past the largest seq read so far
    expected = 0
    for position, event in enumerate(events):
        seq = event.get("seq")
        if seq != expected or not is_event_seq(seq):
            yield Violation(
                "seq-contiguous", _at(event, position), f"session event seq {js_text(seq)} is not contiguous; expected {expected}"
            )
            if not is_event_seq(seq):
                event = {**event, "seq": expected}
        placed = int(event["seq"])  # type: ignore[arg-type]
        try:
            validate_seed_envelope(placed, event)
            validate_seed_request_header_reason(placed, event)
        except SpecError as error:
            yield Violation("envelope", placed, str(error))
        try:
            validate_seed_llm_shape(placed, event)
        except SpecError as error:
            yield Violation("message-shape", placed, str(error))
        try:
            plan = plan_surface_event(nodes, event, placed, _EventsBySeq(by_seq, length))
        except SpecError as error:
            yield Violation(SURFACE_RULE_OF_CODE.get(error.code, "surface-op"), placed, str(error))
        else:
            if plan is not None:
                splice_plan(nodes, plan)
        by_seq[placed] = event
        length = max(length, placed + 1)
        expected = placed + 1


class _EventsBySeq(Sequence[Event]):
    """The events read so far, indexed by seq (a seq never read gives an empty event), so that the
    surface rules look shadowed nodes up correctly even in a log with gaps."""

    def __init__(self, by_seq: Mapping[int, Event], length: int) -> None:
        self._by_seq = by_seq
        self._length = length

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, seq: int) -> Event:  # type: ignore[override]
        return self._by_seq.get(seq, {})


# --- turns, steps and tool calls (notes/dsh-session-core §11.1) ------------------------------------


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
        yield from check_turn_event(trace, _at(event, position), event)
        trace = apply_turn_event(trace, event)


def check_turn_event(trace: TurnTrace, at: int, event: Event) -> Iterator[Violation]:
    """One event against the trace: turn boundaries nest and count from 1; steps live in the open
    turn, never overlap and count from 1 in each turn; step-scoped events name the open turn and
    step; an appended tool/result answers a call started in the step (or is repair's not-started
    result); execution records sit inside a turn. ``user/message``, ``session/end-seed`` and every
    other type are free (notes/dsh-session-core §11.1)."""
    kind = event.get("type")
    data = event_data(event)
    turn, step = field_of(data, "turn"), field_of(data, "step")
    if kind == TURN_START:
        if trace.open_turn is not None:
            yield Violation("turn-open", at, f"turn/start {_shown(turn)} while turn {_shown(trace.open_turn)} is still open")
        expected = trace.next_turn + (1 if trace.open_turn is not None else 0)
        if not _same(turn, expected):
            yield Violation("turn-numbering", at, f"turn/start expected turn {expected}, got {_shown(turn)}")
    elif kind == TURN_END:
        if trace.open_turn is None or not _same(trace.open_turn, turn):
            yield Violation("turn-end", at, f"turn/end {_shown(turn)} does not match open turn {_shown(trace.open_turn)}")
        if trace.open_step is not None:
            yield Violation("step-open", at, f"turn/end {_shown(turn)} while step {_shown(trace.open_step)} is still open")
    elif kind == STEP_START:
        if trace.open_turn is None or not _same(trace.open_turn, turn):
            yield Violation("step-in-turn", at, f"step/start in turn {_shown(turn)} but open turn is {_shown(trace.open_turn)}")
        if trace.open_step is not None:
            yield Violation("step-open", at, f"step/start {_shown(step)} while step {_shown(trace.open_step)} is still open")
        expected = trace.next_step + (1 if trace.open_step is not None else 0)
        if not _same(step, expected):
            yield Violation("step-numbering", at, f"step/start expected step {expected} in turn {_shown(turn)}, got {_shown(step)}")
    elif is_step_scoped(event):
        in_step = (
            trace.open_turn is not None and trace.open_step is not None
            and _same(trace.open_turn, turn) and _same(trace.open_step, step)
        )  # fmt: skip
        if not in_step:
            yield Violation(
                "step-scoped",
                at,
                f"{kind} names turn {_shown(turn)}/step {_shown(step)} but open is turn {_shown(trace.open_turn)}/step "
                f"{_shown(trace.open_step)}",
            )
        elif kind == TOOL_RESULT and identity_key(result_call_id(event)) not in trace.pending_calls:
            if not is_not_started_result(event):
                call_id = _shown(result_call_id(event))
                yield Violation("tool-result-pairing", at, f"tool/result for {call_id} with no prior tool/call in this step")
    elif kind == TOOL_RESULT and isinstance(event.get("surfaceOp"), dict) and trace.open_turn is None:
        yield Violation("turn-enclosed", at, "tool/result surface replacement appended outside any open turn")
    elif kind in TURN_ENCLOSED_TYPES and trace.open_turn is None:
        yield Violation("turn-enclosed", at, f"{kind} appended outside any open turn (core execution events must be turn-enclosed)")


def apply_turn_event(trace: TurnTrace, event: Event) -> TurnTrace:
    """The trace after one event. It follows what the event says even when the event broke a rule:
    a turn/start while a turn is open first closes that turn (likewise for steps), and the numbers
    resume from the ones the event carries, so that one mistake is reported once."""
    kind = event.get("type")
    data = event_data(event)
    turn, step = field_of(data, "turn"), field_of(data, "step")
    if kind == TURN_START:
        closed = _closed_turn(trace) if trace.open_turn is not None else trace
        next_turn = int(turn) if is_safe_integer(turn) else closed.next_turn  # type: ignore[arg-type]
        return TurnTrace(open_turn=turn, next_turn=next_turn)
    if kind == TURN_END:
        return _closed_turn(trace) if trace.open_turn is not None else trace
    if kind == STEP_START:
        closed = _closed_step(trace) if trace.open_step is not None else trace
        next_step = int(step) if is_safe_integer(step) else closed.next_step  # type: ignore[arg-type]
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
    return kind in STEP_SCOPED_TYPES or (kind == TOOL_RESULT and event.get("surfaceOp") == "append")


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


# --- compaction brackets (notes/dsh-compaction-projection §4.4, §4.6) ------------------------------


@dataclass(frozen=True)
class _Bracket:
    """The open compaction: its compaction/start's data, where that start sits, and whether its
    summary has been written."""

    data: JsonObject
    start_position: int
    summarized: bool = False


def check_compaction(events: Sequence[Event]) -> Iterator[Violation]:
    """Follow the open turn and the open compaction bracket; each compaction event must fit them,
    and turn boundaries must not cross an open bracket. A ``session/end-seed`` makes an open bracket
    a stale orphan: it is forgotten, and the turn boundaries before that end-seed may cross it (a
    parent's repair closers) (notes/dsh-compaction-projection §4.4, §4.6)."""
    inherited = _inherited_orphan_starts(events)
    open_turn: JsonValue = None
    bracket: _Bracket | None = None
    for position, event in enumerate(events):
        kind = event.get("type")
        data = event_data(event)
        at = _at(event, position)
        if kind in (TURN_START, TURN_END):
            if bracket is not None and bracket.start_position not in inherited:
                yield Violation("compaction-turn", at, f"{kind} cannot cross an open {_owner_text(bracket.data)}")
            open_turn = data.get("turn") if kind == TURN_START else None
        elif kind == END_SEED:
            bracket = None
        elif kind == COMPACTION_START:
            yield from _compaction_ids(at, kind, data)
            if bracket is not None:
                yield Violation(
                    "compaction-bracket", at, f"compaction/start while {_holder_text(bracket.data)} is still compacting"
                )
            yield from _owner_check(at, kind, data.get("turn"), open_turn)
            bracket = _Bracket(data=data, start_position=position)
        elif kind == COMPACTION_SUMMARY:
            yield from _compaction_ids(at, kind, data)
            yield from _matches_open_bracket(at, kind, data, bracket)
            if bracket is not None:
                yield from _owner_check(at, kind, bracket.data.get("turn"), open_turn)
                if bracket.summarized:
                    yield Violation("compaction-bracket", at, "compaction/summary repeated within one compaction")
                bracket = replace(bracket, summarized=True)
            yield from _summary_shape(at, data)
        elif kind == COMPACTION_END:
            yield from _compaction_ids(at, kind, data)
            yield from _matches_open_bracket(at, kind, data, bracket)
            if bracket is not None:
                yield from _compaction_end_owner(at, data, bracket, open_turn)
                if "error" not in data and not bracket.summarized:
                    yield Violation("compaction-bracket", at, "successful compaction/end requires one compaction/summary")
            bracket = None
        elif kind == USER_MESSAGE and isinstance(event.get("surfaceOp"), dict) and is_compact_checkpoint(data):
            yield from _checkpoint_check(at, data, bracket)


def is_compact_checkpoint(message: JsonObject) -> bool:
    """A compaction checkpoint message has source ``{kind: "plugin", plugin: "compact"}``; only those
    two fields are looked at (notes/dsh-compaction-projection §4.3)."""
    source = message.get("source")
    return isinstance(source, dict) and source.get("kind") == "plugin" and source.get("plugin") == "compact"


def _inherited_orphan_starts(events: Sequence[Event]) -> frozenset[int]:
    """Positions of compaction/starts still open when a later session/end-seed arrives."""
    orphans: set[int] = set()
    open_start: int | None = None
    for position, event in enumerate(events):
        kind = event.get("type")
        if kind == COMPACTION_START:
            open_start = position
        elif kind == COMPACTION_END:
            open_start = None
        elif kind == END_SEED and open_start is not None:
            orphans.add(open_start)
            open_start = None
    return frozenset(orphans)


def _compaction_ids(at: int, kind: object, data: JsonObject) -> Iterator[Violation]:
    compaction_id = data.get("compactionId")
    if not isinstance(compaction_id, str) or compaction_id == "":
        yield Violation("compaction-bracket", at, f"{kind} compactionId must be a non-empty string")
    if "sourceCommandId" in data and (not isinstance(data["sourceCommandId"], str) or data["sourceCommandId"] == ""):
        yield Violation("compaction-bracket", at, f"{kind} sourceCommandId must be a non-empty string")


def _matches_open_bracket(at: int, kind: object, data: JsonObject, bracket: _Bracket | None) -> Iterator[Violation]:
    if bracket is None:
        yield Violation("compaction-bracket", at, f"{kind} has no matching compaction/start")
        return
    for key, label in (("compactionId", "id"), ("sourceCommandId", "sourceCommandId")):
        mine, theirs = field_of(data, key), field_of(bracket.data, key)
        if not _same(mine, theirs):
            yield Violation(
                "compaction-bracket", at, f"{kind} {label} {_shown(mine)} does not match compaction/start {label} {_shown(theirs)}"
            )


def _owner_check(at: int, kind: object, owner: JsonValue, open_turn: JsonValue) -> Iterator[Violation]:
    if owner is None and open_turn is not None:
        yield Violation("compaction-turn", at, f"{kind} is standalone but turn {_shown(open_turn)} is open")
    elif owner is not None and open_turn is None:
        yield Violation("compaction-turn", at, f"{kind} for turn {_shown(owner)} appended outside any open turn")
    elif owner is not None and not _same(owner, open_turn):
        yield Violation("compaction-turn", at, f"{kind} names turn {_shown(owner)} but open turn is {_shown(open_turn)}")


def _compaction_end_owner(at: int, data: JsonObject, bracket: _Bracket, open_turn: JsonValue) -> Iterator[Violation]:
    owner, started = field_of(data, "turn"), field_of(bracket.data, "turn")
    if not _same(owner, started):
        yield Violation(
            "compaction-turn", at, f"compaction/end owner {_shown(owner)} does not match compaction/start owner {_shown(started)}"
        )
    yield from _owner_check(at, COMPACTION_END, bracket.data.get("turn"), open_turn)


def _summary_shape(at: int, data: JsonObject) -> Iterator[Violation]:
    seqs, shadowed_range = data.get("shadowedSeqs"), data.get("shadowedRange")
    if not isinstance(seqs, list) or not seqs:
        yield Violation("compaction-summary", at, "compaction/summary shadowedSeqs must be non-empty")
    elif not (
        isinstance(shadowed_range, dict)
        and _same(field_of(shadowed_range, "start"), seqs[0])
        and _same(field_of(shadowed_range, "end"), seqs[-1])
    ):
        yield Violation(
            "compaction-summary", at, "compaction/summary shadowedRange must match the first and last shadowedSeqs"
        )
    tokens = data.get("shadowedTokenCount")
    if not is_event_seq(tokens):
        yield Violation(
            "compaction-summary", at, "compaction/summary shadowedTokenCount must be a non-negative safe integer"
        )


def _checkpoint_check(at: int, message: JsonObject, bracket: _Bracket | None) -> Iterator[Violation]:
    source = message.get("source")
    assert isinstance(source, dict)
    compaction_id = source.get("compactionId")
    if not isinstance(compaction_id, str) or compaction_id == "":
        yield Violation("compaction-checkpoint", at, "compaction checkpoint compactionId must be a non-empty string")
    if "sourceCommandId" in source and (not isinstance(source["sourceCommandId"], str) or source["sourceCommandId"] == ""):
        yield Violation("compaction-checkpoint", at, "compaction checkpoint sourceCommandId must be a non-empty string")
    if bracket is None:
        yield Violation("compaction-checkpoint", at, "compaction checkpoint has no matching compaction/start")
        return
    for key, label in (("compactionId", "id"), ("sourceCommandId", "sourceCommandId")):
        mine, theirs = field_of(source, key), field_of(bracket.data, key)
        if not _same(mine, theirs):
            yield Violation(
                "compaction-checkpoint",
                at,
                f"compaction checkpoint {label} {_shown(mine)} does not match compaction/start {label} {_shown(theirs)}",
            )


def _owner_text(start: JsonObject) -> str:
    turn = start.get("turn")
    return "standalone compaction" if turn is None else f"compaction for turn {_shown(turn)}"


def _holder_text(start: JsonObject) -> str:
    turn = start.get("turn")
    return "standalone compaction" if turn is None else f"turn {_shown(turn)}"


# --- shadow prices (notes/dsh-compaction-projection §7) --------------------------------------------


def check_shadow_price(events: Sequence[Event]) -> Iterator[Violation]:
    """A surface replace is immediately preceded by its metering event: a compaction/summary for a
    user/message, a compaction/prune for a tool/result, naming the replace's range
    (notes/dsh-compaction-projection §7). A metering event whose replace never came (the commit
    failed, or a crash cut the log) prices nothing and breaks nothing."""
    for position, event in enumerate(events):
        op = event.get("surfaceOp")
        if isinstance(op, dict) and event.get("type") in (USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT):
            previous = events[position - 1] if position > 0 else None
            yield from _metered(_at(event, position), event, op, previous)


def _metered(at: int, event: Event, op: JsonObject, previous: Event | None) -> Iterator[Violation]:
    start, end = field_of(op, "start"), field_of(op, "end")
    span = f"{_shown(start)}-{_shown(end)}"
    meter = previous.get("type") if previous is not None else None
    if previous is None or meter not in METERED_REPLACEMENT_TYPE:
        yield Violation("shadow-price", at, f"replace at seq {at} over range {span} has no adjacent shadow price")
        return
    shadowed_range = event_data(previous).get("shadowedRange")
    claimed = (
        (field_of(shadowed_range, "start"), field_of(shadowed_range, "end")) if isinstance(shadowed_range, dict) else (ABSENT, ABSENT)
    )
    if not (_same(claimed[0], start) and _same(claimed[1], end)):
        yield Violation(
            "shadow-price",
            at,
            f"replace at seq {at} over range {span} has no adjacent shadow price "
            f"(armed claim covers {_shown(claimed[0])}-{_shown(claimed[1])})",
        )
    elif event.get("type") != METERED_REPLACEMENT_TYPE[str(meter)]:
        metered = METERED_REPLACEMENT_TYPE[str(meter)]
        yield Violation("shadow-price", at, f"{event.get('type')} replace at seq {at} follows a {meter}, which meters a {metered}")


# --- crash-repair closers (SPEC-DECISIONS D3 item 6) ------------------------------------------------


def check_closers(events: Sequence[Event]) -> Iterator[Violation]:
    """Wherever a turn is open, see whether the events from there on are exactly the closers repair
    derives for the log so far; a ``turn/end`` with reason ``interrupted`` must be the last event
    of such a block (notes/dsh-session-core §9; SPEC-DECISIONS D3 item 6)."""
    scan = RepairScan()
    verified_ends: set[int] = set()
    for position, event in enumerate(events):
        if scan.open_turn is not None and position > 0 and event.get("type") in (TOOL_RESULT, COMPACTION_END, STEP_END, TURN_END):
            expected = derive_closers_after(scan, events[position - 1], _at(events[position - 1], position - 1) + 1)
            if tuple(events[position : position + len(expected)]) == expected:
                verified_ends.add(position + len(expected) - 1)
        if _is_interrupted_turn_end(event) and position not in verified_ends:
            at = _at(event, position)
            yield Violation(
                "closers",
                at,
                f"interrupted turn/end at seq {at} does not end the closers repair derives for the log before them",
            )
        scan = apply_repair_scan(scan, event)


def _is_interrupted_turn_end(event: Event) -> bool:
    reason = event_data(event).get("reason")
    return event.get("type") == TURN_END and isinstance(reason, dict) and reason.get("kind") == INTERRUPTED_REASON_KIND


# --- the header's lineage (notes/dsh-session-core §4.3-§4.5; SPEC-DECISIONS D1) -------------------


def check_header_lineage(events: Sequence[Event], header: JsonObject) -> Iterator[Violation]:
    """``seedLength`` counts inherited events, so it is at most the log's length, and the inherited
    events end with a ``session/end-seed`` at ``seedLength - 1`` (the seed already ended with one)
    or at ``seedLength``; ``isSeeded: true`` promises an end-seed somewhere."""
    if "seedLength" in header:
        seed_length = header["seedLength"]
        if not is_event_seq(seed_length) or seed_length > len(events):  # type: ignore[operator]
            yield Violation(
                "seed-length", None, f"header seedLength {js_text(seed_length)} is not a seq within the log's {len(events)} events"
            )
        elif not any(
            0 <= at < len(events) and events[at].get("type") == END_SEED
            for at in (int(seed_length) - 1, int(seed_length))  # type: ignore[arg-type]
        ):
            yield Violation(
                "end-seed", None, f"no session/end-seed at seq {js_text(seed_length)} or just before it (header seedLength)"
            )
    if header.get("isSeeded") is True and not any(event.get("type") == END_SEED for event in events):
        yield Violation("end-seed", None, "the header says isSeeded but the log has no session/end-seed")


# --- values as JavaScript compares and prints them --------------------------------------------------


def _at(event: Event, at: int) -> int:
    """Where a violation points: the event's own seq, or its at when it has no usable seq."""
    seq = event.get("seq")
    return int(seq) if is_event_seq(seq) else at  # type: ignore[arg-type]


def _same(a: Field | None, b: Field | None) -> bool:
    """JavaScript's ``===`` on JSON values read from events: numbers by value, ``true`` never equal
    to ``1``, ``undefined`` never equal to ``null``, objects and arrays never equal."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a is b if (a is ABSENT or b is ABSENT) else a == b


def _shown(value: Field | None) -> str:
    return "undefined" if value is ABSENT else js_text(value)
