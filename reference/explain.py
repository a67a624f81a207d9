"""``dsh-session explain``: what each event of a log contributes to the surface the model sees,
with the log's structure around it — the seed it inherited, its turns and compactions, and every
checker violation at the event it names.

:func:`explain_log` builds an :class:`Explanation` from a log file; :func:`render_explain_text`
prints it, and :mod:`reference.explain_html` draws it as a page. Every judgement is the spec's:
the surface is folded by :func:`spec.log.surface.plan_surface_event` (an event the spec refuses
is marked and leaves the surface unchanged, as the checker's own replay does) and the violations
are :func:`spec.checks.log.check_log`'s. Turns, steps and compaction brackets are only read off
the log to draw them; whether they nest correctly is the checker's to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from reference.logfile import LogFile
from spec.checks.log import CORE_RULES, check_log
from spec.checks.violation import Violation
from spec.codes import SpecError
from spec.format.framing import LinePlace
from spec.log.events import (
    COMPACTION_END,
    COMPACTION_START,
    COMPACTION_SUMMARY,
    END_SEED,
    STEP_END,
    STEP_START,
    TURN_END,
    TURN_START,
    Event,
    Message,
    derive_event_message,
)
from spec.log.json import JsonValue, is_event_seq
from spec.log.surface import ReplacePlan, plan_surface_event, splice_plan


@dataclass(frozen=True)
class EventRow:
    """One event as the explanation shows it."""

    seq: int
    kind: str
    place: LinePlace | None
    on_surface: bool  # a node of the final surface
    log_only: bool  # never joins the surface
    replaces: tuple[int, int] | None  # the (start, end) of its replace
    shadows: tuple[int, ...]  # the nodes its replace shadowed
    shadowed_by: int | None  # the replace that took it off the surface
    refused: str | None  # why the spec refuses its surface effect ("[CODE] message")
    inherited: bool  # part of the seed (seq < seedLength)
    recovered: bool  # recovered from a torn frame
    turn: int | None  # the turn open at this event
    step: int | None  # the step open at this event
    compaction: str | None  # the compaction open at this event (its compactionId)
    message: Message | None  # what it shows the model
    violations: tuple[Violation, ...]


@dataclass(frozen=True)
class Span:
    """A turn, a step or a compaction as the log brackets it: where it starts and ends (``None``
    while it is open at the end of the log) and how it ended."""

    label: str
    start: int
    end: int | None
    outcome: str


@dataclass(frozen=True)
class Explanation:
    file: LogFile
    rows: tuple[EventRow, ...]
    surface: tuple[int, ...]
    replace_generation: int
    turns: tuple[Span, ...]
    compactions: tuple[Span, ...]
    seed_length: int | None  # header.seedLength: the events inherited from the parent
    end_seeds: tuple[int, ...]  # the seqs of session/end-seed markers
    log_violations: tuple[Violation, ...]  # violations of the log as a whole
    violations: tuple[Violation, ...] = field(default=())

    @property
    def header(self) -> JsonValue:
        return self.file.log.header

    @property
    def breaks_core_rules(self) -> bool:
        return any(violation.rule in CORE_RULES for violation in self.violations)


def explain_log(file: LogFile) -> Explanation:
    events = file.events
    nodes, generation, shadowed_by, shadows, refused = _fold(events)
    violations = check_log(events, file.log.header)
    by_seq: dict[int, list[Violation]] = {}
    for violation in violations:
        if violation.seq is not None:
            by_seq.setdefault(violation.seq, []).append(violation)
    seed_length = file.log.header.get("seedLength")
    inherited = int(seed_length) if is_event_seq(seed_length) else 0
    turns, compactions, open_at = _spans(events)
    final = set(nodes)
    rows: list[EventRow] = []
    committed = len(file.log.events)
    for index, event in enumerate(events):
        data = event.get("data")
        op = event.get("surfaceOp")
        replaces = (
            (int(start), int(end))
            if isinstance(op, dict)
            and is_event_seq(start := op.get("start"))
            and is_event_seq(end := op.get("end"))
            else None
        )
        turn, step, compaction = open_at[index]
        rows.append(
            EventRow(
                seq=index,
                kind=str(event.get("type")),
                place=file.places[index] if index < len(file.places) else None,
                on_surface=index in final,
                log_only="surfaceOp" not in event,
                replaces=replaces,
                shadows=shadows.get(index, ()),
                shadowed_by=shadowed_by.get(index),
                refused=refused.get(index),
                inherited=index < inherited,
                recovered=index >= committed,
                turn=turn,
                step=step,
                compaction=compaction,
                message=derive_event_message(event) if isinstance(data, dict) or data is None else None,
                violations=tuple(by_seq.get(index, ())),
            )
        )
    return Explanation(
        file=file,
        rows=tuple(rows),
        surface=tuple(nodes),
        replace_generation=generation,
        turns=turns,
        compactions=compactions,
        seed_length=int(seed_length) if is_event_seq(seed_length) else None,
        end_seeds=tuple(index for index, event in enumerate(events) if event.get("type") == END_SEED),
        log_violations=tuple(violation for violation in violations if violation.seq is None),
        violations=violations,
    )


def _fold(
    events: Sequence[Event],
) -> tuple[list[int], int, dict[int, int], dict[int, tuple[int, ...]], dict[int, str]]:
    """The surface folded as the checker's core replay folds it: a refused event leaves the
    surface unchanged (spec.checks.log.check_core)."""
    nodes: list[int] = []
    generation = 0
    shadowed_by: dict[int, int] = {}
    shadows: dict[int, tuple[int, ...]] = {}
    refused: dict[int, str] = {}
    for index, event in enumerate(events):
        try:
            plan = plan_surface_event(nodes, event, index, events)
        except SpecError as error:
            refused[index] = f"[{error.code}] {error.message}"
            continue
        if plan is None:
            continue
        generation = splice_plan(nodes, plan, generation)
        if isinstance(plan, ReplacePlan):
            shadows[index] = plan.shadowed
            for seq in plan.shadowed:
                shadowed_by[seq] = index
    return nodes, generation, shadowed_by, shadows, refused


def _spans(
    events: Sequence[Event],
) -> tuple[tuple[Span, ...], tuple[Span, ...], list[tuple[int | None, int | None, str | None]]]:
    """Turns and compactions as the log brackets them, and what is open at each event."""
    turns: list[Span] = []
    compactions: list[Span] = []
    open_at: list[tuple[int | None, int | None, str | None]] = []
    turn: tuple[int, int] | None = None  # (turn number, start seq)
    step: int | None = None
    compaction: tuple[str, int] | None = None  # (compactionId, start seq)
    for index, event in enumerate(events):
        kind = event.get("type")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        assert isinstance(data, dict)
        if kind == TURN_START:
            if turn is not None:
                turns.append(Span(f"turn {turn[0]}", turn[1], None, "never ended"))
            number = data.get("turn")
            turn, step = ((int(number) if isinstance(number, (int, float)) else 0), index), None
        elif kind == STEP_START:
            number = data.get("step")
            step = int(number) if isinstance(number, (int, float)) else None
        elif kind == COMPACTION_START:
            compaction = (str(data.get("compactionId")), index)
        open_at.append((turn[0] if turn else None, step, compaction[0] if compaction else None))
        if kind == TURN_END and turn is not None:
            reason = data.get("reason")
            outcome = str(reason.get("kind")) if isinstance(reason, dict) else "ended"
            turns.append(Span(f"turn {turn[0]}", turn[1], index, outcome))
            turn, step = None, None
        elif kind == STEP_END:
            step = None
        elif kind == COMPACTION_END and compaction is not None:
            outcome = "error" if "error" in data else "completed"
            compactions.append(Span(f"compaction {compaction[0]}", compaction[1], index, outcome))
            compaction = None
        elif kind == COMPACTION_SUMMARY and compaction is None:
            compactions.append(Span("compaction (no start)", index, index, "summary outside a bracket"))
    if turn is not None:
        turns.append(Span(f"turn {turn[0]}", turn[1], None, "open"))
    if compaction is not None:
        compactions.append(Span(f"compaction {compaction[0]}", compaction[1], None, "open"))
    return tuple(turns), tuple(compactions), open_at


# --- text --------------------------------------------------------------------------------------


def render_explain_text(explanation: Explanation, out: TextIO) -> None:
    file = explanation.file
    header = file.log.header
    print(
        f"{file.path}: session {header.get('id')!s}, {len(explanation.rows)} events, "
        f"format v{file.log.format_version} ({file.form})",
        file=out,
    )
    if "parentSession" in header or explanation.seed_length is not None:
        print(
            f"  forked from {header.get('parentSession')!s}: the first {explanation.seed_length} events "
            "are its seed, inherited from the parent",
            file=out,
        )
    for violation in explanation.log_violations:
        print(f"  [{violation.rule}] log: {violation.message}", file=out)
    for row in explanation.rows:
        print(f"  {row.seq:>6}  {row.kind:<28} {_place_text(row)}", file=out)
        for violation in row.violations:
            print(f"          [{violation.rule}] {violation.message}", file=out)
    print(
        f"surface: {len(explanation.surface)} nodes, replaceGeneration {explanation.replace_generation}",
        file=out,
    )
    for seq in explanation.surface:
        message = explanation.rows[seq].message
        if message is not None:
            print(f"  seq {seq}: {message.get('role')}: {preview(message.get('content'))}", file=out)


def _place_text(row: EventRow) -> str:
    if row.refused is not None:
        return f"refused {row.refused}"
    if row.log_only:
        text = "log-only"
    elif row.on_surface:
        text = "on the surface"
        if row.replaces is not None:
            text += f" (replaces {row.replaces[0]}..{row.replaces[1]})"
    elif row.shadowed_by is not None:
        text = f"shadowed by seq {row.shadowed_by}"
        if row.replaces is not None:
            text += f" (it replaced {row.replaces[0]}..{row.replaces[1]})"
    else:
        text = "off the surface"
    if row.inherited:
        text += ", seed"
    if row.recovered:
        text += ", recovered from a torn frame"
    return text


def preview(content: JsonValue, width: int = 70) -> str:
    """A message's content in one line: its text, tool calls and results named."""
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                texts.append(str(block["text"]))
            elif block.get("type") == "tool-call":
                texts.append(f"<tool-call {block.get('name')}>")
            elif block.get("type") == "tool-result":
                texts.append(f"<tool-result {preview(block.get('content'), width)}>")
            else:
                texts.append(f"<{block.get('type')}>")
    text = " ".join(texts).replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
