"""compaction: summary compaction through the engine ops, with a scripted summarizer
(SPEC-DECISIONS D8; notes/dsh-compaction-projection §4, §5, §9; conformance/PROTOCOL.md, "Engine ops").

Covers which span a compaction takes (head-anchored, the newest indivisible unit kept, never a tool
call cut from its result), the framed checkpoint and its provenance, the shrink check, the bracket
— exactly one ``compaction/end`` per ``compaction/start`` on every path, with the error when nothing
was replaced — the durable lock (live, and stale after a newer end-seed), who owns a bracket, what
a manual compaction answers and flushes, the stability check after the summarizer, and pressure.
Every failing case shows the log after it: the start, the end with its error, nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from conformance.cases import msg
from conformance.cases.build import (
    Cases,
    Step,
    append,
    case,
    chained,
    event,
    fails,
    log,
    ok,
    replace,
    start,
    state,
    turn,
    turn_end,
)
from conformance.cases.engine_build import (
    LONG,
    answer,
    attempt,
    closed_turn,
    compact,
    first_question,
    history,
    step_close,
    step_open,
    tool_steps,
)
from conformance.oracle import SpecOracle
from spec.codes import Code
from spec.log.json import JsonObject, JsonValue
from spec.shrink.pressure import derive_context_tokens
from spec.shrink.tokens import estimate_json, estimate_text, price_surface

BRACKET = "derive_compaction_end"
SELECT = "select_compactable_range"
REGION = "plan_compaction_region"
OWNER = "plan_compaction_owner"
LOCK = "find_active_compaction"
OUTCOME = "derive_manual_outcome"
STABLE = "validate_surface_stable"
BLOCKS = "derive_summary_blocks"
SMALLER = "validate_summary_smaller"
PLAN = "plan_summary_replacement"


def open_turn(n: int, session: str = "s") -> list[Step]:
    """Turn ``n`` started with a long question (seqs ``6(n-1)`` and ``6(n-1) + 1`` after ``n - 1``
    closed turns)."""
    return [turn(n, session), append(msg.user(f"u{n}", LONG), session)]


def _manual() -> Cases:
    yield case(
        "manual compaction summarizes all but the newest unit under a standalone bracket",
        SELECT,
        [*history(2), compact("k1"), state()],
        why="between turns, everything but the newest indivisible unit is replaced by one checkpoint: the log gains "
        "compaction/start, compaction/summary, the checkpoint user/message and compaction/end (turn null), and "
        "loses nothing",
    )
    yield case(
        "the checkpoint is the framed summary and cites the start, the summary and every node it shadows",
        PLAN,
        [*history(2), compact("k1"), state()],
        comment="the checkpoint's text is the preamble and <compacted-summary>, the summary, then </compacted-summary>; "
        "its id is the attempt's compactionId, its source the compact plugin's",
    )
    yield case(
        "a manual compaction's command id is carried by its start, summary, checkpoint and end",
        PLAN,
        [*history(2), ok("compact", id="s", attempt=attempt("k1"), sourceCommandId="cmd-1"), state()],
    )
    yield case(
        "manual compaction with nothing to compact writes nothing and answers null",
        SELECT,
        [
            *first_question(),
            turn_end(1),
            compact("k1"),
            state(),
        ],
        comment="one surface node is the newest unit itself: there is no span before it",
    )
    yield case(
        "manual compaction of four nodes before a turn's lone question replaces all four",
        STABLE,
        [*history(2), turn(3), append(msg.user("u3", LONG)), turn_end(3), compact("k1"), state()],
        comment="the third turn ended on its question: that node is the newest unit, and the span before it is "
        "the four nodes of the first two turns, each priced as it was when the summary was asked for",
    )
    yield case(
        "manual compaction keeps the newest node even when it costs nothing",
        SELECT,
        [
            *history(2),
            turn(3),
            append(msg.user("u3", LONG)),
            step_open(3),
            append(msg.assistant("a3-1", None, (), 3, 1), surfaceOp="append"),
            step_close(3),
            turn_end(3),
            compact("k1"),
            state(),
        ],
        comment="the newest node is an empty assistant message, priced 0: keeping 0 tokens is already reached "
        "with it, so the span ends at the question before it",
    )
    yield case(
        "manual compaction of a surface that is one tool call and its result has nothing to compact",
        SELECT,
        [ok("create", id="s"), turn(1), *tool_steps(1, "c1"), turn_end(1), compact("k1"), state()],
        comment="the newest node is the result; the cut before it splits it from its call, so the cut moves "
        "head-ward to the head itself and no span is left before it: null, nothing written",
    )
    yield case(
        "a manual compaction flushes once its bracket is closed",
        "should_flush_after_close",
        [*history(2), compact("k1"), ok("read", id="s")],
        storage="memory",
        comment="nothing was flushed before the compaction; the read shows every event, the bracket included",
    )
    yield case(
        "a failed manual compaction is flushed too, its bracket closed with the error",
        "should_flush_after_close",
        [
            *history(2),
            fails(Code.COMPACTION_SUMMARY_FAILED, "compact", id="s", attempt=attempt("k1", fail="down")),
            ok("read", id="s"),
        ],
        storage="memory",
    )
    yield case(
        "a manual compaction whose flush fails answers a persistence failure with its bracket closed",
        OUTCOME,
        [
            *history(2),
            ok("flush", id="s"),
            ok("fail_next", fsOp="fsync", errno="EIO"),
            fails(Code.COMPACTION_PERSISTENCE_FAILED, "compact", id="s", attempt=attempt("k1")),
            state(),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="file",
        comment="the checkpoint landed and the bracket closed; only the durability flush failed, and a retried "
        "flush makes it durable",
    )
    resumed = [*history(2), ok("close", id="s"), ok("resume", id="s"), *closed_turn(3), *closed_turn(4)]
    yield case(
        "a manual compaction of a resumed session summarizes the stored turns and the ones appended since",
        SELECT,
        [*resumed, compact("k1"), state(), ok("read", id="s")],
        storage="file",
        comment="the resumed log is read from its stored lines and from what was appended after them: the "
        "summarized span crosses from one to the other",
    )


def refused_region(start: int, end: int, code: Code = Code.COMPACTION_RANGE_INVALID) -> Step:
    """A ``compact_region`` of ``start``..``end`` (attempt k1) that is refused with ``code``."""
    return fails(code, "compact_region", id="s", start=start, end=end, attempt=attempt("k1"))


def _span() -> Cases:
    yield case(
        "a span never cuts a tool call from its result: the cut moves head-ward before the call",
        SELECT,
        [
            *history(1),
            turn(2),
            append(msg.user("u2", "and the tokenizer?")),
            *tool_steps(2, "c2"),
            turn_end(2),
            compact("k1"),
            state(),
        ],
        comment="the newest node is the tool result; the cut just before it splits the call from its result, so "
        "the assistant message that called it and its result are both kept",
    )
    yield case(
        "a region whose end falls between a tool call and its result is refused before anything is written",
        REGION,
        [
            *first_question(),
            *tool_steps(1, "c1"),
            refused_region(1, 3),
            state(),
        ],
    )
    yield case(
        "a region whose start falls between a tool call and its result is refused",
        REGION,
        [
            *first_question(),
            *tool_steps(1, "c1"),
            refused_region(5, 5),
        ],
    )
    yield case(
        "a region that names a seq not on the surface is refused",
        REGION,
        [
            *history(1),
            turn(2),
            refused_region(0, 3),
        ],
        comment="seq 0 is the turn/start, a log-only event",
    )
    yield case(
        "a region whose start comes after its end on the surface is refused",
        REGION,
        [
            *history(2),
            turn(3),
            refused_region(7, 1),
        ],
    )


def _lock_and_owner() -> Cases:
    yield case(
        "a live compaction lock refuses a second compaction and writes nothing",
        LOCK,
        [
            *history(2),
            ok("engine_append", id="s", type="compaction/start", data={"compactionId": "k0", "turn": None}),
            *failed(Code.COMPACTION_BUSY),
        ],
        comment="the unmatched compaction/start k0 is the session's durable lock",
    )
    seeded = log(
        ("turn/start", {"turn": 1}),
        msg.user("u1", LONG),
        msg.assistant("a1"),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ("turn/start", {"turn": 2}),
        msg.user("u2", LONG),
        msg.assistant("a2", turn=2),
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
        ("compaction/start", {"compactionId": "k0", "turn": None}),
        ("session/end-seed", {}),
    )
    yield case(
        "a lock left by an earlier lifecycle is stale after a newer end-seed and does not block",
        LOCK,
        [ok("create", id="s", seed=seeded), compact("k1"), state()],
        comment="a DSH 0.1 log can hold such a start (its resume left open brackets for the end-seed to orphan); "
        "no rule of this specification leaves one, and the checker reports it as compaction-dangling",
    )
    yield case(
        "a lock opened after the newest end-seed is live and refuses a compaction",
        LOCK,
        [
            ok("create", id="s", seed=seeded[:-2]),
            ok("engine_append", id="s", type="compaction/start", data={"compactionId": "k0", "turn": None}),
            *failed(Code.COMPACTION_BUSY),
        ],
        comment="the seed's end-seed marker is older than the start: only a newer end-seed makes a lock stale",
    )
    yield case(
        "a lock opened before the open turn began still refuses an automatic compaction",
        LOCK,
        [
            *history(2),
            ok("engine_append", id="s", type="compaction/start", data={"compactionId": "k0", "turn": None}),
            *open_turn(3),
            *failed(Code.COMPACTION_BUSY, "compact_region"),
        ],
        comment="the newest turn event is newer than the start: the scan for the lock reads past it",
    )
    yield case(
        "a manual compaction inside an open turn is refused as busy",
        OWNER,
        [
            *history(1),
            *open_turn(2),
            *failed(Code.COMPACTION_BUSY),
        ],
    )
    yield case(
        "a turn a seed leaves open is still open behind the end-seed marker: a manual compaction is refused as busy",
        OWNER,
        [
            ok(
                "create",
                id="s",
                seed=log(("turn/start", {"turn": 1}), msg.user("u1", LONG), msg.assistant("a1", LONG)),
            ),
            *failed(Code.COMPACTION_BUSY),
        ],
        comment="the newest event is the seed's end-seed marker: the scan for the open turn reads past it",
    )
    yield case(
        "an automatic compaction is owned by the open turn",
        OWNER,
        [
            *history(2),
            *open_turn(3),
            ok("compact_region", id="s", start=1, end=9, attempt=attempt("k1")),
            state(),
        ],
    )
    yield case(
        "an automatic compaction outside any turn is refused before anything is written",
        OWNER,
        [
            *history(2),
            refused_region(1, 7, Code.COMPACTION_NO_OPEN_TURN),
            state(),
        ],
    )


def _failure_paths() -> Cases:
    """Every way a manual compaction fails, each ending with the log: exactly one compaction/end
    with the error, the surface as it was."""
    failures: tuple[tuple[str, JsonObject, Code, str], ...] = (
        (
            "the summarizer fails",
            {"fail": "the model is unavailable"},
            Code.COMPACTION_SUMMARY_FAILED,
            BRACKET,
        ),
        (
            "the summarizer times out",
            {"timeout": 30},
            Code.COMPACTION_SUMMARY_FAILED,
            "derive_summary_timeout",
        ),
        ("the caller cancels while the summarizer runs", {"cancel": "during"}, Code.ABORTED, OUTCOME),
        (
            "the caller cancels after the summarizer answered",
            {"text": "Short.", "cancel": "after"},
            Code.ABORTED,
            OUTCOME,
        ),
        (
            "the summary is not smaller than the span",
            {"text": LONG * 3},
            Code.COMPACTION_SUMMARY_FAILED,
            SMALLER,
        ),
        (
            "the summary holds an image",
            {"blocks": [{"type": "text", "text": "see"}, {"type": "image", "data": "AA=="}]},
            Code.COMPACTION_SUMMARY_FAILED,
            BLOCKS,
        ),
        (
            "the summary has no text",
            {"blocks": [{"type": "text", "text": " \n "}, {"type": "reasoning", "text": "hm"}]},
            Code.COMPACTION_SUMMARY_FAILED,
            BLOCKS,
        ),
        (
            "the summary holds an image inside a tool result",
            {
                "blocks": [
                    {"type": "text", "text": "see"},
                    {
                        "type": "tool-result",
                        "toolCallId": "x",
                        "content": [{"type": "image", "data": "AA=="}],
                    },
                ]
            },
            Code.COMPACTION_SUMMARY_FAILED,
            BLOCKS,
        ),
    )
    for what, behaviour, code, rule in failures:
        yield case(
            f"when {what}, manual compaction closes its bracket with the error and changes no surface node",
            rule,
            [*history(2), *failed(code, behaviour=behaviour)],
        )
    for what, behaviour, code, _ in failures[:3]:
        yield case(
            f"when {what}, the compaction/end that closes a command's bracket carries its sourceCommandId",
            BRACKET,
            [
                *history(2),
                *failed(code, behaviour=behaviour, sourceCommandId="cmd-1"),
            ],
            comment="a failed end is the start's lifecycle whole (compactionId, sourceCommandId, turn) "
            "plus its error",
        )
    yield case(
        "a summarizer that times out after 1 second fails the compaction as a longer timeout does",
        "derive_summary_timeout",
        [
            *history(2),
            fails(Code.COMPACTION_SUMMARY_FAILED, "compact", id="s", attempt=attempt("k1", timeout=1)),
            state(),
        ],
        comment="a timeout is a positive whole number of seconds: 1 is the least the scripted summarizer takes",
    )
    yield case(
        "an image is looked for inside tool results only: other blocks of the summary are dropped unread",
        BLOCKS,
        [
            *history(2),
            compact(
                "k1",
                blocks=[
                    {"type": "text", "text": "Short."},
                    {"type": "reasoning", "content": [{"type": "image", "data": "AA=="}]},
                    {"type": "zz-note", "content": [{"type": "image", "data": "AA=="}]},
                    {"type": "file", "data": "AA=="},
                    {"type": "tool-result", "toolCallId": "x", "content": "plain"},
                ],
            ),
            state(),
        ],
        comment="blocks whose types sort before and after image and tool-result, holding images in a "
        "content array, and a tool result whose content is not an array",
    )
    yield case(
        "only the summarizer's text blocks become the summary",
        BLOCKS,
        [
            *history(2),
            compact(
                "k1",
                blocks=[
                    {"type": "reasoning", "text": "thinking"},
                    {"type": "text", "text": "Short."},
                    {"type": "tool-call", "id": "x", "name": "read", "arguments": "{}"},
                ],
            ),
            state(),
        ],
    )
    yield case(
        "an append outside the span while the summarizer runs leaves a manual compaction standing",
        STABLE,
        [
            *history(2),
            compact(
                "k1",
                text="Short.",
                append={
                    "type": "user/message",
                    "data": msg.user("u9", "one more thing"),
                    "surfaceOp": "append",
                },
            ),
            state(),
        ],
        comment="the message appended while the summary was written stays after the checkpoint",
    )
    for name, shadowed, comment in (
        ("a span rewritten while the summarizer runs fails a manual compaction, bracket closed", 1, None),
        (
            "a node inside the span replaced while the summarizer runs fails a manual compaction: the span changed",
            3,
            "the span is seqs 1, 3 and 7; its start and end are still on the surface, but what lies between "
            "them is not what the summary was written from",
        ),
        (
            "a span whose end is replaced while the summarizer runs fails a manual compaction, naming its end",
            7,
            "the span is seqs 1 to 7; once 7 is shadowed the region's end is not on the surface, and the "
            "compaction/end's error names the end seq as the cause",
        ),
    ):
        yield case(
            name,
            STABLE,
            [
                *history(2),
                fails(
                    Code.COMPACTION_SURFACE_CHANGED,
                    "compact",
                    id="s",
                    attempt=attempt(
                        "k1",
                        text="Short.",
                        append={
                            "type": "user/message",
                            "data": msg.user("u9", "edited"),
                            "surfaceOp": replace(shadowed, shadowed),
                            "sourceEventSeqs": [shadowed],
                        },
                    ),
                ),
                state(),
            ],
            comment=comment,
        )


def _automatic() -> Cases:
    """Automatic compaction (compact_region, inside the open turn) raises its failure as it is."""
    setup = [*history(2), *open_turn(3)]
    failures: tuple[tuple[str, JsonObject, Code, str], ...] = (
        (
            "the summarizer times out",
            {"timeout": 30},
            Code.COMPACTION_SUMMARY_TIMEOUT,
            "derive_summary_timeout",
        ),
        (
            "the summary holds an image",
            {"blocks": [{"type": "image", "data": "AA=="}]},
            Code.COMPACTION_SUMMARY_UNSUPPORTED_CONTENT,
            BLOCKS,
        ),
        ("the summary has no text", {"blocks": []}, Code.COMPACTION_SUMMARY_EMPTY, BLOCKS),
        (
            "the summary is not smaller than the span",
            {"text": LONG * 3},
            Code.COMPACTION_SUMMARY_NOT_SMALLER,
            SMALLER,
        ),
        ("the caller cancels while the summarizer runs", {"cancel": "during"}, Code.ABORTED, BRACKET),
        (
            "the summarizer fails",
            {"fail": "the model is unavailable"},
            Code.COMPACTION_SUMMARY_FAILED,
            BRACKET,
        ),
    )
    for what, behaviour, code, rule in failures:
        yield case(
            f"when {what}, automatic compaction closes its bracket and raises the failure as it is",
            rule,
            [*setup, *failed(code, "compact_region", behaviour)],
        )
    yield case(
        "a cancellation after the summary does not stop an automatic compaction",
        BRACKET,
        [
            *setup,
            ok(
                "compact_region", id="s", start=1, end=9, attempt=attempt("k1", text="Short.", cancel="after")
            ),
            state(),
        ],
        comment="only manual compaction checks the signal after the summarizer (notes §4.5 step 6.3)",
    )
    yield case(
        "any surface change while the summarizer runs fails an automatic compaction",
        STABLE,
        [
            *setup,
            fails(
                Code.COMPACTION_SURFACE_CHANGED,
                "compact_region",
                id="s",
                start=1,
                end=3,
                attempt=attempt(
                    "k1",
                    text="Short.",
                    append={"type": "user/message", "data": msg.user("u9", "more"), "surfaceOp": "append"},
                ),
            ),
            state(),
        ],
        comment="automatic compaction needs the whole priced surface unchanged, even outside its span",
    )
    yield case(
        "a log-only append while the summarizer runs leaves an automatic compaction standing",
        STABLE,
        [
            *setup,
            ok(
                "compact_region",
                id="s",
                start=1,
                end=3,
                attempt=attempt("k1", text="Short.", append={"type": "todo/write", "data": {"todos": []}}),
            ),
            state(),
        ],
    )


def _pressure() -> Cases:
    setup = [*history(2), *open_turn(3)]
    two = [attempt("k1"), attempt("k2")]
    yield case(
        "below the threshold pressure does nothing",
        "is_under_pressure",
        [*setup, ok("compact_if_needed", id="s", contextWindow=100000, attempts=two), state()],
    )
    yield case(
        "at the threshold pressure compacts the head and keeps the retained tail",
        "is_under_pressure",
        [*setup, ok("compact_if_needed", id="s", contextWindow=600, attempts=two), state()],
        comment="the window of 600 tokens puts the threshold at 480 and the retained tail at 96 tokens: the "
        "newest question is kept",
    )
    yield case(
        "pressure on a session with no events does nothing",
        "is_under_pressure",
        [ok("create", id="s"), ok("compact_if_needed", id="s", contextWindow=100000, attempts=two), state()],
        comment="no request/header to read the system prompt and tools from, nothing on the surface: 0 tokens",
    )
    yield case(
        "pressure needs the model's context window",
        "validate_context_capacity",
        [*setup, fails(Code.COMPACTION_NO_CAPACITY, "compact_if_needed", id="s", attempts=two)],
    )
    yield case(
        "a context window that is not a positive integer is refused",
        "resolve_compact_spec",
        [
            *setup,
            fails(Code.COMPACTION_CONFIG_INVALID, "compact_if_needed", id="s", contextWindow=0, attempts=two),
        ],
    )
    yield case(
        "a policy with an unknown key is refused",
        "resolve_target_policy",
        [
            *setup,
            fails(
                Code.COMPACTION_CONFIG_INVALID,
                "compact_if_needed",
                id="s",
                contextWindow=600,
                policy={"ratio": 0.5},
                attempts=two,
            ),
        ],
    )
    refused = {
        "both retention forms": {"retainRatio": 0.1, "retainTokens": 10},
        "a retain ratio equal to the threshold ratio": {"thresholdRatio": 0.5, "retainRatio": 0.5},
        "a retain ratio above the threshold ratio": {"thresholdRatio": 0.5, "retainRatio": 0.6},
        "a threshold ratio of 0": {"thresholdRatio": 0},
        "a threshold ratio above 1": {"thresholdRatio": 1.01},
        "a retain ratio of 0": {"retainRatio": 0},
        "a negative retain ratio": {"thresholdRatio": 0.5, "retainRatio": -0.1},
        "a negative retain token count": {"retainTokens": -1},
        "a fractional retain token count": {"retainTokens": 1.5},
        "a retain token count given as a string": {"retainTokens": "10"},
        "a retain token count at the threshold": {"retainTokens": 80000},
        "a retain token count above the threshold": {"retainTokens": 90000},
        "a threshold ratio given as a string": {"thresholdRatio": "0.5"},
        "a summarization provider without a model": {"summarizationProvider": "p"},
        "a summarization model without a provider": {"summarizationModel": "m"},
        "a summarization provider that is not a string": {
            "summarizationProvider": 1,
            "summarizationModel": "m",
        },
        "a summarization model that is not a string": {
            "summarizationProvider": "p",
            "summarizationModel": None,
        },
        "a max token count of 0": {"maxTokens": 0},
        "a fractional max token count": {"maxTokens": 1.5},
        "a negative compaction retry count": {"compactionRetries": -1},
        "a fractional compaction retry count": {"compactionRetries": 0.5},
        "a negative overflow retry count": {"maxOverflowRetries": -1},
    }
    yield case(
        "a policy outside its bounds is refused, field by field",
        "validate_compaction_policy",
        [
            *setup,
            *(
                fails(
                    Code.COMPACTION_CONFIG_INVALID,
                    "compact_if_needed",
                    id="s",
                    contextWindow=100000,
                    policy=policy,
                    attempts=two,
                )
                for policy in refused.values()
            ),
            fails(
                Code.COMPACTION_CONFIG_INVALID, "compact_if_needed", id="s", contextWindow=1.5, attempts=two
            ),
            fails(
                Code.COMPACTION_CONFIG_INVALID,
                "compact_if_needed",
                id="s",
                contextWindow=2**53,
                attempts=two,
            ),
        ],
        comment="in order: "
        + "; ".join(refused)
        + "; then a fractional context window, and one past the safe integers (2^53)",
    )
    yield case(
        "a retain ratio at or above the threshold ratio is refused by the policy itself, with no window",
        "validate_compaction_policy",
        [
            *setup,
            *(
                fails(
                    Code.COMPACTION_CONFIG_INVALID, "compact_if_needed", id="s", policy=policy, attempts=two
                )
                for policy in (
                    {"thresholdRatio": 0.5, "retainRatio": 0.5},
                    {"thresholdRatio": 0.5, "retainRatio": 0.6},
                )
            ),
        ],
        comment="the policy is judged before the window is looked for: without one, a policy that passed "
        "would be refused for want of capacity (COMPACTION_NO_CAPACITY) instead",
    )
    accepted = {
        "a threshold ratio of 1": {"thresholdRatio": 1},
        "a retain ratio just below the threshold ratio": {"thresholdRatio": 0.5, "retainRatio": 0.49},
        "no retained tokens": {"retainTokens": 0},
        "a retain token count just below the threshold": {"retainTokens": 79999},
        "a summarization provider and model together": {
            "summarizationProvider": "p",
            "summarizationModel": "m",
        },
        "a max token count of 1": {"maxTokens": 1},
        "no retries": {"compactionRetries": 0, "maxOverflowRetries": 0},
    }
    yield case(
        "a policy at its bounds is accepted, field by field",
        "validate_compaction_policy",
        [
            *setup,
            *(
                ok("compact_if_needed", id="s", contextWindow=100000, policy=policy, attempts=two)
                for policy in accepted.values()
            ),
            fails(
                Code.COMPACTION_SUMMARY_NOT_SMALLER,
                "compact_if_needed",
                id="s",
                contextWindow=1,
                policy={"thresholdRatio": 1, "retainTokens": 0},
                attempts=two,
            ),
            state(),
        ],
        comment="in order: "
        + "; ".join(accepted)
        + "; the window of 100,000 tokens puts the threshold at 80,000: "
        "no policy here compacts; then the smallest context window (a threshold of 1 token, 0 kept) is "
        "accepted, and pressure runs: no summary is smaller than 1 token",
    )
    yield case(
        "pressure still above the threshold after its last attempt is refused, its compactions kept",
        "validate_pressure_relieved",
        [
            *setup,
            fails(
                Code.COMPACTION_STILL_ABOVE_THRESHOLD,
                "compact_if_needed",
                id="s",
                contextWindow=300,
                policy={"compactionRetries": 0},
                attempts=[attempt("k1")],
            ),
            state(),
        ],
    )
    yield case(
        "pressure refuses to start while a compaction lock is live",
        LOCK,
        [
            *setup,
            ok("engine_append", id="s", type="compaction/start", data={"compactionId": "k0", "turn": 3}),
            fails(Code.COMPACTION_BUSY, "compact_if_needed", id="s", contextWindow=600, attempts=two),
        ],
    )
    yield case(
        "pruning alone can relieve pressure, and then no summary is written",
        "is_under_pressure",
        [
            *first_question("grep the tests"),
            *tool_steps(1, "c1"),
            step_open(1, 2),
            ok(
                "compact_if_needed",
                id="s",
                contextWindow=400,
                prune={"thresholdChars": 400, "headChars": 100, "tailChars": 100},
                attempts=two,
            ),
            state(),
        ],
        comment="the tool result alone holds the context over the threshold; once pruned it is under",
    )
    yield case(
        "the forced overflow compaction keeps only the newest indivisible unit",
        SELECT,
        [
            *setup,
            ok("compact_if_needed", id="s", trigger="context-overflow", attempts=[attempt("k1")]),
            state(),
        ],
    )
    yield case(
        "a seed's stale bracket stays as it was: compaction writes only its own",
        BRACKET,
        [
            ok(
                "create",
                id="s",
                seed=[
                    event(0, "compaction/start", {"compactionId": "k0", "turn": None}),
                    event(1, "session/end-seed", {}),
                ],
            ),
            append({"turn": 1}, type="turn/start"),
            append(msg.user("u1", LONG)),
            append(msg.user("u2", LONG)),
            ok("compact_if_needed", id="s", trigger="context-overflow", attempts=[attempt("k1")]),
            state(),
        ],
    )


def failed(code: Code, op: str = "compact", behaviour: JsonObject | None = None, **more: Any) -> list[Step]:
    """``op`` (``compact_region`` over nodes 1 to 9) with attempt k1 scripted by ``behaviour``,
    failing with ``code``, then the session's state."""
    region = {"start": 1, "end": 9} if op == "compact_region" else {}
    return [fails(code, op, id="s", **region, attempt=attempt("k1", **(behaviour or {})), **more), state()]


