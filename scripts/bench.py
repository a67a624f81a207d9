"""Benchmark: the reference's resume, append, fork and check, each beside its floor (issue 14).

For each size N (events), a realistic v4 log is built through the reference's own API
(``SessionStore`` + ``FileStore``, a zstd frame per ~100 events): turns with user prompts, steps
with streamed chunks and assistant messages of 300-1,000 characters that call tools, tool calls and
results, and one prune per turn (``compaction/prune`` then a single-node ``tool/result`` replace).
Then every operation is timed next to the floor it is compared with, in the same process, each the
minimum of 3 runs, CPU time and wall time both (the machine may be shared: the CPU-time ratios are
the ones to read when the load average is high; fsync-bound rows need the wall ratio):

=====================  =================================================================
operation              floor
=====================  =================================================================
resume (zstd)          read + decompress + ``json.loads`` per line (and ``orjson.loads``)
append 100 + flush     SQLite WAL, ``synchronous=FULL``, 100 rows then commit
append() per event     (none: the mean µs per event, to compare across sizes)
fork (seed = log)      re-parsing the whole plaintext with ``json.loads``
fork child publish     compress the child's plaintext, write a new file, fsync
dsh-session check      ``python -c`` read + decompress + ``json.loads`` (both wall, CLI)
check_log alone        ``json.loads`` of every line of the plaintext
resumed memory         the plain (uncompressed) log's bytes
=====================  =================================================================

Each group of operations runs in its own subprocess (``--worker``), whose peak RSS is reported;
the memory row is a subprocess of its own that resumes once and reports its resident growth.

Usage::

    python -m scripts.bench                        # N = 10k and 100k (about 4 minutes)
    python -m scripts.bench --sizes 10000,100000,1000000 --json bench.json
    python -m scripts.bench --sizes 200 --runs 1   # smoke (what tests/test_bench_smoke.py runs)

``--logs DIR`` keeps the built logs in DIR and reuses them on the next run (a 1M log takes a few
minutes to build), so two commits can be compared on the very same bytes.
"""

from __future__ import annotations

import argparse
import gc
import io
import itertools
import json
import os
import random
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import zstandard

from conformance.builders import ABSENT_FLAG, tool_result, user_message
from reference.persistence.filestore import FileStore
from reference.session import Session
from reference.store import SessionStore
from spec.log.events import event_data
from spec.log.json import int_field
from spec.log.session import ABSENT

ROOT = Path(__file__).resolve().parent.parent

try:
    import orjson  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # the orjson floor is optional
    orjson = None

SESSION_ID = "bench"
CWD = "/work/bench"
GENERATOR_VERSION = 1  # bump when the generated log changes, so cached logs are rebuilt
FLUSH_EVERY = 100  # events per flush (one zstd frame each) while building
APPEND_BATCH = 100  # events per "append 100 + flush"
PER_EVENT_APPENDS = 3000  # events per run of the append() timing
START_TIME = 1_700_000_000_000  # ms, the first event's time
WORDS = [
    "the",
    "file",
    "holds",
    "a",
    "function",
    "that",
    "reads",
    "config",
    "and",
    "returns",
    "values",
    "from",
    "the",
    "cache",
    "when",
    "present",
    "otherwise",
    "it",
    "parses",
    "every",
    "line",
    "again",
    "checks",
    "each",
    "record",
    "and",
    "writes",
    "résumé",
    "notes",
    "for",
    "the",
    "next",
    "step",
    "of",
    "the",
    "plan",
]


# --- a realistic log ---------------------------------------------------------------------------


def text_of(rng: random.Random, low: int = 300, high: int = 1000) -> str:
    """Prose of ``low``-``high`` characters (mostly ASCII; a word with an accent now and then)."""
    target = rng.randint(low, high)
    parts: list[str] = []
    length = 0
    while length < target:
        word = rng.choice(WORDS)
        parts.append(word)
        length += len(word) + 1
    return " ".join(parts)[:target]


