"""The reference's conformance subjects on a real database: ``python -m reference.server --backend
sqlite`` or ``--backend postgres`` (conformance/PROTOCOL.md), and in process
``reference.database_subjects:SqliteSubject`` or ``:PostgresSubject``.

They are :class:`reference.subject.ReferenceSubject` with its store on the database instead of the
simulated filesystem. Their capabilities are ``core``, ``storage``, ``pure``, ``commit-fault`` and ``list``,
but not ``crash-seam``: the seam is a simulated filesystem that loses unsynced bytes, and a
database commits whole transactions, so its crash checks are real ones instead — the suite's kill
check over stdio, and this project's fault runs (tests/test_db_faults.py).

``fail_commit`` (capability ``commit-fault``) fails the store's next commit of event rows inside the
database driver, where a real failure comes from, so the store's own error path answers it: SQLite
is told that the commit hit a disk I/O error (the transaction is still open and is rolled back);
PostgreSQL's connection is ended by the server at the insert (``pg_terminate_backend`` of its own
backend), so the next request reconnects, retakes the writer locks and reads back what its failed
commit left before it writes again. Nothing of the failed commit is stored either way.

Both storages the protocol names, ``"memory"`` and ``"file"``, are served by the database:
``reset`` with either starts from an empty store of this backend, so every storage vector, the
model-checking machine and the exhaustive check (which all ask for ``"memory"`` when a subject has
no seam) run against the database. ``compressed`` does not apply: a row holds its text as is.

Where the data lives:

- with ``CONFORMANCE_STORE_ROOT`` set (the kill check), SQLite keeps its database in that
  directory and PostgreSQL uses a schema named after it (``dsh_kill_`` and a hash of the path), so
  a restarted process finds what the killed one committed; ``reset`` with storage empties it;
- otherwise SQLite uses a private temporary directory and PostgreSQL a private schema, both
  removed when the process exits.

PostgreSQL needs ``DSH_POSTGRES_DSN`` (see :mod:`reference.persistence.postgres`).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

from reference.persistence.database import DatabaseStore
from reference.persistence.faulty import Countdown, FaultyFileSystem
from reference.store import SessionStore
from reference.subject import ReferenceSubject
from reference.subject.requests import Args, BadRequest, UnsupportedOp
from spec.format.legacy import derive_session_listing
from spec.log.json import JsonValue
from spec.log.session import ABSENT
from spec.protocol import STORE_ROOT_ENV

if TYPE_CHECKING:
    from reference.persistence.sqlite import SqliteStore

SQLITE_FILE: Final = "sessions.sqlite3"
BACKENDS: Final = ("sqlite", "postgres")


class CommitFault(Countdown):
    """The armed ``fail_commit``: a countdown over commits of event rows."""

    stored = False  # the failing commit is made, and only its answer lost


class FailingSqliteConnection:
    """A SQLite connection whose commit of event rows fails, when :class:`CommitFault` says so, as a
    commit that hit a disk I/O error does (before SQLite commits anything)."""

    def __init__(self, conn: Any, fault: CommitFault) -> None:
        self._conn = conn
        self._fault = fault
        self._writes_events = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, statement: str, *args: Any) -> Any:
        if statement == "COMMIT" and self._writes_events:
            self._writes_events = False
            if self._fault.spend():
                import sqlite3

                if self._fault.stored:
                    self._conn.execute(statement)
                raise sqlite3.OperationalError("disk I/O error (fail_commit)")
        return self._conn.execute(statement, *args)

    def executemany(self, statement: str, rows: Any) -> Any:
        self._writes_events = statement.startswith("INSERT INTO session_events")
        return self._conn.executemany(statement, rows)


class FailingPostgresConnection:
    """A PostgreSQL connection whose insert of event rows, when :class:`CommitFault` says so, is met
    by the server ending the connection (before the statement runs), as a dropped connection is."""

    def __init__(self, conn: Any, fault: CommitFault) -> None:
        self._conn = conn
        self._fault = fault

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def execute(self, query: Any, params: Any = None) -> Any:
        from psycopg import OperationalError, sql

        text = query.as_string(self._conn) if isinstance(query, sql.Composable) else str(query)
        if "INSERT INTO" in text and "session_events" in text and self._fault.spend():
            if self._fault.stored:
                self._conn.execute(query, params)  # committed: the connection is in autocommit
            self._conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            raise OperationalError("the connection was not ended (fail_commit)")
        return self._conn.execute(query, params)


class DatabaseSubject(ReferenceSubject):
    """A :class:`ReferenceSubject` whose storage is a database; subclasses say which."""

    capabilities: ClassVar[tuple[str, ...]] = ("core", "storage", "pure", "commit-fault", "list")
    ops: ClassVar[Mapping[str, str]] = {**ReferenceSubject.ops, "fail_commit": "op_fail_commit"}

    def __init__(self) -> None:
        self.commit_fault = CommitFault()
        super().__init__()
        self.database: DatabaseStore | None = None
        self.store_root = os.environ.get(STORE_ROOT_ENV) or None
        if self.store_root is not None:
            self._use_database(empty=False)

    def op_reset(self, args: Args) -> JsonValue:
        storage = args.get("storage", "none")
        if storage not in ("none", "memory", "file") or not isinstance(args.get("compressed", True), bool):
            raise BadRequest("storage must be 'none', 'memory' or 'file' and compressed a boolean")
        if args.optional("files") is not ABSENT:
            raise UnsupportedOp(f"the {self.backend} backend keeps no files to place (capability import)")
        if storage == "none":
            self._drop_database()
            return super().op_reset(args)
        self.now = 0
        self._use_database(empty=True)
        return None

    def op_fail_commit(self, args: Args) -> JsonValue:
        """Arm a failed commit: the store's commit of event rows after the next ``after`` ones fails,
        storing nothing (PROTOCOL.md, ``fail_commit``)."""
        after = args.count("after", 0)
        stored = args.get("stored", False)
        if self.database is None or not isinstance(stored, bool):
            raise BadRequest("fail_commit needs reset with storage 'memory' or 'file', and stored a boolean")
        self.commit_fault.after = after
        self.commit_fault.stored = stored
        return None

    def _crash_fs(self) -> FaultyFileSystem:
        raise BadRequest(
            f"the {self.backend} backend has no crash seam: the seam simulates a filesystem losing unsynced bytes, "
            "and a database commits whole transactions (its crash checks kill real processes instead)"
        )

    # --- the database ---

    backend: ClassVar[str] = "database"

    def _use_database(self, empty: bool) -> None:
        """A store over this backend's database, emptied first when ``empty``; nothing is live.
        An open database is kept when :meth:`_keeps_database` says so: the writers are abandoned
        (their locks released, as their death would release them) and the rows deleted, which is
        much cheaper than a new file or connection for each of the suite's many resets."""
        if self.database is not None and self._keeps_database():
            self.database.abandon_writers()
            if empty:
                self.database.erase_all_sessions()
        else:
            self._drop_database()
            self.database = self._open_database(empty)
            self._arm_commit_faults(self.database)
        self.commit_fault.after = None
        self.fs = None
        self.persistence = self.database
        self.store = SessionStore(self.database, clock=self._clock)

    def _keeps_database(self) -> bool:
        return True

    def _drop_database(self) -> None:
        if self.database is not None:
            self.database.close()
            self.database = None
            self.persistence = None

    def _open_database(self, empty: bool) -> DatabaseStore:
        raise NotImplementedError

    def _arm_commit_faults(self, database: DatabaseStore) -> None:
        """Put the ``fail_commit`` seam between ``database`` and its driver."""
        raise NotImplementedError


