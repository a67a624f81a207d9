"""Deliberately broken subjects: the reference with exactly one rule broken in each.

They prove that the conformance suite catches bugs (tests/test_mutation_score.py): every one of
them must make the suite report at least one failure, while the unbroken reference passes. Each
class's docstring says which rule it breaks and where that rule comes from; ``BROKEN_SUBJECTS``
lists them all.

The breaks are made the way a real bug would be: a check left out, a counter not bumped, a cache
not invalidated, an fsync skipped. A few reach into the reference's internals (a session's class,
a module-level function swapped for the length of one call); that is acceptable in a test and
never leaks into another subject.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any, ClassVar

import psycopg
from psycopg import sql

import reference.persistence.filestore as filestore_module
import spec.lineage.store as lineage_store_module
from reference.database_subjects import PostgresSubject
from reference.persistence.database import DatabaseStore, RowVisitor
from reference.persistence.faulty import FaultyFileSystem
from reference.persistence.filestore import FileStore
from reference.persistence.postgres import PostgresStore
from reference.server import ReferenceSubject
from reference.session import Session
from reference.shrink.compaction import AbortSignal, OverflowRecovery
from reference.store import SessionStore, _StoredIds
from reference.subject.requests import Args
from spec.codes import Code, SpecError, reject
from spec.lineage.fork import derive_child_meta, plan_fork_seed, validate_fork_request
from spec.log.events import ASSISTANT_MESSAGE, COMPACTION_END, END_SEED, Event, Message, derive_event_message
from spec.log.json import FrozenDict, JsonObject, JsonValue, is_event_seq, snapshot_json
from spec.log.session import ABSENT, plan_event
from spec.log.surface import ReplaceOp, SurfacePlan, plan_replace
from spec.log.writers import CALLER, STORE, Writer
from spec.projections.units import derive_cache_identity

# --- plumbing -------------------------------------------------------------------------------------


@contextmanager
def swapped(module: ModuleType, name: str, value: object) -> Iterator[None]:
    """``module.name`` is ``value`` for the length of the block (single-threaded tests only)."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def with_field(event: Event, key: str, value: object) -> Event:
    """``event`` with ``key`` set to ``value`` (removed when ``value`` is ABSENT), in the logged
    key order ``type, seq, time, data, sourceEventSeqs, surfaceOp``."""
    fields: dict[str, object] = {k: event[k] for k in ("type", "seq", "time", "data") if k in event}
    for optional in ("sourceEventSeqs", "surfaceOp"):
        chosen = value if optional == key else event.get(optional, ABSENT)
        if chosen is not ABSENT:
            fields[optional] = chosen
    if key in ("type", "seq", "time", "data"):
        fields[key] = value
    frozen = snapshot_json(fields)
    assert isinstance(frozen, FrozenDict)
    return frozen


class PlannedSession(Session):
    """The reference session with its planning step (for a caller's appends) as an override point."""

    def append(self, event_type: object, data: object, *ops: object, writer: Writer = CALLER) -> Event:
        if writer != CALLER:
            return super().append(event_type, data, *ops, writer=writer)
        surface_op, source_event_seqs = (*ops, ABSENT, ABSENT)[:2]
        return self._commit(*self.plan(event_type, data, surface_op, source_event_seqs))

    def plan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan]:
        return plan_event(
            self._nodes, self._log, event_type, data, surface_op, source_event_seqs, self._clock()
        )


class MutantStore(SessionStore):
    """The reference store with the fork seed plan and the resume result as override points."""

    def fork(self, source: str | Session, boundary: object = ABSENT, child_id: str | None = None) -> Session:
        source_id = source if isinstance(source, str) else source.id
        validate_fork_request(self._live.keys(), source_id, child_id, _StoredIds(self._persistence))
        live = self._live[source_id]
        seed = self.plan_seed(source_id, live.events, boundary)
        meta = derive_child_meta(live.header, source_id, len(seed))
        return self.create(child_id, seed=list(seed), meta=meta)

    def plan_seed(self, source_id: str, events: Sequence[Event], boundary: object) -> tuple[Event, ...]:
        return plan_fork_seed(source_id, events, boundary)


class MutantSubject(ReferenceSubject):
    """The reference server, with a session class, a store class, a file-store class and a
    filesystem class a subclass can replace."""

    session_class: ClassVar[type[Session]] = PlannedSession
    store_class: ClassVar[type[SessionStore]] = MutantStore
    file_store_class: ClassVar[type[FileStore]] = FileStore
    fs_class: ClassVar[type[FaultyFileSystem]] = FaultyFileSystem
    rule: ClassVar[str] = ""

    def live(self, session_id: str) -> Session:
        return self._adopt(super().live(session_id))

    def state_json(self, session: Session) -> JsonObject:
        return super().state_json(self._adopt(session))

    def _adopt(self, session: Session) -> Session:
        if type(session) is not self.session_class:
            session.__class__ = self.session_class
        return session

    def _open_store(self) -> None:
        if self.fs is not None and type(self.fs) is not self.fs_class:
            self.fs.__class__ = self.fs_class
        super()._open_store()
        if isinstance(self.persistence, FileStore) and type(self.persistence) is not self.file_store_class:
            self.persistence.__class__ = self.file_store_class
        self.store.__class__ = self.store_class


# --- the surface ------------------------------------------------------------------------------------


class _ForgivingSession(PlannedSession):
    """Plans as the reference does; where the reference refuses with ``forgiven``, :meth:`replan`
    may plan an altered request instead (``None``: the refusal stands)."""

    forgiven: ClassVar[Code]

    def plan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan]:
        try:
            return super().plan(event_type, data, surface_op, source_event_seqs)
        except SpecError as error:
            if error.code != self.forgiven:
                raise
            planned = self.replan(event_type, data, surface_op, source_event_seqs)
            if planned is None:
                raise
            return planned

    def replan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan] | None:
        return None


