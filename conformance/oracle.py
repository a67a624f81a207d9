"""The specification as a subject: the protocol answered by the suite's spec model alone.

:class:`SpecOracle` is what the vector generator runs to compute every expected outcome. It is a
thin protocol front over :mod:`conformance.model` (the same model the machine, the exhaustive
checker and the crash checks drive beside a subject): it checks the requests the way a subject
must (``BAD_REQUEST`` for arguments no rule judges), hands each modelled op to
:func:`conformance.engine_model.model_request`, answers ``call`` with :data:`spec.wire.WIRE_FUNCTIONS`, and
answers ``UNSUPPORTED_OP`` for what the model does not decide (the byte-level crash ops).
It imports nothing from ``reference``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Final

from conformance.engine_model import model_request, modelled_ops
from conformance.model import Expected, ModelStore
from spec.codes import SpecError
from spec.log.json import JsonObject, JsonValue, int_field, is_safe_integer
from spec.protocol import BAD_REQUEST, FIRST_PROTOCOL_VERSION, UNSUPPORTED_OP
from spec.wire import WIRE_FUNCTIONS, WireInputError

# The session ids a request must name (a string), read off the modelled ops' parameters; create's
# ``id`` and fork's ``child`` may be null.
SESSION_ARGUMENTS: Final = {
    op: names
    for op, transition in modelled_ops().items()
    if op != "create"
    and (names := tuple(n for n in ("id", "source") if n in inspect.signature(transition).parameters))
}
OPTIONAL_SESSION_ARGUMENTS: Final = {"create": ("id",), "fork": ("child",)}


class _Refused(Exception):
    """A protocol-level answer (not a rule's): ``code`` is a protocol code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class SpecOracle:
    """The protocol, answered by the spec model (see the module docstring)."""

    name: Final = "spec oracle"
    capabilities: Final = ("core", "storage", "pure")

    def __init__(self) -> None:
        self.model = ModelStore()
        self.last: Expected | None = None  # the model's expectation for the last modelled request

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        rid = request.get("rid")
        op = request.get("op")
        args = {key: value for key, value in request.items() if key not in ("rid", "op")}
        try:
            result = self._answer(op, args)
        except _Refused as refusal:
            return {"rid": rid, "ok": False, "error": {"code": refusal.code, "message": str(refusal)}}
        return {"rid": rid, "ok": True, "result": result}

    def _answer(self, op: JsonValue, args: JsonObject) -> JsonValue:
        self.last = None
        if op == "hello":
            return {
                "protocol": FIRST_PROTOCOL_VERSION,
                "name": self.name,
                "capabilities": list(self.capabilities),
            }
        if op == "call":
            return _call(args)
        ops = modelled_ops()
        if not isinstance(op, str) or op not in ops:
            raise _Refused(UNSUPPORTED_OP, f"unsupported op {op!r}")
        _validate_request(op, args, self.model)
        if op == "clock":
            args = {**args, "now": int_field(args, "now")}
        try:
            inspect.signature(ops[op]).bind(self.model, **args)
        except TypeError as error:  # an argument the op does not take, or a missing one
            raise _Refused(BAD_REQUEST, f"{op}: {error}") from None
        self.model, expected = model_request(self.model, op, **args)
        self.last = expected
        if not expected.ok:
            raise _Refused(str(expected.code), f"{op}: {expected.code}")
        return expected.result


def _validate_request(op: str, args: JsonObject, model: ModelStore) -> None:
    """The request-shape checks of PROTOCOL.md that come before any rule."""
    for key in SESSION_ARGUMENTS.get(op, ()):
        if not isinstance(args.get(key), str):
            raise _Refused(BAD_REQUEST, f"{key!r} must be a session id string")
    for key in OPTIONAL_SESSION_ARGUMENTS.get(op, ()):
        if args.get(key) is not None and not isinstance(args.get(key), str):
            raise _Refused(BAD_REQUEST, f"{key!r} must be a session id string or null")
    if op == "reset" and args.get("storage", "none") not in ("none", "memory", "file"):
        raise _Refused(BAD_REQUEST, "storage must be 'none', 'memory' or 'file'")
    if op == "reset" and not isinstance(args.get("compressed", True), bool):
        raise _Refused(BAD_REQUEST, "compressed must be a boolean")
    if op == "reset" and "files" in args and args.get("storage") != "file":
        raise _Refused(BAD_REQUEST, "files need reset with storage 'file'")
    if op == "clock" and not is_safe_integer(args.get("now")):
        raise _Refused(BAD_REQUEST, "now must be a safe integer")
    if op == "create" and args.get("seed") is not None and not isinstance(args.get("seed"), list):
        raise _Refused(BAD_REQUEST, "seed must be an array")
    if op in ("crash", "fail_next") and model.storage != "file":
        raise _Refused(BAD_REQUEST, "crash ops need reset with storage 'file'")
    if op == "fail_commit" and model.storage not in ("memory", "file"):
        raise _Refused(BAD_REQUEST, "fail_commit needs reset with storage")


def _call(args: JsonObject) -> JsonValue:
    function, inputs = args.get("function"), args.get("input")
    if not isinstance(function, str) or not isinstance(inputs, dict):
        raise _Refused(BAD_REQUEST, "call needs a function name and an input object")
    adapter = WIRE_FUNCTIONS.get(function)
    if adapter is None:
        raise _Refused(UNSUPPORTED_OP, f"unknown pure function {function!r}")
    try:
        return adapter(inputs)
    except WireInputError as error:
        raise _Refused(BAD_REQUEST, str(error)) from None
    except SpecError as error:
        raise _Refused(str(error.code), error.message) from None
