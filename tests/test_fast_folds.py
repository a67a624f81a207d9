"""The folds that skip work (issue 14) give what the plain fold gives, event by event."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.checks.lineage import count_closers
from spec.lineage.repair import RepairScan, apply_repair_scan, derive_closers_after, fold_repair_scan

KINDS = (
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "assistant/message",
    "tool/call",
    "tool/result",
    "compaction/start",
    "compaction/end",
    "session/end-seed",
    "user/message",
    "x/other",
)


@st.composite
def logs(draw: Any) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for seq, kind in enumerate(draw(st.lists(st.sampled_from(KINDS), max_size=40))):
        ident = draw(st.sampled_from(["a", "b", 1]))
        data: dict[str, Any] = {"turn": 1, "step": 1}
        if kind == "assistant/message":
            data["message"] = {"content": [{"type": "tool-call", "id": ident}]}
        elif kind == "tool/call":
            data["callId"] = ident
        elif kind == "tool/result":
            data["message"] = {"source": {"callId": ident}}
        elif kind.startswith("compaction/"):
            data["compactionId"] = ident
        events.append({"type": kind, "seq": seq, "time": 5, "data": data})
    return events


def plain_fold(events: list[dict[str, Any]]) -> RepairScan:
    scan = RepairScan()
    for event in events:
        scan = apply_repair_scan(scan, event)
    return scan


@given(logs())
def test_the_repair_scan_reads_only_compactions_before_the_last_turn_boundary_and_ends_the_same(
    events: list[dict[str, Any]],
) -> None:
    assert fold_repair_scan(events) == plain_fold(events)


@given(logs())
def test_the_closers_count_is_the_length_of_the_closers_derived(events: list[dict[str, Any]]) -> None:
    scan = plain_fold(events)
    if scan.open_turn is not None and events:
        assert count_closers(scan) == len(derive_closers_after(scan, events[-1], len(events)))


def test_an_end_seed_after_the_last_turn_boundary_forgets_the_compactions_before_it() -> None:
    """The scan skips the compactions before the last boundary only when an end-seed after it
    forgets them (issue 24); one before the boundary does not, so what it leaves open is read."""
    kinds = ["compaction/start", "session/end-seed", "compaction/start", "turn/start", "step/start"]
    events: list[dict[str, Any]] = [
        {"type": kind, "seq": seq, "time": 5, "data": {"turn": 1, "step": 1, "compactionId": f"k{seq}"}}
        for seq, kind in enumerate(kinds)
    ]
    open_before = fold_repair_scan(events)
    assert open_before == plain_fold(events) and [
        start["compactionId"] for start in open_before.open_compactions
    ] == ["k2"]
    events.append({"type": "session/end-seed", "seq": 5, "time": 5, "data": {}})
    assert fold_repair_scan(events) == plain_fold(events) and fold_repair_scan(events).open_compactions == ()


# --- a seed's runs (issue 24): fold_seed judges a run of plain entries in one call --------------

SEED_MUTATIONS: tuple[tuple[str, Any], ...] = (
    ("seq", 0.5),
    ("seq", True),
    ("seq", -1),
    ("seq", "next"),
    ("seq", "float"),
    ("time", 1.0),
    ("time", 0.5),
    ("time", 2**53),
    ("time", 2**53 - 1),
    ("time", -(2**53)),
    ("time", True),
    ("time", None),
    ("type", 5),
    ("type", "request/header"),
    ("type", "request/header-delta"),
    ("type", "x/other"),
    ("type", "tool/result"),
    ("data", "drop"),
    ("extra", 1),
    ("ignorable", True),
    ("ignorable", False),
    ("ignorable", 1),
    ("surfaceOp", "append"),
    ("surfaceOp", "drop"),
    ("surfaceOp", "Append"),
    ("surfaceOp", {"op": "replace", "start": 0, "end": 0}),
    ("surfaceOp", None),
    ("sourceEventSeqs", []),
    ("sourceEventSeqs", [0]),
    ("sourceEventSeqs", [0, 0]),
    ("sourceEventSeqs", ["own"]),
    ("sourceEventSeqs", [True]),
    ("sourceEventSeqs", [0.0]),
    ("sourceEventSeqs", "x"),
    ("sourceEventSeqs", "drop"),
    ("message", "drop"),
    ("entry", "frozen"),
    ("entry", "list"),
    ("entry", "none"),
)
SEED_MODES = ("restore-kept", "shared", "restore", "snapshot")


def seed_base(length: int) -> list[Any]:
    """A well-formed seed of ``length`` entries: turns of a user message, a chunk, an assistant
    message calling a tool, its call and result, a prune of the result (a replace), a turn end."""
    from event_builders import assistant_data, event, tool_result_data, user_data

    seed: list[Any] = []
    while len(seed) < length:
        seq = len(seed)
        call = f"c{seq}"
        seed += [
            event(seq, "turn/start", {"turn": 1}),
            event(seq + 1, "user/message", user_data(f"u{seq}"), "append"),
            event(seq + 2, "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"text": "h"}}),
            event(seq + 3, "assistant/message", assistant_data(f"a{seq}", calls=(call,)), "append"),
            event(seq + 4, "tool/call", {"callId": call}),
            event(seq + 5, "tool/result", tool_result_data(call), "append", [seq + 4]),
            event(
                seq + 6, "tool/result", tool_result_data(call, "cut"), replace(seq + 5, seq + 5), [seq + 5]
            ),
            event(seq + 7, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}, time=-3),
        ]
    return seed[:length]


def replace(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


def mutated_seed(seed: list[Any], index: int, key: str, value: Any) -> None:
    """Entry ``index`` of ``seed`` with ``key`` set to ``value`` (``"drop"``: removed; ``"next"``,
    ``"float"``, ``"own"``: the index plus one, as a float, itself), or made another kind of entry."""
    from spec.log.json import freeze_parsed_json

    entry = seed[index]
    if key == "entry":
        seed[index] = {"frozen": freeze_parsed_json(entry), "list": [entry], "none": None}[value]
    elif key == "message":
        if isinstance(entry["data"], dict):
            entry["data"].pop("message", None)
    elif value == "drop":
        entry.pop(key, None)
    elif isinstance(value, list):
        entry[key] = [index if item == "own" else item for item in value]
    else:
        entry[key] = (
            {"next": index + 1, "float": float(index)}.get(value, value) if type(value) is str else value
        )


def per_event_fold(seed: list[Any], mode: Any, messages_checked: int) -> tuple[Any, Any]:
    """The fold as the spec states it event by event: each entry validated, then planned."""
    from spec.log.nodes import SurfaceNodes
    from spec.log.seed import plan_seed_surface, validate_seed_event
    from spec.log.surface import Surface, splice_plan

    events: list[Any] = []
    nodes = SurfaceNodes()
    generation = 0
    for index, source in enumerate(seed):
        event = validate_seed_event(index, source, mode, index < messages_checked)
        plan = plan_seed_surface(index, nodes, event, events)
        events.append(event)
        if plan is not None:
            generation = splice_plan(nodes, plan, generation)
    return tuple(events), Surface(nodes=tuple(nodes), replace_generation=generation)


def fold_outcome(fold: Any, seed: list[Any], mode: Any, messages_checked: int) -> Any:
    from spec.codes import SpecError

    try:
        events, surface = fold(seed, mode, messages_checked)
    except SpecError as error:
        return ("refused", error.code, error.message)
    return ("folded", [dict(event) for event in events], [type(event) for event in events], surface)


def assert_folds_alike(seed: list[Any], mode: Any, checked: int, frozen: bool) -> None:
    import copy

    from spec.log.json import freeze_parsed_json
    from spec.log.session import fold_seed

    if frozen:
        seed = [freeze_parsed_json(entry) if type(entry) is dict else entry for entry in seed]
    expected = fold_outcome(per_event_fold, copy.deepcopy(seed), mode, checked)
    assert fold_outcome(fold_seed, seed, mode, checked) == expected, (mode, checked, frozen)


@pytest.mark.parametrize(("key", "value"), SEED_MUTATIONS)
def test_a_seed_folded_by_runs_gives_what_the_per_event_rules_give(key: str, value: Any) -> None:
    """fold_seed keeps a run of plain log-only entries and appends as it is (take_seed_run) and
    judges the entry that ends it rule by rule: the same events, surface, or refusal (code and
    message) as the per-event rules, for each change of each entry of a 16-entry seed, in every
    mode, frozen or not, its messages checked by a read path or not."""
    import copy

    for index in range(16):
        seed = seed_base(16)
        mutated_seed(seed, index, key, copy.deepcopy(value))
        for mode in SEED_MODES:
            for checked in (0, 7, 16):
                for frozen in (False, True):
                    assert_folds_alike(seed, mode, checked, frozen)


@given(
    st.integers(min_value=0, max_value=30),
    st.lists(st.tuples(st.integers(min_value=0, max_value=29), st.sampled_from(SEED_MUTATIONS)), max_size=4),
    st.sampled_from(SEED_MODES),
    st.integers(min_value=0, max_value=31),
    st.booleans(),
)
def test_a_seed_with_several_changes_folded_by_runs_gives_what_the_per_event_rules_give(
    length: int, mutations: list[tuple[int, tuple[str, Any]]], mode: Any, checked: int, frozen: bool
) -> None:
    import copy

    seed = seed_base(length)
    for index, (key, value) in mutations:
        if index < len(seed) and type(seed[index]) is dict:
            mutated_seed(seed, index, key, copy.deepcopy(value))
    assert_folds_alike(seed, mode, checked, frozen)
