"""What the SQLite and PostgreSQL backends share: the D2 service and handle on top of a handful of
row operations a database supplies.

A session is a row in a table of headers and one row per event in a table of events keyed by
``(session, seq)``; the rows hold the file store's texts (:mod:`spec.format.tables`). A new session's
header and first batch are inserted in one transaction at its first flush, so it becomes visible
whole; every later flush is one transaction of event rows. Opening a session for writing takes
the session's writer lock, reads its rows and appends the spec's closers as new rows, in one
transaction. There is no torn tail in a database: a transaction commits whole or not at all.

A commit can fail without saying whether it happened (the connection dropped while the server was
committing). The handle then treats its next flush as *uncertain*: it reads back what is stored
past its durable count and lets :func:`spec.format.tables.plan_unknown_commit` decide how much of its
batch is there already, so a retried flush writes each event once.

A backend subclasses :class:`DatabaseStore` and implements the ``_db_*`` operations; each raises
a :class:`~spec.codes.SpecError` (``STORAGE_IO`` for a failure of the database or the
connection, ``LOCKED`` or ``SESSION_ALREADY_EXISTS`` for a key another writer took).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from reference.persistence.api import OpenReport, SessionStat, StoredLog
from reference.persistence.common import BufferedLogHandle
from spec.codes import Code, SpecError, reject
from spec.format.tables import (
    decode_event_row,
    decode_header_row,
    encode_event_row,
    encode_header_row,
    encode_session_key,
    plan_unknown_commit,
)
from spec.lineage.repair import derive_closers
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION
from spec.log.json import FrozenDict

RowVisitor = Callable[[int, str], None]


class DatabaseStore:
    """The D2 service over a database's rows; one writer handle per session at a time, enforced
    across processes by the backend's writer lock and within this store by its registry."""

    location: str = "database"

    def __init__(self) -> None:
        self._writers: dict[str, DatabaseLogHandle] = {}

    # --- service API ---

    def create(self, header: FrozenDict) -> DatabaseLogHandle:
        """A new session's handle, holding its writer lock. Nothing is stored before its first
        flush, which inserts the header and the first batch together."""
        session_id = str(header["id"])
        key = encode_session_key(session_id)
        if key in self._writers or not self._db_lock(key):
            self._refuse_existing(key, session_id)  # a stored session's writer holds it: it exists
            raise reject(Code.LOCKED, f'session "{session_id}" already has a writer')
        try:
            self._refuse_existing(key, session_id)
        except BaseException:
            self._release(key)
            raise
        handle = DatabaseLogHandle(self, key, header, (), published=False, report=OpenReport())
        self._writers[key] = handle
        return handle

    def open(self, session_id: str) -> DatabaseLogHandle:
        """Take over a stored session as its single writer: its rows, then the closers of an open
        turn appended as new rows (SPEC-DECISIONS D3 item 6)."""
        key = encode_session_key(session_id)
        if not self._db_has_session(key):
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        self._acquire(key, session_id)
        try:
            loaded = self._load(session_id)
            if loaded is None:
                raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
            header, events = loaded
            closers = derive_closers(events)
            if closers:
                self._db_insert(key, None, len(events), [encode_event_row(closer) for closer in closers])
        except BaseException:
            self._release(key)
            raise
        handle = DatabaseLogHandle(
            self,
            key,
            header,
            events + closers,
            published=True,
            report=OpenReport(closers_appended=len(closers)),
        )
        self._writers[key] = handle
        return handle

    def read(self, session_id: str) -> StoredLog:
        """The committed rows as a reader sees them: no lock, nothing changed, no closers."""
        loaded = self._load(session_id)
        if loaded is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        return StoredLog(loaded[0], loaded[1], HEADER_FORMAT_VERSION)

    def stat(self, session_id: str) -> SessionStat | None:
        if session_id == "":
            return None
        key = encode_session_key(session_id)
        summary = self._db_summary(key)
        if summary is None:
            return None
        count, stored_bytes = summary
        # The log only grows, so its event count names its state.
        return SessionStat(
            session_id, HEADER_FORMAT_VERSION, stored_bytes, f"v4:{count}", f"{self.location}#{key}"
        )

    def list(self) -> builtins.list[FrozenDict]:
        """The header of every stored session whose header row reads (others are skipped, as the
        file store skips an unreadable log; :meth:`list_rows` shows them)."""
        return [found for _, found in self.list_rows() if isinstance(found, FrozenDict)]

    def list_rows(self) -> builtins.list[tuple[str, FrozenDict | SpecError]]:
        """Every header row by key: its header, or the error it gives when it does not read."""
        rows: builtins.list[tuple[str, FrozenDict | SpecError]] = []
        for key, text in self._db_header_rows():
            try:
                rows.append((key, decode_header_row(key, text)))
            except SpecError as error:
                rows.append((key, error))
        return rows

    def abandon_writers(self) -> None:
        """Release every writer lock this store holds; the handles still open are abandoned with
        whatever they buffered, as when their process dies."""
        for key in list(self._writers):
            self._release(key)

    def erase_all_sessions(self) -> None:
        """Remove every stored session (for test harnesses: the conformance protocol's ``reset``)."""
        self.abandon_writers()
        self._db_erase_all()

    def close(self) -> None:
        """Abandon every open handle (:meth:`abandon_writers`) and disconnect."""
        self.abandon_writers()
        self._db_close()

    # --- shared internals ---

    def _load(self, session_id: str) -> tuple[FrozenDict, tuple[Event, ...]] | None:
        if session_id == "":
            return None  # the empty id has no key, so no rows: no such session (not a path error)
        key = encode_session_key(session_id)
        events: list[Event] = []

        def visit(seq: int, text: str) -> None:
            events.append(decode_event_row(session_id, len(events), seq, text))

        header_text = self._db_scan(key, 0, visit)
        if header_text is None:
            return None
        return decode_header_row(key, header_text), tuple(events)

    def _refuse_existing(self, key: str, session_id: str) -> None:
        if self._db_has_session(key):
            raise reject(
                Code.SESSION_ALREADY_EXISTS, f'session "{session_id}" already exists in {self.location}'
            )

    def _insert_refused(self, key: str, first_seq: int, header_row: bool) -> SpecError:
        """The rejection of a batch whose insert broke a unique key: the header row's (the session
        already exists) or an event row's (another writer wrote seq ``first_seq`` or later)."""
        if header_row:
            return reject(Code.SESSION_ALREADY_EXISTS, f'session "{key}" already exists in {self.location}')
        return reject(
            Code.LOCKED, f'session "{key}" already holds seq {first_seq} or later: another writer wrote to it'
        )

    def _acquire(self, key: str, session_id: str) -> None:
        if key in self._writers or not self._db_lock(key):
            raise reject(Code.LOCKED, f'session "{session_id}" already has a writer')

    def _release(self, key: str) -> None:
        self._writers.pop(key, None)
        self._db_unlock(key)

    def _rows_after(self, key: str, first_seq: int) -> tuple[str | None, tuple[str, ...]]:
        """The header row and the event rows from ``first_seq`` on, as texts."""
        texts: builtins.list[str] = []
        header = self._db_scan(key, first_seq, lambda seq, text: texts.append(text))
        return header, tuple(texts)

    def _mark_all_uncertain(self) -> None:
        """After the connection was lost, no handle knows what its last commit did."""
        for handle in self._writers.values():
            handle._uncertain = True

    # --- what a backend supplies ---

    def _db_has_session(self, key: str) -> bool:
        raise NotImplementedError

    def _db_scan(self, key: str, first_seq: int, visit: RowVisitor) -> str | None:
        """In one consistent read: the header row's text (``None``: no such session) after calling
        ``visit(seq, text)`` for each event row from ``first_seq`` on, in seq order."""
        raise NotImplementedError

    def _db_insert(self, key: str, header: str | None, first_seq: int, events: Sequence[str]) -> None:
        """One transaction: the header row (when given) and event rows ``first_seq``, ... ."""
        raise NotImplementedError

    def _db_summary(self, key: str) -> tuple[int, int] | None:
        """``(event rows, bytes stored)`` of a session, ``None`` when it has no header row."""
        raise NotImplementedError

    def _db_header_rows(self) -> Sequence[tuple[str, str]]:
        """Every ``(key, header text)``, ordered by key."""
        raise NotImplementedError

    def _db_lock(self, key: str) -> bool:
        """Take the session's cross-process writer lock; ``False`` when another holder has it."""
        raise NotImplementedError

    def _db_unlock(self, key: str) -> None:
        raise NotImplementedError

    def _db_erase_all(self) -> None:
        raise NotImplementedError

    def _db_close(self) -> None:
        raise NotImplementedError

    def _db_failure(self, what: str, error: Exception) -> SpecError | None:
        """The rejection a backend's failure during ``what`` is answered with (None: not its own)."""
        raise NotImplementedError

    @contextmanager
    def _storage_errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except SpecError:
            raise
        except Exception as error:
            failure = self._db_failure(what, error)
            if failure is None:
                raise
            raise failure from error


