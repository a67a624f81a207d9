"""The folds that skip work (issue 14) give what the plain fold gives, event by event."""

from __future__ import annotations

from typing import Any

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
