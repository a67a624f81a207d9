"""The reference implementation behind the subject protocol (conformance/PROTOCOL.md).

:class:`ReferenceSubject` answers one protocol request at a time with ``handle(request) ->
response`` on top of :class:`reference.store.SessionStore`; :func:`main` runs it as a stdio server
(``python -m reference.server``): one JSON request per line on stdin, one JSON response per line on
stdout.

Read it as a worked example of a subject. Every op is one small method, ``op_<name>``, found
through the :attr:`ReferenceSubject.ops` table. The pure functions of capability ``pure`` are
:data:`spec.wire.WIRE_FUNCTIONS`, the JSON form of those spec functions that the suite's oracle
uses too (a subject in another language writes its own from PROTOCOL.md's table). The override points, for a subclass that
changes one behaviour (the suite's broken-subject tests do exactly that):

- ``op_<name>(args)`` — one op; ``args`` is an :class:`Args` (absent keys stay absent);
- :meth:`ReferenceSubject.state_json` — how a live session is shown (the protocol's *state*);
- :meth:`ReferenceSubject.live` — how an id finds its live session;
- :attr:`ReferenceSubject.pure_functions` — the ``call`` table, name to adapter;
- :attr:`ReferenceSubject.capabilities` and :attr:`ReferenceSubject.name` — what ``hello`` says.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import errno
import itertools
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar, Final

from reference.persistence.api import PersistenceService
from reference.persistence.filestore import FileStore
from reference.persistence.fs import FileSystem, LockHandle
from reference.persistence.memory import MemoryPersistence
from reference.persistence.powerloss import DROP_ALL, KEEP_ALL, CrashPlan, PowerLossFileSystem, SimulatedCrash
from reference.projections.checkpoints import DurabilityCheckpoints
from reference.projections.registry import (
    CacheMedium,
    FileCacheMedium,
    MemoryCacheMedium,
    ProjectionCache,
    Projections,
)
from reference.session import Session
from reference.shrink.compaction import (
    AbortSignal,
    CompactionEngine,
    CompactionResult,
    OverflowRecovery,
    PruneResult,
    SummaryRequest,
    prune_session,
)
from reference.shrink.spill import MemorySpillStore, SpillPolicy, SpillRef
from reference.store import SessionStore
from spec.codes import Code, SpecError, reject
from spec.format.framing import scan_zstd_frames, split_jsonl
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.json import JsonObject, JsonValue, is_safe_integer, thaw_json
from spec.log.session import ABSENT
from spec.projections.durability import BatchPolicy, decode_batch_policy
from spec.projections.units import ProjectionUnit
from spec.shrink.compaction import CompactionPolicy
from spec.shrink.pressure import CONTEXT_WINDOW_EXCEEDED
from spec.shrink.prune import PruneConfig, decode_prune_config
from spec.shrink.summary import SummarizerOutput
from spec.wire import WIRE_FUNCTIONS, WireFunction, WireInputError
from spec.wire_engine import (
    CANCEL_AFTER,
    CANCEL_DURING,
    AppendRequest,
    Attempt,
    decode_append_request,
    decode_attempt,
    decode_attempts,
    decode_catalogue_unit,
    decode_context_window,
    decode_moment,
    decode_policy,
    decode_pruner,
    decode_trigger,
    derive_attempt_failure,
    derive_attempt_output,
    derive_tool_call_id,
    derive_tool_result_content,
    encode_compaction_result,
    encode_prune_result,
    with_tool_result_content,
)

PROTOCOL_VERSION: Final = 2
VERSION: Final = "0.1.0"  # the reference's version, as hello names it
DAMAGE_SPOTS: Final = ("middle", "start", "end")
STORE_ROOT: Final = "/store"  # where the file store lives on the simulated filesystem

# Protocol codes (conformance/PROTOCOL.md): not rule rejections, so not in spec.codes.
UNSUPPORTED_OP: Final = "UNSUPPORTED_OP"
BAD_REQUEST: Final = "BAD_REQUEST"
CRASHED: Final = "CRASHED"
INTERNAL: Final = "INTERNAL"

ERRNOS: Final = {"EIO": errno.EIO, "ENOSPC": errno.ENOSPC}
ENGINE_CAPABILITIES: Final = ("compaction", "prune", "spill", "overflow", "projection", "checkpoint")


class BadRequest(Exception):
    """The request is malformed in a way no rule judges (answered ``BAD_REQUEST``)."""


class UnsupportedOp(Exception):
    """The op or pure function is not implemented (answered ``UNSUPPORTED_OP``)."""


class Args:
    """An op's arguments: the request without ``rid`` and ``op``. A key that is absent stays
    distinct from ``null`` (:data:`spec.session.ABSENT`)."""

    def __init__(self, values: Mapping[str, JsonValue]) -> None:
        self._values = values

    def optional(self, key: str) -> object:
        """The value, or ``ABSENT`` when the key was not passed."""
        return self._values.get(key, ABSENT)

    def get(self, key: str, default: JsonValue = None) -> JsonValue:
        return self._values.get(key, default)

    def session_id(self, key: str = "id") -> str:
        value = self._values.get(key)
        if not isinstance(value, str):
            raise BadRequest(f"{key!r} must be a session id string")
        return value

    def optional_session_id(self, key: str) -> str | None:
        """A session id, where absent and ``null`` both mean "mint one"."""
        if self._values.get(key) is None:
            return None
        return self.session_id(key)

    def count(self, key: str, default: int | None = None) -> int:
        """A non-negative integer argument (``default`` when absent)."""
        value = self._values.get(key, default)
        if not is_safe_integer(value) or value < 0:
            raise BadRequest(f"{key!r} must be a non-negative integer")
        return int(value)


class FaultyFileSystem:
    """A :class:`PowerLossFileSystem` whose next write or fsync can be made to fail once, as the
    protocol's ``fail_next`` asks: ``"write"`` is the next ``write_new`` or ``append`` (creating a
    file or appending to one), ``"fsync"`` the next file fsync. A failing call has no effect."""

    def __init__(self, inner: PowerLossFileSystem) -> None:
        self.inner = inner
        self._faults: list[list[int | str]] = []  # [kind, errno, calls to let through first]

    def fail_next(self, kind: str, code: int, after: int) -> None:
        self._faults.append([kind, code, after])

    def _gate(self, kind: str, path: str) -> None:
        for fault in self._faults:
            if fault[0] != kind:
                continue
            if fault[2] == 0:
                self._faults.remove(fault)
                code = int(fault[1])
                raise OSError(code, f"injected {errno.errorcode[code]}", path)
            fault[2] = int(fault[2]) - 1

    def read_bytes(self, path: str) -> bytes:
        return self.inner.read_bytes(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.inner.is_dir(path)

    def listdir(self, path: str) -> list[str]:
        return self.inner.listdir(path)

    def size(self, path: str) -> int:
        return self.inner.size(path)

    def makedirs(self, path: str) -> None:
        self.inner.makedirs(path)

    def write_new(self, path: str, data: bytes) -> None:
        self._gate("write", path)
        self.inner.write_new(path, data)

    def append(self, path: str, data: bytes) -> None:
        self._gate("write", path)
        self.inner.append(path, data)

    def truncate(self, path: str, size: int) -> None:
        self.inner.truncate(path, size)

    def fsync(self, path: str) -> None:
        self._gate("fsync", path)
        self.inner.fsync(path)

    def fsync_dir(self, path: str) -> None:
        self.inner.fsync_dir(path)

    def rename(self, src: str, dst: str) -> None:
        self.inner.rename(src, dst)

    def link(self, src: str, dst: str) -> None:
        self.inner.link(src, dst)

    def remove(self, path: str) -> None:
        self.inner.remove(path)

    def try_lock(self, path: str) -> LockHandle | None:
        return self.inner.try_lock(path)

    def unlock(self, lock: LockHandle) -> None:
        self.inner.unlock(lock)


# --- the engine ops' helpers (conformance/PROTOCOL.md, "Engine ops") -------------------------------

ENGINE_OPS: Final = {
    "compact": "op_compact",
    "compact_region": "op_compact_region",
    "compact_if_needed": "op_compact_if_needed",
    "prune": "op_prune",
    "overflow": "op_overflow",
    "overflow_reset": "op_overflow_reset",
    "spill": "op_spill",
    "spill_read": "op_spill_read",
    "project": "op_project",
    "unproject": "op_unproject",
    "state_of": "op_state_of",
    "snapshot": "op_snapshot",
    "state_of_stored": "op_state_of_stored",
    "checkpoint": "op_checkpoint",
}


class ScriptedSummarizer:
    """The summarizer of one engine op: the suite's attempts (``spec.wire_engine.Attempt``), handed
    out in order. The engine mints each compaction's id through :meth:`new_id`, which starts the
    next attempt; :meth:`summarize` then does what that attempt says. A cancellation aborts the
    op's own signal, as a user's would; a scripted append goes through the session's caller path
    (a refused one changes nothing). Nothing here sleeps: a timeout is reported as the engine's
    deadline would report it."""

    def __init__(self, attempts: Sequence[Attempt], session: Session, caller: AbortSignal) -> None:
        self._attempts = tuple(attempts)
        self._session = session
        self._caller = caller
        self._started = 0

    def new_id(self) -> str:
        self._started += 1
        return self._attempts[self._started - 1].compaction_id

    def summarize(self, request: SummaryRequest, signal: AbortSignal) -> SummarizerOutput:
        attempt = self._attempts[self._started - 1]
        if attempt.cancel == CANCEL_DURING:
            self._caller.abort()
            self._caller.throw_if_aborted()
        failure = derive_attempt_failure(attempt)
        if failure is not None:
            raise failure
        if attempt.append is not None:
            try:
                _append(self._session, attempt.append)
            except SpecError:
                pass  # a refused append is no surface change
        output = derive_attempt_output(attempt)
        if attempt.cancel == CANCEL_AFTER:
            self._caller.abort()
        return output


class ProviderFailure(Exception):
    """A model request that failed with ``code`` (what ``overflow`` reports to the recovery)."""

    def __init__(self, code: object) -> None:
        super().__init__(f"the model request failed with {code!r}")
        self.code = code


class FailingSpillStore:
    """A spill store whose saves fail (``spill`` with ``storeFails``); reads go to ``inner``."""

    def __init__(self, inner: MemorySpillStore) -> None:
        self.inner = inner

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> SpillRef:
        raise OSError(errno.ENOSPC, "injected: the spill store is full")

    def read_text(self, locator: str) -> str:
        return self.inner.read_text(locator)


def _append(session: Session, request: AppendRequest) -> JsonValue:
    return session.append(request.event_type, request.data, request.surface_op, request.source_event_seqs)


def _encode_compaction(result: CompactionResult | None) -> JsonValue:
    if result is None:
        return None
    return encode_compaction_result(
        result.compaction_id,
        result.source_command_id,
        (result.start_seq, result.summary_seq, result.end_seq),
        result.summary,
        result.shadowed_seqs,
        result.shadowed_token_count,
    )


def _encode_prune(result: PruneResult) -> JsonValue:
    return encode_prune_result(
        [
            {
                "originalSeq": entry.original_seq,
                "replacementSeq": entry.replacement_seq,
                "callId": entry.call_id,
                "charsBefore": entry.chars_before,
                "charsAfter": entry.chars_after,
            }
            for entry in result.pruned
        ]
    )


# --- the subject ----------------------------------------------------------------------------------


class ReferenceSubject:
    """The reference store, driven by protocol requests (see the module docstring)."""

    name: ClassVar[str] = "dsh-session-spec reference"
    capabilities: ClassVar[tuple[str, ...]] = (
        "core",
        "storage",
        "crash-seam",
        "batch-policy",
        "pure",
        "checker-rules",
        "export",
        "import",
        *ENGINE_CAPABILITIES,
    )
    ops: ClassVar[Mapping[str, str]] = {
        "hello": "op_hello",
        "reset": "op_reset",
        "clock": "op_clock",
        "create": "op_create",
        "append": "op_append",
        "engine_append": "op_engine_append",
        "fork": "op_fork",
        "state": "op_state",
        "flush": "op_flush",
        "close": "op_close",
        "resume": "op_resume",
        "read": "op_read",
        "unsynced": "op_unsynced",
        "crash": "op_crash",
        "arm_crash": "op_arm_crash",
        "fail_next": "op_fail_next",
        "ops": "op_ops",
        "damage": "op_damage",
        "export": "op_export",
        "call": "op_call",
        **ENGINE_OPS,
    }
    pure_functions: ClassVar[Mapping[str, WireFunction]] = WIRE_FUNCTIONS
    # The engine behind the engine ops, each class an override point (tests/broken_engines.py).
    engine_class: ClassVar[type[CompactionEngine]] = CompactionEngine
    recovery_class: ClassVar[type[OverflowRecovery]] = OverflowRecovery
    projections_class: ClassVar[type[Projections]] = Projections
    cache_class: ClassVar[type[ProjectionCache]] = ProjectionCache
    spill_store_class: ClassVar[type[MemorySpillStore]] = MemorySpillStore
    checkpoints_class: ClassVar[type[DurabilityCheckpoints]] = DurabilityCheckpoints

    # What the engine ops keep between requests (``reset`` forgets it: _forget_engine).
    spill_store: MemorySpillStore
    projections: Projections | None
    _overflow: weakref.WeakKeyDictionary[Session, int]
    _registered: dict[str, tuple[ProjectionUnit, int]]  # key -> (the unit serving it, registrants)
    _disposers: dict[str, list[Callable[[], None]]]
    _memory_cache: MemoryCacheMedium

    def __init__(self) -> None:
        self.now = 0
        self.fs: FaultyFileSystem | None = None
        self.persistence: PersistenceService | None = None
        self.store = SessionStore(clock=self._clock)
        self._compressed = True
        self._batch: BatchPolicy | None = (
            None  # reset's batchMaxDelayMs/batchMaxBytes; none: only flush writes
        )
        self._temp_names = itertools.count(1)
        self._forget_engine()

    # --- the one entry point ------------------------------------------------------------------

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        """Answer one request; never raises."""
        rid = request.get("rid")
        try:
            op = request.get("op")
            method = self.ops.get(op) if isinstance(op, str) else None
            if method is None:
                raise UnsupportedOp(f"unsupported op {op!r}")
            args = Args({key: value for key, value in request.items() if key not in ("rid", "op")})
            result = getattr(self, method)(args)
            return {"rid": rid, "ok": True, "result": result}
        except SpecError as error:
            return _error(rid, str(error.code), error.message)
        except UnsupportedOp as error:
            return _error(rid, UNSUPPORTED_OP, str(error))
        except (BadRequest, WireInputError) as error:
            return _error(rid, BAD_REQUEST, str(error))
        except SimulatedCrash as crash:
            return _error(rid, CRASHED, f"simulated power loss: {crash}")
        except Exception as error:
            return _error(rid, INTERNAL, repr(error))

    # --- override points ------------------------------------------------------------------------

    def live(self, session_id: str) -> Session:
        """The live session with that id, or ``SESSION_NOT_FOUND``."""
        session = self.store.get(session_id)
        if session is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        return session

    def state_json(self, session: Session) -> JsonObject:
        """The protocol's *state* of a live session."""
        surface = session.surface
        return {
            "id": session.id,
            "events": list(session.events),
            "nodes": list(surface.nodes),
            "replaceGeneration": surface.replace_generation,
            "firstLiveSeq": session.first_live_seq,
            "seq": session.seq,
            "header": session.header,
            "messages": list(session.derive_messages()),
        }

    # --- core ops -------------------------------------------------------------------------------

    def op_hello(self, args: Args) -> JsonValue:
        return {
            "protocol": PROTOCOL_VERSION,
            "name": self.name,
            "version": VERSION,
            "capabilities": list(self.capabilities),
            "target": {"format": 4, "decisions": []},
        }

    def op_reset(self, args: Args) -> JsonValue:
        storage = args.get("storage", "none")
        compressed = args.get("compressed", True)
        if storage not in ("none", "memory", "file") or not isinstance(compressed, bool):
            raise BadRequest("storage must be 'none', 'memory' or 'file' and compressed a boolean")
        files = decode_placed_files(args.optional("files"), storage)
        self._batch = decode_batch_policy(args.get("batchMaxDelayMs"), args.get("batchMaxBytes"))
        self.now = 0
        self._compressed = compressed
        self.fs = FaultyFileSystem(PowerLossFileSystem()) if storage == "file" else None
        self.persistence = MemoryPersistence(batch=self._batch) if storage == "memory" else None
        self._forget_engine()
        if self.fs is not None:
            place_files(self.fs, STORE_ROOT, files)
        self._open_store()
        return None

    def op_clock(self, args: Args) -> JsonValue:
        now = args.get("now")
        if not is_safe_integer(now):
            raise BadRequest("now must be a safe integer")
        self.now = int(now)
        return self.now

    def op_create(self, args: Args) -> JsonValue:
        seed = args.get("seed")
        if seed is not None and not isinstance(seed, list):
            raise BadRequest("seed must be an array of events")
        session = self.store.create(args.optional_session_id("id"), seed=seed, meta=args.get("meta"))
        return self.state_json(session)

    def op_append(self, args: Args) -> JsonValue:
        session = self.live(args.session_id())
        return session.append(
            args.optional("type"),
            args.optional("data"),
            args.optional("surfaceOp"),
            args.optional("sourceEventSeqs"),
        )

    def op_engine_append(self, args: Args) -> JsonValue:
        session = self.live(args.session_id())
        return session.append_engine_event(
            args.optional("type"),
            args.optional("data"),
            args.optional("surfaceOp"),
            args.optional("sourceEventSeqs"),
        )

    def op_fork(self, args: Args) -> JsonValue:
        child = self.store.fork(
            args.session_id("source"), args.optional("boundary"), args.optional_session_id("child")
        )
        return self.state_json(child)

    def op_state(self, args: Args) -> JsonValue:
        return self.state_json(self.live(args.session_id()))

    # --- storage ops ----------------------------------------------------------------------------

    def op_flush(self, args: Args) -> JsonValue:
        self.live(args.session_id()).flush()
        return None

    def op_close(self, args: Args) -> JsonValue:
        session_id = args.session_id()
        self.live(session_id)
        self.store.close(session_id)
        return None

    def op_resume(self, args: Args) -> JsonValue:
        return self.state_json(self.store.resume(args.session_id()))

    def op_read(self, args: Args) -> JsonValue:
        session_id = args.session_id()
        if self.persistence is None:
            raise reject(
                Code.SESSION_NOT_FOUND, f'session "{session_id}" not found (this store has no persistence)'
            )
        stored = self.persistence.read(session_id)
        return {"header": stored.header, "events": list(stored.events)}

    # --- crash ops ------------------------------------------------------------------------------

    def op_unsynced(self, args: Args) -> JsonValue:
        return [{"path": f.path, "bytes": f.pending} for f in self._crash_fs().inner.unsynced_files()]

    def op_crash(self, args: Args) -> JsonValue:
        fs = self._crash_fs()
        keep = args.get("keep", "none")
        if keep == "none":
            plan = DROP_ALL
        elif keep == "all":
            plan = KEEP_ALL
        elif (
            isinstance(keep, dict)
            and isinstance(keep.get("path"), str)
            and is_safe_integer(keep.get("bytes"))
        ):
            plan = CrashPlan(cuts={str(keep["path"]): int(keep["bytes"])})  # type: ignore[arg-type]
        else:
            raise BadRequest("keep must be 'none', 'all' or {path, bytes}")
        try:
            survivor = fs.inner.crash(plan)
        except ValueError as error:
            raise BadRequest(str(error)) from None
        self.fs = FaultyFileSystem(survivor)
        self._open_store()
        return None

    def op_arm_crash(self, args: Args) -> JsonValue:
        self._crash_fs().inner.crash_at_op(args.count("after") + 1)
        return None

    def op_fail_next(self, args: Args) -> JsonValue:
        fs = self._crash_fs()
        kind, code = args.get("fsOp"), args.get("errno")
        if kind not in ("write", "fsync") or code not in ERRNOS:
            raise BadRequest("fsOp must be 'write' or 'fsync' and errno 'EIO' or 'ENOSPC'")
        fs.fail_next(str(kind), ERRNOS[str(code)], args.count("after", 0))
        return None

    def op_ops(self, args: Args) -> JsonValue:
        return self._crash_fs().inner.mutation_count

    def op_damage(self, args: Args) -> JsonValue:
        fs = self._crash_fs()
        session_id = args.session_id()
        path = self.persistence.locate(session_id) if isinstance(self.persistence, FileStore) else None
        if path is None:
            raise BadRequest(f'session "{session_id}" has no stored log to damage')
        spot = args.get("at", "middle")
        if spot not in DAMAGE_SPOTS:
            raise BadRequest(f"at must be one of {', '.join(DAMAGE_SPOTS)}")
        if args.optional("offset") is ABSENT:
            offset = plan_damage_offset(fs.inner.read_bytes(path), path.endswith(".zstd"), str(spot))
            if offset is None:
                raise BadRequest(
                    f'the log of "{session_id}" has no middle: it needs two event units after its header'
                )
        else:
            offset = args.count("offset")
        try:
            fs.inner.rot_byte(path, offset)
        except ValueError as error:
            raise BadRequest(str(error)) from None
        return {"path": path, "offset": offset}

    def op_export(self, args: Args) -> JsonValue:
        """Every file under the file store's root: its path relative to the root and its bytes."""
        if not isinstance(self.persistence, FileStore):
            raise BadRequest("export needs reset with storage 'file'")
        fs, root = self.persistence.fs, self.persistence.root
        files: list[tuple[str, str]] = []
        pending = [""]
        while pending:
            relative = pending.pop()
            for name in fs.listdir(f"{root}/{relative}".rstrip("/")):
                child = f"{relative}/{name}" if relative else name
                if fs.is_dir(f"{root}/{child}"):
                    pending.append(child)
                else:
                    files.append((child, base64.b64encode(fs.read_bytes(f"{root}/{child}")).decode("ascii")))
        return [{"path": path, "bytes": data} for path, data in sorted(files)]

    # --- pure functions -------------------------------------------------------------------------

    def op_call(self, args: Args) -> JsonValue:
        function, inputs = args.get("function"), args.get("input")
        if not isinstance(inputs, dict):
            raise BadRequest("input must be an object")
        adapter = self.pure_functions.get(function) if isinstance(function, str) else None
        if adapter is None:
            raise UnsupportedOp(f"unsupported function {function!r}")
        try:
            return adapter(inputs)
        except WireInputError as error:
            raise BadRequest(str(error)) from None

    # --- engine ops (capabilities compaction, prune, spill, overflow, projection, checkpoint) ---

    def op_compact(self, args: Args) -> JsonValue:
        """``/compact``: manual compaction between turns, then a flush (notes §9.1)."""
        attempt = decode_attempt(args.get("attempt"))
        command = args.optional("sourceCommandId")
        if command is not ABSENT and not isinstance(command, str):
            raise BadRequest("sourceCommandId must be a string")
        session = self.live(args.session_id())
        signal = AbortSignal()
        engine = self._engine(session, (attempt,), signal)
        source = command if isinstance(command, str) else None
        return _encode_compaction(engine.compact_now(session, signal, source_command_id=source))

    def op_compact_region(self, args: Args) -> JsonValue:
        """``compactRegion``: automatic compaction of a span the suite names, inside the open turn."""
        attempt = decode_attempt(args.get("attempt"))
        start, end = args.get("start"), args.get("end")
        if not is_safe_integer(start) or not is_safe_integer(end):
            raise BadRequest("start and end must be seqs")
        session = self.live(args.session_id())
        signal = AbortSignal()
        engine = self._engine(session, (attempt,), signal)
        return _encode_compaction(engine.compact_region(session, int(start), int(end), signal))

    def op_compact_if_needed(self, args: Args) -> JsonValue:
        """Pressure (prune, then summarize while at or above the threshold) or the forced
        context-overflow compaction (notes §5.3)."""
        trigger = decode_trigger(args.get("trigger", "pressure"))
        attempts = decode_attempts(args.get("attempts"), 1)
        session = self.live(args.session_id())
        policy = decode_policy(args.optional("policy"))
        pruner = decode_pruner(args.optional("prune"))
        if trigger == "pressure" and len(attempts) < policy.compaction_retries + 1:
            raise BadRequest("pressure may run compactionRetries + 1 compactions: give an attempt for each")
        signal = AbortSignal()
        engine = self._engine(session, attempts, signal, policy, pruner)
        window = decode_context_window(args.optional("contextWindow"))
        return _encode_compaction(engine.compact_if_needed(session, trigger, signal, context_window=window))  # type: ignore[arg-type]

    def op_prune(self, args: Args) -> JsonValue:
        """One prune pass with the suite's thresholds (notes §6.3)."""
        session = self.live(args.session_id())
        config = decode_prune_config(args.get("config"))
        return _encode_prune(prune_session(session, config))

    def op_overflow(self, args: Args) -> JsonValue:
        """A model request failed with ``code``: the recovery compacts and says whether to retry
        (notes §8.2)."""
        attempt = decode_attempt(args.get("attempt"))
        session = self.live(args.session_id())
        policy = decode_policy(args.optional("policy"))
        pruner = decode_pruner(args.optional("prune"))
        signal = AbortSignal()
        engine = self._engine(session, (attempt,), signal, policy, pruner)
        recovery = self.recovery_class(engine, counts=self._overflow)
        code = args.get("code", CONTEXT_WINDOW_EXCEEDED)
        retry = recovery.on_request_error(session, ProviderFailure(code), signal)
        return {"retry": retry, "retries": recovery.retries(session)}

    def op_overflow_reset(self, args: Args) -> JsonValue:
        """A response succeeded (or the agent went idle): a fresh recovery sequence starts."""
        session = self.live(args.session_id())
        self.recovery_class(self._engine(session, (), AbortSignal()), counts=self._overflow).reset(session)
        return None

    def op_spill(self, args: Args) -> JsonValue:
        """A tool result enters the log through the spill policy (notes §10.2)."""
        tool, data = args.get("toolName"), args.get("data")
        nested, store_fails = args.get("nested", False), args.get("storeFails", False)
        if not isinstance(tool, str) or not isinstance(data, dict):
            raise BadRequest("toolName must be a string and data a tool/result's data")
        if not isinstance(nested, bool) or not isinstance(store_fails, bool):
            raise BadRequest("nested and storeFails must be booleans")
        inner = derive_tool_result_content(data)
        session = self.live(args.session_id())
        store = FailingSpillStore(self.spill_store) if store_fails else self.spill_store
        policy = SpillPolicy(args.optional("maxInlineTokens"), store)
        outcome = policy.apply(session.id, tool, derive_tool_call_id(data), inner, nested)
        event = session.append(
            "tool/result",
            with_tool_result_content(data, thaw_json(outcome.content)),  # type: ignore[arg-type]
            "append",
            args.optional("sourceEventSeqs"),
        )
        spilled = outcome.spilled
        return {
            "event": event,
            "spilled": None if spilled is None else {"locator": spilled.locator, "bytes": spilled.bytes},
        }

    def op_spill_read(self, args: Args) -> JsonValue:
        """The whole text a spill saved, as it was saved."""
        locator = args.get("locator")
        if not isinstance(locator, str):
            raise BadRequest("locator must be a string")
        text = self.spill_store.read_text(locator)
        return {"text": text, "bytes": len(text.encode("utf-8", "surrogatepass"))}

    def op_project(self, args: Args) -> JsonValue:
        """Register a catalogue unit (``spec.projections.catalogue``); the registry shares a key only
        at one ``stateVersion``."""
        unit = decode_catalogue_unit(args.get("unit"), args.optional("stateVersion"))
        if self.projections is None:
            self._registered[unit.key] = (unit, 1)
            self._attach_projections()
            return None
        dispose = self.projections.register(unit)  # PROJECTION_VERSION_CONFLICT keeps nothing
        self._disposers.setdefault(unit.key, []).append(dispose)
        held = self._registered.get(unit.key)
        self._registered[unit.key] = (held[0], held[1] + 1) if held else (unit, 1)
        return None

    def op_unproject(self, args: Args) -> JsonValue:
        """Release one registrant of the unit's key; at the last one the key is gone."""
        unit = decode_catalogue_unit(args.get("unit"))
        held = self._registered.get(unit.key)
        if held is None:
            return None
        disposers = self._disposers.get(unit.key, [])
        if disposers:
            disposers.pop()()
        if held[1] == 1:
            del self._registered[unit.key]
            self._disposers.pop(unit.key, None)
            if not self._registered and self.projections is not None:
                self.projections.close()
                self.projections = None
        else:
            self._registered[unit.key] = (held[0], held[1] - 1)
        return None

    def op_state_of(self, args: Args) -> JsonValue:
        """A unit's state for a live session, folded up to its last event (``null``: not registered)."""
        key = decode_catalogue_unit(args.get("unit")).key
        session = self.live(args.session_id())
        if self.projections is None:
            return None
        return thaw_json(self.projections.state_of(session, key))

    def op_snapshot(self, args: Args) -> JsonValue:
        """Every wire unit's state, all at one log position."""
        session = self.live(args.session_id())
        if self.projections is None:
            return {"asOfSeq": session.seq - 1, "values": {}}
        snapshot = self.projections.snapshot(session)
        return {"asOfSeq": snapshot.as_of_seq, "values": thaw_json(snapshot.values)}

    def op_state_of_stored(self, args: Args) -> JsonValue:
        """A unit's state for a stored session: its cache row, if usable, and the log past it."""
        key = decode_catalogue_unit(args.get("unit")).key
        session_id = args.session_id()
        if self.persistence is None:
            raise reject(
                Code.SESSION_NOT_FOUND, f'session "{session_id}" not found (this store has no persistence)'
            )
        if self.projections is None or key not in self._registered:
            self.persistence.read(session_id)  # SESSION_NOT_FOUND for a session never stored
            return None
        return thaw_json(self.projections.state_of_stored(self.persistence, session_id, key))

    def op_checkpoint(self, args: Args) -> JsonValue:
        """A durability checkpoint at ``moment``: flush, then the guarded append ``then`` (if any);
        a failed flush fails closed and ``then`` never happens."""
        moment = decode_moment(args.get("moment"))
        then = args.optional("then")
        action = decode_append_request(then, "then") if then is not ABSENT else None  # type: ignore[arg-type]
        session = self.live(args.session_id())
        return self.checkpoints_class(session).guard(
            moment, lambda: None if action is None else _append(session, action)
        )

    # --- the engine's state ---------------------------------------------------------------------

    def _engine(
        self,
        session: Session,
        attempts: Sequence[Attempt],
        signal: AbortSignal,
        policy: CompactionPolicy = CompactionPolicy(),
        pruner: PruneConfig | None = None,
    ) -> CompactionEngine:
        summarizer = ScriptedSummarizer(attempts, session, signal)
        return self.engine_class(
            summarizer,
            policy=policy,
            prune=pruner,
            new_id=summarizer.new_id,
            checkpoint_id=lambda compaction_id: compaction_id,
        )

    def _forget_engine(self) -> None:
        """What ``reset`` forgets of the engine: units, spilled texts, overflow counts."""
        self.spill_store = self.spill_store_class()
        self._overflow = weakref.WeakKeyDictionary()
        self._registered = {}
        self._disposers = {}
        self._memory_cache = MemoryCacheMedium()
        self.projections = None

    def _attach_projections(self) -> None:
        """A registry over the current store, with the units registered so far: after a crash the
        restarted host registers them again; the cells are gone, the cache rows stay."""
        if self.projections is not None:
            self.projections.close()
            self.projections = None
        if not self._registered:
            return
        medium: CacheMedium | None = None
        if isinstance(self.persistence, FileStore):
            medium = FileCacheMedium(self.persistence)
        elif self.persistence is not None:
            medium = self._memory_cache
        cache = self.cache_class(medium) if medium is not None else None
        self.projections = self.projections_class(cache=cache, store=self.store)
        self._disposers = {}
        for key, (unit, refs) in self._registered.items():
            self._disposers[key] = [self.projections.register(unit) for _ in range(refs)]

    # --- internals ------------------------------------------------------------------------------

    def _clock(self) -> int:
        return self.now

    def _open_store(self) -> None:
        """A fresh store over the current backend: no session is live."""
        if self.fs is not None:
            # Temp-file names are deterministic but never reused: a temp name whose removal a crash
            # undid must not collide with a later one.
            self.persistence = FileStore(
                STORE_ROOT,
                fs=self.fs,
                compressed=self._compressed,
                temp_token=lambda: f"{next(self._temp_names):06d}",
                batch=self._batch,
            )
        self.store = SessionStore(self.persistence, clock=self._clock)
        self._attach_projections()

    def _crash_fs(self) -> FaultyFileSystem:
        if self.fs is None:
            raise BadRequest("crash ops need reset with storage 'file'")
        return self.fs