class SqliteSubject(DatabaseSubject):
    """The reference on :class:`reference.persistence.sqlite.SqliteStore`."""

    name: ClassVar[str] = "dsh-session-spec reference (SQLite)"
    backend: ClassVar[str] = "sqlite"

    def __init__(self) -> None:
        self._private_dir: str | None = None
        super().__init__()

    def _directory(self) -> str:
        if self.store_root is not None:
            return self.store_root
        if self._private_dir is None:
            self._private_dir = tempfile.mkdtemp(prefix="dsh-sqlite-subject-")
            atexit.register(shutil.rmtree, self._private_dir, True)
        return self._private_dir

    def _keeps_database(self) -> bool:
        # The kill check's directory is emptied by each reset, as PROTOCOL.md asks, file by file.
        return self.store_root is None

    def _store_class(self) -> type[SqliteStore]:
        from reference.persistence.sqlite import SqliteStore

        return SqliteStore

    def _open_database(self, empty: bool) -> DatabaseStore:
        directory = self._directory()
        if empty:
            for name in os.listdir(directory):
                path = os.path.join(directory, name)
                shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
        return self._store_class()(os.path.join(directory, SQLITE_FILE))

    def _arm_commit_faults(self, database: DatabaseStore) -> None:
        database._conn = FailingSqliteConnection(database._conn, self.commit_fault)  # type: ignore[attr-defined]

    def op_list(self, args: Args) -> JsonValue:
        """The listing as ``dsh-session copy --from sqlite:PATH`` reads its source: the database
        opened read-only, beside this process's writer connection, by a store of its own (what
        every flush committed, nothing upgraded or left behind), then closed."""
        if self.database is None:
            return super().op_list(args)
        reader = self._store_class()(os.path.join(self._directory(), SQLITE_FILE), read_only=True)
        try:
            return list(derive_session_listing(reader.list()))
        finally:
            reader.close()


