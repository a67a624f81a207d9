"""The persistence interface (SPEC-DECISIONS D2): a service ``create/open/read/stat/list`` and a
handle ``read/append/flush/close``.

``append`` may buffer; ``flush`` is the durability barrier: when it returns, every event appended
before it is on stable storage. ``close`` flushes. A handle is the single writer of its session;
``read`` on the service is a lock-free reader's view.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from spec.log.events import Event
from spec.log.json import FrozenDict
from spec.log.seed import SeedMode


@dataclass(frozen=True)
class StoredLog:
    """What a reader sees: the header, the durable events, and the format the bytes were in."""

    header: FrozenDict
    events: tuple[Event, ...]
    format_version: int


@dataclass(frozen=True)
class OpenReport:
    """What opening a session for writing had to do to hand back a clean log (D3 items 4-6)."""

    torn_bytes_dropped: int = 0
    recovered_events: int = 0
    closers_appended: int = 0
    migrated_from_v0: bool = False


@dataclass(frozen=True)
class SessionStat:
    session_id: str
    format_version: int
    stored_bytes: int
    revision: str
    location: str


class LogHandle(Protocol):
    """The single writer of one session's log."""

    @property
    def header(self) -> FrozenDict: ...

    @property
    def report(self) -> OpenReport: ...

    def read(self) -> tuple[Event, ...]:
        """Every event appended through this handle or found durable at open, in seq order."""
        ...

    def append(self, events: Sequence[Event], floats: Collection[float] | None = None) -> None:
        """Buffer events; their seqs must continue the log exactly. ``floats``, when given, holds
        every float the events hold (perhaps more), for a backend that encodes them."""
        ...

    def flush(self) -> None:
        """Make everything appended so far durable, or raise (nothing flushed before is lost)."""
        ...

    def close(self) -> None:
        """Flush, then release the writer lock. Closing twice is harmless."""
        ...

    # A log kept as its stored lines (issue 24): see reference.persistence.common.BufferedLogHandle.
    def judged(self) -> tuple[tuple[Event, ...], SeedMode, int]:
        """The log at open as a resume folds it: its events, seed mode and ``messages_checked``."""
        ...

    def settle(self) -> Sequence[bytes]:
        """The stored lines the log at open was read from, from now on decoded when read."""
        ...

    def keep_lines(self, lines: Sequence[bytes]) -> None:
        """Keep the first ``len(lines)`` events as these stored lines, decoded when read."""
        ...


class PersistenceService(Protocol):
    def create(self, header: FrozenDict) -> LogHandle:
        """Start a new session log (visible to others only once flushed, and then whole)."""
        ...

    def open(self, session_id: str) -> LogHandle:
        """Take over a stored log as its writer: repair a torn tail and close an open turn first."""
        ...

    def read(self, session_id: str) -> StoredLog:
        """A reader's view of the durable log, changing nothing (torn tail ignored, no closers)."""
        ...

    def stat(self, session_id: str) -> SessionStat | None: ...

    def list(self) -> list[FrozenDict]:
        """The headers of every stored session."""
        ...
