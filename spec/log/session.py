"""The pure session model: construction from a seed, append, and the message projection
(notes/dsh-session-core §4, §5, §6).

A session is its header, its log and the surface folded from that log. Nothing here holds state:
each function takes a :class:`SessionState` (or plain sequences) and returns a decision or the
next state. The reference implementation and the conformance suite both use these functions as
the oracle of what a session must do.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, cast

from spec.codes import Code, reject
from spec.log.events import (
    END_SEED,
    REQUEST_HEADER,
    REQUEST_HEADER_DELTA,
    SURFACE_EVENT_TYPES,
    Event,
    Message,
)
from spec.log.header import snapshot_header, validate_header
from spec.log.json import NOT_JSON, FrozenDict, JsonValue, freeze_parsed_json, snapshot_json
from spec.log.nodes import SurfaceNodes
from spec.log.seed import (
    RESTORE_MODES,
    SeedMode,
    needs_end_seed,
    plan_seed_surface,
    take_seed_run,
    validate_end_seed_outside_open_compaction,
    validate_seed_event,
)
from spec.log.surface import (
    Surface,
    SurfacePlan,
    apply_surface_plan,
    derive_messages,
    plan_surface_event,
    splice_plan,
)
from spec.log.writers import (
    CALLER,
    STORE,
    Writer,
    validate_writer_of_closer,
    validate_writer_of_type,
)


class Absent(Enum):
    """A key that was not passed, or that an event does not carry (JavaScript's ``undefined``)."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT
""""This key was not passed" or "the event does not carry this key" (JavaScript's ``undefined``):
the one such marker of the spec. Distinct from ``None``, which is JSON null: an append given
``surface_op=None`` carries ``surfaceOp: null`` and is rejected for it."""


@dataclass(frozen=True)
class SessionState:
    """A session at rest: the frozen header, the log (``events[i]["seq"] == i``), the surface
    folded from the log, and ``first_live_seq``, the number of events construction inherited."""

    header: FrozenDict
    events: tuple[Event, ...]
    surface: Surface
    first_live_seq: int


# --- construction (§4) --------------------------------------------------------------------------


def create_session_state(
    session_id: str,
    seed: Sequence[object] | None,
    header: object,
    now: int,
    mode: SeedMode = "snapshot",
    messages_checked: int = 0,
) -> SessionState:
    """A new session: every seed entry validated and folded in order, ``first_live_seq`` = the seed
    length, then ``session/end-seed`` appended by the store at ``time = now`` when
    :func:`needs_end_seed` says so — never inside an open compaction bracket
    (:func:`spec.log.seed.validate_end_seed_outside_open_compaction`). In snapshot mode the
    header is copied and validated after the seed; in restore mode it is validated before the seed
    and frozen in place (notes/dsh-session-core §4.2, §1.5); ``mode`` says how the entries are
    taken (:data:`spec.log.seed.SeedMode`). A ``shared`` seed is a prefix of a live session's log,
    whose frozen events the new state shares (:func:`spec.log.seed.take_seed_event`). In
    ``restore-kept`` mode the caller keeps each entry's stored text and the state's seed events
    are the judged entries unfrozen, for the caller to drop, never to hand out.
    ``messages_checked`` (restore mode): the first that many entries were read from a stored log
    whose read path checked their messages' shapes already (:func:`fold_seed`)."""
    restored_header = restore_header(session_id, header) if mode in RESTORE_MODES else None
    events, surface = fold_seed(seed if seed is not None else (), mode, messages_checked)
    frozen_header = restored_header if restored_header is not None else snapshot_header(session_id, header)
    state = SessionState(header=frozen_header, events=events, surface=surface, first_live_seq=len(events))
    if needs_end_seed(seed is not None, events):
        validate_end_seed_outside_open_compaction(events)
        state, _ = append_event(state, END_SEED, {}, time=now, writer=STORE)
    return state


def restore_header(session_id: str, record: object) -> FrozenDict:
    """Restore mode takes a freshly parsed header object, freezes it in place and validates it, with
    no JSON snapshot; anything but an object is not a plain JSON record (§1.5, §14.2)."""
    if not isinstance(record, dict):
        raise reject(Code.HEADER_NOT_RECORD, "session header is not a plain JSON record")
    frozen = freeze_parsed_json(record)
    assert isinstance(frozen, FrozenDict)
    validate_header(session_id, frozen)
    return frozen


def fold_seed(
    seed: Sequence[object], mode: SeedMode = "snapshot", messages_checked: int = 0
) -> tuple[tuple[Event, ...], Surface]:
    """Each seed entry, read once, is validated (:func:`spec.log.seed.validate_seed_event`) and then
    planned on the surface built from the entries before it; the first failure rejects the whole
    seed (§4.2 step 2). In restore mode the first ``messages_checked`` entries come from a stored
    log's read path, which checked their messages already (the rest, such as crash-repair
    closers, are checked here). A run of entries that those rules pass as log-only events or
    appends is decided in one call (:func:`spec.log.seed.take_seed_run`), with their verdicts."""
    events: list[Event] = []
    nodes = SurfaceNodes()
    generation = 0
    index, end = 0, len(seed)
    while index < end:
        # A run of entries the per-event rules pass as log-only events or appends is kept as it
        # is, its appends pushed (take_seed_run); the entry that ends it is judged rule by rule.
        run, appended = take_seed_run(seed, index, mode, messages_checked)
        if run:
            events += cast(Sequence[Event], seed[index : index + run])
            for seq in appended:
                nodes.append(seq)
            index += run
            if index == end:
                break
        event = validate_seed_event(index, seed[index], mode, index < messages_checked)
        plan = plan_seed_surface(index, nodes, event, events)
        events.append(event)
        if plan is not None:
            generation = splice_plan(nodes, plan, generation)
        index += 1
    return tuple(events), Surface(nodes=tuple(nodes), replace_generation=generation)


def plan_session_id(counter: int, live_ids: Collection[str]) -> tuple[str, int]:
    """A store mints ``session-<n>`` from its own ever-increasing counter, skipping ids already
    live; returns the id and the new counter (notes/dsh-session-core §4.6 step 1)."""
    counter += 1
    while f"session-{counter}" in live_ids:
        counter += 1
    return f"session-{counter}", counter


def validate_new_session_id(live_ids: Collection[str], session_id: str) -> None:
    """A store holds at most one live session per id (§4.6 step 2, §7.1 step 1)."""
    if session_id in live_ids:
        raise reject(Code.SESSION_ALREADY_EXISTS, f'session "{session_id}" already exists')


# --- append (§5) -------------------------------------------------------------------------------


def plan_event(
    nodes: Sequence[int],
    events: Sequence[Event],
    event_type: object,
    data: object,
    surface_op: object = ABSENT,
    source_event_seqs: object = ABSENT,
    time: int = 0,
    writer: Writer = CALLER,
    floats: list[float] | None = None,
) -> tuple[Event, SurfacePlan]:
    """The event an append would commit and its surface plan, in DSH's order: the type is a
    non-empty string (Python's addition: JavaScript's types enforce it) that ``writer`` may write
    (:func:`spec.log.writers.validate_writer_of_type`: a caller never writes the end-seed or the
    compaction bracket); ``data`` is lossless JSON and, unless the store writes it, not a
    crash-repair closer (:func:`spec.log.writers.validate_writer_of_closer`); no retired
    request-header vocabulary; the surface metadata is lossless JSON; then the frozen event
    ``{type, seq, time, data, sourceEventSeqs?, surfaceOp?}`` with ``seq`` the log length is
    planned on the surface (a log-only type carrying neither surface key has nothing to plan).
    Message shapes are NOT checked (§5.1, §5.4, §14.1). The floats the two copies meet go to
    ``floats`` when given (:func:`spec.log.json.snapshot_json`)."""
    kind = validate_event_type(event_type)
    validate_writer_of_type(kind, writer)
    frozen_data = snapshot_event_data(kind, data, floats)
    validate_writer_of_closer(kind, frozen_data, writer)
    validate_request_header_vocabulary(kind, frozen_data)
    metadata = snapshot_surface_metadata(kind, surface_op, source_event_seqs, floats)
    seq = len(events)
    event = FrozenDict(type=kind, seq=seq, time=time, data=frozen_data, **metadata)
    if metadata is _NO_METADATA and kind not in SURFACE_EVENT_TYPES:
        return event, None  # log-only, no surface key, the next seq: nothing to plan (issue 24: append)
    return event, plan_surface_event(nodes, event, seq, events)


def validate_event_type(event_type: object) -> str:
    """An appended event's type is a non-empty string; any string is accepted, known or not (§2.4)."""
    if not isinstance(event_type, str) or event_type == "":
        raise reject(
            Code.EVENT_TYPE_INVALID, f"session event type must be a non-empty string, got {event_type!r}"
        )
    return event_type


def snapshot_event_data(kind: str, data: object, floats: list[float] | None = None) -> JsonValue:
    """Appended data is copied into the lossless JSON domain; anything else is rejected (§5.1 step 2).
    The floats the copy meets go to ``floats`` when given."""
    frozen = snapshot_json(data, floats)
    if frozen is NOT_JSON:
        raise reject(Code.DATA_NOT_JSON, f'session event "{kind}" carries non-JSON-serializable data')
    return frozen  # type: ignore[return-value]


def validate_request_header_vocabulary(kind: str, data: JsonValue) -> None:
    """``request/header-delta`` and a ``request/header`` with ``reason: "fallback"`` are retired
    vocabulary that no new event may use (§5.1 step 3)."""
    if kind == REQUEST_HEADER_DELTA:
        raise reject(
            Code.LEGACY_HEADER_DELTA,
            'session event "request/header-delta" uses unsupported legacy request/header-delta format',
        )
    if kind == REQUEST_HEADER and isinstance(data, dict) and data.get("reason") == "fallback":
        raise reject(
            Code.LEGACY_FALLBACK_REASON,
            'session event "request/header" uses unsupported legacy request/header reason "fallback"',
        )


_NO_METADATA: Final = FrozenDict()


def snapshot_surface_metadata(
    kind: str, surface_op: object, source_event_seqs: object, floats: list[float] | None = None
) -> FrozenDict:
    """The passed surface keys, ``sourceEventSeqs`` then ``surfaceOp`` (a passed ``None`` is kept,
    to be rejected by the surface rules), copied into the lossless JSON domain (§5.1 steps 1, 4).
    The floats the copy meets go to ``floats`` when given."""
    if source_event_seqs is ABSENT and surface_op is ABSENT:
        return _NO_METADATA  # a log-only event's (most events): nothing to copy
    metadata: dict[str, object] = {}
    if source_event_seqs is not ABSENT:
        metadata["sourceEventSeqs"] = source_event_seqs
    if surface_op is not ABSENT:
        metadata["surfaceOp"] = surface_op
    frozen = snapshot_json(metadata, floats)
    if not isinstance(frozen, FrozenDict):
        raise reject(
            Code.SURFACE_METADATA_NOT_JSON,
            f'session event "{kind}" carries non-JSON-serializable surface metadata',
        )
    return frozen


def apply_append(state: SessionState, event: Event, plan: SurfacePlan) -> SessionState:
    """Commit a planned append: the event joins the log and the plan is applied to the surface. The
    plan must come from :func:`plan_event` on this same state's surface nodes and log (§5.1 step 9,
    §3.8)."""
    return SessionState(
        header=state.header,
        events=(*state.events, event),
        surface=apply_surface_plan(state.surface, plan),
        first_live_seq=state.first_live_seq,
    )


def append_event(
    state: SessionState,
    event_type: object,
    data: object,
    surface_op: object = ABSENT,
    source_event_seqs: object = ABSENT,
    time: int = 0,
    writer: Writer = CALLER,
) -> tuple[SessionState, Event]:
    """Plan, then commit: a rejected append raises and ``state`` is untouched, so a failed append
    consumes no seq (§5.1 atomicity)."""
    event, plan = plan_event(
        state.surface.nodes, state.events, event_type, data, surface_op, source_event_seqs, time, writer
    )
    return apply_append(state, event, plan), event


# --- projection (§6) ---------------------------------------------------------------------------


def derive_session_messages(state: SessionState) -> list[Message]:
    """The model-visible history: one message per surface node that projects one, in surface order;
    shadowed and log-only events never appear (§6)."""
    return derive_messages(state.events, state.surface.nodes)
