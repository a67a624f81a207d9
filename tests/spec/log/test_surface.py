"""The surface rules, walked case by case (notes/dsh-session-core §3, §6 and §12 surface.spec.ts)."""

from __future__ import annotations

from typing import Any

import pytest
from event_builders import (
    assistant,
    assistant_data,
    chunk,
    event,
    replace,
    tool_result,
    tool_result_data,
    turn_end,
    turn_start,
    user,
    user_data,
)
from refusals import refusal

from spec.codes import Code, SpecError
from spec.log.events import (
    is_surface_eligible_type,
    is_surface_event,
)
from spec.log.header import build_header
from spec.log.session import SessionState, append_event, create_session_state, derive_session_messages
from spec.log.surface import Replacement, Surface, derive_messages, fold_surface, plan_surface_event


def fold_code(events: list[dict[str, Any]]) -> Code:
    return refusal(lambda: fold_surface(events)).code


def fold_error(events: list[dict[str, Any]]) -> SpecError:
    return refusal(lambda: fold_surface(events))


def fresh(session_id: str = "s") -> SessionState:
    return create_session_state(session_id, None, build_header(session_id, None, 1, False), 1)


def texts(messages: list[Any]) -> list[str]:
    return [
        block["text"] for message in messages for block in message["content"] if block.get("type") == "text"
    ]


# --- foldSurface: source-event references ------------------------------------------------------


def test_a_replace_citing_every_shadowed_node_folds() -> None:
    events = [user(0), user(1), user(2, "summary", replace(0, 1), [0, 1])]
    assert fold_surface(events).nodes == (2,)


def test_source_event_seqs_on_a_log_only_event_are_rejected() -> None:
    assert fold_code([event(0, "turn/start", {"turn": 1}, sources=[0])]) == Code.PROVENANCE_ON_LOG_ONLY


def test_an_explicit_empty_source_list_on_an_assistant_message_is_accepted() -> None:
    assert fold_surface([assistant(0, sources=[])]).nodes == (0,)


@pytest.mark.parametrize(
    ("events", "code"),
    [
        pytest.param([user(0), user(1, sources=0)], Code.PROVENANCE_NOT_ARRAY, id="non-array"),
        pytest.param([user(0), user(1, sources=[])], Code.PROVENANCE_EMPTY, id="empty-on-user"),
        pytest.param([user(0), user(1), user(2, sources=[0, 0])], Code.PROVENANCE_DUPLICATE, id="duplicate"),
        pytest.param([user(0), user(1, sources=[None])], Code.PROVENANCE_NOT_SEQ, id="hole-as-null"),
        pytest.param([user(0), user(1, sources=["0"])], Code.PROVENANCE_NOT_SEQ, id="string"),
        pytest.param([user(0), user(1, sources=[0.5])], Code.PROVENANCE_NOT_SEQ, id="fraction"),
        pytest.param([user(0), user(1, sources=[-1])], Code.PROVENANCE_NOT_SEQ, id="negative"),
        pytest.param([user(0), user(1, sources=[True])], Code.PROVENANCE_NOT_SEQ, id="boolean"),
        pytest.param([user(0, sources=[0])], Code.PROVENANCE_NOT_EARLIER, id="self-reference"),
        pytest.param([user(0), user(2)], Code.SEQ_NOT_CONTIGUOUS, id="gap"),
        pytest.param(
            [user(0), user(1), user(2, "s", replace(0, 1), [0])],
            Code.PROVENANCE_MISSING_SHADOWED,
            id="missing",
        ),
    ],
)
def test_invalid_source_event_references_are_rejected(events: list[dict[str, Any]], code: Code) -> None:
    assert fold_code(events) == code


