"""The spec-side model of a whole store: what a conforming subject must answer to each protocol op.

A :class:`ModelStore` holds the live sessions (each a ``spec.log.session.SessionState`` plus how many
of its events are durable), the durable logs of a storage subject, the clock, the id counter and
the armed storage faults. Each ``model_*`` function is a pure transition mirroring one op of
``conformance/PROTOCOL.md``: it returns the next model and the :class:`Expected` answer (a result,
or an error code). Every decision is a call into ``spec``; this module only wires the calls
together in the order a store makes them. It is the suite's one model: the machine, the
exhaustive checker and the crash checks drive it beside a subject, and
:class:`conformance.oracle.SpecOracle` answers the protocol with it to generate the vectors.

Resume, in the model: the durable log, then ``spec.lineage.repair.derive_closers`` (durable at once, as
D3 item 6 says), then ``session/end-seed`` unless the log already ends with one (not yet durable).
A crash loses every live session and keeps the durable logs; what a power cut may keep *beyond*
them (an unsynced tail) is not determined, so the suite observes it and calls
:func:`model_adopt_durable` after checking that it is admissible.

Writes without a flush: a ``reset`` may name a batch policy (``batchMaxDelayMs``,
``batchMaxBytes``); then every op that adds events to a live session's buffer (an append, a
create, a resume's end-seed) writes the buffer when ``spec.projections.durability.is_batch_due``
says so, exactly as a flush would. Without one only a flush (or close) writes. A subject may write
earlier; the durable log the model keeps is the least a subject must hold.

Faults: ``fail_next`` (a write or fsync of the simulated disk) or ``fail_commit`` (a commit of the
storage itself) with ``after`` 0 arms a fault; the next flush, close or resume that has bytes to
write fails with ``STORAGE_IO``, spending the fault and changing nothing durable. The
byte-level crash ops (``unsynced``, ``arm_crash``, ``ops``, ``damage``, a partial ``keep``) depend
on an implementation's bytes and are not modelled.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import combinations
from typing import Final, TypeAlias

from conformance.files.reader import FilesError, decode_files, locate_logs, read_placed
from conformance.zstd_frames import inflate_zstd
from spec.checks.log import LEGACY_RULES, check_log
from spec.checks.violation import Violation
from spec.codes import Code, SpecError
from spec.format.legacy import decode_listed_header, derive_session_listing, validate_stored_events
from spec.format.naming import LOG_NAMES
from spec.lineage.fork import derive_child_meta, plan_fork_seed, validate_fork_request
from spec.lineage.store import (
    derive_resumed_log,
    derive_resumed_state,
    mint_session_id,
    plan_create,
    validate_resume_request,
)
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION
from spec.log.json import FrozenDict, JsonObject, JsonValue
from spec.log.session import (
    ABSENT,
    SessionState,
    append_event,
    derive_session_messages,
)
from spec.log.writers import CALLER, COMPACTION_ENGINE, Writer
from spec.projections.durability import (
    NOTHING_PENDING,
    BatchPolicy,
    apply_pending_events,
    decode_batch_policy,
    is_batch_due,
)
from spec.projections.units import ProjectionUnit
from spec.protocol import BAD_REQUEST, UNSUPPORTED_OP
from spec.shrink.engine import Append

FS_OPS: Final = ("write", "fsync")
ERRNOS: Final = ("EIO", "ENOSPC")


@dataclass(frozen=True)
class Expected:
    """A subject's required answer: ``ok`` with ``result``, or an error with ``code``. A ``read``
    may show any prefix of ``result``'s events holding at least ``events_at_least`` of them, and
    any of ``alternatives`` is as good (conformance/matching.py; PROTOCOL.md, "Timing")."""

    ok: bool
    result: JsonValue = None
    code: str | None = None
    events_at_least: int | None = None
    alternatives: tuple[Expected, ...] = ()

    def describe(self) -> str:
        text = f"ok {canonical_text(self.result)[:300]}" if self.ok else f"error {self.code}"
        return text + "".join(f" (or {alternative.describe()})" for alternative in self.alternatives)

    def as_json(self) -> JsonObject:
        """The expectation as a vector writes it."""
        expect: JsonObject = (
            {"ok": True, "result": self.result} if self.ok else {"ok": False, "code": self.code}
        )
        if self.events_at_least is not None:
            expect["eventsAtLeast"] = self.events_at_least
        if self.alternatives:
            expect["or"] = [alternative.as_json() for alternative in self.alternatives]
        return expect


def accepted(result: JsonValue) -> Expected:
    return Expected(ok=True, result=result)


def rejected(code: str) -> Expected:
    return Expected(ok=False, code=str(code))


@dataclass(frozen=True)
class LiveSession:
    """A live session: its spec state, how many of its events are durable, and how many overflow
    recoveries it ran since the last reset (conformance/engine_model.py)."""

    state: SessionState
    flushed: int = 0
    overflow_retries: int = 0


@dataclass(frozen=True)
class EngineState:
    """What the engine ops keep beside the sessions (conformance/engine_model.py): the projection
    units registered, by key, with how many registrants share each; the texts the spill store
    saved, by locator, in the order they were saved. ``reset`` forgets it; a crash does not (the
    units are the host's, registered again at start-up; a spill store makes a text durable before
    it names it)."""

    units: Mapping[str, tuple[ProjectionUnit, int]] = field(default_factory=dict)
    spills: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DurableLog:
    """A stored session as a reader sees it: header and durable events."""

    header: FrozenDict
    events: tuple[Event, ...]
    format_version: int = HEADER_FORMAT_VERSION  # the format it is stored in (0: a placed DSH v0 log)


@dataclass(frozen=True)
class ModelStore:
    """The whole store. ``stored`` holds only published logs (a session is on storage from its first
    flush on); ``minted`` is the store's counter for the ids it mints; ``faults`` are the armed
    ``fail_next`` filesystem operations, oldest first."""

    storage: str = "none"
    batch: BatchPolicy | None = None  # reset's batchMaxDelayMs/batchMaxBytes; None: only flush writes
    now: int = 0
    live: Mapping[str, LiveSession] = field(default_factory=dict)
    stored: Mapping[str, DurableLog] = field(default_factory=dict)
    minted: int = 0
    faults: tuple[str, ...] = ()
    broken: Mapping[str, str] = field(default_factory=dict)  # stored logs a read refuses, with the code
    engine: EngineState = field(default_factory=EngineState)
    unread_listed: tuple[FrozenDict, ...] = ()  # placed logs a read refuses whose header line reads

    @property
    def has_storage(self) -> bool:
        return self.storage != "none"

    @property
    def stored_ids(self) -> frozenset[str]:
        """Every id a stored log holds, readable or not."""
        return frozenset(self.stored) | frozenset(self.broken)


Transition: TypeAlias = tuple[ModelStore, Expected]


# --- views ---------------------------------------------------------------------------------------


def derive_state_view(state: SessionState) -> JsonValue:
    """The protocol's ``state`` shape for one session (PROTOCOL.md, Shapes)."""
    return {
        "id": state.header["id"],
        "events": list(state.events),
        "nodes": list(state.surface.nodes),
        "replaceGeneration": state.surface.replace_generation,
        "firstLiveSeq": state.first_live_seq,
        "seq": len(state.events),
        "header": state.header,
        "messages": list(derive_session_messages(state)),
    }