class TurnWriter:
    """Appends whole turns to a session: a prompt, three steps (request context, four streamed
    chunks, an assistant message; the first two call a tool, logged then answered), and a prune of
    a tool result from three turns back (its ``compaction/prune``, then the single-node replace)."""

    def __init__(
        self,
        session: Session,
        turn: int,
        on_event: Callable[[], None] = lambda: None,
        texts: list[str] | None = None,
    ) -> None:
        self.session = session
        self.turn = turn
        self.rng = random.Random(turn)
        self.results: dict[int, list[tuple[int, Any]]] = {}  # turn -> [(seq, data)] of its results
        self.on_event = on_event
        self.texts = texts  # when given, prose is taken from here (so that timing leaves out its making)
        self.next_text = 0

    def text(self, low: int = 300, high: int = 1000) -> str:
        if self.texts is None:
            return text_of(self.rng, low, high)
        self.next_text = (self.next_text + 1) % len(self.texts)
        return self.texts[self.next_text][: high if high < 300 else None]

    def add(self, kind: str, data: Any, surface_op: Any = None, sources: Any = None) -> int:
        seq = self.session.seq
        self.session.append(kind, data, absent_if_none(surface_op), absent_if_none(sources))
        self.on_event()
        return seq

    def events(self) -> Iterator[None]:
        """One event per step of the iteration, turn after turn, forever."""
        while True:
            yield from self._turn()

    def _turn(self) -> Iterator[None]:
        self.turn += 1
        turn = self.turn
        self.add("turn/start", {"turn": turn})
        yield
        self.add("user/message", user_message(f"u{turn}", self.text()), "append")
        yield
        for step in (1, 2, 3):
            self.add("step/start", {"turn": turn, "step": step})
            yield
            self.add("request/context", {"turn": turn, "step": step, "tokens": 900 * step + turn})
            yield
            for index in range(4):
                chunk = {"type": "text-delta", "index": 0, "text": self.text(10, 40)}
                self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk, "n": index})
                yield
            call_id = f"call-{turn}-{step}"
            content: list[Any] = [{"type": "text", "text": self.text()}]
            if step < 3:
                arguments = json.dumps({"path": f"src/module_{turn % 97}.py", "limit": 200})
                content.append(
                    {"type": "tool-call", "id": call_id, "name": "read_file", "arguments": arguments}
                )
            answer = {
                "id": f"a{turn}-{step}",
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
                "usage": {"input": 1200 * step, "output": 300, "cacheRead": 0.5},
            }
            self.add("assistant/message", {"turn": turn, "step": step, "message": answer}, "append")
            yield
            if step < 3:
                call = self.add(
                    "tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "read_file"}
                )
                yield
                data: dict[str, Any] = tool_result(call_id, self.text(), ABSENT_FLAG, turn, step)
                seq = self.add("tool/result", data, "append", [call])
                self.results.setdefault(turn, []).append((seq, data))
                yield
            self.add("step/end", {"turn": turn, "step": step})
            yield
        old = self.results.pop(turn - 3, None)
        if old:
            seq, data = old[0]
            message = data["message"]
            block = message["content"][0]
            pruned = {**block, "content": [{"type": "text", "text": "[pruned: 1 block]"}]}
            replacement = {**data, "message": {**message, "content": [pruned]}}
            metering = {
                "shadowedRange": {"start": seq, "end": seq},
                "shadowedSeqs": [seq],
                "shadowedTokenCount": 150,
            }
            self.add("compaction/prune", metering)
            yield
            self.add("tool/result", replacement, {"op": "replace", "start": seq, "end": seq}, [seq])
            yield
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        yield


def last_turn(session: Session) -> int:
    for event in reversed(session.events):
        if event["type"] == "turn/start":
            return int_field(event_data(event), "turn")
    return 0


def build_log(root: Path, events: int) -> Path:
    """A log of exactly ``events`` events under ``root``; the last one is the end-seed a first
    resume writes, so that every later resume and check reads the same bytes and repairs nothing."""
    ticks = itertools.count(START_TIME)
    store = SessionStore(FileStore(str(root)), clock=lambda: next(ticks))
    session = store.create(SESSION_ID, meta={"cwd": CWD})
    pending = [0]

    def flush_now_and_then() -> None:
        pending[0] += 1
        if pending[0] >= FLUSH_EVERY:
            session.flush()
            pending[0] = 0

    steps = TurnWriter(session, 0, flush_now_and_then).events()
    while session.seq < events - 40 or session.events[-1]["type"] != "turn/end":
        next(steps)
    while session.seq < events - 1:
        session.append("session/title", {"title": f"filler {session.seq}"})
    store.close(SESSION_ID)
    store = SessionStore(FileStore(str(root)), clock=lambda: next(ticks))
    store.resume(SESSION_ID)  # writes the end-seed, event number ``events``
    store.close(SESSION_ID)
    path = FileStore(str(root)).locate(SESSION_ID)
    assert path is not None and path.endswith(".jsonl.zstd")
    return Path(path)


