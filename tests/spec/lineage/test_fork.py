"""Fork: seed selection, lineage and the store-level check order (notes/dsh-session-core §7.1;
§12 fork.spec.ts, the pure parts)."""

from __future__ import annotations

from typing import Any

import pytest
from event_builders import append_item, assistant, at, event, turn_end, turn_start, user, user_data
from refusals import refusal

from reference.persistence.memory import MemoryPersistence
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.lineage.fork import derive_child_meta, plan_fork_seed, validate_fork_request
from spec.log.header import build_header
from spec.log.session import ABSENT, SessionState, append_event, create_session_state, derive_session_messages
from spec.log.writers import STORE

NOW = 2_000  # the pinned clock, ms


def live(events: list[dict[str, Any]], session_id: str = "src", meta: Any = None) -> SessionState:
    """A live source built by appending (so it has no end-seed of its own), written as the store
    writes a restored log, so that a repair closer (an interrupted turn/end) can be part of it."""
    state = create_session_state(
        session_id, None, build_header(session_id, meta or {"cwd": "/workspace"}, 1, False), 1
    )
    for item in events:
        state, _ = append_item(state, item, 1, STORE)
    return state


def fork(source: SessionState, boundary: object = ABSENT, child_id: str = "child") -> SessionState:
    """What a store does after its checks: plan the seed, derive the lineage, create the child."""
    source_id = str(source.header["id"])
    seed = plan_fork_seed(source_id, source.events, boundary)
    meta = derive_child_meta(source.header, source_id, len(seed))
    return create_session_state(child_id, seed, build_header(child_id, meta, NOW, True), NOW)


def fork_error(source: SessionState, boundary: object = ABSENT) -> SpecError:
    return refusal(lambda: plan_fork_seed(str(source.header["id"]), source.events, boundary))


CLOSED_TURN = [turn_start(0), user(1, "first"), assistant(2), turn_end(3)]


def test_an_empty_source_forks_into_an_empty_child_with_lineage() -> None:
    child = fork(live([]))
    assert [item["type"] for item in child.events] == ["session/end-seed"]
    assert {key: child.header.get(key) for key in ("id", "cwd", "parentSession", "seedLength")} == {
        "id": "child",
        "cwd": "/workspace",
        "parentSession": "src",
        "seedLength": 0,
    }


def test_the_default_boundary_is_the_last_event() -> None:
    source = live(CLOSED_TURN)
    assert plan_fork_seed("src", source.events) == source.events


def test_the_child_inherits_equal_but_detached_frozen_events() -> None:
    source = live(CLOSED_TURN)
    child = fork(source)
    assert child.events[:4] == source.events
    assert all(mine is not theirs for mine, theirs in zip(child.events, source.events))
    with pytest.raises(TypeError):
        at(child.events[1], "data")["content"] = []
    assert (child.header["seedLength"], child.first_live_seq) == (4, 4)


def test_a_shared_seed_gives_the_child_the_parent_s_very_frozen_events() -> None:
    """What a store's fork does (the seed is a prefix of the live log): nothing is copied, and
    nothing can change, so sharing is safe; the seed's checks still run on every event."""
    source = live(CLOSED_TURN)
    seed = plan_fork_seed("src", source.events)
    child = create_session_state("child", seed, build_header("child", {}, NOW, True), NOW, mode="shared")
    assert all(mine is theirs for mine, theirs in zip(child.events, source.events))
    assert child.events[:4] == source.events and child.events[4]["type"] == "session/end-seed"
    with pytest.raises(TypeError):
        at(child.events[1], "data")["content"] = []
    with pytest.raises(SpecError) as refused:
        create_session_state(
            "child", [user(0), assistant(0)], build_header("child", {}, NOW, True), NOW, mode="shared"
        )
    assert refused.value.code == Code.SEED_SEQ_MISMATCH


def test_a_shared_seed_still_copies_an_entry_that_is_not_a_frozen_event() -> None:
    plain = {**user(0)}
    child = create_session_state("child", [plain], build_header("child", {}, NOW, True), NOW, mode="shared")
    assert child.events[0] == plain and child.events[0] is not plain
    with pytest.raises(TypeError):
        at(child.events[0], "data")["content"] = []