def _measured(steps: Sequence[Step], session: str = "s") -> tuple[tuple[int, ...], int]:
    """What the spec prices each surface node of ``session`` at once ``steps`` have run (surface
    order), and what it estimates the next request costs (the quantity pressure compares with its
    threshold)."""
    oracle = SpecOracle()
    for step in (*start(), *steps):
        oracle.handle(step.request)
    snapshot = oracle.handle({"op": "state", "id": session})["result"]
    assert (
        isinstance(snapshot, dict)
        and isinstance(snapshot["events"], list)
        and isinstance(snapshot["nodes"], list)
    )
    events = [event for event in snapshot["events"] if isinstance(event, dict)]
    nodes = [seq for seq in snapshot["nodes"] if isinstance(seq, int)]
    priced = price_surface(nodes, events)
    return tuple(price for _, price in priced), derive_context_tokens(events, priced)


def _pressed(setup: Sequence[Step], window: int, policy: JsonObject) -> list[Step]:
    """``setup``, then pressure (``compact_if_needed`` with two summaries ready) at ``window``
    tokens under ``policy``, then the session's state."""
    return [
        *setup,
        ok(
            "compact_if_needed",
            id="s",
            contextWindow=window,
            policy=policy,
            attempts=[attempt("k1"), attempt("k2")],
        ),
        state(),
    ]