def absent_if_none(value: Any) -> Any:
    """``value``, or ``ABSENT`` (the key left out of the event) for ``None``."""
    return ABSENT if value is None else value


# --- measuring -----------------------------------------------------------------------------------


class Timing:
    """The minimum CPU and wall seconds over the runs of one operation."""

    def __init__(self) -> None:
        self.cpu = float("inf")
        self.wall = float("inf")

    def run(self, action: Callable[[], Any]) -> Any:
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        result = action()
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        self.cpu, self.wall = min(self.cpu, cpu), min(self.wall, wall)
        return result

    def as_json(self, divide: int = 1) -> dict[str, float]:
        return {"cpu": self.cpu / divide, "wall": self.wall / divide}


def plaintext_of(path: Path) -> bytes:
    with open(path, "rb") as file:
        data = file.read()
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    return bytes(reader.read())


def floor_json(path: Path) -> int:
    """Read the file, decompress its frames, ``json.loads`` every line."""
    lines = plaintext_of(path).split(b"\n")
    return len([json.loads(line) for line in lines if line])


def floor_orjson(path: Path) -> int:
    assert orjson is not None, "measured only when orjson is installed"
    lines = plaintext_of(path).split(b"\n")
    return len([orjson.loads(line) for line in lines if line])


def resume_once(root: Path) -> int:
    store = SessionStore(FileStore(str(root)))
    count = len(store.resume(SESSION_ID).events)
    store.close(SESSION_ID)
    return count


def worker_resume(root: Path, path: Path, runs: int) -> dict[str, Any]:
    resume, stdlib, fast = Timing(), Timing(), Timing()
    for _ in range(runs):
        stdlib.run(lambda: floor_json(path))
        if orjson is not None:
            fast.run(lambda: floor_orjson(path))
        resume.run(lambda: resume_once(root))
    out = {"resume": resume.as_json(), "floor_json": stdlib.as_json()}
    if orjson is not None:
        out["floor_orjson"] = fast.as_json()
    return out


def write_floor(plain: bytes, target: Path) -> None:
    """The floor of a fork's publish: compress the child's plaintext and write and fsync it once."""
    data = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(plain)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def worker_fork(root: Path, path: Path, runs: int) -> dict[str, Any]:
    store = SessionStore(FileStore(str(root)))
    parent = store.resume(SESSION_ID)
    plaintext = plaintext_of(path)
    fork, reparse, publish, floor = Timing(), Timing(), Timing(), Timing()
    scratch = root / "publish-floor"
    scratch.mkdir(exist_ok=True)
    for run in range(runs):
        reparse.run(lambda: [json.loads(line) for line in plaintext.split(b"\n") if line])
        child = fork.run(partial(store.fork, parent, child_id=f"child-{run}"))
        publish.run(child.flush)
        child_path = FileStore(str(root)).locate(child.id)
        assert child_path is not None
        child_plain = plaintext_of(Path(child_path))
        floor.run(partial(write_floor, child_plain, scratch / f"floor-{run}.zstd"))
        store.close(child.id)
        shutil.rmtree(Path(child_path).parent)
    store.close(SESSION_ID)
    return {
        "fork": fork.as_json(),
        "floor_reparse": reparse.as_json(),
        "publish": publish.as_json(),
        "floor_compress_fsync": floor.as_json(),
    }


