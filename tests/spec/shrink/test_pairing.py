"""Tool-pairing balance (notes/dsh-compaction-projection §2.3, §13.1)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code, SpecError
from spec.log.surface import fold_surface
from spec.shrink.pairing import derive_cut_balance, is_balanced_after, is_balanced_before


class Log:
    """A tiny log builder: each method appends one event and returns its seq."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def _add(self, kind: str, data: Any, op: Any = "append", sources: list[int] | None = None) -> int:
        seq = len(self.events)
        event: dict[str, Any] = {"type": kind, "seq": seq, "time": seq, "data": data, "surfaceOp": op}
        if sources is not None:
            event["sourceEventSeqs"] = sources
        self.events.append(event)
        return seq

    def user(self, text: str = "hi", op: Any = "append", sources: list[int] | None = None) -> int:
        message = {
            "id": f"u{len(self.events)}",
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        }
        return self._add("user/message", message, op, sources)

    def assistant(self, *call_ids: str, extra: list[Any] | None = None) -> int:
        blocks: list[Any] = [
            {"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in call_ids
        ]
        message = {
            "id": f"a{len(self.events)}",
            "role": "assistant",
            "content": blocks + (extra or []),
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        return self._add("assistant/message", {"message": message})

    def result(self, call_id: str) -> int:
        message = {
            "id": f"r{len(self.events)}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": [], "isError": False}],
        }
        return self._add("tool/result", {"message": message})

    def log_only(self, kind: str = "turn/end") -> int:
        seq = len(self.events)
        self.events.append({"type": kind, "seq": seq, "time": seq, "data": {}})
        return seq

    @property
    def nodes(self) -> tuple[int, ...]:
        return fold_surface(self.events).nodes


def balance(log: Log, seq: int) -> tuple[bool, bool]:
    """Whether the log is balanced before ``seq`` and after it."""
    return is_balanced_before(log.nodes, log.events, seq), is_balanced_after(log.nodes, log.events, seq)


def closed_step() -> tuple[Log, int, int, int]:
    log = Log()
    return log, log.user(), log.assistant("c1"), log.result("c1")


def test_a_user_message_before_a_closed_step_is_balanced_on_both_sides() -> None:
    log, user, _, _ = closed_step()
    assert balance(log, user) == (True, True)


def test_an_assistant_call_is_balanced_before_and_open_after() -> None:
    log, _, call, _ = closed_step()
    assert balance(log, call) == (True, False)


def test_a_tool_result_is_open_before_and_balanced_after() -> None:
    log, _, _, result = closed_step()
    assert balance(log, result) == (False, True)


def test_an_open_step_is_unbalanced_after_its_call() -> None:
    log = Log()
    log.user()
    call = log.assistant("c1")
    assert is_balanced_after(log.nodes, log.events, call) is False


def test_a_multi_call_message_is_balanced_only_after_its_last_result() -> None:
    log = Log()
    log.assistant("c1", "c2")
    first, second = log.result("c1"), log.result("c2")
    assert (
        is_balanced_after(log.nodes, log.events, first),
        is_balanced_after(log.nodes, log.events, second),
    ) == (False, True)


def test_a_neutral_node_inside_an_open_pair_is_unbalanced_on_both_sides() -> None:
    log = Log()
    log.assistant("c1")
    injected = log.user("injected")
    log.result("c1")
    assert balance(log, injected) == (False, False)


def test_a_free_neutral_node_is_balanced_on_both_sides() -> None:
    log, _, _, _ = closed_step()
    free = log.user("later")
    assert balance(log, free) == (True, True)


def whole_surface_checkpoint() -> tuple[Log, tuple[int, ...], int]:
    log, user, call, result = closed_step()
    old = (user, call, result)
    checkpoint = log.user("summary", op={"op": "replace", "start": user, "end": result}, sources=list(old))
    return log, old, checkpoint


def test_a_checkpoint_replacing_the_whole_surface_is_balanced_on_both_sides() -> None:
    log, _, checkpoint = whole_surface_checkpoint()
    assert balance(log, checkpoint) == (True, True)