class _MissingProvenanceSession(_ForgivingSession):
    forgiven = Code.PROVENANCE_MISSING_SHADOWED

    def replan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan] | None:
        if not isinstance(surface_op, dict):
            return None
        first, last = plan_replace(self._nodes, ReplaceOp(int(surface_op["start"]), int(surface_op["end"])))
        cited = list(source_event_seqs) if isinstance(source_event_seqs, list) else []
        full = cited + [seq for seq in self._nodes[first : last + 1] if seq not in cited]
        event, plan = PlannedSession.plan(self, event_type, data, surface_op, full)
        return with_field(event, "sourceEventSeqs", source_event_seqs), plan


class AcceptsReplaceMissingShadowedProvenance(MutantSubject):
    """Accepts a replace whose sourceEventSeqs leave out a node it shadows
    (notes/dsh-session-core §3.6: a replace cites every node it shadows)."""

    session_class = _MissingProvenanceSession
    rule = "PROVENANCE_MISSING_SHADOWED"


class _InvertedReplaceSession(_ForgivingSession):
    forgiven = Code.REPLACE_INVERTED

    def replan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan] | None:
        if not isinstance(surface_op, dict):
            return None
        swapped_op = {"op": "replace", "start": surface_op["end"], "end": surface_op["start"]}
        event, plan = PlannedSession.plan(self, event_type, data, swapped_op, source_event_seqs)
        return with_field(event, "surfaceOp", surface_op), plan


class AcceptsInvertedReplace(MutantSubject):
    """Accepts a replace whose start node comes after its end node, as if they were the other way
    round (notes/dsh-session-core §3.5)."""

    session_class = _InvertedReplaceSession
    rule = "REPLACE_INVERTED"


class _LogOnlyProvenanceSession(_ForgivingSession):
    forgiven = Code.PROVENANCE_ON_LOG_ONLY

    def replan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan] | None:
        event, plan = PlannedSession.plan(self, event_type, data, surface_op, ABSENT)
        return with_field(event, "sourceEventSeqs", source_event_seqs), plan


class AcceptsProvenanceOnLogOnlyEvent(MutantSubject):
    """Accepts sourceEventSeqs on an event that cannot join the surface (notes/dsh-session-core §3.4)."""

    session_class = _LogOnlyProvenanceSession
    rule = "PROVENANCE_ON_LOG_ONLY"


class _IsErrorRewriteSession(_ForgivingSession):
    forgiven = Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT

    def replan(
        self, event_type: object, data: object, surface_op: object, source_event_seqs: object
    ) -> tuple[Event, SurfacePlan] | None:
        if not isinstance(surface_op, dict):
            return None
        original = self._log[int(surface_op["start"])]
        aligned = _with_first_block_flag(data, _first_block_flag(original.get("data")))
        event, plan = PlannedSession.plan(self, event_type, aligned, surface_op, source_event_seqs)
        return with_field(event, "data", data), plan


def _first_block(data: object) -> dict[str, Any] | None:
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    return first if isinstance(first, dict) else None


def _first_block_flag(data: object) -> object:
    block = _first_block(data)
    return block.get("isError", ABSENT) if block is not None else ABSENT


def _with_first_block_flag(data: object, flag: object) -> object:
    block = _first_block(data)
    if block is None or not isinstance(data, dict):
        return data
    changed = {key: value for key, value in block.items() if key != "isError"}
    if flag is not ABSENT:
        changed["isError"] = flag
    message = data["message"]
    return {**data, "message": {**message, "content": [changed, *message["content"][1:]]}}


class RewriteMayChangeIsError(MutantSubject):
    """Lets a tool-result rewrite flip the result's isError flag
    (notes/dsh-session-core §3.7: a rewrite changes the content and nothing else)."""

    session_class = _IsErrorRewriteSession
    rule = "TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT"


class _FrozenGenerationSession(PlannedSession):
    def _commit(self, event: Event, plan: SurfacePlan, floats: Collection[float] | None = None) -> Event:
        generation = self._generation
        committed = super()._commit(event, plan, floats)
        self._generation = generation
        return committed


class ReplaceGenerationNotIncremented(MutantSubject):
    """Does not count a replace in replaceGeneration (notes/dsh-session-core §3.8)."""

    session_class = _FrozenGenerationSession
    rule = "replaceGeneration"


# --- the projection ---------------------------------------------------------------------------------


class _StaleMessagesSession(PlannedSession):
    def derive_messages(self) -> list[Message]:
        self._derived_generation = self._generation  # the cache never learns about a replace
        return super().derive_messages()


class DerivesShadowedMessage(MutantSubject):
    """Keeps deriving messages of nodes a replace has shadowed: its message cache ignores
    replaceGeneration (notes/dsh-session-core §6)."""

    session_class = _StaleMessagesSession
    rule = "derive_messages"


class _EmptyAssistantSession(PlannedSession):
    def derive_messages(self) -> list[Message]:
        messages: list[Message] = []
        for seq in self._nodes:
            event = self._log[seq]
            message = derive_event_message(event)
            data = event.get("data")
            if message is None and event.get("type") == ASSISTANT_MESSAGE and isinstance(data, dict):
                inner = data.get("message")
                message = inner if isinstance(inner, dict) else None
            if message is not None:
                messages.append(message)
        return messages


class DerivesEmptyAssistantMessage(MutantSubject):
    """Shows the model an assistant message with empty content, which only hosts usage
    (notes/dsh-session-core §2.6)."""

    session_class = _EmptyAssistantSession
    rule = "derive_event_message"


# --- fork ---------------------------------------------------------------------------------------


