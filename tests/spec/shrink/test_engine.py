"""The compaction engine's step order has one oracle, ``spec.shrink.engine``: change one step of a
plan and the reference engine (``reference.shrink.compaction``) and the suite's engine model
(``conformance.engine_model``) both follow it, their answers and logs changing the same way."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest

import conformance
import spec.shrink.engine as plans
from conformance.engine_model import model_request
from conformance.model import ModelStore
from reference.server import ReferenceSubject
from spec.log.events import COMPACTION_PRUNE, TOOL_RESULT, Event
from spec.shrink.engine import Append, Observe, Plan, SessionView
from spec.shrink.prune import PruneConfig, PrunedEntry, plan_prune_events

VECTORS = Path(conformance.__file__).resolve().parent / "vectors"
FLUSHED = VECTORS / "compaction" / "a-manual-compaction-flushes-once-its-bracket-is-closed.json"
PRUNED = next((VECTORS / "prune-pass").glob("*.json"))
SMALL = {"thresholdChars": 100, "headChars": 20, "tailChars": 20}


def requests_of(vector: Path) -> list[dict[str, Any]]:
    return [step["request"] for step in json.loads(vector.read_text(encoding="utf-8"))["steps"]]


def answers(requests: Sequence[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """Each request answered by the reference and by the model, as ``(ok, result or code)``."""
    subject, model = ReferenceSubject(), ModelStore()
    got: list[Any] = []
    expected: list[Any] = []
    for request in requests:
        answer: Any = subject.handle(request)
        got.append((True, answer["result"]) if answer["ok"] else (False, answer["error"]["code"]))
        model, expect = model_request(model, request["op"], **{k: v for k, v in request.items() if k != "op"})
        expected.append((True, expect.result) if expect.ok else (False, expect.code))
    return got, expected


def test_both_engines_follow_a_plan_whose_manual_compaction_no_longer_flushes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests = requests_of(FLUSHED)
    assert requests[-1]["op"] == "read"
    before_subject, before_model = answers(requests)
    assert before_subject == before_model and before_subject[-1][0]  # flushed: the read sees the log
    monkeypatch.setattr(plans, "should_flush_after_close", lambda manual, closed: False)
    after_subject, after_model = answers(requests)
    assert after_subject == after_model
    assert after_subject[-1] == (False, "SESSION_NOT_FOUND")  # never flushed: nothing is stored


def swapped_prune_pass(config: PruneConfig) -> Plan[tuple[PrunedEntry, ...]]:
    """``plan_prune_pass`` with its two appends swapped: the replacement, then its metering event."""
    view = cast(SessionView, (yield Observe()))
    pruned: list[PrunedEntry] = []
    for plan in plan_prune_events(view.surface.nodes, view.events, config):
        replacement = cast(
            Event, (yield Append(TOOL_RESULT, plan.replacement_data, plan.surface_op, plan.source_event_seqs))
        )
        yield Append(COMPACTION_PRUNE, plan.prune_data)
        seq = replacement["seq"]
        assert isinstance(seq, int)
        pruned.append(PrunedEntry(plan.original_seq, seq, plan.call_id, plan.chars_before, plan.chars_after))
    return tuple(pruned)


def test_both_engines_follow_a_prune_pass_whose_two_appends_are_swapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requests = [
        {**request, "config": SMALL} if request["op"] == "prune" else request
        for request in requests_of(PRUNED)
    ]
    assert requests[-1]["op"] == "state"

    def tail(answer: Any) -> list[str]:
        return [event["type"] for event in answer[1]["events"][-2:]]

    before_subject, before_model = answers(requests)
    assert before_subject == before_model
    assert tail(before_subject[-1]) == [COMPACTION_PRUNE, TOOL_RESULT]
    monkeypatch.setattr(plans, "plan_prune_pass", swapped_prune_pass)
    after_subject, after_model = answers(requests)
    assert after_subject == after_model
    assert tail(after_subject[-1]) == [TOOL_RESULT, COMPACTION_PRUNE]
