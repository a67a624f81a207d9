"""The core ops and the pure calls (conformance/PROTOCOL.md, "Core ops" and "Pure functions"):
``hello``, ``clock``, and the session ops ``create``, ``append``, ``engine_append``, ``fork`` and
``state``; ``call`` answers a pure function through :attr:`SessionOps.pure_functions`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from reference.subject.base import SubjectBase
from reference.subject.requests import Args, BadRequest, UnsupportedOp
from spec.log.json import JsonValue, is_safe_integer
from spec.log.writers import CALLER, COMPACTION_ENGINE
from spec.protocol import PROTOCOL_VERSION
from spec.wire import WIRE_FUNCTIONS, WireFunction, WireInputError

VERSION: Final = "0.1.0"  # the reference's version, as hello names it
# each answered by its op_<name> method
SESSION_OPS: Final = ("hello", "clock", "create", "append", "engine_append", "fork", "state", "call")


class SessionOps(SubjectBase):
    """The core ops and ``call``."""

    pure_functions: ClassVar[Mapping[str, WireFunction]] = WIRE_FUNCTIONS

    def op_hello(self, args: Args) -> JsonValue:
        return {
            "protocol": PROTOCOL_VERSION,
            "name": self.name,
            "version": VERSION,
            "capabilities": list(self.capabilities),
            "target": {"format": 4, "decisions": []},
        }

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

    def op_append(self, args: Args, engine: bool = False) -> JsonValue:
        session = self.live(args.session_id())
        return session.append(
            args.optional("type"),
            args.optional("data"),
            args.optional("surfaceOp"),
            args.optional("sourceEventSeqs"),
            writer=COMPACTION_ENGINE if engine else CALLER,
        )

    def op_engine_append(self, args: Args) -> JsonValue:
        return self.op_append(args, engine=True)

    def op_fork(self, args: Args) -> JsonValue:
        child = self.store.fork(
            args.session_id("source"), args.optional("boundary"), args.optional_session_id("child")
        )
        return self.state_json(child)

    def op_state(self, args: Args) -> JsonValue:
        return self.state_json(self.live(args.session_id()))

    def op_call(self, args: Args) -> JsonValue:
        function, inputs = args.get("function"), args.get("input")
        if not isinstance(function, str) or not isinstance(inputs, dict):
            raise BadRequest("call needs a function name (a string) and an input object")
        adapter = self.pure_functions.get(function)
        if adapter is None:
            raise UnsupportedOp(f"unsupported function {function!r}")
        try:
            return adapter(inputs)
        except WireInputError as error:
            raise BadRequest(str(error)) from None
