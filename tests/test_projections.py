"""Projections: fold units, state_of catching up late units, wire-only snapshots, stateVersion
conflicts, the persisted cache that is possibly stale but never wrong, and the seed's session digest
(SPEC-DECISIONS D7; seed 002 "会话账本"; notes/dsh-compaction-projection §11, §12.1 I12-I13)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from unittest.mock import ANY

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import refusal
from shrink_builders import (
    Conversation,
    RecordingSink,
    long_conversation,
    new_session,
    sink_conversation,
    sink_session,
)

from reference.persistence.filestore import FileStore
from reference.persistence.powerloss import PowerLossFileSystem
from reference.projections.registry import (
    DIGEST_ZERO,
    SESSION_DIGEST,
    FileCacheMedium,
    MemoryCacheMedium,
    ProjectionCache,
    Projections,
    apply_session_digest,
)
from reference.session import Session
from reference.shrink.compaction import CompactionEngine
from reference.store import SessionStore
from reference.summarizers import DeterministicSummarizer
from spec.codes import Code
from spec.format.json_text import encode_json_text
from spec.log.events import Event
from spec.log.json import JsonValue, int_field
from spec.log.writers import COMPACTION_ENGINE
from spec.projections.units import (
    CACHE_FORMAT,
    ProjectionCell,
    ProjectionUnit,
    decode_cache_row,
    decode_cache_rows,
    derive_initial_cell,
    derive_projection_changes,
    encode_cache_record,
    fold_projection,
    is_cache_row_durable,
    is_cache_write_due,
    is_same_state,
    plan_registration,
)
from spec.shrink.prune import PruneConfig


def counter_unit(
    key: str = "count", version: int = 1, wire: bool = False, calls: list[int] | None = None
) -> ProjectionUnit:
    """Counts every event; records the seq of every event it was applied to in ``calls``."""

    def apply(state: JsonValue, event: Event) -> JsonValue:
        if calls is not None:
            calls.append(int_field(event, "seq"))
        assert isinstance(state, int)
        return state + 1

    return ProjectionUnit(key, version, lambda state: isinstance(state, int), lambda: 0, apply, wire)


def replay(unit: ProjectionUnit, events: Any) -> JsonValue:
    return fold_projection(unit, derive_initial_cell(unit), events).state


def digest_session(session: Session, talk: Conversation | None = None) -> Conversation:
    """Two big-output turns, a manual compaction, one more pressured turn with prunes and an
    automatic compaction: the digest then has something to count."""
    talk = talk or Conversation(session)
    for number in range(2):
        talk.prompt(f"question {number}")
        talk.tool_step("r" * 10_000)
        talk.answer("done")
        talk.end_turn()
    engine = CompactionEngine(DeterministicSummarizer(), prune=PruneConfig())
    engine.compact_now(session)
    talk.prompt("one more")
    talk.tool_step("s" * 12_000)
    talk.tool_step("t" * 12_000)
    engine.compact_if_needed(session, "context-overflow")
    talk.end_turn()
    return talk


# --- registration (D7; notes §11.2) ---------------------------------------------------------------


def test_register_returns_a_disposer_that_removes_the_key() -> None:
    projections = Projections()
    session = new_session()
    dispose = projections.register(counter_unit())
    assert projections.state_of(session, "count") == 0
    dispose()
    dispose()
    assert projections.keys() == () and projections.state_of(session, "count") is None


def test_a_re_registered_unit_rebuilds_from_the_log() -> None:
    projections = Projections()
    session = new_session()
    long_conversation(session, turns=1)
    projections.register(counter_unit())()
    projections.register(counter_unit())
    assert projections.state_of(session, "count") == session.seq


def test_registrants_of_one_key_and_version_share_it_until_the_last_one_leaves() -> None:
    projections = Projections()
    first, second = projections.register(counter_unit()), projections.register(counter_unit())
    first()
    assert projections.keys() == ("count",)
    second()
    assert projections.keys() == ()


def test_a_key_is_not_shared_across_a_state_version_change() -> None:
    projections = Projections()
    projections.register(counter_unit(version=1))
    caught = refusal(lambda: projections.register(counter_unit(version=2)))
    assert caught.code == Code.PROJECTION_VERSION_CONFLICT
    assert "already registered at stateVersion 1" in caught.message


def test_a_shared_key_keeps_the_first_definition() -> None:
    first = counter_unit()
    assert plan_registration(first, dataclasses.replace(first, init=lambda: 99)) is first


@pytest.mark.parametrize(
    "unit",
    [
        ProjectionUnit("", 1, bool, lambda: 0, lambda s, e: s),
        ProjectionUnit("k", -1, bool, lambda: 0, lambda s, e: s),
        ProjectionUnit("k", 1.5, bool, lambda: 0, lambda s, e: s),  # type: ignore[arg-type]
        ProjectionUnit("k", True, bool, lambda: 0, lambda s, e: s),
        ProjectionUnit("k", 1, bool, 0, lambda s, e: s),  # type: ignore[arg-type]
    ],
)
def test_an_invalid_unit_is_refused_at_registration(unit: ProjectionUnit) -> None:
    assert refusal(lambda: Projections().register(unit)).code == Code.PROJECTION_UNIT_INVALID


# --- state_of and snapshot (D7; notes §11.2) -------------------------------------------------------


def test_state_of_catches_a_late_unit_up_to_the_current_seq() -> None:
    session = new_session()
    long_conversation(session, turns=2)
    projections = Projections()
    projections.register(counter_unit())
    assert projections.state_of(session, "count") == session.seq


def test_state_of_folds_each_event_exactly_once() -> None:
    session = new_session()
    calls: list[int] = []
    projections = Projections()
    projections.register(counter_unit(calls=calls))
    talk = long_conversation(session, turns=1)
    projections.state_of(session, "count")
    projections.state_of(session, "count")
    talk.prompt("again")
    assert projections.state_of(session, "count") == session.seq
    assert calls == list(range(session.seq))


def test_cells_are_per_session() -> None:
    projections = Projections()
    projections.register(counter_unit())
    one, two = new_session("one"), new_session("two")
    long_conversation(one, turns=2)
    assert projections.state_of(two, "count") == 0
    assert projections.state_of(one, "count") == one.seq


def test_snapshot_returns_wire_units_only_at_one_log_position() -> None:
    projections = Projections()
    projections.register(counter_unit("host"))
    projections.register(counter_unit("wire", wire=True))
    session = new_session()
    assert projections.snapshot(session).as_of_seq == -1
    long_conversation(session, turns=1)
    snapshot = projections.snapshot(session)
    assert snapshot.values == {"wire": session.seq} and snapshot.as_of_seq == session.seq - 1


def test_a_state_read_is_frozen() -> None:
    projections = Projections()
    projections.register(SESSION_DIGEST)
    state: Any = projections.state_of(new_session(), "sessionDigest")
    with pytest.raises(TypeError):
        state["compactions"] = 5


def test_a_unit_that_breaks_its_own_schema_fails_loudly() -> None:
    projections = Projections()
    projections.register(
        ProjectionUnit("bad", 1, lambda s: isinstance(s, int), lambda: "zero", lambda s, e: s)
    )
    assert refusal(lambda: projections.state_of(new_session(), "bad")).code == Code.PROJECTION_STATE_INVALID


def test_a_unit_state_outside_plain_json_fails_loudly() -> None:
    projections = Projections()
    projections.register(ProjectionUnit("tuple", 1, lambda s: True, lambda: (1, 2), lambda s, e: s))  # type: ignore[arg-type,return-value]
    assert refusal(lambda: projections.state_of(new_session(), "tuple")).code == Code.PROJECTION_STATE_INVALID


def test_an_event_at_or_below_the_cursor_is_never_folded_again() -> None:
    unit = counter_unit()
    cell = fold_projection(unit, derive_initial_cell(unit), [{"seq": 0}, {"seq": 1}])
    assert fold_projection(unit, cell, [{"seq": 0}, {"seq": 1}, {"seq": 2}]) == ProjectionCell(3, 2)


# --- the session digest (seed 002) ----------------------------------------------------------------


def test_the_digest_ignores_unrelated_events_by_returning_the_very_same_state() -> None:
    state = DIGEST_ZERO
    unrelated: list[Event] = [{"type": "turn/start", "data": {}}, {"type": "compaction/start", "data": {}}]
    for event in unrelated:
        assert apply_session_digest(state, event) is state


def test_the_digest_counts_completed_compactions_and_prunes_but_not_failed_compactions() -> None:
    events: list[Event] = [
        {"type": "compaction/prune", "data": {"shadowedTokenCount": 70}},
        {"type": "compaction/end", "data": {"compactionId": "a", "turn": None}},
        {"type": "compaction/end", "data": {"compactionId": "b", "turn": None, "error": "boom"}},
        {"type": "compaction/prune", "data": {"shadowedTokenCount": 30}},
    ]
    state: JsonValue = DIGEST_ZERO
    for event in events:
        state = apply_session_digest(state, event)
    assert state == {"compactions": 1, "prunes": 2, "lastShadowedTokens": 30}


def test_the_digest_counts_what_happened_not_what_the_surface_still_shows() -> None:
    session = new_session()
    digest_session(session)
    projections = Projections()
    projections.register(SESSION_DIGEST)
    state: Any = projections.state_of(session, "sessionDigest")
    assert state["compactions"] == 2 and state["prunes"] == 2
    visible = [
        session.events[seq]["type"]
        for seq in session.surface.nodes
        if isinstance(session.events[seq].get("surfaceOp"), dict)
    ]
    assert visible == ["user/message", "tool/result"]  # one checkpoint, one pruned result still shown
    assert state == replay(SESSION_DIGEST, session.events)


def test_the_digest_is_zero_on_an_empty_log() -> None:
    projections = Projections()
    projections.register(SESSION_DIGEST)
    assert projections.state_of(new_session(), "sessionDigest") == {
        "compactions": 0,
        "prunes": 0,
        "lastShadowedTokens": None,
    }


# --- the persisted cache (D7; notes §11.3-§11.4) --------------------------------------------------


def file_world() -> tuple[PowerLossFileSystem, FileStore, Callable[[], SessionStore]]:
    fs = PowerLossFileSystem()
    files = FileStore("/data", fs=fs, temp_token=lambda: "tmp")
    clock = iter(range(1_000, 10_000_000))
    return fs, files, lambda: SessionStore(persistence=files, clock=lambda: next(clock))


def test_the_digest_gives_the_same_state_from_a_cold_cache_a_stale_cache_and_a_full_replay() -> None:
    _fs, files, stores = file_world()
    writer = stores()
    session = writer.create("digest", meta={"createdAt": 1})
    talk = Conversation(session)
    talk.prompt("warm up")
    talk.tool_step("u" * 9_000)
    CompactionEngine(DeterministicSummarizer()).prune(session)
    talk.end_turn()
    cache = ProjectionCache(FileCacheMedium(files))
    live = Projections(cache)
    live.register(SESSION_DIGEST)
    cache.write(session, live)
    stale_cursor = session.seq - 1
    digest_session(session, talk)
    writer.close_all()
    full = replay(SESSION_DIGEST, files.read("digest").events)

    calls: list[int] = []

    def counted(state: JsonValue, event: Event) -> JsonValue:
        calls.append(int_field(event, "seq"))
        return apply_session_digest(state, event)

    counting = dataclasses.replace(SESSION_DIGEST, apply=counted)
    stale = Projections(ProjectionCache(FileCacheMedium(files)))
    stale.register(counting)
    resumed = stores().resume("digest")
    assert stale.state_of(resumed, "sessionDigest") == full
    assert calls and min(calls) == stale_cursor + 1

    cold = Projections(ProjectionCache(MemoryCacheMedium()))  # a cache that holds nothing yet
    cold.register(SESSION_DIGEST)
    assert cold.state_of(resumed, "sessionDigest") == full
    assert cold.state_of_stored(files, "digest", "sessionDigest") == replay(
        SESSION_DIGEST, files.read("digest").events
    )


def test_a_fresh_cache_row_needs_no_fold_at_all() -> None:
    medium = MemoryCacheMedium()
    sink = RecordingSink()
    session = sink_session(sink)
    digest_session(session)
    cache = ProjectionCache(medium)
    first = Projections(cache)
    first.register(SESSION_DIGEST)
    first_state = first.state_of(session, "sessionDigest")
    cache.write(session, first)
    calls: list[int] = []

    def counted(state: JsonValue, event: Event) -> JsonValue:
        calls.append(1)
        return state

    second = Projections(cache)  # the cache that wrote the row vouches for it
    second.register(dataclasses.replace(SESSION_DIGEST, apply=counted))
    assert second.state_of(session, "sessionDigest") == first_state and calls == []
    # Another cache over the same medium knows only the stored prefix (none: the session is new),
    # so a row past it may be another log's: it refolds, to the same state.
    folded: list[int] = []

    def applied(state: JsonValue, event: Event) -> JsonValue:
        folded.append(1)
        return apply_session_digest(state, event)

    third = Projections(ProjectionCache(medium))
    third.register(dataclasses.replace(SESSION_DIGEST, apply=applied))
    assert third.state_of(session, "sessionDigest") == first_state and len(folded) == len(session.events)


@pytest.mark.parametrize(
    ("header_change", "row_of"),
    [
        pytest.param({}, lambda session: {"ver": 7, "seq": 2, "val": 1_000}, id="another-state-version"),
        pytest.param(
            {}, lambda session: {"ver": 1, "seq": session.seq + 5, "val": 1_000}, id="cursor-past-the-log"
        ),
        pytest.param(
            {"createdAt": 999}, lambda session: {"ver": 1, "seq": 1, "val": 1_000}, id="another-lifecycle"
        ),
    ],
)
def test_an_unusable_cache_row_is_never_served_and_the_state_is_recomputed(
    header_change: dict[str, JsonValue], row_of: Callable[[Session], JsonValue]
) -> None:
    """A row at another stateVersion, one whose cursor lies past the log, and one written for
    another log lifecycle (a different createdAt) are all dropped and the state refolded."""
    medium = MemoryCacheMedium()
    session = new_session()
    long_conversation(session, turns=1)
    record = encode_cache_record({**session.header, **header_change}, {"count": row_of(session)})
    medium.write(session.id, encode_json_text(record).encode())
    projections = Projections(ProjectionCache(medium))
    projections.register(counter_unit())
    assert projections.state_of(session, "count") == session.seq


def test_a_malformed_cache_file_is_ignored() -> None:
    medium = MemoryCacheMedium()
    session = new_session()
    medium.write(session.id, b"{not json")
    projections = Projections(ProjectionCache(medium))
    projections.register(counter_unit())
    assert projections.state_of(session, "count") == 0


def test_a_stale_row_resumes_from_its_cursor() -> None:
    unit = counter_unit()
    assert decode_cache_row(unit, {"ver": 1, "seq": 3, "val": 4}, last_seq=10) == ProjectionCell(4, 3)
    assert decode_cache_row(unit, {"ver": 1, "seq": -1, "val": 0}, last_seq=-1) == ProjectionCell(0, -1)
    assert decode_cache_row(unit, {"ver": 1, "seq": 3, "val": "x"}, last_seq=10) is None
    assert decode_cache_row(unit, {"ver": True, "seq": 3, "val": 4}, last_seq=10) is None


def test_a_record_of_another_format_gives_no_rows() -> None:
    header: dict[str, JsonValue] = {"id": "s", "createdAt": 1}
    record: Any = dict(encode_cache_record(header, {"k": {"ver": 1, "seq": 0, "val": 0}}))
    assert decode_cache_rows(record, header) == {"k": {"ver": 1, "seq": 0, "val": 0}}
    assert decode_cache_rows({**record, "version": 2}, header) == {}
    assert decode_cache_rows({**record, "format": CACHE_FORMAT + "x"}, header) == {}
    assert decode_cache_rows(None, header) == {}


@pytest.mark.parametrize(("created", "recorded"), [(1, True), (0, False), (0, None)])
def test_a_record_whose_identity_only_the_host_language_confuses_gives_no_rows(
    created: int, recorded: JsonValue
) -> None:
    """JSON equality, not Python's: a record made for ``createdAt: true`` is another lifecycle's
    than a header's ``createdAt: 1``."""
    header: dict[str, JsonValue] = {"id": "s", "createdAt": created}
    record: Any = dict(encode_cache_record(header, {"k": {"ver": 1, "seq": 0, "val": 0}}))
    record["identity"] = {"createdAt": recorded}
    assert decode_cache_rows(record, header) == {}


