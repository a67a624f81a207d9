"""The compaction bracket: ``compaction/start`` ... ``compaction/end`` around one summary
compaction — the lock it holds, who owns it, the data that opens and closes it, and how a
transaction ends (notes/dsh-compaction-projection §4.2, §4.4, §4.5, §9.1; SPEC-DECISIONS D8).

An unmatched ``compaction/start`` is the session's durable lock: no second compaction starts while
it is live, and a newer ``session/end-seed`` turns it into a stale orphan of an earlier lifecycle.
Once ``compaction/start`` is in the log, every path attempts exactly one ``compaction/end``: the
success path after the summary and its checkpoint, every failure path with an ``error``. A close
that itself fails leaves the start unmatched on purpose: it stays the durable busy marker. These
functions decide what is written and what is raised; the order of the transaction's steps is
:func:`spec.shrink.engine.plan_transaction`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from spec.codes import Code, SpecError, reject
from spec.log.events import (
    Event,
)
from spec.log.json import FrozenDict, FrozenList, JsonValue, snapshot_json
from spec.log.unclosed import derive_compaction_entry_state, find_active_compaction

# --- the durable lock (notes §4.4) -----------------------------------------------------------------


def is_compaction_busy(events: Sequence[Event]) -> bool:
    """Is a compaction in flight: is there a live unmatched ``compaction/start`` (notes §4.4)?"""
    return find_active_compaction(events) is not None


def validate_compaction_inactive(events: Sequence[Event], stage: str = "compaction") -> None:
    """A compaction may start only when none is live (notes §4.4). ``stage`` names the caller:
    ``compaction`` in the transaction, ``automatic pressure compaction`` for the pre-check."""
    if is_compaction_busy(events):
        raise reject(
            Code.COMPACTION_BUSY,
            f"{stage}: compaction already in progress; the session compaction lock is already active",
        )


# --- opening and closing the bracket (notes §4.2, §4.5 steps 4 and 7) ---------------------------


def plan_compaction_owner(events: Sequence[Event], manual: bool) -> int | None:
    """The turn that owns a new bracket: a manual compaction runs between turns and owns none
    (``turn: null``); an automatic one runs inside the open turn and is owned by it (notes §4.5
    step 4)."""
    open_turn = derive_compaction_entry_state(events).open_turn
    if manual:
        if open_turn is not None:
            raise reject(Code.COMPACTION_BUSY, "manual compaction: the session already has an open turn")
        return None
    if open_turn is None:
        raise reject(
            Code.COMPACTION_NO_OPEN_TURN,
            "compactRegion: no open turn — automatic compaction events must be enclosed in a turn",
        )
    return open_turn


def derive_compaction_lifecycle(
    compaction_id: str, turn: int | None, source_command_id: str | None = None
) -> FrozenDict:
    """The data of ``compaction/start``, and of a successful ``compaction/end``:
    ``{compactionId, sourceCommandId?, turn}`` (notes §4.2)."""
    lifecycle: dict[str, JsonValue] = {"compactionId": compaction_id}
    if source_command_id is not None:
        lifecycle["sourceCommandId"] = source_command_id
    lifecycle["turn"] = turn
    return snapshot_compaction_data(lifecycle)


def derive_compaction_end(lifecycle: Mapping[str, JsonValue], error: str | None = None) -> FrozenDict:
    """The data of ``compaction/end``: the start's lifecycle, plus ``error`` on a failed attempt
    (notes §4.2, §4.5 step 7)."""
    data = dict(lifecycle)
    if error is not None:
        data["error"] = error
    return snapshot_compaction_data(data)


# --- how a transaction ends (notes §4.5 steps 7-12, §9.1) ------------------------------------------

Stage = Literal["summary", "commit"]
"""Where a transaction failed: ``summary`` until the commit appends begin, ``commit`` from then
on (the summary, the checkpoint, or the closing ``compaction/end``)."""

MANUAL_FAILURE_TEXT: Final = {
    Code.COMPACTION_COMMIT_FAILED: "manual compaction did not commit cleanly",
    Code.COMPACTION_SURFACE_CHANGED: "the compacted history changed during manual compaction",
    Code.COMPACTION_SUMMARY_FAILED: "manual compaction could not produce a smaller summary",
    Code.COMPACTION_PERSISTENCE_FAILED: "manual compaction durability checkpoint failed",
}


def derive_error_chain(error: BaseException) -> str:
    """``errorChain``: the text a failed ``compaction/end`` records. An error gives its message
    (its class name when the message is empty), the members of an exception group as ``[a; b]``,
    and ``: <cause>`` when its cause's text differs from its own (notes §4.5 step 7). A
    :class:`SpecError` contributes its message without the code, which the code field carries."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = _error_message(current)
        if isinstance(current, BaseExceptionGroup):
            text += " [" + "; ".join(_error_message(member) for member in current.exceptions) + "]"
        if not parts or text != parts[-1]:
            parts.append(text)
        current = current.__cause__
    return ": ".join(parts)


