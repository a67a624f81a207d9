"""The specification as a subject: the protocol answered by ``spec`` functions alone.

:class:`SpecOracle` is what the vector generator runs to compute every expected outcome, and a
model other checks can compare a subject against. It holds plain data — a
:class:`~spec.session.SessionState` per live session, the durable log per stored session — and
each op is the spec's decision on it (``create_session_state``, ``append_event``,
``plan_fork_seed``, ``derive_closers``...). It imports nothing from ``reference``.

Storage is modelled by its contract (SPEC-DECISIONS D2, D3): what a ``flush`` made durable
survives; a resume appends the repair closers durably, then the end-seed marker in memory; a crash
loses everything not flushed. ``fail_next`` (with ``after`` 0) makes the next flush or resume that
has bytes to write fail with ``STORAGE_IO``, changing nothing. The byte-level crash ops
(``unsynced``, ``arm_crash``, ``ops``, a partial ``keep``) depend on the implementation's bytes
and are not modelled: the oracle answers them ``UNSUPPORTED_OP``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from conformance.pure import BadInput, UnknownFunction, call_pure
from spec.codes import Code, SpecError, reject
from spec.events import Event
from spec.fork import derive_child_meta, plan_fork_seed, validate_fork_request
from spec.header import build_header
from spec.json import FrozenDict, JsonObject, JsonValue, is_safe_integer
from spec.repair import derive_closers
from spec.session import (
    ABSENT,
    SessionState,
    append_event,
    create_session_state,
    derive_session_messages,
    plan_session_id,
    validate_new_session_id,
)

PROTOCOL_VERSION: Final = 1
WRITE: Final = "write"
FSYNC: Final = "fsync"


class _Refused(Exception):
    """A protocol-level answer (not a rule's): ``code`` is a protocol code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class _Live:
    state: SessionState
    durable: int = 0  # events already durable
    published: bool = False  # a flush has made the session visible to readers


@dataclass
class _Stored:
    header: FrozenDict
    events: list[Event] = field(default_factory=list)


class SpecOracle:
    """The protocol, answered by the spec (see the module docstring)."""

    name: Final = "spec oracle"
    capabilities: Final = ("core", "storage", "pure")

    def __init__(self) -> None:
        self._reset("none")

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        rid = request.get("rid")
        op = request.get("op")
        args = {key: value for key, value in request.items() if key not in ("rid", "op")}
        handler = getattr(self, f"_op_{op}", None) if isinstance(op, str) else None
        try:
            if handler is None:
                raise _Refused("UNSUPPORTED_OP", f"unsupported op {op!r}")
            result = handler(args)
        except SpecError as error:
            return {"rid": rid, "ok": False, "error": {"code": str(error.code), "message": error.message}}
        except _Refused as refusal:
            return {"rid": rid, "ok": False, "error": {"code": refusal.code, "message": str(refusal)}}
        return {"rid": rid, "ok": True, "result": result}

    # --- core ---------------------------------------------------------------------------------

    def _op_hello(self, args: JsonObject) -> JsonValue:
        return {"protocol": PROTOCOL_VERSION, "name": self.name, "capabilities": list(self.capabilities)}

    def _op_reset(self, args: JsonObject) -> JsonValue:
        storage = args.get("storage", "none")
        if storage not in ("none", "memory", "file"):
            raise _Refused("BAD_REQUEST", "storage must be 'none', 'memory' or 'file'")
        self._reset(str(storage))
        return None

    def _op_clock(self, args: JsonObject) -> JsonValue:
        now = args.get("now")
        if not is_safe_integer(now):
            raise _Refused("BAD_REQUEST", "now must be a safe integer")
        self._now = int(now)  # type: ignore[arg-type]
        return self._now

    def _op_create(self, args: JsonObject) -> JsonValue:
        seed = args.get("seed")
        if seed is not None and not isinstance(seed, list):
            raise _Refused("BAD_REQUEST", "seed must be an array")
        return self._state_json(self._create(_optional_id(args, "id"), seed, args.get("meta")))

    def _op_append(self, args: JsonObject) -> JsonValue:
        session_id = _session_id(args, "id")
        live = self._require_live(session_id)
        live.state, event = append_event(
            live.state,
            args.get("type", ABSENT),
            args.get("data", ABSENT),
            args.get("surfaceOp", ABSENT),
            args.get("sourceEventSeqs", ABSENT),
            time=self._now,
        )
        return event

    def _op_fork(self, args: JsonObject) -> JsonValue:
        source_id = _session_id(args, "source")
        child_id = _optional_id(args, "child")
        validate_fork_request(self._live.keys(), source_id, child_id)
        source = self._live[source_id].state
        seed = plan_fork_seed(source_id, source.events, args.get("boundary", ABSENT))
        meta = derive_child_meta(source.header, source_id, len(seed))
        return self._state_json(self._create(child_id, list(seed), meta))

    def _op_state(self, args: JsonObject) -> JsonValue:
        return self._state_json(self._require_live(_session_id(args, "id")))

    # --- storage ------------------------------------------------------------------------------

    def _op_flush(self, args: JsonObject) -> JsonValue:
        session_id = _session_id(args, "id")
        self._flush(session_id, self._require_live(session_id))
        return None

    def _op_close(self, args: JsonObject) -> JsonValue:
        session_id = _session_id(args, "id")
        live = self._require_live(session_id)
        del self._live[session_id]
        self._flush(session_id, live)
        return None

    def _op_resume(self, args: JsonObject) -> JsonValue:
        session_id = _session_id(args, "id")
        if self._storage == "none":
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found (this store has no persistence)')
        if session_id in self._live:
            raise reject(Code.SESSION_ALREADY_EXISTS, f'cannot resume session "{session_id}" while it is live')
        stored = self._require_stored(session_id)
        closers = derive_closers(stored.events)
        if closers:
            self._write_fault()
            stored.events.extend(closers)
        state = create_session_state(session_id, list(stored.events), stored.header, self._now, restore=True)
        live = _Live(state, durable=len(stored.events), published=True)
        self._live[session_id] = live
        return self._state_json(live)

    def _op_read(self, args: JsonObject) -> JsonValue:
        session_id = _session_id(args, "id")
        if self._storage == "none":
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found (this store has no persistence)')
        stored = self._require_stored(session_id)
        return {"header": stored.header, "events": list(stored.events)}

    # --- crash (the part that does not depend on bytes) -----------------------------------------

    def _op_crash(self, args: JsonObject) -> JsonValue:
        self._require_file_storage()
        if args.get("keep", "none") not in ("none", "all"):
            raise _Refused("UNSUPPORTED_OP", "the oracle does not model partial crashes")
        self._live.clear()
        self._faults.clear()
        self._counter = 0  # a restarted store counts its minted ids afresh
        return None

    def _op_fail_next(self, args: JsonObject) -> JsonValue:
        self._require_file_storage()
        kind = args.get("fsOp")
        if kind not in (WRITE, FSYNC) or args.get("errno") not in ("EIO", "ENOSPC"):
            raise _Refused("BAD_REQUEST", "fsOp must be 'write' or 'fsync' and errno 'EIO' or 'ENOSPC'")
        if args.get("after", 0) != 0:
            raise _Refused("UNSUPPORTED_OP", "the oracle models fail_next with after 0 only")
        self._faults.append(str(kind))
        return None

    # --- pure ---------------------------------------------------------------------------------

    def _op_call(self, args: JsonObject) -> JsonValue:
        function, inputs = args.get("function"), args.get("input")
        if not isinstance(function, str) or not isinstance(inputs, dict):
            raise _Refused("BAD_REQUEST", "call needs a function name and an input object")
        try:
            return call_pure(function, inputs)
        except UnknownFunction as error:
            raise _Refused("UNSUPPORTED_OP", str(error)) from None
        except BadInput as error:
            raise _Refused("BAD_REQUEST", str(error)) from None

    # --- the model ----------------------------------------------------------------------------

    def _reset(self, storage: str) -> None:
        self._storage = storage
        self._now = 0
        self._counter = 0
        self._live: dict[str, _Live] = {}
        self._stored: dict[str, _Stored] = {}
        self._faults: list[str] = []

    def _create(self, session_id: str | None, seed: list[JsonValue] | None, meta: JsonValue) -> _Live:
        """The store's create: mint or check the id, build the header, build the state from the
        seed, and (with storage) refuse an id that is already stored."""
        if session_id is None:
            session_id, self._counter = plan_session_id(self._counter, self._live.keys() | self._stored.keys())
        validate_new_session_id(self._live.keys(), session_id)
        header = build_header(session_id, meta, self._now, is_seeded=seed is not None)
        state = create_session_state(session_id, seed, header, self._now)
        if self._storage != "none" and session_id in self._stored:
            raise reject(Code.SESSION_ALREADY_EXISTS, f'session "{session_id}" already exists')
        live = _Live(state)
        self._live[session_id] = live
        return live

    def _flush(self, session_id: str, live: _Live) -> None:
        if self._storage == "none":
            return
        events = live.state.events
        if live.published and live.durable == len(events):
            return
        self._write_fault()
        stored = self._stored.setdefault(session_id, _Stored(live.state.header))
        stored.events.extend(events[live.durable :])
        live.durable, live.published = len(events), True

    def _write_fault(self) -> None:
        """A write (then an fsync) is about to happen: an armed fault makes it fail, unchanged."""
        for kind in (WRITE, FSYNC):
            if kind in self._faults:
                self._faults.remove(kind)
                raise reject(Code.STORAGE_IO, f"injected {kind} failure")

    def _require_live(self, session_id: str) -> _Live:
        live = self._live.get(session_id)
        if live is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        return live

    def _require_stored(self, session_id: str) -> _Stored:
        stored = self._stored.get(session_id)
        if stored is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        return stored

    def _require_file_storage(self) -> None:
        if self._storage != "file":
            raise _Refused("BAD_REQUEST", "crash ops need reset with storage 'file'")

    def _state_json(self, live: _Live) -> JsonObject:
        state = live.state
        return {
            "id": state.header["id"],
            "events": list(state.events),
            "nodes": list(state.surface.nodes),
            "replaceGeneration": state.surface.replace_generation,
            "firstLiveSeq": state.first_live_seq,
            "seq": len(state.events),
            "header": state.header,
            "messages": derive_session_messages(state),  # type: ignore[dict-item]
        }


def _session_id(args: JsonObject, key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise _Refused("BAD_REQUEST", f"{key!r} must be a session id string")
    return value


def _optional_id(args: JsonObject, key: str) -> str | None:
    return None if args.get(key) is None else _session_id(args, key)
