"""The reference implementation behind the subject protocol (conformance/PROTOCOL.md).

:class:`ReferenceSubject` answers one protocol request at a time with ``handle(request) ->
response`` on top of :class:`reference.store.SessionStore`; :mod:`reference.server` serves it on
stdin/stdout (``python -m reference.server``).

Read it as a worked example of a subject. Every op is one small method, ``op_<name>``, found
through the dispatch table :attr:`ReferenceSubject.ops`; the ops live in rooms by area:
:mod:`~reference.subject.sessions` (core ops and ``call``), :mod:`~reference.subject.storage`,
:mod:`~reference.subject.crash`, :mod:`~reference.subject.engine` and
:mod:`~reference.subject.projections`, over the state and dispatch of :mod:`~reference.subject.base`.
The pure functions of capability ``pure`` are :data:`spec.wire.WIRE_FUNCTIONS`, the JSON form of
those spec functions that the suite's oracle uses too (a subject in another language writes its own
from PROTOCOL.md's table). The override points, for a subclass that changes one behaviour (the
suite's broken-subject tests do exactly that):

- ``op_<name>(args)`` — one op; ``args`` is an :class:`~reference.subject.requests.Args` (absent
  keys stay absent);
- :meth:`ReferenceSubject.state_json` — how a live session is shown (the protocol's *state*);
- :meth:`ReferenceSubject.live` — how an id finds its live session;
- :attr:`ReferenceSubject.pure_functions` — the ``call`` table, name to adapter;
- :attr:`ReferenceSubject.capabilities` and :attr:`ReferenceSubject.name` — what ``hello`` says;
- the ``*_class`` attributes — the engine, recovery, projection registry, cache, spill store and
  checkpoints behind the engine ops.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final

from reference.subject.crash import CRASH_OPS, CrashOps
from reference.subject.engine import COMPACTION_OPS, EngineOps
from reference.subject.projections import PROJECTION_OPS, ProjectionOps
from reference.subject.sessions import SESSION_OPS, SessionOps
from reference.subject.storage import STORAGE_OPS, StorageOps
from spec.protocol import ENGINE_CAPABILITIES

ENGINE_OPS: Final = (*COMPACTION_OPS, *PROJECTION_OPS)


class ReferenceSubject(SessionOps, StorageOps, CrashOps, EngineOps, ProjectionOps):
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
        "list",
        "check",
        *ENGINE_CAPABILITIES,
    )
    ops: ClassVar[Mapping[str, str]] = {
        op: f"op_{op}" for op in (*SESSION_OPS, *STORAGE_OPS, *CRASH_OPS, *ENGINE_OPS)
    }


__all__ = ["ENGINE_OPS", "ReferenceSubject"]
