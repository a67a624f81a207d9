"""The persistence contract (SPEC-DECISIONS D2), written once for every backend: each ``test_``
function takes a ``backend`` fixture, and the test modules that run it (tests/test_persistence_contract.py:
in memory and the file store in zstd and plain mode; tests/test_db_contract.py: SQLite and
PostgreSQL) supply that fixture and collect the functions with :func:`contract_tests`. The cases are DSH's contract checklists that apply to this design
(notes/dsh-persistence.md §9.1 and §9.2); each test names its item.

A "restart" is a new process on the same storage: live handles are gone with whatever they had
buffered, and only what a completed flush made durable is still there.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Sequence
from typing import Any

import pytest
from event_builders import assistant_data, at, user_data
from refusals import refusal

from reference.persistence.api import LogHandle, PersistenceService
from reference.persistence.filestore import FileStore
from reference.persistence.memory import MemoryPersistence
from reference.persistence.powerloss import PowerLossFileSystem
from reference.session import Session
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.lineage.repair import (
    INTERRUPTED_REASON_KIND,
    TOOL_NOT_STARTED,
    TOOL_NOT_STARTED_TEXT,
    TOOL_OUTCOME_UNKNOWN,
    TOOL_OUTCOME_UNKNOWN_TEXT,
)
from spec.log.events import END_SEED, Event
from spec.log.header import build_header
from spec.log.json import FrozenDict, JsonValue
from spec.log.session import create_session_state

ROOT = "/data"
CWD = "/work/project"


class Backend:
    """One backend under test and the storage it keeps across restarts."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.fs = PowerLossFileSystem()
        self.memory = MemoryPersistence()
        self.service = self._new_service()

    def _new_service(self) -> PersistenceService:
        if self.kind == "memory":
            return self.memory
        return FileStore(ROOT, fs=self.fs, compressed=self.kind == "zstd")

    def restart(self) -> PersistenceService:
        """A new process: unflushed bytes and every writer are gone (a power cut, for the files)."""
        if self.kind == "memory":
            self.memory._writers.clear()  # the in-memory backend's "process" is its writer registry
        else:
            self.fs = self.fs.crash()
        self.service = self._new_service()
        return self.service

    def store(self, start: int = 1_000) -> SessionStore:
        ticks = itertools.count(start)
        return SessionStore(self.service, clock=lambda: next(ticks))


def contract_tests() -> dict[str, Any]:
    """Every contract test (a ``test_`` function taking ``backend``), by name, for a test module's
    globals."""
    return {
        name: test
        for name, test in globals().items()
        if name.startswith("test_") and "backend" in inspect.signature(test).parameters
    }


def header(session_id: str, **meta: Any) -> FrozenDict:
    return build_header(session_id, {"createdAt": 1, "cwd": CWD, **meta}, 1, is_seeded=False)


def events_of(*specs: tuple[str, Any], start: int = 0) -> tuple[Event, ...]:
    """Frozen events made by a session from ``(type, data)`` pairs (message types get ``append``)."""
    state = create_session_state("scratch", None, header("scratch"), 0)
    session = Session(state, clock=lambda: 7)
    for kind, data in specs:
        surface = "append" if kind in ("user/message", "assistant/message", "tool/result") else None
        if surface is None:
            session.append(kind, data)
        else:
            session.append(kind, data, surface)
    return session.events[start:]


def write_session(
    service: PersistenceService, session_id: str, events: Sequence[Event], **meta: Any
) -> FrozenDict:
    """A stored session holding ``events`` (flushed and closed); returns its header."""
    handle = live_session(service, session_id, events, **meta)
    handle.close()
    return handle.header


def live_session(
    service: PersistenceService, session_id: str, events: Sequence[Event], **meta: Any
) -> LogHandle:
    """A new session's writer with ``events`` appended, none of them flushed yet."""
    handle = service.create(header(session_id, **meta))
    handle.append(events)
    return handle