def test_a_seq_is_the_expected_one_by_value_as_an_event_seq() -> None:
    """An integral float is that seq (D5); a boolean never is one, though ``True == 1``."""
    assert fold_surface([user(0), {**user(1), "seq": 1.0}]).nodes == (0, 1)
    assert fold_code([user(0), {**user(1), "seq": True}]) == Code.SEQ_NOT_CONTIGUOUS
    assert fold_code([user(0), {**user(1), "seq": 1.5}]) == Code.SEQ_NOT_CONTIGUOUS


def test_a_gap_names_the_seq_it_expected() -> None:
    assert fold_error([user(0), user(2)]).message == "session event seq 2 is not contiguous; expected 1"


def test_missing_coverage_lists_the_uncited_nodes() -> None:
    error = fold_error([user(0), user(1), user(2, "s", replace(0, 1), [0])])
    assert error.message.endswith("missing 1")


def test_the_first_later_reference_is_the_one_reported() -> None:
    error = fold_error([user(0), user(1, sources=[0, 5, 3])])
    assert error.message == "sourceEventSeqs must reference earlier events: 5 >= current seq 1"


def test_range_errors_come_before_source_list_errors_on_a_replace() -> None:
    assert fold_code([user(0), user(1, "s", replace(9, 9), "not-a-list")]) == Code.REPLACE_START_NOT_FOUND


# --- foldSurface: tool-result rewrites ---------------------------------------------------------


def rewrite(seq: int, target: int, data: dict[str, Any]) -> dict[str, Any]:
    return event(seq, "tool/result", data, replace(target, target), [target])


def test_a_tool_result_rewrite_may_change_the_inner_content() -> None:
    events = [tool_result(0), rewrite(1, 0, tool_result_data(text="pruned", message_id="r-c1"))]
    assert fold_surface(events).nodes == (1,)


def test_a_tool_result_rewrite_spanning_several_nodes_is_rejected() -> None:
    spanning = event(2, "tool/result", tool_result_data(), replace(0, 1), [0, 1])
    assert fold_code([tool_result(0), tool_result(1, "c2"), spanning]) == Code.TOOL_REWRITE_NOT_ONE_NODE


def test_a_tool_result_rewrite_of_a_non_result_node_is_rejected() -> None:
    assert fold_code([user(0), rewrite(1, 0, tool_result_data())]) == Code.TOOL_REWRITE_NOT_A_RESULT


def test_a_tool_result_rewrite_for_another_call_is_rejected() -> None:
    events = [tool_result(0, "c1"), rewrite(1, 0, tool_result_data("c2", message_id="r-c1"))]
    assert fold_code(events) == Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT


@pytest.mark.parametrize(("key", "value"), [("toolCallId", "other"), ("isError", True)])
def test_a_tool_result_rewrite_changing_the_block_header_is_rejected(key: str, value: Any) -> None:
    changed = tool_result_data()
    changed["message"]["content"][0][key] = value
    assert fold_code([tool_result(0), rewrite(1, 0, changed)]) == Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT


def test_a_tool_result_rewrite_with_a_structurally_equal_meta_array_is_accepted() -> None:
    events = [
        event(0, "tool/result", tool_result_data(meta=[1, {"a": 2}]), "append"),
        rewrite(1, 0, tool_result_data(text="x", meta=[1, {"a": 2}])),
    ]
    assert fold_surface(events).nodes == (1,)


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param([1, 2], [1, 3], id="drifted-element"),
        pytest.param([1, 2], "1,2", id="array-vs-string"),
        pytest.param({"a": 1}, {"b": 1}, id="different-key-names"),
        pytest.param({"a": 1}, {"a": 1, "b": 2}, id="different-key-counts"),
    ],
)
def test_a_tool_result_rewrite_with_a_different_meta_is_rejected(before: Any, after: Any) -> None:
    events = [
        event(0, "tool/result", tool_result_data(meta=before), "append"),
        rewrite(1, 0, tool_result_data(meta=after)),
    ]
    assert fold_code(events) == Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT


# --- windows, folds and the incremental planner ------------------------------------------------

