"""Session projections, made to run: a registry of fold units, ``state_of`` and ``snapshot``
over live sessions, and a persisted cache beside each session log (SPEC-DECISIONS D7; seed 002
"会话账本"; notes/dsh-compaction-projection §11).

The fold rules are ``spec.projections.units``. Given a store, the registry subscribes once and
pushes each committed event through every unit; ``state_of`` also folds a unit over the events its
cell has not seen yet, so a unit registered after the events still reads the right value, and the
fold never runs twice over one event. With a :class:`ProjectionCache`, a unit's
first read of a session starts from its cache row instead of ``init`` when the row is usable.
The cache is possibly stale but never wrong: the log is flushed before any row is written.

The seed's example unit, :data:`SESSION_DIGEST` (``spec.projections.digest``, named here too),
counts completed compactions and prunes — what happened, not what the surface still shows.
"""

from __future__ import annotations

import logging
import secrets
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from reference.persistence.api import PersistenceService
from reference.persistence.filestore import FileStore
from reference.persistence.fs import FileSystem
from reference.session import Session
from reference.store import SessionStore, listen
from spec.codes import Code, reject
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.events import TURN_END, Event
from spec.log.json import FrozenDict, JsonValue, snapshot_json
from spec.projections.digest import DIGEST_KEY as DIGEST_KEY
from spec.projections.digest import DIGEST_ZERO as DIGEST_ZERO
from spec.projections.digest import SESSION_DIGEST as SESSION_DIGEST
from spec.projections.digest import apply_session_digest as apply_session_digest
from spec.projections.digest import is_digest_state as is_digest_state
from spec.projections.units import (
    ProjectionCell,
    ProjectionUnit,
    apply_projection_event,
    decode_cache_row,
    decode_cache_rows,
    derive_initial_cell,
    derive_projection_state,
    derive_wire_keys,
    encode_cache_record,
    encode_cache_row,
    fold_projection,
    is_cache_row_durable,
    is_cache_write_due,
    is_same_state,
    plan_registration,
)

log = logging.getLogger(__name__)

CACHE_FILE_NAME: Final = "projections.json"  # beside session.v4.jsonl[.zstd] in the session directory


# --- the cache medium and the cache ---------------------------------------------------------------


class CacheMedium(Protocol):
    """Where a session's cache record lives: whole-record reads and atomic whole-record writes."""

    def read(self, session_id: str) -> bytes | None: ...

    def write(self, session_id: str, data: bytes) -> None: ...


class MemoryCacheMedium:
    def __init__(self) -> None:
        self.records: dict[str, bytes] = {}

    def read(self, session_id: str) -> bytes | None:
        return self.records.get(session_id)

    def write(self, session_id: str, data: bytes) -> None:
        self.records[session_id] = data


class FileCacheMedium:
    """``projections.json`` in the session's directory of a :class:`FileStore`, replaced atomically
    (temp file, fsync, rename, fsync of the directory) through the store's filesystem seam."""

    def __init__(self, store: FileStore, token: Callable[[], str] = lambda: secrets.token_hex(6)) -> None:
        self.store = store
        self._token = token

    @property
    def fs(self) -> FileSystem:
        return self.store.fs

    def path(self, session_id: str) -> str | None:
        log_path = self.store.locate(session_id)
        return None if log_path is None else f"{log_path.rsplit('/', 1)[0]}/{CACHE_FILE_NAME}"

    def read(self, session_id: str) -> bytes | None:
        path = self.path(session_id)
        if path is None or not self.fs.exists(path):
            return None
        return self.fs.read_bytes(path)

    def write(self, session_id: str, data: bytes) -> None:
        path = self.path(session_id)
        if path is None:
            raise reject(
                Code.SESSION_NOT_FOUND, f'session "{session_id}" has no stored log to write a cache beside'
            )
        temp = f"{path}.{self._token()}.tmp"
        self.fs.write_new(temp, data)
        try:
            self.fs.fsync(temp)
            self.fs.rename(temp, path)
        except BaseException:
            try:
                self.fs.remove(temp)
            except OSError:
                pass
            raise
        self.fs.fsync_dir(path.rsplit("/", 1)[0])


