"""The seed's example projection unit, the session digest (seed 002 "会话账本").

It counts what happened in the log — completed compactions, prunes, and the last prune's price —
not what the surface still shows, and it keeps the identity rule: every other event gives back the
very same state. Hosts register it like any unit; the suite folds it through the protocol's
``call`` (``spec.projection.derive_projection_changes``) to check a subject's units keep that rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from spec.log.events import COMPACTION_END, COMPACTION_PRUNE, Event, event_data
from spec.log.json import FrozenDict, JsonValue, int_field, is_event_seq
from spec.projections.units import ProjectionUnit

DIGEST_KEY: Final = "sessionDigest"
DIGEST_ZERO: Final = FrozenDict({"compactions": 0, "prunes": 0, "lastShadowedTokens": None})


def is_digest_state(state: JsonValue) -> bool:
    """``{compactions, prunes, lastShadowedTokens}``: two counts and the last prune's shadowed
    price (``None`` before any prune)."""
    if not isinstance(state, dict) or set(state) != {"compactions", "prunes", "lastShadowedTokens"}:
        return False
    last = state["lastShadowedTokens"]
    return (
        is_event_seq(state["compactions"])
        and is_event_seq(state["prunes"])
        and (last is None or is_event_seq(last))
    )


def apply_session_digest(state: JsonValue, event: Event) -> JsonValue:
    """A successful ``compaction/end`` (no ``error``) counts one compaction; a ``compaction/prune``
    counts one prune and records its ``shadowedTokenCount``; every other event returns the very
    same state (seed 002: "不关心的事件必须返回同一个引用"). The counts follow the log, so shadowing
    never lowers them."""
    assert isinstance(state, dict)
    kind = event.get("type")
    data = event_data(event)
    if kind == COMPACTION_END and "error" not in data:
        return {**state, "compactions": int_field(state, "compactions") + 1}
    if kind == COMPACTION_PRUNE:
        return {
            **state,
            "prunes": int_field(state, "prunes") + 1,
            "lastShadowedTokens": data.get("shadowedTokenCount"),
        }
    return state


SESSION_DIGEST: Final = ProjectionUnit(
    key=DIGEST_KEY,
    state_version=1,
    state_schema=is_digest_state,
    init=lambda: DIGEST_ZERO,
    apply=apply_session_digest,
)
"""The seed's ``sessionDigest`` unit, host-only, ``stateVersion`` 1."""

SPEC_UNITS: Final[Mapping[str, ProjectionUnit]] = MappingProxyType({DIGEST_KEY: SESSION_DIGEST})
"""The units the specification itself defines, by key: those the protocol's ``call`` can fold."""