class _OpenTurnForkStore(MutantStore):
    def plan_seed(self, source_id: str, events: Sequence[Event], boundary: object) -> tuple[Event, ...]:
        try:
            return super().plan_seed(source_id, events, boundary)
        except SpecError as error:
            if error.code != Code.OPEN_TURN:
                raise
            if boundary is ABSENT:
                return tuple(events)
            assert is_event_seq(boundary), "the spec refused the turn, not the boundary"
            cut = int(boundary)
            return tuple(events[: cut + 1])


class ForksInsideOpenTurn(MutantSubject):
    """Forks at a boundary inside an open turn (notes/dsh-session-core §7.1 step 3)."""

    store_class = _OpenTurnForkStore
    rule = "OPEN_TURN"


class _PastEndForkStore(MutantStore):
    def plan_seed(self, source_id: str, events: Sequence[Event], boundary: object) -> tuple[Event, ...]:
        if is_event_seq(boundary) and boundary == len(events) and events:
            boundary = len(events) - 1  # off by one: "up to the end" taken for "at the end"
        return super().plan_seed(source_id, events, boundary)


class AcceptsForkBoundaryPastTheEnd(MutantSubject):
    """Accepts a fork boundary one past the last event (notes/dsh-session-core §7.1 step 3)."""

    store_class = _PastEndForkStore
    rule = "INVALID_BOUNDARY"


# --- construction and resume ------------------------------------------------------------------------


class _NoEmptySeedMarkerStore(MutantStore):
    def create(
        self, session_id: str | None = None, seed: Sequence[object] | None = None, *rest: Any, **options: Any
    ) -> Session:
        if seed is None or len(seed) > 0:
            return super().create(session_id, seed, *rest, **options)
        original = lineage_store_module.create_session_state

        def without_marker(session_id: str, seed: object, *rest: Any, **options: Any) -> Any:
            empty = isinstance(seed, (list, tuple)) and len(seed) == 0
            return original(session_id, None if empty else seed, *rest, **options)

        with swapped(lineage_store_module, "create_session_state", without_marker):
            return super().create(session_id, seed, *rest, **options)


class NoEndSeedForEmptySeed(MutantSubject):
    """Writes no session/end-seed when a session is created from an empty seed
    (notes/dsh-session-core §4.2 step 5: an empty seed counts)."""

    store_class = _NoEmptySeedMarkerStore
    rule = "needs_end_seed"


class _SecondEndSeedStore(MutantStore):
    def resume(self, session_id: str) -> Session:
        session = super().resume(session_id)
        if session.seq == session.first_live_seq:
            session._commit(STORE, END_SEED, {}, ABSENT, ABSENT)  # the mutant writes as the store
        return session


class WritesSecondEndSeedOnResume(MutantSubject):
    """Appends session/end-seed on resume even when the stored log already ends with one
    (notes/dsh-session-core §4.4)."""

    store_class = _SecondEndSeedStore
    rule = "needs_end_seed"


class _NoSeedLengthStore(MutantStore):
    def resume(self, session_id: str) -> Session:
        session = super().resume(session_id)
        header = session.header
        session._header = FrozenDict({key: value for key, value in header.items() if key != "seedLength"})
        return session


class DropsSeedLengthOnResume(MutantSubject):
    """Loses the header's seedLength when a forked session is resumed
    (notes/dsh-session-core §8.2: the stored header is kept)."""

    store_class = _NoSeedLengthStore
    rule = "seedLength"


class _SeedLengthAsFirstLiveStore(MutantStore):
    def resume(self, session_id: str) -> Session:
        session = super().resume(session_id)
        seed_length = session.header.get("seedLength")
        if is_event_seq(seed_length):
            session._first_live_seq = int(seed_length)
        return session


class FirstLiveSeqIsSeedLengthOnResume(MutantSubject):
    """Reports the header's seedLength as firstLiveSeq after a resume, where it must be the length
    of the restored log (notes/dsh-session-core §4.5)."""

    store_class = _SeedLengthAsFirstLiveStore
    rule = "firstLiveSeq"


# --- crash repair -----------------------------------------------------------------------------------


class _ReversedClosersStore(FileStore):
    def _open_locked(self, session_id: str, path: str, lock: Any) -> Any:
        original = filestore_module.derive_closers

        def reversed_closers(events: Sequence[Event]) -> tuple[Event, ...]:
            return _renumbered(events, tuple(reversed(original(events))))

        with swapped(filestore_module, "derive_closers", reversed_closers):
            return super()._open_locked(session_id, path, lock)


def _renumbered(events: Sequence[Event], closers: Sequence[Event]) -> tuple[Event, ...]:
    """``closers`` numbered on from the end of ``events``, in the order given."""
    first = len(events)
    return tuple(with_field(event, "seq", first + index) for index, event in enumerate(closers))


class EmitsClosersInWrongOrder(MutantSubject):
    """Writes the crash-repair closers in reverse: turn/end first, the error results last
    (SPEC-DECISIONS D3 item 6)."""

    file_store_class = _ReversedClosersStore
    rule = "D3.6"


class _NoCompactionEndStore(FileStore):
    def _open_locked(self, session_id: str, path: str, lock: Any) -> Any:
        original = filestore_module.derive_closers

        def without_compaction_end(events: Sequence[Event]) -> tuple[Event, ...]:
            kept = [event for event in original(events) if event.get("type") != COMPACTION_END]
            return _renumbered(events, kept)

        with swapped(filestore_module, "derive_closers", without_compaction_end):
            return super()._open_locked(session_id, path, lock)


class ClosersOmitCompactionEnd(MutantSubject):
    """Leaves an interrupted compaction open when repairing, as DSH 0.1 does
    (SPEC-DECISIONS D3 item 6: the seed's rule closes it)."""

    file_store_class = _NoCompactionEndStore
    rule = "D3.6"


