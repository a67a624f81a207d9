"""Fault runs fitting a database (SPEC-DECISIONS D3 items 1-4 and 6), seeded so a failure replays:

- the writer process is killed (SIGKILL) at random requests while it appends to and flushes two
  sessions; then a reader checks what survived, a new writer resumes it, and a last reader checks
  that the repaired log reads back clean;
- PostgreSQL itself is killed mid-commit (``pg_ctl stop -m immediate``) and restarted;
- the writer's connection is dropped during a flush (``pg_terminate_backend`` from another
  connection);
- a write fails: a statement timeout behind a competing lock, a server that turned read-only, and
  for SQLite a full database and a busy one.

After every fault: nothing acknowledged by a flush is lost (item 3), what is there is a prefix of
what was appended (item 2) and never half of a batch (a flush is one transaction), the header is
intact or the session absent (item 1), a resume appends exactly the repair closers (item 6), and
the repaired log reads back as the resume left it (item 4). A flush that met a fault answers
``STORAGE_IO``; retried, it writes its batch exactly once.

Each run reports how many faults it reached, and fails if the faults it was built to reach did not
happen (a fault run that injected nothing has checked nothing).
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest
from refusals import refusal

from conformance import builders as build
from conformance.crash import STORE_ROOT_ENV
from conformance.crash.kill import SubjectProcess
from conformance.crash_rules import (
    check_d3_1_header,
    check_d3_2_prefix,
    check_d3_3_flushed_kept,
    check_d3_4_clean_reopen,
    check_d3_6_closers,
)
from reference.database_subjects import PostgresSubject
from reference.persistence.database import DatabaseStore
from reference.persistence.postgres import DSN_ENV, PostgresStore
from reference.persistence.sqlite import SqliteStore
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.format.json_text import encode_json_text
from spec.log.json import JsonValue

ROOT = Path(__file__).resolve().parent.parent
SEED = 15
START = 1_000  # ms: the clock every run starts at
SESSIONS = ("a", "b")


# --- a writer process speaking the conformance protocol ------------------------------------------------


class Writer(SubjectProcess):
    """``python -m reference.server --backend …`` as a child process, request by request."""

    def __init__(self, backend: str, env: dict[str, str]) -> None:
        argv = [sys.executable, "-m", "reference.server", "--backend", backend]
        super().__init__(argv, {**os.environ, **env}, timeout=60)

    def ok(self, op: str, **args: JsonValue) -> Any:
        answer = self.request(op, **args)
        assert answer["ok"], f"{op} answered {answer}"
        return answer["result"]


@dataclass
class Log:
    """What the writer was asked to do to one session: its header, every event it appended (as it
    answered), and how many of them a flush acknowledged."""

    header: Any = None
    appended: list[Any] = field(default_factory=list)
    acked: int = 0
    published: bool = False  # a flush was acknowledged (even one with no event to write)


def event_args(generator: random.Random, session_id: str, log: Log) -> dict[str, JsonValue]:
    """A random append for ``session_id``: a turn start, a user message of up to 3,000 characters,
    or an assistant message with a tool call."""
    seq = len(log.appended)
    choice = generator.random()
    if choice < 0.25:
        return {"id": session_id, "type": "turn/start", "data": build.turn_start(seq + 1)}
    if choice < 0.65:
        text = "x" * generator.randint(1, 3_000)
        return {
            "id": session_id,
            "type": "user/message",
            "data": build.user_message(f"u{seq}", text),
            "surfaceOp": "append",
        }
    data = build.assistant_message(f"a{seq}", "calling", (f"c{seq}",))
    return {"id": session_id, "type": "assistant/message", "data": data, "surfaceOp": "append"}


def check_survivors(store: DatabaseStore, logs: dict[str, Log], in_flight_flush: str | None) -> list[str]:
    """D3 items 1-3 for every session, and no half batch: the survivors of a session are exactly
    what was acknowledged, or — if its flush was in flight — everything appended."""
    problems: list[str] = []
    for session_id, log in logs.items():
        try:
            events: list[Any] = list(store.read(session_id).events)
            found = True
        except SpecError as error:
            if error.code != Code.SESSION_NOT_FOUND:
                problems.append(f"{session_id}: read answered {error.code}: {error.message}")
                continue
            events, found = [], False
        header = store.read(session_id).header if found else None
        problems += [
            f"{session_id}: {p}" for p in check_d3_1_header(found, header, log.header, log.published)
        ]
        problems += [f"{session_id}: {p}" for p in check_d3_2_prefix(events, log.appended)]
        problems += [f"{session_id}: {p}" for p in check_d3_3_flushed_kept(events, log.acked)]
        whole = {log.acked, len(log.appended)} if in_flight_flush == session_id else {log.acked}
        if found and len(events) not in whole:
            problems.append(
                f"{session_id}: {len(events)} events survived: half a batch (acknowledged {log.acked}, appended {len(log.appended)})"
            )
    return problems


def resume_and_reread(open_store: Any, logs: dict[str, Log], now: int) -> list[str]:
    """D3 items 6 and 4: a new writer resumes each surviving session (closers, then the end-seed),
    closes it, and a fresh reader sees exactly the repaired log."""
    problems: list[str] = []
    store = open_store()
    sessions = SessionStore(store, clock=lambda: now)
    for session_id in logs:
        try:
            survived = store.read(session_id).events
        except SpecError:
            continue
        resumed = sessions.resume(session_id)
        problems += [f"{session_id}: {p}" for p in check_d3_6_closers(list(resumed.events), survived, now)]
        sessions.close(session_id)
        again = open_store()
        problems += [
            f"{session_id}: {p}"
            for p in check_d3_4_clean_reopen(list(again.read(session_id).events), resumed.events)
        ]
        again.close()
    store.close()
    return problems


# --- SIGKILL of the writer ------------------------------------------------------------------------------


@dataclass
class KillTally:
    rounds: int = 0
    during_flush: int = 0
    batch_kept: int = 0  # a flush in flight when the writer died whose batch had committed
    batch_lost: int = 0  # ... and one whose batch had not
    problems: list[str] = field(default_factory=list)


def kill_rounds(backend: str, env: dict[str, str], open_store: Any, rounds: int) -> KillTally:
    generator = random.Random(SEED)
    tally = KillTally()
    for number in range(rounds):
        writer = Writer(backend, env)
        logs = {session_id: Log() for session_id in SESSIONS}
        in_flight: str | None = None
        try:
            writer.ok("reset", storage="file")
            writer.ok("clock", now=START)
            for session_id in SESSIONS:
                logs[session_id].header = writer.ok("create", id=session_id)["header"]
            plan: list[tuple[str, str]] = []
            for _ in range(generator.randint(6, 30)):
                session_id = generator.choice(SESSIONS)
                plan.append(("flush" if generator.random() < 0.35 else "append", session_id))
            kill_at = generator.randrange(len(plan) + 1)
            for index, (op, session_id) in enumerate(plan):
                log = logs[session_id]
                if op == "append":
                    request = event_args(generator, session_id, log)
                else:
                    request = {"id": session_id}
                if index == kill_at:
                    writer.send(op, request)
                    in_flight = session_id if op == "flush" and log.acked < len(log.appended) else None
                    time.sleep(
                        generator.random() * 0.003
                    )  # when the kill lands: fault timing, not synchronisation
                    break
                result = writer.ok(op, **request)
                if op == "append":
                    log.appended.append(result)
                else:
                    log.acked, log.published = len(log.appended), True
        finally:
            writer.kill()
        tally.rounds += 1
        store = open_store()
        found = check_survivors(store, logs, in_flight)
        if in_flight is not None:
            tally.during_flush += 1
            try:
                kept = len(store.read(in_flight).events) > logs[in_flight].acked
            except SpecError:
                kept = False
            tally.batch_kept += kept
            tally.batch_lost += not kept
        store.close()
        found += resume_and_reread(open_store, logs, START)
        tally.problems += [f"round {number + 1}: {problem}" for problem in found]
    return tally


def report(record_property: Any, capsys: pytest.CaptureFixture[str], label: str, **counts: int) -> None:
    for name, value in counts.items():
        record_property(f"{label} {name}", value)
    with capsys.disabled():
        print(
            f"\n{label}: " + ", ".join(f"{value} {name.replace('_', ' ')}" for name, value in counts.items())
        )


def report_kills(
    record_property: Any, capsys: pytest.CaptureFixture[str], label: str, tally: KillTally
) -> None:
    """Report the kill rounds, then require that nothing was lost and some kill landed mid-flush."""
    report(
        record_property,
        capsys,
        label,
        kill_points=tally.rounds,
        during_a_flush=tally.during_flush,
        batches_committed=tally.batch_kept,
        batches_not_committed=tally.batch_lost,
    )
    assert tally.problems == []
    assert tally.during_flush > 0, "no kill landed while a flush was in flight"


def test_killing_the_sqlite_writer_at_random_points_loses_nothing_flushed(
    tmp_path: Path, record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    root.mkdir()
    tally = kill_rounds(
        "sqlite", {STORE_ROOT_ENV: str(root)}, lambda: SqliteStore(str(root / "sessions.sqlite3")), rounds=10
    )
    report_kills(record_property, capsys, "sqlite writer kills", tally)


def test_killing_the_postgres_writer_at_random_points_loses_nothing_flushed(
    postgres_cluster: Any, tmp_path: Path, record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "store"
    root.mkdir()
    schema = PostgresSubject.derive_schema(str(root))
    env = {STORE_ROOT_ENV: str(root), DSN_ENV: postgres_cluster.dsn}
    # a dying writer's lock may take a moment
    open_store = partial(PostgresStore, postgres_cluster.dsn, schema, lock_wait_ms=10_000)
    try:
        tally = kill_rounds("postgres", env, open_store, rounds=10)
    finally:
        cleanup = open_store()
        cleanup.drop_schema()
        cleanup.close()
    report_kills(record_property, capsys, "postgres writer kills", tally)


# --- PostgreSQL: the server dies, the connection drops -------------------------------------------------


@pytest.fixture
def pg_writer(postgres_cluster: Any, tmp_path: Path) -> Iterator[tuple[Writer, Any, str, Log]]:
    """A writer process on a schema of its own, with the clock set and session "a" created and flushed."""
    root = tmp_path / "store"
    root.mkdir()
    schema = PostgresSubject.derive_schema(str(root))
    writer = Writer("postgres", {STORE_ROOT_ENV: str(root), DSN_ENV: postgres_cluster.dsn})
    try:
        writer.ok("reset", storage="file")
        writer.ok("clock", now=START)
        log = Log(header=writer.ok("create", id="a")["header"])
        flush_until_acknowledged(writer, log, "a")
        yield writer, postgres_cluster, schema, log
    finally:
        writer.kill()
        if not postgres_cluster.is_running():
            postgres_cluster.start()
        cleanup = PostgresStore(postgres_cluster.dsn, schema)
        cleanup.drop_schema()
        cleanup.close()


def big_batch(writer: Writer, generator: random.Random, log: Log, session_id: str) -> None:
    """Once the writer's connection is up (a read waits until it has reconnected after the last
    fault), appends enough to make the next commit take a while (up to a megabyte)."""
    writer.ok("read", id=session_id)
    for _ in range(generator.randint(50, 300)):
        log.appended.append(writer.ok("append", **event_args(generator, session_id, log)))


def flush_until_acknowledged(writer: Writer, log: Log, session_id: str) -> int:
    """Flush; a flush that answers STORAGE_IO is retried (at most 3 times). Returns the failures."""
    failures = 0
    while True:
        answer = writer.request("flush", id=session_id)
        if answer["ok"]:
            log.acked, log.published = len(log.appended), True
            return failures
        assert answer["error"]["code"] == "STORAGE_IO", answer
        failures += 1
        assert failures <= 3, f"the flush keeps failing: {answer}"


@dataclass
class FlushFaults:
    """What the fault rounds saw: the flushes that failed, and those of them that had committed."""

    flushes_failed: int = 0
    failed_flushes_that_had_committed: int = 0


def settle_flush(
    answer: Any, writer: Writer, log: Log, cluster: Any, schema: str, faults: FlushFaults
) -> bool:
    """After a flush of "a" that met a fault and answered ``answer``: nothing flushed was lost and
    nothing unappended appeared; a failed flush is retried until acknowledged and counted in
    ``faults``. Returns whether it failed."""
    reader = PostgresStore(cluster.dsn, schema)
    assert check_survivors(reader, {"a": log}, "a") == []
    stored = len(reader.read("a").events)
    reader.close()
    if answer["ok"]:
        log.acked = len(log.appended)
        return False
    assert answer["error"]["code"] == "STORAGE_IO", answer
    flush_until_acknowledged(writer, log, "a")
    faults.flushes_failed += 1
    faults.failed_flushes_that_had_committed += stored == len(log.appended)
    return True


def assert_stored_once(log: Log, cluster: Any, schema: str) -> None:
    """Session "a" in the database holds every appended event exactly once, in order."""
    reader = PostgresStore(cluster.dsn, schema)
    assert [encode_json_text(e) for e in reader.read("a").events] == [
        encode_json_text(e) for e in log.appended
    ]
    reader.close()


def assert_resumes(writer: Writer, log: Log, cluster: Any, schema: str) -> None:
    """With the writer gone, session "a" resumes and rereads as everything acknowledged."""
    writer.kill()
    assert (
        resume_and_reread(lambda: PostgresStore(cluster.dsn, schema, lock_wait_ms=10_000), {"a": log}, START)
        == []
    )


def test_killing_the_postgres_server_mid_commit_loses_nothing_flushed_and_a_retry_writes_once(
    pg_writer: tuple[Writer, Any, str, Log], record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    writer, cluster, schema, log = pg_writer
    generator = random.Random(SEED)
    kills, faults = 0, FlushFaults()
    for _ in range(4):
        big_batch(writer, generator, log, "a")
        writer.send("flush", {"id": "a"})
        cluster.kill()  # an immediate shutdown, while the commit is under way (or just after it)
        kills += 1
        answer = writer.receive()
        cluster.start()
        if settle_flush(answer, writer, log, cluster, schema, faults):
            assert_stored_once(log, cluster, schema)
    report(record_property, capsys, "postgres server kills", server_kills=kills, **asdict(faults))
    assert_resumes(writer, log, cluster, schema)
    assert faults.flushes_failed > 0, "no server kill landed before its flush was answered"


def test_dropping_the_connection_during_a_flush_loses_nothing_and_a_retry_writes_once(
    pg_writer: tuple[Writer, Any, str, Log], record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    writer, cluster, schema, log = pg_writer
    generator = random.Random(SEED)
    drops, faults = 0, FlushFaults()
    with psycopg.connect(cluster.dsn, autocommit=True) as admin:
        application = f"dsh-session[{writer.process.pid}]"
        for round_number in range(12):
            big_batch(writer, generator, log, "a")
            idle = round_number % 4 == 3  # now and then the connection drops between flushes
            if not idle:
                writer.send("flush", {"id": "a"})
            terminated = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s",
                (application,),
            ).fetchone()
            drops += bool(terminated and terminated[0])
            answer = writer.receive() if not idle else writer.request("flush", id="a")
            settle_flush(answer, writer, log, cluster, schema, faults)
    assert_stored_once(log, cluster, schema)
    report(record_property, capsys, "postgres connection drops", drops=drops, **asdict(faults))
    assert_resumes(writer, log, cluster, schema)
    assert (
        drops == 12 and faults.flushes_failed >= 3
    )  # at least every drop between flushes meets the next flush


# --- a write that fails ---------------------------------------------------------------------------------


def two_turns(store: SessionStore, session_id: str) -> Any:
    session = store.create(session_id)
    session.append("turn/start", {"turn": 1})
    session.append("user/message", build.user_message("u1", "x" * 4_000), "append")
    session.flush()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.append("turn/start", {"turn": 2})
    session.append("user/message", build.user_message("u2", "y" * 20_000), "append")
    return session


def assert_failed_flush_then_retry(
    session: Any, database: DatabaseStore, reader: DatabaseStore, heal: Any
) -> None:
    """The flush answers STORAGE_IO and loses nothing flushed before; once healed, a retried flush
    writes the batch once."""
    failed = refusal(lambda: session.flush())
    assert failed.code == Code.STORAGE_IO, failed.message
    assert len(reader.read(session.id).events) == 2
    heal()
    session.flush()
    assert [encode_json_text(e) for e in reader.read(session.id).events] == [
        encode_json_text(e) for e in session.events
    ]


def test_a_statement_timeout_behind_a_competing_lock_fails_the_flush_and_a_retry_writes_once(
    postgres_cluster: Any,
) -> None:
    schema = f"t_{os.getpid()}_timeout"
    database = PostgresStore(postgres_cluster.dsn, schema, statement_timeout_ms=300)
    reader = PostgresStore(postgres_cluster.dsn, schema)
    try:
        session = two_turns(SessionStore(database, clock=lambda: 5), "s")
        blocker = psycopg.connect(postgres_cluster.dsn)
        blocker.execute(f"LOCK TABLE {schema}.session_events IN EXCLUSIVE MODE")  # held until commit
        assert_failed_flush_then_retry(session, database, reader, blocker.commit)
        blocker.close()
    finally:
        database.close()
        reader.drop_schema()
        reader.close()


def test_a_server_that_turned_read_only_fails_the_flush_and_a_retry_writes_once(
    postgres_cluster: Any,
) -> None:
    """As after a failover to a read-only standby: new connections may only read."""
    with psycopg.connect(postgres_cluster.dsn, autocommit=True) as admin:
        admin.execute("CREATE DATABASE read_only_test")
    dsn = postgres_cluster.dsn.replace("dbname=postgres", "dbname=read_only_test")
    database = PostgresStore(dsn, "dsh_session")
    reader = PostgresStore(dsn, "dsh_session")
    admin = psycopg.connect(postgres_cluster.dsn, autocommit=True)
    try:
        session = two_turns(SessionStore(database, clock=lambda: 5), "s")
        admin.execute("ALTER DATABASE read_only_test SET default_transaction_read_only = on")
        admin.execute("SELECT pg_terminate_backend(%s)", (database.backend_pid(),))
        with pytest.raises(SpecError) as dropped:
            session.flush()  # the connection it had is gone
        assert dropped.value.code == Code.STORAGE_IO

        def heal() -> None:
            # Writable again, for new connections: the retried flush reconnects as it reads back.
            admin.execute("ALTER DATABASE read_only_test RESET default_transaction_read_only")
            admin.execute("SELECT pg_terminate_backend(%s)", (database.backend_pid(),))

        assert_failed_flush_then_retry(session, database, reader, heal)
    finally:
        database.close()
        reader.close()
        admin.execute("DROP DATABASE read_only_test WITH (FORCE)")
        admin.close()


def test_a_full_sqlite_database_fails_the_flush_and_a_retry_writes_once(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite3")
    database, reader = SqliteStore(path), SqliteStore(path)
    session = two_turns(SessionStore(database, clock=lambda: 5), "s")
    pages = database._conn.execute("PRAGMA page_count").fetchone()[0]
    database._conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is full: no page more
    assert_failed_flush_then_retry(
        session, database, reader, lambda: database._conn.execute("PRAGMA max_page_count = 1073741823")
    )
    database.close()
    reader.close()


def test_a_busy_sqlite_database_fails_the_flush_and_a_retry_writes_once(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sqlite3")
    database, reader = SqliteStore(path, busy_timeout_ms=100), SqliteStore(path)
    session = two_turns(SessionStore(database, clock=lambda: 5), "s")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's write transaction that does not end in time
    assert_failed_flush_then_retry(session, database, reader, lambda: other.execute("COMMIT"))
    other.close()
    database.close()
    reader.close()


# --- the unknown outcome of a commit ---------------------------------------------------------------------


class AnswerLost(SqliteStore):
    """Commits, then reports a failure once: the answer of a commit that did happen was lost."""

    lose_next = False

    def _db_insert(self, key: str, header: str | None, first_seq: int, events: Any) -> None:
        super()._db_insert(key, header, first_seq, events)
        if self.lose_next:
            self.lose_next = False
            raise SpecError(Code.STORAGE_IO, "the connection dropped before the commit's answer arrived")


@pytest.mark.parametrize("first_flush", [True, False])
def test_a_retried_flush_after_a_lost_answer_writes_nothing_twice(tmp_path: Path, first_flush: bool) -> None:
    database = AnswerLost(str(tmp_path / "s.sqlite3"))
    session = SessionStore(database, clock=lambda: 5).create("s")
    session.append("turn/start", {"turn": 1})
    if not first_flush:
        session.flush()
    session.append("user/message", build.user_message("u1"), "append")
    database.lose_next = True
    with pytest.raises(SpecError):
        session.flush()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.flush()
    assert [e["seq"] for e in database.read("s").events] == [0, 1, 2]


def test_a_writer_whose_session_was_taken_over_while_it_was_disconnected_is_refused(
    postgres_cluster: Any,
) -> None:
    schema = f"t_{os.getpid()}_takeover"
    first, second = (
        PostgresStore(postgres_cluster.dsn, schema),
        PostgresStore(postgres_cluster.dsn, schema, lock_wait_ms=10_000),
    )
    try:
        sessions = SessionStore(first, clock=lambda: 5)
        session = sessions.create("s")
        session.append("turn/start", {"turn": 1})
        session.flush()
        session.append("user/message", build.user_message("u1"), "append")
        with psycopg.connect(postgres_cluster.dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first.backend_pid(),))
        taken = second.open("s")  # the lock died with the connection: another writer takes over
        taken.close()
        for _ in range(2):
            with pytest.raises(SpecError) as refused:
                session.flush()
            assert refused.value.code in (Code.STORAGE_IO, Code.LOCKED)
        assert refused.value.code == Code.LOCKED
        assert [e["type"] for e in second.read("s").events] == ["turn/start", "turn/end"]
    finally:
        first.close()
        second.drop_schema()
        second.close()


# --- a power loss (branch kinds3; issue 26, "databases") ---------------------------------------------
# A killed process loses nothing SQLite wrote; only the trace family's crash states show a commit
# acknowledged before its WAL frames were synced (conformance/CRASH-STATES.md).


def test_a_sqlite_subject_committing_under_synchronous_normal_fails_the_trace_family() -> None:
    from conformance.trace.family import TraceSettings, run_trace_checks, summarise_trace_outcome
    from conformance.trace.strace import probe_strace

    probe = probe_strace()
    if probe.problem is not None:
        pytest.skip(f"the trace family cannot run here: {probe.problem}")
    settings = TraceSettings(
        f"{sys.executable} -m reference.durability_subjects sqlite-synchronous-normal",
        formats=(True,),
        judged=("writing",),
        models=("weak",),
        fail_fast=True,
    )
    outcome = run_trace_checks(probe, settings)
    assert outcome.replay == []
    failed = [result for result in summarise_trace_outcome(outcome) if result.outcome == "failed"]
    assert failed, (
        f"a commit acknowledged before its WAL frames were synced was not caught: {outcome.not_run}"
    )