def worker_append(root: Path, path: Path, runs: int) -> dict[str, Any]:
    ticks = itertools.count(START_TIME * 2)
    store = SessionStore(FileStore(str(root)), clock=lambda: next(ticks))
    session = store.resume(SESSION_ID)
    prose = random.Random(0)
    texts = [text_of(prose) for _ in range(512)]  # made before the timing starts
    steps = TurnWriter(session, last_turn(session), texts=texts).events()
    batch, per_event = Timing(), Timing()

    def append_and_flush() -> None:
        for _ in range(APPEND_BATCH):
            next(steps)
        session.flush()

    def appends() -> None:
        for _ in range(PER_EVENT_APPENDS):
            next(steps)

    for _ in range(runs):
        batch.run(append_and_flush)
    for _ in range(runs):
        per_event.run(appends)
    session.flush()
    recent = [json.dumps(event, ensure_ascii=False) for event in session.events[-APPEND_BATCH:]]
    store.close(SESSION_ID)
    floor = Timing()
    database = sqlite3.connect(root / "floor.sqlite", isolation_level=None)
    database.execute("PRAGMA journal_mode=WAL")
    database.execute("PRAGMA synchronous=FULL")
    database.execute("CREATE TABLE events (session TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session, seq))")
    database.execute("BEGIN")
    database.executemany(
        "INSERT INTO events VALUES (?, ?, ?)",
        ((SESSION_ID, seq, line.decode()) for seq, line in enumerate(plaintext_of(path).split(b"\n")[1:-1])),
    )
    database.execute("COMMIT")
    next_seq = itertools.count(10**9)

    def sqlite_batch() -> None:
        database.execute("BEGIN")
        for body in recent:
            database.execute("INSERT INTO events VALUES (?, ?, ?)", (SESSION_ID, next(next_seq), body))
        database.execute("COMMIT")

    for _ in range(runs):
        floor.run(sqlite_batch)
    database.close()
    return {
        "append_flush": batch.as_json(),
        "floor_sqlite": floor.as_json(),
        "append_per_event": per_event.as_json(PER_EVENT_APPENDS),
    }


def worker_check(root: Path, path: Path, runs: int) -> dict[str, Any]:
    from reference.persistence.filestore import load_log
    from spec.checks.log import check_log

    loaded = load_log(None, path.read_bytes(), True)
    events = (*loaded.events, *loaded.recovered)
    plaintext = plaintext_of(path)
    check, parse = Timing(), Timing()
    violations = ()
    for _ in range(runs):
        parse.run(lambda: [json.loads(line) for line in plaintext.split(b"\n") if line])
        violations = check.run(lambda: check_log(events, loaded.header))
    assert not violations, violations[:3]
    return {"check_log": check.as_json(), "floor_parse": parse.as_json()}


def worker_memory(root: Path, path: Path, runs: int) -> dict[str, Any]:
    """Resident growth of one resume: RSS with the session live minus RSS before it."""
    gc.collect()
    before = current_rss()
    store = SessionStore(FileStore(str(root)))
    session = store.resume(SESSION_ID)
    gc.collect()
    after = current_rss()
    assert len(session.events) > 0
    return {"resident_bytes": after - before, "plain_bytes": len(plaintext_of(path))}


# --- profiles (--profile): where the time and the memory of one operation go ---------------------


def profiled_operation(name: str, root: Path, path: Path) -> Callable[[], Any]:
    """The operation ``--profile NAME`` runs once under cProfile, set up outside the profile."""
    if name == "resume":
        return lambda: resume_once(root)
    if name == "check":
        from reference.persistence.filestore import load_log
        from spec.checks.log import check_log

        loaded = load_log(None, path.read_bytes(), True)
        events = (*loaded.events, *loaded.recovered)
        return lambda: check_log(events, loaded.header)
    ticks = itertools.count(START_TIME * 2)
    store = SessionStore(FileStore(str(root)), clock=lambda: next(ticks))
    session = store.resume(SESSION_ID)
    if name == "fork":

        def fork_and_publish() -> None:
            child = store.fork(session, child_id="profiled-child")
            child.flush()

        return fork_and_publish
    if name == "append":
        texts = [text_of(random.Random(0)) for _ in range(512)]
        steps = TurnWriter(session, last_turn(session), texts=texts).events()

        def batches() -> None:  # PROFILED_BATCHES times "append 100 + flush"
            for _ in range(PROFILED_BATCHES):
                for _ in range(APPEND_BATCH):
                    next(steps)
                session.flush()

        return batches
    raise ValueError(f"no profile for {name!r}; choose from {', '.join(PROFILES)}")


PROFILES = ("resume", "fork", "append", "check", "memory")
PROFILED_BATCHES = 20


