"""The workloads the crash checks cut short: the standard one, a single-session one, and for a
subject with capability ``compaction`` one whose cuts fall inside compaction brackets."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Final

from conformance import builders as build
from conformance import strategies as values
from conformance.builders import append_request as append
from spec.log.events import ASSISTANT_MESSAGE, STEP_START, TOOL_CALL, TOOL_RESULT
from spec.protocol import Request


def standard_workload() -> tuple[Request, ...]:
    """A session that is published, grows across several flushes and is left inside an open turn
    with an open step, a started call without its result and an open compaction; beside it, a
    session created from an empty seed (so its log ends with ``session/end-seed``), flushed."""
    w = "w"
    message = build.assistant_message("a1", "reading", ("c1", "c2"), more=(values.UNKNOWN_BLOCK,))
    result = build.tool_result("c1", "con\ud800tents", build.ABSENT_FLAG, 1.0, 1, (values.IMAGE_BLOCK,))
    result = {**result, "bounds": [values.SAFE_BOUND, -values.SAFE_BOUND, values.UNSAFE_INTEGER]}
    return (
        *_opening(w),
        append(w, STEP_START, build.step_start(1, 1)),
        append(w, ASSISTANT_MESSAGE, message, surfaceOp="append"),
        append(w, TOOL_CALL, build.tool_call("c1")),
        ("flush", {"id": w}),
        append(w, TOOL_RESULT, result, surfaceOp="append", sourceEventSeqs=[4]),
        append(w, TOOL_CALL, build.tool_call("c2")),
        ("engine_append", {"id": w, "type": "compaction/start", "data": build.compaction_start("k1", 1)}),
        ("flush", {"id": w}),
        ("create", {"id": "e", "seed": []}),
        ("flush", {"id": "e"}),
        append(
            w,
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
        ),
        ("flush", {"id": w}),
    )


def _opening(w: str) -> tuple[Request, ...]:
    """The standard workload's start: session ``w`` created, its first turn opened by a user
    message that holds edge characters and an image, and flushed."""
    return (
        ("create", {"id": w, "meta": {"cwd": "/work/project"}}),
        *build.open_turn(
            w,
            0,
            build.user_message("u1", f"read {values.NON_BMP}\u2028\u2029\x85 it", more=(values.IMAGE_BLOCK,)),
        ),
        ("flush", {"id": w}),
    )


COMPACTION_TEXT: Final = "The earlier work read the parser and wrote down what each failing test showed. " * 7
COMPACTION_SUMMARY: Final = "The parser tests fail in the tokenizer."


def compaction_workload() -> tuple[Request, ...]:
    """Summary compaction cut short by power loss at every point: two closed turns and ``/compact``
    (its bracket, summary and checkpoint, then its flush), a third turn whose automatic
    compaction fails and closes its bracket with the error, and a manual compaction that fails
    between turns. Run under a batch policy that writes every append at once (``reset`` with
    ``batchMaxDelayMs`` 0), so that a cut falls between any two events of a bracket, and resume
    must close a bracket a crash left open (SPEC-DECISIONS D3 item 6)."""
    c = "c"

    def ask(turn: int, text: str = COMPACTION_TEXT) -> list[Request]:
        return build.open_turn(c, turn - 1, build.user_message(f"u{turn}", text))

    def answer(turn: int) -> list[Request]:
        steps = build.open_step(c, turn, 1, f"a{turn}", ())
        return [*steps, build.close_step(c, turn, 1), build.close_turn(c, turn)]

    return (
        ("create", {"id": c}),
        *ask(1),
        *answer(1),
        *ask(2),
        *answer(2),
        ("compact", {"id": c, "attempt": {"compactionId": "k1", "text": COMPACTION_SUMMARY}}),
        *ask(3),
        (
            "compact_region",
            {"id": c, "start": 16, "end": 16, "attempt": {"compactionId": "k2", "fail": "down"}},
        ),
        *answer(3),
        ("compact", {"id": c, "attempt": {"compactionId": "k3", "timeout": 30}}),
        ("flush", {"id": c}),
    )


def _ends_of(size: int) -> Sequence[int]:
    """The byte cuts of the compaction workload: its first byte, its middle and all but its last,
    of each unsynced write (every byte of its events would be thousands of replays)."""
    return sorted({cut for cut in (1, size // 2, size - 1) if 0 < cut < size})


def crash_workloads(capabilities: Collection[str] = ()) -> tuple[tuple[str, tuple[Request, ...]], ...]:
    """The workloads the crash checks cut short, each enumerated on its own so that one a subject
    answers differently leaves the others to run: the standard workload, and a shorter one with a
    single session, no seed and no compaction (so a difference about seeded sessions, or a subject
    without ``engine_append``, does not hide the rest); for a subject with capability
    ``compaction``, the compaction workload too."""
    standard = standard_workload()
    single = tuple(
        request for request in standard if request[1].get("id") == "w" and request[0] != "engine_append"
    )
    workloads: list[tuple[str, tuple[Request, ...]]] = [("standard", standard), ("single session", single)]
    if "compaction" in capabilities:
        workloads.append(("compaction", compaction_workload()))
    return tuple(workloads)


# How each workload is run beyond its requests: the reset's batch policy, the byte cuts tried, and
# the formats (the compaction workload's points are about its brackets, not about the framing).
WORKLOAD_RESETS: Final[dict[str, dict[str, Any]]] = {"compaction": {"batchMaxDelayMs": 0}}
WORKLOAD_BYTE_CUTS: Final[dict[str, Callable[[int], Sequence[int]]]] = {"compaction": _ends_of}
WORKLOAD_FORMATS: Final[dict[str, tuple[bool, ...]]] = {"compaction": (False,)}