class _TornTailKeptStore(FileStore):
    def _rewrite_clean(self, path: str, keep: int, tail: Sequence[Event], compressed: bool) -> None:
        if tail:
            self._append_batch(path, tail, compressed)  # written after the torn bytes, not instead of them


class LeavesTornTailOnDisk(MutantSubject):
    """Drops a torn tail in memory but leaves its bytes in the file, appending after them
    (SPEC-DECISIONS D3 item 4: the file is rewritten so the next open sees a clean log)."""

    file_store_class = _TornTailKeptStore
    rule = "D3.4"


class _TornTailCorruptStore(FileStore):
    def _rewrite_clean(self, path: str, keep: int, tail: Sequence[Event], compressed: bool) -> None:
        raise reject(Code.CORRUPT_LOG, f"corrupt session log: unexpected bytes at {keep}")


class ReportsTornTailAsCorrupt(MutantSubject):
    """Refuses to open a log whose only damage is a torn tail (SPEC-DECISIONS D3 items 4-5)."""

    file_store_class = _TornTailCorruptStore
    rule = "D3.5"


def _parse_as_far_as_it_reads(data: bytes, compressed: bool, inflate: Any) -> Any:
    """The reference's parse, but a log that does not read is cut back to its longest prefix that
    does, as if everything from the damage on were a torn tail."""
    parse = _STRICT_PARSE
    try:
        return parse(data, compressed, inflate)
    except SpecError as error:
        if error.code != Code.CORRUPT_LOG:
            raise
        failure = error
    for end in range(len(data) - 1, 0, -1):
        try:
            stored = parse(data[:end], compressed, inflate)
        except SpecError:
            continue
        cut = end if stored.truncate_to is None else min(end, stored.truncate_to)
        return dataclasses.replace(stored, truncate_to=cut)
    raise failure


_STRICT_PARSE = filestore_module.decode_log_bytes


class _DamageCutOffStore(FileStore):
    def read(self, session_id: str) -> Any:
        with swapped(filestore_module, "decode_log_bytes", _parse_as_far_as_it_reads):
            return super().read(session_id)

    def _open_locked(self, session_id: str, path: str, lock: Any) -> Any:
        with swapped(filestore_module, "decode_log_bytes", _parse_as_far_as_it_reads):
            return super()._open_locked(session_id, path, lock)


class TruncatesDamageThatIsNotATail(MutantSubject):
    """Treats a damaged middle of a log as a torn tail and cuts the log back to before it, losing
    every event after the damage (SPEC-DECISIONS D3 item 5: damage that is not a tail is a
    corrupt-log error, never silent loss)."""

    file_store_class = _DamageCutOffStore
    rule = "D3.5"


# --- durability -------------------------------------------------------------------------------------


class _NoLogFsync(FaultyFileSystem):
    def fsync(self, path: str) -> None:
        if path.endswith((".jsonl", ".jsonl.zstd")):
            return  # the append is acknowledged before it is durable
        super().fsync(path)


class AcknowledgesFlushBeforeFsync(MutantSubject):
    """Acknowledges a flush of new events without fsyncing the log file
    (SPEC-DECISIONS D2: flush is the durability barrier; D3 item 3)."""

    fs_class = _NoLogFsync
    rule = "D3.3"


class _SwallowedFsyncError(FaultyFileSystem):
    def fsync(self, path: str) -> None:
        try:
            super().fsync(path)
        except OSError:
            pass  # the failure is ignored and the flush reported durable


class IgnoresFailedFsync(MutantSubject):
    """Reports a flush durable although its fsync failed (SPEC-DECISIONS D2, D3 item 3)."""

    fs_class = _SwallowedFsyncError
    rule = "STORAGE_IO"


class _FaultOnlyOnTheNextCall(FaultyFileSystem):
    def fail_next(self, kind: str, code: int, after: int) -> None:
        if after == 0:  # a fault armed for a later call is dropped: it never fails anything
            super().fail_next(kind, code, after)


class ArmsFaultsOnlyForTheNextCall(MutantSubject):
    """Its crash seam fails only the next write or fsync: ``fail_next`` with ``after`` above 0
    fails nothing (PROTOCOL.md, "Crash ops": the call after ``after`` of that kind fails once), so
    every injected fault but the first leaves the store untested and the run looks clean."""

    fs_class = _FaultOnlyOnTheNextCall
    rule = "STORAGE_IO"


class DamageKeepsTheLowBit(MutantSubject):
    """Its crash seam's ``damage`` turns the byte into ``b XOR 0xFE`` instead of its complement
    (PROTOCOL.md, "Crash ops": the byte becomes ``b XOR 0xFF``). The damaged log still reads as
    corrupt and a second ``damage`` still restores it: only the stored bytes (``export``) show it."""

    rule = "damage"

    def op_damage(self, args: Any) -> JsonValue:
        answer = super().op_damage(args)
        assert isinstance(answer, dict)
        path, offset = answer["path"], answer["offset"]
        assert isinstance(path, str) and isinstance(offset, int)
        self._crash_fs().inner._file(path).data[offset] ^= 0x01  # the low bit flipped back
        return answer


class UnsyncedShowsNothing(MutantSubject):
    """Its crash seam's ``unsynced`` always answers an empty list (PROTOCOL.md, "Crash ops": per file,
    how many written bytes are not yet durable), so the crash family's byte cuts never run and
    every power cut keeps or drops what the seam alone decides."""

    rule = "unsynced"

    def op_unsynced(self, args: Any) -> JsonValue:
        return []


class ArmedCrashFiresLate(MutantSubject):
    """Its crash seam's ``arm_crash`` stops the operation after ``2 * after`` mutating ones instead of
    ``after`` (PROTOCOL.md, "Crash ops"): the crashes armed past half the workload never fire, and
    their power cuts check the finished run instead."""

    rule = "arm_crash"

    def op_arm_crash(self, args: Any) -> JsonValue:
        self._crash_fs().inner.crash_at_op(2 * args.count("after") + 1)
        return None


