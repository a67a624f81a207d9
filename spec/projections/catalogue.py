"""The units a subject registers when the conformance protocol's ``project`` names them: the seed's
session digest and a turn ledger, each at the ``stateVersion`` s it is defined at (SPEC-DECISIONS D7;
seed 002 "会话账本"; conformance/PROTOCOL.md, "Engine ops").

Projections register code, which a protocol cannot carry, so the suite names a unit from this
small catalogue and the subject registers its own copy of it. The two units differ where the
projection rules need them to: the digest is host-only (``state_of`` reads it, ``snapshot`` leaves
it out), the ledger is a wire unit; and the ledger's fold changes between its ``stateVersion`` 1
and 2, as the seed says a fold's meaning changes ("改语义就加 stateVersion"), so that a cache row
written by one version and trusted by the other gives a visibly wrong answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Final

from spec.log.events import STEP_START, TURN_START, Event
from spec.log.json import FrozenDict, JsonValue, int_field, is_event_seq
from spec.projections.digest import DIGEST_KEY, SESSION_DIGEST
from spec.projections.units import ProjectionUnit

LEDGER_KEY: Final = "turnLedger"
LEDGER_ZERO_V1: Final = FrozenDict({"turns": 0})
LEDGER_ZERO_V2: Final = FrozenDict({"turns": 0, "steps": 0})


def is_ledger_v1_state(state: JsonValue) -> bool:
    """``{turns}``: how many turns have started."""
    return isinstance(state, dict) and set(state) == {"turns"} and is_event_seq(state["turns"])


def is_ledger_v2_state(state: JsonValue) -> bool:
    """``{turns, steps}``: how many turns and how many steps have started."""
    return (
        isinstance(state, dict)
        and set(state) == {"turns", "steps"}
        and is_event_seq(state["turns"])
        and is_event_seq(state["steps"])
    )


def apply_turn_ledger_v1(state: JsonValue, event: Event) -> JsonValue:
    """Each ``turn/start`` counts one turn; every other event returns the very same state."""
    assert isinstance(state, dict)
    if event.get("type") == TURN_START:
        return {"turns": int_field(state, "turns") + 1}
    return state


def apply_turn_ledger_v2(state: JsonValue, event: Event) -> JsonValue:
    """Each ``turn/start`` counts one turn and each ``step/start`` one step; every other event
    returns the very same state."""
    assert isinstance(state, dict)
    kind = event.get("type")
    if kind == TURN_START:
        return {**state, "turns": int_field(state, "turns") + 1}
    if kind == STEP_START:
        return {**state, "steps": int_field(state, "steps") + 1}
    return state


TURN_LEDGER_V1: Final = ProjectionUnit(
    key=LEDGER_KEY,
    state_version=1,
    state_schema=is_ledger_v1_state,
    init=lambda: LEDGER_ZERO_V1,
    apply=apply_turn_ledger_v1,
    wire=True,
)
TURN_LEDGER_V2: Final = replace(
    TURN_LEDGER_V1,
    state_version=2,
    state_schema=is_ledger_v2_state,
    init=lambda: LEDGER_ZERO_V2,
    apply=apply_turn_ledger_v2,
)

PROJECTION_CATALOGUE: Final[Mapping[str, Mapping[int, ProjectionUnit]]] = MappingProxyType(
    {
        DIGEST_KEY: MappingProxyType({1: SESSION_DIGEST}),
        LEDGER_KEY: MappingProxyType({1: TURN_LEDGER_V1, 2: TURN_LEDGER_V2}),
    }
)
"""Every unit the protocol's ``project`` can name: by key, then by ``stateVersion``; a unit
registered without a version is the first one listed."""
