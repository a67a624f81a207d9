"""spec/lineage/store.py: the decisions a store makes (the order of create's checks, minting,
resume's refusals and the resumed log), which the reference store and the suite's model share."""

from __future__ import annotations

from collections.abc import Callable

from event_builders import assistant_data, event, turn_start, user
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code
from spec.lineage.repair import derive_closers
from spec.lineage.store import (
    derive_resumed_log,
    derive_resumed_state,
    mint_session_id,
    plan_create,
    validate_resume_request,
)
from spec.log.events import END_SEED
from spec.log.json import snapshot_json
from spec.log.unclosed import derive_open_turn_start, has_open_turn

BAD_META = {"cwd": "relative"}
BAD_SEED = [{"type": "turn/start", "seq": 5, "time": 0, "data": {"turn": 1}}]


def code_of(call: Callable[[], object]) -> str:
    caught = refusal(lambda: call())
    return str(caught.code)


def test_a_minted_id_skips_ids_that_are_live_or_stored() -> None:
    assert mint_session_id(0, {"session-1"}, {"session-2"}) == ("session-3", 3)
    assert mint_session_id(3, set(), {"session-4", "session-5"}) == ("session-6", 6)


def test_without_stored_ids_minting_is_the_sessions_own_rule() -> None:
    assert mint_session_id(0, {"session-1", "session-2"}) == ("session-3", 3)


def test_create_refuses_a_live_id_before_it_judges_the_meta() -> None:
    assert code_of(lambda: plan_create("s", {"s"}, (), None, BAD_META, 0)) == Code.SESSION_ALREADY_EXISTS


def test_create_judges_the_seed_before_the_header() -> None:
    assert code_of(lambda: plan_create("s", (), (), BAD_SEED, BAD_META, 0)) == Code.SEED_SEQ_MISMATCH


def test_create_refuses_a_stored_id_only_after_the_header_and_the_seed() -> None:
    assert code_of(lambda: plan_create("s", (), {"s"}, None, BAD_META, 0)) == Code.HEADER_CWD
    assert code_of(lambda: plan_create("s", (), {"s"}, None, None, 0)) == Code.SESSION_ALREADY_EXISTS


def test_create_builds_the_session_from_its_seed_and_meta() -> None:
    state = plan_create("s", {"t"}, {"u"}, [], {"cwd": "/w"}, 7)
    assert state.header["cwd"] == "/w" and state.header["createdAt"] == 7
    assert [e["type"] for e in state.events] == [END_SEED]


def test_resume_refuses_a_live_id_first_then_an_id_with_no_stored_log() -> None:
    assert code_of(lambda: validate_resume_request("s", {"s"}, False)) == Code.SESSION_ALREADY_EXISTS
    assert code_of(lambda: validate_resume_request("s", set(), False)) == Code.SESSION_NOT_FOUND
    validate_resume_request("s", set(), True)


def test_the_resumed_log_is_the_stored_log_then_its_closers() -> None:
    stored = snapshot_json(
        [turn_start(0), user(1), event(2, "assistant/message", assistant_data(calls=("c1",)), "append")]
    )
    assert isinstance(stored, list)
    resumed = derive_resumed_log(stored)
    assert list(resumed[:3]) == stored and list(resumed[3:]) == list(derive_closers(stored))
    assert [e["type"] for e in resumed[3:]] == ["tool/result", "turn/end"]


def test_a_resumed_state_ends_with_the_end_seed_after_the_closers() -> None:
    stored = snapshot_json([turn_start(0), user(1)])
    assert isinstance(stored, list)
    state = derive_resumed_state(
        "s",
        snapshot_json({"version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0, "isSeeded": False}),
        stored,
        9,
    )
    assert [e["type"] for e in state.events] == ["turn/start", "user/message", "turn/end", END_SEED]
    assert state.first_live_seq == 3  # the marker is the first event of the new lifecycle


KINDS = st.lists(st.sampled_from(["turn/start", "turn/end", "user/message", "step/start"]), max_size=8)


@given(KINDS)
def test_repair_and_fork_share_one_open_turn_rule(kinds: list[str]) -> None:
    events = [event(seq, kind, {"turn": 1}) for seq, kind in enumerate(kinds)]
    assert has_open_turn(events) == (derive_open_turn_start(kinds) is not None)