def interrupted_turn() -> tuple[Event, ...]:
    """Ten events, ending inside turn 2 with a step open (DSH's contract case 3)."""
    return events_of(
        ("turn/start", {"turn": 1}),
        ("user/message", user_data("u1")),
        ("assistant/message", assistant_data("a1")),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("turn/start", {"turn": 2}),
        ("user/message", user_data("u2")),
        ("step/start", {"turn": 2, "step": 1}),
        ("assistant/chunk", {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "h"}}),
        ("assistant/chunk", {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "i"}}),
        ("assistant/chunk", {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "!"}}),
    )


def pending_call(started: bool) -> tuple[Event, ...]:
    """A turn whose assistant announced call ``c1``; with ``started`` its tool/call is logged too."""
    specs: list[tuple[str, Any]] = [
        ("turn/start", {"turn": 1}),
        ("user/message", user_data("u1")),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant/message", assistant_data("a1", "reading", ("c1",))),
    ]
    if started:
        specs.append(("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"}))
    return events_of(*specs)


def types(events: Sequence[Event]) -> list[str]:
    return [str(event["type"]) for event in events]


def seqs(events: Sequence[Event]) -> list[int]:
    return [at(event, "seq") for event in events]


def revision(service: PersistenceService, session_id: str) -> str:
    found = service.stat(session_id)
    assert found is not None
    return found.revision


# --- §9.1 runPersistenceContract ------------------------------------------------------------


def test_a_session_round_trips_its_header_and_events_through_a_restart(backend: Backend) -> None:
    """§9.1 #1."""
    events = interrupted_turn()[:4]
    stored_header = write_session(backend.service, "s", events)
    service = backend.restart()
    assert service.read("s").header == stored_header
    assert service.read("s").events == events
    handle = service.open("s")
    assert handle.header == stored_header and handle.read() == events
    handle.close()


def test_a_fractional_created_at_is_rejected_without_reserving_the_session_id(backend: Backend) -> None:
    """§9.1 #2."""
    store = backend.store()
    assert refusal(lambda: store.create("s", meta={"createdAt": 1.5})).code == Code.HEADER_CREATED_AT
    session = store.create("s", meta={"createdAt": 2})
    session.flush()
    assert backend.service.read("s").header["createdAt"] == 2


def test_reading_an_interrupted_turn_adds_no_closers_and_leaves_the_revision_unchanged(
    backend: Backend,
) -> None:
    """§9.1 #3 (inspect) and #8 (no closers on an open turn)."""
    write_session(backend.service, "s", interrupted_turn())
    service = backend.restart()
    before = revision(service, "s")
    assert service.read("s").events == interrupted_turn()
    assert revision(service, "s") == before


def test_reopening_an_interrupted_turn_closes_it_and_the_next_append_continues_the_seq(
    backend: Backend,
) -> None:
    """§9.1 #3: the open turn is kept, closed by step/end and turn/end {interrupted}; the
    revision changes; an append continues at the next seq."""
    write_session(backend.service, "s", interrupted_turn())
    service = backend.restart()
    before = revision(service, "s")
    handle = service.open("s")
    stored = handle.read()
    assert stored[:10] == interrupted_turn()
    assert types(stored[10:]) == ["step/end", "turn/end"]
    assert stored[-1]["data"] == {"turn": 2, "reason": {"kind": INTERRUPTED_REASON_KIND}}
    assert seqs(stored) == list(range(12))
    assert revision(service, "s") != before
    handle.append(events_of(*[("session/title", {"title": "t"})] * 13, start=12))
    handle.close()
    assert seqs(backend.restart().read("s").events) == list(range(13))


def test_an_announced_but_unstarted_tool_call_gets_a_retryable_not_started_result(backend: Backend) -> None:
    """§9.1 #4: the synthetic result carries the same callId, before step/end and turn/end."""
    write_session(backend.service, "s", pending_call(started=False))
    handle = backend.restart().open("s")
    closers = handle.read()[4:]
    handle.close()
    assert types(closers) == ["tool/result", "step/end", "turn/end"]
    result = closers[0]
    assert at(result, "data", "error", "code") == TOOL_NOT_STARTED
    assert at(result, "data", "message", "source", "callId") == "c1"
    assert at(result, "data", "message", "content", 0, "content", 0, "text") == TOOL_NOT_STARTED_TEXT
    assert "sourceEventSeqs" not in closers[0]


