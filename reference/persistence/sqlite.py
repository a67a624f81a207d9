"""The SQLite backend: every session of a store in one embedded database file.

Two tables hold the rows of :mod:`spec.format.tables` — ``session_headers (session, header)`` and
``session_events (session, seq, event)``, keyed by ``(session, seq)`` — and ``schema_version``
holds the table layout's version; ``PRAGMA application_id`` marks the file as this project's.
The database runs in WAL mode with ``synchronous=FULL``, so ``flush`` — one transaction — is
durable when it returns (the WAL is fsynced at each commit), and readers never wait for a writer.

The writer lock is an ``flock`` on a small lock file per session in the directory
``<database>.locks`` beside the database: it works across processes and within one, never waits,
and dies with its holder, so a killed writer blocks no one. SQLite's own locks are per database,
not per session, and serialise only each transaction; ``busy_timeout`` makes concurrent writers of
different sessions take turns instead of failing.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar, Final

from reference.persistence.database import DatabaseStore, RowVisitor
from reference.persistence.fs import LockHandle, RealFileSystem
from spec.codes import Code, SpecError, reject
from spec.format.tables import TABLE_LAYOUT_VERSION, plan_layout_migration

APPLICATION_ID: Final = 0x44534834  # "DSH4": marks a database written by this project
DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000  # ms a transaction waits for another process's to finish
LOCK_DIR_SUFFIX: Final = ".locks"

# Each layout version's statements, applied in order by an empty or older database.
LAYOUT_STEPS: Final[dict[int, tuple[str, ...]]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS session_headers (session TEXT PRIMARY KEY NOT NULL, header TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS session_events ("
        " session TEXT NOT NULL REFERENCES session_headers (session),"
        " seq INTEGER NOT NULL CHECK (seq >= 0),"
        " event TEXT NOT NULL,"
        " PRIMARY KEY (session, seq)) WITHOUT ROWID",
    ),
}


def read_only_uri(path: str) -> str:
    """The URI that opens the database at ``path`` read-only without leaving files beside it. A
    read-only connection to a WAL database makes the ``-wal`` and ``-shm`` files when they are
    missing and, unable to checkpoint, leaves them behind. Both are missing only when no
    connection is open and every commit is in the database file itself (the last connection to
    close checkpoints and removes them), so such a file at rest is opened ``immutable=1``: no
    shared memory, no locks, nothing created. A writer that opens it during the read is not seen
    (docs/choices.md). When they exist a writer may be live: the ordinary ``mode=ro`` reads through
    its WAL under SQLite's locks, and the files were there already."""
    at_rest = not any(os.path.exists(path + suffix) for suffix in ("-wal", "-shm"))
    return f"file:{urllib.parse.quote(path)}?mode=ro" + ("&immutable=1" if at_rest else "")


