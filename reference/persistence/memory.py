"""The in-memory persistence backend: the same contract as the file store, without a disk.

"Durable" here means "in the backend's dict": ``flush`` moves buffered events there, and so
does an append under the batch policy (as the file store's). It is the
behavioural baseline the file store is compared with, and what tests use when storage is beside
the point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from reference.persistence.api import OpenReport, SessionStat, StoredLog
from reference.persistence.common import BufferedLogHandle
from spec.codes import Code, reject
from spec.lineage.store import derive_resumed_log
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION
from spec.log.json import FrozenDict
from spec.projections.durability import BatchPolicy, validate_batch_policy

DEFAULT_BATCH_POLICY: Final = BatchPolicy()  # 200 ms, 1 MiB, as the file store


@dataclass
class _StoredSession:
    header: FrozenDict
    events: list[Event] = field(default_factory=list)
    revision: int = 0


class MemoryPersistence:
    """Sessions kept in a dict; one writer handle per session at a time."""

    def __init__(self, batch: BatchPolicy | None = DEFAULT_BATCH_POLICY) -> None:
        if batch is not None:
            validate_batch_policy(batch)
        self._stored: dict[str, _StoredSession] = {}
        self._writers: set[str] = set()
        self.batch = batch

    def create(self, header: FrozenDict) -> MemoryLogHandle:
        session_id = str(header["id"])
        if session_id in self._stored or session_id in self._writers:
            raise reject(Code.SESSION_ALREADY_EXISTS, f'session "{session_id}" already exists')
        self._writers.add(session_id)
        return MemoryLogHandle(self, header, (), OpenReport(), self.batch)

    def open(self, session_id: str) -> MemoryLogHandle:
        stored = self._require(session_id)
        if session_id in self._writers:
            raise reject(Code.LOCKED, f'session "{session_id}" already has a writer')
        closers = derive_resumed_log(stored.events)[len(stored.events) :]
        if closers:
            stored.events.extend(closers)
            stored.revision += 1
        self._writers.add(session_id)
        return MemoryLogHandle(
            self, stored.header, tuple(stored.events), OpenReport(closers_appended=len(closers)), self.batch
        )

    def read(self, session_id: str) -> StoredLog:
        stored = self._require(session_id)
        return StoredLog(stored.header, tuple(stored.events), HEADER_FORMAT_VERSION)

    def stat(self, session_id: str) -> SessionStat | None:
        stored = self._stored.get(session_id)
        if stored is None:
            return None
        return SessionStat(
            session_id, HEADER_FORMAT_VERSION, len(stored.events), str(stored.revision), "memory"
        )

    def list(self) -> list[FrozenDict]:
        return [stored.header for stored in self._stored.values()]

    # --- used by handles -------------------------------------------------------------------

    def _require(self, session_id: str) -> _StoredSession:
        stored = self._stored.get(session_id)
        if stored is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        return stored

    def _commit(self, header: FrozenDict, events: Sequence[Event]) -> None:
        session_id = str(header["id"])
        stored = self._stored.setdefault(session_id, _StoredSession(header))
        stored.events.extend(events)
        stored.revision += 1

    def _release(self, session_id: str) -> None:
        self._writers.discard(session_id)


class MemoryLogHandle(BufferedLogHandle):
    def __init__(
        self,
        owner: MemoryPersistence,
        header: FrozenDict,
        durable: tuple[Event, ...],
        report: OpenReport,
        batch: BatchPolicy | None = None,
    ) -> None:
        super().__init__(header, durable, report, batch)
        self._owner = owner
        self._published = bool(durable) or str(header["id"]) in owner._stored

    def _write_pending(self, pending: Sequence[Event]) -> None:
        if pending or not self._published:
            self._owner._commit(self._header, pending)
            self._published = True

    def _release(self) -> None:
        self._owner._release(str(self._header["id"]))