def test_a_started_tool_call_without_a_result_gets_an_outcome_unknown_result_paired_with_it(
    backend: Backend,
) -> None:
    """§9.1 #5: the result tells the model to assess retry risk and cites the tool/call."""
    write_session(backend.service, "s", pending_call(started=True))
    store = SessionStore(backend.restart(), clock=lambda: 50)
    session = store.resume("s")
    result = session.events[5]
    assert types(session.events[5:]) == ["tool/result", "step/end", "turn/end", END_SEED]
    assert at(result, "data", "error", "code") == TOOL_OUTCOME_UNKNOWN
    text = at(result, "data", "message", "content", 0, "content", 0, "text")
    assert text == TOOL_OUTCOME_UNKNOWN_TEXT and "idempotent" in text and "Do not retry blindly" in text
    assert result["sourceEventSeqs"] == [4]
    messages = session.derive_messages()
    calls = [block["id"] for block in at(messages, 1, "content") if block["type"] == "tool-call"]
    answered = at(messages, 2, "content", 0, "toolCallId")
    assert calls == [answered] == ["c1"]


def test_list_leaves_out_a_session_that_was_never_flushed(backend: Backend) -> None:
    """§9.1 #6."""
    store = backend.store()
    store.create("lazy", meta={"cwd": CWD})
    store.create("kept", meta={"cwd": CWD}).flush()
    assert [stored["id"] for stored in backend.service.list()] == ["kept"]


def test_read_returns_exactly_the_stored_log_and_rejects_a_missing_session(backend: Backend) -> None:
    """§9.1 #8, as this design's whole-log read: the events as stored, nothing written."""
    events = interrupted_turn()
    write_session(backend.service, "s", events)
    service = backend.restart()
    assert service.read("s").events == events
    assert service.read("s").events == events
    assert refusal(lambda: service.read("nobody")).code == Code.SESSION_NOT_FOUND


def test_the_revision_changes_after_a_flush_that_wrote_events(backend: Backend) -> None:
    """§9.1 #9."""
    events = interrupted_turn()
    handle = live_session(backend.service, "s", events[:3])
    handle.flush()
    first = revision(backend.service, "s")
    handle.flush()
    assert revision(backend.service, "s") == first
    handle.append(events[3:])
    handle.flush()
    assert revision(backend.service, "s") != first
    handle.close()


def test_append_rejects_a_batch_that_re_appends_a_stored_seq(backend: Backend) -> None:
    """§9.1 #10."""
    events = interrupted_turn()
    write_session(backend.service, "s", events[:4])
    handle = backend.restart().open("s")
    assert refusal(lambda: handle.append(events[3:5])).code == Code.SEQ_NOT_CONTIGUOUS
    handle.append(events[4:5])
    handle.close()


def test_append_rejects_a_batch_with_a_gap_in_the_middle_and_keeps_none_of_it(backend: Backend) -> None:
    """§9.1 #11."""
    events = interrupted_turn()
    handle = live_session(backend.service, "s", events[:2])
    assert refusal(lambda: handle.append((events[2], events[4]))).code == Code.SEQ_NOT_CONTIGUOUS
    assert handle.read() == events[:2]
    handle.close()
    assert backend.service.read("s").events == events[:2]


def test_append_takes_only_frozen_events_a_session_produced(backend: Backend) -> None:
    """§9.1 #12, this design's form: JSON is checked by the session, so a handle refuses anything
    that did not come from one."""
    handle = backend.service.create(header("s"))
    with pytest.raises(TypeError):
        handle.append([{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}])
    handle.close()


# --- §9.2 runCoordinatorContract ------------------------------------------------------------


def test_a_session_driven_through_the_store_survives_a_restart(backend: Backend) -> None:
    """§9.2 #1."""
    session = backend.store().create("s", meta={"cwd": CWD})
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_data("u1"), "append")
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.flush()
    SessionStore(backend.restart())
    assert backend.service.read("s").events == session.events