class CrashKeepsEverythingOnNone(MutantSubject):
    """Its crash seam's ``crash`` with ``keep`` ``"none"`` keeps every written byte and name, as
    ``"all"`` does (PROTOCOL.md, "Crash ops": ``"none"`` drops every unsynced byte and name). Every
    point's two power cuts are then one outcome: what a real power loss drops is never checked."""

    rule = "crash"

    def op_crash(self, args: Any) -> JsonValue:
        keep = args.get("keep", "none")
        return super().op_crash(Args({"keep": "all" if keep == "none" else keep}))


BROKEN_SUBJECTS: tuple[type[MutantSubject], ...] = (
    AcceptsReplaceMissingShadowedProvenance,
    AcceptsInvertedReplace,
    AcceptsProvenanceOnLogOnlyEvent,
    RewriteMayChangeIsError,
    ReplaceGenerationNotIncremented,
    DerivesShadowedMessage,
    DerivesEmptyAssistantMessage,
    ForksInsideOpenTurn,
    AcceptsForkBoundaryPastTheEnd,
    NoEndSeedForEmptySeed,
    WritesSecondEndSeedOnResume,
    DropsSeedLengthOnResume,
    FirstLiveSeqIsSeedLengthOnResume,
    EmitsClosersInWrongOrder,
    ClosersOmitCompactionEnd,
    LeavesTornTailOnDisk,
    ReportsTornTailAsCorrupt,
    TruncatesDamageThatIsNotATail,
    AcknowledgesFlushBeforeFsync,
    IgnoresFailedFsync,
    ArmsFaultsOnlyForTheNextCall,
    DamageKeepsTheLowBit,
    UnsyncedShowsNothing,
    ArmedCrashFiresLate,
    CrashKeepsEverythingOnNone,
)

# The value-domain, line-splitting, UTF-16, content, absent/null and storage-format mutants of
# issue 10 build on the plumbing above (tests/broken_values.py).
if __package__:  # imported as tests.broken_subjects (python -m conformance.mutation)
    from tests.broken_values import BROKEN_VALUES
else:  # imported from tests/ (pytest)
    from broken_values import BROKEN_VALUES

BROKEN_SUBJECTS += BROKEN_VALUES

# --- byte-exact writing and the batch bound (issue 26 items 3 and 5) ---------------------------------
# Caught through the files family's byte comparison and the storage vectors on batching
# (tests/test_files_family.py, tests/test_batch_bound.py).

if __package__:
    from tests.broken_values import Swap, SwapMutant
else:
    from broken_values import Swap, SwapMutant


def _crlf_lines(original: Any) -> object:
    # a "\n" in a string is escaped; a v0 log's migration also hands over its small floats
    return lambda records, *rest: original(records, *rest).replace(b"\n", b"\r\n")


class WritesCrlfLineEnds(SwapMutant):
    """Ends every line with ``\\r\\n``, as a writer on Windows text I/O would: a reader that splits on
    ``\\n`` still reads it (``\\r`` is JSON whitespace), but the bytes are not the log's canonical
    encoding (notes/dsh-persistence §3.3: the separator is ``\\n`` only; docs/choices.md)."""

    swaps = (Swap("reference.persistence.fastjson", "encode_lines", _crlf_lines),)
    rule = "byte-exact writing"


def _type_last(original: Any) -> object:
    def encode(header: Any) -> Any:
        line = dict(original(header))
        return {**{key: value for key, value in line.items() if key != "type"}, "type": line["type"]}

    return encode


class WritesHeaderTypeLast(SwapMutant):
    """Writes the header line's ``type: "session"`` after the other keys, as a writer that adds it to
    the header object would: the same JSON value, other bytes (SPEC-DECISIONS D1: ``type`` first,
    then D1's order)."""

    swaps = (Swap("reference.persistence.filestore", "encode_header_line", _type_last),)
    rule = "byte-exact writing"


class _AgeRestartedHandle(filestore_module.FileLogHandle):
    def flush(self) -> None:
        try:
            super().flush()
        except SpecError:
            self._pending = self.restarted()
            raise

    def restarted(self) -> Any:
        return type(self._pending)()  # nothing pending: the failed batch's age and size are forgotten


class _AgeFromFailureHandle(_AgeRestartedHandle):
    def restarted(self) -> Any:
        return self._pending._replace(earliest_time=self._events[-1].get("time"))


class _CharacterCountingHandle(filestore_module.FileLogHandle):
    def _encode(self, events: Any) -> Any:
        lines = super()._encode(events)  # the lines the bound counts, measured as text, not as bytes
        return None if lines is None else [line.decode("utf-8") for line in lines]


def _handles_of(handle_class: type[filestore_module.FileLogHandle]) -> type[FileStore]:
    class _Store(FileStore):
        def create(self, header: FrozenDict) -> filestore_module.FileLogHandle:
            handle = super().create(header)
            handle.__class__ = handle_class
            return handle

        def open(self, session_id: str) -> filestore_module.FileLogHandle:
            handle = super().open(session_id)
            handle.__class__ = handle_class
            return handle

    return _Store


class BatchAgeRestartsAfterFailedWrite(MutantSubject):
    """Forgets the buffered batch when its write fails, so the events it keeps are aged afresh from
    the next append and wait a whole bound again (D2; spec.projections.durability: a failed write
    keeps the batch buffered, and the next due append retries)."""

    file_store_class = _handles_of(_AgeRestartedHandle)
    rule = "is_batch_due"


class BatchAgeFromFailedAppend(MutantSubject):
    """Dates the buffered batch from the append whose write failed instead of its oldest event, so
    the retry waits a whole bound after the failure (D2; spec.projections.durability)."""

    file_store_class = _handles_of(_AgeFromFailureHandle)
    rule = "is_batch_due"