BASE = 400_000


def test_a_window_folds_in_absolute_seq_space() -> None:
    window = [user(BASE), user(BASE + 1), user(BASE + 2, "s", replace(BASE, BASE), [BASE])]
    fold = fold_surface(window, base_seq=BASE)
    assert (fold.nodes, fold.replace_generation) == ((BASE + 2, BASE + 1), 1)


def test_a_window_checks_a_tool_result_rewrite_against_its_own_offset() -> None:
    window = [tool_result(BASE), rewrite(BASE + 1, BASE, tool_result_data(text="pruned"))]
    assert fold_surface(window, base_seq=BASE).nodes == (BASE + 1,)


def test_a_replace_reaching_before_the_window_head_is_not_found() -> None:
    window = [user(BASE), user(BASE + 1, "s", replace(BASE - 1, BASE), [BASE - 1, BASE])]
    caught = refusal(lambda: fold_surface(window, base_seq=BASE))
    assert caught.message == "surface replace: start seq 399999 not found in surface"


def test_nested_replacements_are_reported_in_log_order() -> None:
    events = [user(0), user(1), user(2, "r", replace(0, 0), [0]), user(3, "r2", replace(2, 1), [2, 1])]
    fold = fold_surface(events)
    assert fold.nodes == (3,)
    assert fold.replacements == (Replacement(2, 0, 0, (0,)), Replacement(3, 2, 1, (2, 1)))


def test_the_incremental_surface_keeps_no_replacement_history() -> None:
    assert set(Surface.__dataclass_fields__) == {"nodes", "replace_generation"}


def test_fold_and_seed_report_the_same_invalid_replacement() -> None:
    events = [user(0), user(1, "s", replace(42, 42), [0])]
    assert fold_error(events).message == "surface replace: start seq 42 not found in surface"
    caught = refusal(lambda: create_session_state("s", events, build_header("s", None, 1, True), 1))
    assert caught.code == Code.REPLACE_START_NOT_FOUND
    assert (
        caught.message == "invalid seed event at index 1: surface replace: start seq 42 not found in surface"
    )


def test_planning_a_rejected_candidate_leaves_the_nodes_untouched() -> None:
    nodes = [0]
    candidate = user(1, "s", replace(0, 0), [])
    with pytest.raises(SpecError):
        plan_surface_event(nodes, candidate, 1, [user(0)])
    assert nodes == [0]


def test_a_surface_eligible_event_without_its_marker_is_rejected() -> None:
    assert fold_code([event(0, "user/message", user_data())]) == Code.SURFACE_OP_MISSING


def test_a_surface_op_on_a_log_only_event_is_rejected() -> None:
    assert fold_code([event(0, "turn/start", {"turn": 1}, "append")]) == Code.SURFACE_OP_ON_LOG_ONLY


@pytest.mark.parametrize(
    ("surface_op", "code"),
    [
        pytest.param("invalid", Code.SURFACE_OP_INVALID, id="string"),
        pytest.param(5, Code.SURFACE_OP_INVALID, id="number"),
        pytest.param(None, Code.SURFACE_OP_INVALID, id="null"),
        pytest.param([0, 0], Code.SURFACE_OP_INVALID, id="array"),
        pytest.param({"op": "replace", "start": 0}, Code.REPLACE_OP_INVALID, id="missing-end"),
        pytest.param({**replace(0, 0), "x": 1}, Code.REPLACE_OP_INVALID, id="extra-key"),
        pytest.param({"op": "insert", "start": 0, "end": 0}, Code.REPLACE_OP_INVALID, id="other-op"),
        pytest.param(replace(-1, 0), Code.REPLACE_OP_INVALID, id="negative"),
        pytest.param({"op": "replace", "start": 0.5, "end": 0}, Code.REPLACE_OP_INVALID, id="fraction"),
        pytest.param({"op": "replace", "start": "0", "end": 0}, Code.REPLACE_OP_INVALID, id="string-seq"),
    ],
)
def test_a_malformed_surface_op_is_rejected(surface_op: Any, code: Code) -> None:
    assert fold_code([user(0), user(1, surface_op=surface_op, sources=[0])]) == code


