"""The engine ops' run in the spec model (:mod:`conformance.engine_model`): one op on one live
session as it goes (:class:`_Run`), the summary transaction with its bracket (notes §4.5), the prune
pass (§6.3) and ``compactIfNeeded`` (§5.3), each decision a call into ``spec``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from conformance.model import (
    LiveSession,
    ModelStore,
    _flushed,
    _write_if_batch_due,
)
from spec.codes import Code, SpecError, reject
from spec.log.events import (
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
)
from spec.log.json import JsonObject
from spec.log.session import ABSENT, SessionState, append_event
from spec.log.writers import CALLER, COMPACTION_ENGINE, Writer
from spec.shrink.bracket import (
    MANUAL_FAILURE_TEXT,
    Stage,
    derive_abort_reason,
    derive_compaction_end,
    derive_compaction_lifecycle,
    derive_error_chain,
    derive_manual_outcome,
    plan_compaction_owner,
    should_flush_after_close,
    validate_compaction_inactive,
)
from spec.shrink.compaction import (
    CompactionPolicy,
    CompactionRegion,
    plan_compaction_region,
    resolve_compact_spec,
    select_compactable_range,
    validate_surface_stable,
)
from spec.shrink.pressure import (
    FORCED_RETAIN_TOKENS,
    PRESSURE_STAGE,
    derive_context_tokens,
    is_under_pressure,
    validate_context_capacity,
    validate_pressure_relieved,
    validate_prune_in_turn,
)
from spec.shrink.prune import PruneConfig, plan_prune_events
from spec.shrink.summary import (
    SummarizerOutput,
    derive_checkpoint_message,
    derive_shadowed_token_count,
    derive_summary_blocks,
    plan_summary_replacement,
    validate_summary_smaller,
)
from spec.shrink.tokens import price_surface
from spec.wire_engine import (
    CANCEL_AFTER,
    CANCEL_DURING,
    AppendRequest,
    Attempt,
    derive_attempt_failure,
    derive_attempt_output,
    encode_compaction_result,
)

BAD_REQUEST: Final = "BAD_REQUEST"  # a protocol code: the request's shape, not a rule


class _BadRequest(Exception):
    """A request of the wrong shape: the op answers ``BAD_REQUEST`` and nothing changes."""


@dataclass
class _Run:
    """One engine op on one live session, as it goes: the model so far, and whether the op's
    caller has cancelled it. Each append goes through the spec's append (by the caller or by the
    compaction engine) and then the store's batch policy, exactly as a session op's would."""

    model: ModelStore
    session_id: str
    aborted: bool = False

    @property
    def entry(self) -> LiveSession:
        return self.model.live[self.session_id]

    @property
    def state(self) -> SessionState:
        return self.entry.state

    def append(
        self,
        kind: object,
        data: object,
        surface_op: object = ABSENT,
        sources: object = ABSENT,
        writer: Writer = CALLER,
    ) -> Event:
        state, event = append_event(
            self.state, kind, data, surface_op, sources, time=self.model.now, writer=writer
        )
        live = {**self.model.live, self.session_id: replace(self.entry, state=state)}
        self.model = _write_if_batch_due(replace(self.model, live=live), self.session_id)
        return event

    def append_request(self, request: AppendRequest) -> Event:
        return self.append(request.event_type, request.data, request.surface_op, request.source_event_seqs)

    def flush(self) -> bool:
        """The session's flush; ``False`` when it met an armed storage fault."""
        self.model, answer = _flushed(self.model, self.session_id, self.entry)
        return answer.ok

    def measure(self) -> int:
        state = self.state
        return derive_context_tokens(state.events, price_surface(state.surface.nodes, state.events))

    def select(self, retain_tokens: int) -> tuple[int, int] | None:
        state = self.state
        nodes = state.surface.nodes
        return select_compactable_range(
            price_surface(nodes, state.events), nodes, state.events, retain_tokens
        )


# --- the summary transaction (notes §4.5) ----------------------------------------------------------


def _summarize(run: _Run, attempt: Attempt) -> SummarizerOutput:
    """What the scripted summarizer does for ``attempt`` (``spec.wire_engine``)."""
    if attempt.cancel == CANCEL_DURING:
        run.aborted = True
        raise derive_abort_reason()
    failure = derive_attempt_failure(attempt)
    if failure is not None:
        raise failure
    if attempt.append is not None:
        try:
            run.append_request(attempt.append)
        except SpecError:
            pass  # a refused append changes nothing: the surface is as it was
    output = derive_attempt_output(attempt)
    if attempt.cancel == CANCEL_AFTER:
        run.aborted = True
    return output


def _transact(
    run: _Run, start: int, end: int, manual: bool, attempt: Attempt, command: str | None
) -> JsonObject | None:
    """One summary compaction of the span ``start..end`` (notes §4.5): validated, the lock and the
    owner checked, then ``compaction/start``; from there exactly one ``compaction/end`` is appended
    on every path. A manual compaction flushes once its bracket is closed and answers by
    :func:`spec.shrink.bracket.derive_manual_outcome`; an automatic one raises its failure as it is."""
    state = run.state
    region = plan_compaction_region(state.surface.nodes, state.events, start, end)
    validate_compaction_inactive(state.events, "compaction")
    turn = plan_compaction_owner(state.events, manual)
    compaction_id = attempt.compaction_id
    lifecycle = derive_compaction_lifecycle(compaction_id, turn, command)
    start_seq = _seq_of(run.append(COMPACTION_START, lifecycle, writer=COMPACTION_ENGINE))
    bracket = _Bracket(lifecycle, start_seq)
    failure: tuple[Stage, BaseException] | None = None
    result: JsonObject | None = None
    try:
        result = _summarize_and_commit(run, region, bracket, attempt, manual, command)
    except SpecError as error:
        failure = ("commit" if bracket.closing else bracket.stage, error)
        if not bracket.closing:
            bracket.closing = True
            closer = derive_compaction_end(lifecycle, derive_error_chain(error))
            run.append(COMPACTION_END, closer, writer=COMPACTION_ENGINE)
            bracket.closed = True
    flush_failed = should_flush_after_close(manual, bracket.closed) and not run.flush()
    if not manual:
        if failure is not None:
            raise failure[1]
        return result
    outcome = derive_manual_outcome(run.aborted, failure, flush_failed)
    if outcome is Code.ABORTED:
        raise derive_abort_reason()
    if outcome is not None:
        raise reject(outcome, MANUAL_FAILURE_TEXT[outcome])
    return result