class DatabaseLogHandle(BufferedLogHandle):
    """The writer of one session's rows: buffers appends; each flush is one transaction."""

    def __init__(
        self,
        store: DatabaseStore,
        key: str,
        header: FrozenDict,
        durable: Sequence[Event],
        published: bool,
        report: OpenReport,
    ) -> None:
        super().__init__(header, durable, report)
        self._store = store
        self._key = key
        self._published = published
        self._uncertain = False

    def _write_pending(self, pending: Sequence[Event]) -> None:
        if self._store._writers.get(self._key) is not self:
            raise reject(
                Code.SESSION_CLOSED,
                f'session "{self._header["id"]}": this writer was abandoned (its store was closed or reset) and holds no lock; '
                "reopen the session to write to it",
            )
        header = None if self._published else encode_header_row(self._header)
        first_seq = self._durable_count
        texts = [encode_event_row(event) for event in pending]
        if self._uncertain:
            header, first_seq, texts = self._settle_unknown_commit(header, first_seq, texts)
        if header is None and not texts:
            return
        try:
            self._store._db_insert(self._key, header, first_seq, texts)
        except SpecError as error:
            if error.code == Code.STORAGE_IO:
                self._uncertain = True
            raise
        self._published = True
        self._uncertain = False  # a reconnection during this very commit leaves nothing in doubt

    def _settle_unknown_commit(
        self, header: str | None, first_seq: int, texts: list[str]
    ) -> tuple[str | None, int, list[str]]:
        """Read back what an earlier failed commit may have stored and drop it from this batch."""
        stored_header, found = self._store._rows_after(self._key, first_seq)
        session_id = str(self._header["id"])
        if header is None or stored_header is None:
            done = plan_unknown_commit(
                session_id, found, texts
            )  # unpublished and no header stored: nothing is
        else:
            # The header and the first batch commit together: both are there or neither is.
            done = plan_unknown_commit(session_id, [stored_header, *found], [header, *texts]) - 1
            header = None
            self._published = True
        self._uncertain = False
        return header, first_seq + done, texts[done:]

    def _release(self) -> None:
        if (
            self._store._writers.get(self._key) is self
        ):  # an abandoned handle must not free its successor's lock
            self._store._release(self._key)
