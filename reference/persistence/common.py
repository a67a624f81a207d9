"""What every backend's handle shares: the checks a batch passes before it is buffered, the
buffer, and the batch policy that bounds it (SPEC-DECISIONS D2; spec.projections.durability)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from reference.persistence.api import OpenReport
from reference.persistence.fastjson import StoredEvents
from spec.codes import Code, SpecError, reject
from spec.log.events import Event
from spec.log.json import FrozenDict
from spec.log.seed import SeedMode
from spec.projections.durability import (
    NOTHING_PENDING,
    BatchPolicy,
    apply_pending_events,
    is_batch_due,
    validate_batch_policy,
)


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
    then releasing the writer. A backend supplies :meth:`_write_pending` and :meth:`_release`.

    With a ``batch`` policy, an append also writes the buffer as one batch as soon as the policy
    says it is due (``spec.projections.durability.is_batch_due``), checked against the appended
    events' own times: no timer, no thread. A failed automatic write keeps the batch buffered and
    is not raised to the appender (``deferred_failure`` holds it); the next append that finds the
    batch due tries again, and ``flush`` raises the failure if it persists."""

    def __init__(
        self,
        header: FrozenDict,
        durable: Sequence[Event],
        report: OpenReport,
        batch: BatchPolicy | None = None,
        messages_checked: int = 0,
    ) -> None:
        if batch is not None:
            validate_batch_policy(batch)
        self._header = header
        self._messages_checked = messages_checked
        # A log read in bulk keeps its stored lines (StoredEvents): only what follows them is a list.
        stored = durable if isinstance(durable, StoredEvents) else StoredEvents(())
        self._tail: list[Event] = list(durable[len(stored.lines) :])
        self._events: Sequence[Event] = stored.with_tail(self._tail) if stored.lines else self._tail
        self._held = len(stored.lines)  # the events kept as lines: ``_events`` is them and ``_tail``
        self._durable_count = len(durable)
        self._report = report
        self._closed = False
        self._batch = batch
        self._pending = NOTHING_PENDING
        self.deferred_failure: SpecError | None = None

    @property
    def header(self) -> FrozenDict:
        return self._header

    @property
    def report(self) -> OpenReport:
        return self._report

    def read(self) -> tuple[Event, ...]:
        return tuple(self._events)

    def judged(self) -> tuple[tuple[Event, ...], SeedMode, int]:
        """The log at open for the resume that folds it as its seed, with ``create_session_state``'s
        ``mode`` and ``messages_checked``: a log read in bulk gives the very events its reader
        judged (plain ones when it keeps their text, ``restore-kept``:
        :attr:`StoredEvents.text_kept`), to be judged again, then dropped by :meth:`settle`; the
        first ``messages_checked`` events had their messages checked by a storage read path, those
        after them (closers) not."""
        if isinstance(self._events, StoredEvents):
            kept = self._events.text_kept
            return self._events.judged_events(), "restore-kept" if kept else "restore", self._messages_checked
        return self.read(), "restore", self._messages_checked

    def settle(self) -> Sequence[bytes]:
        """The stored lines the log at open was read from (none unless read in bulk), whose events
        are from now on decoded when read rather than held (the session that resumed the log keeps
        the same lines: :class:`reference.session.Session`)."""
        if isinstance(self._events, StoredEvents):
            self._events.settle()
            return self._events.lines
        return ()

    def keep_lines(self, lines: Sequence[bytes]) -> None:
        """From now on the first ``len(lines)`` events are kept as ``lines``, each the stored text
        of the very event it stands for (a fork's child: its parent's lines), and decoded when read;
        the events are let go. Those not yet durable are decoded again to be written."""
        if isinstance(self._events, StoredEvents) or len(lines) > len(self._tail):
            raise ValueError("only a handle holding its events as objects keeps lines for them")
        self._tail = self._tail[len(lines) :]
        self._events = StoredEvents(lines, None, self._tail)
        self._held = len(lines)

    def append(self, events: Sequence[Event], floats: Collection[float] | None = None) -> None:
        if self._closed:
            raise reject(Code.SESSION_CLOSED, f'session "{self._header["id"]}" is closed')
        # The next seq counted from two lists, not asked of a log kept as lines (issue 24: append).
        validate_batch(self._held + len(self._tail), events)
        lines = self._encode(events, floats)
        self._tail.extend(events)
        if self._batch is not None and events:
            self._pending = apply_pending_events(self._batch, self._pending, events, lines)
            if is_batch_due(self._batch, self._pending, events[-1].get("time")):
                try:
                    self.flush()
                except SpecError as error:
                    self.deferred_failure = error

    def flush(self) -> None:
        if self._closed:
            return
        self._write_pending(self._events[self._durable_count :])
        self._durable_count = len(self._events)
        self._pending = NOTHING_PENDING
        self.deferred_failure = None

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._release()

    def _encode(self, events: Sequence[Event], floats: Collection[float] | None) -> Sequence[bytes] | None:
        """A backend that stores each event as its JSONL line encodes it here, once, as it is
        appended (and keeps it for :meth:`_write_pending`); the batch bound then counts these
        lines instead of encoding the events again. ``None``: this backend encodes when it writes.
        ``floats``: every float the events hold, when the appender knows them (``append``)."""
        return None

    def _write_pending(self, pending: Sequence[Event]) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError
