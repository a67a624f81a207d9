"""The suite's own parts: the store model, the D3 item checks and the exhaustive checker
(conformance/model.py, crash_rules.py, exhaustive.py); the machine has tests/test_conformance_machine.py."""

from __future__ import annotations

from typing import Any

import pytest

from conformance import builders as build
from conformance import crash_rules as rules
from conformance.driver import Driver, Mismatch
from conformance.engine_model import model_request
from conformance.exhaustive import run_exhaustive
from conformance.model import ModelStore, canonical_text, derive_model_key, model_crash
from conformance.subject import InProcessSubject
from reference.server import ReferenceSubject
from spec.log.events import END_SEED, TURN_END, TURN_START


def drive(model: ModelStore, *requests: tuple[str, dict[str, Any]]) -> tuple[ModelStore, Any]:
    expected = None
    for op, args in requests:
        model, expected = model_request(model, op, **args)
    return model, expected


def an_open_turn(model: ModelStore) -> ModelStore:
    model, _ = drive(
        model,
        ("create", {"id": "s"}),
        ("append", {"id": "s", "type": TURN_START, "data": build.turn_start(1)}),
        (
            "append",
            {"id": "s", "type": "user/message", "data": build.user_message("u1"), "surfaceOp": "append"},
        ),
        ("flush", {"id": "s"}),
    )
    return model


def test_a_resume_in_the_model_closes_the_open_turn_then_appends_the_end_seed() -> None:
    model, _ = model_crash(an_open_turn(ModelStore(storage="memory", now=5)))
    _, expected = model_request(model, "resume", id="s")
    result: Any = expected.result
    assert expected.ok
    assert [event["type"] for event in result["events"]] == [TURN_START, "user/message", TURN_END, END_SEED]
    assert result["firstLiveSeq"] == 3


def test_a_crash_in_the_model_keeps_only_what_was_flushed() -> None:
    model = an_open_turn(ModelStore(storage="memory"))
    model, _ = model_request(model, "append", id="s", type="todo/write", data={})
    model, _ = model_crash(model)
    _, expected = model_request(model, "read", id="s")
    result: Any = expected.result
    assert len(result["events"]) == 2


def test_a_session_never_flushed_is_not_found_after_a_crash_in_the_model() -> None:
    model, _ = drive(ModelStore(storage="memory"), ("create", {"id": "s"}))
    model, _ = model_crash(model)
    _, expected = model_request(model, "resume", id="s")
    assert expected.code == "SESSION_NOT_FOUND"


def beside_the_reference(*requests: tuple[str, dict[str, Any]]) -> None:
    """Drive the model and the reference side by side; the Driver raises on any disagreement."""
    driver = Driver(InProcessSubject(ReferenceSubject()))
    for op, args in requests:
        driver.step(op, **args)


def test_a_reset_puts_the_clock_back_at_zero_in_the_model_as_in_the_reference() -> None:
    beside_the_reference(("clock", {"now": 7}), ("reset", {"storage": "memory"}), ("create", {}))


def test_a_store_restarted_by_a_crash_counts_minted_ids_afresh_in_the_model_as_in_the_reference() -> None:
    beside_the_reference(("reset", {"storage": "file"}), ("create", {}), ("crash", {}), ("create", {}))


def test_an_armed_fault_fails_the_next_flush_with_bytes_to_write_and_is_spent() -> None:
    model, _ = drive(ModelStore(storage="file"), ("create", {"id": "s"}), ("flush", {"id": "s"}))
    model, _ = model_request(model, "fail_next", fsOp="write", errno="EIO")
    model, nothing_to_write = model_request(model, "flush", id="s")
    model, _ = model_request(model, "append", id="s", type="todo/write", data={})
    model, failed = model_request(model, "flush", id="s")
    _, retried = model_request(model, "flush", id="s")
    assert (nothing_to_write.ok, failed.code, retried.ok) == (True, "STORAGE_IO", True)


def test_a_close_whose_flush_fails_leaves_the_session_live_in_the_model_so_a_retry_can_publish_it() -> None:
    model, _ = drive(
        ModelStore(storage="file"), ("create", {"id": "s"}), ("fail_next", {"fsOp": "fsync", "errno": "EIO"})
    )
    model, closed = model_request(model, "close", id="s")
    assert closed.code == "STORAGE_IO" and "s" in model.live and "s" not in model.stored
    model, retried = model_request(model, "close", id="s")
    assert retried.ok and "s" not in model.live and "s" in model.stored


def test_the_model_key_tells_apart_states_that_differ_only_in_what_is_durable() -> None:
    model, _ = drive(ModelStore(storage="memory"), ("create", {"id": "s"}))
    flushed, _ = model_request(model, "flush", id="s")
    assert derive_model_key(model) != derive_model_key(flushed)


def test_canonical_text_tells_true_from_one() -> None:
    assert canonical_text({"a": True}) != canonical_text({"a": 1})
    assert canonical_text({"a": 1, "b": 2}) == canonical_text({"b": 2, "a": 1})


EVENTS: list[Any] = [{"type": TURN_START, "seq": 0, "time": 1, "data": {"turn": 1}}]
HEADER: Any = {"version": 4, "id": "s"}


@pytest.mark.parametrize(
    ("check", "item"),
    [
        (lambda: rules.check_d3_1_header(False, None, HEADER, True), "D3.1"),
        (lambda: rules.check_d3_1_header(True, {**HEADER, "id": "t"}, HEADER, True), "D3.1"),
        (lambda: rules.check_d3_2_prefix([{**EVENTS[0], "time": 2}], EVENTS), "D3.2"),
        (lambda: rules.check_d3_2_prefix(EVENTS * 2, EVENTS), "D3.2"),
        (lambda: rules.check_d3_3_flushed_kept([], 1), "D3.3"),
        (lambda: rules.check_d3_4_clean_reopen([], EVENTS), "D3.4"),
        (lambda: rules.check_d3_5_no_false_corruption("CORRUPT_LOG"), "D3.5"),
        (lambda: rules.check_d3_5_corruption_reported("resume", None), "D3.5"),
        (lambda: rules.check_d3_5_corruption_reported("read", "INTERNAL"), "D3.5"),
        (lambda: rules.check_d3_5_damage_undone([], EVENTS), "D3.5"),
        (lambda: rules.check_d3_6_closers(EVENTS, EVENTS, 1), "D3.6"),
    ],
)
def test_each_d3_check_names_its_item_when_it_fails(check: Any, item: str) -> None:
    problems = check()
    assert problems and all(problem.startswith(item) for problem in problems)


def test_the_d3_checks_pass_a_log_repaired_as_the_spec_says() -> None:
    closed: list[Any] = [
        *EVENTS,
        {"type": TURN_END, "seq": 1, "time": 1, "data": {"turn": 1, "reason": {"kind": "interrupted"}}},
    ]
    resumed = [*closed, {"type": END_SEED, "seq": 2, "time": 9, "data": {}}]
    assert rules.check_d3_6_closers(resumed, EVENTS, 9) == ()
    assert rules.check_d3_2_prefix(EVENTS, closed) == ()
    assert rules.check_d3_1_header(False, None, HEADER, False) == ()
    assert rules.check_d3_5_corruption_reported("read", "CORRUPT_LOG") == ()
    assert rules.check_d3_5_damage_undone(list(EVENTS), EVENTS) == ()


def test_the_exhaustive_checker_counts_distinct_states_and_passes_the_reference() -> None:
    outcome = run_exhaustive(InProcessSubject(ReferenceSubject()), ("core", "storage", "crash-seam"), 2)
    assert outcome.failure is None
    assert outcome.transitions > len(outcome.alphabet)  # the root's letters, then the new states' letters
    assert 1 < outcome.states <= 1 + outcome.transitions


class AnswersAfterResets:
    """The reference, but from its ``after``-th reset on it answers every ``op`` request with
    ``code``: a subject whose answers change once the search replays a path."""

    def __init__(self, op: str, after: int, code: str = "INTERNAL") -> None:
        self.reference = ReferenceSubject()
        self.op, self.after, self.code, self.resets = op, after, code, 0

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        self.resets += request.get("op") == "reset"
        if request.get("op") == self.op and self.resets >= self.after:
            return {"rid": request["rid"], "ok": False, "error": {"code": self.code, "message": "changed"}}
        answer: dict[str, Any] = self.reference.handle(request)
        return answer


def test_settle_checks_every_pipelined_answer_in_order_and_keeps_the_model_of_the_last_that_agreed() -> None:
    driver = Driver(InProcessSubject(AnswersAfterResets("clock", after=0)))
    driver.queue("create", id="s")
    agreed = driver.ahead
    driver.queue("clock", now=5)
    driver.queue("create", id="t")
    with pytest.raises(Mismatch, match="clock") as raised:
        driver.settle()
    assert raised.value.signature == "clock: expected ok, got INTERNAL"
    assert driver.model is agreed and not driver.pending and driver.requests == 3


def test_a_subject_whose_answers_change_when_a_path_is_replayed_fails_the_exhaustive_search() -> None:
    """The clock is set only when the search replays a path from a reset, whose requests go out
    pipelined: an answer that changes there must still fail the search, named with its sequence."""
    subject = InProcessSubject(AnswersAfterResets("clock", after=5))
    outcome = run_exhaustive(subject, ("core",), 2)
    assert outcome.failure is not None and outcome.failure.startswith("after [")
    assert 'clock {"now":1000}' in outcome.failure and "got error INTERNAL" in outcome.failure