@dataclass
class _Bracket:
    """An open compaction bracket: its lifecycle and start, where the transaction has got to
    (``summary`` until the commit appends begin), and whether its close began and landed."""

    lifecycle: JsonObject
    start_seq: int
    stage: Stage = "summary"
    closing: bool = False
    closed: bool = False


def _summarize_and_commit(
    run: _Run,
    region: CompactionRegion,
    bracket: _Bracket,
    attempt: Attempt,
    manual: bool,
    command: str | None,
) -> JsonObject:
    """Inside the bracket: the summary, its shrink check, the surface re-validated, then the
    commit — the summary, the checkpoint message and the closing ``compaction/end``."""
    compaction_id, lifecycle = attempt.compaction_id, bracket.lifecycle
    priced = price_surface(run.state.surface.nodes, run.state.events)
    shadowed_tokens = derive_shadowed_token_count(priced, region)
    output = _summarize(run, attempt)
    output = replace(output, summary=derive_summary_blocks(output.summary))
    checkpoint = derive_checkpoint_message(compaction_id, output.summary, compaction_id, command)
    validate_summary_smaller(checkpoint, shadowed_tokens)
    if manual and run.aborted:
        raise derive_abort_reason()
    after = price_surface(run.state.surface.nodes, run.state.events)
    validate_surface_stable(priced, after, region, not manual, run.state.events)
    bracket.stage = "commit"
    plan = plan_summary_replacement(
        region, bracket.start_seq, len(run.state.events), lifecycle, output, shadowed_tokens, compaction_id
    )
    summary_event = run.append(COMPACTION_SUMMARY, plan.summary_data, writer=COMPACTION_ENGINE)
    run.append(USER_MESSAGE, plan.checkpoint_data, plan.surface_op, plan.source_event_seqs)
    bracket.closing = True
    end_event = run.append(COMPACTION_END, derive_compaction_end(lifecycle), writer=COMPACTION_ENGINE)
    bracket.closed = True
    return encode_compaction_result(
        compaction_id,
        command,
        (bracket.start_seq, _seq_of(summary_event), _seq_of(end_event)),
        output.summary,
        region.shadowed,
        shadowed_tokens,
    )


def _seq_of(event: Event) -> int:
    seq = event["seq"]
    assert isinstance(seq, int)
    return seq


def _prune(run: _Run, config: PruneConfig) -> list[JsonObject]:
    """The prune pass (notes §6.3): per oversized tool result on the surface, its metering event and
    at once its replacement; refused outside a turn before anything is appended (a project choice)."""
    state = run.state
    plans = plan_prune_events(state.surface.nodes, state.events, config)
    if plans:
        validate_prune_in_turn(state.events)
    entries: list[JsonObject] = []
    for plan in plans:
        run.append(COMPACTION_PRUNE, plan.prune_data)
        replacement = run.append(TOOL_RESULT, plan.replacement_data, plan.surface_op, plan.source_event_seqs)
        entries.append(
            {
                "originalSeq": plan.original_seq,
                "replacementSeq": replacement["seq"],
                "callId": plan.call_id,
                "charsBefore": plan.chars_before,
                "charsAfter": plan.chars_after,
            }
        )
    return entries


def _compact_if_needed(
    run: _Run,
    trigger: str,
    attempts: Sequence[Attempt],
    policy: CompactionPolicy,
    pruner: PruneConfig | None,
    window: int | None,
) -> JsonObject | None:
    """``compactIfNeeded`` (notes §5.3): the forced overflow compaction, or pressure — the lock,
    the window, the threshold, the prune pass, then at most ``compactionRetries + 1`` summaries."""
    if trigger == "context-overflow":
        if pruner is not None:
            _prune(run, pruner)
        span = run.select(FORCED_RETAIN_TOKENS)
        return None if span is None else _transact(run, span[0], span[1], False, attempts[0], None)
    validate_compaction_inactive(run.state.events, PRESSURE_STAGE)
    spec = resolve_compact_spec(policy, validate_context_capacity(window))
    if not is_under_pressure(run.measure(), spec.threshold_tokens):
        return None
    if pruner is not None:
        _prune(run, pruner)
        if not is_under_pressure(run.measure(), spec.threshold_tokens):
            return None
    result: JsonObject | None = None
    tries = policy.compaction_retries + 1
    for index in range(tries):
        span = run.select(spec.retain_tokens)
        if span is None:
            if result is None:
                return None
            break
        result = _transact(run, span[0], span[1], False, attempts[index], None)
        if not is_under_pressure(run.measure(), spec.threshold_tokens):
            return result
    validate_pressure_relieved(run.measure(), spec.threshold_tokens, tries)
    return result
