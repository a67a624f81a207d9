"""The projection ops (conformance/PROTOCOL.md, "Engine ops", capability ``projection``):
``project``, ``unproject``, ``state_of``, ``snapshot`` and ``state_of_stored``, over the reference's
projection registry (the registry and its cache are attached in :mod:`reference.subject.base`)."""

from __future__ import annotations

from typing import Final

from reference.subject.base import SubjectBase
from reference.subject.requests import Args
from spec.codes import Code, reject
from spec.log.json import JsonValue, thaw_json
from spec.wire_engine import decode_catalogue_unit

# each answered by its op_<name> method
PROJECTION_OPS: Final = ("project", "unproject", "state_of", "snapshot", "state_of_stored")


class ProjectionOps(SubjectBase):
    """The ops of capability ``projection``."""

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
