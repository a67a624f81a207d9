"""The spec-level model checker: ``python -m conformance.modelcheck [--max-depth N] [--seconds S]``.

Explicit-state breadth-first search over the suite's one model of a store
(:mod:`conformance.model`, :mod:`conformance.engine_model`), with no subject. From a file-storage
store holding one created session, every action of a finite alphabet (:data:`ALPHABET`) is tried
at every distinct state; each action is a short list of protocol requests with small concrete
parameters, answered by :func:`conformance.engine_model.model_request`:

- the agent loop, well nested: a turn opened with a user message, a step with a tool call (and
  its ``tool/call``), its result and step end, a text step, a turn's end;
- caller surface rewrites: a summary replacing the first two nodes, a prune rewrite of the last
  tool result;
- the compaction bracket written by the engine's writer (``engine_append``): a start, an end with
  success, an end with an error; and the engine ops ``compact`` (success and failure), ``prune``
  and ``checkpoint``;
- a fork of each session at each boundary ``0..`` :data:`FORK_BOUNDARIES` ``- 1``, flush, close,
  resume of a stored session, a crash (between any two actions: the store's crash points; the
  byte-level ones are not modelled), an armed write fault, a clock tick.

Sessions are addressed by their rank in the state's canonical order (at most :data:`MAX_SESSIONS`),
so the alphabet is symmetric under renaming, which makes the symmetry reduction sound: a state's
fingerprint is a 64-bit hash of a canonical encoding where session ids, message ids, call ids
and compaction ids (all written as ``~`` tokens of fixed width) are renamed in order of first use,
sessions visited in order of their id-free encoding, and times are replaced by their rank (the
spec compares times, it never subtracts them without a batch policy, and the alphabet sets none).

At every distinct state the spec's invariants are checked (:func:`check_invariants`); the first
violation is the shortest (breadth first), and is written as a vector of protocol steps
(``conformance/vectors/*/*.json`` shape) whose expectations are the model's answers: a subject
running a spec without the bug fails it. TLC's statistics are printed at intervals and at the end.
``--workers N`` expands the frontier with forked processes, with the one-process result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import pickle
import re
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Final, TextIO

from conformance import builders as build
from conformance.engine_model import ENGINE_CAPABILITY_OF, model_request
from conformance.exhaustive import check_state_invariants
from conformance.machine.engine import derive_loop_position
from conformance.model import ModelStore, canonical_text, model_crash, model_resume
from spec.checks.log import check_log
from spec.codes import SpecError
from spec.lineage.fork import derive_child_meta, plan_fork_seed
from spec.lineage.store import plan_create
from spec.log.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
)
from spec.log.json import JsonValue
from spec.log.session import SessionState
from spec.protocol import Request

STORAGE: Final = "file"
START_TIME: Final = 1_000  # ms
TICK: Final = 1_000  # ms
MAX_SESSIONS: Final = 2
FORK_BOUNDARIES: Final = 6
NAME: Final = re.compile(r"~[smck]\d{3}")
TIME: Final = re.compile(r'("(?:time|createdAt)":)(\d+)')
SUMMARY: Final = "Condensed: the parser was read."
OUTPUT: Final = "tests/test_parser.py:12: assert parse(text) == expected  # 3 passed"  # 66 code points
PRUNE_CONFIG: Final[JsonValue] = {"thresholdChars": 60, "headChars": 10, "tailChars": 10}  # 10 + 39 + 10
COMPACTION_END: Final = "compaction/end"
COMPACTION_START: Final = "compaction/start"


def name(kind: str, number: int) -> str:
    """A renamable name: ``~`` + its class (session, message, call, compaction) + 3 digits (fixed
    width, so that renaming never changes a text's length)."""
    return f"~{kind}{number:03d}"


# --- canonical states ------------------------------------------------------------------------------


@dataclass(frozen=True)
class View:
    """What the alphabet sees of a state beside the model: the sessions in canonical order and,
    per name class, a number no name of that class in the state uses."""

    order: tuple[str, ...]
    fresh: Mapping[str, int]

    def new(self, kind: str) -> str:
        return name(kind, self.fresh.get(kind, 0))


class _Texts:
    """Canonical texts of events and logs, cached by the identity of the (immutable, shared)
    objects, so that a state costs only the text of what changed."""

    def __init__(self) -> None:
        self.events: dict[int, tuple[object, str]] = {}
        self.logs: dict[int, tuple[object, str]] = {}

    def event(self, event: Event) -> str:
        hit = self.events.get(id(event))
        if hit is not None and hit[0] is event:
            return hit[1]
        text = canonical_text(event)
        self.events[id(event)] = (event, text)
        return text

    def log(self, events: tuple[Event, ...]) -> str:
        hit = self.logs.get(id(events))
        if hit is not None and hit[0] is events:
            return hit[1]
        text = "[" + ",".join(self.event(event) for event in events) + "]"
        self.logs[id(events)] = (events, text)
        if len(self.logs) > 400_000:
            self.logs.clear()
            self.events.clear()
        return text


TEXTS: Final = _Texts()
SESSIONS: Final[dict[tuple[int, int], tuple[object, object, str, str]]] = {}


def _session_text(model: ModelStore, session_id: str) -> tuple[str, str]:
    """A session's canonical text and its signature (the text with names blanked), cached by the
    identity of its live entry and stored log."""
    entry = model.live.get(session_id)
    log = model.stored.get(session_id)
    key = (id(entry), id(log))
    hit = SESSIONS.get(key)
    if hit is not None and hit[0] is entry and hit[1] is log:
        return hit[2], hit[3]
    live = (
        "null"
        if entry is None
        else f"[{TEXTS.event(entry.state.header)},{TEXTS.log(entry.state.events)},"
        f"{entry.state.first_live_seq},{entry.flushed},{entry.overflow_retries}]"
    )
    stored = "null" if log is None else f"[{TEXTS.event(log.header)},{TEXTS.log(log.events)}]"
    text = f'"{session_id}":[{live},{stored}]'
    signature = NAME.sub("~", text)
    if len(SESSIONS) > 400_000:
        SESSIONS.clear()
    SESSIONS[key] = (entry, log, text, signature)
    return text, signature


def canonicalize(model: ModelStore) -> tuple[int, View]:
    """The state's 64-bit fingerprint under the symmetry (session, message, call and compaction
    names renamed in order of first use, times by rank) and its :class:`View`."""
    sessions = {session_id: _session_text(model, session_id) for session_id in {*model.live, *model.stored}}
    order = tuple(sorted(sessions, key=lambda session_id: (sessions[session_id][1], session_id)))
    rest = f"{model.storage}|{model.minted}|{','.join(model.faults)}"
    if model.broken or model.engine.units or model.engine.spills:
        units = sorted((key, unit.state_version, refs) for key, (unit, refs) in model.engine.units.items())
        rest += canonical_text([dict(model.broken), units, list(model.engine.spills.items())])
    text = ";".join(sessions[session_id][0] for session_id in order) + ";" + rest
    renamed: dict[str, str] = {}
    counts: Counter[str] = Counter()
    highest: dict[str, int] = {}
    for token in dict.fromkeys(NAME.findall(text)):  # every name once, in order of first use
        kind, number = token[1], int(token[2:])
        highest[kind] = max(highest.get(kind, -1), number)
        renamed[token] = name(kind, counts[kind])
        counts[kind] += 1
    if any(old != new for old, new in renamed.items()):
        text = NAME.sub(lambda match: renamed[match.group()], text)
    times = sorted({int(value) for _, value in TIME.findall(text)} | {model.now})
    rank = {str(value): str(START_TIME + TICK * index) for index, value in enumerate(times)}
    if any(old != new for old, new in rank.items()):
        text = TIME.sub(lambda match: match.group(1) + rank[match.group(2)], text)
    text = f"{rank[str(model.now)]};{text}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    fresh = {kind: value + 1 for kind, value in highest.items()}
    return int.from_bytes(digest, "big"), View(order, fresh)


# --- the alphabet ----------------------------------------------------------------------------------

Requests = Callable[[ModelStore, View], Sequence[Request] | None]


@dataclass(frozen=True)
class Action:
    """One action of the alphabet: its name and the requests it sends at a state (``None``: not
    enabled there, nothing is sent)."""

    name: str
    requests: Requests


OnLive = Callable[[str, SessionState, View], Sequence[Request] | None]


def _on_live(rank: int, body: OnLive) -> Requests:
    """``body``'s requests for the live session of canonical rank ``rank`` (given its id, state and
    the view); not enabled when that session is not live."""

    def requests(model: ModelStore, view: View) -> Sequence[Request] | None:
        if rank >= len(view.order) or view.order[rank] not in model.live:
            return None
        session_id = view.order[rank]
        return body(session_id, model.live[session_id].state, view)

    return requests


def _append(session_id: str, kind: str, data: JsonValue, **extra: JsonValue) -> Request:
    return ("append", {"id": session_id, "type": kind, "data": data, **extra})


def _turn(session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """Open a turn with a user message (no turn open, no compaction running: a well-behaved
    caller waits for the engine's bracket to close)."""
    turn, _, turns, _ = derive_loop_position(state.events)
    if turn is not None or _open_compaction(state.events) is not None:
        return None
    message = build.user_message(view.new("m"), "read the parser")
    return [
        _append(session_id, TURN_START, build.turn_start(turns + 1)),
        _append(session_id, USER_MESSAGE, message, surfaceOp="append"),
    ]


def _step(call: bool, session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """A step of the open turn (no step open): an assistant message with a tool call and its
    ``tool/call`` (the step left open for the result), or a text answer and the step's end."""
    turn, step, _, _ = derive_loop_position(state.events)
    if turn is None or step is not None:
        return None
    number = 1
    for event in state.events:  # the steps of the open turn, numbered from 1
        number = 1 if event.get("type") == TURN_START else number + (event.get("type") == STEP_START)
    call_id = view.new("c")
    calls = (call_id,) if call else ()
    message = build.assistant_message(view.new("m"), None if call else "done", calls, turn, number)
    sent = [
        _append(session_id, STEP_START, build.step_start(turn, number)),
        _append(session_id, ASSISTANT_MESSAGE, message, surfaceOp="append"),
    ]
    if call:
        return [*sent, _append(session_id, TOOL_CALL, build.tool_call(call_id, turn, number))]
    return [*sent, _append(session_id, STEP_END, build.step_end(turn, number))]


def _result(session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """The result of the open step's pending call, and the step's end."""
    turn, step, _, pending = derive_loop_position(state.events)
    if turn is None or step is None or not pending:
        return None
    result = build.tool_result(pending[0], OUTPUT, False, turn, step)
    return [
        _append(session_id, TOOL_RESULT, result, surfaceOp="append"),
        _append(session_id, STEP_END, build.step_end(turn, step)),
    ]


def _turn_end(session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """The end of the open turn (no step open, no compaction running)."""
    turn, step, _, _ = derive_loop_position(state.events)
    if turn is None or step is not None or _open_compaction(state.events) is not None:
        return None
    return [_append(session_id, TURN_END, build.turn_end(turn))]


def _open_compaction(events: Sequence[Event]) -> str | None:
    """The compaction id of the bracket the caller's writer left open, if any."""
    open_ids: list[str] = []
    for event in events:
        data = event.get("data")
        key = data.get("compactionId") if isinstance(data, dict) else None
        if event.get("type") == COMPACTION_START and isinstance(key, str):
            open_ids.append(key)
        elif event.get("type") == COMPACTION_END and key in open_ids:
            open_ids.remove(str(key))
    return open_ids[-1] if open_ids else None


def _bracket(start: bool, session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """The compaction bracket written with the engine's writer: its start (owned by the open turn,
    or none), or the end of the open one with an error (a successful bracket needs the summary and
    its checkpoint: the ``compact`` op writes those)."""
    turn = derive_loop_position(state.events)[0]
    open_id = _open_compaction(state.events)
    if start:
        if open_id is not None:
            return None
        data = build.compaction_start(view.new("k"), turn)
        return [("engine_append", {"id": session_id, "type": COMPACTION_START, "data": data})]
    if open_id is None:
        return None
    end: dict[str, JsonValue] = {"compactionId": open_id, "turn": turn, "error": "the model is unavailable"}
    return [("engine_append", {"id": session_id, "type": COMPACTION_END, "data": end})]


def _engine(op: str, fixed: Mapping[str, JsonValue]) -> OnLive:
    """An engine op with ``fixed`` arguments; a compaction's attempt gets a fresh compaction id."""

    def requests(session_id: str, state: SessionState, view: View) -> Sequence[Request]:
        args: dict[str, JsonValue] = {"id": session_id, **fixed}
        behaviour = fixed.get("attempt")
        if isinstance(behaviour, dict):
            args["attempt"] = {"compactionId": view.new("k"), **behaviour}
        return [(op, args)]

    return requests


def _fork(boundary: int, session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """A fork at ``boundary`` into a new session (while there is room)."""
    if len(view.order) >= MAX_SESSIONS or boundary >= len(state.events):
        return None
    return [("fork", {"source": session_id, "boundary": boundary, "child": view.new("s")})]


def _session_op(rank: int, op: str, live: bool) -> Requests:
    """``flush``/``close`` of a live session; ``resume`` of a stored one that is not live."""

    def requests(model: ModelStore, view: View) -> Sequence[Request] | None:
        if rank >= len(view.order):
            return None
        session_id = view.order[rank]
        if (session_id in model.live) != live or (not live and session_id not in model.stored):
            return None
        return [(op, {"id": session_id})]

    return requests


def _global(op: str, **args: JsonValue) -> Requests:
    def requests(model: ModelStore, view: View) -> Sequence[Request] | None:
        if op == "crash" and not model.live:
            return None
        if op == "fail_next" and model.faults:
            return None
        if op == "clock":
            return [("clock", {"now": model.now + TICK})]
        return [(op, dict(args))]

    return requests


def _alphabet() -> tuple[Action, ...]:
    actions: list[Action] = []
    for rank in range(MAX_SESSIONS):
        at = f"@{rank}"
        on_live: list[tuple[str, OnLive]] = [
            ("turn", _turn),
            ("step-call", partial(_step, True)),
            ("result", _result),
            ("step-text", partial(_step, False)),
            ("turn-end", _turn_end),
            ("bracket-start", partial(_bracket, True)),
            ("bracket-fail", partial(_bracket, False)),
            ("compact", _engine("compact", {"attempt": {"text": SUMMARY}})),
            ("compact-fail", _engine("compact", {"attempt": {"fail": "unavailable"}})),
            ("prune", _engine("prune", {"config": PRUNE_CONFIG})),
        ]
        actions += [Action(label + at, _on_live(rank, body)) for label, body in on_live]
        actions += [
            Action("flush" + at, _session_op(rank, "flush", True)),
            Action("checkpoint" + at, _on_live(rank, _engine("checkpoint", {"moment": "model-request"}))),
            Action("close" + at, _session_op(rank, "close", True)),
            Action("resume" + at, _session_op(rank, "resume", False)),
        ]
        if rank < MAX_SESSIONS - 1:  # the last rank exists only when there is no room for a child
            actions += [
                Action(f"fork{at}:{boundary}", _on_live(rank, partial(_fork, boundary)))
                for boundary in range(FORK_BOUNDARIES)
            ]
    actions += [
        Action("crash", _global("crash")),
        Action("fault", _global("fail_next", fsOp="write", errno="EIO")),
        Action("tick", _global("clock")),
    ]
    return tuple(actions)


ALPHABET: Final = _alphabet()
ACTION_INDEX: Final = {action.name: index for index, action in enumerate(ALPHABET)}
INITIAL_REQUESTS: Final[tuple[Request, ...]] = (
    ("reset", {"storage": STORAGE}),
    ("clock", {"now": START_TIME}),
    ("create", {"id": name("s", 0)}),
)


@dataclass(frozen=True)
class Taken:
    """An action taken at a state: the requests with the model's answers, and the state after."""

    steps: tuple[tuple[Request, JsonValue], ...]
    model: ModelStore


def take(model: ModelStore, view: View, action: Action) -> Taken | None:
    """``action`` at ``model``: ``None`` when it is not enabled (no requests, or every request
    refused with nothing changed)."""
    requests = action.requests(model, view)
    if not requests:
        return None
    steps: list[tuple[Request, JsonValue]] = []
    before, any_ok = model, False
    for op, args in requests:
        model, expected = model_request(model, op, **args)
        any_ok = any_ok or expected.ok
        steps.append(((op, args), expected.as_json()))
    if not any_ok and model is before:
        return None
    return Taken(tuple(steps), model)


# --- the invariants --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Violation:
    """An invariant that does not hold: its name, the session, what is wrong, and the requests
    that show it from the state (with the model's answers)."""

    invariant: str
    session_id: str
    detail: str
    witness: tuple[Request, ...] = ()


class _Cache:
    """Invariant results per immutable object (a live state's events, a stored log), so a state
    costs the checks of the logs that changed."""

    def __init__(self) -> None:
        self.results: dict[tuple[str, int], tuple[object, tuple[Violation, ...]]] = {}

    def get(
        self, kind: str, key: object, compute: Callable[[], tuple[Violation, ...]]
    ) -> tuple[Violation, ...]:
        hit = self.results.get((kind, id(key)))
        if hit is not None and hit[0] is key:
            return hit[1]
        found = compute()
        if len(self.results) > 400_000:
            self.results.clear()
        self.results[(kind, id(key))] = (key, found)
        return found


CACHE: Final = _Cache()


def _problems(found: Sequence[object]) -> str:
    return "; ".join(str(problem) for problem in found[:5])


def check_live(session_id: str, state: SessionState, checked: int = 0) -> tuple[Violation, ...]:
    """A live session: every rule of the whole-log checker with its header, the surface as the
    fold of the log, closers that close everything
    (:func:`conformance.exhaustive.check_state_invariants`); and every fork boundary from
    ``checked`` on (those before it were checked on the same prefix) that the fork rules accept
    gives a seed that passes the seed rules (a create from it)."""
    found: list[Violation] = []
    problems = check_state_invariants(state, relational=True)
    if problems:
        found.append(Violation("live log", session_id, _problems(problems), (("state", {"id": session_id}),)))
    for boundary in range(checked, len(state.events)):
        try:
            seed = plan_fork_seed(session_id, state.events, boundary)
        except SpecError:
            continue
        meta = derive_child_meta(state.header, session_id, len(seed))
        try:
            plan_create(name("s", 999), (session_id,), (), list(seed), meta, START_TIME, shared=True)
        except SpecError as error:
            fork = ("fork", {"source": session_id, "boundary": boundary, "child": name("s", 999)})
            found.append(
                Violation(
                    "fork seed", session_id, f"boundary {boundary}: the seed is refused: {error}", (fork,)
                )
            )
            break
    return tuple(found)


def check_stored(model: ModelStore, session_id: str) -> tuple[Violation, ...]:
    """A stored log: the core rules; and resume ∘ crash is accepted, gives a live session that
    passes :func:`check_live`'s log checks, and keeps the durable log as its prefix."""
    log = model.stored[session_id]
    witness: tuple[Request, ...] = (("crash", {}), ("resume", {"id": session_id}))
    core = check_log(log.events, relational=False)
    if core:
        return (
            Violation("stored log", session_id, _problems([f"{v.rule}: {v.message}" for v in core]), witness),
        )
    crashed, _ = model_crash(model)
    resumed, answer = model_resume(crashed, session_id)
    if not answer.ok:
        return (
            Violation("resume after crash", session_id, f"the resume is refused: {answer.code}", witness),
        )
    entry = resumed.live[session_id]
    if entry.state.events[: len(log.events)] != log.events:
        return (Violation("resume after crash", session_id, "the durable prefix changed", witness),)
    problems = check_state_invariants(entry.state, relational=True)
    if problems:
        return (Violation("resume after crash", session_id, _problems(problems), witness),)
    return ()


def check_invariants(model: ModelStore, before: ModelStore | None = None) -> tuple[Violation, ...]:
    """Every invariant at a state, each log's checks computed once per log object; a live log that
    extends its own log in ``before`` (a state that passed) has its earlier fork boundaries
    skipped."""
    found: list[Violation] = []
    for session_id, entry in model.live.items():
        earlier = before.live.get(session_id) if before is not None else None
        events = entry.state.events
        checked = 0
        if earlier is not None and events[: len(earlier.state.events)] == earlier.state.events:
            checked = len(earlier.state.events)
        found += CACHE.get("live", entry.state, partial(check_live, session_id, entry.state, checked))
    for session_id, log in model.stored.items():
        found += CACHE.get("stored", log, partial(check_stored, model, session_id))
    return tuple(found)


# --- the search ------------------------------------------------------------------------------------


@dataclass
class Coverage:
    """Per action: at how many states it was enabled, how many states it generated that differ
    from the one it left, and how many distinct new states it found."""

    enabled: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)
    distinct: Counter[str] = field(default_factory=Counter)


@dataclass
class Search:
    """The explorer's whole state (pickled by ``--checkpoint``): the frontier (state, fingerprint,
    depth), every fingerprint seen with its parent and the action that found it, and statistics."""

    frontier: deque[tuple[ModelStore, View, int, int]]
    parents: dict[int, tuple[int, int]]
    prefix: tuple[int, ...] = ()
    coverage: Coverage = field(default_factory=Coverage)
    depth: int = 0
    seconds: float = 0.0
    violation: tuple[Violation, int] | None = None

    @property
    def generated(self) -> int:
        """States generated: every action enabled at a state expanded."""
        return sum(self.coverage.enabled.values())


def start_search(prefix: Sequence[str] = ()) -> Search:
    """A search from the initial state, or from the state the actions named in ``prefix`` reach
    (to explore a region of the graph deeper than the whole of it)."""
    indices = tuple(ACTION_INDEX[action] for action in prefix)
    model, _ = replay(indices)
    fingerprint, view = canonicalize(model)
    search = Search(deque([(model, view, fingerprint, 0)]), {fingerprint: (fingerprint, -1)}, indices)
    found = check_invariants(model)
    if found:
        search.violation = (found[0], fingerprint)
    return search


Frontier = deque[tuple[ModelStore, View, int, int]]
BATCH: Final = 1500  # frontier states per worker in one round of --workers
_ROUND: list[
    tuple[Frontier, Mapping[int, tuple[int, int]], int, float | None]
] = []  # forked workers inherit it


def explore(
    search: Search,
    max_depth: int | None = None,
    max_states: int | None = None,
    seconds: float | None = None,
    report: Callable[[Search, bool], None] | None = None,
    interval: float = 10.0,
    workers: int = 1,
) -> Search:
    """Breadth first from ``search``'s frontier until it is empty, a bound is met or an invariant
    fails (the first violation found is at the least depth). With ``workers`` > 1, the frontier
    is expanded in rounds by forked processes, each taking the states whose fingerprint falls in
    its part (:func:`_expand_round`); the result is the one-process search's, state for state."""
    began = time.perf_counter()
    spent = search.seconds
    last = began
    frontier, parents, coverage = search.frontier, search.parents, search.coverage
    while frontier and search.violation is None:
        if max_states is not None and len(parents) >= max_states:
            break
        now = time.perf_counter()
        if seconds is not None and now - began >= seconds:
            break
        if report is not None and now - last >= interval:
            search.seconds = spent + now - began
            report(search, False)
            last = now
        if max_depth is not None and frontier[0][3] >= max_depth:
            break
        if workers > 1:
            _expand_round(search, workers, max_depth, None if seconds is None else began + seconds)
            continue
        model, view, fingerprint, depth = frontier[0]
        for index in range(len(ALPHABET)):
            successor = _successor(model, view, fingerprint, index, parents, coverage)
            if successor is None:
                continue
            child, child_view, taken = successor
            _discovered(search, fingerprint, index, child, depth)
            frontier.append((taken, child_view, child, depth + 1))
            found = check_invariants(taken, model)
            if found:
                search.violation = (found[0], child)
                break
        else:
            frontier.popleft()  # only once every child is in: an interrupted expansion is redone
    search.seconds = spent + time.perf_counter() - began
    if report is not None:
        report(search, True)
    return search


def _successor(
    model: ModelStore,
    view: View,
    fingerprint: int,
    index: int,
    seen: Mapping[int, object],
    coverage: Coverage,
) -> tuple[int, View, ModelStore] | None:
    """Action ``index`` at a state, counted in ``coverage`` (enabled, changed the state): the new
    state's fingerprint, view and model, or ``None`` when it is not enabled, changes nothing or
    reaches a state in ``seen``."""
    action = ALPHABET[index]
    taken = take(model, view, action)
    if taken is None:
        return None
    coverage.enabled[action.name] += 1
    if taken.model is model:
        return None
    child, child_view = canonicalize(taken.model)
    if child == fingerprint:
        return None
    coverage.changed[action.name] += 1
    if child in seen:
        return None
    return child, child_view, taken.model


def _discovered(search: Search, parent: int, index: int, child: int, depth: int) -> None:
    search.parents[child] = (parent, index)
    search.coverage.distinct[ALPHABET[index].name] += 1
    search.depth = max(search.depth, depth + 1)


Record = tuple[int, int, int, View, Violation | None]  # position, action, fingerprint, view, violation


def _expand_part(part: int) -> tuple[list[Record], list[tuple[int, Coverage]], int]:
    """A forked worker's share of a round: the states of the round whose fingerprint is ``part``
    modulo the workers, each action tried; a new state is checked here and sent back without its
    model (the parent remakes it). Also each state's coverage, and the position of the first of
    its states it did not expand (it stops at the deadline)."""
    round_states, parents, workers, deadline = _ROUND[0]
    records: list[Record] = []
    coverages: list[tuple[int, Coverage]] = []
    for position, (model, view, fingerprint, _) in enumerate(round_states):
        if fingerprint % workers != part:
            continue
        if deadline is not None and time.perf_counter() >= deadline:
            return records, coverages, position
        coverage = Coverage()
        for index in range(len(ALPHABET)):
            successor = _successor(model, view, fingerprint, index, parents, coverage)
            if successor is not None:
                child, child_view, taken = successor
                found = check_invariants(taken, model)
                records.append((position, index, child, child_view, found[0] if found else None))
        coverages.append((position, coverage))
    return records, coverages, len(round_states)


def _expand_round(search: Search, workers: int, max_depth: int | None, deadline: float | None) -> None:
    """One round: the next states of the frontier (up to :data:`BATCH` a worker, none at
    ``max_depth``) expanded by forked workers, merged in the order one process would have found
    them, up to the first state a worker left at the deadline; each new state is remade here from
    its parent, and what the workers checked is kept as checked for the next round's workers to
    inherit."""
    frontier = search.frontier
    count = 0
    while count < min(len(frontier), BATCH * workers) and (
        max_depth is None or frontier[count][3] < max_depth
    ):
        count += 1
    round_states: Frontier = deque(frontier[position] for position in range(count))
    _ROUND[:] = [(round_states, search.parents, workers, deadline)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        parts = pool.map(_expand_part, range(workers))
    _ROUND.clear()
    done = min(part[2] for part in parts)
    for _, coverages, _ in parts:
        for position, coverage in coverages:
            if position < done:
                search.coverage.enabled.update(coverage.enabled)
                search.coverage.changed.update(coverage.changed)
    records = sorted(
        (record for records, _, _ in parts for record in records if record[0] < done),
        key=lambda record: record[:2],
    )
    for position, index, child, view, violation in records:
        if child in search.parents:
            continue
        model, parent_view, parent, depth = round_states[position]
        taken = take(model, parent_view, ALPHABET[index])
        assert taken is not None
        _discovered(search, parent, index, child, depth)
        frontier.append((taken.model, view, child, depth + 1))
        if violation is not None:
            search.violation = (violation, child)
            return
        for entry in taken.model.live.values():
            CACHE.results[("live", id(entry.state))] = (entry.state, ())
        for log in taken.model.stored.values():
            CACHE.results[("stored", id(log))] = (log, ())
        for session_id in view.order:  # the texts of its new events, for the next round to inherit
            _session_text(taken.model, session_id)
    for _ in range(done):
        frontier.popleft()


def path_to(search: Search, fingerprint: int) -> list[int]:
    """The actions (indices in :data:`ALPHABET`) from the initial state to ``fingerprint``."""
    path: list[int] = []
    while True:
        parent, index = search.parents[fingerprint]
        if index < 0:
            return [*search.prefix, *path[::-1]]
        path.append(index)
        fingerprint = parent


def replay(path: Sequence[int]) -> tuple[ModelStore, list[tuple[Request, JsonValue]]]:
    """The actions of ``path`` from the initial state: the model reached and every request sent
    from the start (the initial ones included), each with the model's answer."""
    model = ModelStore()
    steps: list[tuple[Request, JsonValue]] = []
    for op, args in INITIAL_REQUESTS:
        model, expected = model_request(model, op, **args)
        steps.append(((op, args), expected.as_json()))
    for index in path:
        _, view = canonicalize(model)
        taken = take(model, view, ALPHABET[index])
        assert taken is not None, f"{ALPHABET[index].name} is not enabled on replay"
        steps += taken.steps
        model = taken.model
    return model, steps


def write_vector(search: Search, out: Path) -> Path:
    """The violation as a vector of protocol steps: the path's requests and the witness's, each
    expecting the model's answer; written to ``out``."""
    assert search.violation is not None
    violation, fingerprint = search.violation
    path = path_to(search, fingerprint)
    model, steps = replay(path)
    for op, args in violation.witness:
        model, expected = model_request(model, op, **args)
        steps.append(((op, args), expected.as_json()))
    names = [ALPHABET[index].name for index in path]
    capabilities = {"core", "storage", "crash-seam"} | {
        ENGINE_CAPABILITY_OF[op] for (op, _), _ in steps if op in ENGINE_CAPABILITY_OF
    }
    vector = {
        "name": f"modelcheck: {violation.invariant} of {violation.session_id} after [{', '.join(names)}]",
        "family": "modelcheck",
        "why": f"the spec model breaks the invariant '{violation.invariant}': {violation.detail}",
        "rule": "conformance.modelcheck.check_invariants",
        "capabilities": sorted(capabilities),
        "steps": [{"request": {"op": op, **args}, "expect": expect} for (op, args), expect in steps],
    }
    out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", f"{violation.invariant} {' '.join(names)}".lower()).strip("-")
    target = out / f"{slug[:100]}.json"
    target.write_text(json.dumps(vector, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return target


# --- TLC's statistics ------------------------------------------------------------------------------


def statistics(search: Search) -> Iterator[str]:
    """The summary lines: distinct states, generated, queue, depth, rate."""
    rate = len(search.parents) / search.seconds if search.seconds else 0.0
    yield (
        f"{search.generated} states generated, {len(search.parents)} distinct states found, "
        f"{len(search.frontier)} states left on queue; depth {search.depth}; "
        f"{search.seconds:.1f} s, {rate:.0f} distinct states/s"
    )


def coverage_lines(search: Search) -> Iterator[str]:
    """Per action: enabled, changed the state, distinct states found; then which never were."""
    coverage = search.coverage
    yield f"{'action':<22}{'enabled':>10}{'changed':>10}{'distinct':>10}"
    for action in ALPHABET:
        label = action.name
        yield f"{label:<22}{coverage.enabled[label]:>10}{coverage.changed[label]:>10}{coverage.distinct[label]:>10}"
    never = [action.name for action in ALPHABET if not coverage.changed[action.name]]
    yield (
        f"never taken: {', '.join(never)}"
        if never
        else f"every action of the alphabet ({len(ALPHABET)}) was taken"
    )


def printer(stream: TextIO) -> Callable[[Search, bool], None]:
    def report(search: Search, final: bool) -> None:
        for line in statistics(search):
            print(("final: " if final else "progress: ") + line, file=stream, flush=True)
        if final:
            for line in coverage_lines(search):
                print(line, file=stream)
            if search.violation is not None:
                violation, fingerprint = search.violation
                names = [ALPHABET[index].name for index in path_to(search, fingerprint)]
                print(
                    f"VIOLATION of '{violation.invariant}' in {violation.session_id}: {violation.detail}",
                    file=stream,
                )
                print(
                    f"shortest path ({len(names)} actions): {' -> '.join(names) or '(initial state)'}",
                    file=stream,
                )
            elif not search.frontier:
                print("no invariant violated; the state space is exhausted", file=stream)
            else:
                print("no invariant violated within the bounds", file=stream)

    return report


def save(search: Search, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / "search.pickle.part"
    with partial.open("wb") as handle:
        pickle.dump(search, handle, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(directory / "search.pickle")


def load(directory: Path) -> Search:
    with (directory / "search.pickle").open("rb") as handle:
        search = pickle.load(handle)
    assert isinstance(search, Search)
    return search


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.modelcheck", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--max-depth", type=int)
    parser.add_argument("--max-states", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between progress lines")
    parser.add_argument("--workers", type=int, default=1, help="processes expanding the frontier (fork)")
    parser.add_argument("--checkpoint", type=Path, help="save the search here when it stops")
    parser.add_argument("--resume", type=Path, help="go on from a search saved with --checkpoint")
    parser.add_argument(
        "--out", type=Path, default=Path("modelcheck-vectors"), help="where a violation's vector goes"
    )
    args = parser.parse_args(argv)
    search = load(args.resume) if args.resume else start_search()
    try:
        report = printer(sys.stdout)
        explore(search, args.max_depth, args.max_states, args.seconds, report, args.interval, args.workers)
    except KeyboardInterrupt:
        print("interrupted")
    if args.checkpoint:
        save(search, args.checkpoint)
        print(f"checkpoint written to {args.checkpoint}")
    if search.violation is not None:
        print(f"vector written to {write_vector(search, args.out)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
