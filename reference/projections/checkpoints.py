"""Durability checkpoints: flush the session log before a model request, before a tool body runs,
and at each pre-step; fail closed when the flush fails (seed 002; notes/dsh-compaction-projection
§11.5 item 2; spec.projections.durability).

A host calls these at its three moments, passing the action to guard. The action runs only after
``session.flush()`` returned; if the flush raises, the action is not run and the caller gets a
``DURABILITY_CHECKPOINT_FAILED`` error whose cause is the storage failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from spec.projections.durability import Moment, checkpoint_failure, is_durability_checkpoint
from spec.shrink.bracket import derive_error_chain

T = TypeVar("T")


class Flushable(Protocol):
    def flush(self) -> None: ...


class DurabilityCheckpoints:
    """The checkpoint policy for one session (anything with a ``flush``)."""

    def __init__(self, session: Flushable) -> None:
        self.session = session

    def checkpoint(self, moment: Moment) -> None:
        """Flush for ``moment``, or raise ``DURABILITY_CHECKPOINT_FAILED``."""
        if not is_durability_checkpoint(moment):
            raise ValueError(f"unknown durability checkpoint moment {moment!r}")
        try:
            self.session.flush()
        except Exception as error:
            raise checkpoint_failure(moment, derive_error_chain(error)) from error

    def guard(self, moment: Moment, action: Callable[[], T]) -> T:
        """Run ``action`` after the checkpoint of ``moment``; never run it if the flush failed."""
        self.checkpoint(moment)
        return action()

    def before_model_request(self, send: Callable[[], T]) -> T:
        return self.guard("model-request", send)

    def before_tool(self, run: Callable[[], T]) -> T:
        return self.guard("tool", run)

    def pre_step(self) -> None:
        self.checkpoint("pre-step")
