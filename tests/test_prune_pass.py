"""The prune pass on a live session: a metering event and a single-node replace per oversized tool
result, idempotent, inside a turn only (notes/dsh-compaction-projection §6.3-§6.4, §12.2 pruner
tests; SPEC-DECISIONS D8)."""

from __future__ import annotations

from typing import Any

from refusals import refusal
from shrink_builders import (
    Conversation,
    assert_log_clean,
    data_of,
    long_conversation,
    new_session,
)

from reference.shrink.compaction import CompactionEngine, prune_session
from reference.summarizers import DeterministicSummarizer
from spec.codes import Code
from spec.log.events import COMPACTION_PRUNE, TOOL_RESULT
from spec.log.json import thaw_json
from spec.log.surface import derive_messages, fold_surface
from spec.shrink.prune import PRUNE_MARKER, PruneConfig, derive_text_code_points
from spec.shrink.tokens import estimate_message

BIG = 10_000  # code points: above the default 8192 threshold
SMALL = 500  # code points: below it


def session_with_results(*sizes: int, close: bool = False) -> tuple[Any, Conversation]:
    session = new_session()
    talk = Conversation(session)
    talk.prompt("look at these files")
    for number, size in enumerate(sizes):
        talk.tool_step(f"file {number}: " + "y" * size)
    if close:
        talk.end_turn()
    return session, talk


def result_seqs(session: Any) -> list[int]:
    return [seq for seq in session.surface.nodes if session.events[seq]["type"] == TOOL_RESULT]


def test_every_oversized_result_gets_a_prune_event_followed_by_its_single_node_replace() -> None:
    session, _ = session_with_results(BIG, SMALL, BIG)
    big = [result_seqs(session)[0], result_seqs(session)[2]]
    mark = session.seq
    result = prune_session(session)
    assert [entry.original_seq for entry in result.pruned] == big
    assert [event["type"] for event in session.events[mark:]] == [COMPACTION_PRUNE, TOOL_RESULT] * 2
    for entry in result.pruned:
        meter, replacement = session.events[entry.replacement_seq - 1], session.events[entry.replacement_seq]
        assert data_of(meter)["shadowedRange"] == {"start": entry.original_seq, "end": entry.original_seq}
        assert data_of(meter)["shadowedSeqs"] == [entry.original_seq]
        assert replacement["surfaceOp"] == {
            "op": "replace",
            "start": entry.original_seq,
            "end": entry.original_seq,
        }
        assert replacement["sourceEventSeqs"] == [entry.original_seq]
    assert_log_clean(session)


def test_the_prune_is_priced_from_the_original_message() -> None:
    session, _ = session_with_results(BIG)
    original = session.events[result_seqs(session)[0]]
    prune_session(session)
    meter = next(event for event in session.events if event["type"] == COMPACTION_PRUNE)
    assert data_of(meter)["shadowedTokenCount"] == estimate_message(data_of(original)["message"])


def test_a_pruned_result_differs_from_its_original_only_in_its_inner_content() -> None:
    session, _ = session_with_results(BIG)
    seq = result_seqs(session)[0]
    (entry,) = prune_session(session).pruned
    original: Any = thaw_json(data_of(session.events[seq]))
    pruned: Any = thaw_json(data_of(session.events[entry.replacement_seq]))
    inner = pruned["message"]["content"][0]["content"]
    assert PRUNE_MARKER in inner[0]["text"]
    original["message"]["content"][0]["content"] = pruned["message"]["content"][0]["content"] = None
    assert original == pruned


def test_a_pruned_result_keeps_its_head_and_tail_and_is_within_the_threshold() -> None:
    session, _ = session_with_results(BIG)
    (entry,) = prune_session(session).pruned
    assert entry.chars_after == 4096 + len(PRUNE_MARKER) + 1024
    assert entry.chars_before == len("file 0: ") + BIG
    block = data_of(session.events[entry.replacement_seq])["message"]["content"][0]
    assert derive_text_code_points(block["content"]) == entry.chars_after


def test_a_second_pass_does_nothing() -> None:
    session, _ = session_with_results(BIG, BIG)
    prune_session(session)
    mark = session.seq
    again = prune_session(session)
    assert again.pruned == () and again.chars_removed == 0
    assert session.seq == mark


def test_results_within_the_threshold_are_left_alone() -> None:
    session, _ = session_with_results(SMALL, 8192 - len("file 1: "))
    mark = session.seq
    assert prune_session(session).pruned == ()
    assert session.seq == mark


def test_each_prune_advances_the_replace_generation_once() -> None:
    session, _ = session_with_results(BIG, BIG, BIG)
    generation = session.surface.replace_generation
    prune_session(session)
    assert session.surface.replace_generation == generation + 3


def test_the_chars_removed_add_up_over_every_pruned_result() -> None:
    session, _ = session_with_results(BIG, BIG + 1_000)
    result = prune_session(session)
    assert result.chars_removed == sum(entry.chars_before - entry.chars_after for entry in result.pruned) > 0


def test_pruning_outside_a_turn_is_refused_and_appends_nothing() -> None:
    session, _ = session_with_results(BIG, close=True)
    mark = session.seq
    caught = refusal(lambda: prune_session(session))
    assert caught.code == Code.PRUNE_OUTSIDE_TURN
    assert "outside any open turn" in caught.message
    assert session.seq == mark


def test_nothing_to_prune_outside_a_turn_is_not_an_error() -> None:
    session, _ = session_with_results(SMALL, close=True)
    assert prune_session(session).pruned == ()


def test_a_replay_of_the_pruned_log_gives_the_same_messages() -> None:
    session, _ = session_with_results(BIG, SMALL, BIG)
    prune_session(session)
    fold = fold_surface(session.events)
    assert (fold.nodes, fold.replace_generation) == (
        session.surface.nodes,
        session.surface.replace_generation,
    )
    assert derive_messages(session.events, fold.nodes) == session.derive_messages()


def test_results_already_shadowed_by_a_summary_are_not_pruned() -> None:
    session = new_session()
    long_conversation(session, turns=3, output_chars=BIG)
    CompactionEngine(DeterministicSummarizer(), prune=None).compact_now(session)
    talk = Conversation(session)
    talk.turn = 3
    talk.prompt("next question")
    assert prune_session(session).pruned == ()


def test_a_smaller_configuration_prunes_more() -> None:
    session, _ = session_with_results(SMALL)
    (entry,) = prune_session(session, PruneConfig(threshold_chars=200, head_chars=50, tail_chars=20)).pruned
    assert entry.chars_after == 50 + len(PRUNE_MARKER) + 20


def test_an_engine_without_a_prune_configuration_never_prunes() -> None:
    session, _ = session_with_results(BIG)
    mark = session.seq
    assert CompactionEngine(DeterministicSummarizer(), prune=None).prune(session).pruned == ()
    assert session.seq == mark


def test_pruning_then_summarising_keeps_every_tool_call_with_its_result() -> None:
    session = new_session()
    long_conversation(session, turns=5, output_chars=BIG, close_last=False)
    compactor = CompactionEngine(DeterministicSummarizer(), prune=PruneConfig())
    compactor.prune(session)
    assert compactor.compact_if_needed(session, "context-overflow") is not None
    assert_log_clean(session)