class CountsBatchBytesAsCharacters(MutantSubject):
    """Measures the batch's size in characters (code points) where the bound is in bytes of UTF-8,
    so multi-byte and astral text reach the bound late (spec.projections.durability)."""

    file_store_class = _handles_of(_CharacterCountingHandle)
    rule = "is_batch_due"


def _exceeds(margin: int) -> Any:
    """A bound check written ``value > bound + margin`` (``None``: no bound); 0 is ``>``, -1 ``>=``."""

    def make(original: Any) -> object:
        return lambda value, bound: bound is not None and value > bound + margin

    return make


class SpillsAtTheLimit(SwapMutant):
    """Spills a result estimated at exactly ``maxInlineTokens`` (``>=`` written for ``>``): the limit
    is the most a result may hold inline (spec.shrink.spill.should_spill; SPEC-DECISIONS D8)."""

    swaps = (Swap("spec.shrink.spill", "should_spill", _exceeds(-1)),)
    rule = "should_spill"


class SpillsOnlyPastTheLimitPlusOne(SwapMutant):
    """Keeps a result one token above ``maxInlineTokens`` inline (the limit counted one too high):
    a result above the limit spills (spec.shrink.spill.should_spill; SPEC-DECISIONS D8)."""

    swaps = (Swap("spec.shrink.spill", "should_spill", _exceeds(1)),)
    rule = "should_spill"


class PressureOnlyAboveTheThreshold(SwapMutant):
    """Compacts only when the context exceeds the threshold (``>`` written for ``>=``): a context
    holding exactly the threshold is under pressure (spec.shrink.pressure.is_under_pressure; notes
    §5.3)."""

    swaps = (Swap("spec.shrink.engine", "is_under_pressure", _exceeds(0)),)
    rule = "is_under_pressure"


class PressureOneTokenEarly(SwapMutant):
    """Compacts a context one token below the threshold (the threshold counted one too low)
    (spec.shrink.pressure.is_under_pressure; notes §5.3)."""

    swaps = (Swap("spec.shrink.engine", "is_under_pressure", _exceeds(-2)),)
    rule = "is_under_pressure"


BYTES_AND_BATCHES: tuple[type[MutantSubject], ...] = (
    WritesCrlfLineEnds,
    WritesHeaderTypeLast,
    CountsBatchBytesAsCharacters,
    BatchAgeRestartsAfterFailedWrite,
    BatchAgeFromFailedAppend,
    SpillsAtTheLimit,
    SpillsOnlyPastTheLimitPlusOne,
    PressureOnlyAboveTheThreshold,
    PressureOneTokenEarly,
)
BROKEN_SUBJECTS += BYTES_AND_BATCHES

# --- kinds2: the compaction engine and the pruner (issue 26, "prune" and "engine" kinds) ----------
# Each is one plausible slip in the pruner or the engine; the vectors of conformance/cases/prune.py,
# prune_pass.py, overflow.py, spill.py and compaction.py catch them.


def _carry_trailing_blocks(original: Any) -> object:
    def plan_one(seq: int, data: Any, message: Any, result: Any, *rest: Any) -> Any:
        plan = original(seq, data, message, result, *rest)
        trailing = list(message["content"][1:])
        if not trailing:
            return plan
        replaced = dict(plan.replacement_data)
        inner = dict(replaced["message"])
        inner["content"] = [*inner["content"], *trailing]  # the blocks after the result kept
        replaced["message"] = inner
        return dataclasses.replace(plan, replacement_data=snapshot_json(replaced))

    return plan_one


class PruneKeepsBlocksAfterTheResult(SwapMutant):
    """Carries the content blocks that follow the tool-result block into the pruned replacement, as
    a pruner that copies the message and edits its first block would: the replacement is the
    tool-result block alone (spec.shrink.prune.plan_prune_events, as in DSH)."""

    swaps = (Swap("spec.shrink.prune", "_plan_one", _carry_trailing_blocks),)
    rule = "plan_prune_events"


def _walk_in_log_order(original: Any) -> object:
    return lambda nodes, events, config, *rest: original(sorted(nodes), events, config, *rest)


class PrunePassWalksLogOrder(SwapMutant):
    """Walks the prune candidates in log order (ascending seq) instead of surface order, so a result
    a replace moved earlier on the surface is pruned after the ones it now precedes
    (spec.shrink.prune.plan_prune_events: in surface order; notes §6.3)."""

    swaps = (Swap("spec.shrink.engine", "plan_prune_events", _walk_in_log_order),)
    rule = "plan_prune_events"


def _surface_only(original: Any) -> object:
    return lambda events, priced: sum(tokens for _, tokens in priced)  # the request header forgotten


class PressureIgnoresSystemAndTools(SwapMutant):
    """Measures pressure on the surface alone, without the latest request header's system prompt
    and tools, which fill the window too (spec.shrink.pressure.derive_context_tokens; notes §3)."""

    swaps = (Swap("spec.shrink.engine", "derive_context_tokens", _surface_only),)
    rule = "derive_context_tokens"