def test_rows_are_written_only_after_the_log_is_flushed() -> None:
    sink, session = sink_conversation(1)
    medium = MemoryCacheMedium()
    projections = Projections(ProjectionCache(medium))
    projections.register(counter_unit())
    ProjectionCache(medium).write(session, projections)
    assert sink.flushed_upto == session.seq
    row: Any = ProjectionCache(medium).rows(session.header)["count"]
    assert row["seq"] < sink.flushed_upto


def test_a_failed_flush_writes_no_row() -> None:
    sink, session = sink_conversation(1)

    sink.fail_flushes("disk gone")
    medium = MemoryCacheMedium()
    projections = Projections()
    projections.register(counter_unit())
    with pytest.raises(OSError):
        ProjectionCache(medium).write(session, projections)
    assert medium.records == {}


def test_after_a_crash_no_row_claims_an_event_the_log_lost() -> None:
    fs, files, stores = file_world()
    session = stores().create("crash", meta={"createdAt": 1})
    talk = long_conversation(session, turns=2)
    cache = ProjectionCache(FileCacheMedium(files))
    projections = Projections(cache)
    projections.register(counter_unit())
    cache.write(session, projections)
    talk.prompt("never flushed")
    projections.state_of(session, "count")
    after = fs.crash()
    reopened = FileStore("/data", fs=after)
    durable = reopened.read("crash").events
    rows: Any = ProjectionCache(FileCacheMedium(reopened)).rows(reopened.read("crash").header)
    assert rows["count"]["seq"] <= len(durable) - 1
    fresh = Projections(ProjectionCache(FileCacheMedium(reopened)))
    fresh.register(counter_unit())
    assert fresh.state_of_stored(reopened, "crash", "count") == len(durable)


