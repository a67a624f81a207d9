"""checkpoint: durability checkpoints through the engine op ``checkpoint`` (seed 002;
notes/dsh-compaction-projection §11.5 item 2; conformance/PROTOCOL.md, "Engine ops").

Before a model request, before a tool body and at each pre-step the log is flushed, and only then
does the guarded action happen. It fails closed: when the flush fails, the action is not run and the
checkpoint answers ``DURABILITY_CHECKPOINT_FAILED`` — something done but not recorded is worse than
nothing done.
"""

from __future__ import annotations

from conformance.builders import tool_call
from conformance.cases.build import Cases, case, fails, ok, turn
from spec.codes import Code

FAILURE = "checkpoint_failure"
MOMENT = "is_durability_checkpoint"
CALL = {"type": "tool/call", "data": tool_call("c1")}


def cases() -> Cases:
    yield case(
        "a checkpoint makes the log durable, then its guarded action runs",
        MOMENT,
        [
            ok("create", id="s"),
            turn(1),
            ok("checkpoint", id="s", moment="tool", then=CALL),
            ok("read", id="s"),
        ],
        storage="memory",
        comment="the read shows the turn/start the checkpoint flushed; the tool/call came after it",
    )
    for moment in ("model-request", "pre-step"):
        yield case(
            f"a {moment} checkpoint flushes the log",
            MOMENT,
            [ok("create", id="s"), turn(1), ok("checkpoint", id="s", moment=moment), ok("read", id="s")],
            storage="memory",
        )
    for name, fs_op, errno, moment, retried in (
        ("a checkpoint whose flush fails fails closed: its action never runs", "fsync", "EIO", "tool", False),
        ("a checkpoint whose disk is full fails closed too", "write", "ENOSPC", "model-request", True),
    ):
        retry = [ok("checkpoint", id="s", moment=moment, then=CALL)] if retried else []
        yield case(
            name,
            FAILURE,
            [
                ok("create", id="s"),
                ok("flush", id="s"),
                turn(1),
                ok("fail_next", fsOp=fs_op, errno=errno),
                fails(Code.DURABILITY_CHECKPOINT_FAILED, "checkpoint", id="s", moment=moment, then=CALL),
                ok("state", id="s"),
                *retry,
            ],
            storage="file",
            comment="the fault fails one write; the next checkpoint flushes and lets its action run"
            if retried
            else None,
        )
    yield case(
        "without storage a checkpoint has nothing to make durable and lets its action run",
        MOMENT,
        [ok("create", id="s"), turn(1), ok("checkpoint", id="s", moment="pre-step", then=CALL)],
    )
