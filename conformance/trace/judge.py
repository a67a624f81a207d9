"""Judging one crash state: what a fresh subject (and the spec's own reader) found in it, item by
item of SPEC-DECISIONS D3 (:mod:`conformance.d3`), against what the subject had acknowledged
before the crash point (conformance/CRASH-STATES.md, "Checking a state").

Every problem is a sentence that starts with its item (``D3.3: ...``, or ``reader:`` and
``replay:`` for the two checks that are not D3 items) and ends with whose fault the spec's reader
says it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from conformance.crash_rules import (  # canonical_text: D5's numbers, as the crash checks compare
    canonical_text,
    check_d3_1_header,
    check_d3_2_prefix,
    check_d3_3_flushed_kept,
    check_d3_5_no_false_corruption,
    check_d3_6_closers,
    header_of,
)
from conformance.driver import describe_request, find_mismatch
from conformance.engine_model import model_request
from conformance.model import DurableLog, ModelStore
from conformance.subject import Response
from conformance.targets import DEFAULT_TARGET, Target
from conformance.trace.run import CheckAnswers
from conformance.trace.specread import SpecView, read_with_spec
from spec.lineage.store import derive_resumed_log
from spec.log.events import Event
from spec.log.json import FrozenDict, JsonValue, freeze_parsed_json
from spec.protocol import Request

REPLAY: Final = "replay"
READER: Final = "reader"


@dataclass(frozen=True)
class Expectation:
    """What a crash after some acknowledged requests must keep: the model once they completed
    (``before``), and as if the next, in flight, had completed too (``in_flight``)."""

    acked: int
    before: ModelStore
    in_flight: ModelStore


def replay_models(
    start: ModelStore,
    requests: Sequence[Request],
    answers: Sequence[Response],
    target: Target = DEFAULT_TARGET,
) -> tuple[list[ModelStore], str | None]:
    """The spec model after each request (``models[i]``: after the first ``i``), and the first
    answer that differs from it (as the subject's declared target writes headers)."""
    models = [start]
    for (op, args), answer in zip(requests, answers):
        model, expected = model_request(models[-1], op, **args)
        problem = find_mismatch(expected, answer, op, target)
        if problem is not None:
            return models, f"{describe_request(op, dict(args))}\n  {problem}"
        models.append(model)
    return models, None


def expectation_at(models: Sequence[ModelStore], acks: Sequence[int], point: int) -> Expectation:
    acked = sum(1 for ack in acks if ack <= point)
    before = models[min(acked, len(models) - 1)]
    in_flight = models[min(acked + 1, len(models) - 1)]
    return Expectation(acked, before, in_flight)


def appended_events(model: ModelStore, session_id: str) -> tuple[Event, ...]:
    entry = model.live.get(session_id)
    if entry is not None:
        return entry.state.events
    log = model.stored.get(session_id)
    return log.events if log is not None else ()


def session_ids(models: Iterable[ModelStore]) -> list[str]:
    found: set[str] = set()
    for model in models:
        found |= set(model.live) | set(model.stored)
    return sorted(found)


# --- judging one crash state -------------------------------------------------------------------


def judge_read(
    found: bool,
    header: JsonValue,
    events: Sequence[JsonValue],
    expectation: Expectation,
    session_id: str,
    target: Target = DEFAULT_TARGET,
) -> tuple[str, ...]:
    """D3 items 1-3 for what a reader found of one session."""
    expected_header = header_of(expectation.in_flight, session_id)
    flushed_log = expectation.before.stored.get(session_id)
    problems = check_d3_1_header(found, header, expected_header, flushed_log is not None, target)
    if found:
        appended = appended_events(expectation.in_flight, session_id)
        flushed = len(flushed_log.events) if flushed_log is not None else 0
        problems += check_d3_2_prefix(events, appended) + check_d3_3_flushed_kept(events, flushed)
    return problems


def judge_state(
    answers: CheckAnswers,
    spec_views: Mapping[str, SpecView],
    expectation: Expectation,
    now: int,
    layout_known: bool,
    target: Target = DEFAULT_TARGET,
) -> tuple[str, ...]:
    """Every D3 problem of one crash state for one expectation; each names its item (``D3.n:``),
    and says what the spec's reader found in the same files (headers as ``target`` writes them)."""
    problems: list[str] = []
    if answers.problem is not None:
        problems.append(f"{REPLAY}: the subject broke the protocol on this state: {answers.problem}")
    for session_id in session_ids((expectation.before, expectation.in_flight)):
        read = answers.reads.get(session_id)
        if read is None:
            continue
        view = spec_views.get(session_id, SpecView(None))
        found_problems = _judge_session(
            answers, read, session_id, expectation, now, view, layout_known, target
        )
        problems += [f"{session_id}: {problem}" for problem in found_problems]
    return tuple(problems)


def _judge_session(
    answers: CheckAnswers,
    read: Response,
    session_id: str,
    expectation: Expectation,
    now: int,
    view: SpecView,
    layout_known: bool,
    target: Target = DEFAULT_TARGET,
) -> list[str]:
    if not read.ok and read.error_code != "SESSION_NOT_FOUND":
        found_problems = list(check_d3_5_no_false_corruption(read.error_code)) or [
            f"D3.1: read after the crash answered {read.error_code}"
        ]
        return [
            problem + _attribution(view, expectation, session_id, layout_known) for problem in found_problems
        ]
    events = events_of(read)
    header = read.result.get("header") if read.ok and isinstance(read.result, dict) else None
    problems = [
        p + _attribution(view, expectation, session_id, layout_known)
        for p in judge_read(read.ok, header, events, expectation, session_id, target)
    ]
    if layout_known and (view.found or view.code) and not problems:
        problems += _compare_with_spec(read.ok, events, view)
    if not read.ok or problems:
        return problems
    survived = appended_events(expectation.in_flight, session_id)[: len(events)]
    resumed = answers.resumes.get(session_id)
    if resumed is None:
        return problems
    if not resumed.ok:
        return [
            *(
                check_d3_5_no_false_corruption(resumed.error_code)
                or (f"D3.6: resume after the crash answered {resumed.error_code}",)
            )
        ]
    shown = events_of(resumed)
    problems += check_d3_6_closers(shown, survived, now)
    resumed_header = resumed.result.get("header") if isinstance(resumed.result, dict) else None
    expected_header = header_of(expectation.in_flight, session_id)
    problems += check_d3_1_header(True, resumed_header, expected_header, True, target)
    reread = answers.rereads.get(session_id)
    durable = [canonical_text(event) for event in derive_resumed_log(survived)]
    if reread is not None and not problems:
        problems += _judge_repaired(
            "a read after the resume", reread.error_code, events_of(reread), durable, shown
        )
    if layout_known and answers.after is not None and not problems:
        header_now = header_of(expectation.in_flight, session_id)
        after = read_with_spec(answers.after, header_now or {})
        if after.torn:
            problems.append(
                "D3.4: after the resume the file still ends in a torn tail (the spec's reader finds it)"
            )
        else:
            problems += _judge_repaired(
                "the spec's reader, after the resume,", after.code, list(after.events), durable, shown
            )
    return problems


def events_of(answer: Response) -> list[JsonValue]:
    """The ``events`` of a ``read`` or ``resume`` answer (empty when there are none)."""
    events = answer.result.get("events") if answer.ok and isinstance(answer.result, dict) else None
    return list(events) if isinstance(events, list) else []


def durable_log_of(answer: Response) -> DurableLog | None:
    """A ``read`` answer as the model's stored log (``None`` unless it is a header and events)."""
    result = answer.result if answer.ok and isinstance(answer.result, dict) else None
    header = freeze_parsed_json(result.get("header")) if result is not None else None
    events = [freeze_parsed_json(event) for event in events_of(answer)]
    if not isinstance(header, FrozenDict) or not all(isinstance(event, FrozenDict) for event in events):
        return None
    return DurableLog(header, tuple(event for event in events if isinstance(event, FrozenDict)))


def _judge_repaired(
    who: str,
    code: str | None,
    seen: Sequence[JsonValue],
    durable: Sequence[str],
    resumed: Sequence[JsonValue],
) -> list[str]:
    """D3.4: once a resume has answered, its repair is on storage: the log starts with the
    surviving events and their closers, and holds nothing the resume did not show."""
    if code is not None:
        return [f"D3.4: {who} answered {code}"]
    texts = [canonical_text(event) for event in seen]
    if texts[: len(durable)] != list(durable):
        return [f"D3.4: {who} shows {len(texts)} events, not the {len(durable)} of the repaired log"]
    if texts != [canonical_text(event) for event in resumed[: len(texts)]]:
        return [f"D3.4: {who} shows events the resume did not hand back"]
    return []


def _compare_with_spec(found: bool, events: Sequence[JsonValue], view: SpecView) -> list[str]:
    if found != view.found:
        what = f"{view.code}: {view.message}" if view.code else "no log"
        return [
            f"{READER}: the subject {'found' if found else 'did not find'} the session; the spec's reader found {what}"
        ]
    if found and [canonical_text(event) for event in events] != [
        canonical_text(event) for event in view.events
    ]:
        return [
            f"{READER}: the subject reads {len(events)} events; the spec's reader reads {len(view.events)} from the same files"
        ]
    return []


def _attribution(view: SpecView, expectation: Expectation, session_id: str, layout_known: bool) -> str:
    """Whose fault: the files (the spec's reader breaks D3 too) or the subject's reader."""
    if not layout_known:
        return " (the spec's reader cannot tell: the subject's files are not in D1's layout)"
    if view.code is not None:
        return f" (the spec's reader agrees, the files themselves are bad: {view.code}: {view.message})"
    spec_problems = judge_read(view.found, view.header, list(view.events), expectation, session_id)
    if spec_problems:
        return f" (the spec's reader agrees, the files themselves lose it: {spec_problems[0]})"
    return " (the spec's reader finds a valid crash state in these files: the subject misreads its own files)"


__all__ = [
    "READER",
    "REPLAY",
    "Expectation",
    "appended_events",
    "durable_log_of",
    "events_of",
    "expectation_at",
    "header_of",
    "judge_read",
    "judge_state",
    "replay_models",
    "session_ids",
]
