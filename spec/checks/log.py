"""The whole-log checker: every violation of every rule, each with a stable rule id
(SPEC-DECISIONS D9).

A session enforces its *core* rules as events arrive (notes/dsh-session-core §11.2): seqs count
0, 1, 2..., the envelope and message shapes a restore accepts, and the surface rules. The
*relational* rules describe how well-behaved writers nest their events — turns, steps, tool calls,
compaction brackets, shadow prices, repair closers, the lineage in the header. DSH checks those
only in optional companions (§11.1; notes/dsh-compaction-projection §4.6, §7), and some of them
not at all, so ``check_log(..., relational=False)`` checks the core alone.

The core family is here; the relational families are :mod:`spec.checks.turns` (turns, steps and
tool calls), :mod:`spec.checks.compaction` (compaction brackets and shadow prices) and
:mod:`spec.checks.lineage` (crash-repair closers and the header's lineage). :data:`RULES` names
every rule of every family in one table.

The checker never stops at the first problem. Each family folds the whole log; after a
violation it resynchronises on what the offending event says (a ``turn/start`` while a turn is open
is read as closing that turn first; a refused surface event leaves the surface unchanged), so one
mistake gives one violation rather than a cascade. A violation's ``seq`` is the offending event's
own seq (its position, when it has no usable seq), or ``None`` for the log as a whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Final

from spec.checks.compaction import check_compaction, check_shadow_price
from spec.checks.lineage import check_closers, check_header_lineage
from spec.checks.turns import check_turn_structure
from spec.checks.violation import Violation, violation_seq
from spec.codes import Code, SpecError
from spec.format.json_text import encode_json_text
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION
from spec.log.json import JsonObject, is_event_seq, js_text
from spec.log.nodes import SurfaceNodes
from spec.log.seed import (
    validate_seed_envelope,
    validate_seed_llm_shape,
    validate_seed_request_header_reason,
)
from spec.log.surface import plan_surface_event, splice_plan

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
        "compaction-dangling": "A compaction/start is never left dangling: the bracket is closed before any "
        "session/end-seed. A resume closes it first (its closers), a fork or a seed refuses to end inside it, and "
        "only the store writes an end-seed, so a start that an end-seed orphans broke a rule (the seed: "
        "'日志里不会出现悬挂的 start').",
        "legacy-compaction-dangling": "The same dangling start in a DSH v0 log, whose resume left open brackets "
        "for the end-seed to orphan: reported as legacy, what DSH 0.1 wrote, not as a new violation.",
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
        "closers equal to what repair derives from the log before the block; a tool/result with repair's error code "
        "(TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN) lies inside such a block.",
        "seed-length": "The header's seedLength, when present, is a seq no larger than the number of events: it "
        "counts the events inherited from a parent.",
        "end-seed": "The inherited events of a forked or seeded session end with a session/end-seed: at "
        "seedLength - 1 or seedLength when the header has a seedLength, somewhere when isSeeded is true.",
        "delegation-depth": "A sub-agent's session (header origin 'subagent') is at delegationDepth 1 or more: a "
        "sub-agent at depth 0 has lost its depth and would 'think it is at the top level and bypass the recursion "
        "limit' (the resume/fork/compaction seed). A resume keeps the stored depth; a fork's child is no sub-agent "
        "and inherits neither origin nor depth.",
    }
)

CORE_RULES: Final = frozenset(
    {
        "seq-contiguous",
        "envelope",
        "message-shape",
        "surface-op",
        "surface-replace",
        "provenance",
        "tool-rewrite",
    }
)
RELATIONAL_RULES: Final = frozenset(RULES) - CORE_RULES
LEGACY_RULES: Final = frozenset({"legacy-compaction-dangling"})
"""Rules that report what a DSH v0 log holds and this specification now forbids: found and
reported, but not violations of a log written under the current rules (``dsh-session check``
does not fail on them)."""

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


def check_log(
    events: Sequence[Event],
    header: JsonObject | None = None,
    relational: bool = True,
    format_version: int = HEADER_FORMAT_VERSION,
    messages_checked: int = 0,
) -> tuple[Violation, ...]:
    """Every violation in the log, ordered by seq (log-wide ones first) (SPEC-DECISIONS D9).
    The core rules (:data:`CORE_RULES`, what a DSH session itself refuses) are always checked.
    ``relational=True`` (the default) adds :data:`RELATIONAL_RULES`, which DSH leaves to optional
    companions or does not check at all; given a ``header`` it also ties the header's lineage to the
    log. ``relational=False`` answers "would DSH load this log?", the default "is it well formed?".
    ``format_version`` is the format the log was stored in: for a DSH v0 log (0) what DSH 0.1 left
    and the rules now forbid is reported under :data:`LEGACY_RULES`. ``messages_checked``: the
    first that many events come from a stored log whose read path checked their messages by the
    same rule (:func:`check_core`)."""
    found = list(check_core(events, messages_checked))
    if relational:
        found += check_turn_structure(events)
        found += check_compaction(events, legacy=format_version == LEGACY_FORMAT_VERSION)
        found += check_shadow_price(events)
        found += check_closers(events)
        if header is not None:
            found += check_header_lineage(events, header)
    return tuple(sorted(found, key=lambda violation: -1 if violation.seq is None else violation.seq))


# --- core ----------------------------------------------------------------------------------------


def check_core(events: Sequence[Event], messages_checked: int = 0) -> Iterator[Violation]:
    """Replay the log the way a restore does: each event's seq follows the one before it, its
    envelope and message are checked, then its surface effect is planned against the surface so far
    and applied; a refused event changes nothing (notes/dsh-session-core §4.2, §11.2). After a gap
    the count resumes from the event's own seq, so a gap is one violation, not one per later event.
    An event without a usable seq is replayed one past the event before it, but each of its
    violations points where every family's do (:func:`spec.checks.violation.violation_seq`: its
    position), so one event's violations are never reported at two seqs. ``messages_checked``: the
    first that many events were read from a stored log whose read path checked each message by the
    same rule (``spec.format.legacy.validate_stored_events``, ``upgrade_v0_records``) and refuses the
    log otherwise, so their message shape is not checked twice (as a restore's
    ``create_session_state``); every other rule is still judged on every event."""
    nodes = SurfaceNodes()
    by_seq: dict[int, Event] = {}
    read = _EventsBySeq(by_seq)  # one view, kept up to date: not one built per event (issue 24)
    expected = 0
    for position, event in enumerate(events):
        seq = event.get("seq")
        usable = is_event_seq(seq)
        at = violation_seq(event, position)
        if seq != expected or not usable:
            yield Violation(
                "seq-contiguous",
                at,
                f"session event seq {js_text(seq)} is not contiguous; expected {expected}",
            )
        placed = at
        if not usable:
            placed = expected
            event = {**event, "seq": placed}
        try:
            validate_seed_envelope(placed, event)
            validate_seed_request_header_reason(placed, event)
        except SpecError as error:
            yield Violation("envelope", at, str(error))
        try:
            validate_seed_llm_shape(placed, event, position < messages_checked)
        except SpecError as error:
            yield Violation("message-shape", at, str(error))
        try:
            plan = plan_surface_event(nodes, event, placed, read)
        except SpecError as error:
            yield Violation(SURFACE_RULE_OF_CODE.get(error.code, "surface-op"), at, str(error))
        else:
            if plan is not None:
                splice_plan(nodes, plan)
        by_seq[placed] = event
        if placed >= read.length:
            read.length = placed + 1
        expected = placed + 1


def check_session_copy(
    header: JsonObject, events: Sequence[Event], copied_header: JsonObject, copied_events: Sequence[Event]
) -> tuple[str, ...]:
    """What is wrong with a copy read back from its destination (empty: nothing): it must be the
    same log (:func:`spec.lineage.transfer.is_same_log`) and the whole-log checker must report exactly the same
    violations on both (D9), so copying neither repairs nor damages anything."""
    problems: list[str] = []
    if encode_json_text(copied_header) != encode_json_text(header):
        problems.append("the copied header differs from the source's")
    if len(copied_events) != len(events):
        problems.append(f"the copy holds {len(copied_events)} events, the source {len(events)}")
    else:
        for mine, theirs in zip(events, copied_events):
            if encode_json_text(mine) != encode_json_text(theirs):
                problems.append(f"event seq {mine.get('seq')} differs in the copy")
                break
    before = [(violation.rule, violation.seq) for violation in check_log(events, header)]
    after = [(violation.rule, violation.seq) for violation in check_log(copied_events, copied_header)]
    if before != after:
        problems.append(
            f"the checker reports {len(after)} violation(s) on the copy, {len(before)} on the source"
        )
    return tuple(problems)


class _EventsBySeq(Sequence[Event]):
    """The events read so far, indexed by seq (a seq never read gives an empty event), so that the
    surface rules look shadowed nodes up correctly even in a log with gaps. ``length`` is one past
    the largest seq read so far; the replay moves it on as it reads."""

    def __init__(self, by_seq: Mapping[int, Event]) -> None:
        self._by_seq = by_seq
        self.length = 0

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, seq: int) -> Event:  # type: ignore[override]
        return self._by_seq.get(seq, {})