def _pressure_boundary() -> Cases:
    """Pressure is inclusive (``is_under_pressure``: tokens >= threshold): a context estimated at
    exactly the threshold compacts, one token below it does nothing. The threshold is
    ``floor(contextWindow × thresholdRatio)``, set here to the context's own estimate, or one more."""
    setup = [*history(2), *open_turn(3)]
    tokens = _measured(setup)[1]
    two = [attempt("k1"), attempt("k2")]
    for ratio, per_token in ((1, 1), (0.5, 2)):
        policy = {"thresholdRatio": ratio, "retainRatio": 0.1}
        for above, (name, outcome) in enumerate(
            (
                ("at exactly the threshold compacts", "compacts"),
                ("one token below the threshold does nothing", "waits"),
            )
        ):
            window = (tokens + above) * per_token
            yield case(
                f"a context {name} (thresholdRatio {ratio})",
                "is_under_pressure",
                [
                    *setup,
                    ok("compact_if_needed", id="s", contextWindow=window, policy=policy, attempts=two),
                    state(),
                ],
                comment=f"the context is estimated at {tokens} tokens and the window of {window} puts the "
                f"threshold at {tokens + above}: pressure {outcome}",
            )


def _retained_tail() -> Cases:
    """Which tail pressure keeps (``select_compactable_range``): walking from the newest node, nodes
    are kept until their prices reach ``retainTokens`` (inclusive), and the rest before them is the
    span. The threshold is set to the context's own estimate (``thresholdRatio`` 1), so pressure
    compacts once."""
    setup = [*history(2), *open_turn(3)]
    prices, tokens = _measured(setup)
    newest = prices[-1]
    for retain, name in (
        (newest, "a tail priced exactly at retainTokens is enough: only the newest node is kept"),
        (newest + 1, "one token more than the newest node's price keeps the node before it too"),
    ):
        yield case(
            name,
            SELECT,
            _pressed(setup, tokens, {"thresholdRatio": 1, "retainTokens": retain}),
            comment=f"the surface's nodes are priced {list(prices)} (newest last) and retainTokens is {retain}",
        )
    base = msg.header()["header"]
    assert isinstance(base, dict)
    system = "You are a careful engineer. Read before you write. " * 24
    prompted = [
        *setup,
        append({"header": {**base, "system": system}, "reason": "initial"}, type="request/header"),
    ]
    prices, tokens = _measured(prompted)
    retain = sum(prices) + 1
    assert retain < tokens and retain <= sum(prices) + prices[-1]
    yield case(
        "a retained tail larger than the whole surface leaves nothing to compact: pressure answers null",
        SELECT,
        _pressed(prompted, tokens, {"thresholdRatio": 1, "retainTokens": retain}),
        comment=f"the request's system prompt holds the context at {tokens} tokens, the threshold; the surface "
        f"is priced {sum(prices)} in all and retainTokens is {retain}: every node is kept, no span is left, and "
        "pressure writes nothing",
    )
    short = [*history(2), turn(3), append(msg.user("u3", "and then?"))]
    prices, tokens = _measured(short)
    retain = tokens * 16 // 100
    assert sum(prices[-2:]) < retain <= sum(prices[-3:])
    yield case(
        "without a configured retention pressure keeps 16% of the window: here the newest three nodes",
        "derive_retain_ratio",
        _pressed(short, tokens, {"thresholdRatio": 1}),
        comment=f"a window of {tokens} tokens retains floor({tokens} x 0.16) = {retain}; the nodes are priced "
        f"{list(prices)} (newest last), so the tail reaches it only with the third newest node",
    )


