"""Benchmark: resuming a 100,000-event session from ``session.v4.jsonl.zstd``.

Builds a session of realistic events (turns with prompts, steps, streamed chunks, assistant
messages calling tools, tool calls and results) through ``SessionStore`` and ``FileStore``,
flushing every ~100 events so the file holds one zstd frame per flush, then times, one run each:

1. resume: a fresh ``FileStore`` + ``SessionStore.resume`` of that session;
2. baseline: reading the file, decompressing every frame and ``json.loads`` of every line.

Usage::

    python3 -m scripts.bench_resume [--events N] [--flush-every K] [--root DIR] [--profile]

``--profile`` runs the resume a second time under cProfile and prints where the time goes.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zstandard

from conformance.builders import ABSENT_FLAG, tool_result, user_message
from reference.persistence.filestore import FileStore
from reference.session import Session
from reference.store import SessionStore
from scripts.bench import absent_if_none, sealed_log

SESSION_ID = "bench"
CWD = "/work/bench"


def text_of(turn: int, step: int, length: int) -> str:
    words = ("the", "file", "holds", "a", "function", "that", "reads", "config", "and", "returns", "values")
    return " ".join(words[(turn * 7 + step * 3 + i) % len(words)] for i in range(length))


class Writer:
    """Appends a realistic mix and flushes every ``flush_every`` events."""

    def __init__(self, session: Session, flush_every: int) -> None:
        self.session = session
        self.flush_every = flush_every
        self.since_flush = 0

    def add(self, kind: str, data: Any, surface_op: Any = None, sources: Any = None) -> None:
        self.session.append(kind, data, absent_if_none(surface_op), absent_if_none(sources))
        self.since_flush += 1
        if self.since_flush >= self.flush_every:
            self.session.flush()
            self.since_flush = 0


def write_turn(writer: Writer, turn: int) -> None:
    """One turn: a prompt, two tool-calling steps with streamed chunks, a final answer step."""
    writer.add("turn/start", {"turn": turn})
    writer.add("user/message", user_message(f"u{turn}", text_of(turn, 0, 20)), "append")
    for step in (1, 2, 3):
        writer.add("step/start", {"turn": turn, "step": step})
        writer.add("request/context", {"turn": turn, "step": step, "tokens": 1000 * step + turn})
        for index in range(12):
            chunk = {"type": "text-delta", "index": 0, "text": text_of(turn, step + index, 4) + " "}
            writer.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})
        call_id = f"call-{turn}-{step}"
        content: list[Any] = [{"type": "text", "text": text_of(turn, step, 40)}]
        if step < 3:
            content.append(
                {
                    "type": "tool-call",
                    "id": call_id,
                    "name": "read_file",
                    "arguments": json.dumps({"path": f"src/m{turn}.py"}),
                }
            )
        message = {
            "id": f"a{turn}-{step}",
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        writer.add("assistant/message", {"turn": turn, "step": step, "message": message}, "append")
        if step < 3:
            call = writer.session.seq
            writer.add("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "read_file"})
            result = tool_result(call_id, text_of(turn, step, 120), ABSENT_FLAG, turn, step)
            writer.add("tool/result", result, "append", [call])
        writer.add("step/end", {"turn": turn, "step": step})
    writer.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def build(root: Path, events: int, flush_every: int) -> Path:
    ticks = itertools.count(1_700_000_000_000)
    store = SessionStore(FileStore(str(root)), clock=lambda: next(ticks))
    session = store.create(SESSION_ID, meta={"cwd": CWD})
    writer = Writer(session, flush_every)
    turn = 0
    while session.seq < events - 60:  # a turn is about 50 events; stop where a whole turn fits
        turn += 1
        write_turn(writer, turn)
    return sealed_log(root, store, session, events, ticks)


def baseline(path: Path) -> tuple[float, int]:
    """Read the file, decompress its frames, json.loads every line."""
    start = time.perf_counter()
    data = path.read_bytes()
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    plaintext = reader.read()
    lines = plaintext.split(b"\n")
    values = [json.loads(line) for line in lines if line]
    elapsed = time.perf_counter() - start
    return elapsed, len(values) - 1  # the header line is not an event


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--flush-every", type=int, default=100)
    parser.add_argument(
        "--root", type=Path, default=None, help="where to build the session (default: a temp dir)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="profile a second resume and print the top functions"
    )
    args = parser.parse_args()

    root = args.root or Path(tempfile.mkdtemp(prefix="bench-resume-"))
    try:
        start = time.perf_counter()
        path = build(root, args.events, args.flush_every)
        built = time.perf_counter() - start
        size = path.stat().st_size
        print(f"built {args.events} events in {built:.1f} s: {path} ({size / 1e6:.1f} MB compressed)")
        path.read_bytes()  # warm the page cache for both runs alike

        base_time, base_count = baseline(path)
        resume_time, resume_count = measure_resume(root)
        assert base_count == resume_count == args.events, (base_count, resume_count)
        print(f"baseline (decompress + json.loads): {base_time:8.3f} s  ({base_count} lines)")
        print(f"resume (FileStore + SessionStore):  {resume_time:8.3f} s  ({resume_count} events)")
        print(f"ratio resume / baseline:            {resume_time / base_time:8.2f}x")

        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            measure_resume(root)
            profiler.disable()
            stats = pstats.Stats(profiler, stream=sys.stdout)
            stats.sort_stats("tottime").print_stats(25)
            stats.sort_stats("cumulative").print_stats(30)
    finally:
        if args.root is None:
            shutil.rmtree(root, ignore_errors=True)


def measure_resume(root: Path) -> tuple[float, int]:
    """Time one resume of the built session (its log is balanced and ends with the end-seed, so
    the resume repairs nothing and closing it writes nothing)."""
    store = SessionStore(FileStore(str(root)))
    start = time.perf_counter()
    session = store.resume(SESSION_ID)
    elapsed = time.perf_counter() - start
    count = len(session.events)
    store.close(SESSION_ID)
    return elapsed, count


if __name__ == "__main__":
    main()