def derive_read_view(log: DurableLog) -> JsonValue:
    """The protocol's ``read`` shape: the durable header and events."""
    return {"header": log.header, "events": list(log.events)}


def canonical_text(value: object) -> str:
    """One text per JSON value, independent of key order, that tells ``true`` from ``1`` and
    ``1`` from ``1.0``: the suite's equality on answers."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def derive_model_key(model: ModelStore) -> str:
    """A canonical key of everything that decides the model's future answers (for deduplication)."""
    live = {
        session_id: [entry.state.header, list(entry.state.events), entry.state.first_live_seq, entry.flushed]
        for session_id, entry in model.live.items()
    }
    stored = {
        session_id: [log.header, list(log.events), log.format_version]
        for session_id, log in model.stored.items()
    }
    batch = None if model.batch is None else [model.batch.max_delay_ms, model.batch.max_bytes]
    broken = dict(model.broken)
    engine = [
        sorted((key, unit.state_version, refs) for key, (unit, refs) in model.engine.units.items()),
        list(model.engine.spills),
        {session_id: entry.overflow_retries for session_id, entry in model.live.items()},
    ]
    return canonical_text(
        [
            model.storage,
            batch,
            model.now,
            model.minted,
            live,
            stored,
            list(model.faults),
            broken,
            engine,
            list(model.unread_listed),
        ]
    )


# --- transitions ---------------------------------------------------------------------------------