def test_log_only_events_after_a_closed_turn_belong_to_the_default_seed() -> None:
    source = live([*CLOSED_TURN, event(4, "test/log-only", {"n": 1})])
    assert plan_fork_seed("src", source.events)[-1]["type"] == "test/log-only"


def test_an_earlier_boundary_works_while_the_tail_is_inside_an_open_turn() -> None:
    source = live([*CLOSED_TURN, turn_start(4, 2), user(5, "second")])
    child = fork(source, boundary=3)
    assert child.header["seedLength"] == 4
    assert [at(message, "content", 0, "text") for message in derive_session_messages(child)] == [
        "first",
        "hi",
    ]


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "completed"},
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "error", "error": {"message": "m", "code": "c"}},
        {"kind": "aborted", "reason": {"kind": "disposed"}},
        {"kind": "max-tokens"},
        {"kind": "interrupted"},
    ],
)
def test_every_turn_end_reason_is_a_valid_boundary(reason: dict[str, Any]) -> None:
    source = live([turn_start(0), event(1, "turn/end", {"turn": 1, "reason": reason})])
    assert len(plan_fork_seed("src", source.events, 1)) == 2


def test_a_bracket_left_open_by_a_running_parent_is_sealed_in_the_child_only() -> None:
    source = live([*CLOSED_TURN, event(4, "test/bracket-open", {})])
    child = fork(source)
    assert [item["type"] for item in source.events][-1] == "test/bracket-open"
    assert [item["type"] for item in child.events][-2:] == ["test/bracket-open", "session/end-seed"]
    assert child.first_live_seq == 5


def test_a_fork_of_a_fork_does_not_mark_its_seed_twice() -> None:
    grandchild = fork(fork(live(CLOSED_TURN)), child_id="grandchild")
    assert [item["type"] for item in grandchild.events].count("session/end-seed") == 1
    assert grandchild.first_live_seq == len(grandchild.events) == 5


@pytest.mark.parametrize(
    ("events", "boundary", "message"),
    [
        ([], 0, 'fork boundary 0 does not exist in session "src" (last seq: none)'),
        (CLOSED_TURN, -1, 'fork boundary for session "src" must be a non-negative safe integer, got -1'),
        (CLOSED_TURN, 0.5, 'fork boundary for session "src" must be a non-negative safe integer, got 0.5'),
        (
            CLOSED_TURN,
            2**53,
            'fork boundary for session "src" must be a non-negative safe integer, got 9007199254740992',
        ),
        (CLOSED_TURN, "1", 'fork boundary for session "src" must be a non-negative safe integer, got 1'),
        (CLOSED_TURN, None, 'fork boundary for session "src" must be a non-negative safe integer, got null'),
        (CLOSED_TURN, 4, 'fork boundary 4 does not exist in session "src" (last seq: 3)'),
    ],
)
def test_an_invalid_boundary_is_rejected_with_dsh_s_message(
    events: list[Any], boundary: object, message: str
) -> None:
    error = fork_error(live(events), boundary)
    assert (error.code, error.message) == (Code.INVALID_BOUNDARY, message)


def test_an_integral_float_boundary_is_that_integer() -> None:
    assert len(plan_fork_seed("src", live(CLOSED_TURN).events, 3.0)) == 4


def test_a_log_whose_positions_do_not_match_their_seqs_is_rejected() -> None:
    corrupted = (turn_start(0), {**turn_end(1), "seq": 7})
    caught = refusal(lambda: plan_fork_seed("src", corrupted, 1))
    assert caught.code == Code.INVALID_BOUNDARY
    assert caught.message == 'fork boundary 1 does not match a contiguous event seq in session "src"'


@pytest.mark.parametrize(
    "boundary",
    [0, 1, 2, 3, 4],
    ids=["turn/start", "step/start", "user/message", "assistant/message", "tool/call"],
)
def test_a_boundary_inside_an_open_turn_is_rejected(boundary: int) -> None:
    source = live(
        [
            turn_start(0),
            event(1, "step/start", {"turn": 1, "step": 1}),
            user(2),
            assistant(3),
            event(4, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "n", "arguments": "{}"}),
        ]
    )
    error = fork_error(source, boundary)
    assert (error.code, error.message) == (
        Code.OPEN_TURN,
        f'fork boundary {boundary} in session "src" ends inside open turn 1',
    )