def profile_report(profile: Any, seconds: float, top: int) -> str:
    """The ``top`` functions by own time, with their share of the profiled total and their
    cumulative share; file names relative to the repository."""
    import pstats

    stats: Any = pstats.Stats(profile)
    total = sum(entry[2] for entry in stats.stats.values()) or 1.0
    rows = sorted(stats.stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    lines = [f"cpu {seconds:.3f} s, profiled (wall) time {total:.3f} s; shares are of the profiled time", ""]
    lines.append(f"{'own':>6} {'cum':>6} {'calls':>9}  function")
    for (file, line, function), (_, calls, own, cumulative, _) in rows:
        where = file.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "")
        lines.append(f"{own / total:6.1%} {cumulative / total:6.1%} {calls:9d}  {function} ({where}:{line})")
    return "\n".join(lines)


def memory_census(root: Path, path: Path) -> str:
    """What a resumed session's memory is made of: every object reachable from the session (its
    log, surface, caches and sink; classes, modules and functions left out), counted once, by
    type, with ``sys.getsizeof`` bytes, beside the plain log's bytes."""
    import types

    store = SessionStore(FileStore(str(root)))
    session = store.resume(SESSION_ID)
    skipped = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)
    seen: set[int] = set()
    by_type: dict[str, list[int]] = {}
    stack: list[Any] = [session]
    while stack:
        value = stack.pop()
        if id(value) in seen or isinstance(value, skipped):
            continue
        seen.add(id(value))
        tally = by_type.setdefault(type(value).__name__, [0, 0])
        tally[0] += 1
        tally[1] += sys.getsizeof(value)
        stack.extend(gc.get_referents(value))
    plain = len(plaintext_of(path))
    total = sum(size for _, size in by_type.values())
    lines = [
        f"{len(session.events)} events; plain log {plain / 1e6:.1f} MB; objects reachable from the "
        f"session {total / 1e6:.1f} MB ({total / plain:.2f}x the plain log)",
        "",
        f"{'type':<16} {'objects':>10} {'MB':>9} {'share':>6} {'x plain':>8}",
    ]
    for name, (count, size) in sorted(by_type.items(), key=lambda item: item[1][1], reverse=True)[:12]:
        lines.append(f"{name:<16} {count:10d} {size / 1e6:9.1f} {size / total:6.1%} {size / plain:8.2f}")
    return "\n".join(lines)


def profile_worker(name: str, root: Path, path: Path, top: int) -> str:
    if name == "memory":
        return memory_census(root, path)
    import cProfile

    operation = profiled_operation(name, root, path)
    profile = cProfile.Profile()
    gc.collect()
    started = time.process_time()
    profile.enable()
    operation()
    profile.disable()
    return profile_report(profile, time.process_time() - started, top)


def profile_size(logs: Path, events: int, name: str, top: int) -> str:
    """Build (or reuse) the log of ``events`` events and profile ``name`` on a copy of it, in a
    subprocess of its own."""
    folder, _ = cached_log(logs, events)
    output, _ = run_on_copy(folder, "--profile-worker", name, str(top))
    return output


WORKERS: dict[str, Callable[[Path, Path, int], dict[str, Any]]] = {
    "resume": worker_resume,
    "fork": worker_fork,
    "append": worker_append,
    "check": worker_check,
    "memory": worker_memory,
}