def model_reset(
    model: ModelStore,
    storage: str = "none",
    max_delay_ms: object = None,
    max_bytes: object = None,
    files: object = None,
) -> Transition:
    """Forget every session; with storage, start from an empty store, writing under the batch
    policy ``batchMaxDelayMs``/``batchMaxBytes`` name (none: only flush writes); the clock is back
    at 0. With ``files`` (file storage only), the store starts over those files: each log they
    hold is stored, as the spec's reader reads it (:mod:`conformance.files.reader`)."""
    try:
        batch = decode_batch_policy(max_delay_ms, max_bytes)
    except SpecError as error:
        return model, rejected(error.code)
    if files is None:
        return ModelStore(storage=storage, batch=batch), accepted(None)
    try:
        placed = read_placed(decode_files(files))
    except FilesError:
        return model, rejected(BAD_REQUEST)
    stored = {
        session_id: DurableLog(log.header, log.events, log.format_version)
        for session_id, log in placed.items()
        if log.code is None and log.header is not None
    }
    broken = {session_id: str(log.code) for session_id, log in placed.items() if log.code is not None}
    unread_listed = tuple(_listed_headers(decode_files(files), frozenset(stored)))
    return ModelStore(
        storage=storage, batch=batch, stored=stored, broken=broken, unread_listed=unread_listed
    ), accepted(None)


def _listed_headers(files: Mapping[str, bytes], readable: frozenset[str]) -> list[FrozenDict]:
    """The headers a listing shows for placed logs that no read gives: the log of every session
    directory (its preferred name; a directory whose name no id encodes to included), but not that
    of a session read whole, whose header ``stored`` holds; each by its header line alone."""
    read_whole = {paths[0] for session_id, paths in locate_logs(files).items() if session_id in readable}
    logs: dict[tuple[str, str], str] = {}
    for path in sorted(files):
        parts = path.split("/")
        if len(parts) == 3 and parts[2] in LOG_NAMES:
            held = logs.get((parts[0], parts[1]))
            if held is None or LOG_NAMES.index(parts[2]) < LOG_NAMES.index(held.split("/")[2]):
                logs[(parts[0], parts[1])] = path
    headers: list[FrozenDict] = []
    for path in sorted(set(logs.values()) - read_whole):
        try:
            headers.append(
                decode_listed_header(files[path], path.endswith(".zstd"), inflate_zstd, path.split("/")[2])
            )
        except SpecError:
            continue
    return headers


def model_clock(model: ModelStore, now: int) -> Transition:
    return replace(model, now=now), accepted(now)


def model_create(
    model: ModelStore, session_id: object = ABSENT, seed: object = ABSENT, meta: object = ABSENT
) -> Transition:
    """Create, in the store's order (:func:`spec.lineage.store.plan_create`); a storage subject
    also refuses an id already stored and mints around stored ids."""
    stored_ids = model.stored_ids if model.has_storage else frozenset()
    minted = model.minted
    if session_id is ABSENT or session_id is None:
        session_id, minted = mint_session_id(minted, model.live.keys(), stored_ids)
    model = replace(model, minted=minted)
    try:
        state = plan_create(
            str(session_id),
            model.live.keys(),
            stored_ids,
            None if seed is ABSENT or seed is None else seed,  # type: ignore[arg-type]
            None if meta is ABSENT else meta,  # type: ignore[arg-type]
            model.now,
        )
    except SpecError as error:
        return model, rejected(error.code)
    live = {**model.live, str(session_id): LiveSession(state)}
    model = write_if_batch_due(replace(model, live=live), str(session_id))
    return model, accepted(derive_state_view(state))


def model_append(
    model: ModelStore,
    session_id: object,
    event_type: object,
    data: object,
    surface_op: object = ABSENT,
    source_event_seqs: object = ABSENT,
    writer: Writer = CALLER,
) -> Transition:
    """An append to a live session at the model's clock, by a caller (``append``) or by the
    store's compaction engine (``engine_append``, which may write the compaction bracket); a
    rejection changes nothing."""
    if not isinstance(session_id, str) or session_id not in model.live:
        return model, rejected(Code.SESSION_NOT_FOUND)
    try:
        model, event = append_live(
            model, session_id, Append(event_type, data, surface_op, source_event_seqs, writer)
        )
    except SpecError as error:
        return model, rejected(error.code)
    return model, accepted(event)