def _error_message(error: BaseException) -> str:
    if isinstance(error, (SpecError, BaseExceptionGroup)):
        message = error.message
    else:
        message = str(error)
    return message if message else type(error).__name__


def derive_abort_reason() -> SpecError:
    """Why a cancelled operation stopped when its caller gave no reason of its own: the text a
    compaction cancelled mid-summary records as its ``error`` (notes §4.5 step 9, §9.1)."""
    return reject(Code.ABORTED, "the operation was aborted")


def derive_summary_timeout(seconds: float) -> SpecError:
    """The failure of a summarizer that did not answer within the engine's timeout of ``seconds``:
    a summary failure like any other, so the bracket closes with it as its ``error`` (DSH has no
    timeout; this project's ``summary_timeout``, docs/compaction.md)."""
    return reject(Code.COMPACTION_SUMMARY_TIMEOUT, f"summarization timed out after {seconds:g} s")


def classify_manual_failure(stage: Stage, error: BaseException) -> Code:
    """A manual compaction's failure, as its caller sees it: anything that broke during the commit
    appends is a commit failure (the log may hold part of the commit); a surface that changed under
    the summarizer is ``COMPACTION_SURFACE_CHANGED``; every other failure (the summarizer raised,
    timed out, or wrote a summary that was not smaller) is ``COMPACTION_SUMMARY_FAILED``
    (notes §4.5 step 10)."""
    if stage == "commit":
        return Code.COMPACTION_COMMIT_FAILED
    if isinstance(error, SpecError) and error.code == Code.COMPACTION_SURFACE_CHANGED:
        return Code.COMPACTION_SURFACE_CHANGED
    return Code.COMPACTION_SUMMARY_FAILED


@dataclass(frozen=True)
class CompactionResult:
    """A committed summary compaction (notes §4.1)."""

    compaction_id: str
    source_command_id: str | None
    start_seq: int
    summary_seq: int
    end_seq: int
    summary: FrozenList
    shadowed_range: tuple[int, int]
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int


def should_flush_after_close(manual: bool, closed: bool) -> bool:
    """Only a manual compaction flushes, and only once its bracket is closed (successfully or with
    an error): an orphaned start is never flushed on purpose (notes §4.5 step 8)."""
    return manual and closed


def derive_manual_outcome(
    cancelled: bool, failure: tuple[Stage, BaseException] | None, flush_failed: bool
) -> Code | None:
    """What a manual compaction raises once its bracket is settled, by precedence: a cancelled
    signal wins, even over a commit that landed and was flushed (``ABORTED``: the signal's reason is
    raised); then a failure of the transaction, given as its stage and error and classified by
    :func:`classify_manual_failure`; then a failed flush (``COMPACTION_PERSISTENCE_FAILED``);
    otherwise ``None``: the compaction succeeded (notes §4.5 steps 9-11)."""
    if cancelled:
        return Code.ABORTED
    if failure is not None:
        return classify_manual_failure(*failure)
    if flush_failed:
        return Code.COMPACTION_PERSISTENCE_FAILED
    return None


def snapshot_compaction_data(value: Mapping[str, JsonValue]) -> FrozenDict:
    """The data a compaction appends (its bracket, summary, prune metering, replacement and surface
    op) is an object in the lossless JSON domain, frozen; else ``DATA_NOT_JSON``."""
    frozen = snapshot_json(dict(value))
    if not isinstance(frozen, FrozenDict):
        raise reject(Code.DATA_NOT_JSON, "compaction data is outside the lossless JSON domain")
    return frozen
