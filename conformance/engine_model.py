"""The spec-side model of the engine ops: what a conforming compaction engine must answer, and what
it must append, for each engine op of ``conformance/PROTOCOL.md`` ("Engine ops").

It builds on :mod:`conformance.model` (the same :class:`~conformance.model.ModelStore`, the same
``Expected`` answers); :func:`model_request` answers any modelled op, its own and the store's. The order of
an engine's steps — the transaction (notes §4.5, §9.1), pressure (§5.3), the prune pass (§6.3) and
overflow recovery (§8.2) — is the spec's own plans (:mod:`spec.shrink.engine`), which
:class:`EngineRun` performs on the model exactly as the reference engine performs them on a live
session; every other decision is a call into ``spec``: spill (``spec.shrink.spill``, §10.2),
projections (``spec.projections``, §11) and the scripted summarizer (``spec.wire_engine``).

An engine op changes the log even when it fails: a compaction whose summary fails leaves its
``compaction/start`` and ``compaction/end`` with the error. So a transition here returns the model
with those events and the error the op answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, TypeVar

from conformance.model import (
    OPS,
    EngineState,
    Expected,
    LiveSession,
    ModelStore,
    Transition,
    accepted,
    append_live,
    canonical_text,
    flush_live,
    model_read,
    rejected,
)
from spec.codes import Code, SpecError, reject
from spec.log.events import TOOL_RESULT, Event
from spec.log.json import FrozenList, JsonObject, JsonValue, is_safe_integer, snapshot_json, thaw_json
from spec.log.session import ABSENT, SessionState
from spec.projections.units import (
    ProjectionUnit,
    derive_initial_cell,
    derive_projection_state,
    derive_wire_keys,
    fold_projection,
    plan_registration,
)
from spec.protocol import BAD_REQUEST
from spec.shrink import engine as plans
from spec.shrink.bracket import derive_abort_reason
from spec.shrink.engine import Append, Cancellation, Effect, MintId, Observe, Plan, Summarize, run_plan
from spec.shrink.pressure import CONTEXT_WINDOW_EXCEEDED
from spec.shrink.prune import decode_prune_config
from spec.shrink.spill import (
    SPILL_RETRIEVAL_HINT,
    SaveSpill,
    derive_memory_spill_locator,
    plan_max_inline_tokens,
    plan_spill,
)
from spec.wire import WireInputError
from spec.wire_engine import (
    Attempt,
    decode_append_request,
    decode_attempt,
    decode_attempts,
    decode_catalogue_unit,
    decode_context_window,
    decode_moment,
    decode_policy,
    decode_pruner,
    decode_trigger,
    derive_tool_result_content,
    encode_compaction_result,
    encode_prune_result,
    run_attempt,
    with_tool_result_content,
)

T = TypeVar("T")


class BadRequest(Exception):
    """A request of the wrong shape: the op answers ``BAD_REQUEST`` and nothing changes."""


# --- one engine op as it goes ----------------------------------------------------------------------


@dataclass
class EngineRun:
    """One engine op on one live session, as it goes: the model so far, the op's scripted
    summarizer attempts and how many have started, and whether the op's caller has cancelled.
    It performs a spec plan's effects on the model: an append goes through the spec's append and
    the store's batch policy (:func:`conformance.model.append_live`), a flush is the session's, a
    compaction id starts the next attempt and the checkpoint takes the compaction's id (as the
    reference's server mints them), the summarizer does what the attempt says."""

    model: ModelStore
    session_id: str
    attempts: Sequence[Attempt] = ()
    started: int = 0
    aborted: bool = False

    @property
    def entry(self) -> LiveSession:
        return self.model.live[self.session_id]

    @property
    def state(self) -> SessionState:
        return self.entry.state

    def append(self, request: Append) -> Event:
        self.model, event = append_live(self.model, self.session_id, request)
        return event

    def flush(self) -> bool:
        """The session's flush; ``False`` when it met an armed storage fault."""
        self.model, answer = flush_live(self.model, self.session_id, self.entry)
        return answer.ok

    def keep_overflow_retries(self, retries: int) -> None:
        """The session's count of overflow retries since its last reset becomes ``retries``."""
        live = {**self.model.live, self.session_id: replace(self.entry, overflow_retries=retries)}
        self.model = replace(self.model, live=live)

    def run(self, plan: Plan[T]) -> T:
        return run_plan(plan, self.perform)

    def perform(self, effect: Effect) -> object:
        """One effect of a plan of :mod:`spec.shrink.engine`, on the model."""
        if isinstance(effect, Observe):
            return self.state
        if isinstance(effect, Append):
            return self.append(effect)
        if isinstance(effect, MintId):
            if effect.purpose == "checkpoint":
                return effect.compaction_id
            self.started += 1
            return self.attempts[self.started - 1].compaction_id
        if isinstance(effect, Summarize):
            return run_attempt(self.attempts[self.started - 1], self.append, self.cancel)
        if isinstance(effect, Cancellation):
            return derive_abort_reason() if self.aborted else None
        if not self.flush():
            raise reject(Code.STORAGE_IO, "the flush met an armed storage fault")
        return None

    def cancel(self) -> None:
        self.aborted = True