def test_the_cache_file_sits_beside_the_session_log() -> None:
    _fs, files, stores = file_world()
    session = stores().create("beside", meta={"createdAt": 1})
    projections = Projections()
    projections.register(SESSION_DIGEST)
    ProjectionCache(FileCacheMedium(files)).write(session, projections)
    log_path = files.locate("beside")
    assert log_path is not None
    assert files.fs.exists(log_path.rsplit("/", 1)[0] + "/projections.json")


def test_a_row_is_durable_only_when_the_log_holds_every_event_it_folded() -> None:
    assert is_cache_row_durable(-1, 0) and is_cache_row_durable(3, 4)
    assert not is_cache_row_durable(4, 4)


def test_a_write_is_due_after_a_turn_end_or_enough_events() -> None:
    assert is_cache_write_due(["step/end", "turn/end"], 200)
    assert is_cache_write_due(["x"] * 3, 3)
    assert not is_cache_write_due(["x"] * 2, 3)


def test_write_if_due_writes_at_turn_end_and_not_before() -> None:
    medium = MemoryCacheMedium()
    cache = ProjectionCache(medium, write_every_events=1_000)
    projections = Projections(cache)
    projections.register(counter_unit())
    session = new_session()
    talk = Conversation(session)
    talk.prompt("hi")
    assert not cache.write_if_due(session, projections)
    talk.end_turn()
    assert cache.write_if_due(session, projections)
    assert not cache.write_if_due(session, projections)