def test_an_unflushed_new_session_is_not_found_after_a_restart(backend: Backend) -> None:
    """§9.2 #4."""
    session = backend.store().create("s", meta={"cwd": CWD})
    session.append("turn/start", {"turn": 1})
    store = SessionStore(backend.restart())
    assert refusal(lambda: store.resume("s")).code == Code.SESSION_NOT_FOUND


def test_seed_length_and_delegation_depth_round_trip_through_a_resume(backend: Backend) -> None:
    """§9.2 #5, #6, #38 and notes/dsh-session-core §8.2: the header comes back verbatim."""
    seed = events_of(("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}))
    meta: dict[str, JsonValue] = {
        "cwd": "/w",
        "parentSession": "parent-sess",
        "seedLength": 2,
        "delegationDepth": 1,
    }
    backend.store().create("forked", seed=list(seed), meta=meta).flush()
    resumed = SessionStore(backend.restart()).resume("forked")
    assert {key: resumed.header.get(key) for key in meta} == meta
    assert resumed.header["isSeeded"] is True


def test_buffered_events_cannot_be_mutated_and_persist_unchanged(backend: Backend) -> None:
    """§9.2 #7, #12."""
    session = backend.store().create("s", meta={"cwd": CWD})
    data = user_data("u1", "original")
    event = session.append("user/message", data, "append")
    data["content"][0]["text"] = "changed by the caller"
    with pytest.raises(TypeError):
        at(event, "data", "content", 0)["text"] = "changed through the event"
    session.flush()
    stored = backend.service.read("s").events
    assert at(stored, 0, "data", "content", 0, "text") == "original"


def test_resumed_events_and_header_are_immutable(backend: Backend) -> None:
    """§9.2 #8."""
    write_session(backend.service, "s", interrupted_turn()[:4])
    resumed = SessionStore(backend.restart()).resume("s")
    with pytest.raises(TypeError):
        at(resumed.events, 1, "data")["content"] = []
    with pytest.raises(TypeError):
        at(resumed.header)["cwd"] = "/elsewhere"


def test_a_fork_persists_its_seed_once_with_the_end_seed_last(backend: Backend) -> None:
    """§9.2 #13: a no-op flush writes nothing twice."""
    store = backend.store()
    parent = store.create("parent", meta={"cwd": CWD})
    parent.append("turn/start", {"turn": 1})
    parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    child = store.fork(parent, child_id="child")
    child.flush()
    first = revision(backend.service, "child")
    child.flush()
    assert revision(backend.service, "child") == first
    stored = backend.service.read("child")
    assert types(stored.events) == ["turn/start", "turn/end", END_SEED]
    assert stored.header["parentSession"] == "parent" and stored.header["seedLength"] == 2


def test_resume_does_not_re_append_its_seed_and_continues_the_seq(backend: Backend) -> None:
    """§9.2 #14: a 6-event seed, end-seed at 6, then 7 and 8 appended after the resume."""
    seed = events_of(
        *[
            ("turn/start", {"turn": 1}),
            ("user/message", user_data("u1")),
            ("assistant/message", assistant_data("a1")),
        ],
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("session/title", {"title": "x"}),
        ("todo/write", {"todos": []}),
    )
    backend.store().create("s", seed=list(seed), meta={"cwd": CWD}).flush()
    resumed = SessionStore(backend.restart()).resume("s")
    assert seqs(resumed.events) == list(range(7)) and resumed.events[6]["type"] == END_SEED
    assert resumed.first_live_seq == 7
    resumed.append("turn/start", {"turn": 2})
    resumed.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    resumed.flush()
    stored = backend.restart().read("s").events
    assert seqs(stored) == list(range(9)) and types(stored).count(END_SEED) == 1


def test_a_resume_of_a_log_not_ending_with_the_end_seed_appends_one_after_the_closers(
    backend: Backend,
) -> None:
    """notes/dsh-session-core §8.2: stored log, closers, then the end-seed."""
    write_session(backend.service, "s", interrupted_turn())
    resumed = SessionStore(backend.restart(), clock=lambda: 77).resume("s")
    assert types(resumed.events[10:]) == ["step/end", "turn/end", END_SEED]
    assert resumed.first_live_seq == 12
    assert resumed.events[12]["time"] == 77


def test_a_new_session_colliding_with_a_stored_id_is_rejected(backend: Backend) -> None:
    """§9.2 #20, #34: a duplicate id is refused whether it is live or only stored."""
    store = backend.store()
    store.create("s", meta={"cwd": CWD}).flush()
    assert refusal(lambda: store.create("s", meta={"cwd": CWD})).code == Code.SESSION_ALREADY_EXISTS
    assert (
        refusal(lambda: SessionStore(backend.restart()).create("s", meta={"cwd": CWD})).code
        == Code.SESSION_ALREADY_EXISTS
    )


def test_an_abandoned_session_that_never_flushed_releases_its_id(backend: Backend) -> None:
    """§9.2 #21."""
    backend.store().create("s", meta={"cwd": CWD}).append("turn/start", {"turn": 1})
    session = SessionStore(backend.restart()).create("s", meta={"cwd": CWD})
    session.flush()
    assert backend.service.read("s").events == ()


def test_an_empty_append_stays_lazy(backend: Backend) -> None:
    """§9.2 #32."""
    handle = backend.service.create(header("s"))
    handle.append(())
    assert backend.service.stat("s") is None
    assert backend.restart().stat("s") is None


def test_open_and_read_reject_a_missing_session(backend: Backend) -> None:
    """§9.2 #33."""
    for attempt in (backend.service.open, backend.service.read):
        with pytest.raises(SpecError) as missing:
            attempt("nobody")
        assert missing.value.code == Code.SESSION_NOT_FOUND


def test_a_second_writer_is_refused_while_a_reader_still_reads(backend: Backend) -> None:
    """SPEC-DECISIONS D2: one writer per session; readers may read."""
    write_session(backend.service, "s", interrupted_turn()[:4])
    writer = backend.service.open("s")
    assert refusal(lambda: backend.service.open("s")).code == Code.LOCKED
    assert backend.service.read("s").events == interrupted_turn()[:4]
    writer.close()
    backend.service.open("s").close()


def test_close_flushes_and_a_second_close_is_harmless(backend: Backend) -> None:
    """D2: ``close`` flushes."""
    handle = live_session(backend.service, "s", interrupted_turn()[:2])
    handle.close()
    handle.close()
    assert backend.restart().read("s").events == interrupted_turn()[:2]


def test_append_after_close_is_rejected(backend: Backend) -> None:
    handle = backend.service.create(header("s"))
    handle.close()
    assert refusal(lambda: handle.append(interrupted_turn()[:1])).code == Code.SESSION_CLOSED


def test_flush_is_the_durability_barrier(backend: Backend) -> None:
    """D2: what was appended before a flush survives a restart; what came after it does not."""
    events = interrupted_turn()
    handle = live_session(backend.service, "s", events[:3])
    handle.flush()
    handle.append(events[3:])
    assert backend.restart().read("s").events == events[:3]


def test_list_returns_the_header_of_every_stored_session(backend: Backend) -> None:
    first = write_session(backend.service, "a", interrupted_turn()[:1])
    second = write_session(backend.service, "b", interrupted_turn()[:1], cwd="/other")
    assert sorted(backend.restart().list(), key=lambda stored: str(stored["id"])) == [first, second]


def test_a_close_whose_flush_fails_keeps_the_session_live_so_nothing_buffered_is_dropped() -> None:
    import errno

    from reference.persistence.filestore import FileStore
    from reference.store import SessionStore
    from spec.codes import Code, SpecError
    from tests.powerloss_harness import ProbedFileSystem

    disk = ProbedFileSystem()
    store = SessionStore(FileStore("/closing", fs=disk), clock=lambda: 1)
    session = store.create("c")
    session.append("turn/start", {"turn": 1})
    session.flush()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    disk.fail_next("fsync", errno.EIO)
    try:
        store.close("c")
    except SpecError as error:
        assert error.code == Code.STORAGE_IO
    else:
        raise AssertionError("the failed flush must surface")
    assert store.get("c") is session
    store.close("c")
    assert [event["type"] for event in FileStore("/closing", fs=disk).read("c").events] == [
        "turn/start",
        "turn/end",
    ]
