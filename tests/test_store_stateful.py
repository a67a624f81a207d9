"""A stateful test of the store on a disk that loses power: sessions are created, appended to,
flushed, forked, crashed with a chosen cut, reopened and resumed at random, and every reopened
log is compared with the spec's answer: the events the sessions appended, cut back to what
reached the disk (at least what a completed flush made durable), then spec.lineage.repair.derive_closers
and the end-seed rule, with a surface equal to spec.log.surface.fold_surface of that log
(SPEC-DECISIONS D2, D3).
"""

from __future__ import annotations

import itertools
from typing import Any

from crash_reopen import (
    END_SEED_TIME,
    ROOT,
    _outcome_tags,
    assistant_msg,
    check_reopen,
    tool_result_msg,
)
from event_builders import user_data
from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from reference.persistence.filestore import FileStore
from reference.persistence.powerloss import CrashPlan, PowerLossFileSystem, SimulatedCrash
from reference.session import Session
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.lineage.fork import plan_fork_seed
from spec.lineage.repair import derive_closers, fold_repair_scan
from spec.log.events import END_SEED, Event
from spec.log.surface import fold_surface
from spec.log.writers import COMPACTION_ENGINE

SESSION_IDS = ("alpha", "beta", "gamma", "delta")
EVENT_KINDS = (
    "turn/start",
    "step/start",
    "user/message",
    "assistant/message",
    "assistant/call",
    "assistant/chunk",
    "tool/call",
    "tool/result",
    "step/end",
    "turn/end",
    "compaction/start",
    "compaction/end",
    "session/title",
)


ROUND = (
    "turn/start",
    "user/message",
    "step/start",
    "assistant/chunk",
    "assistant/call",
    "tool/call",
    "tool/result",
    "compaction/start",
    "compaction/end",
    "step/end",
    "step/start",
    "assistant/message",
    "step/end",
    "turn/end",
)