def decode_placed_files(value: object, storage: object) -> list[tuple[str, bytes]]:
    """``reset``'s ``files`` (PROTOCOL.md, "Placing files"): absent, or with storage ``"file"`` an
    array of ``{path, bytes}``, each path relative (``/``-separated names, none ``.`` or ``..``)
    and given once, its bytes base64."""
    if value is ABSENT or value is None:
        return []
    if storage != "file" or not isinstance(value, list):
        raise BadRequest("files need reset with storage 'file' and are an array of {path, bytes}")
    placed: list[tuple[str, bytes]] = []
    for entry in value:
        path = entry.get("path") if isinstance(entry, dict) else None
        text = entry.get("bytes") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not isinstance(text, str):
            raise BadRequest("every file is {path: string, bytes: base64 string}")
        if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            raise BadRequest(f"file path {path!r} must be relative, each part a name")
        if any(path == seen for seen, _ in placed):
            raise BadRequest(f"file path {path!r} is given twice")
        try:
            placed.append((path, base64.b64decode(text, validate=True)))
        except binascii.Error:
            raise BadRequest(f"the bytes of {path!r} are not base64") from None
    return placed


def place_files(fs: FileSystem, root: str, files: Sequence[tuple[str, bytes]]) -> None:
    """Write ``files`` under ``root``, durably, before any store opens there."""
    for path, data in files:
        full = f"{root}/{path}"
        parent = full.rsplit("/", 1)[0]
        fs.makedirs(parent)
        fs.write_new(full, data)
        fs.fsync(full)
        fs.fsync_dir(parent)


