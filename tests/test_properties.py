"""Algebraic properties of the session model (notes/dsh-session-core §11.2, §11.3).

Sessions are built from random action lists; every action is turned into a valid append against
the current surface, so each generated log is one a real session could hold (including replaces
of replacements and tool-result rewrites).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from event_builders import assistant_data, replace, tool_result_data, user_data
from hypothesis import given
from hypothesis import strategies as st

from spec.codes import SpecError
from spec.lineage.fork import plan_fork_seed
from spec.log.events import derive_event_message, is_surface_eligible_type
from spec.log.header import build_header
from spec.log.json import thaw_json
from spec.log.session import ABSENT, SessionState, append_event, create_session_state, derive_session_messages
from spec.log.surface import fold_surface

NOW = 1_000  # the pinned clock, ms

LOG_ONLY: dict[str, Callable[[int], Any]] = {
    "turn/start": lambda a: {"turn": a},
    "turn/end": lambda a: {"turn": a, "reason": {"kind": "completed"}},
    "step/start": lambda a: {"turn": 1, "step": a},
    "assistant/chunk": lambda a: {
        "turn": 1,
        "step": 1,
        "chunk": {"type": "text-delta", "index": 0, "text": str(a)},
    },
    "plugin/event": lambda a: None if a % 2 else {"n": a},
}
KINDS = ["user", "assistant", "tool", "replace", "rewrite", *LOG_ONLY]
actions = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 40), st.integers(0, 40)), max_size=25)


def fresh() -> SessionState:
    return create_session_state("s", None, build_header("s", None, NOW, False), NOW)


def step(state: SessionState, kind: str, a: int, b: int) -> SessionState:
    """One valid append chosen by ``kind``, shaped by the numbers ``a`` and ``b``."""
    seq, nodes = len(state.events), state.surface.nodes
    if kind in LOG_ONLY:
        return append_event(state, kind, LOG_ONLY[kind](a), time=NOW)[0]
    if kind == "user":
        return append_event(state, "user/message", user_data(f"u{seq}", f"t{a}"), "append", time=NOW)[0]
    if kind == "assistant":
        message = assistant_data(f"a{seq}", None if a % 4 == 0 else f"t{a}", (f"c{b}",) if b % 3 == 0 else ())
        return append_event(state, "assistant/message", message, "append", [] if b % 2 else ABSENT, time=NOW)[
            0
        ]
    if kind == "tool":
        sources = [seq - 1] if seq and a % 2 else ABSENT
        return append_event(
            state, "tool/result", tool_result_data(f"c{a}", message_id=f"r{seq}"), "append", sources, time=NOW
        )[0]
    if kind == "replace" and nodes:
        first, last = sorted((a % len(nodes), b % len(nodes)))
        op, sources = replace(nodes[first], nodes[last]), list(nodes[first : last + 1])
        if b % 2:
            return append_event(
                state, "user/message", user_data(f"u{seq}", "summary"), op, sources, time=NOW
            )[0]
        return append_event(
            state, "assistant/message", assistant_data(f"a{seq}", "summary"), op, sources, time=NOW
        )[0]
    results = [node for node in nodes if state.events[node]["type"] == "tool/result"]
    if kind == "rewrite" and results:
        target = results[a % len(results)]
        data: Any = thaw_json(state.events[target]["data"])
        data["message"]["content"][0]["content"] = [{"type": "text", "text": f"pruned {b}"}]
        return append_event(state, "tool/result", data, replace(target, target), [target], time=NOW)[0]
    return state


def build(plan: list[tuple[str, int, int]]) -> SessionState:
    state = fresh()
    for kind, a, b in plan:
        state = step(state, kind, a, b)
    return state


def replay(events: tuple[Any, ...] | list[Any]) -> SessionState:
    return create_session_state("r", list(events), build_header("r", None, NOW, True), NOW)


@given(actions)
def test_replaying_the_log_through_a_fold_gives_the_same_surface(plan: list[tuple[str, int, int]]) -> None:
    state = build(plan)
    fold = fold_surface(state.events)
    assert (fold.nodes, fold.replace_generation) == (state.surface.nodes, state.surface.replace_generation)


@given(actions, st.data())
def test_a_replace_shortens_the_surface_by_its_span_minus_one(
    plan: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    state = build(plan)
    nodes = state.surface.nodes
    if not nodes:
        return
    first = data.draw(st.integers(0, len(nodes) - 1))
    last = data.draw(st.integers(first, len(nodes) - 1))
    after, appended = append_event(
        state,
        "user/message",
        user_data("x"),
        replace(nodes[first], nodes[last]),
        list(nodes[first : last + 1]),
    )
    assert len(after.surface.nodes) == len(nodes) - (last - first + 1) + 1
    assert after.surface.nodes == (*nodes[:first], appended["seq"], *nodes[last + 1 :])
    assert after.surface.replace_generation == state.surface.replace_generation + 1


@given(actions)
def test_derived_messages_never_include_shadowed_or_log_only_events(plan: list[tuple[str, int, int]]) -> None:
    state = build(plan)
    shadowed = {
        seq for replacement in fold_surface(state.events).replacements for seq in replacement.shadowed
    }
    assert shadowed.isdisjoint(state.surface.nodes)
    assert all(is_surface_eligible_type(state.events[seq]["type"]) for seq in state.surface.nodes)
    visible = [derive_event_message(state.events[seq]) for seq in state.surface.nodes]
    messages = derive_session_messages(state)
    assert len(messages) == len([message for message in visible if message is not None])
    assert all(mine is theirs for mine, theirs in zip(messages, [m for m in visible if m is not None]))


@given(actions)
def test_derivation_is_deterministic(plan: list[tuple[str, int, int]]) -> None:
    state = build(plan)
    assert derive_session_messages(state) == derive_session_messages(state)


@given(actions, st.integers(-2, 30))
def test_a_fork_seed_is_a_prefix_of_the_source_log(plan: list[tuple[str, int, int]], boundary: int) -> None:
    state = build(plan)
    try:
        seed = plan_fork_seed("s", state.events, boundary)
    except SpecError:
        return
    assert seed == state.events[: boundary + 1]
    assert replay(seed).events[: len(seed)] == seed


@given(actions)
def test_replay_keeps_the_log_and_adds_exactly_one_marker(plan: list[tuple[str, int, int]]) -> None:
    state = build(plan)
    once = replay(state.events)
    assert once.events[: len(state.events)] == state.events
    assert (len(once.events), once.first_live_seq) == (len(state.events) + 1, len(state.events))
    assert derive_session_messages(once) == derive_session_messages(state)


@given(actions)
def test_replaying_a_replayed_log_is_idempotent(plan: list[tuple[str, int, int]]) -> None:
    once = replay(build(plan).events)
    assert replay(once.events).events == once.events


SURFACE_ITEMS: dict[str, Callable[[int], tuple[str, dict[str, Any]]]] = {
    "user": lambda n: ("user/message", user_data(f"u{n}", f"t{n}")),
    "assistant": lambda n: ("assistant/message", assistant_data(f"a{n}", f"t{n}")),
    "tool": lambda n: ("tool/result", tool_result_data(f"c{n}")),
}


@given(
    st.lists(st.sampled_from(sorted(SURFACE_ITEMS)), max_size=8),
    st.lists(st.sampled_from(sorted(LOG_ONLY)), max_size=8),
    st.data(),
)
def test_log_only_events_never_change_the_derived_history(
    surface_kinds: list[str], log_kinds: list[str], data: st.DataObject
) -> None:
    """Any interleaving that keeps each stream's order derives the same messages (§11.3 property 5)."""
    surface: list[tuple[str, Any, object]] = [
        (*SURFACE_ITEMS[kind](n), "append") for n, kind in enumerate(surface_kinds)
    ]
    log: list[tuple[str, Any, object]] = [
        (kind, LOG_ONLY[kind](n), ABSENT) for n, kind in enumerate(log_kinds)
    ]
    order = data.draw(st.permutations([True] * len(surface) + [False] * len(log)))
    streams = (iter(surface), iter(log))
    plain, mixed = fresh(), fresh()
    for kind, payload, op in surface:
        plain, _ = append_event(plain, kind, payload, op)
    for from_surface in order:
        kind, payload, op = next(streams[0] if from_surface else streams[1])
        mixed, _ = append_event(mixed, kind, payload, op)
    assert derive_session_messages(mixed) == derive_session_messages(plain)