@settings(max_examples=30)
@given(turns=st.integers(1, 4), cut=st.floats(0, 1))
def test_resuming_from_any_durable_row_equals_a_full_replay(turns: int, cut: float) -> None:
    session = new_session()
    long_conversation(session, turns=turns)
    unit = counter_unit()
    cursor = int((session.seq - 1) * cut)
    row = {"ver": 1, "seq": cursor, "val": replay(unit, session.events[: cursor + 1])}
    cell = decode_cache_row(unit, row, session.seq - 1)
    assert cell is not None
    assert fold_projection(unit, cell, session.events).state == replay(unit, session.events)


# --- the subscription: events pushed through every unit as they commit (seed 002) -------------------


def counting_registry() -> tuple[SessionStore, Projections, list[int]]:
    """A store with a registry holding the counter unit; ``calls`` hears each seq it folds."""
    store = SessionStore(clock=lambda: 1)
    projections = Projections(store=store)
    calls: list[int] = []
    projections.register(counter_unit(calls=calls))
    return store, projections, calls


def test_a_registry_on_a_store_pushes_each_event_through_every_unit_as_it_commits() -> None:
    store, projections, calls = counting_registry()
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("note", {})
    assert calls == [0, 1], "folded at commit time, before anyone reads"
    assert projections.state_of(session, "count") == 2 and calls == [0, 1]