@pytest.mark.parametrize("query", [is_balanced_before, is_balanced_after])
def test_a_seq_removed_by_a_replace_is_not_on_the_surface(query: Any) -> None:
    log, old, _ = whole_surface_checkpoint()
    caught = refusal(lambda: query(log.nodes, log.events, old[1]))
    assert caught.code == Code.PAIRING_SEQ_NOT_ON_SURFACE
    assert caught.message == f"tool-pairing balance: surface seq {old[1]} not found"


@pytest.mark.parametrize("query", [is_balanced_before, is_balanced_after])
def test_a_missing_seq_on_an_empty_surface_is_rejected(query: Any) -> None:
    with pytest.raises(SpecError, match="surface seq 999 not found") as caught:
        query((), [], 999)
    assert caught.value.code == Code.PAIRING_SEQ_NOT_ON_SURFACE


def test_a_node_appended_to_an_empty_surface_can_be_queried() -> None:
    log = Log()
    user = log.user()
    assert is_balanced_after(log.nodes, log.events, user) is True


def test_an_orphan_tool_result_is_rejected() -> None:
    log = Log()
    log.user()
    orphan = log.result("c1")
    with pytest.raises(SpecError, match="no matching tool-call") as caught:
        derive_cut_balance(log.nodes, log.events)
    assert caught.value.code == Code.PAIRING_ORPHAN_RESULT
    assert str(orphan) in caught.value.message


def test_a_surface_seq_without_an_event_is_corrupt() -> None:
    log, _, _, _ = closed_step()
    with pytest.raises(SpecError, match="no matching session event") as caught:
        derive_cut_balance((*log.nodes, 7), log.events)
    assert caught.value.code == Code.PAIRING_SURFACE_CORRUPT


def test_a_surface_seq_naming_an_event_with_another_seq_is_corrupt() -> None:
    log, _, _, _ = closed_step()
    log.events[1] = {**log.events[1], "seq": 5}
    with pytest.raises(SpecError, match="surface seq 1 has no matching session event") as caught:
        derive_cut_balance((0, 1, 2), log.events)
    assert caught.value.code == Code.PAIRING_SURFACE_CORRUPT


def test_a_corrupt_surface_is_reported_before_a_missing_query_seq() -> None:
    assert refusal(lambda: is_balanced_before((3,), [], 999)).code == Code.PAIRING_SURFACE_CORRUPT


def test_call_ids_are_not_matched_so_any_result_closes_any_call() -> None:
    log = Log()
    log.assistant("A")
    result = log.result("B")
    assert is_balanced_after(log.nodes, log.events, result) is True


def test_nested_tool_call_blocks_do_not_open_calls() -> None:
    log = Log()
    nested = {
        "type": "tool-result",
        "toolCallId": "x",
        "content": [{"type": "tool-call", "id": "y", "name": "n", "arguments": ""}],
    }
    call = log.assistant(extra=[nested])
    assert is_balanced_after(log.nodes, log.events, call) is True


def test_log_only_events_do_not_move_the_balance() -> None:
    log = Log()
    log.assistant("c1")
    log.log_only("step/end")
    result = log.result("c1")
    assert derive_cut_balance(log.nodes, log.events) == (True, False, True)
    assert is_balanced_before(log.nodes, log.events, result) is False


step_shapes = st.lists(st.sampled_from(["user", "closed", "open"]), max_size=12)


def build(shapes: list[str]) -> Log:
    log = Log()
    for index, shape in enumerate(shapes):
        if shape == "user":
            log.user()
        else:
            log.assistant(f"c{index}")
            if shape == "closed":
                log.result(f"c{index}")
    return log


@given(step_shapes)
def test_a_surface_of_n_nodes_has_n_plus_one_cuts_and_the_empty_prefix_is_balanced(shapes: list[str]) -> None:
    log = build(shapes)
    cuts = derive_cut_balance(log.nodes, log.events)
    assert len(cuts) == len(log.nodes) + 1 and cuts[0] is True


@given(step_shapes)
def test_before_a_node_equals_after_the_previous_node(shapes: list[str]) -> None:
    log = build(shapes)
    nodes = log.nodes
    for previous, node in itertools.pairwise(nodes):
        assert is_balanced_before(nodes, log.events, node) == is_balanced_after(nodes, log.events, previous)