# --- the transitions --------------------------------------------------------------------------------


def _engine_op(
    model: ModelStore,
    session_id: object,
    body: Callable[[EngineRun], JsonValue],
    attempts: Callable[[], Sequence[Attempt]] = tuple,
) -> Transition:
    """Run ``body`` on the live session ``session_id`` with the summarizer's ``attempts`` (decoded
    first): the model it leaves and its answer. A rule's rejection keeps every event the op
    appended before it; a request of the wrong shape changes nothing."""
    try:
        scripted = attempts()
    except WireInputError:
        return model, rejected(BAD_REQUEST)
    if not isinstance(session_id, str) or session_id not in model.live:
        return model, rejected(Code.SESSION_NOT_FOUND)
    run = EngineRun(model, session_id, scripted)
    try:
        result = body(run)
    except (BadRequest, WireInputError):
        return model, rejected(BAD_REQUEST)
    except SpecError as error:
        return run.model, rejected(error.code)
    return run.model, accepted(result)


def model_compact(
    model: ModelStore, id: object, attempt: object = ABSENT, sourceCommandId: object = ABSENT
) -> Transition:
    """``compact``: manual compaction between turns, keeping the newest indivisible unit; ``null``
    and nothing written when there is nothing to compact (notes §9.1)."""
    if sourceCommandId is not ABSENT and not isinstance(sourceCommandId, str):
        return model, rejected(BAD_REQUEST)
    command = sourceCommandId if isinstance(sourceCommandId, str) else None
    plan = plans.plan_manual_compaction
    return _engine_op(
        model,
        id,
        lambda run: encode_compaction_result(run.run(plan(command))),
        lambda: (decode_attempt(attempt),),
    )


def model_compact_region(
    model: ModelStore, id: object, start: object = ABSENT, end: object = ABSENT, attempt: object = ABSENT
) -> Transition:
    """``compact_region``: automatic compaction of the span ``start..end``, owned by the open turn."""
    if not is_safe_integer(start) or not is_safe_integer(end):
        return model, rejected(BAD_REQUEST)
    plan = plans.plan_transaction(int(start), int(end), False)
    return _engine_op(
        model, id, lambda run: encode_compaction_result(run.run(plan)), lambda: (decode_attempt(attempt),)
    )


def model_compact_if_needed(
    model: ModelStore,
    id: object,
    trigger: object = "pressure",
    attempts: object = ABSENT,
    contextWindow: object = ABSENT,
    policy: object = ABSENT,
    prune: object = ABSENT,
) -> Transition:
    """``compact_if_needed``: pressure with the suite's window and policy, or the forced
    context-overflow compaction (notes §5.3)."""
    try:
        chosen = decode_trigger(trigger)
    except WireInputError:
        return model, rejected(BAD_REQUEST)

    def body(run: EngineRun) -> JsonValue:
        resolved = decode_policy(policy)
        pruner = decode_pruner(prune)
        if chosen == "pressure" and len(run.attempts) < resolved.compaction_retries + 1:
            raise BadRequest("an attempt for each compaction pressure may run")
        window = decode_context_window(contextWindow)
        plan = plans.plan_compact_if_needed(chosen, resolved, pruner, window)
        return encode_compaction_result(run.run(plan))

    return _engine_op(model, id, body, lambda: decode_attempts(attempts, 1))