def test_append_markers_fold_to_an_ordered_node_list() -> None:
    assert fold_surface([turn_start(0), user(1), assistant(2)]).nodes == (1, 2)


def test_a_log_of_boundaries_only_has_an_empty_surface_and_no_messages() -> None:
    events = [turn_start(0), turn_end(1)]
    assert fold_surface(events).nodes == ()
    assert derive_messages(events, ()) == []


def test_a_later_tool_result_joins_the_surface_as_the_next_node() -> None:
    events = [turn_start(0), user(1), assistant(2), event(3, "tool/call", {"callId": "c1"}), tool_result(4)]
    assert fold_surface(events).nodes == (1, 2, 4)


def test_a_seeded_log_replays_to_the_same_nodes_and_messages() -> None:
    events = [turn_start(0), user(1), assistant(2), event(3, "tool/call", {"callId": "c1"}), tool_result(4)]
    state = create_session_state("s", events, build_header("s", None, 1, True), 1)
    assert state.surface.nodes == (1, 2, 4)
    assert derive_session_messages(state) == derive_messages(events, (1, 2, 4))


def test_a_replace_over_the_whole_surface_leaves_only_the_replacement() -> None:
    events = [turn_start(0), user(1), user(2), turn_end(3), user(4, "s", replace(1, 2), [1, 2])]
    assert fold_surface(events).nodes == (4,)


def test_a_replace_of_a_leading_range_keeps_the_rest() -> None:
    events = [user(0), user(1), user(2), user(3, "s", replace(0, 1), [0, 1])]
    assert fold_surface(events).nodes == (3, 2)


def test_a_replace_with_equal_start_and_end_replaces_one_node() -> None:
    assert fold_surface([user(0), user(1), user(2, "s", replace(1, 1), [1])]).nodes == (0, 2)


def test_a_replace_inside_the_surface_keeps_the_surrounding_order() -> None:
    events = [user(0), user(1), user(2), user(3, "s", replace(1, 1), [1])]
    assert fold_surface(events).nodes == (0, 3, 2)


def test_a_numerically_larger_start_is_valid_when_its_node_comes_first() -> None:
    events = [user(0), user(1), user(2, "r", replace(0, 0), [0]), user(3, "r2", replace(2, 1), [1, 2])]
    assert fold_surface(events).nodes == (3,)


@pytest.mark.parametrize(
    ("surface_op", "code", "message"),
    [
        (replace(5, 0), Code.REPLACE_START_NOT_FOUND, "surface replace: start seq 5 not found in surface"),
        (replace(0, 99), Code.REPLACE_END_NOT_FOUND, "surface replace: end seq 99 not found in surface"),
        (
            replace(1, 0),
            Code.REPLACE_INVERTED,
            "surface replace: start seq 1 (index 1) is after end seq 0 (index 0)",
        ),
    ],
)
def test_a_replace_range_must_resolve_in_order_on_the_surface(
    surface_op: Any, code: Code, message: str
) -> None:
    error = fold_error([user(0), user(1), user(2, "s", surface_op, [0, 1])])
    assert (error.code, error.message) == (code, message)


def test_a_shadowed_node_cannot_end_a_later_replace() -> None:
    events = [user(0), user(1), user(2, "r", replace(0, 0), [0]), user(3, "r2", replace(0, 1), [0, 1])]
    assert fold_code(events) == Code.REPLACE_START_NOT_FOUND


# --- append snapshots its surface metadata -----------------------------------------------------