class SqliteStore(DatabaseStore):
    """Session rows in the SQLite database at ``path`` (created, with its directory, if missing).
    With ``read_only`` (a copy's source) nothing is created or upgraded: the database must exist
    and hold the current table layout, and it is opened with SQLite's ``mode=ro``
    (:func:`read_only_uri`: nothing is left beside it)."""

    # FULL: in WAL mode a commit returns only once its WAL frames are fsynced (NORMAL would sync
    # them only at a checkpoint, so a power loss could undo a commit flush already acknowledged).
    synchronous: ClassVar[str] = "FULL"

    def __init__(
        self, path: str, busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS, read_only: bool = False
    ) -> None:
        super().__init__()
        self.path = os.path.abspath(path)
        self.location = f"sqlite:{self.path}"
        self.lock_dir = self.path + LOCK_DIR_SUFFIX
        self.read_only = read_only
        self._fs = RealFileSystem()
        self._locks: dict[str, LockHandle] = {}
        with self._storage_errors("open the database"):
            if not read_only:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                os.makedirs(self.lock_dir, exist_ok=True)
            self._conn = sqlite3.connect(
                read_only_uri(self.path) if read_only else self.path,
                timeout=busy_timeout_ms / 1000,
                isolation_level=None,
                check_same_thread=False,
                uri=read_only,
            )
        try:
            if not read_only:
                self._configure()
            self._migrate()
        except BaseException:
            self._conn.close()
            raise

    # --- set-up ---

    def _configure(self) -> None:
        with self._storage_errors("configure the database"):
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise reject(
                    Code.STORAGE_IO,
                    f"{self.location}: the database cannot use WAL mode (it answered {mode!r})",
                )
            self._conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._conn.execute("PRAGMA foreign_keys = ON")

    def _migrate(self) -> None:
        """Create or upgrade the tables, once, whoever else opens the database at the same time;
        read-only, refuse a database whose tables are not at the current layout."""
        with self._transaction("prepare the session tables", write=not self.read_only) as conn:
            application = int(conn.execute("PRAGMA application_id").fetchone()[0])
            tables = {
                str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            if application not in (0, APPLICATION_ID) or (application == 0 and tables):
                raise reject(
                    Code.UNSUPPORTED_FORMAT,
                    f"{self.location} is not a session database of this project (application id {application:#x}, "
                    f"tables {sorted(tables)}); give the store a file of its own",
                )
            found = None
            if "schema_version" in tables:
                row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                found = None if row is None or row[0] is None else int(row[0])
            steps = plan_layout_migration(found)
            if steps and self.read_only:
                raise reject(
                    Code.UNSUPPORTED_FORMAT,
                    f"{self.location} holds no session tables of the current layout (found layout {found}); "
                    "it is opened read-only, so it is not upgraded",
                )
            for step in steps:
                for statement in LAYOUT_STEPS[step]:
                    conn.execute(statement)
            if steps:
                conn.execute("DELETE FROM schema_version")
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (TABLE_LAYOUT_VERSION,))
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")

    # --- rows ---

    def _db_has_session(self, key: str) -> bool:
        with self._storage_errors("look up a session"):
            return (
                self._conn.execute("SELECT 1 FROM session_headers WHERE session = ?", (key,)).fetchone()
                is not None
            )

    def _db_scan(self, key: str, first_seq: int, visit: RowVisitor) -> str | None:
        with self._transaction("read a session", write=False) as conn:
            row = conn.execute("SELECT header FROM session_headers WHERE session = ?", (key,)).fetchone()
            if row is None:
                return None
            rows = conn.execute(
                "SELECT seq, event FROM session_events WHERE session = ? AND seq >= ? ORDER BY seq",
                (key, first_seq),
            )
            for seq, text in rows:
                visit(seq, text)
            return str(row[0])

    def _db_insert(self, key: str, header: str | None, first_seq: int, events: Sequence[str]) -> None:
        with self._transaction("commit a batch") as conn:
            if header is not None:
                try:
                    conn.execute("INSERT INTO session_headers (session, header) VALUES (?, ?)", (key, header))
                except sqlite3.IntegrityError:
                    raise self._insert_refused(key, first_seq, header_row=True) from None
            try:
                conn.executemany(
                    "INSERT INTO session_events (session, seq, event) VALUES (?, ?, ?)",
                    ((key, first_seq + offset, text) for offset, text in enumerate(events)),
                )
            except sqlite3.IntegrityError:
                raise self._insert_refused(key, first_seq, header_row=False) from None

    def _db_summary(self, key: str) -> tuple[int, int] | None:
        with self._storage_errors("measure a session"):
            row = self._conn.execute(
                "SELECT length(CAST(header AS BLOB)),"
                " (SELECT count(*) FROM session_events WHERE session = ?),"
                " (SELECT coalesce(sum(length(CAST(event AS BLOB))), 0) FROM session_events WHERE session = ?)"
                " FROM session_headers WHERE session = ?",
                (key, key, key),
            ).fetchone()
        if row is None:
            return None
        return int(row[1]), int(row[0]) + int(row[2])

    def _db_header_rows(self) -> list[tuple[str, str]]:
        with self._storage_errors("list the sessions"):
            return [
                (str(key), str(text))
                for key, text in self._conn.execute(
                    "SELECT session, header FROM session_headers ORDER BY session"
                )
            ]

    # --- the writer lock ---

    def _db_lock(self, key: str) -> bool:
        with self._storage_errors("take a writer lock"):
            lock = self._fs.try_lock(self.lock_path(key))
        if lock is None:
            return False
        self._locks[key] = lock
        return True

    def _db_unlock(self, key: str) -> None:
        lock = self._locks.pop(key, None)
        if lock is not None:
            self._fs.unlock(lock)

    def lock_path(self, key: str) -> str:
        """The lock file of a session key (hashed: a key can be longer than a file name may be)."""
        return os.path.join(self.lock_dir, hashlib.sha256(key.encode("ascii")).hexdigest()[:40] + ".lock")

    def _db_erase_all(self) -> None:
        with self._transaction("erase the sessions") as conn:
            conn.execute("DELETE FROM session_events")
            conn.execute("DELETE FROM session_headers")

    def _db_close(self) -> None:
        self._conn.close()

    # --- failures ---

    @contextmanager
    def _transaction(self, what: str, write: bool = True) -> Iterator[sqlite3.Connection]:
        """One transaction (``BEGIN IMMEDIATE`` for a writer, so it never fails half-way on a lock
        upgrade); rolled back on any error, which is reported as a typed one."""
        with self._storage_errors(what):
            self._conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield self._conn
                self._conn.execute("COMMIT")
            except BaseException:
                if self._conn.in_transaction:
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise

    def _db_failure(self, what: str, error: Exception) -> SpecError | None:
        if isinstance(error, sqlite3.DatabaseError):
            damaged = "malformed" in str(error) or "not a database" in str(error)
            return reject(
                Code.CORRUPT_LOG if damaged else Code.STORAGE_IO,
                f"{self.location}: could not {what}: {error}",
            )
        if isinstance(error, OSError):
            return reject(Code.STORAGE_IO, f"{self.location}: could not {what}: {error}")
        return None
