"""Load benchmark of the persistence backends: the file store, SQLite and PostgreSQL, each beside
its raw floor, measured in the same run.

    .venv/bin/python -m scripts.bench_backends [--writers 4] [--readers 2] [--json bench-backends.json]

For each backend, ``--writers`` processes each write their own sessions (create, then
``--flushes`` rounds of ``--events-per-flush`` appends and a flush) while ``--readers`` processes
keep reading other, already stored sessions. Reported per backend:

- events/s: events appended and flushed, over all writers, per second of the write phase;
- flush p50/p99: the latency of one flush (one transaction; one frame and an fsync);
- reads/s: whole-session reads the readers completed per second meanwhile;
- resume: a new process's ``SessionStore.resume`` of a session of ``--resume-events`` events (the
  median of three).

The floor is the same work without the store: the same writer processes write the same rows —
for a database, one ``INSERT … VALUES (…), (…)`` of the batch's event texts and ``COMMIT`` per
flush, through the same driver into a bare table; for the files, the batch's JSONL bytes appended
to one file per session and fsynced. The difference between a store and its floor is what the
store itself costs (validation, encoding, compression, locks, the header and key checks).

PostgreSQL runs on ``--postgres-dsn`` (or ``$DSH_POSTGRES_DSN``); without one the benchmark starts
a throwaway cluster (scripts/pg_cluster.py) and removes it after, or reports PostgreSQL as not run,
with the reason. Speed targets belong here, never in timed tests.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import secrets
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conformance import builders as build
from reference.persistence.api import PersistenceService
from reference.persistence.filestore import FileStore
from reference.persistence.fs import RealFileSystem
from reference.session import Session
from reference.store import SessionStore
from spec.format.json_text import encode_json_text

ROOT = Path(__file__).resolve().parent.parent

BACKENDS = ("file", "sqlite", "postgres")


@dataclass
class Params:
    writers: int = 4
    readers: int = 2
    sessions_per_writer: int = 2
    flushes: int = 40
    events_per_flush: int = 8
    event_chars: int = 400  # characters of text per user message
    resume_events: int = 5_000
    reader_sessions: int = 4


@dataclass
class Row:
    backend: str
    mode: str  # "store" or "floor"
    events_per_s: float = 0.0
    flush_p50_ms: float = 0.0
    flush_p99_ms: float = 0.0
    reads_per_s: float | None = None
    resume_ms: float | None = None
    note: str = ""


@dataclass
class Target:
    """Where one backend keeps its data in this run (picklable, for the worker processes)."""

    backend: str
    where: str
    schema: str = ""
    extra: dict[str, str] = field(default_factory=dict)

    def open(self) -> PersistenceService:
        if self.backend == "file":
            return FileStore(self.where, fs=RealFileSystem())
        if self.backend == "sqlite":
            from reference.persistence.sqlite import SqliteStore

            return SqliteStore(self.where)
        from reference.persistence.postgres import PostgresStore

        return PostgresStore(self.where, self.schema)


# --- the workload ----------------------------------------------------------------------------------


def user_message(number: int, chars: int) -> dict[str, Any]:
    text = (f"message {number}: " + "lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    return build.user_message(f"u{number}", text)


def append_batch(session: Session, params: Params, first: int) -> None:
    for offset in range(params.events_per_flush):
        number = first + offset
        if number % 4 == 0:
            session.append("turn/start", {"turn": number // 4 + 1})
        elif number % 4 == 3:
            session.append("turn/end", {"turn": number // 4 + 1, "reason": {"kind": "completed"}})
        else:
            session.append("user/message", user_message(number, params.event_chars), "append")


def batch_texts(params: Params, session_id: str, first: int) -> list[str]:
    """The event texts the store would write for one batch (for the floors)."""
    texts = []
    for offset in range(params.events_per_flush):
        number = first + offset
        if number % 4 == 0:
            kind, data, surface = "turn/start", {"turn": number // 4 + 1}, None
        elif number % 4 == 3:
            kind, data, surface = "turn/end", {"turn": number // 4 + 1, "reason": {"kind": "completed"}}, None
        else:
            kind, data, surface = "user/message", user_message(number, params.event_chars), "append"
        event: dict[str, Any] = {"type": kind, "seq": number, "time": 1, "data": data}
        if surface is not None:
            event["surfaceOp"] = surface
        texts.append(encode_json_text(event))
    return texts


def close(service: PersistenceService | None) -> None:
    """Disconnect a database store (the file store holds nothing open)."""
    closer = getattr(service, "close", None)
    if callable(closer):
        closer()


def timed_writer_rounds(
    params: Params, sessions: int, start: Any, results: Any, prepare: Callable[[int, int], Callable[[], None]]
) -> None:
    """After ``start``, ``params.flushes`` rounds over ``sessions`` sessions: ``prepare(position,
    round)`` writes a batch untimed and gives its flush, which is timed; the writer's row goes to
    ``results``."""
    latencies: list[float] = []
    start.wait()
    began = time.perf_counter()
    for round_number in range(params.flushes):
        for position in range(sessions):
            flush = prepare(position, round_number)
            before = time.perf_counter()
            flush()
            latencies.append(time.perf_counter() - before)
    total = sessions * params.flushes * params.events_per_flush
    results.put(("writer", time.perf_counter() - began, total, latencies))


def store_writer(target: Target, params: Params, index: int, start: Any, results: Any) -> None:
    service = target.open()
    store = SessionStore(service, clock=lambda: 1)
    sessions = [store.create(f"w{index}-s{number}") for number in range(params.sessions_per_writer)]
    for session in sessions:
        session.flush()

    def prepare(position: int, round_number: int) -> Callable[[], None]:
        append_batch(sessions[position], params, round_number * params.events_per_flush)
        return sessions[position].flush

    timed_writer_rounds(params, len(sessions), start, results, prepare)
    store.close_all()
    close(service)


def floor_writer(target: Target, params: Params, index: int, start: Any, results: Any) -> None:
    """The same batches, written without the store (see the module docstring)."""
    session_ids = [f"w{index}-s{number}" for number in range(params.sessions_per_writer)]
    if target.backend == "file":
        paths = [os.path.join(target.where, f"floor-{session_id}.jsonl") for session_id in session_ids]
        fds = [os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600) for path in paths]

        def write(position: int, first: int, texts: list[str]) -> None:
            os.write(fds[position], "".join(text + "\n" for text in texts).encode("utf-8"))
            os.fsync(fds[position])

    elif target.backend == "sqlite":
        conn = sqlite3.connect(target.where, isolation_level=None, timeout=30)
        conn.execute("PRAGMA synchronous = FULL")

        def write(position: int, first: int, texts: list[str]) -> None:
            rows = [(session_ids[position], first + offset, text) for offset, text in enumerate(texts)]
            values = ", ".join(["(?, ?, ?)"] * len(rows))
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(
                f"INSERT INTO floor_events (session, seq, event) VALUES {values}",
                [v for row in rows for v in row],
            )
            conn.execute("COMMIT")

    else:
        import psycopg

        pg = psycopg.connect(target.where, autocommit=True)
        pg.execute("SET synchronous_commit = on")

        def write(position: int, first: int, texts: list[str]) -> None:
            rows = [(session_ids[position], first + offset, text) for offset, text in enumerate(texts)]
            values = ", ".join(["(%s, %s, %s)"] * len(rows))
            with pg.transaction():
                pg.execute(
                    f"INSERT INTO {target.schema}.floor_events (session, seq, event) VALUES {values}",
                    [v for row in rows for v in row],
                )

    def prepare(position: int, round_number: int) -> Callable[[], None]:
        first = round_number * params.events_per_flush
        texts = batch_texts(params, session_ids[position], first)
        return lambda: write(position, first, texts)

    timed_writer_rounds(params, len(session_ids), start, results, prepare)


def store_reader(target: Target, params: Params, index: int, start: Any, results: Any, stop: Any) -> None:
    store = target.open()
    session_ids = [f"r{number}" for number in range(params.reader_sessions)]
    reads = 0
    start.wait()
    began = time.perf_counter()
    while not stop.is_set():
        store.read(session_ids[reads % len(session_ids)])
        reads += 1
    results.put(("reader", time.perf_counter() - began, reads, []))
    close(store)


def floor_reader(target: Target, params: Params, index: int, start: Any, results: Any, stop: Any) -> None:
    start.wait()
    results.put(("reader", 1.0, 0, []))


# --- a run -----------------------------------------------------------------------------------------


def prepare(target: Target, params: Params) -> None:
    """The sessions the readers read and the one that is resumed, stored before the timing starts;
    the floor's bare table."""
    service = target.open()
    store = SessionStore(service, clock=lambda: 1)
    for number in range(params.reader_sessions):
        session = store.create(f"r{number}")
        append_batch(session, params, 0)
        session.flush()
    big = store.create("resume-me")
    for first in range(0, params.resume_events, params.events_per_flush):
        append_batch(big, params, first)
    big.append("turn/start", {"turn": 10**6})  # left open: the resume writes closers
    store.close_all()
    close(service)  # nothing open may be inherited by the forked workers
    if target.backend == "sqlite":
        with sqlite3.connect(target.where) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS floor_events (session TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, PRIMARY KEY (session, seq)) WITHOUT ROWID"
            )
    if target.backend == "postgres":
        import psycopg

        with psycopg.connect(target.where, autocommit=True) as conn:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {target.schema}.floor_events (session text NOT NULL, seq bigint NOT NULL, event text NOT NULL, PRIMARY KEY (session, seq))"
            )


