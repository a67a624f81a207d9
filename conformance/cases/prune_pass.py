"""prune-pass: the prune pass on a live session through the engine op ``prune`` (SPEC-DECISIONS D8;
notes/dsh-compaction-projection §6.3; conformance/PROTOCOL.md, "Engine ops").

The ``prune`` family holds the pure transform; this one runs the pass: for every oversized tool
result on the surface, a ``compaction/prune`` metering event priced on the original, then at once
the replacing ``tool/result`` that changes only the inner content (the tool-rewrite rule: the call,
the ids and the error flag stay). A second pass prunes nothing. A pass with something to prune
needs an open turn.
"""

from __future__ import annotations

from conformance.builders import tool_result
from conformance.cases import msg
from conformance.cases.build import Cases, Step, append, case, fails, ok, replace, state, turn
from conformance.cases.engine_build import (
    TOOL_OUTPUT,
    attempt,
    first_question,
    history,
    tool_steps,
)
from spec.codes import Code
from spec.log.json import JsonValue

PASS = "plan_prune_events"
SMALL = {"thresholdChars": 400, "headChars": 100, "tailChars": 100}


def cases() -> Cases:
    setup = [ok("create", id="s"), turn(1), append(msg.user("u1", "grep the tests")), *tool_steps(1, "c1")]
    yield case(
        "a pass prunes every oversized result: a metering event priced on the original, then its replacement",
        PASS,
        [*setup, ok("prune", id="s", config=SMALL), state()],
    )
    yield case(
        "a second pass prunes nothing and appends nothing",
        PASS,
        [*setup, ok("prune", id="s", config=SMALL), ok("prune", id="s", config=SMALL), state()],
        why="pruning converges in one pass: a pruned result is within the threshold",
    )
    yield case(
        "a pruned result keeps its call, its ids and its error flag",
        "validate_tool_result_rewrite",
        [
            *first_question("grep the tests"),
            *tool_steps(1, "c1", is_error=True),
            ok("prune", id="s", config=SMALL),
            state(),
        ],
    )
    yield case(
        "a result within the default threshold is left alone",
        PASS,
        [*setup, ok("prune", id="s"), state()],
        comment=f"the result holds {len(TOOL_OUTPUT)} code points, under the default 8192",
    )
    yield case(
        "a pass with something to prune outside a turn is refused before anything is appended",
        "validate_prune_in_turn",
        [
            *setup,
            ok("append", id="s", type="turn/end", data={"turn": 1, "reason": {"kind": "completed"}}),
            fails(Code.PRUNE_OUTSIDE_TURN, "prune", id="s", config=SMALL),
            state(),
        ],
    )
    yield case(
        "a pass with nothing to prune outside a turn appends nothing",
        PASS,
        [*history(1), ok("prune", id="s", config=SMALL)],
    )
    yield case(
        "a pass with thresholds that do not fit is refused",
        "validate_prune_config",
        [
            *setup,
            fails(
                Code.PRUNE_CONFIG_INVALID,
                "prune",
                id="s",
                config={"thresholdChars": 100, "headChars": 100, "tailChars": 100},
            ),
        ],
    )
    yield case(
        "a pass's charsRemoved adds up what it removed from every result it pruned",
        "derive_chars_removed",
        [
            *first_question("grep the tests"),
            *tool_steps(1, "c1"),
            *tool_steps(1, "c2", text=TOOL_OUTPUT * 2, step=2),
            ok("prune", id="s", config=SMALL),
        ],
        comment="two results of different lengths: the sum of both, neither the first's nor the last's alone",
    )
    yield from order_cases()
    yield from carried_cases()


def _rewritten_first() -> list[Step]:
    """Two oversized results (c1 at seq 5, c2 at seq 10), then c1's rewritten at seq 12: on the
    surface the rewrite stands before c2 (nodes 1, 3, 12, 8, 10), in the log after it."""
    return [
        *first_question("grep the tests"),
        *tool_steps(1, "c1"),
        *tool_steps(1, "c2", text=TOOL_OUTPUT.upper(), step=2),
        append(
            msg.rewritten(tool_result("c1", TOOL_OUTPUT), TOOL_OUTPUT.replace("assert", "check")),
            type="tool/result",
            surfaceOp=replace(5, 5),
            sourceEventSeqs=[5],
        ),
    ]


def _by_both_passes(what: str, setup: list[Step], comment: str) -> Cases:
    """``what`` holds of the prune op's pass and of overflow recovery's (whose summary fails, so
    the log shows the prunes alone)."""
    yield case(f"a pass {what}", PASS, [*setup, ok("prune", id="s", config=SMALL), state()], comment=comment)
    failing = attempt("k1", fail="the model is unavailable")
    yield case(
        f"overflow recovery's pass {what}",
        PASS,
        [*setup, ok("overflow", id="s", prune=SMALL, attempt=failing), state()],
    )


def order_cases() -> Cases:
    yield from _by_both_passes(
        "walks the results in surface order, not log order",
        _rewritten_first(),
        "the rewrite of c1 (seq 12) stands before c2 (seq 10) on the surface: it is pruned first",
    )


def carried_cases() -> Cases:
    trailing: list[JsonValue] = [{"type": "text", "text": "(the output was long)"}]
    with_note = [
        *first_question("grep the tests"),
        *tool_steps(1, "c1", after=trailing),
    ]
    yield from _by_both_passes(
        "replaces a result by its tool-result block alone: blocks after it are not carried",
        with_note,
        "as in DSH, the replacement's message content is the pruned tool-result block",
    )