def test_appended_source_event_seqs_are_a_snapshot() -> None:
    state, _ = append_event(fresh(), "user/message", user_data("u0"), "append")
    sources = [0]
    state, appended = append_event(state, "user/message", user_data("u1"), "append", sources)
    sources.append(99)
    assert state.events[1]["sourceEventSeqs"] == [0]
    assert appended is state.events[1]


def test_an_appended_replace_op_is_a_snapshot() -> None:
    state, _ = append_event(fresh(), "user/message", user_data("u0"), "append")
    surface_op = replace(0, 0)
    state, _ = append_event(state, "user/message", user_data("u1"), surface_op, [0])
    surface_op["start"] = 7
    assert state.events[1]["surfaceOp"] == replace(0, 0)


def test_append_records_source_event_seqs_and_surface_op_on_the_event() -> None:
    state = fresh()
    for index in range(2):
        state, _ = append_event(state, "user/message", user_data(f"u{index}"), "append")
    state, appended = append_event(state, "assistant/message", assistant_data(), "append", [0, 1])
    assert (appended["sourceEventSeqs"], appended["surfaceOp"]) == ([0, 1], "append")
    assert state.events[-1] == appended


def test_a_log_only_append_carries_no_surface_fields() -> None:
    _, appended = append_event(fresh(), "turn/start", {"turn": 1})
    assert set(appended) == {"type", "seq", "time", "data"}


# --- deriveMessages with the surface -----------------------------------------------------------


def test_messages_follow_the_surface_nodes() -> None:
    events = [user(0, "hello"), assistant(1, "hi")]
    assert texts(derive_messages(events, fold_surface(events).nodes)) == ["hello", "hi"]


def test_messages_skip_chunks_and_boundaries() -> None:
    events = [turn_start(0), user(1), chunk(2), assistant(3), turn_end(4)]
    assert len(derive_messages(events, fold_surface(events).nodes)) == 2


def test_messages_leave_out_shadowed_nodes() -> None:
    events = [user(0, "a"), assistant(1, "b"), user(2, "compacted", replace(0, 1), [0, 1])]
    assert texts(derive_messages(events, fold_surface(events).nodes)) == ["compacted"]


def test_injected_context_and_user_messages_appear_verbatim_in_order() -> None:
    injected = {**user_data("ctx", "context", kind="plugin"), "extra": [1]}
    events = [event(0, "user/message", injected, "append"), user(1, "question")]
    assert derive_messages(events, fold_surface(events).nodes) == [injected, events[1]["data"]]


def test_an_empty_assistant_message_is_a_node_without_a_message() -> None:
    state = create_session_state("s", [assistant(0, text=None)], build_header("s", None, 1, True), 1)
    assert state.surface.nodes == (0,)
    assert derive_session_messages(state) == []


# --- type guards -------------------------------------------------------------------------------


def test_only_message_producing_types_are_surface_eligible() -> None:
    eligible = [
        kind
        for kind in (
            "user/message",
            "assistant/message",
            "tool/result",
            "tool/call",
            "turn/start",
            "assistant/chunk",
            "plugin/event",
        )
        if is_surface_eligible_type(kind)
    ]
    assert eligible == ["user/message", "assistant/message", "tool/result"]


def test_a_marked_surface_event_is_a_surface_event() -> None:
    assert is_surface_event(user(0))


def test_a_log_only_event_is_not_a_surface_event() -> None:
    assert not is_surface_event(turn_start(0))


def test_an_eligible_event_without_its_marker_is_not_a_surface_event_until_marked() -> None:
    markerless = event(0, "user/message", user_data())
    assert not is_surface_event(markerless)
    assert is_surface_event({**markerless, "surfaceOp": "append"})


def test_replace_generation_counts_replaces() -> None:
    state, _ = append_event(fresh(), "user/message", user_data("u0"), "append")
    assert state.surface.replace_generation == 0
    state, _ = append_event(state, "user/message", user_data("u1"), replace(0, 0), [0])
    assert state.surface.replace_generation == 1
