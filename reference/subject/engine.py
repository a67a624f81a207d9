"""The engine ops (conformance/PROTOCOL.md, "Engine ops", capabilities ``compaction``, ``prune``,
``spill``, ``overflow`` and ``checkpoint``): the reference's compaction engine, overflow recovery,
spill policy and durability checkpoints, driven by the suite's scripted summarizer attempts."""

from __future__ import annotations

import errno
import threading
from collections.abc import Sequence
from typing import ClassVar, Final

from reference.projections.checkpoints import DurabilityCheckpoints
from reference.session import Session
from reference.shrink.compaction import (
    AbortSignal,
    CompactionEngine,
    OverflowRecovery,
    SummaryRequest,
)
from reference.shrink.spill import SpillPolicy, SpillRef, SpillStore
from reference.subject.base import SubjectBase
from reference.subject.requests import Args, BadRequest
from spec.log.json import JsonValue, is_safe_integer, thaw_json
from spec.log.session import ABSENT
from spec.shrink.compaction import CompactionPolicy
from spec.shrink.engine import Append
from spec.shrink.pressure import CONTEXT_WINDOW_EXCEEDED
from spec.shrink.prune import PruneConfig, decode_prune_config
from spec.shrink.summary import SummarizerOutput
from spec.wire_engine import (
    CANCEL_AFTER,
    CANCEL_DURING,
    Attempt,
    decode_append_request,
    decode_attempt,
    decode_attempts,
    decode_context_window,
    decode_moment,
    decode_policy,
    decode_pruner,
    decode_trigger,
    derive_tool_call_id,
    derive_tool_result_content,
    encode_compaction_result,
    encode_prune_result,
    run_attempt,
    with_tool_result_content,
)

# each answered by its op_<name> method
COMPACTION_OPS: Final = (
    "compact",
    "compact_region",
    "compact_if_needed",
    "prune",
    "overflow",
    "overflow_reset",
    "spill",
    "spill_read",
    "checkpoint",
)
# Seconds the subject's engine waits for a summarizer that answers (the engine's summary_timeout,
# the worker thread's deadline), and the most the scripted summarizer waits for the engine.
SUMMARY_DEADLINE: Final = 30.0
CLOCK_START: Final = 1000.0  # seconds: where the scripted summarizer's clock stands


class ScriptedSummarizer:
    """The summarizer of one engine op: the suite's attempts (``spec.wire_engine.Attempt``), handed
    out in order. The engine mints each compaction's id through :meth:`new_id`, which starts the
    next attempt; :meth:`summarize` then does what that attempt says. A cancellation aborts the
    op's own signal, as a user's would; a scripted append goes through the session's caller path
    (a refused one changes nothing).

    With a ``deadline`` the engine runs :meth:`summarize` on its worker thread and measures the
    deadline on :meth:`clock`, and nothing sleeps. The clock stands still, but for an attempt that
    does not answer (``timeout``): from the engine's second look on, that timeout and half a second
    more have passed. The summarizer starts only once the engine has looked twice (it is then in its
    wait), an attempt that does not answer waits until the engine aborts it, and one cancelled
    during its run stops once the engine has passed the cancellation on to its signal: every run
    takes the same path through the engine's wait. Without a deadline (an op with an attempt that
    cancels just after answering: the cancellation would race the answer to a waiting engine) the
    summarizer runs on the caller's thread and reports a timeout at once, as the deadline would."""

    def __init__(
        self, attempts: Sequence[Attempt], session: Session, caller: AbortSignal, deadline: float | None
    ) -> None:
        self._attempts = tuple(attempts)
        self._session = session
        self._caller = caller
        self._started = 0
        self.deadline = deadline
        self._looks = 0
        self._looked_twice = threading.Event()

    def new_id(self) -> str:
        self._started += 1
        self._looks, self._looked_twice = 0, threading.Event()
        return self._attempts[self._started - 1].compaction_id

    def clock(self) -> float:
        """The engine's clock, in seconds."""
        self._looks += 1
        if self._looks < 2:
            return CLOCK_START
        self._looked_twice.set()
        timeout = self._attempts[self._started - 1].timeout
        return CLOCK_START if timeout is None else CLOCK_START + timeout + 0.5

    def summarize(self, request: SummaryRequest, signal: AbortSignal) -> SummarizerOutput:
        attempt = self._attempts[self._started - 1]
        if self.deadline is not None:
            self._looked_twice.wait(SUMMARY_DEADLINE)
            if attempt.timeout is not None:
                _aborted(signal).wait(SUMMARY_DEADLINE)
                signal.throw_if_aborted()
        return run_attempt(
            attempt, lambda append: _append(self._session, append), lambda: self._cancel(attempt, signal)
        )

    def _cancel(self, attempt: Attempt, signal: AbortSignal) -> None:
        self._caller.abort()
        if self.deadline is not None and attempt.cancel == CANCEL_DURING:
            _aborted(signal).wait(SUMMARY_DEADLINE)