def append_live(model: ModelStore, session_id: str, request: Append) -> tuple[ModelStore, Event]:
    """``request`` appended to the live session ``session_id`` through the spec's append at the
    model's clock, then the store's batch policy (:func:`write_if_batch_due`); a refusal raises its
    ``SpecError`` and changes nothing."""
    entry = model.live[session_id]
    state, event = append_event(
        entry.state,
        request.event_type,
        request.data,
        request.surface_op,
        request.source_event_seqs,
        time=model.now,
        writer=request.writer,
    )
    live = {**model.live, session_id: replace(entry, state=state)}
    return write_if_batch_due(replace(model, live=live), session_id), event


def model_fork(
    model: ModelStore, source: object, boundary: object = ABSENT, child: object = ABSENT
) -> Transition:
    """DSH's fork checks in order (spec.lineage.fork), then a create of the child with the source prefix as
    its seed and the derived lineage meta."""
    child_id = None if child is ABSENT else child
    try:
        stored_ids = model.stored_ids if model.has_storage else frozenset()
        validate_fork_request(model.live.keys(), str(source), child_id, stored_ids)  # type: ignore[arg-type]
        live = model.live[str(source)]
        seed = plan_fork_seed(str(source), live.state.events, boundary)
    except SpecError as error:
        return model, rejected(error.code)
    meta = derive_child_meta(live.state.header, str(source), len(seed))
    return model_create(model, ABSENT if child_id is None else child_id, list(seed), meta)


def model_state(model: ModelStore, session_id: object) -> Transition:
    entry = model.live.get(session_id) if isinstance(session_id, str) else None
    if entry is None:
        return model, rejected(Code.SESSION_NOT_FOUND)
    return model, accepted(derive_state_view(entry.state))


def model_flush(model: ModelStore, session_id: object) -> Transition:
    """The durability barrier: every event of the session becomes durable; the first flush
    publishes the header with them. A flush with nothing to write cannot meet a fault."""
    entry = model.live.get(session_id) if isinstance(session_id, str) else None
    if entry is None:
        return model, rejected(Code.SESSION_NOT_FOUND)
    return flush_live(model, str(session_id), entry)


def model_close(model: ModelStore, session_id: object) -> Transition:
    """The session is flushed, then no longer live: a close whose flush fails leaves the session
    live, so nothing it buffered is dropped and the close can be retried."""
    entry = model.live.get(session_id) if isinstance(session_id, str) else None
    if entry is None:
        return model, rejected(Code.SESSION_NOT_FOUND)
    model, expected = flush_live(model, str(session_id), entry)
    if not expected.ok:
        return model, expected
    live = {key: value for key, value in model.live.items() if key != session_id}
    return replace(model, live=live), expected


def model_list(model: ModelStore) -> Transition:
    """The store's listing (:func:`spec.format.legacy.derive_session_listing`): the header of every
    stored log, and of every placed log a read refuses whose header line reads. A live session not
    yet published may be listed too (a store may publish early; PROTOCOL.md, Timing): each set of
    them listed is as good."""
    headers = [log.header for log in model.stored.values()] if model.has_storage else []
    headers += model.unread_listed
    unpublished = [
        entry.state.header for session_id, entry in model.live.items() if session_id not in model.stored_ids
    ]
    listed = _listing(headers)
    if not model.has_storage or not unpublished:
        return model, listed
    early = [
        _listing([*headers, *chosen])
        for size in range(1, len(unpublished) + 1)
        for chosen in combinations(unpublished, size)
    ]
    return model, replace(listed, alternatives=tuple(early))


def _listing(headers: Sequence[FrozenDict]) -> Expected:
    return accepted([*derive_session_listing(headers)])


def model_resume(model: ModelStore, session_id: object) -> Transition:
    """Take over a stored log: refused without storage, for a live id, or for an id not stored;
    else the durable log plus its closers (written at once) is restored as the seed, and
    ``session/end-seed`` follows unless the log already ends with one."""
    if not model.has_storage or not isinstance(session_id, str):
        return model, rejected(Code.SESSION_NOT_FOUND)
    log = model.stored.get(session_id)
    try:
        validate_resume_request(session_id, model.live.keys(), session_id in model.stored_ids)
        if session_id in model.broken:
            return model, rejected(model.broken[session_id])
        assert log is not None
        validate_durable_log(model, session_id, log.events)
        state = derive_resumed_state(session_id, log.header, log.events, model.now)
    except SpecError as error:
        return model, rejected(error.code)
    durable = derive_resumed_log(log.events)
    if len(durable) > len(log.events):  # the closers are written before the resume returns
        model, failed = _spend_fault(model)
        if failed is not None:
            return model, failed
    stored = {**model.stored, session_id: DurableLog(log.header, durable)}
    live = {**model.live, session_id: LiveSession(state, flushed=len(durable))}
    model = write_if_batch_due(replace(model, live=live, stored=stored), session_id)
    return model, accepted(derive_state_view(state))


