"""The subject's state and its one entry point: :meth:`SubjectBase.handle` looks an op up in the
dispatch table :attr:`SubjectBase.ops` (op name to the name of its ``op_<name>`` method, which the
op rooms of this package define) and turns what it raises into the protocol's error answer.

What a subject keeps between requests lives here too: the clock, the backend (the simulated
filesystem with its crash seam, an in-memory store, or none), the session store over it, and what
the engine ops keep (spilled texts, overflow counts, registered projection units)."""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import ClassVar, Final

from reference.persistence.api import PersistenceService
from reference.persistence.faulty import FaultyFileSystem
from reference.persistence.filestore import FileStore
from reference.persistence.powerloss import DROP_ALL, PowerLossFileSystem, SimulatedCrash
from reference.projections.registry import (
    CacheMedium,
    FileCacheMedium,
    MemoryCacheMedium,
    ProjectionCache,
    Projections,
)
from reference.session import Session
from reference.shrink.spill import DirectorySpillStore, MemorySpillStore, SpillRef, SpillStore
from reference.store import SessionStore
from reference.subject.requests import Args, BadRequest, UnsupportedOp, error_response
from spec.codes import Code, SpecError, reject
from spec.log.json import JsonObject, JsonValue
from spec.projections.durability import BatchPolicy
from spec.projections.units import ProjectionUnit
from spec.protocol import BAD_REQUEST, CRASHED, INTERNAL, UNSUPPORTED_OP
from spec.shrink.spill import MEMORY_SPILL_ROOT, derive_memory_spill_token
from spec.wire import WireInputError

STORE_ROOT: Final = "/store"  # where the file store lives on the simulated filesystem
SPILL_ROOT: Final = "/tmp/dsh-spill"  # the directory spill store's root, on a simulated disk of its own


class DiskSpillStore:
    """The protocol's spill store under storage ``"file"``: the reference's directory store
    (:class:`reference.shrink.spill.DirectorySpillStore`) on a simulated power-loss disk of its own,
    which ``crash`` cuts with the store's, keeping only what was synced: a text the subject named
    must be durable. Its names are the protocol's: the n-th text saved since ``reset`` takes the
    token :func:`spec.shrink.spill.derive_memory_spill_token` of n, and a locator is the file's path
    with the directory store's root written ``memory://spill``. The disk is not the store's, so the
    crash ops' counts, faults and armed crashes never meet a spill."""

    def __init__(self) -> None:
        saved = itertools.count(1)
        self.disk = PowerLossFileSystem()
        self.store = DirectorySpillStore(
            SPILL_ROOT, self.disk, token=lambda: derive_memory_spill_token(next(saved))
        )

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> SpillRef:
        ref = self.store.save_text(session_id, tool_name, call_id, label, suggested_name, content)
        return replace(ref, locator=MEMORY_SPILL_ROOT + ref.locator[len(SPILL_ROOT) :])

    def read_text(self, locator: str) -> str:
        if not locator.startswith(MEMORY_SPILL_ROOT + "/"):
            raise reject(Code.SPILL_NOT_FOUND, f"spill: nothing is stored at {locator}")
        return self.store.read_text(SPILL_ROOT + locator[len(MEMORY_SPILL_ROOT) :])

    def crash(self) -> None:
        """Power loss on the spill disk: every byte and name not yet synced is gone."""
        self.disk = self.disk.crash(DROP_ALL)
        self.store.fs = self.disk


class SubjectBase:
    """A subject's state, its dispatch and the override points every op room shares."""

    name: ClassVar[str]  # what hello says: the subject's name and capabilities
    capabilities: ClassVar[tuple[str, ...]]
    ops: ClassVar[Mapping[str, str]] = {}  # the dispatch table: op name -> its method's name
    # The projection registry and the spill store behind the engine ops, each an override point.
    projections_class: ClassVar[type[Projections]] = Projections
    cache_class: ClassVar[type[ProjectionCache]] = ProjectionCache
    spill_store_class: ClassVar[type[MemorySpillStore]] = MemorySpillStore

    # What the engine ops keep between requests (``reset`` forgets it: _forget_engine).
    spill_store: SpillStore  # spill_store_class's, or with storage "file" a DiskSpillStore
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
        self._batch: BatchPolicy | None = None  # reset's batchMax*; none: only flush writes
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
            return error_response(rid, str(error.code), error.message)
        except UnsupportedOp as error:
            return error_response(rid, UNSUPPORTED_OP, str(error))
        except (BadRequest, WireInputError) as error:
            return error_response(rid, BAD_REQUEST, str(error))
        except SimulatedCrash as crash:
            return error_response(rid, CRASHED, f"simulated power loss: {crash}")
        except Exception as error:
            return error_response(rid, INTERNAL, repr(error))

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

    # --- the engine's state ---------------------------------------------------------------------

    def _forget_engine(self) -> None:
        """What ``reset`` forgets of the engine: units, spilled texts, overflow counts."""
        self.spill_store = self.spill_store_class() if self.fs is None else DiskSpillStore()
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