def model_prune(model: ModelStore, id: object, config: object = None) -> Transition:
    """``prune``: one prune pass with the suite's thresholds (``null`` or absent: the defaults)."""
    return _engine_op(
        model,
        id,
        lambda run: encode_prune_result(run.run(plans.plan_prune_pass(decode_prune_config(config)))),
    )


def model_overflow(
    model: ModelStore,
    id: object,
    attempt: object = ABSENT,
    code: object = CONTEXT_WINDOW_EXCEEDED,
    policy: object = ABSENT,
    prune: object = ABSENT,
) -> Transition:
    """``overflow``: a model request failed with ``code``; the recovery
    (:func:`spec.shrink.engine.plan_overflow_recovery`) answers whether it is retried, and a retry
    counts toward ``maxOverflowRetries`` until the next reset (notes §8.2)."""

    def body(run: EngineRun) -> JsonValue:
        resolved = decode_policy(policy)
        pruner = decode_pruner(prune)
        retries = run.entry.overflow_retries
        plan = plans.plan_overflow_recovery(code, retries, resolved.max_overflow_retries, resolved, pruner)
        verdict = run.run(plan)
        if verdict.retry:
            run.keep_overflow_retries(retries + 1)
        return {"retry": verdict.retry, "retries": run.entry.overflow_retries}

    return _engine_op(model, id, body, lambda: (decode_attempt(attempt),))


def model_overflow_reset(model: ModelStore, id: object) -> Transition:
    """``overflow_reset``: a response succeeded, so a fresh recovery sequence starts."""

    return _engine_op(model, id, lambda run: run.keep_overflow_retries(0))


def model_spill(
    model: ModelStore,
    id: object,
    toolName: object = ABSENT,
    data: object = ABSENT,
    maxInlineTokens: object = ABSENT,
    nested: object = False,
    storeFails: object = False,
    sourceEventSeqs: object = ABSENT,
) -> Transition:
    """``spill``: the tool result's content passes the spill policy, then the ``tool/result`` is
    appended with what the policy kept (notes §10.2, D8): a top-level, all-text result above the
    limit is saved whole and replaced by a preview and the notice naming its locator; best effort,
    so a failing store keeps it inline."""
    if not isinstance(toolName, str) or not isinstance(data, dict):
        return model, rejected(BAD_REQUEST)
    if not isinstance(nested, bool) or not isinstance(storeFails, bool):
        return model, rejected(BAD_REQUEST)
    try:
        inner = derive_tool_result_content(data)
    except WireInputError:
        return model, rejected(BAD_REQUEST)
    tool, payload = toolName, data

    def body(run: EngineRun) -> JsonValue:
        def save(effect: SaveSpill) -> MemorySpill:
            if storeFails:
                raise reject(Code.STORAGE_IO, "the spill store fails")
            spills = run.model.engine.spills
            locator = derive_memory_spill_locator(run.session_id, len(spills) + 1, effect.suggested_name)
            run.model = replace(
                run.model, engine=replace(run.model.engine, spills={**spills, locator: effect.text})
            )
            return MemorySpill(locator)

        frozen = snapshot_json(list(inner))
        assert isinstance(frozen, FrozenList)
        limit = plan_max_inline_tokens(maxInlineTokens, True)
        decision = run_plan(plan_spill(tool, frozen, limit, nested), save)
        content = with_tool_result_content(payload, thaw_json(decision.content))
        event = run.append(Append(TOOL_RESULT, content, "append", sourceEventSeqs))
        saved = decision.saved
        if saved is None:
            return {"event": event, "spilled": None}
        text = run.model.engine.spills[saved.locator]
        return {
            "event": event,
            "spilled": {"locator": saved.locator, "bytes": len(text.encode("utf-8", "surrogatepass"))},
        }

    return _engine_op(model, id, body)