def test_a_pushed_cell_starts_from_the_log_before_the_first_pushed_event() -> None:
    store = SessionStore(clock=lambda: 1)
    session = store.create("s", seed=[{"type": "note", "seq": 0, "time": 1, "data": {}}])
    projections = Projections(store=store)
    calls: list[int] = []
    projections.register(counter_unit(calls=calls))
    session.append("note", {})
    assert calls == [0, 1, 2] and projections.state_of(session, "count") == 3  # seed, end-seed, note


def test_on_changed_hears_only_the_events_that_changed_a_state() -> None:
    store = SessionStore(clock=lambda: 1)
    projections = Projections(store=store)
    projections.register(SESSION_DIGEST)
    heard: list[tuple[str, int]] = []
    projections.on_changed(lambda session, key, value, seq: heard.append((key, seq)))
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    session.append("compaction/start", {"compactionId": "k", "turn": 1}, writer=COMPACTION_ENGINE)
    session.append("compaction/end", {"compactionId": "k", "turn": 1, "error": "x"}, writer=COMPACTION_ENGINE)
    session.append("compaction/prune", {"shadowedTokenCount": 3})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert heard == [("sessionDigest", 3)]


def test_a_registry_that_closes_hears_nothing_more() -> None:
    store, projections, calls = counting_registry()
    session = store.create("s")
    projections.close()
    session.append("note", {})
    assert calls == [] and projections.state_of(session, "count") == 1


