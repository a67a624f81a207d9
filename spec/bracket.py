"""How a summary-compaction transaction ends: the ``error`` text of a failed ``compaction/end``,
and what a manual compaction reports to its caller (notes/dsh-compaction-projection §4.5 steps
7-12, §9.1; SPEC-DECISIONS D8).

Once ``compaction/start`` is in the log, every path attempts exactly one ``compaction/end``: the
success path after the summary and its checkpoint, every failure path with an ``error``. A close
that itself fails leaves the start unmatched on purpose: it stays the durable busy marker. These
functions decide what is written and what is raised; the transaction that appends lives in the
reference implementation.
"""

from __future__ import annotations

from typing import Final, Literal

from spec.codes import Code, SpecError

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
    if isinstance(error, SpecError):
        message = error.message
    elif isinstance(error, BaseExceptionGroup):
        message = error.message
    else:
        message = str(error)
    return message if message else type(error).__name__


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