class StoreOnFlakyPower(RuleBasedStateMachine):
    """The model, per session id: every event its sessions appended (the log as the sessions
    produced it) and how many of them a completed flush made durable."""

    def __init__(self) -> None:
        super().__init__()
        self.fs = PowerLossFileSystem()
        self.compressed = True
        self.clock = itertools.count(1_000)
        self.appended: dict[str, tuple[Event, ...]] = {}
        self.flushed: dict[str, int] = {}
        self.headers: dict[str, Any] = {}
        self.store = self._new_store()

    def _new_store(self) -> SessionStore:
        return SessionStore(
            FileStore(ROOT, fs=self.fs, compressed=self.compressed), clock=lambda: next(self.clock)
        )

    def _live(self, session_id: str) -> Session:
        session = self.store.get(session_id)
        assert session is not None
        return session

    def _track(self, session: Session) -> None:
        self.appended[session.id] = session.events
        self.headers[session.id] = session.header

    @initialize(compressed=st.booleans())
    def start_with_one_session(self, compressed: bool) -> None:
        self.compressed = compressed
        self.store = self._new_store()
        self.create("alpha", "/work/a")

    # --- what a program does with sessions ---

    @rule(session_id=st.sampled_from(SESSION_IDS), cwd=st.sampled_from(["/work/a", "/work/b", None]))
    def create(self, session_id: str, cwd: str | None) -> None:
        if session_id in self.appended:
            return
        session = self.store.create(session_id, meta={"cwd": cwd} if cwd else None)
        self.flushed[session_id] = 0
        self._track(session)

    @precondition(lambda self: bool(self.store.list()))
    @rule(data=st.data(), kind=st.sampled_from(EVENT_KINDS), text=st.text(max_size=12))
    def append(self, data: st.DataObject, kind: str, text: str) -> None:
        session = data.draw(st.sampled_from(sorted(self.store.list(), key=lambda s: s.id)), label="session")
        self.append_one(session, kind, text)

    def append_one(self, session: Session, kind: str, text: str) -> None:
        """One event of ``kind``, its numbers and call ids taken from the session's log so far."""
        events = session.events
        turn = sum(1 for event in events if event["type"] == "turn/start")
        step = sum(1 for event in events if event["type"] == "step/start")
        pending = [str(call.call_id) for call in fold_repair_scan(events).pending_calls]
        if kind == "user/message":
            session.append(kind, user_data(f"u{len(events)}", text), "append")
        elif kind in ("assistant/message", "assistant/call"):
            calls = (f"c{len(events)}",) if kind == "assistant/call" else ()
            session.append(
                "assistant/message", assistant_msg(f"a{len(events)}", turn, step, text, calls), "append"
            )
        elif kind == "tool/result" and pending:
            session.append(kind, tool_result_msg(pending[0], turn, step, text), "append")
        elif kind == "tool/call" and pending:
            session.append(kind, {"turn": turn, "step": step, "callId": pending[-1], "name": "read"})
        elif kind == "assistant/chunk":
            session.append(
                kind, {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": text}}
            )
        elif kind in ("compaction/start", "compaction/end"):
            session.append(kind, {"compactionId": f"k{turn}", "turn": turn}, writer=COMPACTION_ENGINE)
        elif kind == "turn/end":
            session.append(kind, {"turn": turn, "reason": {"kind": "completed"}})
        elif kind in ("turn/start", "step/start", "step/end"):
            session.append(
                kind, {"turn": turn + (kind == "turn/start"), "step": step + (kind == "step/start")}
            )
        else:
            session.append("session/title", {"title": text})
        self._track(session)

    @precondition(lambda self: bool(self.store.list()))
    @rule(data=st.data(), length=st.integers(1, len(ROUND)), answered=st.booleans())
    def play_a_round(self, data: st.DataObject, length: int, answered: bool) -> None:
        """The first ``length`` events of a typical turn: a prompt, a step that calls a tool (its
        result only if ``answered``), a compaction, a closing step and the turn's end."""
        session = data.draw(st.sampled_from(sorted(self.store.list(), key=lambda s: s.id)), label="session")
        for kind in ROUND[:length]:
            if kind == "tool/result" and not answered:
                continue
            self.append_one(session, kind, "x")

    @precondition(lambda self: bool(self.store.list()))
    @rule(data=st.data())
    def flush(self, data: st.DataObject) -> None:
        session = data.draw(st.sampled_from(sorted(self.store.list(), key=lambda s: s.id)), label="session")
        session.flush()
        self.flushed[session.id] = len(session.events)

    @precondition(lambda self: bool(self.store.list()))
    @rule(data=st.data(), child_id=st.sampled_from(SESSION_IDS))
    def fork(self, data: st.DataObject, child_id: str) -> None:
        if child_id in self.appended:
            return
        source = data.draw(st.sampled_from(sorted(self.store.list(), key=lambda s: s.id)), label="source")
        boundaries = [seq for seq in range(len(source.events)) if _can_fork_at(source.id, source.events, seq)]
        if not boundaries:
            return
        boundary = data.draw(st.sampled_from(boundaries), label="boundary")
        child = self.store.fork(source, boundary, child_id)
        assert (
            child.events[: boundary + 1] == source.events[: boundary + 1]
            and child.events[-1]["type"] == END_SEED
        )
        assert len(child.events) == boundary + 1 + (source.events[boundary]["type"] != END_SEED)
        self.flushed[child_id] = 0
        self._track(child)

    # --- power cuts and restarts ---

    @rule(data=st.data())
    def crash_and_reopen(self, data: st.DataObject) -> None:
        """Cut the power (each unsynced file keeps a drawn prefix of its pending bytes, each
        directory a drawn fate), then reopen every session and check it against the model."""
        self._cut_power(data)

    def _unflushed(self) -> list[Session]:
        return sorted(
            (s for s in self.store.list() if len(s.events) > self.flushed[s.id]), key=lambda s: s.id
        )

    @precondition(lambda self: bool(self._unflushed()))
    @rule(data=st.data(), at_op=st.sampled_from([2, 1, 3, 4, 5, 6]) | st.just(2))
    def crash_during_a_flush(self, data: st.DataObject, at_op: int) -> None:
        """The power goes out before the flush's ``at_op``-th filesystem call (or just after
        the flush, if it makes fewer calls), then everything is reopened."""
        session = data.draw(st.sampled_from(self._unflushed()), label="session")
        self.fs.crash_at_op(at_op)
        try:
            session.flush()
        except SimulatedCrash:
            event("crashed inside a flush")
        else:
            self.flushed[session.id] = len(session.events)
        self._cut_power(data)

    def _cut_power(self, data: st.DataObject) -> None:
        cuts: dict[str, int | None] = {}
        for file in self.fs.unsynced_files():
            choices = file.cuts()
            inner = st.integers(1, len(choices) - 2) if len(choices) > 2 else st.nothing()
            index = data.draw(inner | st.integers(0, len(choices) - 1), label=f"cut of {file.path}")
            cuts[file.path] = choices[index]
        dirs = {path: data.draw(st.booleans(), label=path) for path in self.fs.unsynced_dirs()}
        plan = CrashPlan(cuts=cuts, dirs=dirs)
        note(f"crash plan: {plan}")
        self.fs = self.fs.crash(plan)
        self.store = self._new_store()
        self._reopen_all()

    @rule()
    def restart_cleanly(self) -> None:
        """Close every session (close flushes), start a new process, resume them all."""
        self.store.close_all()
        for session_id in self.appended:
            self.flushed[session_id] = len(self.appended[session_id])
        self.store = self._new_store()
        self._reopen_all()

    def _reopen_all(self) -> None:
        for session_id in list(self.appended):
            outcome = check_reopen(
                self.fs,
                self.compressed,
                session_id,
                self.appended[session_id],
                self.flushed[session_id],
                self.headers[session_id],
            )
            event("reopened: " + ", ".join(_outcome_tags(outcome)))
            if not outcome.found:
                del self.appended[session_id], self.flushed[session_id], self.headers[session_id]
                continue
            resumed = self.store.resume(session_id)  # check_reopen flushed the end-seed: the log is balanced
            expected_prefix = self.appended[session_id][: len(self.appended[session_id]) - outcome.lost]
            expected = expected_prefix + derive_closers(expected_prefix)
            end_seed: Event = {"type": END_SEED, "seq": len(expected), "time": END_SEED_TIME, "data": {}}
            expected += () if expected and expected[-1]["type"] == END_SEED else (end_seed,)
            assert resumed.events == expected
            assert resumed.surface.nodes == fold_surface(expected).nodes
            assert resumed.surface.replace_generation == fold_surface(expected).replace_generation
            self.flushed[session_id] = len(resumed.events)
            self._track(resumed)

    @invariant()
    def every_live_session_is_a_model_session(self) -> None:
        for session in self.store.list():
            assert self.appended[session.id] == session.events

    @invariant()
    def a_second_writer_is_always_refused(self) -> None:
        for session in self.store.list()[:1]:
            try:
                FileStore(ROOT, fs=self.fs, compressed=self.compressed).open(session.id)
            except SpecError as error:
                assert error.code in (Code.LOCKED, Code.SESSION_NOT_FOUND)
            else:
                raise AssertionError(f"a second writer opened live session {session.id}")


def _can_fork_at(session_id: str, events: tuple[Event, ...], boundary: int) -> bool:
    """The spec's fork rule allows this boundary: outside any open turn and any open compaction."""
    try:
        plan_fork_seed(session_id, events, boundary)
    except SpecError:
        return False
    return True


TestStoreOnFlakyPower = StoreOnFlakyPower.TestCase
TestStoreOnFlakyPower.settings = settings(settings.default, stateful_step_count=40)
