"""Context-overflow recovery: record replaceGeneration, compact, retry only if the generation grew,
at most maxOverflowRetries times (notes/dsh-compaction-projection §8, §12.1 I10, §12.2 overflow
tests; SPEC-DECISIONS D8)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal
from shrink_builders import (
    Conversation,
    ScriptedSummarizer,
    assert_log_clean,
    data_of,
    long_conversation,
    new_session,
)

from reference.session import Session
from reference.shrink.compaction import AbortSignal, CompactionEngine, OverflowRecovery, SummaryRequest
from reference.summarizers import DeterministicSummarizer
from spec.codes import Code
from spec.log.events import COMPACTION_END, COMPACTION_START, Message
from spec.shrink import engine as plans
from spec.shrink.compaction import CompactionPolicy
from spec.shrink.engine import Observe, Plan
from spec.shrink.pressure import (
    CONTEXT_WINDOW_EXCEEDED,
    is_context_window_exceeded,
    is_overflow_retry_earned,
    may_attempt_overflow_recovery,
)
from spec.shrink.prune import PruneConfig
from spec.shrink.tokens import estimate_message


class ProviderError(Exception):
    def __init__(self, code: str, message: str = "provider refused the request") -> None:
        super().__init__(message)
        self.code = code


OVERFLOW = ProviderError(CONTEXT_WINDOW_EXCEEDED, "prompt is too long")


def recovery(
    summarizer: Any = None, prune: PruneConfig | None = PruneConfig(), **policy: Any
) -> OverflowRecovery:
    compactor = CompactionEngine(
        summarizer or DeterministicSummarizer(), policy=CompactionPolicy(**policy), prune=prune
    )
    return OverflowRecovery(compactor)


def overflowing_session(turns: int = 4, output_chars: int = 600) -> Session:
    session = new_session()
    long_conversation(session, turns=turns, output_chars=output_chars, close_last=False)
    return session


def indivisible_session(output_chars: int) -> Session:
    """A surface that is one tool pair and nothing else: nothing can be summarized around it."""
    session = new_session()
    talk = Conversation(session)
    talk.turn = 1
    session.append("turn/start", {"turn": 1})
    talk.tool_step("q" * output_chars)
    return session


def test_an_overflow_force_compacts_below_pressure_and_retries_after_the_replacement() -> None:
    session = overflowing_session()
    newest = session.surface.nodes[-1]
    generation = session.surface.replace_generation
    assert recovery().on_request_error(session, OVERFLOW)
    assert session.surface.replace_generation == generation + 1
    assert session.surface.nodes[-1] == newest and len(session.surface.nodes) == 2
    assert_log_clean(session)


def test_the_overflow_bracket_lies_inside_the_open_turn() -> None:
    session = overflowing_session()
    recovery().on_request_error(session, OVERFLOW)
    start = next(event for event in session.events if event["type"] == COMPACTION_START)
    assert data_of(start) == {"compactionId": data_of(start)["compactionId"], "turn": 4}
    assert_log_clean(session)


def test_a_prune_alone_earns_a_retry_on_an_indivisible_surface() -> None:
    session = indivisible_session(20_000)
    summarizer = ScriptedSummarizer()
    assert recovery(summarizer).on_request_error(session, OVERFLOW)
    assert summarizer.requests == [] and session.surface.replace_generation == 1
    assert_log_clean(session)


def test_an_indivisible_surface_with_nothing_to_prune_gets_no_retry() -> None:
    session = indivisible_session(100)
    mark = session.seq
    assert not recovery().on_request_error(session, OVERFLOW)
    assert session.seq == mark


def test_a_durable_prune_earns_a_retry_even_when_the_summary_then_fails() -> None:
    session = overflowing_session(output_chars=20_000)

    def fail(request: SummaryRequest, signal: AbortSignal) -> None:
        raise RuntimeError("summary model down")

    assert recovery(ScriptedSummarizer(fail)).on_request_error(session, OVERFLOW)
    assert session.events[-1]["type"] == COMPACTION_END and "error" in data_of(session.events[-1])
    assert_log_clean(session)


def test_cancellation_wins_when_the_summary_fails_after_a_durable_prune() -> None:
    session = overflowing_session(output_chars=20_000)
    signal = AbortSignal()

    def cancelled(request: SummaryRequest, seen: AbortSignal) -> None:
        signal.abort()
        seen.throw_if_aborted()

    generation = session.surface.replace_generation
    assert not recovery(ScriptedSummarizer(cancelled)).on_request_error(session, OVERFLOW, signal)
    assert session.surface.replace_generation > generation


def test_no_retry_when_cancellation_lands_during_an_awaited_compaction_that_committed() -> None:
    session = overflowing_session()
    signal = AbortSignal()
    generation = session.surface.replace_generation
    assert not recovery(ScriptedSummarizer(lambda request, seen: signal.abort())).on_request_error(
        session, OVERFLOW, signal
    )
    assert session.surface.replace_generation == generation + 1


def test_a_failing_compaction_without_progress_preserves_the_original_error() -> None:
    session = overflowing_session()

    def fail(request: SummaryRequest, signal: AbortSignal) -> None:
        raise RuntimeError("summary model down")

    def send(messages: list[Message]) -> str:
        raise OVERFLOW

    with pytest.raises(ProviderError) as caught:
        recovery(ScriptedSummarizer(fail)).request(session, send)
    assert caught.value is OVERFLOW


def test_other_failures_are_not_recovered() -> None:
    session = overflowing_session()
    mark = session.seq
    assert not recovery().on_request_error(session, ProviderError("RATE_LIMIT"))
    assert not recovery().on_request_error(session, RuntimeError("boom"))
    assert session.seq == mark


def test_a_pre_aborted_request_is_not_recovered() -> None:
    session = overflowing_session()
    signal = AbortSignal()
    signal.abort()
    assert not recovery().on_request_error(session, OVERFLOW, signal)


def test_the_retry_cap_holds_until_a_success_resets_it() -> None:
    session = overflowing_session(turns=6)
    recover = recovery()
    assert recover.on_request_error(session, OVERFLOW)
    assert recover.retries(session) == 1
    assert not recover.on_request_error(session, OVERFLOW)
    recover.reset(session)
    Conversation(session).user("more context " * 50, kind="inject")
    Conversation(session).user("and more " * 50, kind="inject")
    assert recover.on_request_error(session, OVERFLOW)


def test_max_overflow_retries_zero_disables_recovery() -> None:
    session = overflowing_session()
    mark = session.seq
    assert not recovery(max_overflow_retries=0).on_request_error(session, OVERFLOW)
    assert session.seq == mark


def test_an_explicit_cap_overrides_the_policy() -> None:
    session = overflowing_session()
    compactor = CompactionEngine(DeterministicSummarizer())
    assert not OverflowRecovery(compactor, max_overflow_retries=0).on_request_error(session, OVERFLOW)


def test_a_request_that_overflows_is_sent_again_on_the_compacted_surface() -> None:
    session = overflowing_session(turns=6)
    sent: list[int] = []
    limit = int(
        sum(estimate_message(message) for message in session.derive_messages()) * 0.7
    )  # tokens the provider accepts

    def send(messages: list[Message]) -> str:
        total = sum(estimate_message(message) for message in messages)
        sent.append(total)
        if total > limit:
            raise OVERFLOW
        return "answer"

    recover = recovery()
    assert recover.request(session, send) == "answer"
    assert len(sent) == 2 and sent[0] > limit >= sent[1]
    assert recover.retries(session) == 0
    assert_log_clean(session)


def test_a_second_overflow_in_one_sequence_is_not_retried_again() -> None:
    session = overflowing_session(turns=6)

    def send(messages: Sequence[Message]) -> str:
        raise OVERFLOW

    with pytest.raises(ProviderError):
        recovery().request(session, send)
    assert sum(1 for event in session.events if event["type"] == COMPACTION_START) == 1


# --- the rules (spec.shrink.pressure) --------------------------------------------------------------------


def test_only_the_canonical_code_is_a_context_overflow() -> None:
    assert is_context_window_exceeded("CONTEXT_WINDOW_EXCEEDED")
    assert not is_context_window_exceeded("context_window_exceeded") and not is_context_window_exceeded(None)


@given(before=st.integers(0, 5), grew=st.integers(-1, 2), aborted=st.booleans())
def test_a_retry_is_earned_exactly_when_the_generation_grew_and_nothing_was_cancelled(
    before: int, grew: int, aborted: bool
) -> None:
    assert is_overflow_retry_earned(before, before + grew, aborted) == (grew > 0 and not aborted)


@given(retries=st.integers(0, 4), cap=st.integers(0, 4), aborted=st.booleans())
def test_recovery_is_attempted_only_below_the_cap_for_an_uncancelled_overflow(
    retries: int, cap: int, aborted: bool
) -> None:
    assert may_attempt_overflow_recovery(CONTEXT_WINDOW_EXCEEDED, aborted, retries, cap) == (
        retries < cap and not aborted
    )
    assert not may_attempt_overflow_recovery("RATE_LIMIT", False, 0, 4)


def test_an_automatic_compaction_that_lands_no_replace_is_not_a_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def reports_success(*args: object) -> Plan[None]:
        return None
        yield Observe()  # a generator that appends nothing

    monkeypatch.setattr(plans, "plan_compact_if_needed", reports_success)
    session = overflowing_session()
    assert not OverflowRecovery(CompactionEngine(DeterministicSummarizer())).on_request_error(
        session, OVERFLOW
    )


def test_overflow_compaction_needs_no_context_window() -> None:
    session = overflowing_session()
    assert (
        refusal(
            lambda: CompactionEngine(DeterministicSummarizer()).compact_if_needed(session, "pressure")
        ).code
        == Code.COMPACTION_NO_CAPACITY
    )
    assert (
        CompactionEngine(DeterministicSummarizer()).compact_if_needed(session, "context-overflow") is not None
    )