def resume_once(target: Target, results: Any) -> None:
    store = target.open()
    sessions = SessionStore(store, clock=lambda: 2)
    began = time.perf_counter()
    sessions.resume("resume-me")
    results.put(time.perf_counter() - began)
    close(store)  # release the writer lock at once for the next resume


def measure(target: Target, params: Params, mode: str) -> Row:
    context = multiprocessing.get_context("fork")
    start = context.Barrier(params.writers + params.readers + 1)
    stop = context.Event()
    results = context.Queue()
    writer, reader = (store_writer, store_reader) if mode == "store" else (floor_writer, floor_reader)
    processes = [
        context.Process(target=writer, args=(target, params, index, start, results))
        for index in range(params.writers)
    ]
    processes += [
        context.Process(target=reader, args=(target, params, index, start, results, stop))
        for index in range(params.readers)
    ]
    for process in processes:
        process.start()
    start.wait()
    began = time.perf_counter()
    writer_results: list[Any] = []
    reader_results: list[Any] = []
    while len(writer_results) < params.writers:  # a reader may report first (the floor's do at once)
        result = results.get(timeout=600)
        (writer_results if result[0] == "writer" else reader_results).append(result)
    wall = time.perf_counter() - began
    stop.set()
    while len(reader_results) < params.readers:
        reader_results.append(results.get(timeout=600))
    for process in processes:
        process.join(timeout=60)
        if process.exitcode != 0:
            raise RuntimeError(f"a {mode} worker of {target.backend} failed (exit {process.exitcode})")
    latencies = sorted(latency for result in writer_results for latency in result[3])
    events = sum(result[2] for result in writer_results)
    row = Row(target.backend, mode, events_per_s=events / wall)
    row.flush_p50_ms = 1000 * latencies[len(latencies) // 2]
    row.flush_p99_ms = 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    if mode == "store":
        row.reads_per_s = sum(result[2] for result in reader_results) / wall if params.readers else None
        timings = []
        for _ in range(3):
            process = context.Process(target=resume_once, args=(target, results))
            process.start()
            timings.append(results.get(timeout=600))
            process.join()
        row.resume_ms = 1000 * statistics.median(timings)
    return row


def postgres_target(dsn: str | None, cleanups: list[Callable[[], None]]) -> Target | str:
    """A target on ``dsn``, or on a throwaway cluster; a sentence when neither is possible."""
    if not dsn:
        from scripts.pg_cluster import PgCluster, why_unavailable

        reason = why_unavailable()
        if reason is not None:
            return f"no --postgres-dsn, and no cluster can be started: {reason}"
        cluster = PgCluster()
        cleanups.append(cluster.destroy)
        cluster.start()
        dsn = cluster.dsn
    schema = f"bench_{secrets.token_hex(4)}"

    def drop() -> None:
        from reference.persistence.postgres import PostgresStore

        store = PostgresStore(dsn, schema)
        store.drop_schema()
        store.close()

    cleanups.append(drop)
    return Target("postgres", dsn, schema)


def format_table(rows: list[Row], skipped: dict[str, str]) -> str:
    header = f"{'backend':<9} {'mode':<6} {'events/s':>10} {'flush p50 ms':>13} {'flush p99 ms':>13} {'reads/s':>9} {'resume ms':>10}"
    lines = [header, "-" * len(header)]
    for row in rows:
        reads = "" if row.reads_per_s is None else f"{row.reads_per_s:9.1f}"
        resume = "" if row.resume_ms is None else f"{row.resume_ms:10.1f}"
        lines.append(
            f"{row.backend:<9} {row.mode:<6} {row.events_per_s:10.0f} {row.flush_p50_ms:13.2f} {row.flush_p99_ms:13.2f} {reads:>9} {resume:>10}"
        )
    for backend, reason in skipped.items():
        lines.append(f"{backend:<9} not run: {reason}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    defaults = Params()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=value)
    parser.add_argument(
        "--backends", default=",".join(BACKENDS), help="comma-separated, of file, sqlite, postgres"
    )
    parser.add_argument("--postgres-dsn", default=os.environ.get("DSH_POSTGRES_DSN"))
    parser.add_argument("--json", type=Path, default=Path("bench-backends.json"), metavar="PATH")
    args = parser.parse_args(argv)
    params = Params(**{name: getattr(args, name) for name in asdict(defaults)})
    chosen = [name for name in args.backends.split(",") if name]
    unknown = sorted(set(chosen) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backends: {', '.join(unknown)}")
    work = Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    cleanups: list[Callable[[], None]] = [lambda: shutil.rmtree(work, ignore_errors=True)]
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    try:
        for backend in chosen:
            if backend == "file":
                (work / "files").mkdir()
                target: Target | str = Target("file", str(work / "files"))
            elif backend == "sqlite":
                target = Target("sqlite", str(work / "sessions.sqlite3"))
            else:
                target = postgres_target(args.postgres_dsn, cleanups)
            if isinstance(target, str):
                skipped[backend] = target
                continue
            prepare(target, params)
            rows.append(measure(target, params, "store"))
            rows.append(measure(target, params, "floor"))
    finally:
        for cleanup in reversed(cleanups):
            try:
                cleanup()
            except Exception as error:
                print(f"bench: clean-up failed: {error}", file=sys.stderr)
    table = format_table(rows, skipped)
    print(table)
    report = {
        "params": asdict(params),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(),
        },
        "rows": [asdict(row) for row in rows],
        "not_run": skipped,
    }
    args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"JSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
