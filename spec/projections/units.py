"""Session projections: pure fold units over the log, and the persisted cache rows that let a
reader skip most of the fold (SPEC-DECISIONS D7; seed 002 "会话账本"; notes/dsh-compaction-projection
§11.1-§11.4).

A unit folds every committed event into a plain-JSON state: ``state = apply(state, event)`` from
``init()``. Because the state is a pure fold of a log prefix, anything derived from it can be thrown
away and recomputed. A *cell* is a unit's state for one session together with its *cursor*, the
seq of the last event folded in (-1 before any). A *cache row* ``{ver, seq, val}`` is a cell written
down: it may be stale (its cursor lags the log) but never wrong, because a reader resumes from the
cursor, and a row whose ``stateVersion`` differs or whose cursor lies past the log is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from spec.codes import Code, reject
from spec.format.json_text import encode_json_text
from spec.log.events import TURN_END, Event
from spec.log.json import FrozenDict, JsonValue, is_deep_equal_json, is_safe_integer, js_text, snapshot_json

NO_CURSOR: Final = -1  # the cursor of a cell that has folded no event
CACHE_FORMAT: Final = "dsh-projection-cache"  # the ``format`` field of a cache record
CACHE_VERSION: Final = 1  # bump to discard every cache record written before


@dataclass(frozen=True)
class ProjectionUnit:
    """A fold unit (D7): ``key`` names it, ``state_version`` changes whenever its state shape or
    fold meaning changes, ``state_schema`` accepts exactly its valid states, ``init`` gives the
    state of the empty log, ``apply(state, event)`` is pure and returns the very same object for an
    event it does not care about, and ``wire`` units are served to clients by ``snapshot`` while
    host-only ones (the default) are read with ``state_of``."""

    key: str
    state_version: int
    state_schema: Callable[[JsonValue], bool]
    init: Callable[[], JsonValue]
    apply: Callable[[JsonValue, Event], JsonValue]
    wire: bool = False


@dataclass(frozen=True)
class ProjectionCell:
    """A unit's state for one session, and the seq of the last event folded into it."""

    state: JsonValue
    cursor: int


# --- the unit contract (D7; notes §11.1-§11.2) ----------------------------------------------------


def validate_projection_unit(unit: ProjectionUnit) -> None:
    """A unit has a non-empty string key, a non-negative safe-integer ``stateVersion``, callable
    ``stateSchema``, ``init`` and ``apply``, and a boolean ``wire`` flag (notes §11.1)."""
    if not isinstance(unit.key, str) or unit.key == "":
        raise reject(Code.PROJECTION_UNIT_INVALID, "session projection key must be a non-empty string")
    version = unit.state_version
    if not (is_safe_integer(version) and version >= 0):
        raise reject(
            Code.PROJECTION_UNIT_INVALID,
            f"session projection {encode_json_text(unit.key)} stateVersion must be a non-negative integer, "
            f"got {js_text(version)}",
        )
    for name in ("state_schema", "init", "apply"):
        if not callable(getattr(unit, name)):
            raise reject(
                Code.PROJECTION_UNIT_INVALID,
                f"session projection {encode_json_text(unit.key)} {name} must be callable",
            )
    if not isinstance(unit.wire, bool):
        raise reject(
            Code.PROJECTION_UNIT_INVALID,
            f"session projection {encode_json_text(unit.key)} wire must be a boolean",
        )


def plan_registration(registered: ProjectionUnit | None, unit: ProjectionUnit) -> ProjectionUnit:
    """The unit a key serves after ``unit`` registers: itself for a free key; the unit already
    registered when the ``stateVersion`` is the same (registrants share one definition and its
    state, the first one wins); a different ``stateVersion`` is refused, because two fold meanings
    cannot share one cache (D7; notes §11.2)."""
    validate_projection_unit(unit)
    if registered is None:
        return unit
    if registered.state_version != unit.state_version:
        raise reject(
            Code.PROJECTION_VERSION_CONFLICT,
            f"session projection key {encode_json_text(unit.key)} is already registered at stateVersion "
            f"{registered.state_version}; refusing to share it with stateVersion {unit.state_version}",
        )
    return registered


# --- folding (D7; notes §11.2, §13 item 9) --------------------------------------------------------


def derive_initial_cell(unit: ProjectionUnit) -> ProjectionCell:
    """Before any event a unit holds ``init()`` and its cursor is -1."""
    return ProjectionCell(state=unit.init(), cursor=NO_CURSOR)


