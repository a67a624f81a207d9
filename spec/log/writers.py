"""Who writes which events: a caller of ``append``, the store's compaction engine, or the store
itself (the resume/fork/compaction seed; SPEC-DECISIONS D3 item 6, D8).

Most events are a caller's: the agent loop appends them and the surface rules judge them. A few
are written only by the machinery that keeps the log's promises, and a caller who wrote one would
break a promise silently:

- ``session/end-seed`` is the store's marker that a seed (a fork's prefix, a restored log) ends
  there. The seed: "如果日志最后一个事件不是 session/end-seed，自动 append 一个" — the constructor
  appends it, nobody else. A caller's end-seed in the middle of a session would turn a live
  compaction lock into a stale orphan.
- ``compaction/start``, ``compaction/summary`` and ``compaction/end`` are the compaction engine's
  transaction bracket. The seed: "compaction/start 和 compaction/end 永远配对 … 日志里不会出现悬挂的
  start". Only the engine, which always closes what it opens, may write them.
- crash repair's closers, recognised by what they say: a ``turn/end`` whose reason is
  ``interrupted`` and a ``tool/result`` whose ``error.code`` is ``TOOL_NOT_STARTED`` or
  ``TOOL_OUTCOME_UNKNOWN`` (a ``compaction/end`` closer is the engine's type already). The seed:
  "缺失的收尾（比如没合上的轮次）由恢复方在读日志时补记" — the reader that recovers the log writes them.
  A closer's ``step/end`` is an ordinary ``step/end`` and cannot be told apart, so it is not reserved.

Events a session inherits (a seed, a restored log) were written before and are judged by the
seed rules and the checker, not by who may write them now.
"""

from __future__ import annotations

from typing import Final, Literal

from spec.codes import Code, reject
from spec.log.events import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    TOOL_RESULT,
    TURN_END,
    is_named,
)
from spec.log.json import JsonValue

Writer = Literal["caller", "compaction-engine", "store"]
"""Who is appending: a caller of the session's ``append`` (the protocol's ``append`` op), the
store's compaction engine (the protocol's ``engine_append`` op), or the store itself (the
end-seed marker at construction)."""

CALLER: Final[Writer] = "caller"
COMPACTION_ENGINE: Final[Writer] = "compaction-engine"
STORE: Final[Writer] = "store"

STORE_ONLY_TYPES: Final = frozenset({END_SEED})
ENGINE_TYPES: Final = frozenset({COMPACTION_START, COMPACTION_SUMMARY, COMPACTION_END})

TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"  # the error code of repair's result for a call never started
TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"  # ... for a call started and never answered
REPAIR_TOOL_ERROR_CODES: Final = frozenset({TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN})
INTERRUPTED_REASON_KIND: Final = "interrupted"  # the turn/end reason only crash repair writes


def is_interrupted_turn_end(event_type: object, data: JsonValue) -> bool:
    """A ``turn/end`` whose ``reason.kind`` is ``interrupted``: crash repair's closing event."""
    reason = data.get("reason") if isinstance(data, dict) else None
    return (
        event_type == TURN_END and isinstance(reason, dict) and reason.get("kind") == INTERRUPTED_REASON_KIND
    )


def is_repair_tool_result(event_type: object, data: JsonValue) -> bool:
    """A ``tool/result`` whose ``data.error.code`` is ``TOOL_NOT_STARTED`` or
    ``TOOL_OUTCOME_UNKNOWN``: crash repair's answer to a call a crash left open."""
    error = data.get("error") if isinstance(data, dict) else None
    return (
        event_type == TOOL_RESULT
        and isinstance(error, dict)
        and is_named(error.get("code"), REPAIR_TOOL_ERROR_CODES)
    )


def is_repair_closer(event_type: object, data: JsonValue) -> bool:
    """Does the event say it is one of crash repair's closers (:func:`is_interrupted_turn_end`,
    :func:`is_repair_tool_result`)?"""
    # Each says so only of its own type: one is asked, and neither for most events (issue 24).
    if event_type == TURN_END:
        return is_interrupted_turn_end(event_type, data)
    return event_type == TOOL_RESULT and is_repair_tool_result(event_type, data)


def validate_writer_of_type(event_type: str, writer: Writer) -> None:
    """``session/end-seed`` is written by the store alone, and the compaction bracket
    (``compaction/start``, ``compaction/summary``, ``compaction/end``) by the store's compaction
    engine alone: a caller's ``append`` of either is refused, and so is the engine's of an end-seed
    (the resume/fork/compaction seed: the constructor appends the marker; the bracket is always
    paired)."""
    if writer == STORE:
        return
    if event_type in STORE_ONLY_TYPES:
        raise reject(
            Code.STORE_ONLY_EVENT,
            f'session event "{event_type}" is written by the store alone (when a seed or a restored log '
            "ends); it cannot be appended",
        )
    if event_type in ENGINE_TYPES and writer != COMPACTION_ENGINE:
        raise reject(
            Code.STORE_ONLY_EVENT,
            f'session event "{event_type}" belongs to the compaction engine\'s bracket; run a compaction '
            "instead of appending it",
        )


def validate_writer_of_closer(event_type: str, data: JsonValue, writer: Writer) -> None:
    """Crash repair's closers — an interrupted ``turn/end``, a ``TOOL_NOT_STARTED`` or
    ``TOOL_OUTCOME_UNKNOWN`` result — are written by the store when it resumes a log, never appended
    (the compaction seed: the recovering reader adds the missing closers)."""
    if writer != STORE and is_repair_closer(event_type, data):
        raise reject(
            Code.REPAIR_CLOSER_RESERVED,
            f'session event "{event_type}" says it is a crash-repair closer; only a resume writes those '
            "(end a turn with another reason, or report the tool's own error)",
        )