@dataclass(frozen=True)
class MemorySpill:
    """Where the model's spill store saved a text (``spec.shrink.spill.SpillLocation``)."""

    locator: str
    retrieval_hint: str = SPILL_RETRIEVAL_HINT


def model_spill_read(model: ModelStore, locator: object = ABSENT) -> Transition:
    """``spill_read``: the whole text a spill saved, byte for byte."""
    if not isinstance(locator, str):
        return model, rejected(BAD_REQUEST)
    text = model.engine.spills.get(locator)
    if text is None:
        return model, rejected(Code.SPILL_NOT_FOUND)
    return model, accepted({"text": text, "bytes": len(text.encode("utf-8", "surrogatepass"))})


# --- projections (D7; notes §11) ----------------------------------------------------------------------


def model_project(model: ModelStore, unit: object = ABSENT, stateVersion: object = ABSENT) -> Transition:
    """``project``: register a catalogue unit; registrants share a key at one ``stateVersion``, the
    first definition serving them (D7; notes §11.2)."""
    try:
        chosen = decode_catalogue_unit(unit, stateVersion)
        held = model.engine.units.get(chosen.key)
        served = plan_registration(held[0] if held else None, chosen)
    except WireInputError:
        return model, rejected(BAD_REQUEST)
    except SpecError as error:
        return model, rejected(error.code)
    units = {**model.engine.units, chosen.key: (served, (held[1] if held else 0) + 1)}
    return replace(model, engine=replace(model.engine, units=units)), accepted(None)


def model_unproject(model: ModelStore, unit: object = ABSENT) -> Transition:
    """``unproject``: one registrant of the unit's key lets go; with the last, the key is gone."""
    try:
        key = decode_catalogue_unit(unit).key
    except WireInputError:
        return model, rejected(BAD_REQUEST)
    held = model.engine.units.get(key)
    if held is None:
        return model, accepted(None)
    units = {name: value for name, value in model.engine.units.items() if name != key}
    if held[1] > 1:
        units[key] = (held[0], held[1] - 1)
    return replace(model, engine=replace(model.engine, units=units)), accepted(None)


def derive_unit_state(unit: ProjectionUnit, events: Sequence[Event]) -> JsonValue:
    """A unit's state after a full replay of ``events`` from its ``init``, as a reader gets it (D7)."""
    cell = fold_projection(unit, derive_initial_cell(unit), events)
    return thaw_json(derive_projection_state(unit, cell.state))


def _registered(model: ModelStore, unit: object) -> tuple[str, ProjectionUnit | None]:
    key = decode_catalogue_unit(unit).key
    held = model.engine.units.get(key)
    return key, held[0] if held else None


def model_state_of(model: ModelStore, id: object, unit: object = ABSENT) -> Transition:
    """``state_of``: the unit folded up to the session's last event, however it was registered or
    cached; ``null`` when no unit has that key."""
    try:
        _, served = _registered(model, unit)
    except WireInputError:
        return model, rejected(BAD_REQUEST)
    entry = model.live.get(id) if isinstance(id, str) else None
    if entry is None:
        return model, rejected(Code.SESSION_NOT_FOUND)
    return model, accepted(None if served is None else derive_unit_state(served, entry.state.events))


def model_snapshot(model: ModelStore, id: object) -> Transition:
    """``snapshot``: every wire unit's state, all as of the session's last event; host-only units
    are left out (D7; seed 002 "snapshot() 只返回 wire 单元")."""
    entry = model.live.get(id) if isinstance(id, str) else None
    if entry is None:
        return model, rejected(Code.SESSION_NOT_FOUND)
    units = {key: served for key, (served, _) in model.engine.units.items()}
    values: JsonObject = {
        key: derive_unit_state(units[key], entry.state.events)
        for key in derive_wire_keys(list(units.values()))
    }
    return model, accepted({"asOfSeq": len(entry.state.events) - 1, "values": values})