def _aborted(signal: AbortSignal) -> threading.Event:
    """An event set once ``signal`` aborts."""
    aborted = threading.Event()
    signal.on_abort(lambda _reason: aborted.set())
    return aborted


class ProviderFailure(Exception):
    """A model request that failed with ``code`` (what ``overflow`` reports to the recovery)."""

    def __init__(self, code: object) -> None:
        super().__init__(f"the model request failed with {code!r}")
        self.code = code


class FailingSpillStore:
    """A spill store whose saves fail (``spill`` with ``storeFails``); reads go to ``inner``."""

    def __init__(self, inner: SpillStore) -> None:
        self.inner = inner

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> SpillRef:
        raise OSError(errno.ENOSPC, "injected: the spill store is full")

    def read_text(self, locator: str) -> str:
        return self.inner.read_text(locator)


def _append(session: Session, request: Append) -> JsonValue:
    return session.append(request.event_type, request.data, request.surface_op, request.source_event_seqs)


class EngineOps(SubjectBase):
    """The engine ops but the projection ones (:mod:`reference.subject.projections`)."""

    # The engine behind the engine ops, each class an override point (tests/broken_engines.py).
    engine_class: ClassVar[type[CompactionEngine]] = CompactionEngine
    recovery_class: ClassVar[type[OverflowRecovery]] = OverflowRecovery
    checkpoints_class: ClassVar[type[DurabilityCheckpoints]] = DurabilityCheckpoints

    def op_compact(self, args: Args) -> JsonValue:
        """``/compact``: manual compaction between turns, then a flush (notes §9.1)."""
        attempt = decode_attempt(args.get("attempt"))
        command = args.optional("sourceCommandId")
        if command is not ABSENT and not isinstance(command, str):
            raise BadRequest("sourceCommandId must be a string")
        session = self.live(args.session_id())
        signal = AbortSignal()
        engine = self._engine(session, (attempt,), signal)
        source = command if isinstance(command, str) else None
        return encode_compaction_result(engine.compact_now(session, signal, source_command_id=source))

    def op_compact_region(self, args: Args) -> JsonValue:
        """``compactRegion``: automatic compaction of a span the suite names, inside the open turn."""
        attempt = decode_attempt(args.get("attempt"))
        start, end = args.get("start"), args.get("end")
        if not is_safe_integer(start) or not is_safe_integer(end):
            raise BadRequest("start and end must be seqs")
        session = self.live(args.session_id())
        signal = AbortSignal()
        engine = self._engine(session, (attempt,), signal)
        return encode_compaction_result(engine.compact_region(session, int(start), int(end), signal))

    def op_compact_if_needed(self, args: Args) -> JsonValue:
        """Pressure (prune, then summarize while at or above the threshold) or the forced
        context-overflow compaction (notes §5.3)."""
        trigger = decode_trigger(args.get("trigger", "pressure"))
        attempts = decode_attempts(args.get("attempts"), 1)
        session = self.live(args.session_id())
        policy = decode_policy(args.optional("policy"))
        pruner = decode_pruner(args.optional("prune"))
        if trigger == "pressure" and len(attempts) < policy.compaction_retries + 1:
            raise BadRequest("pressure may run compactionRetries + 1 compactions: give an attempt for each")
        signal = AbortSignal()
        engine = self._engine(session, attempts, signal, policy, pruner)
        window = decode_context_window(args.optional("contextWindow"))
        return encode_compaction_result(
            engine.compact_if_needed(session, trigger, signal, context_window=window)
        )

    def op_prune(self, args: Args) -> JsonValue:
        """One prune pass with the suite's thresholds (notes §6.3)."""
        session = self.live(args.session_id())
        config = decode_prune_config(args.get("config"))
        return encode_prune_result(
            self._engine(session, (), AbortSignal(), pruner=config).prune(session).pruned
        )

    def op_overflow(self, args: Args) -> JsonValue:
        """A model request failed with ``code``: the recovery compacts and says whether to retry
        (notes §8.2)."""
        attempt = decode_attempt(args.get("attempt"))
        session = self.live(args.session_id())
        policy = decode_policy(args.optional("policy"))
        pruner = decode_pruner(args.optional("prune"))
        signal = AbortSignal()
        engine = self._engine(session, (attempt,), signal, policy, pruner)
        recovery = self.recovery_class(engine, counts=self._overflow)
        code = args.get("code", CONTEXT_WINDOW_EXCEEDED)
        retry = recovery.on_request_error(session, ProviderFailure(code), signal)
        return {"retry": retry, "retries": recovery.retries(session)}

    def op_overflow_reset(self, args: Args) -> JsonValue:
        """A response succeeded (or the agent went idle): a fresh recovery sequence starts."""
        session = self.live(args.session_id())
        self.recovery_class(self._engine(session, (), AbortSignal()), counts=self._overflow).reset(session)
        return None

    def op_spill(self, args: Args) -> JsonValue:
        """A tool result enters the log through the spill policy (notes §10.2)."""
        tool, data = args.get("toolName"), args.get("data")
        nested, store_fails = args.get("nested", False), args.get("storeFails", False)
        if not isinstance(tool, str) or not isinstance(data, dict):
            raise BadRequest("toolName must be a string and data a tool/result's data")
        if not isinstance(nested, bool) or not isinstance(store_fails, bool):
            raise BadRequest("nested and storeFails must be booleans")
        inner = derive_tool_result_content(data)
        session = self.live(args.session_id())
        store = FailingSpillStore(self.spill_store) if store_fails else self.spill_store
        policy = SpillPolicy(args.optional("maxInlineTokens"), store)
        outcome = policy.apply(session.id, tool, derive_tool_call_id(data), inner, nested)
        event = session.append(
            "tool/result",
            with_tool_result_content(data, thaw_json(outcome.content)),
            "append",
            args.optional("sourceEventSeqs"),
        )
        spilled = outcome.spilled
        return {
            "event": event,
            "spilled": None if spilled is None else {"locator": spilled.locator, "bytes": spilled.bytes},
        }

    def op_spill_read(self, args: Args) -> JsonValue:
        """The whole text a spill saved, as it was saved."""
        locator = args.get("locator")
        if not isinstance(locator, str):
            raise BadRequest("locator must be a string")
        text = self.spill_store.read_text(locator)
        return {"text": text, "bytes": len(text.encode("utf-8", "surrogatepass"))}

    def op_checkpoint(self, args: Args) -> JsonValue:
        """A durability checkpoint at ``moment``: flush, then the guarded append ``then`` (if any);
        a failed flush fails closed and ``then`` never happens."""
        moment = decode_moment(args.get("moment"))
        then = args.optional("then")
        action = decode_append_request(then, "then") if then is not ABSENT else None
        session = self.live(args.session_id())
        return self.checkpoints_class(session).guard(
            moment, lambda: None if action is None else _append(session, action)
        )

    def _engine(
        self,
        session: Session,
        attempts: Sequence[Attempt],
        signal: AbortSignal,
        policy: CompactionPolicy = CompactionPolicy(),
        pruner: PruneConfig | None = None,
    ) -> CompactionEngine:
        # The summarizer runs on the engine's worker thread under its deadline (the timeout of the
        # first attempt that does not answer, else the subject's), but where an attempt cancels
        # just after answering (ScriptedSummarizer).
        timeouts = [attempt.timeout for attempt in attempts if attempt.timeout is not None]
        deadline = None if any(attempt.cancel == CANCEL_AFTER for attempt in attempts) else SUMMARY_DEADLINE
        if deadline is not None and timeouts:
            deadline = float(timeouts[0])
        summarizer = ScriptedSummarizer(attempts, session, signal, deadline)
        return self.engine_class(
            summarizer,
            policy=policy,
            prune=pruner,
            summary_timeout=deadline,
            new_id=summarizer.new_id,
            checkpoint_id=lambda compaction_id: compaction_id,
            clock=summarizer.clock,
        )
