"""The summary-compaction engine: the transaction, manual and automatic compaction, pressure, the
busy lock, and crashes between start and end (notes/dsh-compaction-projection §4, §5, §9, §12;
SPEC-DECISIONS D3.6, D8)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import refusal
from shrink_builders import (
    Conversation,
    RecordingSink,
    ScriptedSummarizer,
    assert_calls_precede_results,
    assert_log_clean,
    data_of,
    long_conversation,
    new_session,
    sink_conversation,
)

from reference.persistence.filestore import FileStore
from reference.persistence.powerloss import PowerLossFileSystem, SimulatedCrash, UnsyncedFile
from reference.session import Session
from reference.shrink.compaction import AbortSignal, CompactionEngine, SummaryRequest
from reference.store import SessionStore
from reference.summarizers import DeterministicSummarizer, derive_model_request, summarizer_output_from_model
from spec.checks.log import check_log
from spec.codes import Code, SpecError
from spec.lineage.repair import fold_repair_scan
from spec.log.events import COMPACTION_END, COMPACTION_START, COMPACTION_SUMMARY, Event, Message
from spec.log.json import FrozenList
from spec.log.surface import derive_messages, fold_surface
from spec.log.writers import COMPACTION_ENGINE
from spec.shrink.bracket import (
    Stage,
    classify_manual_failure,
    derive_error_chain,
    derive_manual_outcome,
    should_flush_after_close,
)
from spec.shrink.compaction import CompactionPolicy
from spec.shrink.pairing import derive_cut_balance
from spec.shrink.pressure import derive_context_tokens, is_under_pressure, validate_pressure_relieved
from spec.shrink.summary import SummarizerOutput
from spec.shrink.tokens import price_surface
from tests.powerloss_harness import ProbedFileSystem, crash_at_every_op


def ids() -> Any:
    counter = iter(range(1, 1_000_000))
    return lambda: f"id-{next(counter)}"


def engine(summarizer: Any = None, **options: Any) -> CompactionEngine:
    options.setdefault("new_id", ids())
    return CompactionEngine(summarizer if summarizer is not None else DeterministicSummarizer(), **options)


def types_after(session: Session, seq: int) -> list[object]:
    return [event.get("type") for event in session.events[seq:]]


def events_of(session: Session, kind: str) -> list[Event]:
    return [event for event in session.events if event.get("type") == kind]


def in_open_turn(session: Session, turns: int = 3) -> Conversation:
    """``turns`` turns, the last one still open after its closed steps."""
    return long_conversation(session, turns=turns, close_last=False)


def head_span(session: Session) -> tuple[int, int]:
    """The span a forced compaction would choose: everything but the newest unit."""
    nodes = session.surface.nodes
    return nodes[0], nodes[-2]


# --- manual compaction (notes §9.1) ----------------------------------------------------------------


def test_a_manual_compaction_replaces_the_head_with_one_checkpoint_and_keeps_every_original_event() -> None:
    session = new_session()
    long_conversation(session, turns=4)
    before_events = session.events
    before_nodes = session.surface.nodes
    result = engine().compact_now(session)
    assert result is not None
    assert session.events[: len(before_events)] == before_events
    assert session.surface.nodes == (result.summary_seq + 1, before_nodes[-1])
    assert result.shadowed_seqs == before_nodes[:-1]
    assert_log_clean(session)


def test_a_manual_compaction_writes_a_standalone_bracket_correlated_with_its_source_command() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    mark = session.seq
    result = engine().compact_now(session, source_command_id="cmd-7")
    assert result is not None
    assert types_after(session, mark) == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
    ]
    start, summary, checkpoint, end = session.events[mark:]
    assert data_of(start) == {"compactionId": result.compaction_id, "sourceCommandId": "cmd-7", "turn": None}
    assert data_of(summary)["sourceCommandId"] == "cmd-7"
    assert data_of(checkpoint)["source"] == {
        "kind": "plugin",
        "plugin": "compact",
        "compactionId": result.compaction_id,
        "sourceCommandId": "cmd-7",
    }
    assert data_of(end) == data_of(start)


def test_a_manual_compaction_without_a_command_writes_exactly_the_id_and_a_null_turn() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    mark = session.seq
    engine().compact_now(session)
    assert data_of(session.events[mark]) == {"compactionId": "id-1", "turn": None}


def test_a_manual_compaction_flushes_its_closed_bracket() -> None:
    sink, session = sink_conversation(3)
    engine().compact_now(session)
    assert sink.flushes == 1 and sink.flushed_upto == session.seq


def test_manual_compaction_with_nothing_compactable_returns_none_and_writes_nothing() -> None:
    session = new_session()
    talk = Conversation(session)
    talk.prompt("only one message")
    talk.end_turn()
    mark = session.seq
    assert engine().compact_now(session) is None
    assert session.seq == mark


def test_manual_compaction_inside_an_open_turn_is_busy_and_writes_nothing() -> None:
    session = new_session()
    in_open_turn(session)
    mark = session.seq
    caught = refusal(lambda: engine().compact_now(session))
    assert caught.code == Code.COMPACTION_BUSY
    assert "already has an open turn" in caught.message
    assert session.seq == mark


def test_a_session_with_no_turn_boundary_can_be_compacted_manually_without_creating_one() -> None:
    session = new_session()
    talk = Conversation(session)
    for number in range(6):
        talk.user(f"note {number}: " + "context " * 40)
    assert engine().compact_now(session) is not None
    assert not events_of(session, "turn/start")
    assert_log_clean(session)


def test_a_pre_aborted_signal_stops_a_manual_compaction_before_anything_is_written() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    summarizer = ScriptedSummarizer()
    signal = AbortSignal()
    reason = RuntimeError("user pressed stop")
    signal.abort(reason)
    mark = session.seq
    with pytest.raises(RuntimeError) as caught:
        engine(summarizer).compact_now(session, signal)
    assert caught.value is reason
    assert session.seq == mark and summarizer.requests == []


# --- the busy lock (notes §4.4) -------------------------------------------------------------------


def test_a_live_unmatched_start_makes_compaction_busy_without_summarizing() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    session.append(COMPACTION_START, {"compactionId": "other", "turn": None}, writer=COMPACTION_ENGINE)
    summarizer = ScriptedSummarizer()
    mark = session.seq
    caught = refusal(lambda: engine(summarizer).compact_now(session))
    assert caught.code == Code.COMPACTION_BUSY
    assert "compaction lock is already active" in caught.message
    assert session.seq == mark and summarizer.requests == []


def test_an_unmatched_start_before_a_newer_end_seed_is_a_stale_orphan_that_does_not_block() -> None:
    parent = new_session("parent")
    long_conversation(parent, turns=3)
    parent.append(COMPACTION_START, {"compactionId": "orphan", "turn": None}, writer=COMPACTION_ENGINE)
    # What a DSH v0 resume leaves (it never closes a bracket): the start, then an end-seed.
    marker = {"type": "session/end-seed", "seq": parent.seq, "time": 2, "data": {}}
    child = SessionStore(clock=lambda: 5).create(
        "child", seed=[*parent.events, marker], meta={"createdAt": 2}
    )
    assert child.events[-1]["type"] == "session/end-seed"
    assert engine().compact_now(child) is not None
    assert [v.rule for v in check_log(list(child.events), dict(child.header), format_version=0)] == [
        "legacy-compaction-dangling"
    ]
    assert_calls_precede_results(child.derive_messages())


def test_automatic_and_manual_compaction_exclude_each_other_through_the_log() -> None:
    session = new_session()
    in_open_turn(session)
    start, end = head_span(session)

    def nested(request: SummaryRequest, signal: AbortSignal) -> None:
        assert refusal(lambda: engine().compact_region(session, start, end)).code == Code.COMPACTION_BUSY

    engine(ScriptedSummarizer(nested)).compact_region(session, start, end)
    assert len(events_of(session, COMPACTION_START)) == 1


# --- automatic compaction (notes §4.5) ------------------------------------------------------------


def test_automatic_compaction_is_owned_by_the_open_turn() -> None:
    session = new_session()
    talk = in_open_turn(session)
    result = engine().compact_region(session, *head_span(session))
    assert data_of(session.events[result.start_seq])["turn"] == talk.turn
    assert data_of(session.events[result.end_seq]) == {
        "compactionId": result.compaction_id,
        "turn": talk.turn,
    }
    assert_log_clean(session)


def test_automatic_compaction_outside_a_turn_is_rejected_and_writes_nothing() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    mark = session.seq
    assert (
        refusal(lambda: engine().compact_region(session, *head_span(session))).code
        == Code.COMPACTION_NO_OPEN_TURN
    )
    assert session.seq == mark


def test_a_region_whose_end_splits_a_tool_call_from_its_result_is_rejected() -> None:
    session = new_session()
    in_open_turn(session)
    calls = [seq for seq in session.surface.nodes if session.events[seq]["type"] == "assistant/message"]
    caught = refusal(lambda: engine().compact_region(session, session.surface.nodes[0], calls[0]))
    assert caught.code == Code.COMPACTION_RANGE_INVALID
    assert "not a balanced boundary" in caught.message


def test_the_checkpoint_cites_the_start_the_summary_and_every_shadowed_node() -> None:
    session = new_session()
    in_open_turn(session)
    result = engine().compact_region(session, *head_span(session))
    checkpoint = session.events[result.summary_seq + 1]
    summary = session.events[result.summary_seq]
    assert checkpoint["sourceEventSeqs"] == [result.start_seq, result.summary_seq, *result.shadowed_seqs]
    assert checkpoint["surfaceOp"] == {
        "op": "replace",
        "start": result.shadowed_range[0],
        "end": result.shadowed_range[1],
    }
    assert data_of(summary)["shadowedSeqs"] == list(result.shadowed_seqs)
    assert data_of(summary)["shadowedRange"] == {
        "start": result.shadowed_seqs[0],
        "end": result.shadowed_seqs[-1],
    }


def test_the_shadowed_price_is_the_heuristic_price_of_exactly_the_replaced_nodes() -> None:
    session = new_session()
    in_open_turn(session)
    priced = dict(price_surface(session.surface.nodes, session.events))
    result = engine().compact_region(session, *head_span(session))
    assert result.shadowed_token_count == sum(priced[seq] for seq in result.shadowed_seqs)


def test_a_replay_of_the_compacted_log_gives_the_same_messages() -> None:
    session = new_session()
    in_open_turn(session)
    engine().compact_region(session, *head_span(session))
    fold = fold_surface(session.events)
    assert fold.nodes == session.surface.nodes
    assert derive_messages(session.events, fold.nodes) == session.derive_messages()


def test_the_summarizer_reads_the_shadowed_messages_and_the_latest_request_header() -> None:
    session = new_session()
    talk = long_conversation(session, turns=2, close_last=False)
    talk.request_header(system="Be terse.", tools=[{"name": "grep"}])
    summarizer = ScriptedSummarizer()
    start, end = head_span(session)
    expected = derive_messages(session.events, session.surface.nodes[:-1])
    engine(summarizer, policy=CompactionPolicy(max_tokens=777)).compact_region(session, start, end)
    (request,) = summarizer.requests
    assert list(request.messages) == expected
    assert (request.system, request.tools, request.max_tokens) == ("Be terse.", [{"name": "grep"}], 777)


# --- the bracket on every failure path (notes §4.5 steps 7-12; I5, I9) -------------------------------


def raising(error: BaseException) -> Any:
    def behaviour(request: SummaryRequest, signal: AbortSignal) -> None:
        raise error

    return behaviour


def test_the_bracket_stays_paired_when_an_automatic_summarizer_raises() -> None:
    session = new_session()
    in_open_turn(session)
    nodes, mark = session.surface.nodes, session.seq
    error = RuntimeError("summary unavailable")
    with pytest.raises(RuntimeError) as caught:
        engine(ScriptedSummarizer(raising(error))).compact_region(session, *head_span(session))
    assert caught.value is error
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]
    assert data_of(session.events[-1])["error"] == "summary unavailable"
    assert session.surface.nodes == nodes
    assert_log_clean(session)


def test_the_bracket_stays_paired_when_a_manual_summarizer_raises_and_the_failure_is_a_summary_failure() -> (
    None
):
    sink, session = sink_conversation(3)
    mark = session.seq
    caught = refusal(
        lambda: engine(ScriptedSummarizer(raising(ValueError("model down")))).compact_now(session)
    )
    assert caught.code == Code.COMPACTION_SUMMARY_FAILED
    assert isinstance(caught.__cause__, ValueError)
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]
    assert sink.flushes == 1
    assert_log_clean(session)


def test_the_bracket_stays_paired_when_the_summarizer_times_out() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    release = threading.Event()
    started = threading.Event()
    seen: list[AbortSignal] = []

    def stuck(request: SummaryRequest, signal: AbortSignal) -> None:
        seen.append(signal)
        started.set()
        release.wait(30)

    mark = session.seq
    try:
        caught = refusal(lambda: engine(ScriptedSummarizer(stuck), summary_timeout=0.05).compact_now(session))
    finally:
        release.set()
    started.wait(30)  # on a loaded machine the summarizer's thread may start after the timeout
    assert caught.code == Code.COMPACTION_SUMMARY_FAILED
    assert (
        isinstance(caught.__cause__, SpecError) and caught.__cause__.code == Code.COMPACTION_SUMMARY_TIMEOUT
    )
    assert seen[0].aborted
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]
    assert data_of(session.events[-1])["error"] == "summarization timed out after 0.05 s"
    assert_log_clean(session)


def test_a_summarizer_within_its_timeout_commits_normally() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    assert engine(summary_timeout=30).compact_now(session) is not None
    assert_log_clean(session)


def test_the_bracket_stays_paired_when_the_summarizer_is_cancelled() -> None:
    sink, session = sink_conversation(3)
    signal = AbortSignal()

    def cancelled(request: SummaryRequest, signal_seen: AbortSignal) -> None:
        signal.abort()
        signal_seen.throw_if_aborted()

    mark = session.seq
    assert (
        refusal(lambda: engine(ScriptedSummarizer(cancelled)).compact_now(session, signal)).code
        == Code.ABORTED
    )
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]
    assert data_of(session.events[-1])["error"] == "the operation was aborted"
    assert sink.flushes == 1
    assert_log_clean(session)


def test_a_cancellation_that_lands_while_a_timed_summarizer_runs_stops_the_wait() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    signal = AbortSignal()
    release = threading.Event()

    def stuck(request: SummaryRequest, signal_seen: AbortSignal) -> None:
        signal.abort(KeyError("stop"))
        release.wait(30)

    mark = session.seq
    try:
        with pytest.raises(KeyError):
            engine(ScriptedSummarizer(stuck), summary_timeout=30).compact_now(session, signal)
    finally:
        release.set()
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]


def test_a_manual_summary_that_returns_after_cancellation_is_not_committed() -> None:
    session = new_session()
    long_conversation(session, turns=3)
    signal = AbortSignal()
    mark = session.seq
    assert (
        refusal(
            lambda: engine(ScriptedSummarizer(lambda request, seen: signal.abort())).compact_now(
                session, signal
            )
        ).code
        == Code.ABORTED
    )
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]


def test_cancellation_during_the_flush_wins_over_a_committed_manual_compaction() -> None:
    sink, session = sink_conversation(3)
    signal = AbortSignal()
    sink.on_flush = signal.abort
    mark = session.seq
    assert refusal(lambda: engine().compact_now(session, signal)).code == Code.ABORTED
    assert types_after(session, mark) == [
        COMPACTION_START,
        COMPACTION_SUMMARY,
        "user/message",
        COMPACTION_END,
    ]
    assert sink.flushes == 1


def test_an_automatic_compaction_still_commits_when_cancellation_lands_during_summarization() -> None:
    session = new_session()
    in_open_turn(session)
    signal = AbortSignal()
    result = engine(ScriptedSummarizer(lambda request, seen: signal.abort())).compact_region(
        session, *head_span(session), signal
    )
    assert "error" not in data_of(session.events[result.end_seq])


def test_the_bracket_stays_paired_when_the_surface_changes_during_automatic_summarization() -> None:
    session = new_session()
    talk = in_open_turn(session)
    nodes = session.surface.nodes

    def interfere(request: SummaryRequest, signal: AbortSignal) -> None:
        talk.user("injected while summarizing", kind="inject")

    mark = session.seq
    assert (
        refusal(
            lambda: engine(ScriptedSummarizer(interfere)).compact_region(session, *head_span(session))
        ).code
        == Code.COMPACTION_SURFACE_CHANGED
    )
    assert types_after(session, mark) == [COMPACTION_START, "user/message", COMPACTION_END]
    assert data_of(session.events[-1])["error"] == "compaction: session surface changed during summarization"
    assert session.surface.nodes == (*nodes, mark + 1)
    assert_log_clean(session)


def test_log_only_appends_during_automatic_summarization_are_tolerated() -> None:
    session = new_session()
    talk = in_open_turn(session)
    result = engine(
        ScriptedSummarizer(lambda request, signal: talk.request_header() and None)
    ).compact_region(session, *head_span(session))
    assert "error" not in data_of(session.events[result.end_seq])
    assert_log_clean(session)


def test_a_manual_compaction_keeps_context_appended_outside_its_span_during_summarization() -> None:
    session = new_session()
    talk = long_conversation(session, turns=3)
    injected: list[int] = []

    def inject(request: SummaryRequest, signal: AbortSignal) -> None:
        injected.append(session.seq)
        talk.user("context that arrived meanwhile", kind="inject")

    result = engine(ScriptedSummarizer(inject)).compact_now(session)
    assert result is not None
    assert session.surface.nodes[-1] == injected[0]
    assert_log_clean(session)


def test_a_manual_compaction_whose_span_changed_during_summarization_reports_changed() -> None:
    sink, session = sink_conversation(3)
    first = session.surface.nodes[0]

    def rewrite(request: SummaryRequest, signal: AbortSignal) -> None:
        message = {
            "id": "rewritten",
            "role": "user",
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": "x"}],
        }
        session.append("user/message", message, {"op": "replace", "start": first, "end": first}, [first])

    mark = session.seq
    assert (
        refusal(lambda: engine(ScriptedSummarizer(rewrite)).compact_now(session)).code
        == Code.COMPACTION_SURFACE_CHANGED
    )
    assert types_after(session, mark) == [COMPACTION_START, "user/message", COMPACTION_END]
    assert "selected span" in data_of(session.events[-1])["error"]
    assert sink.flushes == 1


def test_a_summary_that_is_not_smaller_is_refused_and_the_surface_is_unchanged() -> None:
    session = new_session()
    in_open_turn(session)
    nodes, mark = session.surface.nodes, session.seq
    assert (
        refusal(
            lambda: engine(ScriptedSummarizer(text="word " * 20_000)).compact_region(
                session, *head_span(session)
            )
        ).code
        == Code.COMPACTION_SUMMARY_NOT_SMALLER
    )
    assert session.surface.nodes == nodes
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]


def test_a_summary_with_an_image_is_refused() -> None:
    session = new_session()
    in_open_turn(session)
    image = SummarizerOutput(summary=FrozenList([{"type": "image", "data": "x"}]), provider="p", model="m")
    assert (
        refusal(
            lambda: engine(ScriptedSummarizer(lambda request, signal: image)).compact_region(
                session, *head_span(session)
            )
        ).code
        == Code.COMPACTION_SUMMARY_UNSUPPORTED_CONTENT
    )
    assert session.events[-1]["type"] == COMPACTION_END


def failed_commit(failing: str, summarizer: Any = None) -> tuple[RecordingSink, Session, list[object]]:
    """A three-turn conversation whose compaction is a commit failure because every append of
    ``failing`` fails: the sink, the session, and the types of the events the attempt left."""
    sink, session = sink_conversation(3)
    sink.fail_appends_of(failing)
    mark = session.seq
    assert refusal(lambda: engine(summarizer).compact_now(session)).code == Code.COMPACTION_COMMIT_FAILED
    return sink, session, types_after(session, mark)


def test_a_failing_compaction_end_leaves_one_orphaned_start_that_keeps_the_lock() -> None:
    sink, session, left = failed_commit(COMPACTION_END)
    assert left == [COMPACTION_START, COMPACTION_SUMMARY, "user/message"]
    assert sink.flushes == 0
    sink.fail_append = lambda event: False
    assert refusal(lambda: engine().compact_now(session)).code == Code.COMPACTION_BUSY


def test_a_failed_error_close_leaves_only_the_start_and_is_a_commit_failure() -> None:
    sink, _, left = failed_commit(COMPACTION_END, ScriptedSummarizer(raising(RuntimeError("no"))))
    assert left == [COMPACTION_START]
    assert sink.flushes == 0


def test_a_commit_body_failure_closes_the_bracket_with_an_error() -> None:
    _, session, left = failed_commit(COMPACTION_SUMMARY)
    assert left == [COMPACTION_START, COMPACTION_END]
    assert (
        data_of(session.events[-1])["turn"] is None
        and "injected append failure" in data_of(session.events[-1])["error"]
    )
    assert_log_clean(session)


def test_a_failed_flush_after_a_committed_manual_compaction_is_a_persistence_failure() -> None:
    sink, session = sink_conversation(3)

    sink.fail_flushes("disk full")
    assert refusal(lambda: engine().compact_now(session)).code == Code.COMPACTION_PERSISTENCE_FAILED
    assert "error" not in data_of(session.events[-1]) and session.events[-1]["type"] == COMPACTION_END


def test_a_commit_failure_takes_precedence_over_a_flush_failure() -> None:
    sink, session = sink_conversation(3)
    sink.fail_appends_of(COMPACTION_SUMMARY)

    sink.fail_flushes("disk full")
    assert refusal(lambda: engine().compact_now(session)).code == Code.COMPACTION_COMMIT_FAILED


def test_an_interrupt_during_summarization_still_closes_the_bracket_and_propagates() -> None:
    session = new_session()
    in_open_turn(session)
    mark = session.seq
    with pytest.raises(KeyboardInterrupt):
        engine(ScriptedSummarizer(raising(KeyboardInterrupt()))).compact_region(session, *head_span(session))
    assert types_after(session, mark) == [COMPACTION_START, COMPACTION_END]


# --- crashes between start and end (SPEC-DECISIONS D3.6) -------------------------------------------


def crash_workload(fs: PowerLossFileSystem) -> None:
    clock = iter(range(1_000, 1_000_000))
    store = SessionStore(
        persistence=FileStore("/data", fs=fs, temp_token=lambda: "tmp"), clock=lambda: next(clock)
    )
    session = store.create("crashy", meta={"createdAt": 1})
    in_open_turn(session, turns=2)
    session.flush()

    def flush_midway(request: SummaryRequest, signal: AbortSignal) -> None:
        session.flush()

    engine(ScriptedSummarizer(flush_midway), prune=None).compact_if_needed(session, "context-overflow")
    session.flush()


def test_a_crash_between_start_and_end_leaves_a_log_that_repair_closes() -> None:
    fs = ProbedFileSystem()

    def crash_after_the_start(request: SummaryRequest, signal: AbortSignal) -> None:
        session.flush()
        fs.crash_at_op(1)

    clock = iter(range(1_000, 1_000_000))
    store = SessionStore(
        persistence=FileStore("/data", fs=fs, temp_token=lambda: "tmp"), clock=lambda: next(clock)
    )
    session = store.create("crashy", meta={"createdAt": 1})
    in_open_turn(session)
    session.flush()
    engine(ScriptedSummarizer(crash_after_the_start), prune=None).compact_region(session, *head_span(session))
    with pytest.raises(SimulatedCrash):
        session.flush()
    reopened = FileStore("/data", fs=fs.crash()).open("crashy")
    events = reopened.read()
    starts = [event for event in events if event["type"] == COMPACTION_START]
    ends = [event for event in events if event["type"] == COMPACTION_END]
    assert len(starts) == len(ends) == 1
    assert data_of(ends[0])["error"].startswith("interrupted")
    assert [event["type"] for event in events[-3:]] == [COMPACTION_END, "step/end", "turn/end"] or events[-2][
        "type"
    ] == COMPACTION_END
    assert check_log(list(events), dict(reopened.header)) == ()
    reopened.close()


def test_every_crash_point_of_a_compaction_leaves_a_log_that_repair_closes_and_the_checker_accepts() -> None:
    def cuts(unsynced: UnsyncedFile) -> tuple[int | None, ...]:
        return tuple(dict.fromkeys([*((None,) if unsynced.can_revert else ()), 0, unsynced.pending]))

    outcomes = 0
    for point in crash_at_every_op(ProbedFileSystem, crash_workload, cuts):
        store = FileStore("/data", fs=point.after)
        if store.locate("crashy") is None:
            continue
        handle = store.open("crashy")
        events = handle.read()
        assert fold_repair_scan(events).open_compactions == ()
        assert check_log(list(events), dict(handle.header)) == ()
        handle.close()
        outcomes += 1
    assert outcomes > 10


# --- pressure (notes §5.3, §6.4) -------------------------------------------------------------------


def pressured_session(output_chars: int = 2_000, turns: int = 4) -> Session:
    session = new_session()
    long_conversation(session, turns=turns, output_chars=output_chars, close_last=False)
    return session


def test_pressure_below_the_threshold_does_nothing_not_even_pruning() -> None:
    session = pressured_session(output_chars=9_000)
    mark = session.seq
    window = CompactionEngine.measure(session) * 2
    assert engine(context_window=window).compact_if_needed(session, "pressure") is None
    assert session.seq == mark


def test_pressure_above_the_threshold_compacts_the_head_and_keeps_the_retained_tail() -> None:
    session = pressured_session()
    total = CompactionEngine.measure(session)
    window = int(total / 0.85)
    compactor = engine(context_window=window, prune=None)
    result = compactor.compact_if_needed(session, "pressure")
    assert result is not None
    assert not is_under_pressure(CompactionEngine.measure(session), int(window * 0.8))
    kept = session.surface.nodes[1:]
    retained = sum(
        tokens for seq, tokens in price_surface(session.surface.nodes, session.events) if seq in kept
    )
    assert retained >= int(window * 0.16)
    assert_log_clean(session)


def test_the_request_header_counts_towards_pressure_without_joining_the_surface() -> None:
    session = new_session()
    talk = long_conversation(session, turns=3, close_last=False)
    surface_only = CompactionEngine.measure(session)
    talk.request_header(system="s" * 400)
    assert CompactionEngine.measure(session) == surface_only + 100 + 4
    window = int(surface_only / 0.8) + 10
    assert engine(context_window=window, prune=None).compact_if_needed(session, "pressure") is not None


def test_pruning_alone_can_clear_pressure_without_calling_the_summarizer() -> None:
    session = pressured_session(output_chars=20_000)
    summarizer = ScriptedSummarizer()
    window = int(CompactionEngine.measure(session) / 0.8) // 2
    generation = session.surface.replace_generation
    assert engine(summarizer, context_window=window).compact_if_needed(session, "pressure") is None
    assert summarizer.requests == []
    assert session.surface.replace_generation == generation + 4
    assert not events_of(session, COMPACTION_SUMMARY)
    assert_log_clean(session)


def test_when_pruning_is_not_enough_the_summary_reads_the_pruned_surface() -> None:
    session = pressured_session(output_chars=20_000, turns=6)
    summarizer = ScriptedSummarizer()
    window = 9_000
    engine(summarizer, context_window=window).compact_if_needed(session, "pressure")
    (request,) = summarizer.requests
    assert any("tool result middle pruned" in str(message) for message in request.messages)
    assert_log_clean(session)


def test_pruning_then_summarising_keeps_every_tool_call_with_its_result() -> None:
    session = pressured_session(output_chars=20_000, turns=6)
    engine(context_window=9_000).compact_if_needed(session, "pressure")
    assert derive_cut_balance(session.surface.nodes, session.events)[-1]
    assert_calls_precede_results(session.derive_messages())
    assert session.events[-1]["type"] == COMPACTION_END


def test_pressure_that_compaction_cannot_relieve_ends_still_above_the_threshold() -> None:
    session = pressured_session()
    with pytest.raises(SpecError) as caught:
        engine(context_window=60, policy=CompactionPolicy(retain_tokens=1), prune=None).compact_if_needed(
            session, "pressure"
        )
    assert caught.value.code == Code.COMPACTION_STILL_ABOVE_THRESHOLD
    assert "after 2 compaction attempts" in caught.value.message
    assert_log_clean(session)


def test_pressure_needs_the_context_window() -> None:
    session = pressured_session()
    assert (
        refusal(lambda: engine().compact_if_needed(session, "pressure")).code == Code.COMPACTION_NO_CAPACITY
    )


def test_pressure_checks_the_lock_before_anything_else() -> None:
    session = pressured_session()
    session.append(COMPACTION_START, {"compactionId": "x", "turn": 4}, writer=COMPACTION_ENGINE)
    caught = refusal(lambda: engine().compact_if_needed(session, "pressure"))
    assert caught.code == Code.COMPACTION_BUSY
    assert caught.message.startswith("automatic pressure compaction:")


@settings(max_examples=15)
@given(
    turns=st.integers(min_value=1, max_value=5),
    output=st.integers(min_value=0, max_value=12_000),
    ratio=st.sampled_from([0.3, 0.6, 0.9]),
)
def test_every_log_pressure_compaction_produces_passes_the_checker(
    turns: int, output: int, ratio: float
) -> None:
    session = pressured_session(output_chars=output, turns=turns)
    window = max(200, int(CompactionEngine.measure(session) * ratio))
    try:
        engine(context_window=window).compact_if_needed(session, "pressure")
    except SpecError as error:
        assert error.code in (Code.COMPACTION_STILL_ABOVE_THRESHOLD, Code.COMPACTION_SUMMARY_NOT_SMALLER)
    assert_log_clean(session)
    assert fold_repair_scan(session.events).open_compactions == ()


# --- summarizers (notes §4.8) ---------------------------------------------------------------------


def test_the_deterministic_summarizer_gives_the_same_summary_for_the_same_span() -> None:
    first, second = new_session("a"), new_session("b")
    for session in (first, second):
        long_conversation(session, turns=4)
    one, two = engine().compact_now(first), engine().compact_now(second)
    assert one is not None and two is not None and one.summary == two.summary


def test_the_deterministic_summarizer_keeps_the_newest_messages_when_its_budget_is_short() -> None:
    messages: tuple[Message, ...] = tuple(
        {
            "id": f"u{n}",
            "role": "user",
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": f"message {n}"}],
        }
        for n in range(50)
    )
    request = SummaryRequest("s", messages, None, None, 100, shadowed_token_count=400)
    summary: Any = DeterministicSummarizer().summarize(request, AbortSignal()).summary
    text = summary[0]["text"]
    assert "message 49" in text and "message 0\n" not in text and "earlier messages omitted" in text


def test_a_model_output_keeps_only_its_text_blocks_and_records_the_raw_output() -> None:
    raw: list[Any] = [{"type": "reasoning", "text": "thinking"}, {"type": "text", "text": "## Summary"}]
    output = summarizer_output_from_model(raw, "p", "m", max_tokens=10, usage={"inputTokens": 3})
    assert output.summary == [{"type": "text", "text": "## Summary"}]
    assert output.raw_output == raw and output.llm_stream_call


def test_a_model_request_ends_with_the_compaction_instruction() -> None:
    message: Message = {
        "id": "u1",
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": "hi"}],
    }
    request = SummaryRequest("s", (message,), None, None, 100, 50)
    sent = derive_model_request(request)
    assert sent[0] == message and "## Primary Request and Intent" in str(sent[-1]["content"])


def test_a_model_backed_summarizer_commits_with_its_call_provenance() -> None:
    session = new_session()
    long_conversation(session, turns=3)

    def model(request: SummaryRequest, signal: AbortSignal) -> SummarizerOutput:
        return summarizer_output_from_model(
            [{"type": "text", "text": "## Current Work\nfixing loops"}], "acme", "big-1", 512
        )

    result = engine(ScriptedSummarizer(model)).compact_now(session)
    assert result is not None
    data = data_of(session.events[result.summary_seq])
    assert (data["provider"], data["model"], data["llmStreamCall"], data["maxTokens"]) == (
        "acme",
        "big-1",
        True,
        512,
    )


# --- the outcome rules (spec.shrink.bracket) -------------------------------------------------------------


def test_the_error_chain_renders_message_group_members_and_a_differing_cause() -> None:
    try:
        try:
            raise OSError("disk full")
        except OSError as cause:
            raise RuntimeError("flush failed") from cause
    except RuntimeError as error:
        assert derive_error_chain(error) == "flush failed: disk full"
    assert derive_error_chain(ExceptionGroup("two", [ValueError("a"), KeyError("b")])) == "two [a; 'b']"
    assert derive_error_chain(RuntimeError()) == "RuntimeError"
    assert derive_error_chain(SpecError(Code.ABORTED, "stopped")) == "stopped"


def test_a_manual_failure_is_classified_by_stage_then_by_cause() -> None:
    changed = SpecError(Code.COMPACTION_SURFACE_CHANGED, "x")
    assert classify_manual_failure("commit", changed) == Code.COMPACTION_COMMIT_FAILED
    assert classify_manual_failure("summary", changed) == Code.COMPACTION_SURFACE_CHANGED
    assert classify_manual_failure("summary", RuntimeError()) == Code.COMPACTION_SUMMARY_FAILED


def test_cancellation_outranks_failure_which_outranks_a_failed_flush() -> None:
    failure: tuple[Stage, BaseException] = ("summary", RuntimeError())
    assert derive_manual_outcome(True, failure, True) == Code.ABORTED
    assert derive_manual_outcome(False, failure, True) == Code.COMPACTION_SUMMARY_FAILED
    assert derive_manual_outcome(False, None, True) == Code.COMPACTION_PERSISTENCE_FAILED
    assert derive_manual_outcome(False, None, False) is None


def test_only_a_closed_manual_bracket_is_flushed() -> None:
    assert should_flush_after_close(True, True)
    assert not should_flush_after_close(True, False)
    assert not should_flush_after_close(False, True)


def test_the_context_measure_adds_the_request_envelope_to_the_surface() -> None:
    header: dict[str, Any] = {
        "type": "request/header",
        "seq": 0,
        "time": 0,
        "data": {"header": {"config": {}, "system": "abcd", "tools": [1]}},
    }
    assert derive_context_tokens([header], [(1, 10)]) == (1 + 4) + (1 + 4) + 10


def test_pressure_is_relieved_only_strictly_below_the_threshold() -> None:
    validate_pressure_relieved(99, 100, 1)
    with pytest.raises(SpecError):
        validate_pressure_relieved(100, 100, 1)


# --- the abort signal ----------------------------------------------------------------------------


def test_an_abort_signal_aborts_once_with_a_default_aborted_reason() -> None:
    signal = AbortSignal()
    signal.abort()
    signal.abort(RuntimeError("later"))
    assert isinstance(signal.reason, SpecError) and signal.reason.code == Code.ABORTED
    with pytest.raises(SpecError):
        signal.throw_if_aborted()


def test_a_linked_signal_follows_its_parent_until_unlinked() -> None:
    parent = AbortSignal()
    child, _unlink = parent.linked()
    other, unlink_other = parent.linked()
    unlink_other()
    reason = RuntimeError("stop")
    parent.abort(reason)
    assert child.reason is reason and not other.aborted
    heard: list[BaseException] = []
    parent.on_abort(heard.append)
    assert heard == [reason]