def model_read(model: ModelStore, session_id: object) -> Transition:
    """A reader's view of what is stored: at least every flushed event, and perhaps more of what a
    live session appended (a store may write early; SPEC-DECISIONS D3). A session never flushed is
    not on storage yet, though a store that publishes it early may show it."""
    if not isinstance(session_id, str) or not model.has_storage:
        return model, rejected(Code.SESSION_NOT_FOUND)
    if session_id in model.broken:
        return model, rejected(model.broken[session_id])
    log, entry = model.stored.get(session_id), model.live.get(session_id)
    appended = entry.state.events if entry is not None else log.events if log is not None else ()
    if log is None:
        if entry is None:
            return model, rejected(Code.SESSION_NOT_FOUND)
        early = Expected(True, derive_read_view(DurableLog(entry.state.header, appended)), events_at_least=0)
        return model, replace(rejected(Code.SESSION_NOT_FOUND), alternatives=(early,))
    try:
        validate_durable_log(model, session_id, log.events)
    except SpecError as error:
        return model, rejected(error.code)
    view = derive_read_view(DurableLog(log.header, appended))
    at_least = len(log.events) if len(appended) > len(log.events) else None
    return model, Expected(True, view, events_at_least=at_least)


def model_check(model: ModelStore, session_id: object) -> Transition:
    """A stored log as the checker reads it (file storage only): refused as ``read`` refuses it;
    else its format, its event count and :func:`spec.checks.log.check_log`'s violations of the
    whole log (relational rules and header included), those of :data:`LEGACY_RULES` apart. Only a
    log's durable events are judged: a session with events not yet flushed is not modelled."""
    if model.storage != "file":
        return model, rejected(BAD_REQUEST)
    model, read = model_read(model, session_id)
    log = model.stored.get(session_id) if isinstance(session_id, str) else None
    if read.alternatives or read.events_at_least is not None:
        return model, rejected(UNSUPPORTED_OP)
    if not read.ok or log is None:
        return model, read
    found = check_log(log.events, log.header, format_version=log.format_version)
    return model, accepted(
        {
            "format": log.format_version,
            "events": len(log.events),
            "violations": [_violation(item) for item in found if item.rule not in LEGACY_RULES],
            "legacy": [_violation(item) for item in found if item.rule in LEGACY_RULES],
        }
    )


def _violation(found: Violation) -> JsonValue:
    return {"rule": found.rule, "seq": found.seq}


def validate_durable_log(model: ModelStore, session_id: str, events: Sequence[Event]) -> None:
    """A log read back from files passes the stored-event checks: well-formed messages, and every
    type known or marked ignorable (notes/dsh-persistence §3.5). A session accepts any type on
    append, so a session can write a log that a file reader refuses. The in-memory backend keeps
    its events as objects and reads nothing back, so it does not check."""
    if model.storage == "file":
        validate_stored_events(session_id, events)


def model_crash(model: ModelStore) -> Transition:
    """Power loss: every live session is gone, the durable logs stay, armed faults are forgotten
    and the restarted store counts the ids it mints afresh. A crash may keep more than what was
    flushed; the suite checks what it kept and calls :func:`model_adopt_durable`."""
    return replace(model, live={}, minted=0, faults=()), accepted(None)


def model_fail_next(model: ModelStore, fs_op: object, errno: object, after: object = 0) -> Transition:
    """Arm a fault on the next write or fsync (only ``after`` 0 is modelled)."""
    if fs_op not in FS_OPS or errno not in ERRNOS:
        return model, rejected(BAD_REQUEST)
    if after != 0:
        return model, rejected(UNSUPPORTED_OP)
    return replace(model, faults=(*model.faults, str(fs_op))), accepted(None)


def model_fail_commit(model: ModelStore, after: object = 0, stored: object = False) -> Transition:
    """Arm a failed commit of the storage itself (only ``after`` 0 is modelled); it fails the next
    write as a fault of the simulated disk does. A ``stored`` one was committed and only its answer
    lost: the model keeps the least a subject must hold, so it counts nothing of it durable, and a
    read of the live session may show it (a store may write early)."""
    if not model.has_storage or not isinstance(stored, bool):
        return model, rejected(BAD_REQUEST)
    if after != 0:
        return model, rejected(UNSUPPORTED_OP)
    return replace(model, faults=(*model.faults, "commit")), accepted(None)


