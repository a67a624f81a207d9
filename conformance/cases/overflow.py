"""overflow: context-overflow recovery through the engine ops (SPEC-DECISIONS D8;
notes/dsh-compaction-projection §8.2; conformance/PROTOCOL.md, "Engine ops").

The suite reports that a model request failed; the subject's recovery compacts (pruning first when
a pruner is loaded, then one forced summary keeping the newest unit) and says whether to retry.
Covers the rule that makes a retry sound: only when the surface's ``replaceGeneration`` grew — a
prune that landed before a failed summary counts, a late cancellation prevents it — at most
``maxOverflowRetries`` times between resets, and only for the canonical context-window code.
"""

from __future__ import annotations

from conformance.cases import msg
from conformance.cases.build import Cases, Step, append, case, ok, state, turn, turn_end
from conformance.cases.engine_build import (
    LONG,
    answered_step,
    attempt,
    first_question,
    history,
    tool_steps,
)

EARNED = "is_overflow_retry_earned"
ALLOWED = "may_attempt_overflow_recovery"
PRUNER = {"thresholdChars": 400, "headChars": 100, "tailChars": 100}


def overflowing() -> list[Step]:
    """Two closed turns and a third open one with a long question: something to compact."""
    return [*history(2), turn(3), append(msg.user("u3", LONG))]


def cases() -> Cases:
    yield case(
        "a compaction that lands earns one retry",
        EARNED,
        [*overflowing(), ok("overflow", id="s", attempt=attempt("k1")), state()],
    )
    yield case(
        "a second overflow after the retry is not recovered: maxOverflowRetries is 1",
        ALLOWED,
        [
            *overflowing(),
            ok("overflow", id="s", attempt=attempt("k1")),
            ok("overflow", id="s", attempt=attempt("k2")),
            state(),
        ],
        comment="the second report finds the budget spent: nothing is compacted, nothing is written",
    )
    yield case(
        "a successful response starts a fresh recovery sequence",
        ALLOWED,
        [
            *overflowing(),
            ok("overflow", id="s", attempt=attempt("k1")),
            *answered_step(3),
            ok("overflow_reset", id="s"),
            ok("overflow", id="s", attempt=attempt("k2")),
        ],
    )
    yield case(
        "a failure that is not a context overflow is not recovered",
        ALLOWED,
        [*overflowing(), ok("overflow", id="s", code="RATE_LIMITED", attempt=attempt("k1")), state()],
    )
    yield case(
        "a failure coded CONTEXT_WINDOW_EXCEEDED by the caller is recovered like the default",
        ALLOWED,
        [
            *overflowing(),
            ok("overflow", id="s", code="CONTEXT_WINDOW_EXCEEDED", attempt=attempt("k1")),
            state(),
        ],
        comment="the code is compared by its text, whatever object carries it",
    )
    yield case(
        "a failure whose code sorts before CONTEXT_WINDOW_EXCEEDED is not recovered either",
        ALLOWED,
        [*overflowing(), ok("overflow", id="s", code="AUTH_FAILED", attempt=attempt("k1")), state()],
        comment="only the canonical code is an overflow: not a code that merely sorts near it",
    )
    twice = {"maxOverflowRetries": 2}
    yield case(
        "with maxOverflowRetries 2 a second recovery is earned and counted, a third is refused",
        ALLOWED,
        [
            *overflowing(),
            ok("overflow", id="s", policy=twice, attempt=attempt("k1")),
            *answered_step(3),
            turn_end(3),
            turn(4),
            append(msg.user("u4", LONG)),
            ok("overflow", id="s", policy=twice, attempt=attempt("k2")),
            ok("overflow", id="s", policy=twice, attempt=attempt("k3")),
            state(),
        ],
        comment="the retries of one live session count on across reports: 1, then 2, then the budget of 2 is spent",
    )
    yield case(
        "maxOverflowRetries 0 turns recovery off",
        ALLOWED,
        [
            *overflowing(),
            ok("overflow", id="s", policy={"maxOverflowRetries": 0}, attempt=attempt("k1")),
            state(),
        ],
    )
    yield case(
        "with nothing to compact there is no retry",
        EARNED,
        [
            *first_question(),
            ok("overflow", id="s", attempt=attempt("k1")),
            state(),
        ],
    )
    yield case(
        "a summary that fails with nothing pruned earns no retry",
        EARNED,
        [
            *overflowing(),
            ok("overflow", id="s", attempt=attempt("k1", fail="the model is unavailable")),
            state(),
        ],
        comment="the failed bracket is in the log, closed with its error; replaceGeneration did not move",
    )
    yield case(
        "a prune that landed before the summary failed earns a retry",
        EARNED,
        [
            *first_question(),
            *tool_steps(1, "c1"),
            ok("overflow", id="s", prune=PRUNER, attempt=attempt("k1", fail="the model is unavailable")),
            state(),
        ],
    )
    yield case(
        "a cancellation while the summary is written prevents the retry",
        EARNED,
        [*overflowing(), ok("overflow", id="s", attempt=attempt("k1", cancel="during")), state()],
    )
    yield case(
        "a compaction that lands after a late cancellation still earns no retry",
        EARNED,
        [
            *overflowing(),
            ok("overflow", id="s", attempt=attempt("k1", text="Short.", cancel="after")),
            state(),
        ],
        comment="automatic compaction ignores an abort after its summary and commits; the retry needs a "
        "request that was not cancelled",
    )
    spent_then_resumed = [
        *overflowing(),
        ok("overflow", id="s", attempt=attempt("k1")),
        *answered_step(3),
        turn_end(3),
        ok("close", id="s"),
        ok("resume", id="s"),
        turn(4),
        append(msg.user("u4", LONG)),
    ]
    yield case(
        "a resumed session's recoveries start again at 0: its first overflow is recovered",
        ALLOWED,
        [*spent_then_resumed, ok("overflow", id="s", attempt=attempt("k2")), state()],
        storage="memory",
        comment="the retry spent before the close belonged to the live session the close released",
    )
    yield case(
        "a resumed session reports no recoveries spent",
        ALLOWED,
        [*spent_then_resumed, ok("overflow", id="s", code="RATE_LIMITED", attempt=attempt("k2"))],
        storage="memory",
    )
