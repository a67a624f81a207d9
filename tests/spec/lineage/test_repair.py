"""Crash repair closers (notes/dsh-session-core §9, repair.spec.ts; SPEC-DECISIONS D3 item 6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_specs import (
    assistant,
    compaction_end,
    compaction_start,
    end_seed,
    in_step,
    log,
    open_step,
    step_end,
    step_start,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user,
)
from shared_material import shared_dir

from spec.lineage.repair import (
    COMPACTION_INTERRUPTED_ERROR,
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    derive_closers,
    fold_repair_scan,
)
from spec.log.events import Event
from spec.log.json import FrozenDict
from spec.log.unclosed import has_open_turn


def closers_of(events: list[Event]) -> Any:
    """The closers, typed loosely so that tests can index into them."""
    return derive_closers(events)


def types_and_seqs(events: Any) -> list[tuple[str, int]]:
    return [(event["type"], event["seq"]) for event in events]


# --- repair.spec.ts ----------------------------------------------------------------------------------


def test_a_balanced_log_needs_no_closers() -> None:
    events = log(turn_start(1), user(), step_start(1, 1), assistant(1, 1), step_end(1, 1), turn_end(1))
    assert closers_of(events) == ()


def test_an_empty_log_needs_no_closers() -> None:
    assert derive_closers([]) == ()


def test_an_open_turn_without_a_step_is_closed_by_an_interrupted_turn_end() -> None:
    closers = closers_of(log(turn_start(1)))
    assert [dict(event) for event in closers] == [
        {"type": "turn/end", "seq": 1, "time": 1000, "data": {"turn": 1, "reason": {"kind": "interrupted"}}}
    ]


def test_an_open_step_is_closed_before_its_turn() -> None:
    closers = closers_of(log(turn_start(1), step_start(1, 1)))
    assert types_and_seqs(closers) == [("step/end", 2), ("turn/end", 3)]
    assert closers[0]["data"] == {"turn": 1, "step": 1}


def test_an_announced_call_that_never_started_gets_a_not_started_result() -> None:
    closers = closers_of(log(turn_start(2), step_start(2, 1), assistant(2, 1, "call-1")))
    assert types_and_seqs(closers) == [("tool/result", 3), ("step/end", 4), ("turn/end", 5)]
    result = closers[0]
    assert result["data"]["turn"] == 2 and result["data"]["step"] == 1
    message = result["data"]["message"]
    assert message["source"]["callId"] == "call-1"
    assert message["content"][0]["isError"] is True
    assert result["data"]["error"] == {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    assert message["content"][0]["content"] == [{"type": "text", "text": TOOL_NOT_STARTED_TEXT}]
    assert "sourceEventSeqs" not in result


def test_a_call_that_already_has_a_result_is_not_answered_again() -> None:
    events = log(
        *open_step(assistant(1, 1, "call-1"), tool_call(1, 1, "call-1"), tool_result(1, 1, "call-1"))
    )
    assert types_and_seqs(closers_of(events)) == [("step/end", 5), ("turn/end", 6)]


def test_a_closed_step_leaves_only_the_turn_to_close() -> None:
    events = log(*open_step(assistant(1, 1)), step_end(1, 1))
    assert types_and_seqs(closers_of(events)) == [("turn/end", 4)]


def test_calls_of_an_earlier_committed_turn_are_not_repaired() -> None:
    events = log(
        *in_step(assistant(1, 1, "old-call")),
        turn_start(2),
        step_start(2, 1),
        assistant(2, 1, "new-call"),
    )
    results = [event for event in closers_of(events) if event["type"] == "tool/result"]
    assert [event["data"]["message"]["source"]["callId"] for event in results] == ["new-call"]


def test_only_the_unanswered_one_of_two_calls_gets_a_result() -> None:
    events = log(*open_step(assistant(1, 1, "call-a", "call-b"), tool_result(1, 1, "call-a")))
    results = [event for event in closers_of(events) if event["type"] == "tool/result"]
    assert [event["data"]["message"]["source"]["callId"] for event in results] == ["call-b"]


def test_a_logged_tool_call_gets_an_outcome_unknown_result_citing_it() -> None:
    events = log(*open_step(assistant(1, 1, "call-1"), tool_call(1, 1, "call-1")))
    result = closers_of(events)[0]
    assert result["surfaceOp"] == "append"
    assert result["sourceEventSeqs"] == [3]
    assert result["data"]["error"] == {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
    text = result["data"]["message"]["content"][0]["content"][0]["text"]
    assert "retry only if the operation is read-only or idempotent" in text
    assert "first verify external state or ask the user" in text


def test_an_orphan_tool_call_without_an_announcing_block_gets_no_result() -> None:
    events = log(*open_step(tool_call(1, 1, "ghost")))
    assert types_and_seqs(closers_of(events)) == [("step/end", 3), ("turn/end", 4)]


# --- the closer envelope -----------------------------------------------------------------------------


def test_a_closer_result_id_names_the_call_and_its_own_seq() -> None:
    events = log(*open_step(assistant(1, 1, "x", "y")))
    ids = [event["data"]["message"]["id"] for event in closers_of(events)[:2]]
    assert ids == ["interrupted-tool-result-x-3", "interrupted-tool-result-y-4"]


def test_closers_reuse_the_time_of_the_last_event() -> None:
    events = log(turn_start(1), step_start(1, 1))
    events[-1] = {**events[-1], "time": 4242}
    assert {event["time"] for event in closers_of(events)} == {4242}


def test_a_started_closer_writes_surface_op_before_source_event_seqs() -> None:
    events = log(*open_step(assistant(1, 1, "c"), tool_call(1, 1, "c")))
    assert list(closers_of(events)[0]) == ["type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs"]


def test_closers_are_frozen() -> None:
    closer = closers_of(log(turn_start(1)))[0]
    assert isinstance(closer, FrozenDict) and isinstance(closer["data"], FrozenDict)
    with pytest.raises(TypeError):
        closer["data"]["turn"] = 9


def test_a_re_announced_call_keeps_its_place_and_forgets_its_start() -> None:
    events = log(*open_step(assistant(1, 1, "a", "b"), tool_call(1, 1, "a"), assistant(1, 2, "a")))
    results = closers_of(events)[:2]
    assert [event["data"]["message"]["source"]["callId"] for event in results] == ["a", "b"]
    assert results[0]["data"]["step"] == 2 and "sourceEventSeqs" not in results[0]


def test_a_replacing_tool_result_still_answers_its_call() -> None:
    kind, data, _ = tool_result(1, 1, "c")
    events = log(
        *open_step(assistant(1, 1, "c"), (kind, data, {"surfaceOp": {"op": "replace", "start": 2, "end": 2}}))
    )
    assert types_and_seqs(closers_of(events)) == [("step/end", 4), ("turn/end", 5)]


# --- compaction/end closers (SPEC-DECISIONS D3 item 6) ---------------------------------------------


def test_an_unmatched_compaction_in_an_open_turn_is_closed_after_the_results_and_before_the_step() -> None:
    events = log(*open_step(assistant(1, 1, "c"), compaction_start("k1", 1)))
    assert types_and_seqs(closers_of(events)) == [
        ("tool/result", 4),
        ("compaction/end", 5),
        ("step/end", 6),
        ("turn/end", 7),
    ]


def test_a_compaction_closer_carries_the_start_id_command_and_owner_with_an_error() -> None:
    closer = closers_of(log(turn_start(3), compaction_start("k1", 3, sourceCommandId="cmd-7")))[0]
    assert dict(closer["data"]) == {
        "compactionId": "k1",
        "sourceCommandId": "cmd-7",
        "turn": 3,
        "error": COMPACTION_INTERRUPTED_ERROR,
    }


def test_a_compaction_closer_omits_a_command_id_the_start_did_not_have() -> None:
    closer = closers_of(log(turn_start(1), compaction_start("k1", 1)))[0]
    assert list(closer["data"]) == ["compactionId", "turn", "error"]


def test_a_standalone_unmatched_compaction_outside_a_turn_gets_its_end_alone() -> None:
    events = log(turn_start(1), turn_end(1), compaction_start("k1", None))
    closers = closers_of(events)
    assert types_and_seqs(closers) == [("compaction/end", 3)]
    assert closers[0]["data"]["turn"] is None


def test_a_matched_compaction_needs_no_closer() -> None:
    events = log(compaction_start("k1", None), compaction_end("k1", None))
    assert closers_of(events) == ()


def test_an_end_for_another_id_does_not_close_a_compaction() -> None:
    events = log(compaction_start("k1", None), compaction_end("k2", None))
    assert [closer["data"]["compactionId"] for closer in closers_of(events)] == ["k1"]


def test_several_unmatched_compactions_close_in_start_order() -> None:
    events = log(compaction_start("k2", None), compaction_start("k1", None))
    assert [closer["data"]["compactionId"] for closer in closers_of(events)] == ["k2", "k1"]


def test_a_compaction_orphaned_before_an_end_seed_is_stale_and_not_closed() -> None:
    events = log(compaction_start("k1", None), end_seed())
    assert closers_of(events) == ()


def test_an_end_seed_inside_an_open_turn_does_not_close_the_turn() -> None:
    events = log(turn_start(1), end_seed())
    assert types_and_seqs(closers_of(events)) == [("turn/end", 2)]


# --- has_open_turn and idempotence -------------------------------------------------------------------


def test_a_log_whose_last_turn_boundary_is_a_start_has_an_open_turn() -> None:
    assert has_open_turn(log(turn_start(1), turn_end(1), turn_start(2), user()))


def test_a_log_whose_last_turn_boundary_is_an_end_has_no_open_turn() -> None:
    assert not has_open_turn(log(turn_start(1), user(), turn_end(1), user()))


def test_a_log_without_turn_boundaries_has_no_open_turn() -> None:
    assert not has_open_turn(log(user()))


def test_repairing_a_repaired_log_adds_nothing() -> None:
    events = log(*open_step(assistant(1, 1, "a", "b"), tool_call(1, 1, "b"), compaction_start("k", 1)))
    repaired = events + list(closers_of(events))
    assert derive_closers(repaired) == ()
    assert not has_open_turn(repaired)


# --- agreement with DSH's own interruptedTurnClosers --------------------------------------------------


def test_closers_equal_dsh_closers_byte_for_byte_on_the_golden_scenarios() -> None:
    folder = shared_dir("golden", "dsh-0.1.0-rc.8")
    compared = 0
    for path in sorted(folder.glob("scenario-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record["op"]["op"] != "closers":
                continue
            got = json.dumps(list(derive_closers(record["op"]["events"])), separators=(",", ":"))
            assert got == json.dumps(record["response"]["result"], separators=(",", ":")), path.name
            compared += 1
    assert compared > 0


# --- the closing property ----------------------------------------------------------------------------

CALL_IDS = st.sampled_from(["c1", "c2", "c3"])
TURNS = st.integers(min_value=1, max_value=3)
STEPS = st.integers(min_value=1, max_value=3)


@st.composite
def any_event(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """One event from the vocabulary repair reads, with small id pools so that ids collide."""
    choice = draw(
        st.sampled_from(
            [
                "turn/start",
                "turn/end",
                "step/start",
                "step/end",
                "assistant",
                "tool/call",
                "tool/result",
                "compaction/start",
                "compaction/end",
                "end-seed",
                "user",
            ]
        )
    )
    turn, step = draw(TURNS), draw(STEPS)
    if choice == "turn/start":
        return turn_start(turn)
    if choice == "turn/end":
        return turn_end(turn)
    if choice == "step/start":
        return step_start(turn, step)
    if choice == "step/end":
        return step_end(turn, step)
    if choice == "assistant":
        return assistant(turn, step, *draw(st.lists(CALL_IDS, max_size=3)))
    if choice == "tool/call":
        return tool_call(turn, step, draw(CALL_IDS))
    if choice == "tool/result":
        return tool_result(turn, step, draw(CALL_IDS))
    compaction_id = draw(st.sampled_from(["k1", "k2"]))
    owner = draw(st.none() | TURNS)
    if choice == "compaction/start":
        return compaction_start(compaction_id, owner, command=draw(st.none() | st.just("cmd")))
    if choice == "compaction/end":
        return compaction_end(compaction_id, owner)
    if choice == "end-seed":
        return end_seed()
    return user()


@given(st.lists(any_event(), max_size=25))
def test_closers_close_everything_and_a_second_repair_adds_nothing(
    specs: list[tuple[str, dict[str, Any], dict[str, Any]]],
) -> None:
    events = log(*specs)
    closers = closers_of(events)
    repaired = events + list(closers)
    assert [closer["seq"] for closer in closers] == list(range(len(events), len(repaired)))
    assert not has_open_turn(repaired)
    assert fold_repair_scan(repaired).open_compactions == ()
    assert derive_closers(repaired) == ()