def model_state_of_stored(model: ModelStore, id: object, unit: object = ABSENT) -> Transition:
    """``state_of_stored``: a unit's state for a stored log, which must equal a full replay of what
    is stored whether the subject read it from a cold cache, a stale row or the log alone (D7).
    What is stored is what ``read`` would show, with the same room (a store may hold more than was
    flushed), so each log ``read`` admits gives one admissible state."""
    try:
        _, served = _registered(model, unit)
    except WireInputError:
        return model, rejected(BAD_REQUEST)
    _, read = model_read(model, id)
    return model, _states_of_reads(read, served)


def _states_of_reads(read: Expected, unit: ProjectionUnit | None) -> Expected:
    """Each log ``read`` admits, turned into the state ``unit`` folds from it (``null`` without a
    unit); an error stays that error."""
    options: list[Expected] = []
    for expected in (read, *read.alternatives):
        if not expected.ok:
            options.append(rejected(str(expected.code)))
            continue
        assert isinstance(expected.result, dict)
        events = expected.result["events"]
        assert isinstance(events, list)
        shortest = expected.events_at_least if expected.events_at_least is not None else len(events)
        for length in range(len(events), shortest - 1, -1):
            state = None if unit is None else derive_unit_state(unit, events[:length])  # type: ignore[arg-type]
            options.append(accepted(state))
    unique = list({canonical_text(option.as_json()): option for option in options}.values())
    return replace(unique[0], alternatives=tuple(unique[1:]))


# --- durability checkpoints (seed 002; notes §11.5) ---------------------------------------------------


def model_checkpoint(
    model: ModelStore, id: object, moment: object = ABSENT, then: object = ABSENT
) -> Transition:
    """``checkpoint``: flush at ``moment``, then the guarded append ``then``; a failed flush fails
    closed with ``DURABILITY_CHECKPOINT_FAILED`` and ``then`` never happens (seed 002)."""
    try:
        decode_moment(moment)
        action = decode_append_request(then, "then") if then is not ABSENT else None
    except WireInputError:
        return model, rejected(BAD_REQUEST)

    def body(run: EngineRun) -> JsonValue:
        if not run.flush():
            raise reject(Code.DURABILITY_CHECKPOINT_FAILED, "the checkpoint's flush failed")
        return None if action is None else run.append(action)

    return _engine_op(model, id, body)


ENGINE_OPS: Final[Mapping[str, Callable[..., Transition]]] = {
    "compact": model_compact,
    "compact_region": model_compact_region,
    "compact_if_needed": model_compact_if_needed,
    "prune": model_prune,
    "overflow": model_overflow,
    "overflow_reset": model_overflow_reset,
    "spill": model_spill,
    "spill_read": model_spill_read,
    "project": model_project,
    "unproject": model_unproject,
    "state_of": model_state_of,
    "snapshot": model_snapshot,
    "state_of_stored": model_state_of_stored,
    "checkpoint": model_checkpoint,
}
"""The engine ops by protocol name; each takes the protocol's argument names."""

ENGINE_CAPABILITY_OF: Final[Mapping[str, str]] = {
    "compact": "compaction",
    "compact_region": "compaction",
    "compact_if_needed": "compaction",
    "prune": "prune",
    "overflow": "overflow",
    "overflow_reset": "overflow",
    "spill": "spill",
    "spill_read": "spill",
    "project": "projection",
    "unproject": "projection",
    "state_of": "projection",
    "snapshot": "projection",
    "state_of_stored": "projection",
    "checkpoint": "checkpoint",
}
"""The capability each engine op needs (PROTOCOL.md, "Engine ops")."""


def modelled_ops() -> Mapping[str, Callable[..., Transition]]:
    """Every op the model answers: the session and storage ops of :mod:`conformance.model` and
    the engine ops above."""
    return {**OPS, **ENGINE_OPS}


def model_request(model: ModelStore, op: str, **args: object) -> Transition:
    """Any modelled op by its protocol name, with the protocol's argument names."""
    return (OPS.get(op) or ENGINE_OPS[op])(model, **args)


__all__ = [
    "ENGINE_CAPABILITY_OF",
    "ENGINE_OPS",
    "EngineState",
    "derive_unit_state",
    "model_request",
    "modelled_ops",
]
