"""The compaction engine: prune pass, summary compaction, pressure and overflow recovery, made to
run on a live :class:`reference.session.Session` (SPEC-DECISIONS D8;
notes/dsh-compaction-projection §4-§9).

The order of the steps — what is appended when, how a failure closes the bracket, when to flush,
the pressure and prune loops, overflow recovery — is the spec's own plans (:mod:`spec.shrink.engine`),
and every decision in them a call into ``spec``; this module performs their effects on a session
and adds the summarizer call, ids, cancellation, timeouts and logging.

- :func:`prune_session` cuts the middle out of oversized tool results
  (:func:`spec.shrink.engine.plan_prune_pass`).
- :meth:`CompactionEngine.compact_region` / :meth:`CompactionEngine.compact_now` run the summary
  transaction (:func:`spec.shrink.engine.plan_transaction`): after ``compaction/start``, exactly
  one ``compaction/end`` is attempted on every path, with ``error`` on failure.
- :meth:`CompactionEngine.compact_if_needed` applies pressure and the forced overflow path;
  :class:`OverflowRecovery` decides retries.

The engine is synchronous, like the session. A summarizer may be slow (a model call): it receives an
:class:`AbortSignal`, and with ``summary_timeout`` set the engine runs it on a worker thread and
stops waiting when the time is up or the caller aborts. A session is not thread-safe: one thread
drives it, the worker thread only ever sees the summarization request.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
import weakref
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from reference.session import Session
from spec.log.events import Message
from spec.log.json import FrozenList
from spec.shrink import engine as plans
from spec.shrink.bracket import (
    CompactionResult,
    derive_abort_reason,
    derive_error_chain,
    derive_summary_timeout,
)
from spec.shrink.compaction import CompactionPolicy, CompactionRegion
from spec.shrink.engine import (
    Append,
    Cancellation,
    Effect,
    Flush,
    MintId,
    Observe,
    Plan,
    Summarize,
    Trigger,
    derive_view_tokens,
    run_plan,
)
from spec.shrink.pressure import derive_failure_code, derive_request_header
from spec.shrink.prune import PruneConfig, PrunedEntry, derive_chars_removed
from spec.shrink.summary import SummarizerOutput, derive_summarization_messages

log = logging.getLogger(__name__)

T = TypeVar("T")

# --- cancellation ----------------------------------------------------------------------------------


class AbortSignal:
    """A cancellation flag that can be shared across threads, like the web platform's AbortSignal:
    ``abort(reason)`` sets it once and wakes every listener; ``throw_if_aborted()`` raises the
    reason (by default a ``SpecError`` with code ``ABORTED``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reason: BaseException | None = None
        self._listeners: list[Callable[[BaseException], None]] = []

    @property
    def aborted(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> BaseException | None:
        return self._reason

    def abort(self, reason: BaseException | None = None) -> None:
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason if reason is not None else derive_abort_reason()
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(self._reason)

    def throw_if_aborted(self) -> None:
        if self._reason is not None:
            raise self._reason

    def on_abort(self, listener: Callable[[BaseException], None]) -> Callable[[], None]:
        """Call ``listener(reason)`` when the signal aborts (at once if it already has); returns a
        function that forgets the listener."""
        with self._lock:
            if self._reason is None:
                self._listeners.append(listener)
                return lambda: self._forget(listener)
        listener(self._reason)
        return lambda: None

    def _forget(self, listener: Callable[[BaseException], None]) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def linked(self) -> tuple[AbortSignal, Callable[[], None]]:
        """A child signal, aborted with this one's reason when this one aborts and abortable on its
        own (a timeout aborts the child, not the caller's signal), and the function that unlinks
        it once it is no longer needed."""
        child = AbortSignal()
        return child, self.on_abort(child.abort)


# --- the summarizer protocol (notes §4.8) ----------------------------------------------------------


@dataclass(frozen=True)
class SummaryRequest:
    """What a summarizer is asked to condense: the shadowed nodes' messages in surface order, the
    system prompt and tools of the latest request header (replay them so the request is a prefix
    of the last one), the generation cap, and — this project's addition — the token price of the
    span, which the framed summary must stay under."""

    session_id: str
    messages: tuple[Message, ...]
    system: str | None
    tools: FrozenList | None
    max_tokens: int
    shadowed_token_count: int
    purpose: str = "compaction"


class Summarizer(Protocol):
    """Writes the summary of a span. It returns ``SummarizerOutput`` (text blocks plus the call's
    provenance) or raises; it should give up promptly once ``signal`` is aborted. It must not touch
    the session: with a timeout it runs on a worker thread."""

    def summarize(self, request: SummaryRequest, signal: AbortSignal) -> SummarizerOutput: ...


# --- results ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PruneResult:
    """What a prune pass pruned, in the order it pruned them."""

    pruned: tuple[PrunedEntry, ...]

    @property
    def chars_removed(self) -> int:
        """The characters the pass removed (:func:`spec.shrink.prune.derive_chars_removed`)."""
        return derive_chars_removed(self.pruned)


# --- running a spec plan on a live session ---------------------------------------------------------


def perform_on_session(session: Session, effect: Effect) -> object:
    """The session's part of a plan's effects: read it, append to it (the compaction engine's path
    for the engine's own events), flush it."""
    if isinstance(effect, Observe):
        return session
    if isinstance(effect, Append):
        return session.append(
            effect.event_type, effect.data, effect.surface_op, effect.source_event_seqs, writer=effect.writer
        )
    if isinstance(effect, Flush):
        session.flush()
        return None
    raise TypeError(f"a session alone cannot perform {effect!r}")


# --- the prune pass (notes §6.3) ------------------------------------------------------------------


def prune_session(session: Session, config: PruneConfig = PruneConfig()) -> PruneResult:
    """The prune pass (:func:`spec.shrink.engine.plan_prune_pass`) on a live session."""
    pruned = run_plan(plans.plan_prune_pass(config), lambda effect: perform_on_session(session, effect))
    return PruneResult(pruned)


# --- the engine -----------------------------------------------------------------------------------


class CompactionEngine:
    """Summary compaction for live sessions: the plans of :mod:`spec.shrink.engine`, run on a
    :class:`Session` with a summarizer, ids, cancellation and a timeout.

    ``summarizer`` writes summaries (:class:`reference.summarizers.DeterministicSummarizer` needs no model); ``policy`` is
    the pressure policy (threshold 80 %, retain 16 %, retries); ``prune`` configures the prune pass
    run before summaries under pressure and overflow (``None``: never prune); ``context_window`` is
    the routed model's capacity in tokens, needed by pressure only; ``summary_timeout`` (seconds)
    bounds the summarizer, measured on ``clock`` (monotonic seconds); ``new_id`` mints compaction ids
    and ``checkpoint_id(compaction_id)`` the checkpoint message's (default: ``new_id`` again)."""

    def __init__(
        self,
        summarizer: Summarizer,
        policy: CompactionPolicy = CompactionPolicy(),
        prune: PruneConfig | None = PruneConfig(),
        context_window: int | None = None,
        summary_timeout: float | None = None,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
        checkpoint_id: Callable[[str], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.summarizer = summarizer
        self.policy = policy
        self.prune_config = prune
        self.context_window = context_window
        self.summary_timeout = summary_timeout
        self._new_id = new_id
        self._checkpoint_id = checkpoint_id or (lambda _compaction_id: new_id())
        self._clock = clock

    # --- entry points ---

    def compact_region(
        self, session: Session, start: int, end: int, signal: AbortSignal | None = None
    ) -> CompactionResult:
        """Automatic compaction of the surface span ``start..end`` (seqs of its first and last
        node), owned by the open turn; the whole surface must stay unchanged while the summarizer
        runs. A failure is raised as it is, after the bracket is closed
        (:func:`spec.shrink.engine.plan_transaction`)."""
        return self.run(session, plans.plan_transaction(start, end, False), signal)

    def compact_now(
        self, session: Session, signal: AbortSignal | None = None, source_command_id: str | None = None
    ) -> CompactionResult | None:
        """Manual compaction (``/compact``) between turns: everything but the newest indivisible unit
        is summarized under a standalone bracket (``turn: null``), then the log is flushed. Returns
        ``None``, writing nothing, when there is nothing to compact. Never prunes. Raises ``ABORTED``
        (the signal's reason) when cancelled — even after the checkpoint landed — and otherwise
        ``COMPACTION_BUSY``, ``COMPACTION_SURFACE_CHANGED``, ``COMPACTION_SUMMARY_FAILED``,
        ``COMPACTION_COMMIT_FAILED`` or ``COMPACTION_PERSISTENCE_FAILED`` (notes §9.1;
        :func:`spec.shrink.engine.plan_manual_compaction`)."""
        return self.run(session, plans.plan_manual_compaction(source_command_id), signal)

    def compact_if_needed(
        self,
        session: Session,
        trigger: Trigger,
        signal: AbortSignal | None = None,
        context_window: int | None = None,
    ) -> CompactionResult | None:
        """``pressure``: if the context holds at least the threshold, prune, measure again, then
        summarize head-anchored spans (keeping the retained tail) until below it, at most
        ``compactionRetries + 1`` times. ``context-overflow``: prune, then force one summary keeping
        only the newest indivisible unit. Both run inside the open turn (notes §5.3;
        :func:`spec.shrink.engine.plan_compact_if_needed`)."""
        if trigger not in ("pressure", "context-overflow"):
            raise ValueError(f"unknown compaction trigger {trigger!r}")
        window = context_window if context_window is not None else self.context_window
        return self.run(
            session, plans.plan_compact_if_needed(trigger, self.policy, self.prune_config, window), signal
        )

    def prune(self, session: Session) -> PruneResult:
        """The prune pass with this engine's configuration (nothing when pruning is off)."""
        return prune_session(session, self.prune_config) if self.prune_config is not None else PruneResult(())

    @staticmethod
    def measure(session: Session) -> int:
        """The estimated tokens of the next request: request-header envelope plus surface."""
        return derive_view_tokens(session)

    def run(self, session: Session, plan: Plan[T], signal: AbortSignal | None = None) -> T:
        """Run a plan of :mod:`spec.shrink.engine` on ``session``: ids from ``new_id`` and
        ``checkpoint_id``, summaries from the summarizer (under ``summary_timeout``), cancellation
        from ``signal``; the session does the rest (:func:`perform_on_session`)."""
        signal = signal or AbortSignal()

        def perform(effect: Effect) -> object:
            if isinstance(effect, MintId):
                if effect.purpose == "compaction":
                    return self._new_id()
                return self._checkpoint_id(str(effect.compaction_id))
            if isinstance(effect, Summarize):
                return self._summarize(session, effect.region, effect.shadowed_token_count, signal)
            if isinstance(effect, Cancellation):
                return signal.reason
            return perform_on_session(session, effect)

        return run_plan(plan, perform)

    def _summarize(
        self, session: Session, region: CompactionRegion, shadowed_tokens: int, signal: AbortSignal
    ) -> object:
        header = derive_request_header(session.events) or {}
        system, tools = header.get("system"), header.get("tools")
        request = SummaryRequest(
            session_id=session.id,
            messages=derive_summarization_messages(session.events, region.shadowed),
            system=system if isinstance(system, str) else None,
            tools=tools if isinstance(tools, FrozenList) else None,
            max_tokens=self.policy.max_tokens,
            shadowed_token_count=shadowed_tokens,
        )
        if self.summary_timeout is None:
            return self.summarizer.summarize(request, signal)
        return _call_with_deadline(
            lambda inner: self.summarizer.summarize(request, inner), signal, self.summary_timeout, self._clock
        )


def _call_with_deadline(
    call: Callable[[AbortSignal], T], signal: AbortSignal, timeout: float, clock: Callable[[], float]
) -> T:
    """Run ``call`` on a worker thread and wait for it, for the caller's abort, or for ``timeout``
    seconds of ``clock``, whichever comes first. On abort or timeout the call's own signal is
    aborted and its late answer, if any, is dropped."""
    inner, unlink = signal.linked()
    wake = threading.Event()
    value: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            value.append(call(inner))
        except BaseException as error:
            failure.append(error)
        finally:
            wake.set()

    inner.on_abort(lambda _reason: wake.set())
    worker = threading.Thread(target=run, name="dsh-summarizer", daemon=True)
    worker.start()
    deadline = clock() + timeout
    try:
        while not (value or failure):
            signal.throw_if_aborted()
            remaining = deadline - clock()
            if remaining <= 0:
                expired = derive_summary_timeout(timeout)
                inner.abort(expired)
                raise expired
            wake.wait(remaining)
            wake.clear()
    finally:
        unlink()
    if failure:
        raise failure[0]
    return value[0]


# --- context-overflow recovery (notes §8.2) -------------------------------------------------------


class OverflowRecovery:
    """Decides, for each failed model request, whether compacting can earn a retry: only for a
    ``CONTEXT_WINDOW_EXCEEDED`` failure, at most ``max_overflow_retries`` times (default: the
    engine policy's, 1) between resets, and only when the surface's ``replaceGeneration`` grew."""

    def __init__(
        self,
        engine: CompactionEngine,
        max_overflow_retries: int | None = None,
        counts: MutableMapping[Session, int] | None = None,
    ) -> None:
        self.engine = engine
        self.max_overflow_retries = (
            engine.policy.max_overflow_retries if max_overflow_retries is None else max_overflow_retries
        )
        # The retries per session since its last reset; a host may keep them across recoveries.
        self._retries: MutableMapping[Session, int] = (
            counts if counts is not None else weakref.WeakKeyDictionary()
        )

    def retries(self, session: Session) -> int:
        return self._retries.get(session, 0)

    def reset(self, session: Session) -> None:
        """A successful response (or the agent going idle) starts a fresh recovery sequence."""
        self._retries.pop(session, None)

    def on_request_error(
        self, session: Session, error: BaseException, signal: AbortSignal | None = None
    ) -> bool:
        """Record ``replaceGeneration``, compact for overflow, and answer whether to retry the
        request. A failing compaction still earns a retry when something landed before it failed
        (typically a prune); otherwise the caller re-raises its original error."""
        signal = signal or AbortSignal()
        retries = self.retries(session)
        plan = plans.plan_overflow_recovery(
            derive_failure_code(error),
            retries,
            self.max_overflow_retries,
            self.engine.policy,
            self.engine.prune_config,
        )
        verdict = self.engine.run(session, plan, signal)
        if verdict.failure is not None:
            chain = derive_error_chain(verdict.failure)
            if verdict.retry:
                log.warning(
                    "context-overflow compaction failed after durable surface progress: %s; retrying from the replacement surface",
                    chain,
                )
            else:
                reason = (
                    "cancellation prevents retry"
                    if signal.aborted
                    else "preserving the original request error"
                )
                log.warning("context-overflow compaction failed: %s; %s", chain, reason)
        if verdict.retry:
            self._retries[session] = retries + 1
        return verdict.retry

    def request(
        self, session: Session, send: Callable[[list[Message]], T], signal: AbortSignal | None = None
    ) -> T:
        """Send the current surface with ``send``; on a context-window failure that recovery can
        answer, send the shrunk surface again. A success resets the retry count."""
        while True:
            try:
                answer = send(session.derive_messages())
            except Exception as error:
                if self.on_request_error(session, error, signal):
                    continue
                raise
            self.reset(session)
            return answer