def _pressure_reads_the_newest_header() -> Cases:
    """Pressure prices the newest request/header wherever it stands in the log: followed by a
    step/start or by an assistant message (events that sort after and before it), or as the log's
    very first event. The threshold is the whole estimate, system prompt included, so a meter that
    misses the header stays below it and writes nothing."""
    base = msg.header()["header"]
    assert isinstance(base, dict)
    header = append(
        {
            "header": {**base, "system": "You are a careful engineer. Read before you write. " * 13},
            "reason": "initial",
        },
        type="request/header",
    )
    setups = (
        ("followed by a step/start", [*history(2), *open_turn(3), header, step_open(3)]),
        ("followed by an assistant message", [*history(2), *open_turn(3), step_open(3), header, answer(3)]),
        (
            "as the log's first event",
            [ok("create", id="s"), header, *closed_turn(1), *closed_turn(2), *open_turn(3)],
        ),
    )
    for where, setup in setups:
        tokens = _measured(setup)[1]
        yield case(
            f"pressure counts the newest request/header {where}",
            "derive_request_header",
            _pressed(setup, tokens, {"thresholdRatio": 1, "retainRatio": 0.1}),
            comment=f"the context, the header's system prompt included, is estimated at {tokens} tokens: the "
            "threshold, so pressure compacts",
        )