class ProjectionCache:
    """The persisted projection cache of every session on one medium."""

    def __init__(self, medium: CacheMedium, write_every_events: int = 200) -> None:
        self.medium = medium
        self.write_every_events = write_every_events
        self._written_upto: weakref.WeakKeyDictionary[Session, int] = weakref.WeakKeyDictionary()
        self._fresh: weakref.WeakKeyDictionary[Session, list[object]] = weakref.WeakKeyDictionary()

    def rows(self, header: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
        """The stored rows of the session ``header`` names; none when the record is missing,
        unreadable, of another format, or of another log lifecycle."""
        session_id = header.get("id")
        data = self.medium.read(session_id) if isinstance(session_id, str) else None
        if data is None:
            return {}
        try:
            record = decode_json_text(data)
        except (ValueError, UnicodeDecodeError):
            return {}
        return decode_cache_rows(record, header)

    def trusted_last_seq(self, session: Session) -> int:
        """The last seq whose row this cache may hand to a live session (``decode_cache_row``'s
        ``last_seq``): the last event the store held when ``session`` was opened (its restored
        prefix ends at ``first_live_seq``), or the last this cache wrote rows of ``session`` at,
        whichever is later. Past it a row may have folded events of another log at the same seqs:
        the resume's own ``session/end-seed`` takes the seq after the stored log, so a row written
        for a longer log that since shrank would be read wrong. A row refused is only a refold."""
        return max(session.first_live_seq, self._written_upto.get(session, 0)) - 1

    def write(self, session: Session, projections: Projections) -> None:
        """Write the session's rows: take the cut, flush the log, check that the log now holds
        every event the rows folded, then replace the record. A failed flush writes nothing."""
        rows = projections.checkpoint(session)
        cut = session.seq
        session.flush()
        for row in rows.values():
            assert isinstance(row, dict)
            cursor = row["seq"]
            if not (isinstance(cursor, int) and is_cache_row_durable(cursor, cut)):
                raise reject(
                    Code.PROJECTION_STATE_INVALID,
                    f"projection cache row at seq {cursor} is past the durable log ({cut} events)",
                )
        record = encode_cache_record(session.header, rows)
        self.medium.write(session.id, encode_json_text(record).encode("utf-8"))
        self._written_upto[session] = cut
        self._fresh.pop(session, None)

    def observe(self, session: Session, event: Event, projections: Projections) -> None:
        """A pushed event: write the session's rows when it is a ``turn/end`` or when
        ``write_every_events`` events have come since the last write (``is_cache_write_due``)."""
        fresh = self._fresh.setdefault(session, [])
        fresh.append(event.get("type"))
        if is_cache_write_due(fresh, self.write_every_events):
            self.write_soft(session, projections, "turn/end" if fresh[-1] == TURN_END else "count threshold")

    def write_soft(self, session: Session, projections: Projections, trigger: str) -> bool:
        """:meth:`write`, but a failure only leaves the cache stale (logged): the next write heals
        it. Answers whether it wrote."""
        try:
            self.write(session, projections)
        except Exception as error:
            log.warning(
                'session projection cache: %s write for "%s" failed (cache stays stale): %s',
                trigger,
                session.id,
                error,
            )
            return False
        return True

    def write_if_due(self, session: Session, projections: Projections) -> bool:
        """Write when a ``turn/end`` was appended since the last write, or ``write_every_events``
        events were; answer whether it wrote."""
        since = self._written_upto.get(session, session.first_live_seq)
        fresh = [event.get("type") for event in session.events[since:]]
        if not fresh or not is_cache_write_due(fresh, self.write_every_events):
            return False
        self.write(session, projections)
        return True


# --- the registry ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProjectionSnapshot:
    """What clients receive: the state of every wire unit as of ``as_of_seq`` (-1: empty log)."""

    as_of_seq: int
    values: FrozenDict


class _Registration:
    def __init__(self, unit: ProjectionUnit) -> None:
        self.unit = unit
        self.refs = 0
        self.cells: weakref.WeakKeyDictionary[Session, ProjectionCell] = weakref.WeakKeyDictionary()


ChangeListener = Callable[[Session, str, JsonValue, int], None]
"""``(session, key, state, seq)``: a unit's state changed at the event of ``seq``."""


class Projections:
    """The registry of fold units. ``register`` returns a disposer; registrants of one key with
    the same ``stateVersion`` share it, a different ``stateVersion`` is refused.

    Given a ``store``, the registry subscribes to it once and every event a live session commits
    is pushed through every unit as it commits (seed 002: "框架订一次，把每个事件折过每个单元"); a
    unit whose state changed — a new state, told by identity — is reported to ``on_changed``
    listeners, which is what the identity rule buys: an event a unit does not care about costs its
    listeners nothing. Without a store, cells fold on read. Either way ``state_of`` catches a cell
    up first, so a unit registered late reads the right value. With a ``cache`` and a store, rows
    are written at a ``turn/end``, every ``write_every_events`` events, and when a session closes."""

    def __init__(self, cache: ProjectionCache | None = None, store: SessionStore | None = None) -> None:
        self.cache = cache
        self._registrations: dict[str, _Registration] = {}
        self._listeners: list[ChangeListener] = []
        self._unsubscribe = store.subscribe(self) if store is not None else None

    # --- the subscription (SessionListener) -----------------------------------------------------

    def committed(self, session: Session, event: Event) -> None:
        """Push one committed event through every unit, in registration order. A unit that fails
        (its apply raises, or breaks the identity rule) loses its cell for that session, so that the
        next read folds again from the log and raises to the reader, never to the appender."""
        seq = event.get("seq")
        if not isinstance(seq, int):
            return
        for key, registration in list(self._registrations.items()):
            try:
                before = self._cell_before(registration, session, seq)
                after = apply_projection_event(registration.unit, before, event)
            except Exception as error:
                registration.cells.pop(session, None)
                log.warning("session projection %s failed on %s seq %s: %s", key, session.id, seq, error)
                continue
            registration.cells[session] = after
            if self._listeners and not is_same_state(before.state, after.state):
                value = derive_projection_state(registration.unit, after.state)
                for listener in list(self._listeners):
                    listener(session, key, value, seq)
        if self.cache is not None:
            self.cache.observe(session, event, self)

    def closing(self, session: Session) -> None:
        """A session is closing: its rows are written one last time (DSH's detach write)."""
        if self.cache is not None:
            self.cache.write_soft(session, self, "close")

    def on_changed(self, listener: ChangeListener) -> Callable[[], None]:
        """Tell ``listener`` of every pushed event that changed a unit's state; returns the
        disposer."""
        return listen(self._listeners, listener)

    def close(self) -> None:
        """Stop listening to the store (the registry's own disposal)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def _cell_before(self, registration: _Registration, session: Session, seq: int) -> ProjectionCell:
        """The cell folded up to just before the event at ``seq``: built from the cache or ``init``
        and the log's prefix the first time a session's event reaches the unit."""
        cell = registration.cells.get(session)
        if cell is None:
            cell = self._live_first_cell(registration.unit, session)
        if cell.cursor + 1 < seq:
            cell = fold_projection(registration.unit, cell, session.events[cell.cursor + 1 : seq])
        return cell

    def register(self, unit: ProjectionUnit) -> Callable[[], None]:
        current = self._registrations.get(unit.key)
        served = plan_registration(current.unit if current is not None else None, unit)
        registration = current if current is not None else _Registration(served)
        self._registrations[unit.key] = registration
        registration.refs += 1
        disposed = False

        def dispose() -> None:
            nonlocal disposed
            if disposed:
                return
            disposed = True
            registration.refs -= 1
            if registration.refs == 0 and self._registrations.get(unit.key) is registration:
                del self._registrations[unit.key]

        return dispose

    def keys(self) -> tuple[str, ...]:
        return tuple(self._registrations)

    def state_of(self, session: Session, key: str) -> JsonValue:
        """The unit's state for ``session``, folded up to its last event; ``None`` when no unit
        has that key (the capability is absent)."""
        registration = self._registrations.get(key)
        if registration is None:
            return None
        return derive_projection_state(registration.unit, self._catch_up(registration, session).state)

    def snapshot(self, session: Session) -> ProjectionSnapshot:
        """The state of every wire unit (host-only units are left out), all at one log position."""
        wire = derive_wire_keys([registration.unit for registration in self._registrations.values()])
        values = {key: self.state_of(session, key) for key in wire}
        frozen = snapshot_json(values)
        assert isinstance(frozen, FrozenDict)
        return ProjectionSnapshot(as_of_seq=session.seq - 1, values=frozen)

    def checkpoint(self, session: Session) -> dict[str, JsonValue]:
        """Every unit's cell as a cache row ``{ver, seq, val}``, caught up to the last event."""
        return {
            key: encode_cache_row(registration.unit, self._catch_up(registration, session))
            for key, registration in self._registrations.items()
        }

    def state_of_stored(self, persistence: PersistenceService, session_id: str, key: str) -> JsonValue:
        """A unit's state for a stored session that is not live: its cache row, if usable, then
        the events past the row's cursor; nothing is written back."""
        registration = self._registrations.get(key)
        if registration is None:
            return None
        stored = persistence.read(session_id)
        cell = self._first_cell(registration.unit, stored.header, len(stored.events) - 1)
        cell = fold_projection(registration.unit, cell, stored.events[cell.cursor + 1 :])
        return derive_projection_state(registration.unit, cell.state)

    def _catch_up(self, registration: _Registration, session: Session) -> ProjectionCell:
        cell = registration.cells.get(session)
        if cell is None:
            cell = self._live_first_cell(registration.unit, session)
        events = session.events
        if cell.cursor + 1 < len(events):
            cell = fold_projection(registration.unit, cell, events[cell.cursor + 1 :])
        registration.cells[session] = cell
        return cell

    def _live_first_cell(self, unit: ProjectionUnit, session: Session) -> ProjectionCell:
        """A live session's first cell of ``unit``: its cache row if usable up to the last event the
        cache can vouch for (:meth:`ProjectionCache.trusted_last_seq`), else ``init``."""
        if self.cache is None:
            return derive_initial_cell(unit)
        return self._first_cell(unit, session.header, self.cache.trusted_last_seq(session))

    def _first_cell(
        self, unit: ProjectionUnit, header: Mapping[str, JsonValue], last_seq: int
    ) -> ProjectionCell:
        if self.cache is not None:
            cached = decode_cache_row(unit, self.cache.rows(header).get(unit.key), last_seq)
            if cached is not None:
                return cached
        return derive_initial_cell(unit)
