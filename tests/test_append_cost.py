"""``append`` does the same work whatever the length of the log (issue 14): counted in executed
lines of the spec and the reference, never in time. A replace looks its two nodes up on the
surface; a linear search there (a copy of the nodes into a list, a scan) makes each replace cost
the length of the surface, which these counts show at once."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from event_builders import assistant_data, tool_result_data, user_data
from hypothesis import given, settings
from hypothesis import strategies as st

from reference.session import Session
from reference.store import SessionStore
from spec.log import nodes as nodes_module
from spec.log.json import int_field

ROOT = Path(__file__).resolve().parent.parent
TRACED = (str(ROOT / "spec"), str(ROOT / "reference"))


def turn_events(session: Session, turn: int, results: dict[int, int]) -> Iterator[None]:
    """One turn, event by event: a prompt, a step calling a tool and its result, and a prune of
    the result of the turn before (its metering event, then the single-node replace)."""
    session.append("turn/start", {"turn": turn})
    yield
    session.append("user/message", user_data(f"u{turn}", "why " * 20), "append")
    yield
    session.append("step/start", {"turn": turn, "step": 1})
    yield
    call_id = f"c{turn}"
    answer = assistant_data(f"a{turn}", "let me look", calls=(call_id,))
    session.append("assistant/message", {**answer, "turn": turn}, "append")
    yield
    call = session.append("tool/call", {"turn": turn, "step": 1, "callId": call_id, "name": "read"})
    yield
    result = {**tool_result_data(call_id, "x" * 200), "turn": turn}
    results[turn] = int_field(
        session.append("tool/result", result, "append", [int_field(call, "seq")]), "seq"
    )
    yield
    session.append("step/end", {"turn": turn, "step": 1})
    yield
    old = results.pop(turn - 1, None)
    if old is not None:
        original = session.events[old]["data"]
        assert isinstance(original, dict)
        message = original["message"]
        assert isinstance(message, dict)
        content = message["content"]
        assert isinstance(content, list) and isinstance(content[0], dict)
        block = {**content[0], "content": [{"type": "text", "text": "[pruned]"}]}
        session.append(
            "compaction/prune", {"shadowedRange": {"start": old, "end": old}, "shadowedSeqs": [old]}
        )
        yield
        replacement = {**original, "message": {**message, "content": [block]}}
        session.append("tool/result", replacement, {"op": "replace", "start": old, "end": old}, [old])
        yield
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    yield


class LineCounter:
    """Counts the lines executed in spec/ and reference/, and the calls of each function there."""

    def __init__(self) -> None:
        self.lines = 0
        self.calls: Counter[str] = Counter()

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(TRACED):
            return None
        if event == "call":
            self.calls[f"{Path(frame.f_code.co_filename).stem}.{frame.f_code.co_name}"] += 1
        elif event == "line":
            self.lines += 1
        return self.trace


def cost_of_turns_after(turns_before: int, turns_counted: int = 6) -> tuple[float, float, Counter[str]]:
    """Lines executed per appended event, and per replace, over ``turns_counted`` turns appended
    to a session that already holds ``turns_before`` turns."""
    session = SessionStore().create("long")
    results: dict[int, int] = {}
    for turn in range(1, turns_before + 1):
        for _ in turn_events(session, turn, results):
            pass
    counter = LineCounter()
    start = session.seq
    replaces_before = session.surface.replace_generation
    sys.settrace(counter.trace)
    try:
        for turn in range(turns_before + 1, turns_before + turns_counted + 1):
            for _ in turn_events(session, turn, results):
                pass
    finally:
        sys.settrace(None)
    appended = session.seq - start
    replaces = session.surface.replace_generation - replaces_before
    assert replaces == turns_counted
    return counter.lines / appended, counter.lines / replaces, counter.calls


def test_append_executes_as_many_lines_in_a_long_log_as_in_a_short_one() -> None:
    short_per_event, _, _ = cost_of_turns_after(20)  # about 200 events, 40 surface nodes
    long_per_event, _, calls = cost_of_turns_after(2000)  # about 20,000 events, 4,000 surface nodes
    # A lookup that scans the surface adds ~4,000 lines to every replace here, about 400 per event.
    assert long_per_event <= short_per_event * 1.25, (short_per_event, long_per_event)
    # The session's surface really is the structure whose lookups do not scan.
    assert calls["nodes.index"] >= 2 * 6, calls


def test_a_replace_costs_the_same_in_a_long_log_as_in_a_short_one() -> None:
    _, short_per_replace, _ = cost_of_turns_after(20)
    _, long_per_replace, _ = cost_of_turns_after(2000)
    assert long_per_replace <= short_per_replace * 1.25, (short_per_replace, long_per_replace)


def test_surface_nodes_lookups_do_not_iterate_the_nodes() -> None:
    nodes = nodes_module.SurfaceNodes(range(10_000))
    nodes[5000:5001] = [10_000]
    counter = LineCounter()
    sys.settrace(counter.trace)
    try:
        assert nodes.index(9_999) == 9_999 and nodes.index(10_000) == 5000 and nodes[5000] == 10_000
    finally:
        sys.settrace(None)
    assert counter.lines < 200, counter.lines


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(0, 3), st.integers(0, 60)), max_size=80
    )
)
def test_surface_nodes_answer_as_a_list_after_any_lookups_and_splices(
    ops: list[tuple[int, int, int, int]],
) -> None:
    """The nodes remember what ``index`` last found (a replace reads that span next): whatever
    order lookups, appends and splices come in, every answer is a plain list's (issue 24)."""
    nodes = nodes_module.SurfaceNodes(range(5))
    model = list(range(5))
    fresh = 5
    for kind, pick, span, probe in ops:
        if kind == 0 or not model:
            nodes.append(fresh)
            model.append(fresh)
            fresh += 1
        else:
            seq = model[pick % len(model)]
            first = nodes.index(seq)
            assert first == model.index(seq)
            last = min(first + span, len(model) - 1)
            assert nodes[first] == model[first] and nodes[first : last + 1] == tuple(model[first : last + 1])
            if kind == 2:
                other = model[probe % len(model)]  # a lookup elsewhere just before the splice
                assert nodes.index(other) == model.index(other)
                nodes[first : last + 1] = [fresh]
                model[first : last + 1] = [fresh]
                fresh += 1
        probed = model[probe % len(model)] if model else None
        if probed is not None:
            assert nodes.index(probed) == model.index(probed)
        assert [nodes[position] for position in range(len(model))] == model
        assert list(nodes) == model and [nodes.index(node) for node in model] == list(range(len(model)))


@pytest.mark.parametrize("size", [0, 1, 2, 3, 7, 8, 9, 64, 100, 1000])
def test_surface_nodes_built_at_once_are_the_nodes_appended_one_by_one(size: int) -> None:
    """Nodes given at construction are built at once (issue 24: a resumed session's surface), into
    the very structures the appends one by one make; a seq given twice is appended as before."""
    seqs = [3 * seq + 1 for seq in range(size)]
    built, appended = nodes_module.SurfaceNodes(seqs), nodes_module.SurfaceNodes()
    for seq in seqs:
        appended.append(seq)
    for name in ("_seqs", "_slot_of", "_next", "_tree", "_found"):
        assert getattr(built, name) == getattr(appended, name), name
    assert list(built) == seqs and [built.index(seq) for seq in seqs] == list(range(size))
    twice = [*seqs, *seqs[:2]]
    built, appended = nodes_module.SurfaceNodes(twice), nodes_module.SurfaceNodes()
    for seq in twice:
        appended.append(seq)
    for name in ("_seqs", "_slot_of", "_next", "_tree"):
        assert getattr(built, name) == getattr(appended, name), name
