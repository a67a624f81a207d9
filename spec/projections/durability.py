"""The moments a session log must be durable: the batch bound on buffered appends, and the
durability checkpoints before the moments that act on the world (seed 002; SPEC-DECISIONS D2;
notes/dsh-persistence §5.1; notes/dsh-compaction-projection §11.5 item 2).

``append`` may buffer and ``flush`` is the barrier, but what a buffer may hold is bounded: seed 002
says "append 是分批 fsync 的，而 flush 是一个真正的持久性屏障". A batch policy writes and fsyncs the
buffered appends, without a flush, once they are too old or too many bytes; it is checked on each
append against the session's own clock (the events' ``time``), with no timer and no thread, so
the same appends always give the same writes.

A checkpoint policy flushes lazily before a model request is sent, before a tool body runs, and
at every pre-step. It fails closed: if the flush fails, the request or the tool is not run at all,
because something done but not recorded is worse than nothing done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from spec.codes import Code, SpecError, reject
from spec.format.framing import encode_lines
from spec.log.events import Event
from spec.log.json import is_safe_integer, js_text

# --- the batch bound (seed 002; SPEC-DECISIONS D2 "or per batch bound") ---------------------------

DEFAULT_BATCH_MAX_DELAY_MS: Final = 200  # ms; DSH's writeBatchMaxDelayMs default (notes/dsh-persistence §1.2)
DEFAULT_BATCH_MAX_BYTES: Final = (
    1_048_576  # bytes of JSONL text (1 MiB); DSH has no byte bound, the seed asks for one
)


@dataclass(frozen=True)
class BatchPolicy:
    """How long and how large the buffer of appends not yet durable may grow: ``max_delay_ms``
    bounds the age of its oldest event (in the events' own ``time``), ``max_bytes`` its size as
    JSONL text; ``None`` leaves that dimension unbounded (both ``None``: only ``flush`` writes)."""

    max_delay_ms: int | None = DEFAULT_BATCH_MAX_DELAY_MS
    max_bytes: int | None = DEFAULT_BATCH_MAX_BYTES


class PendingBatch(NamedTuple):
    """The appends buffered since the last durable write: their JSONL bytes (counted only under a
    byte bound) and the earliest ``time`` among them (``None`` when nothing is buffered). A named
    tuple: one is made per append."""

    bytes: int = 0
    earliest_time: int | None = None


NOTHING_PENDING: Final = PendingBatch()


def validate_batch_policy(policy: BatchPolicy) -> None:
    """Each bound is absent (``None``) or a non-negative safe integer: ``max_delay_ms`` 0 writes
    every append at once, ``max_bytes`` 1 too (every event has at least one byte)."""
    for name, value in (("maxDelayMs", policy.max_delay_ms), ("maxBytes", policy.max_bytes)):
        if value is not None and not (is_safe_integer(value) and value >= 0):
            raise reject(
                Code.BATCH_POLICY_INVALID,
                f"batch policy {name} must be a non-negative integer or absent, got {js_text(value)}",
            )


def decode_batch_policy(max_delay_ms: object, max_bytes: object) -> BatchPolicy | None:
    """The policy a protocol ``reset`` names with ``batchMaxDelayMs`` and ``batchMaxBytes`` (``None``:
    not given): no policy when neither is given (only ``flush`` writes), else a policy bounding
    exactly what is given, each value checked by :func:`validate_batch_policy`."""
    if max_delay_ms is None and max_bytes is None:
        return None
    for name, value in (("maxDelayMs", max_delay_ms), ("maxBytes", max_bytes)):
        if value is not None and not (is_safe_integer(value) and value >= 0):
            raise reject(
                Code.BATCH_POLICY_INVALID,
                f"batch policy {name} must be a non-negative integer or absent, got {js_text(value)}",
            )
    policy = BatchPolicy(
        max_delay_ms=None if max_delay_ms is None else int(max_delay_ms),  # type: ignore[call-overload]
        max_bytes=None if max_bytes is None else int(max_bytes),  # type: ignore[call-overload]
    )
    validate_batch_policy(policy)
    return policy


def derive_event_bytes(event: Event) -> int:
    """What an event costs in the batch: the bytes of its line as the log holds it
    (:func:`spec.format.framing.encode_lines`: UTF-8, newline included), never its characters —
    a character outside ASCII is 2 to 4 bytes, an astral one 4 (2 UTF-16 code units)."""
    return len(encode_lines((event,)))


def apply_pending_events(
    policy: BatchPolicy,
    pending: PendingBatch,
    events: Sequence[Event],
    lines: Sequence[bytes] | None = None,
) -> PendingBatch:
    """The buffer after ``events`` join it: bytes grow by each line (when bytes are bounded) and
    the earliest time is the least ``time`` seen (an event without a safe-integer time counts as
    none). A writer that has already encoded the events passes their ``lines`` (one each, as
    :func:`derive_event_bytes` would encode it, newline included): their lengths are counted and
    nothing is encoded twice."""
    earliest = pending.earliest_time
    size = pending.bytes
    for event in events:
        time = event.get("time")
        if is_safe_integer(time) and (earliest is None or time < earliest):
            earliest = int(time)
    if policy.max_bytes is not None:
        if lines is None:
            size += sum(derive_event_bytes(event) for event in events)
        else:
            if len(lines) != len(events):
                raise ValueError("one line per event")
            for line in lines:
                size += len(line)
    return tuple.__new__(PendingBatch, (size, earliest))  # one per append: no named tuple __new__ call


def is_batch_due(policy: BatchPolicy, pending: PendingBatch, newest_time: object) -> bool:
    """The buffer must be written and fsynced now, after an append whose last event has time
    ``newest_time``, when its bytes reach ``max_bytes`` or its earliest event is ``max_delay_ms``
    or more older than that time. Checking on each append gives the bound: once an append returns,
    every event still buffered is less than ``max_delay_ms`` older than the newest one and all of
    them together are fewer than ``max_bytes`` bytes — what a crash then may lose (a store whose
    storage fails keeps the batch buffered and reports the failure at the next ``flush``).

    post: not __return__ or pending.earliest_time is not None or pending.bytes > 0
    """
    if pending.earliest_time is None and pending.bytes == 0:
        return False
    if policy.max_bytes is not None and pending.bytes >= policy.max_bytes:
        return True
    return (
        policy.max_delay_ms is not None
        and pending.earliest_time is not None
        and is_safe_integer(newest_time)
        and int(newest_time) - pending.earliest_time >= policy.max_delay_ms
    )


# --- durability checkpoints (seed 002; notes/dsh-compaction-projection §11.5 item 2) --------------

Moment = Literal["model-request", "tool", "pre-step"]

CHECKPOINT_MOMENTS: Final[tuple[Moment, ...]] = ("model-request", "tool", "pre-step")

_WHAT_IS_HELD: Final = {
    "model-request": "the model request was not sent",
    "tool": "the tool was not run",
    "pre-step": "the step was not started",
}


def is_durability_checkpoint(moment: object) -> bool:
    """The policy flushes at exactly three moments: before a model request, before a tool body,
    and at each pre-step (seed 002)."""
    return moment in CHECKPOINT_MOMENTS


def checkpoint_failure(moment: Moment, cause: str) -> SpecError:
    """The error that replaces the action when its checkpoint's flush fails: fail closed, the
    action did not happen (seed 002: "失败即 fail-closed")."""
    return reject(
        Code.DURABILITY_CHECKPOINT_FAILED,
        f"durability checkpoint before {moment} failed ({cause}); {_WHAT_IS_HELD[moment]}",
    )