class _CountsWithIds(weakref.WeakKeyDictionary[Session, int]):
    """The subject's overflow counts, with a side table by session id (forgotten with them)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_id: dict[str, int] = {}


class _RecoveryById(OverflowRecovery):
    """Counts overflow retries per session id, so a resumed session inherits the count of the
    session it replaced."""

    def _by_id(self) -> dict[str, int]:
        assert isinstance(self._retries, _CountsWithIds)
        return self._retries.by_id

    def retries(self, session: Session) -> int:
        return self._by_id().get(session.id, 0)

    def reset(self, session: Session) -> None:
        self._by_id().pop(session.id, None)

    def on_request_error(
        self, session: Session, error: BaseException, signal: AbortSignal | None = None
    ) -> bool:
        retries = self.retries(session)
        retry = super().on_request_error(session, error, signal)
        if retry:
            self._by_id()[session.id] = retries + 1
        return retry


class OverflowRetriesSurviveResume(MutantSubject):
    """Keeps the overflow-recovery count per session id, so a session resumed after its retry was
    spent still has none (PROTOCOL "Overflow recovery": the count belongs to the live session; a
    resumed session starts again at 0; notes §8.2)."""

    recovery_class = _RecoveryById
    rule = "may_attempt_overflow_recovery"

    def _forget_engine(self) -> None:
        super()._forget_engine()
        self._overflow = _CountsWithIds()


def _joined_by_newline(original: Any) -> object:
    def join(blocks: Any) -> Any:
        text = original(blocks)
        return None if text is None else "\n".join(block["text"] for block in blocks)

    return join


class SpillJoinsBlocksWithNewline(SwapMutant):
    """Saves a multi-block result's text blocks joined by ``\\n`` instead of with no separator
    (spec.shrink.spill.derive_spill_text; notes §10.2 step 3)."""

    swaps = (Swap("spec.shrink.spill", "derive_spill_text", _joined_by_newline),)
    rule = "derive_spill_text"


def _error_end_without_command(original: Any) -> object:
    def end(lifecycle: Any, error: str | None = None) -> Any:
        if error is None:
            return original(lifecycle)
        return original({k: v for k, v in lifecycle.items() if k != "sourceCommandId"}, error)

    return end


class FailedCompactionEndDropsCommandId(SwapMutant):
    """Closes a failed compaction with a ``compaction/end`` that leaves out the start's
    ``sourceCommandId``: the end carries the start's lifecycle whole, plus ``error``
    (spec.shrink.bracket.derive_compaction_end; notes §4.2, §4.5 step 7)."""

    swaps = (Swap("spec.shrink.engine", "derive_compaction_end", _error_end_without_command),)
    rule = "derive_compaction_end"


KINDS2: tuple[type[MutantSubject], ...] = (
    PruneKeepsBlocksAfterTheResult,
    PrunePassWalksLogOrder,
    PressureIgnoresSystemAndTools,
    OverflowRetriesSurviveResume,
    SpillJoinsBlocksWithNewline,
    FailedCompactionEndDropsCommandId,
)
BROKEN_SUBJECTS += KINDS2


def _any_lifecycle(original: Any) -> object:
    def decode(record: Any, header: Any) -> Any:
        if isinstance(record, dict):
            record = {**record, "identity": derive_cache_identity(header)}  # the identity never compared
        return original(record, header)

    return decode


class CacheRowsOfAnyLifecycle(SwapMutant):
    """Reads the rows of a projection cache record of its format and version without comparing its
    identity with the log's header, so a session recreated under the same id (or moved) resumes
    from the rows of the old one (spec.projections.units.decode_cache_rows; notes §11.4)."""

    swaps = (Swap("reference.projections.registry", "decode_cache_rows", _any_lifecycle),)
    rule = "derive_cache_identity"


KINDS2 += (CacheRowsOfAnyLifecycle,)
BROKEN_SUBJECTS += (CacheRowsOfAnyLifecycle,)


# --- branch kinds1: falsy values, a kept lock, a null closer field, the seed-length bound, v0 -------
# (issue 26, "Why": host-language semantics, store, repair, checker, v0 legacy reading)


def _falsy_created_at_is_now(original: Any) -> object:
    def plan(session_id: str, meta: JsonValue, now: int, is_seeded: bool) -> Any:
        if isinstance(meta, dict) and "createdAt" in meta and not meta["createdAt"]:
            meta = {**meta, "createdAt": None}  # ``meta.get("createdAt") or now``
        return original(session_id, meta, now, is_seeded)

    return plan


class FalsyCreatedAtIsNow(SwapMutant):
    """Takes a ``createdAt`` of ``0``, ``false`` or ``""`` in a create's meta for an absent one and
    stamps the clock's now, as ``meta.get("createdAt") or now`` does: 0 is a valid createdAt the
    header keeps, and false or "" are refused (spec.log.header.plan_header_record: now only when it
    is absent or null)."""

    swaps = (Swap("spec.log.header", "plan_header_record", _falsy_created_at_is_now, everywhere=True),)
    rule = "plan_header_record"


class _LockKeptOnRefusedOpenStore(FileStore):
    def open(self, session_id: str) -> filestore_module.FileLogHandle:
        self.fs.unlock = lambda lock: None  # a refused open forgets to release the lock it took
        try:
            return super().open(session_id)
        finally:
            del self.fs.unlock


class RefusedResumeKeepsWriterLock(MutantSubject):
    """Keeps the session's writer lock when a resume fails on storage (the closers' write or fsync
    fails), so a retried resume is refused LOCKED although no writer holds the session
    (SPEC-DECISIONS D3: a failed write answers STORAGE_IO and leaves the session able to retry)."""

    file_store_class = _LockKeptOnRefusedOpenStore
    rule = "D3 STORAGE_IO"


def _compaction_end_without_absent_turn(original: Any) -> object:
    def derive(start: JsonObject, seq: int, time: JsonValue) -> Event:
        end = original(start, seq, time)
        if "turn" in start:
            return end
        data = {key: value for key, value in end["data"].items() if key != "turn"}
        return with_field(end, "data", data)  # the start had no turn, so neither has the end

    return derive


class ClosingCompactionEndOmitsAbsentTurn(SwapMutant):
    """Closes an interrupted compaction that started outside a turn with a compaction/end that has
    no ``turn`` key, copying only what the start had, where the closer writes ``turn: null``
    (spec.lineage.repair.derive_interrupted_compaction_end; SPEC-DECISIONS D3 item 6)."""

    swaps = (
        Swap("spec.lineage.repair", "derive_interrupted_compaction_end", _compaction_end_without_absent_turn),
    )
    rule = "derive_interrupted_compaction_end"


def _seed_length_read_as_a_seq(original: Any) -> object:
    def check(events: Sequence[Event], header: JsonObject) -> Any:
        if header.get("seedLength") == len(events) and is_event_seq(header.get("seedLength")):
            header = {**header, "seedLength": len(events) + 1}  # ``seedLength >= len(events)``
        return original(events, header)

    return check


class SeedLengthBoundOffByOne(SwapMutant):
    """Reports a seedLength equal to the number of events as past the log (``>=`` for ``>``), as if
    seedLength were the seq of a seed event: a fork's child whose seed ended with its end-seed and
    that has appended nothing since holds exactly seedLength events (spec.checks.lineage
    .check_header_lineage)."""

    swaps = (Swap("spec.checks.log", "check_header_lineage", _seed_length_read_as_a_seq),)
    rule = "seed-length"


def _seeded_only_by_nonzero_length(original: Any) -> object:
    def upgrade(session_id: str, line: JsonObject) -> FrozenDict:
        header = original(session_id, line)
        if line.get("seedLength") == 0:  # ``isSeeded = bool(line.get("seedLength"))``
            return FrozenDict({**header, "isSeeded": False})
        return header

    return upgrade


class V0EmptySeedIsNotSeeded(SwapMutant):
    """Upgrades a v0 header with ``seedLength: 0`` (a session created from an empty seed) to
    ``isSeeded: false``, testing the length's truth where the upgrade tests its presence
    (spec.format.naming.upgrade_v0_header; SPEC-DECISIONS D1)."""

    swaps = (Swap("spec.format.naming", "upgrade_v0_header", _seeded_only_by_nonzero_length),)
    rule = "upgrade_v0_header"


def _replacing_result_minted_id(original: Any) -> object:
    def wrap(session_id: str, event: JsonObject, data: JsonObject, message_ids: Any) -> JsonObject:
        appended = {key: value for key, value in event.items() if key != "surfaceOp"}
        return original(session_id, appended, data, message_ids)  # its own seq's id, not its start's

    return wrap


class V0ReplacingResultGetsItsOwnId(SwapMutant):
    """Gives a pre-identity v0 tool/result that replaces an earlier result a legacy id of its own
    seq, where it inherits the id of the message at its replace start (spec.format.legacy
    .upgrade_pre_identity_message; notes/dsh-persistence §3.6)."""

    swaps = (Swap("spec.format.legacy", "_wrap_legacy_tool_result", _replacing_result_minted_id),)
    rule = "upgrade_pre_identity_message"


KINDS1: tuple[type[MutantSubject], ...] = (
    FalsyCreatedAtIsNow,
    RefusedResumeKeepsWriterLock,
    ClosingCompactionEndOmitsAbsentTurn,
    SeedLengthBoundOffByOne,
    V0EmptySeedIsNotSeeded,
    V0ReplacingResultGetsItsOwnId,
)
BROKEN_SUBJECTS += KINDS1


# --- databases: reading across page boundaries (issue 26, "databases") ------------------------------
# They need a PostgreSQL server, so they are not in BROKEN_SUBJECTS: tests/test_mutation_score.py
# judges them on the test cluster (tests/conftest.py postgres_cluster), where the PostgreSQL subject
# reads in pages of three rows. (SQLite reads a session in one query: no page to cross.)


class _MispagedStore(PostgresStore):
    """Continues each read page from the last seq of the page before plus :attr:`step` (``seq >=
    last + step``); the reference's keyset pagination is ``seq > last``, a step of 1."""

    step: ClassVar[int] = 1

    def _db_scan(self, key: str, first_seq: int, visit: RowVisitor) -> str | None:
        query = sql.SQL(
            "SELECT h.header, e.seq, e.event FROM {} h LEFT JOIN {} e ON e.session = h.session AND e.seq >= %s"
            " WHERE h.session = %s ORDER BY e.seq LIMIT %s"
        ).format(self._name("session_headers"), self._name("session_events"))

        def scan(conn: psycopg.Connection[Any]) -> str | None:
            rows = conn.execute(query, (first_seq, key, self.read_batch)).fetchall()
            if not rows:
                return None
            while True:
                for _, seq, text in rows:
                    if seq is not None:
                        visit(int(seq), str(text))
                if len(rows) < self.read_batch or rows[-1][1] is None:
                    return str(rows[0][0])
                rows = conn.execute(query, (rows[-1][1] + self.step, key, self.read_batch)).fetchall()

        return self._retrying("read a session", scan)


class _PageRereadingStore(_MispagedStore):
    step = 0  # ``seq >= last`` for ``seq > last``


class _PageSkippingStore(_MispagedStore):
    step = 2  # ``seq > last + 1``: the page's next row counted as read


class _MispagedSubject(PostgresSubject):
    store_class: ClassVar[type[_MispagedStore]]
    rule: ClassVar[str] = "D2"

    def _open_database(self, empty: bool) -> DatabaseStore:
        database = super()._open_database(empty)
        database.__class__ = self.store_class
        return database


class RereadsEventAtPageBoundary(_MispagedSubject):
    """Reads a stored session in pages and reads the last event of each full page again at the
    start of the next (SPEC-DECISIONS D2: a reader gets the committed log, each event once)."""

    store_class = _PageRereadingStore


class SkipsEventAtPageBoundary(_MispagedSubject):
    """Reads a stored session in pages and starts each page one row late, so the first event after
    every full page is never read (SPEC-DECISIONS D2: a reader gets the whole committed log)."""

    store_class = _PageSkippingStore


BROKEN_POSTGRES: tuple[type[_MispagedSubject], ...] = (RereadsEventAtPageBoundary, SkipsEventAtPageBoundary)
