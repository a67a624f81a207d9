"""A live session: the spec's rules, made to run.

Every validity decision is a call into ``spec``; this class adds the mutable state (the log, the
surface nodes), an incremental derived-message cache, and a sink that takes each committed event
towards storage. Appends are atomic: a rejected append changes nothing and consumes no seq.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from reference.persistence.fastjson import StoredEvents
from spec.log.events import Event, Message
from spec.log.json import FrozenDict
from spec.log.nodes import SurfaceNodes
from spec.log.session import ABSENT, SessionState, plan_event
from spec.log.surface import SurfacePlan, derive_messages, splice_plan
from spec.log.writers import CALLER, Writer

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Unix epoch milliseconds, the ``time`` of an appended event."""
    return time.time_ns() // 1_000_000


class EventSink(Protocol):
    """Where committed events go (a persistence handle); ``append`` buffers, ``flush`` is durable.
    ``floats``, when given, holds every float the events hold (perhaps more): a sink that encodes
    them need not search their text for the floats its encoder writes otherwise."""

    def append(self, events: Sequence[Event], floats: Collection[float] | None = None) -> None: ...

    def flush(self) -> None: ...


@dataclass(frozen=True)
class SurfaceView:
    """A snapshot of the surface: the nodes in model-visible order and the replace count."""

    nodes: tuple[int, ...]
    replace_generation: int


class Session:
    """One session log. Build it through :class:`reference.store.SessionStore`."""

    def __init__(
        self,
        state: SessionState,
        sink: EventSink | None = None,
        clock: Clock = wall_clock_ms,
        on_commit: Callable[[Session, Event], None] | None = None,
        stored_lines: Sequence[bytes] = (),
    ) -> None:
        self._header = state.header
        # The first events may be kept as the stored lines they were judged from (a resume read in
        # bulk: issue 24), each decoded when read; every later one is held as it is.
        kept = len(stored_lines)
        if kept > len(state.events):
            raise ValueError("more stored lines than events")
        self._tail: list[Event] = list(state.events[kept:])
        self._log: Sequence[Event] = StoredEvents(stored_lines, None, self._tail) if kept else self._tail
        self._nodes = SurfaceNodes(state.surface.nodes)
        self._generation = state.surface.replace_generation
        self._first_live_seq = state.first_live_seq
        self._sink = sink
        self._clock = clock
        self._on_commit = on_commit  # told of every event this session commits (the store's subscription)
        self._events_snapshot: Sequence[Event] | None = None
        self._surface_snapshot: SurfaceView | None = None
        self._derived: list[Message] = []
        self._derived_nodes = 0
        self._derived_generation = self._generation

    # --- reading -------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return str(self._header["id"])

    @property
    def header(self) -> FrozenDict:
        return self._header

    @property
    def seq(self) -> int:
        """The seq the next event will get."""
        return len(self._log)

    @property
    def first_live_seq(self) -> int:
        """The first seq written by this lifecycle (the seed's length); not ``header.seedLength``."""
        return self._first_live_seq

    @property
    def events(self) -> Sequence[Event]:
        """The log; a held snapshot never grows, and its events are frozen. A tuple, unless the
        session keeps stored lines (:class:`StoredEvents`, which compares equal to one)."""
        if self._events_snapshot is None or len(self._events_snapshot) != len(self._log):
            log = self._log
            self._events_snapshot = log.snapshot() if isinstance(log, StoredEvents) else tuple(log)
        return self._events_snapshot

    @property
    def surface(self) -> SurfaceView:
        if self._surface_snapshot is None:
            self._surface_snapshot = SurfaceView(tuple(self._nodes), self._generation)
        return self._surface_snapshot

    def derive_messages(self) -> list[Message]:
        """The model-visible messages, one per surface node. Incremental: a new replaceGeneration
        rebuilds the cache; otherwise only new nodes are derived. Returns a fresh list."""
        if self._generation != self._derived_generation:
            self._derived = []
            self._derived_nodes = 0
            self._derived_generation = self._generation
        self._derived.extend(derive_messages(self._log, self._nodes[self._derived_nodes :]))
        self._derived_nodes = len(self._nodes)
        return list(self._derived)

    # --- writing -------------------------------------------------------------------------

    def append(
        self,
        event_type: object,
        data: object,
        surface_op: object = ABSENT,
        source_event_seqs: object = ABSENT,
        writer: Writer = CALLER,
    ) -> Event:
        """Validate the event through the spec, hand it to the sink, then commit it. A host appends
        as the ``CALLER``, and never writes what only the store writes (``session/end-seed``, repair
        closers: ``spec.log.writers``); the compaction engine (``reference.shrink.compaction``)
        appends as ``COMPACTION_ENGINE``, which may write the compaction bracket's own events.
        The sink is told the floats the event holds, which the spec's copies met (issue 24)."""
        floats: list[float] = []
        time = self._clock()
        if type(time) is float:  # a clock's float is the one number of the event no copy meets
            floats.append(time)
        event, plan = plan_event(
            self._nodes, self._log, event_type, data, surface_op, source_event_seqs, time, writer, floats
        )
        return self._commit(event, plan, floats)

    def _commit(self, event: Event, plan: SurfacePlan, floats: Collection[float] | None = None) -> Event:
        """A planned append made: to the sink (with the floats the event holds, when known), the
        log, the surface, then the store is told."""
        if self._sink is not None:
            self._sink.append((event,), floats)
        self._tail.append(event)
        if plan is not None:
            self._generation = splice_plan(self._nodes, plan, self._generation)
            self._surface_snapshot = None
        if self._on_commit is not None:
            self._on_commit(self, event)
        return event

    def flush(self) -> None:
        """The durability barrier: every event appended so far is on stable storage on return."""
        if self._sink is not None:
            self._sink.flush()

    def detach_sink(self) -> EventSink | None:
        sink, self._sink = self._sink, None
        return sink