def test_the_open_turn_check_ignores_everything_after_the_boundary() -> None:
    source = live([*CLOSED_TURN, turn_start(4, 2)])
    assert len(plan_fork_seed("src", source.events, 3)) == 4


@pytest.mark.parametrize("boundary", [1, 2], ids=["compaction/start", "between start and end"])
def test_a_boundary_inside_a_standalone_compaction_is_refused_by_the_fork_itself(boundary: int) -> None:
    """The fork's own check, not the seed's (which refuses the same seed with the same code): the
    refusal names the boundary and the source, and plan_fork_seed never returns such a seed."""
    source = live(
        [
            user(0),
            event(1, "compaction/start", {"compactionId": "k1", "turn": None}),
            event(2, "x/note", {}),
            event(3, "compaction/end", {"compactionId": "k1", "turn": None, "error": "x"}),
        ]
    )
    error = fork_error(source, boundary)
    assert (error.code, error.message) == (
        Code.OPEN_COMPACTION,
        f'fork boundary {boundary} in session "src" ends inside open compaction k1',
    )
    assert len(plan_fork_seed("src", source.events, 3)) == 4


def test_an_unknown_source_is_not_found() -> None:
    caught = refusal(lambda: validate_fork_request({"src"}, "missing", None))
    assert (caught.code, caught.message) == (
        Code.SESSION_NOT_FOUND,
        'session "missing" not found',
    )


def test_a_live_child_id_is_rejected() -> None:
    caught = refusal(lambda: validate_fork_request({"src", "k1"}, "src", "k1"))
    assert (caught.code, caught.message) == (
        Code.SESSION_ALREADY_EXISTS,
        'session "k1" already exists',
    )


def test_a_duplicate_child_id_is_reported_before_a_missing_source() -> None:
    assert refusal(lambda: validate_fork_request({"k1"}, "missing", "k1")).code == Code.SESSION_ALREADY_EXISTS


def test_a_stored_child_id_is_rejected_before_a_missing_source() -> None:
    caught = refusal(lambda: validate_fork_request({"src"}, "missing", "k1", stored_ids={"k1"}))
    assert (caught.code, caught.message) == (
        Code.SESSION_ALREADY_EXISTS,
        'session "k1" already exists on storage',
    )


def test_a_stored_child_id_is_rejected_by_a_store_before_a_bad_boundary() -> None:
    store = SessionStore(MemoryPersistence())
    store.create("k1").flush()
    store.close("k1")
    store.create("src")
    assert refusal(lambda: store.fork("src", boundary=5, child_id="k1")).code == Code.SESSION_ALREADY_EXISTS


def test_a_free_child_id_and_a_live_source_pass() -> None:
    validate_fork_request({"src"}, "src", "k1")
    validate_fork_request({"src"}, "src", None)


def test_the_child_inherits_only_cwd_parent_and_seed_length() -> None:
    parent: dict[str, Any] = {
        "version": 4,
        "id": "p",
        "createdAt": 1,
        "cwd": "/w",
        "origin": "subagent",
        "delegationDepth": 2,
        "agentPreset": "x",
        "isSeeded": False,
    }
    assert derive_child_meta(parent, "p", 3) == {"cwd": "/w", "parentSession": "p", "seedLength": 3}


def test_a_parent_without_cwd_gives_a_child_without_cwd() -> None:
    assert derive_child_meta({"version": 4, "id": "p"}, "p", 0) == {"parentSession": "p", "seedLength": 0}


def test_the_child_header_takes_its_own_creation_time() -> None:
    assert fork(live(CLOSED_TURN)).header["createdAt"] == NOW


def test_a_source_that_append_allowed_but_a_seed_refuses_cannot_be_forked() -> None:
    source = live([event(0, "user/message", {"content": [], "source": {"kind": "user"}}, "append")])
    assert refusal(lambda: fork(source)).code == Code.MESSAGE_UNIDENTIFIED


def test_the_parent_is_not_changed_by_a_fork() -> None:
    source = live(CLOSED_TURN)
    before = source.events
    fork(source)
    assert source.events is before and source.events[-1]["type"] == "turn/end"


def test_later_appends_to_parent_and_child_are_independent() -> None:
    source = live(CLOSED_TURN)
    child = fork(source)
    child, _ = append_event(child, "user/message", user_data("c"), "append")
    assert len(source.events) == 4 and len(child.events) == 6
