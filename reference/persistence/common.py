"""Checks every backend applies to a batch before buffering it."""

from __future__ import annotations

from collections.abc import Sequence

from reference.persistence.api import OpenReport
from spec.codes import Code, reject
from spec.log.events import Event
from spec.log.json import FrozenDict


def validate_batch(next_seq: int, events: Sequence[Event]) -> None:
    """A batch continues the log exactly (seq ``next_seq``, ``next_seq + 1``...) and holds only
    frozen events: the session's own, which the spec has already validated."""
    for offset, event in enumerate(events):
        expected = next_seq + offset
        if not isinstance(event, FrozenDict):
            raise TypeError("persistence takes frozen events produced by a session")
        if event.get("seq") != expected:
            raise reject(
                Code.SEQ_NOT_CONTIGUOUS,
                f"stored next seq is {expected}, but the batch offers seq {event.get('seq')}",
            )


class BufferedLogHandle:
    """What every backend's handle shares: the events appended so far (the first
    ``durable_count`` of them on stable storage), ``flush`` writing the rest, ``close`` flushing and
    then releasing the writer. A backend supplies :meth:`_write_pending` and :meth:`_release`."""

    def __init__(self, header: FrozenDict, durable: Sequence[Event], report: OpenReport) -> None:
        self._header = header
        self._events: list[Event] = list(durable)
        self._durable_count = len(durable)
        self._report = report
        self._closed = False

    @property
    def header(self) -> FrozenDict:
        return self._header

    @property
    def report(self) -> OpenReport:
        return self._report

    def read(self) -> tuple[Event, ...]:
        return tuple(self._events)

    def append(self, events: Sequence[Event]) -> None:
        if self._closed:
            raise reject(Code.SESSION_CLOSED, f'session "{self._header["id"]}" is closed')
        validate_batch(len(self._events), events)
        self._events.extend(events)

    def flush(self) -> None:
        if self._closed:
            return
        self._write_pending(self._events[self._durable_count :])
        self._durable_count = len(self._events)

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._release()

    def _write_pending(self, pending: Sequence[Event]) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError
