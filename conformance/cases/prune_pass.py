"""prune-pass: the prune pass on a live session through the engine op ``prune`` (SPEC-DECISIONS D8;
notes/dsh-compaction-projection §6.3; conformance/PROTOCOL.md, "Engine ops").

The ``prune`` family holds the pure transform; this one runs the pass: for every oversized tool
result on the surface, a ``compaction/prune`` metering event priced on the original, then at once
the replacing ``tool/result`` that changes only the inner content (the tool-rewrite rule: the call,
the ids and the error flag stay). A second pass prunes nothing. A pass with something to prune
needs an open turn.
"""

from __future__ import annotations

from conformance.cases.build import Cases, append_user, case, fails, ok, turn
from conformance.cases.engine_build import TOOL_OUTPUT, first_question, history, state_step, tool_steps
from spec.codes import Code

PASS = "plan_prune_events"
SMALL = {"thresholdChars": 400, "headChars": 100, "tailChars": 100}


def cases() -> Cases:
    setup = [ok("create", id="s"), turn(1), append_user("u1", "s", "grep the tests"), *tool_steps(1, "c1")]
    yield case(
        "a pass prunes every oversized result: a metering event priced on the original, then its replacement",
        PASS,
        [*setup, ok("prune", id="s", config=SMALL), state_step()],
    )
    yield case(
        "a second pass prunes nothing and appends nothing",
        PASS,
        [*setup, ok("prune", id="s", config=SMALL), ok("prune", id="s", config=SMALL), state_step()],
        why="pruning converges in one pass: a pruned result is within the threshold",
    )
    yield case(
        "a pruned result keeps its call, its ids and its error flag",
        "validate_tool_result_rewrite",
        [
            *first_question("grep the tests"),
            *tool_steps(1, "c1", is_error=True),
            ok("prune", id="s", config=SMALL),
            state_step(),
        ],
    )
    yield case(
        "a result within the default threshold is left alone",
        PASS,
        [*setup, ok("prune", id="s"), state_step()],
        comment=f"the result holds {len(TOOL_OUTPUT)} code points, under the default 8192",
    )
    yield case(
        "a pass with something to prune outside a turn is refused before anything is appended",
        "validate_prune_in_turn",
        [
            *setup,
            ok("append", id="s", type="turn/end", data={"turn": 1, "reason": {"kind": "completed"}}),
            fails(Code.PRUNE_OUTSIDE_TURN, "prune", id="s", config=SMALL),
            state_step(),
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
