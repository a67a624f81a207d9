"""The PostgreSQL backend: session rows on a server every host can reach, through psycopg 3.

The tables are those of the SQLite backend — ``session_headers``, ``session_events`` keyed by
``(session, seq)``, ``schema_version`` — in a schema of their own (``dsh_session`` unless told
otherwise), created or upgraded on first use, idempotently and under a transaction-level advisory
lock so that two hosts starting at once do not race. Event and header texts are stored as
``text``, never ``jsonb``: ``jsonb`` would reorder keys and rewrite numbers, and the rows must
read back byte for byte (SPEC-DECISIONS D5).

``flush`` is one transaction, committed with ``synchronous_commit = on`` (set on every
connection, whatever the server's default), so it is durable on the server when it returns.

The writer lock is a session-level advisory lock keyed by a 64-bit hash of the schema and the
session's key: it belongs to the connection, so it is released when the writer's connection ends
for any reason — its process killed, its host gone (once the server notices), the server
restarted — and it is never stolen from a live connection. A writer that lost its connection
takes its locks again when it reconnects; one it cannot retake, or a session someone else wrote
meanwhile, answers ``LOCKED``. Because the server may need a moment to notice a dead client, a
second writer waits up to ``lock_wait_ms`` for the lock before it is refused.

Large sessions are read in pages of ``read_batch`` rows by keyset pagination (``seq > last``); a
session that fits in one page is read, header and all, in one statement.

The connection string comes from the ``dsn`` argument or the environment variable
``DSH_POSTGRES_DSN`` (libpq's own defaults and ``PG*`` variables apply to whatever it leaves out).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from reference.persistence.database import DatabaseStore, RowVisitor
from spec.codes import Code, SpecError, reject
from spec.format.tables import TABLE_LAYOUT_VERSION, plan_layout_migration

DSN_ENV: Final = "DSH_POSTGRES_DSN"
DEFAULT_SCHEMA: Final = "dsh_session"
DEFAULT_LOCK_WAIT_MS: Final = 2_000  # ms a second writer waits for a lock whose holder may be dying
DEFAULT_STATEMENT_TIMEOUT_MS: Final = 60_000  # ms any one statement may take before it fails as STORAGE_IO
DEFAULT_READ_BATCH: Final = 2_000  # event rows fetched per round trip when reading a session
DEFAULT_CONNECT_TIMEOUT_S: Final = 10  # s to reach the server
SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")

T = TypeVar("T")

# Each layout version's statements; {schema} is the quoted schema name.
LAYOUT_STEPS: Final[dict[int, tuple[str, ...]]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS {schema}.schema_version (version integer NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {schema}.session_headers (session text PRIMARY KEY, header text NOT NULL)",
        "CREATE TABLE IF NOT EXISTS {schema}.session_events ("
        " session text NOT NULL REFERENCES {schema}.session_headers (session),"
        " seq bigint NOT NULL CHECK (seq >= 0),"
        " event text NOT NULL,"
        " PRIMARY KEY (session, seq))",
    ),
}


def derive_lock_key(*parts: str) -> int:
    """A signed 64-bit advisory-lock key for ``parts`` (a collision would only make two sessions
    wait for each other; at 64 bits it does not happen in practice)."""
    digest = hashlib.sha256("\x00".join(parts).encode("ascii", "backslashreplace")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresStore(DatabaseStore):
    """Session rows in ``schema`` of the database ``dsn`` names (``$DSH_POSTGRES_DSN`` by default)."""

    def __init__(
        self,
        dsn: str | None = None,
        schema: str = DEFAULT_SCHEMA,
        *,
        lock_wait_ms: int = DEFAULT_LOCK_WAIT_MS,
        statement_timeout_ms: int = DEFAULT_STATEMENT_TIMEOUT_MS,
        read_batch: int = DEFAULT_READ_BATCH,
        connect_timeout_s: int = DEFAULT_CONNECT_TIMEOUT_S,
    ) -> None:
        super().__init__()
        if not SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
            raise ValueError(
                f"schema {schema!r} must be a lower-case SQL name (letters, digits and _, at most 63) not starting with pg_"
            )
        self.dsn = dsn if dsn is not None else os.environ.get(DSN_ENV, "")
        self.schema = schema
        self.location = f"postgres:{schema}"
        self.lock_wait_ms = lock_wait_ms
        self.statement_timeout_ms = statement_timeout_ms
        self.read_batch = read_batch
        self.connect_timeout_s = connect_timeout_s
        self._conn: psycopg.Connection[Any] | None = None
        self._lost: set[str] = (
            set()
        )  # keys whose lock went with a dropped connection and was taken by another
        self._migrate()

    # --- the connection ---

    def backend_pid(self) -> int:
        """The server process serving this store's connection (to find it in ``pg_stat_activity``)."""
        return int(self._connection().info.backend_pid)

    def _connection(self) -> psycopg.Connection[Any]:
        """The live connection, made anew when the last one was lost. A new connection retakes the
        writer locks of every open handle; each handle then checks what is stored before it writes
        again (the lock was not held while the connection was down)."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            self._conn = None
            self._mark_all_uncertain()
            try:
                conn.close()
            except psycopg.Error:
                pass
        with self._storage_errors("connect to PostgreSQL"):
            # Name the connection after this process, so that pg_stat_activity tells which one it is.
            conninfo = self.dsn
            if "application_name" not in conninfo:
                conninfo = make_conninfo(conninfo, application_name=f"dsh-session[{os.getpid()}]")
            conn = psycopg.connect(conninfo, autocommit=True, connect_timeout=self.connect_timeout_s)
            try:
                conn.execute("SELECT set_config('synchronous_commit', 'on', false)")
                conn.execute(
                    "SELECT set_config('statement_timeout', %s, false)", (f"{self.statement_timeout_ms}ms",)
                )
                for key in self._writers:
                    if not self._take_lock(conn, key):
                        self._lost.add(key)
            except BaseException:
                conn.close()
                raise
        self._conn = conn
        return conn

    def _retrying(self, what: str, operation: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run an operation that changes nothing (or can be repeated) once more on a new connection
        when the old one turns out to be lost (the server restarted, or dropped it)."""
        try:
            with self._storage_errors(what):
                return operation(self._connection())
        except SpecError:
            if self._conn is None or not (self._conn.broken or self._conn.closed):
                raise
        with self._storage_errors(what):
            return operation(self._connection())

    def _name(self, table: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(table))

    def _lock_key(self, key: str) -> int:
        return derive_lock_key(self.schema, key)

    # --- set-up ---

    def _migrate(self) -> None:
        """Create or upgrade the schema and tables, once, even when several hosts start together.
        A role that may not create anything works as long as the tables are there and current."""

        def migrate(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (derive_lock_key("schema", self.schema),))
                exists = conn.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,)
                ).fetchone()
                if exists is None:
                    conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
                has_table = conn.execute(
                    "SELECT to_regclass(%s)", (f'"{self.schema}".schema_version',)
                ).fetchone()
                found = None
                if has_table is not None and has_table[0] is not None:
                    row = conn.execute(
                        sql.SQL("SELECT max(version) FROM {}").format(self._name("schema_version"))
                    ).fetchone()
                    found = None if row is None or row[0] is None else int(row[0])
                steps = plan_layout_migration(found)
                for step in steps:
                    for statement in LAYOUT_STEPS[step]:
                        conn.execute(sql.SQL(statement).format(schema=sql.Identifier(self.schema)))
                if steps:
                    conn.execute(sql.SQL("DELETE FROM {}").format(self._name("schema_version")))
                    conn.execute(
                        sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(self._name("schema_version")),
                        (TABLE_LAYOUT_VERSION,),
                    )

        self._retrying("prepare the session tables", migrate)

    # --- rows ---

    def _db_has_session(self, key: str) -> bool:
        query = sql.SQL("SELECT 1 FROM {} WHERE session = %s").format(self._name("session_headers"))
        return self._retrying(
            "look up a session", lambda conn: conn.execute(query, (key,)).fetchone() is not None
        )

    def _db_scan(self, key: str, first_seq: int, visit: RowVisitor) -> str | None:
        """The header and the first page of events in one statement, then further pages by seq
        (keyset pagination, ``read_batch`` rows a page). Each page is its own snapshot, and that is
        enough: committed rows never change and every commit adds a contiguous run at the end, so
        the pages always join up into a prefix of the log."""
        first_page = sql.SQL(
            "SELECT h.header, e.seq, e.event FROM {} h LEFT JOIN {} e ON e.session = h.session AND e.seq >= %s"
            " WHERE h.session = %s ORDER BY e.seq LIMIT %s"
        ).format(self._name("session_headers"), self._name("session_events"))
        next_page = sql.SQL(
            "SELECT NULL, seq, event FROM {} WHERE session = %s AND seq > %s ORDER BY seq LIMIT %s"
        ).format(self._name("session_events"))

        def scan(conn: psycopg.Connection[Any]) -> str | None:
            rows = conn.execute(first_page, (first_seq, key, self.read_batch)).fetchall()
            if not rows:
                return None
            header = str(rows[0][0])
            while True:
                for _, seq, text in rows:
                    if seq is not None:
                        visit(int(seq), str(text))
                if len(rows) < self.read_batch or rows[-1][1] is None:
                    return header
                rows = conn.execute(next_page, (key, rows[-1][1], self.read_batch)).fetchall()

        return self._retrying("read a session", scan)

    def _db_insert(self, key: str, header: str | None, first_seq: int, events: Sequence[str]) -> None:
        """One statement, so one transaction and one round trip: the events as two arrays
        (any number of rows, two parameters), and the header, when given, in a data-modifying CTE
        whose row the foreign key sees at the end of the statement."""
        self._refuse_lost(key)
        seqs = list(range(first_seq, first_seq + len(events)))
        insert_events = sql.SQL(
            "INSERT INTO {} (session, seq, event) SELECT %s, s, e FROM unnest(%s::bigint[], %s::text[]) AS t(s, e)"
        ).format(self._name("session_events"))
        params: tuple[object, ...] = (key, seqs, list(events))
        if header is not None:
            insert_events = (
                sql.SQL("WITH new_header AS (INSERT INTO {} (session, header) VALUES (%s, %s)) ").format(
                    self._name("session_headers")
                )
                + insert_events
            )
            params = (key, header, *params)
        with self._storage_errors("commit a batch"):
            conn = self._connection()
            self._refuse_lost(key)
            try:
                conn.execute(insert_events, params)
            except psycopg.errors.UniqueViolation as error:
                header_row = header is not None and error.diag.table_name == "session_headers"
                raise self._insert_refused(key, first_seq, header_row) from None

    def _refuse_lost(self, key: str) -> None:
        if key in self._lost:
            raise reject(
                Code.LOCKED,
                f'session "{key}" lost its writer lock to another writer while the connection was down',
            )

    def _db_summary(self, key: str) -> tuple[int, int] | None:
        query = sql.SQL(
            "SELECT octet_length(h.header), count(e.seq), coalesce(sum(octet_length(e.event)), 0)"
            " FROM {} h LEFT JOIN {} e ON e.session = h.session WHERE h.session = %s GROUP BY h.header"
        ).format(self._name("session_headers"), self._name("session_events"))
        row = self._retrying("measure a session", lambda conn: conn.execute(query, (key,)).fetchone())
        if row is None:
            return None
        return int(row[1]), int(row[0]) + int(row[2])

    def _db_header_rows(self) -> Sequence[tuple[str, str]]:
        query = sql.SQL("SELECT session, header FROM {} ORDER BY session").format(
            self._name("session_headers")
        )
        return self._retrying(
            "list the sessions", lambda conn: [(str(k), str(t)) for k, t in conn.execute(query).fetchall()]
        )

    # --- the writer lock ---

    def _take_lock(self, conn: psycopg.Connection[Any], key: str) -> bool:
        """Take a session's advisory lock on ``conn``, waiting up to ``lock_wait_ms`` for a holder
        that may be dying (the server frees a lock only once it notices its connection is gone:
        that holder may be this store's own connection that was just lost)."""
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._lock_key(key),)).fetchone()
        if row and row[0]:
            return True
        if self.lock_wait_ms <= 0:
            return False
        try:
            with conn.transaction():
                conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{self.lock_wait_ms}ms",))
                conn.execute("SELECT pg_advisory_lock(%s)", (self._lock_key(key),))
        except psycopg.errors.LockNotAvailable:
            return False
        return True

    def _db_lock(self, key: str) -> bool:
        taken = self._retrying("take a writer lock", lambda conn: self._take_lock(conn, key))
        if taken:
            self._lost.discard(key)
        return taken

    def _db_unlock(self, key: str) -> None:
        self._lost.discard(key)
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            return  # the lock went with the connection
        try:
            conn.execute("SELECT pg_advisory_unlock(%s)", (self._lock_key(key),))
        except psycopg.Error:
            pass

    def _db_close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _db_erase_all(self) -> None:
        # DELETE rather than TRUNCATE: the conformance tables are small, and TRUNCATE pays for new files each time.
        events = sql.SQL("DELETE FROM {}").format(self._name("session_events"))
        headers = sql.SQL("DELETE FROM {}").format(self._name("session_headers"))

        def erase(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute(events)
                conn.execute(headers)

        self._retrying("erase the sessions", erase)

    # --- for test harnesses ---

    def drop_schema(self) -> None:
        """Remove the schema and everything in it."""
        statement = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(self.schema))
        self._retrying("drop the schema", lambda conn: conn.execute(statement))

    # --- failures ---

    def _db_failure(self, what: str, error: Exception) -> SpecError | None:
        if not isinstance(error, psycopg.Error):
            return None
        detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return reject(Code.STORAGE_IO, f"{self.location}: could not {what}: {detail}")