def apply_projection_event(unit: ProjectionUnit, cell: ProjectionCell, event: Event) -> ProjectionCell:
    """Fold one event into a cell. An event at or below the cursor was folded already and changes
    nothing, so no event is ever counted twice (the guard DSH's eager drive lacks, notes §13
    item 9); otherwise the cursor moves to the event's seq and the state is ``apply(state, event)``,
    which must keep the identity rule (:func:`validate_projection_step`)."""
    seq = event.get("seq")
    if not is_safe_integer(seq) or seq <= cell.cursor:
        return cell
    state = unit.apply(cell.state, event)
    validate_projection_step(unit, cell.state, state, event)
    return ProjectionCell(state=state, cursor=int(seq))


def is_same_state(before: JsonValue, after: JsonValue) -> bool:
    """Did ``apply`` hand back the state it was given? The very same object for an object or an
    array; for a scalar, the same type and value (JavaScript's ``Object.is``, the same-reference
    test DSH's change feed applies: notes §11.1)."""
    if before is after:
        return True
    if isinstance(before, (dict, list)) or isinstance(after, (dict, list)):
        return False
    return type(before) is type(after) and before == after


def validate_projection_step(unit: ProjectionUnit, before: JsonValue, after: JsonValue, event: Event) -> None:
    """A unit returns the very same state object for an event it does not care about (seed 002:
    "不关心的事件必须返回同一个引用，下游才不会白算"; notes §11.1 same-reference rule). Which events a
    unit cares about is its own business, but an event that changes nothing is one it does not
    care about, so a *new* object equal to the old one breaks the rule: downstream, which tells a
    change by identity, would recompute for nothing."""
    if not is_same_state(before, after) and is_deep_equal_json(before, after):
        raise reject(
            Code.PROJECTION_IDENTITY_BROKEN,
            f"session projection {encode_json_text(unit.key)} returned a new state equal to the old one "
            f"for the {encode_json_text(event.get('type'))} event at seq {js_text(event.get('seq'))}; return "
            "the state it was given (the same object) for an event it does not care about",
        )


def derive_projection_changes(
    unit: ProjectionUnit, events: Sequence[Event]
) -> tuple[JsonValue, tuple[bool, ...]]:
    """A replay from ``init`` that says, event by event, whether the state changed — by identity
    (:func:`is_same_state`), as a change feed tells it — and the state at the end. The suite's check
    of the identity rule for a subject's units: an event a unit does not care about must read as
    unchanged."""
    cell = derive_initial_cell(unit)
    changed: list[bool] = []
    for event in events:
        after = apply_projection_event(unit, cell, event)
        changed.append(not is_same_state(cell.state, after.state))
        cell = after
    return cell.state, tuple(changed)


def fold_projection(unit: ProjectionUnit, cell: ProjectionCell, events: Sequence[Event]) -> ProjectionCell:
    """Catch a cell up: fold every event past its cursor, in log order. ``fold_projection(unit,
    derive_initial_cell(unit), log)`` is the unit's state after a full replay (D7 ``state_of``)."""
    for event in events:
        cell = apply_projection_event(unit, cell, event)
    return cell


def derive_projection_state(unit: ProjectionUnit, state: JsonValue) -> JsonValue:
    """What a reader receives: a frozen copy of the state, which must be plain JSON and pass the
    unit's ``stateSchema`` — a unit that breaks its own schema fails loudly (notes §11.1)."""
    frozen = snapshot_json(state)
    if not _is_json(frozen) or not unit.state_schema(frozen):  # type: ignore[arg-type]
        raise reject(
            Code.PROJECTION_STATE_INVALID,
            f"session projection {encode_json_text(unit.key)} produced a state that is not plain JSON or fails its stateSchema",
        )
    return frozen  # type: ignore[return-value]


def _is_json(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str, list, dict))


def derive_wire_keys(units: Sequence[ProjectionUnit]) -> tuple[str, ...]:
    """The units ``snapshot`` serves, in registration order: the wire units only. A host-only unit
    is read with ``state_of`` and never sent to a client (D7; seed 002: "snapshot() 只返回 wire
    单元"; DSH HEAD serves every unit, notes §0)."""
    return tuple(unit.key for unit in units if unit.wire)


# --- cache rows (D7; notes §11.3-§11.4) -----------------------------------------------------------