def _pressure_counts_the_request() -> Cases:
    """Pressure measures what the next request costs (``derive_context_tokens``): the latest
    request/header's system prompt and tools fill the window too, though they are on no surface,
    each at its estimate plus 4. The threshold is set to that whole estimate (pressure compacts), or
    one token above it (it waits): a meter that leaves them out, or prices them otherwise, falls on
    the other side of one of the two. Each text's estimate has its 4s bit set, so that adding the 4
    is not the same as setting that bit."""
    tools: list[JsonValue] = [{"name": f"tool{n}", "description": "reads a file " * 10} for n in range(4)]
    system = "You are a careful engineer. Read before you write. " * 13
    assert estimate_text(system) & 4 and estimate_json(tools) & 4
    extras: tuple[tuple[str, JsonObject], ...] = (
        ("system prompt", {"system": system}),
        ("tools", {"tools": tools}),
    )
    for name, extra in extras:
        base = msg.header()["header"]
        assert isinstance(base, dict)
        header: JsonObject = {"header": {**base, **extra}}
        setup = [*history(2), *open_turn(3), append({**header, "reason": "initial"}, type="request/header")]
        tokens = _measured(setup)[1]
        for above, (title, outcome) in enumerate(
            (
                (
                    f"pressure counts the latest request's {name}, which sits on no surface",
                    "so pressure compacts",
                ),
                (
                    f"one token below the threshold with the latest request's {name}, pressure waits",
                    "so it waits",
                ),
            )
        ):
            yield case(
                title,
                "derive_context_tokens",
                _pressed(setup, tokens + above, {"thresholdRatio": 1, "retainRatio": 0.1}),
                comment=f"the context, the request's {name} included, is estimated at {tokens} tokens and the "
                f"threshold is {tokens + above}: {outcome}",
            )


cases: Final = chained(
    _manual,
    _span,
    _lock_and_owner,
    _failure_paths,
    _automatic,
    _pressure,
    _pressure_boundary,
    _retained_tail,
    _pressure_reads_the_newest_header,
    _pressure_counts_the_request,
)