def current_rss() -> int:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_child(command: list[str]) -> tuple[str, float, float, int]:
    """Run a command; its stdout, wall seconds, CPU seconds (user + system) and peak RSS (bytes)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT)
    assert process.stdout is not None
    output = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if process.returncode not in (0, 1):
        raise RuntimeError(f"{command} exited {process.returncode}")
    return output, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


FLOOR_CHECK = (
    "import io, json, sys, zstandard\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "plain = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True).read()\n"
    "print(len([json.loads(line) for line in plain.split(b'\\n') if line]))\n"
)


def measure_cli(path: Path, runs: int) -> dict[str, Any]:
    check, floor = Timing(), Timing()
    peak = {"check_cli": 0, "floor_cli": 0}
    for _ in range(runs):
        for name, timing, command in (
            ("floor_cli", floor, [sys.executable, "-c", FLOOR_CHECK, str(path)]),
            ("check_cli", check, [sys.executable, "-m", "reference", "check", str(path)]),
        ):
            _, wall, cpu, rss = run_child(command)
            timing.cpu, timing.wall = min(timing.cpu, cpu), min(timing.wall, wall)
            peak[name] = max(peak[name], rss)
    return {"check_cli": check.as_json(), "floor_cli": floor.as_json(), "peak_rss": peak}


def cached_log(logs: Path, events: int) -> tuple[Path, float | None]:
    """The folder holding the log of ``events`` events under ``logs``, built unless a finished one
    is there; and the seconds the build took (``None`` when it was reused)."""
    folder = logs / f"n{events}-g{GENERATOR_VERSION}"
    if (folder / "done").exists():
        return folder, None
    shutil.rmtree(folder, ignore_errors=True)
    start = time.perf_counter()
    # In a subprocess: a child inherits its parent's peak RSS across fork and exec, so the
    # process that spawns the measurements must stay small.
    run_child([sys.executable, "-m", "scripts.bench", "--build", str(folder / "log"), str(events)])
    built = time.perf_counter() - start
    (folder / "done").write_text("")
    return folder, built


def run_on_copy(folder: Path, flag: str, name: str, last: str) -> tuple[str, int]:
    """``bench.py FLAG NAME ROOT PATH LAST`` in a subprocess, on a scratch copy of the folder's
    log (so no run sees another's writes); its stdout and peak RSS."""
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-{name}-", dir=folder))
    try:
        shutil.copytree(folder / "log", scratch / "log")
        copy = Path(FileStore(str(scratch / "log")).locate(SESSION_ID) or "")
        output, _, _, rss = run_child(
            [sys.executable, "-m", "scripts.bench", flag, name, str(scratch / "log"), str(copy), last]
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return output, rss


def measure_size(logs: Path, events: int, runs: int, workers: list[str]) -> dict[str, Any]:
    folder, built = cached_log(logs, events)
    path = Path(FileStore(str(folder / "log")).locate(SESSION_ID) or "")
    result: dict[str, Any] = {
        "events": events,
        "build_seconds": built,
        "file_bytes": path.stat().st_size,
        "peak_rss": {},
    }
    for name in workers:
        if name == "cli":
            cli = measure_cli(path, runs)
            result["peak_rss"].update(cli.pop("peak_rss"))
            result.update(cli)
            continue
        output, rss = run_on_copy(folder, "--worker", name, str(runs))
        result.update(json.loads(output))
        result["peak_rss"][name] = rss
        print(f"  {events}: {name} done", file=sys.stderr, flush=True)
    return result


# --- the report ----------------------------------------------------------------------------------

ROWS = (
    ("resume (zstd)", "resume", "floor_json", "decompress + json.loads"),
    ("resume (zstd)", "resume", "floor_orjson", "decompress + orjson.loads"),
    ("append 100 + flush", "append_flush", "floor_sqlite", "SQLite WAL FULL, commit/100"),
    ("append() per event", "append_per_event", None, "-"),
    ("fork (seed = log)", "fork", "floor_reparse", "re-parse the whole log"),
    ("fork child publish", "publish", "floor_compress_fsync", "compress + write + fsync"),
    ("dsh-session check", "check_cli", "floor_cli", "python -c decompress+loads"),
    ("check_log alone", "check_log", "floor_parse", "json.loads per line"),
)


def format_seconds(value: float) -> str:
    if value < 1e-3:
        return f"{value * 1e6:7.1f} µs"
    if value < 1:
        return f"{value * 1e3:7.1f} ms"
    return f"{value:7.2f} s "


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        f"{'operation':<20} {'N':>8} {'wall':>10} {'cpu':>10} {'floor wall':>10} {'floor cpu':>10} "
        f"{'×cpu':>6} {'×wall':>6}  floor"
    ]
    for label, op, floor, floor_text in ROWS:
        for result in results:
            if op not in result or (floor is not None and floor not in result):
                continue
            mine = result[op]
            cells = [
                f"{label:<20}",
                f"{result['events']:>8}",
                format_seconds(mine["wall"]),
                format_seconds(mine["cpu"]),
            ]
            if floor is None:
                cells += [f"{'':>10}", f"{'':>10}", f"{'':>6}", f"{'':>6}"]
            else:
                base = result[floor]
                cells += [format_seconds(base["wall"]), format_seconds(base["cpu"])]
                cells += [
                    f"{mine['cpu'] / max(base['cpu'], 1e-9):6.2f}",
                    f"{mine['wall'] / max(base['wall'], 1e-9):6.2f}",
                ]
            lines.append(" ".join(cells) + f"  {floor_text}")
    for result in results:
        if "resident_bytes" in result:
            ratio = result["resident_bytes"] / result["plain_bytes"]
            lines.append(
                f"{'resumed memory':<20} {result['events']:>8} {result['resident_bytes'] / 1e6:8.1f} MB resident, "
                f"plain log {result['plain_bytes'] / 1e6:.1f} MB: {ratio:.2f}×"
            )
    for result in results:
        peaks = ", ".join(f"{name} {rss / 1e6:.0f} MB" for name, rss in result["peak_rss"].items())
        lines.append(f"peak RSS at {result['events']}: {peaks}")
    return "\n".join(lines)


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", default="10000,100000", help="comma-separated event counts (1000000 takes long)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement; the minimum is reported")
    parser.add_argument("--logs", type=Path, default=None, help="keep built logs here and reuse them")
    parser.add_argument("--json", type=Path, default=None, help="write the results as JSON to this path")
    parser.add_argument(
        "--only",
        default=",".join([*WORKERS, "cli"]),
        help="comma-separated groups: " + ", ".join([*WORKERS, "cli"]),
    )
    parser.add_argument(
        "--profile",
        choices=PROFILES,
        help="instead of the table: where one operation's time goes (cProfile, once, on each size), "
        "or for memory what a resumed session's objects are",
    )
    parser.add_argument(
        "--peer",
        choices=("dsh",),
        help="instead of the table: the reference beside DSH itself on logs DSH wrote "
        "(scripts/bench_peer.py; needs bash scripts/install-dsh.sh)",
    )
    parser.add_argument(
        "--appends", type=int, default=10_000, help="with --peer: events in the append row (flush every 100)"
    )
    parser.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    parser.add_argument("--worker", nargs=4, metavar=("NAME", "ROOT", "PATH", "RUNS"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile-worker", nargs=4, metavar=("NAME", "ROOT", "PATH", "TOP"), help=argparse.SUPPRESS
    )
    parser.add_argument("--build", nargs=2, metavar=("ROOT", "EVENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build:
        build_log(Path(args.build[0]), int(args.build[1]))
        return 0
    if args.worker:
        name, root, path, runs = args.worker
        print(json.dumps(WORKERS[name](Path(root), Path(path), int(runs))))
        return 0
    if args.profile_worker:
        name, root, path, top = args.profile_worker
        print(profile_worker(name, Path(root), Path(path), int(top)))
        return 0
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.peer:
        from scripts.bench_peer import peer_main, peer_profile

        if args.profile:
            return peer_profile(sizes, args.profile, args.logs, args.top)

        return peer_main(sizes, args.runs, args.logs, args.json, args.appends)
    workers = args.only.split(",")
    logs = args.logs or Path(tempfile.mkdtemp(prefix="bench-logs-"))
    logs.mkdir(parents=True, exist_ok=True)
    if args.profile:
        try:
            for size in sizes:
                print(f"--- {args.profile} at {size} events (commit {git_commit()})")
                print(profile_size(logs, size, args.profile, args.top))
        finally:
            if args.logs is None:
                shutil.rmtree(logs, ignore_errors=True)
        return 0
    load_before = os.getloadavg()
    started = time.perf_counter()
    try:
        results = [measure_size(logs, size, args.runs, workers) for size in sizes]
    finally:
        if args.logs is None:
            shutil.rmtree(logs, ignore_errors=True)
    load_after = os.getloadavg()
    print(report(results))
    print(
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; "
        f"{time.perf_counter() - started:.0f} s; commit {git_commit()}; orjson {'yes' if orjson else 'no'}"
    )
    if args.json is not None:
        payload = {
            "commit": git_commit(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "python": sys.version.split()[0],
            "load_average": {"before": load_before, "after": load_after},
            "runs": args.runs,
            "results": results,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    raise SystemExit(main())