def plan_damage_offset(data: bytes, compressed: bool, spot: str = "middle") -> int | None:
    """The byte ``damage`` flips when no offset is given (conformance/PROTOCOL.md): in the log's
    second unit (its second line, newline counted, or its second zstd frame), provided a third
    complete unit follows it, the ``"middle"`` byte ``start + length // 2``, the ``"start"`` byte or
    the ``"end"`` byte ``start + length - 1``; ``None`` when there is no such unit."""
    if compressed:
        units = [(frame.offset, frame.length) for frame in scan_zstd_frames(data).frames]
    else:
        units = [(line.offset, line.end - line.offset) for line in split_jsonl(data).lines]
    if len(units) < 3:
        return None
    start, length = units[1]
    return {"middle": start + length // 2, "start": start, "end": start + length - 1}[spot]


def _error(rid: JsonValue, code: str, message: str) -> dict[str, JsonValue]:
    return {"rid": rid, "ok": False, "error": {"code": code, "message": message}}


def serve(subject: ReferenceSubject, lines: Callable[[], str], write: Callable[[str], object]) -> None:
    """The stdio loop: each line is one request; each answer is one line. A line that is not a
    JSON object is answered ``BAD_REQUEST`` (with ``rid`` null); a request whose handling or
    answer raises is answered ``INTERNAL`` with its rid, and the loop serves the next line."""
    while line := lines():
        if not line.strip():
            continue
        try:
            request = decode_json_text(line)
        except ValueError as error:
            response = _error(None, BAD_REQUEST, f"request is not JSON: {error}")
        else:
            if isinstance(request, dict):
                try:
                    response = subject.handle(request)
                except Exception as error:
                    response = _error(request.get("rid"), INTERNAL, repr(error))
            else:
                response = _error(None, BAD_REQUEST, "request must be a JSON object")
        try:
            text = encode_json_text(response)
        except Exception as error:  # an answer outside the JSON domain (an infinity, a bad key)
            text = encode_json_text(
                _error(response.get("rid"), INTERNAL, f"the answer is not JSON: {error!r}")
            )
        write(text + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m reference.server [--backend sqlite|postgres]``: serve the protocol on
    stdin/stdout until stdin closes. The default backend is the simulated filesystem with its crash
    seam, or the real directory ``$CONFORMANCE_STORE_ROOT`` when it is set
    (:mod:`reference.directory`); the database backends are :mod:`reference.database_subjects`."""
    parser = argparse.ArgumentParser(
        prog="python -m reference.server", description="serve the conformance protocol on stdin/stdout"
    )
    parser.add_argument(
        "--backend",
        choices=("simulated", "sqlite", "postgres"),
        default="simulated",
        help="where storage lives (default: the simulated filesystem, with the crash seam)",
    )
    backend = parser.parse_args(argv).backend
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="surrogateescape", closefd=False)  # noqa: SIM115 - lives as long as the process
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="surrogatepass", closefd=False)  # noqa: SIM115 - lives as long as the process

    def write(text: str) -> None:
        stdout.write(text)
        stdout.flush()

    subject: ReferenceSubject
    if backend == "simulated":
        from reference.directory import subject_from_environment  # it builds on this module

        try:
            subject = subject_from_environment()
        except NotADirectoryError as error:
            print(f"reference.server: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    else:
        from reference.database_subjects import make_subject

        try:
            subject = make_subject(backend)
        except (ValueError, SpecError) as error:
            print(f"reference.server: cannot start the {backend} backend: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    serve(subject, stdin.readline, write)


if __name__ == "__main__":
    main()