# --- the identity rule (seed 002: "不关心的事件必须返回同一个引用") ---------------------------------------


def copying_unit() -> ProjectionUnit:
    """A unit that breaks the identity rule: a fresh copy of its state for every event."""
    return ProjectionUnit(
        "copy",
        1,
        lambda state: isinstance(state, dict),
        lambda: {"n": 0},
        lambda state, event: dict(state),  # type: ignore[arg-type]
    )


def test_a_unit_returning_a_new_equal_state_breaks_the_identity_rule() -> None:
    session = new_session()
    session.append("note", {})
    projections = Projections()
    projections.register(copying_unit())
    caught = refusal(lambda: projections.state_of(session, "copy"))
    assert caught.code == Code.PROJECTION_IDENTITY_BROKEN
    assert '"note" event at seq 0' in caught.message


def test_a_pushed_unit_that_breaks_the_rule_never_fails_the_append_and_fails_the_read() -> None:
    store = SessionStore(clock=lambda: 1)
    projections = Projections(store=store)
    projections.register(copying_unit())
    session = store.create("s")
    session.append("note", {})  # committed; the projection's failure is not the appender's
    assert session.seq == 1
    assert refusal(lambda: projections.state_of(session, "copy")).code == Code.PROJECTION_IDENTITY_BROKEN


