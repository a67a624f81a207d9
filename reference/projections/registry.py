"""Session projections, made to run: a registry of fold units, ``state_of`` and ``snapshot``
over live sessions, and a persisted cache beside each session log (SPEC-DECISIONS D7; seed 002
"会话账本"; notes/dsh-compaction-projection §11).

The fold rules are ``spec.projections.units``. Cells are computed lazily: ``state_of`` folds a unit over
the events its cell has not seen yet, so a unit registered after the events still reads the right
value, and the fold never runs twice over one event. With a :class:`ProjectionCache`, a unit's
first read of a session starts from its cache row instead of ``init`` when the row is usable.
The cache is possibly stale but never wrong: the log is flushed before any row is written.

The module also ships the seed's example unit, :data:`SESSION_DIGEST`: it counts completed
compactions and prunes — what happened, not what the surface still shows.
"""

from __future__ import annotations

import secrets
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from reference.persistence.api import PersistenceService
from reference.persistence.filestore import FileStore
from reference.persistence.fs import FileSystem
from reference.session import Session
from spec.codes import Code, reject
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.events import COMPACTION_END, COMPACTION_PRUNE, Event, event_data
from spec.log.json import FrozenDict, JsonValue, is_event_seq, snapshot_json
from spec.projections.units import (
    ProjectionCell,
    ProjectionUnit,
    decode_cache_row,
    decode_cache_rows,
    derive_initial_cell,
    derive_projection_state,
    encode_cache_record,
    encode_cache_row,
    fold_projection,
    is_cache_row_durable,
    is_cache_write_due,
    plan_registration,
)

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


class Projections:
    """The registry of fold units. ``register`` returns a disposer; registrants of one key with
    the same ``stateVersion`` share it, a different ``stateVersion`` is refused."""

    def __init__(self, cache: ProjectionCache | None = None) -> None:
        self.cache = cache
        self._registrations: dict[str, _Registration] = {}

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
        values = {
            key: self.state_of(session, key)
            for key, registration in self._registrations.items()
            if registration.unit.wire
        }
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
            cell = self._first_cell(registration.unit, session.header, session.seq - 1)
        events = session.events
        if cell.cursor + 1 < len(events):
            cell = fold_projection(registration.unit, cell, events[cell.cursor + 1 :])
        registration.cells[session] = cell
        return cell

    def _first_cell(
        self, unit: ProjectionUnit, header: Mapping[str, JsonValue], last_seq: int
    ) -> ProjectionCell:
        if self.cache is not None:
            cached = decode_cache_row(unit, self.cache.rows(header).get(unit.key), last_seq)
            if cached is not None:
                return cached
        return derive_initial_cell(unit)


# --- the seed's example unit: the session digest (seed 002 "会话账本") ------------------------------

DIGEST_KEY: Final = "sessionDigest"
DIGEST_ZERO: Final = FrozenDict({"compactions": 0, "prunes": 0, "lastShadowedTokens": None})


def is_digest_state(state: JsonValue) -> bool:
    """``{compactions, prunes, lastShadowedTokens}``: two counts and the last prune's shadowed
    price (``None`` before any prune)."""
    if not isinstance(state, dict) or set(state) != {"compactions", "prunes", "lastShadowedTokens"}:
        return False
    last = state["lastShadowedTokens"]
    return (
        is_event_seq(state["compactions"])
        and is_event_seq(state["prunes"])
        and (last is None or is_event_seq(last))
    )


def apply_session_digest(state: JsonValue, event: Event) -> JsonValue:
    """A successful ``compaction/end`` (no ``error``) counts one compaction; a ``compaction/prune``
    counts one prune and records its ``shadowedTokenCount``; every other event returns the very
    same state. The counts follow the log, so shadowing never lowers them."""
    assert isinstance(state, dict)
    kind = event.get("type")
    data = event_data(event)
    if kind == COMPACTION_END and "error" not in data:
        return {**state, "compactions": state["compactions"] + 1}  # type: ignore[operator]
    if kind == COMPACTION_PRUNE:
        return {**state, "prunes": state["prunes"] + 1, "lastShadowedTokens": data.get("shadowedTokenCount")}  # type: ignore[operator]
    return state


SESSION_DIGEST: Final = ProjectionUnit(
    key=DIGEST_KEY,
    state_version=1,
    state_schema=is_digest_state,
    init=lambda: DIGEST_ZERO,
    apply=apply_session_digest,
)
"""The seed's ``sessionDigest`` unit, host-only, ``stateVersion`` 1."""