class PostgresSubject(DatabaseSubject):
    """The reference on :class:`reference.persistence.postgres.PostgresStore`, at ``$DSH_POSTGRES_DSN``."""

    name: ClassVar[str] = "dsh-session-spec reference (PostgreSQL)"
    backend: ClassVar[str] = "postgres"
    # Event rows per read page: small, so that the suite's sessions, most of them a few events
    # long, are read across page boundaries (and at a session exactly a page long).
    read_batch: ClassVar[int] = 3

    def __init__(self) -> None:
        from reference.persistence.postgres import DSN_ENV

        dsn = os.environ.get(DSN_ENV)
        if not dsn:
            raise ValueError(
                f"the postgres backend needs a connection string in ${DSN_ENV} (for example 'host=/run/postgresql dbname=dsh')"
            )
        self.dsn = dsn
        root = os.environ.get(STORE_ROOT_ENV)
        if root:
            self.schema = self.derive_schema(root)
        else:
            self.schema = f"dsh_subject_{os.getpid()}_{secrets.token_hex(4)}"
        self._private_schema = not root
        self._cleanup_registered = False
        super().__init__()

    @staticmethod
    def derive_schema(store_root: str) -> str:
        """The schema standing for a ``CONFORMANCE_STORE_ROOT`` directory: ``dsh_kill_`` and a
        hash of its absolute path, so each kill-check run has its own."""
        return (
            "dsh_kill_"
            + hashlib.sha256(os.path.abspath(store_root).encode("utf-8", "surrogateescape")).hexdigest()[:16]
        )

    def _open_database(self, empty: bool) -> DatabaseStore:
        from reference.persistence.postgres import PostgresStore

        database = PostgresStore(self.dsn, self.schema, read_batch=self.read_batch)
        if self._private_schema and not self._cleanup_registered:
            self._cleanup_registered = True
            atexit.register(_drop_schema_quietly, self.dsn, self.schema)
        if empty:
            database.erase_all_sessions()
        return database

    def _arm_commit_faults(self, database: DatabaseStore) -> None:
        connect: Callable[[], Any] = database._connection  # type: ignore[attr-defined]
        fault = self.commit_fault
        database._connection = lambda: FailingPostgresConnection(connect(), fault)  # type: ignore[attr-defined]


def _drop_schema_quietly(dsn: str, schema: str) -> None:
    from reference.persistence.postgres import PostgresStore

    try:
        store = PostgresStore(dsn, schema)
        store.drop_schema()
        store.close()
    except Exception:
        pass


def make_subject(backend: str) -> ReferenceSubject:
    """The subject for ``--backend``: the default (the simulated filesystem with its crash seam),
    ``sqlite`` or ``postgres``."""
    if backend == "sqlite":
        return SqliteSubject()
    if backend == "postgres":
        return PostgresSubject()
    return ReferenceSubject()
