"""Durability checkpoints: flush the session log before the moments that act on the world
(seed 002, the four meanings of "checkpoint"; notes/dsh-compaction-projection §11.5 item 2).

A checkpoint policy flushes lazily before a model request is sent, before a tool body runs, and
at every pre-step. It fails closed: if the flush fails, the request or the tool is not run at all,
because something done but not recorded is worse than nothing done.
"""

from __future__ import annotations

from typing import Final, Literal

from spec.codes import Code, SpecError, reject

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
