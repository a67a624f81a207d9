"""Checks every backend applies to a batch before buffering it."""

from __future__ import annotations

from collections.abc import Sequence

from spec.codes import Code, reject
from spec.events import Event
from spec.json import FrozenDict


def validate_batch(next_seq: int, events: Sequence[Event]) -> None:
    """A batch continues the log exactly (seq ``next_seq``, ``next_seq + 1``...) and holds only
    frozen events: the session's own, which the spec has already validated."""
    for offset, event in enumerate(events):
        expected = next_seq + offset
        if not isinstance(event, FrozenDict):
            raise TypeError("persistence takes frozen events produced by a session")
        if event.get("seq") != expected:
            raise reject(
                Code.SEQ_NOT_CONTIGUOUS, f"stored next seq is {expected}, but the batch offers seq {event.get('seq')}"
            )