def model_adopt_durable(model: ModelStore, session_id: str, log: DurableLog | None) -> ModelStore:
    """Take what a subject showed as a session's durable log after a crash (``None``: no session),
    once the suite has checked that the crash could have left exactly that."""
    stored = {key: value for key, value in model.stored.items() if key != session_id}
    if log is not None:
        stored[session_id] = log
    return replace(model, stored=stored)


# --- dispatch ------------------------------------------------------------------------------------

OPS: Final[Mapping[str, Callable[..., Transition]]] = {
    "reset": lambda model, storage="none", compressed=True, batchMaxDelayMs=None, batchMaxBytes=None, files=None: (
        model_reset(model, storage, batchMaxDelayMs, batchMaxBytes, files)
    ),
    "clock": lambda model, now: model_clock(model, now),
    "create": lambda model, id=ABSENT, seed=ABSENT, meta=ABSENT: model_create(model, id, seed, meta),
    "append": lambda model, id, type=ABSENT, data=ABSENT, surfaceOp=ABSENT, sourceEventSeqs=ABSENT: (
        model_append(model, id, type, data, surfaceOp, sourceEventSeqs)
    ),
    "engine_append": lambda model, id, type=ABSENT, data=ABSENT, surfaceOp=ABSENT, sourceEventSeqs=ABSENT: (
        model_append(model, id, type, data, surfaceOp, sourceEventSeqs, COMPACTION_ENGINE)
    ),
    "fork": lambda model, source, boundary=ABSENT, child=ABSENT: model_fork(model, source, boundary, child),
    "state": lambda model, id: model_state(model, id),
    "flush": lambda model, id: model_flush(model, id),
    "close": lambda model, id: model_close(model, id),
    "resume": lambda model, id: model_resume(model, id),
    "read": lambda model, id: model_read(model, id),
    "list": lambda model: model_list(model),
    "check": lambda model, id: model_check(model, id),
    "crash": lambda model, keep="none": (
        model_crash(model) if keep in ("none", "all") else (model, rejected(UNSUPPORTED_OP))
    ),
    "fail_next": lambda model, fsOp=None, errno=None, after=0: model_fail_next(model, fsOp, errno, after),
    "fail_commit": lambda model, after=0, stored=False: model_fail_commit(model, after, stored),
}


# --- writing a live session ----------------------------------------------------------------------


def flush_live(model: ModelStore, session_id: str, entry: LiveSession) -> Transition:
    """``entry``'s events made durable (and the session published), unless an armed fault fails
    the write; a live session keeps its new durable count."""
    if not model.has_storage:
        return model, accepted(None)
    state = entry.state
    if session_id in model.stored and entry.flushed == len(state.events):
        return model, accepted(None)  # nothing to write
    model, failed = _spend_fault(model)
    if failed is not None:
        return model, failed
    stored = {**model.stored, session_id: DurableLog(state.header, state.events)}
    live = dict(model.live)
    if session_id in live:
        live[session_id] = replace(entry, flushed=len(state.events))
    return replace(model, live=live, stored=stored), accepted(None)


def write_if_batch_due(model: ModelStore, session_id: str) -> ModelStore:
    """After events joined a live session's buffer (an append, a create, a resume's end-seed): under
    a batch policy, write them when :func:`spec.projections.durability.is_batch_due` says so, as a
    flush would. A write that meets an armed fault spends it and leaves the events buffered; the
    append itself still succeeds."""
    entry = model.live.get(session_id)
    if model.batch is None or not model.has_storage or entry is None:
        return model
    buffered = entry.state.events[entry.flushed :]
    if not buffered:
        return model
    pending = apply_pending_events(model.batch, NOTHING_PENDING, buffered)
    if not is_batch_due(model.batch, pending, buffered[-1].get("time")):
        return model
    written, _ = flush_live(model, session_id, entry)
    return written


def _spend_fault(model: ModelStore) -> tuple[ModelStore, Expected | None]:
    """A write (then an fsync) is about to happen: an armed fault, if any, fails it and is spent."""
    if not model.faults:
        return model, None
    return replace(model, faults=model.faults[1:]), rejected(Code.STORAGE_IO)
