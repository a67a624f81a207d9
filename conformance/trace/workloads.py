"""The ``trace`` family's workloads: what the subject is asked beneath strace (conformance/CRASH-STATES.md,
"Workloads").

- :func:`writing_workload`: the crash family's standard workload on an empty store root;
- :func:`resuming_workload`: a torn log resumed, repaired and written on, starting from the state
  :func:`torn_last_write` picks out of the writing trace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from conformance import builders as build
from conformance.builders import START_TIME
from conformance.crash import standard_workload
from conformance.model import DurableLog, ModelStore
from conformance.trace.persistence import EMPTY_TREE, Call, Cut, Disk, Tree, Write
from spec.protocol import Request

RESUME_TIME: Final = START_TIME + 1_000  # ms: the clock of the resuming workload


@dataclass(frozen=True)
class Workload:
    """Requests to run beneath strace over ``initial`` (what the store root holds at the start),
    with the spec model of the store before the first request."""

    name: str
    compressed: bool
    initial: Tree
    model: ModelStore
    requests: tuple[Request, ...]
    now: int


def writing_workload(compressed: bool, engine_append: bool = True) -> Workload:
    """The crash family's standard workload on an empty root: publish, grow across flushes, end
    inside an open turn; beside it a session created from an empty seed. For a subject without
    ``engine_append``, the same without that request (no compaction is left open)."""
    requests: tuple[Request, ...] = (
        ("reset", {"storage": "file", "compressed": compressed}),
        ("clock", {"now": START_TIME}),
        *(r for r in standard_workload() if engine_append or r[0] != "engine_append"),
    )
    label = "zstd" if compressed else "plain"
    name = f"{label}, writing" + ("" if engine_append else f" {WITHOUT_ENGINE_APPEND}")
    return Workload(name, compressed, EMPTY_TREE, ModelStore(storage="file"), requests, START_TIME)


WITHOUT_ENGINE_APPEND: Final = "(without engine_append, which the subject lacks)"


def resuming_workload(
    compressed: bool, initial: Tree, stored: Mapping[str, DurableLog], session_id: str
) -> Workload:
    """Resume a session whose log ends in a torn tail (the repair is written), then append and
    flush after the closers."""
    requests: tuple[Request, ...] = (
        ("clock", {"now": RESUME_TIME}),
        ("resume", {"id": session_id}),
        *build.open_turn(session_id, 1, build.user_message("u2", "go on")),
        ("flush", {"id": session_id}),
    )
    label = "zstd" if compressed else "plain"
    model = ModelStore(storage="file", stored=dict(stored))
    return Workload(f"{label}, resuming a torn log", compressed, initial, model, requests, RESUME_TIME)


def torn_last_write(initial: Tree, calls: Sequence[Call]) -> tuple[Tree, str] | None:
    """The strict state in which the last write of the trace is torn in its middle, everything
    before it whole: a torn tail for the resuming workload to repair."""
    last = max((index for index, call in enumerate(calls) if isinstance(call.op, Write)), default=None)
    if last is None:
        return None
    disk = Disk(initial)
    for call in calls[: last + 1]:
        disk.apply(call.op)
    write = calls[last].op
    assert isinstance(write, Write)
    pending = disk.pending_data[write.inode]
    tree = disk.crash({("data", write.inode): Cut(len(pending) - 1, len(write.data) // 2)}, rest_full=True)
    return tree, f"call {last + 1} ({calls[last].text}) torn after {len(write.data) // 2} bytes"


__all__ = [
    "RESUME_TIME",
    "WITHOUT_ENGINE_APPEND",
    "Workload",
    "resuming_workload",
    "torn_last_write",
    "writing_workload",
]
