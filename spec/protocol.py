"""The subject protocol's constants (conformance/PROTOCOL.md), in one place for the suite that
speaks it and the reference that answers it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

PROTOCOL_VERSION: Final = 2
"""The protocol the suite speaks and the reference answers (PROTOCOL.md, version 2)."""

FIRST_PROTOCOL_VERSION: Final = 1
"""Protocol version 1, the one that froze the pure functions' names (their module paths then).
Its ``hello`` answers only ``{protocol, name, capabilities}``: the subject claims format 4, and its
``pure`` includes ``checker-rules``. The suite's spec oracle still answers ``hello`` that way."""

CHECKER_RULE: Final = "checker-rule:"
"""The prefix of a per-rule checker capability: ``checker-rule:<id>`` claims that ``check_log``
reports exactly the violations of rule ``<id>`` (PROTOCOL.md, "Hello"). ``checker-rules`` claims
every rule id, and so every ``checker-rule:<id>``."""

STORE_ROOT_ENV: Final = "CONFORMANCE_STORE_ROOT"
"""Set for a stdio subject whose file store should live in that existing directory (the kill
check, the trace and files families): ``reset`` with storage ``"file"`` empties it, and a restarted
process finds what its predecessor made durable there."""

UNSUPPORTED_OP: Final = "UNSUPPORTED_OP"
BAD_REQUEST: Final = "BAD_REQUEST"
CRASHED: Final = "CRASHED"
INTERNAL: Final = "INTERNAL"
PROTOCOL_CODES: Final = frozenset({UNSUPPORTED_OP, BAD_REQUEST, CRASHED, INTERNAL})
"""The protocol's own error codes (PROTOCOL.md, "Errors"), none a rule's rejection: the op is not
implemented, the request is malformed, an armed crash stopped it, or the subject failed inside."""

ENGINE_CAPABILITIES: Final = ("compaction", "prune", "spill", "overflow", "projection", "checkpoint")
"""The capabilities of the engine's ops (PROTOCOL.md, "Hello"): a subject claiming any has an engine."""

DAMAGE_SPOTS: Final = ("middle", "start", "end")
"""Where in a log's second unit ``damage`` flips a byte (PROTOCOL.md, "Crash ops")."""

Request: TypeAlias = tuple[str, dict[str, Any]]
"""One protocol request as a workload lists it: the op and its arguments (without ``rid``)."""

FieldType: TypeAlias = Literal[
    "integer", "count", "seq", "boolean", "string", "session-id", "event-type", "json", "array", "object"
]
"""The JSON type an op's argument has (PROTOCOL.md's op tables): ``integer`` a safe integer (D5: an
integral double is that integer, a boolean never is), ``count`` a non-negative one, ``seq`` an
event seq (a non-negative safe integer naming an event), ``boolean``, ``string``, ``session-id``
(a string naming a session), ``event-type`` (a non-empty string; any name is accepted, known or
not, and only the known names are special), ``json`` (any JSON value, ``null`` included; absent is
not JSON), ``array``, ``object``."""


@dataclass(frozen=True)
class TypedField:
    """One typed argument of a protocol op: ``field`` is its key, dotted for a key inside an
    object argument (``meta.createdAt``)."""

    op: str
    field: str
    type: FieldType

    @property
    def name(self) -> str:
        """``op.field``: the row's stable name."""
        return f"{self.op}.{self.field}"


TYPED_FIELDS: Final[tuple[TypedField, ...]] = (
    TypedField("reset", "compressed", "boolean"),
    TypedField("reset", "batchMaxDelayMs", "count"),
    TypedField("reset", "batchMaxBytes", "count"),
    TypedField("clock", "now", "integer"),
    TypedField("create", "id", "session-id"),
    TypedField("create", "seed", "array"),
    TypedField("create", "meta", "object"),
    TypedField("create", "meta.createdAt", "integer"),
    TypedField("create", "meta.cwd", "string"),
    TypedField("create", "meta.parentSession", "session-id"),
    TypedField("create", "meta.seedLength", "count"),
    TypedField("create", "meta.origin", "string"),
    TypedField("create", "meta.delegationDepth", "count"),
    TypedField("create", "meta.agentPreset", "string"),
    TypedField("append", "id", "session-id"),
    TypedField("append", "type", "event-type"),
    TypedField("append", "data", "json"),
    TypedField("append", "sourceEventSeqs", "array"),
    TypedField("engine_append", "type", "event-type"),
    TypedField("engine_append", "data", "json"),
    TypedField("fork", "source", "session-id"),
    TypedField("fork", "boundary", "seq"),
    TypedField("fork", "child", "session-id"),
    TypedField("state", "id", "session-id"),
    TypedField("read", "id", "session-id"),
    TypedField("compact", "sourceCommandId", "string"),
    TypedField("compact_region", "start", "seq"),
    TypedField("compact_region", "end", "seq"),
    TypedField("compact_if_needed", "contextWindow", "count"),
    TypedField("spill", "toolName", "string"),
    TypedField("spill", "maxInlineTokens", "count"),
    TypedField("spill", "nested", "boolean"),
    TypedField("spill", "storeFails", "boolean"),
    TypedField("project", "stateVersion", "count"),
    TypedField("checkpoint", "moment", "string"),
    TypedField("call", "function", "string"),
    TypedField("call", "input", "object"),
)
"""The protocol's typed op arguments, one row per (op, field): what each op's arguments column
in PROTOCOL.md says its type is. Which value of the type an op accepts is its rules' to say
(a ``count`` of ``-1`` may be a rule's rejection or ``BAD_REQUEST``); the suite's domain edges
(``conformance.drt_edges``) put every field at every edge of its type."""

__all__ = [
    "CHECKER_RULE",
    "FIRST_PROTOCOL_VERSION",
    "PROTOCOL_VERSION",
    "STORE_ROOT_ENV",
    "TYPED_FIELDS",
    "FieldType",
    "Request",
    "TypedField",
]