def encode_cache_row(unit: ProjectionUnit, cell: ProjectionCell) -> FrozenDict:
    """A cell written down: ``{ver: stateVersion, seq: cursor, val: state}``. The state must be
    lossless JSON (notes §11.4 ``write`` step 4)."""
    frozen = snapshot_json({"ver": unit.state_version, "seq": cell.cursor, "val": cell.state})
    if not isinstance(frozen, FrozenDict):
        raise reject(
            Code.PROJECTION_STATE_INVALID,
            "projection checkpoint is not losslessly JSON-serializable (a unit state violates the plain-JSON contract)",
        )
    return frozen


def decode_cache_row(unit: ProjectionUnit, row: JsonValue, last_seq: int) -> ProjectionCell | None:
    """A cache row a reader may resume from, or ``None`` to refold from ``init``: the row is an
    object whose ``ver`` equals the unit's ``stateVersion``, whose cursor ``seq`` is at least -1 and
    not past ``last_seq`` (the seq of the log's last event; a log that shrank below the cursor
    would otherwise be read wrong), and whose ``val`` passes the unit's ``stateSchema``
    (D7; notes §11.3 ``restore``)."""
    if not isinstance(row, dict) or "val" not in row:
        return None
    version, cursor = row.get("ver"), row.get("seq")
    if not (is_safe_integer(version) and version == unit.state_version):
        return None
    if not (is_safe_integer(cursor) and NO_CURSOR <= cursor <= last_seq):
        return None
    if not unit.state_schema(row["val"]):
        return None
    return ProjectionCell(state=row["val"], cursor=int(cursor))


def is_cache_row_durable(cursor: int, durable_events: int) -> bool:
    """A row may be written only when every event it folded is already durable: its cursor lies
    below the number of events on stable storage. The log leads and the cache follows, so after a
    crash no row claims an event the log lost (notes §11.4 ``write`` step 3)."""
    return cursor < durable_events


def is_cache_write_due(new_event_types: Sequence[object], write_every_events: int) -> bool:
    """When a session's rows are written, given the events appended since the last write: always
    after a ``turn/end`` (the mandatory point), or once ``write_every_events`` events have
    accumulated (the count throttle) (notes §11.4 write triggers)."""
    return TURN_END in new_event_types or len(new_event_types) >= write_every_events


# --- the cache record (notes §11.4) ---------------------------------------------------------------


def derive_cache_identity(header: Mapping[str, JsonValue]) -> FrozenDict:
    """Which log lifecycle a record belongs to: the session header's ``createdAt`` and ``cwd`` (when
    it has one). A session recreated under the same id, or moved, does not match (notes §11.4)."""
    identity: dict[str, JsonValue] = {"createdAt": header.get("createdAt")}
    if "cwd" in header:
        identity["cwd"] = header["cwd"]
    frozen = snapshot_json(identity)
    assert isinstance(frozen, FrozenDict)
    return frozen


def encode_cache_record(header: Mapping[str, JsonValue], rows: Mapping[str, JsonValue]) -> FrozenDict:
    """The cache file of one session: ``{format, version, identity, rows: {key: row}}``."""
    frozen = snapshot_json(
        {
            "format": CACHE_FORMAT,
            "version": CACHE_VERSION,
            "identity": derive_cache_identity(header),
            "rows": dict(rows),
        }
    )
    if not isinstance(frozen, FrozenDict):
        raise reject(
            Code.PROJECTION_STATE_INVALID,
            "projection checkpoint is not losslessly JSON-serializable (a unit state violates the plain-JSON contract)",
        )
    return frozen


def decode_cache_rows(record: JsonValue, header: Mapping[str, JsonValue]) -> Mapping[str, JsonValue]:
    """The rows a reader may consider for this session: those of a record of this format and
    version whose identity matches the session header; anything else — another version, another
    lifecycle, a malformed record — gives no rows, and the units refold from the log (a cache is
    never trusted over the log; notes §11.4). Identities compare as JSON: ``true`` is not ``1``."""
    if not isinstance(record, dict):
        return {}
    if (
        record.get("format") != CACHE_FORMAT
        or record.get("version") != CACHE_VERSION
        or isinstance(record.get("version"), bool)
    ):
        return {}
    if not is_deep_equal_json(record.get("identity"), derive_cache_identity(header)):
        return {}
    rows = record.get("rows")
    return rows if isinstance(rows, dict) else {}