def test_scalar_states_are_the_same_state_by_value() -> None:
    assert is_same_state(3, 3) and not is_same_state(3, 4) and not is_same_state(1, True)
    assert is_same_state(DIGEST_ZERO, DIGEST_ZERO) and not is_same_state(DIGEST_ZERO, dict(DIGEST_ZERO))


def test_the_digest_reports_a_change_exactly_where_it_counts() -> None:
    events: list[Event] = [
        {"type": "turn/start", "seq": 0, "data": {"turn": 1}},
        {"type": "compaction/end", "seq": 1, "data": {"compactionId": "k"}},
        {"type": "compaction/end", "seq": 2, "data": {"compactionId": "k", "error": "x"}},
        {"type": "compaction/prune", "seq": 3, "data": {"shadowedTokenCount": 7}},
    ]
    state, changed = derive_projection_changes(SESSION_DIGEST, events)
    assert changed == (False, True, False, True)
    assert state == {"compactions": 1, "prunes": 1, "lastShadowedTokens": 7}


# --- the cache's moments with a subscription: turn end, the count throttle, close ------------------


def test_with_a_store_the_cache_is_written_at_each_turn_end_and_at_close() -> None:
    _fs, files, stores = file_world()
    store = stores()
    medium = FileCacheMedium(files)
    cache = ProjectionCache(medium, write_every_events=1_000)
    projections = Projections(cache, store=store)
    projections.register(counter_unit())
    session = store.create("s", meta={"createdAt": 1})
    talk = Conversation(session)
    talk.prompt("hi")
    assert medium.read("s") is None
    talk.end_turn()
    row: Any = cache.rows(session.header)["count"]
    assert row["seq"] == session.seq - 1, "written at the turn/end, after the log was flushed"
    talk.prompt("again")
    store.close("s")
    row = cache.rows(files.read("s").header)["count"]
    assert row["seq"] == len(files.read("s").events) - 1, "written once more when the session closed"


def test_with_a_store_the_cache_is_written_every_write_every_events_events() -> None:
    store = SessionStore(clock=lambda: 1)
    medium = MemoryCacheMedium()
    projections = Projections(ProjectionCache(medium, write_every_events=3), store=store)
    projections.register(counter_unit())
    session = store.create("s")
    session.append("note", {})
    session.append("note", {})
    assert medium.records == {}
    session.append("note", {})
    assert medium.records != {}


@pytest.mark.parametrize("registered", [False, True])
def test_a_fault_armed_before_close_fails_the_close(registered: bool) -> None:
    """PROTOCOL.md, ``fail_next``: the request that hits the fault answers ``STORAGE_IO``, with a
    unit registered or not. The store flushes before it tells its listeners of the close: told
    first, the projection cache's close write flushed the log, met the fault and kept it as a
    stale cache, and the close answered success (found by mutpl9, stop 39)."""
    from conformance.cases.build import ok, turn
    from reference.subject import ReferenceSubject

    subject = ReferenceSubject()
    steps = [ok("reset", storage="file", compressed=False)]
    steps += [ok("project", unit="turnLedger")] if registered else []
    steps += [ok("create", id="s"), ok("flush", id="s"), turn(1), ok("fail_next", fsOp="write", errno="EIO")]
    for rid, step in enumerate(steps):
        assert subject.handle({**step.request, "rid": rid})["ok"]
    answer = subject.handle({"rid": len(steps), "op": "close", "id": "s"})
    assert answer["ok"] is False and answer["error"] == {"code": "STORAGE_IO", "message": ANY}
