"""The session store: create, get, fork and resume sessions, optionally backed by persistence.

The checks and their order are the spec's (``spec.lineage.store``, ``spec.lineage.fork``); the store adds the
registry of live sessions and the wiring to a :class:`PersistenceService`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from reference.persistence.api import LogHandle, PersistenceService
from reference.persistence.fastjson import (
    StoredEvents,
    collector_paused,
    release_free_memory,
    release_in_order,
)
from reference.session import Clock, Session, wall_clock_ms
from spec.codes import Code, reject
from spec.lineage.fork import derive_child_meta, plan_fork_seed, validate_fork_request
from spec.lineage.store import mint_session_id, plan_create, validate_resume_request
from spec.log.events import Event
from spec.log.json import JsonValue
from spec.log.session import ABSENT, create_session_state

log = logging.getLogger(__name__)
T = TypeVar("T")


class SessionListener(Protocol):
    """What a subscriber of a store is told: each event a live session commits, after it is in the
    log, and that a session is about to close (before its final flush)."""

    def committed(self, session: Session, event: Event) -> None: ...

    def closing(self, session: Session) -> None: ...


def listen(listeners: list[T], listener: T) -> Callable[[], None]:
    """``listener`` joins ``listeners``; the disposer returned takes it out again (twice: no-op)."""
    listeners.append(listener)

    def dispose() -> None:
        if listener in listeners:
            listeners.remove(listener)

    return dispose


class SessionStore:
    """Live sessions by id. With ``persistence``, every session writes through a log handle.
    ``subscribe`` registers a listener once for the events every live session commits (DSH's
    ``session/event``)."""

    def __init__(self, persistence: PersistenceService | None = None, clock: Clock = wall_clock_ms) -> None:
        self._live: dict[str, Session] = {}
        self._handles: dict[str, LogHandle] = {}
        self._persistence = persistence
        self._clock = clock
        self._minted = 0
        self._listeners: list[SessionListener] = []

    # --- subscription ----------------------------------------------------------------------

    def subscribe(self, listener: SessionListener) -> Callable[[], None]:
        """Tell ``listener`` of every event any live session commits from now on, and of every
        close; returns the disposer. A listener that raises is logged and never fails the append
        that told it (the event is committed already)."""
        return listen(self._listeners, listener)

    def _committed(self, session: Session, event: Event) -> None:
        if not self._listeners:  # nobody listens (the common case): no copy of the list per append
            return
        for listener in list(self._listeners):
            try:
                listener.committed(session, event)
            except Exception as error:  # the append has committed: a listener cannot undo it
                log.warning(
                    "session listener %r failed on %s seq %s: %s",
                    listener,
                    session.id,
                    event.get("seq"),
                    error,
                )

    def _closing(self, session: Session) -> None:
        for listener in list(self._listeners):
            try:
                listener.closing(session)
            except Exception as error:
                log.warning("session listener %r failed closing %s: %s", listener, session.id, error)

    # --- registry ------------------------------------------------------------------------

    def get(self, session_id: str) -> Session | None:
        return self._live.get(session_id)

    def list(self) -> list[Session]:
        return list(self._live.values())

    def close(self, session_id: str) -> None:
        """Flush and release a live session (its writer lock too). Unknown ids are ignored. A flush
        that fails raises and leaves the session live, so nothing buffered is dropped."""
        pending = self._handles.get(session_id)
        if pending is not None:
            pending.flush()  # first: a fault met here is the close's, before any listener writes
        live = self._live.get(session_id)
        if live is not None:
            self._closing(live)
        session = self._live.pop(session_id, None)
        handle = self._handles.pop(session_id, None)
        if session is not None:
            session.detach_sink()
        if handle is not None:
            handle.close()

    def close_all(self) -> None:
        for session_id in list(self._live):
            self.close(session_id)

    # --- lifecycle -----------------------------------------------------------------------

    def create(
        self,
        session_id: str | None = None,
        seed: Sequence[object] | None = None,
        meta: JsonValue = None,
        *,
        shared: bool = False,
    ) -> Session:
        """A new session: ``meta`` gives createdAt and lineage fields; a seed (even empty) gets a
        ``session/end-seed`` marker unless it already ends with one. ``shared`` is for
        :meth:`fork` only: the seed is a prefix of a live session's log, whose frozen events the
        child shares instead of copying (:func:`spec.log.seed.take_seed_event`)."""
        return self._create(session_id, seed, meta, shared, ())

    def _create(
        self,
        session_id: str | None,
        seed: Sequence[object] | None,
        meta: JsonValue,
        shared: bool,
        kept_lines: Sequence[bytes],
    ) -> Session:
        """:meth:`create`; with ``kept_lines``, the stored lines of the seed's first events (a fork
        of a session that keeps its log as lines), which the child and its handle keep in their
        place once judged and handed to storage, as the parent does (issue 24: fork memory)."""
        stored = _StoredIds(self._persistence)
        if session_id is None:
            session_id, self._minted = mint_session_id(self._minted, self._live.keys(), stored)
        state = plan_create(session_id, self._live.keys(), stored, seed, meta, self._clock(), shared=shared)
        handle = None
        if self._persistence is not None:
            handle = self._persistence.create(state.header)
            handle.append(state.events)
            if kept_lines:
                handle.keep_lines(kept_lines)
            self._handles[session_id] = handle
        session = Session(
            state, sink=handle, clock=self._clock, on_commit=self._committed, stored_lines=kept_lines
        )
        self._live[session_id] = session
        return session

    def fork(self, source: str | Session, boundary: object = ABSENT, child_id: str | None = None) -> Session:
        """A child grown from a contiguous prefix of ``source`` that ends outside any open turn,
        with ``parentSession``, ``seedLength`` and ``cwd`` in its header (DSH's checks, in order)."""
        source_id = source if isinstance(source, str) else source.id
        validate_fork_request(self._live.keys(), source_id, child_id, _StoredIds(self._persistence))
        live = self._live[source_id]
        if not isinstance(source, str) and live is not source:
            raise reject(Code.SESSION_NOT_LIVE, f'session "{source_id}" is not the live store instance')
        events = live.events
        lines: Sequence[bytes] = ()
        if isinstance(events, StoredEvents):  # a log kept as its lines: decoded once, in bulk
            lines = events.lines
            with collector_paused():
                events = tuple(events)
        seed = plan_fork_seed(source_id, events, boundary)
        del events
        meta = derive_child_meta(live.header, source_id, len(seed))
        # The child keeps the seed's stored lines too, not the events decoded from them.
        return self._create(child_id, seed, meta, True, lines[: len(seed)])

    def resume(self, session_id: str) -> Session:
        """Take over a stored log and keep appending after it: the stored events (a torn tail
        dropped, an open turn closed) become the seed, ``seedLength`` and ``delegationDepth`` stay as
        stored, and ``session/end-seed`` is appended only if the log does not already end with one."""
        validate_resume_request(
            session_id, self._live.keys(), _StoredIds(self._persistence).holds(session_id)
        )
        assert self._persistence is not None  # a store without persistence stores nothing
        with collector_paused(keep=True):  # a log being restored holds no reference cycles
            handle = self._persistence.open(session_id)
            try:
                # A log read in bulk gives the events its reader judged; plain ones if it keeps
                # their lines, which are then judged unfrozen and dropped (spec: take_seed_event).
                # The messages its read path checked are not checked twice (spec: messages_checked).
                stored, mode, checked = handle.judged()
                state = create_session_state(session_id, stored, handle.header, self._clock(), mode, checked)
                handle.append(state.events[len(stored) :])
            except BaseException:
                handle.close()
                raise
            del stored
            # A log read in bulk is kept as its stored lines, in the session and the handle alike.
            lines = handle.settle()
            session = Session(
                state, sink=handle, clock=self._clock, on_commit=self._committed, stored_lines=lines
            )
            judged = list(state.events)  # the judged events, now held by this list alone...
            del state
            release_in_order(judged)  # ...let go in the order they were made
        release_free_memory()  # what reading the log freed, back to the system
        self._live[session_id] = session
        self._handles[session_id] = handle
        return session


class _StoredIds:
    """The ids a store's persistence holds, as a container (none without persistence)."""

    def __init__(self, persistence: PersistenceService | None) -> None:
        self._persistence = persistence

    def holds(self, session_id: str) -> bool:
        return self._persistence is not None and self._persistence.stat(session_id) is not None

    def __contains__(self, session_id: object) -> bool:
        return isinstance(session_id, str) and self.holds(session_id)
