"""The subject protocol's constants (conformance/PROTOCOL.md), in one place for the suite that
speaks it and the reference that answers it."""

from __future__ import annotations

from typing import Any, Final, TypeAlias

PROTOCOL_VERSION: Final = 2
"""The protocol the suite speaks and the reference answers (PROTOCOL.md, version 2)."""

FIRST_PROTOCOL_VERSION: Final = 1
"""Protocol version 1, the one that froze the pure functions' names (their module paths then).
Its ``hello`` answers only ``{protocol, name, capabilities}``: the subject claims format 4, and its
``pure`` includes ``checker-rules``. The suite's spec oracle still answers ``hello`` that way."""

STORE_ROOT_ENV: Final = "CONFORMANCE_STORE_ROOT"
"""Set for a stdio subject whose file store should live in that existing directory (the kill
check, the trace and files families): ``reset`` with storage ``"file"`` empties it, and a restarted
process finds what its predecessor made durable there."""

Request: TypeAlias = tuple[str, dict[str, Any]]
"""One protocol request as a workload lists it: the op and its arguments (without ``rid``)."""

__all__ = ["FIRST_PROTOCOL_VERSION", "PROTOCOL_VERSION", "STORE_ROOT_ENV", "Request"]
