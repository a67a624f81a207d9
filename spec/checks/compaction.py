"""The checker's relational rules for compaction: brackets, their owners and checkpoints, and the
shadow price that meters every surface replace (notes/dsh-compaction-projection §4.2, §4.4, §4.6,
§7; SPEC-DECISIONS D9). The rule ids are in :data:`spec.checks.log.RULES`;
:func:`spec.checks.log.check_log` runs this family with the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Final

from spec.checks.violation import Violation, field_text, is_strict_equal, violation_seq
from spec.lineage.repair import field_of
from spec.log.events import (
    ASSISTANT_MESSAGE,
    COMPACTION_END,
    COMPACTION_PRUNE,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    event_data,
    is_named,
)
from spec.log.json import JsonObject, JsonValue, is_event_seq
from spec.log.session import ABSENT

METERED_REPLACEMENT_TYPE: Final[Mapping[str, str]] = MappingProxyType(
    {COMPACTION_SUMMARY: USER_MESSAGE, COMPACTION_PRUNE: TOOL_RESULT}
)


# --- compaction brackets (notes/dsh-compaction-projection §4.4, §4.6) ------------------------------


@dataclass(frozen=True)
class _Bracket:
    """The open compaction: its compaction/start's data, where that start sits, and whether its
    summary has been written."""

    data: JsonObject
    start_position: int
    summarized: bool = False


def check_compaction(events: Sequence[Event], legacy: bool = False) -> Iterator[Violation]:
    """Follow the open turn and the open compaction bracket; each compaction event must fit them,
    and turn boundaries must not cross an open bracket. A ``session/end-seed`` makes an open bracket
    a stale orphan: it is forgotten, and the turn boundaries before that end-seed may cross it (a
    parent's repair closers) (notes/dsh-compaction-projection §4.4, §4.6). But no rule of this
    specification leaves one: a resume closes an open bracket before its end-seed, a fork or a seed
    refuses to end inside one, and only the store writes an end-seed. So a start an end-seed
    orphans is reported as dangling (the seed: "日志里不会出现悬挂的 start") — as
    ``legacy-compaction-dangling`` in a DSH v0 log (``legacy``), whose resume never closed
    brackets, and as ``compaction-dangling`` in any other."""
    dangling_rule = "legacy-compaction-dangling" if legacy else "compaction-dangling"
    inherited = _inherited_orphan_starts(events)
    open_turn: JsonValue = None
    bracket: _Bracket | None = None
    for position, event in enumerate(events):
        kind = event.get("type")
        data = event_data(event)
        at = violation_seq(event, position)
        if kind in (TURN_START, TURN_END):
            if bracket is not None and bracket.start_position not in inherited:
                yield Violation(
                    "compaction-turn", at, f"{kind} cannot cross an open {_owner_text(bracket.data)}"
                )
            open_turn = data.get("turn") if kind == TURN_START else None
        elif kind == END_SEED:
            if bracket is not None:
                yield _dangling(dangling_rule, bracket, events, at)
            bracket = None
        elif kind == COMPACTION_START:
            yield from _compaction_ids(at, kind, data)
            if bracket is not None:
                yield Violation(
                    "compaction-bracket",
                    at,
                    f"compaction/start while {_holder_text(bracket.data)} is still compacting",
                )
            yield from _owner_check(at, kind, data.get("turn"), open_turn)
            bracket = _Bracket(data=data, start_position=position)
        elif kind == COMPACTION_SUMMARY:
            yield from _compaction_ids(at, kind, data)
            yield from _matches_open_bracket(at, kind, data, bracket)
            if bracket is not None:
                yield from _owner_check(at, kind, bracket.data.get("turn"), open_turn)
                if bracket.summarized:
                    yield Violation(
                        "compaction-bracket", at, "compaction/summary repeated within one compaction"
                    )
                bracket = replace(bracket, summarized=True)
            yield from _summary_shape(at, data)
        elif kind == COMPACTION_END:
            yield from _compaction_ids(at, kind, data)
            yield from _matches_open_bracket(at, kind, data, bracket)
            if bracket is not None:
                yield from _compaction_end_owner(at, data, bracket, open_turn)
                if "error" not in data and not bracket.summarized:
                    yield Violation(
                        "compaction-bracket", at, "successful compaction/end requires one compaction/summary"
                    )
            bracket = None
        elif (
            kind == USER_MESSAGE and isinstance(event.get("surfaceOp"), dict) and is_compact_checkpoint(data)
        ):
            yield from _checkpoint_check(at, data, bracket)


def _dangling(rule: str, bracket: _Bracket, events: Sequence[Event], end_seed_at: int) -> Violation:
    start_at = violation_seq(events[bracket.start_position], bracket.start_position)
    return Violation(
        rule,
        start_at,
        f"compaction/start {field_text(field_of(bracket.data, 'compactionId'))} is still open at the "
        f"session/end-seed at seq {end_seed_at}, which leaves it dangling: never closed",
    )


def is_compact_checkpoint(message: JsonObject) -> bool:
    """A compaction checkpoint message has source ``{kind: "plugin", plugin: "compact"}``; only those
    two fields are looked at (notes/dsh-compaction-projection §4.3)."""
    source = message.get("source")
    return isinstance(source, dict) and source.get("kind") == "plugin" and source.get("plugin") == "compact"


def _inherited_orphan_starts(events: Sequence[Event]) -> frozenset[int]:
    """Positions of compaction/starts still open when a later session/end-seed arrives."""
    orphans: set[int] = set()
    open_start: int | None = None
    for position, event in enumerate(events):
        kind = event.get("type")
        if kind == COMPACTION_START:
            open_start = position
        elif kind == COMPACTION_END:
            open_start = None
        elif kind == END_SEED and open_start is not None:
            orphans.add(open_start)
            open_start = None
    return frozenset(orphans)


def _compaction_ids(at: int, kind: object, data: JsonObject) -> Iterator[Violation]:
    for problem in _id_problems(kind, data):
        yield Violation("compaction-bracket", at, problem)


def _matches_open_bracket(
    at: int, kind: object, data: JsonObject, bracket: _Bracket | None
) -> Iterator[Violation]:
    for problem in _bracket_problems(kind, data, bracket):
        yield Violation("compaction-bracket", at, problem)


def _id_problems(what: object, data: JsonObject) -> Iterator[str]:
    """``compactionId`` is a non-empty string, and so is ``sourceCommandId`` where present."""
    compaction_id = data.get("compactionId")
    if not isinstance(compaction_id, str) or compaction_id == "":
        yield f"{what} compactionId must be a non-empty string"
    if "sourceCommandId" in data and (
        not isinstance(data["sourceCommandId"], str) or data["sourceCommandId"] == ""
    ):
        yield f"{what} sourceCommandId must be a non-empty string"


def _bracket_problems(what: object, data: JsonObject, bracket: _Bracket | None) -> Iterator[str]:
    """A compaction is open, and ``data`` names its ``compactionId`` and ``sourceCommandId``."""
    if bracket is None:
        yield f"{what} has no matching compaction/start"
        return
    for key, label in (("compactionId", "id"), ("sourceCommandId", "sourceCommandId")):
        mine, theirs = field_of(data, key), field_of(bracket.data, key)
        if not is_strict_equal(mine, theirs):
            yield f"{what} {label} {field_text(mine)} does not match compaction/start {label} {field_text(theirs)}"


def _owner_check(at: int, kind: object, owner: JsonValue, open_turn: JsonValue) -> Iterator[Violation]:
    if owner is None and open_turn is not None:
        yield Violation(
            "compaction-turn", at, f"{kind} is standalone but turn {field_text(open_turn)} is open"
        )
    elif owner is not None and open_turn is None:
        yield Violation(
            "compaction-turn", at, f"{kind} for turn {field_text(owner)} appended outside any open turn"
        )
    elif owner is not None and not is_strict_equal(owner, open_turn):
        yield Violation(
            "compaction-turn",
            at,
            f"{kind} names turn {field_text(owner)} but open turn is {field_text(open_turn)}",
        )


def _compaction_end_owner(
    at: int, data: JsonObject, bracket: _Bracket, open_turn: JsonValue
) -> Iterator[Violation]:
    owner, started = field_of(data, "turn"), field_of(bracket.data, "turn")
    if not is_strict_equal(owner, started):
        yield Violation(
            "compaction-turn",
            at,
            f"compaction/end owner {field_text(owner)} does not match compaction/start owner {field_text(started)}",
        )
    yield from _owner_check(at, COMPACTION_END, bracket.data.get("turn"), open_turn)


def _summary_shape(at: int, data: JsonObject) -> Iterator[Violation]:
    seqs, shadowed_range = data.get("shadowedSeqs"), data.get("shadowedRange")
    if not isinstance(seqs, list) or not seqs:
        yield Violation("compaction-summary", at, "compaction/summary shadowedSeqs must be non-empty")
    elif not (
        isinstance(shadowed_range, dict)
        and is_strict_equal(field_of(shadowed_range, "start"), seqs[0])
        and is_strict_equal(field_of(shadowed_range, "end"), seqs[-1])
    ):
        yield Violation(
            "compaction-summary",
            at,
            "compaction/summary shadowedRange must match the first and last shadowedSeqs",
        )
    tokens = data.get("shadowedTokenCount")
    if not is_event_seq(tokens):
        yield Violation(
            "compaction-summary",
            at,
            "compaction/summary shadowedTokenCount must be a non-negative safe integer",
        )


def _checkpoint_check(at: int, message: JsonObject, bracket: _Bracket | None) -> Iterator[Violation]:
    source = message.get("source")
    assert isinstance(source, dict)
    what = "compaction checkpoint"
    for problem in (*_id_problems(what, source), *_bracket_problems(what, source, bracket)):
        yield Violation("compaction-checkpoint", at, problem)


def _owner_text(start: JsonObject) -> str:
    turn = start.get("turn")
    return "standalone compaction" if turn is None else f"compaction for turn {field_text(turn)}"


def _holder_text(start: JsonObject) -> str:
    turn = start.get("turn")
    return "standalone compaction" if turn is None else f"turn {field_text(turn)}"


# --- shadow prices (notes/dsh-compaction-projection §7) --------------------------------------------


def check_shadow_price(events: Sequence[Event]) -> Iterator[Violation]:
    """A surface replace is immediately preceded by its metering event: a compaction/summary for a
    user/message, a compaction/prune for a tool/result, naming the replace's range
    (notes/dsh-compaction-projection §7). A metering event whose replace never came (the commit
    failed, or a crash cut the log) prices nothing and breaks nothing."""
    for position, event in enumerate(events):
        op = event.get("surfaceOp")
        if isinstance(op, dict) and event.get("type") in (USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT):
            previous = events[position - 1] if position > 0 else None
            yield from _metered(violation_seq(event, position), event, op, previous)


def _metered(at: int, event: Event, op: JsonObject, previous: Event | None) -> Iterator[Violation]:
    start, end = field_of(op, "start"), field_of(op, "end")
    span = f"{field_text(start)}-{field_text(end)}"
    meter = previous.get("type") if previous is not None else None
    if previous is None or not is_named(meter, METERED_REPLACEMENT_TYPE):
        yield Violation(
            "shadow-price", at, f"replace at seq {at} over range {span} has no adjacent shadow price"
        )
        return
    shadowed_range = event_data(previous).get("shadowedRange")
    claimed = (
        (field_of(shadowed_range, "start"), field_of(shadowed_range, "end"))
        if isinstance(shadowed_range, dict)
        else (ABSENT, ABSENT)
    )
    if not (is_strict_equal(claimed[0], start) and is_strict_equal(claimed[1], end)):
        yield Violation(
            "shadow-price",
            at,
            f"replace at seq {at} over range {span} has no adjacent shadow price "
            f"(armed claim covers {field_text(claimed[0])}-{field_text(claimed[1])})",
        )
    elif event.get("type") != METERED_REPLACEMENT_TYPE[str(meter)]:
        metered = METERED_REPLACEMENT_TYPE[str(meter)]
        yield Violation(
            "shadow-price",
            at,
            f"{event.get('type')} replace at seq {at} follows a {meter}, which meters a {metered}",
        )
