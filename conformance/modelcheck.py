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
The search is partitioned by fingerprint (:class:`Partition`, TLC's fingerprint servers): each
part keeps its own fingerprints and frontier and sends the states it finds to their owners.
``--workers N`` runs N parts in forked processes, ``--cluster ADDRESS`` one on each worker of a
Dask scheduler (:mod:`conformance.cluster`); the states, parents and coverage are the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Final, TextIO

from conformance import builders as build
from conformance.cluster import Server, serve
from conformance.engine_model import ENGINE_CAPABILITY_OF, model_request
from conformance.exhaustive import check_state_invariants
from conformance.machine.variants import derive_loop_position, derive_next_step
from conformance.model import ModelStore, canonical_text, model_crash, model_resume
from spec.checks.log import check_log
from spec.codes import SpecError
from spec.lineage.fork import derive_child_meta, plan_fork_seed
from spec.lineage.store import plan_create
from spec.log.events import COMPACTION_END, COMPACTION_START, TOOL_RESULT, Event, event_data
from spec.log.json import JsonValue
from spec.log.session import SessionState
from spec.log.unclosed import derive_compaction_entry_state
from spec.protocol import Request

STORAGE: Final = "file"
TICK: Final = 1_000  # ms
MAX_SESSIONS: Final = 2
FORK_BOUNDARIES: Final = 6
NAME: Final = re.compile(r"~[smck]\d{3}")
TOKEN: Final = re.compile(r'(~[smck]\d{3}|"(?:time|createdAt)":\d+)')  # a name, or a time with its key
SUMMARY: Final = "Condensed: the parser was read."
OUTPUT: Final = "tests/test_parser.py:12: assert parse(text) == expected  # 3 passed"  # 66 code points
PRUNE_CONFIG: Final[JsonValue] = {"thresholdChars": 60, "headChars": 10, "tailChars": 10}  # 10 + 39 + 10


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

    def known(self, models: Sequence[ModelStore]) -> list[tuple[object, str]]:
        """The texts known of the models' headers, events and logs: sent with the models to
        another process, so that it does not write them again."""
        found: dict[int, tuple[object, str]] = {}
        for model in models:
            logs = [(entry.state.header, entry.state.events) for entry in model.live.values()]
            logs += [(log.header, log.events) for log in model.stored.values()]
            for header, events in logs:
                for piece, cache in (
                    (header, self.events),
                    (events, self.logs),
                    *((e, self.events) for e in events),
                ):
                    hit = cache.get(id(piece))
                    if hit is not None and hit[0] is piece:
                        found[id(piece)] = hit
        return list(found.values())

    def learn(self, known: Sequence[tuple[object, str]]) -> None:
        """Texts another process sent (:meth:`known`), for the objects they came with."""
        for piece, text in known:
            (self.logs if isinstance(piece, tuple) else self.events)[id(piece)] = (piece, text)


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


def _renamed(text: str, now: int | None = None) -> tuple[str, dict[str, int]]:
    """``text`` under the symmetry: its names renamed in order of first use, its times (and
    ``now``, written first) by rank; and per name class one past the highest number it used."""
    pieces = TOKEN.split(text)  # text, token, text, token, ..., text
    tokens = pieces[1::2]
    unique = dict.fromkeys(tokens)  # each token once, in order of first use
    counts: Counter[str] = Counter()
    highest: dict[str, int] = {}
    times: dict[str, int] = {}  # a time token and its value
    mapping: dict[str, str] = {}
    for token in unique:
        if token[0] != "~":
            times[token] = int(token[token.index(":") + 1 :])
            continue
        kind = token[1]
        highest[kind] = max(highest.get(kind, 0), int(token[2:]) + 1)
        mapping[token] = name(kind, counts[kind])
        counts[kind] += 1
    values = sorted({*times.values(), *(() if now is None else (now,))})
    rank = {value: str(build.START_TIME + TICK * index) for index, value in enumerate(values)}
    for token, value in times.items():
        mapping[token] = token[: token.index(":") + 1] + rank[value]
    pieces[1::2] = map(mapping.__getitem__, tokens)
    text = "".join(pieces)
    return (text if now is None else f"{rank[now]};{text}"), highest


def canonicalize(model: ModelStore) -> tuple[int, View]:
    """The state's 64-bit fingerprint under the symmetry (session, message, call and compaction
    names renamed in order of first use, times by rank) and its :class:`View`."""
    sessions = {session_id: _session_text(model, session_id) for session_id in {*model.live, *model.stored}}
    order = tuple(sorted(sessions, key=lambda session_id: (sessions[session_id][1], session_id)))
    rest = f"{model.storage}|{model.minted}|{','.join(model.faults)}"
    if model.broken or model.engine.units or model.engine.spills:
        units = sorted((key, unit.state_version, refs) for key, (unit, refs) in model.engine.units.items())
        rest += canonical_text([dict(model.broken), units, list(model.engine.spills.items())])
    text, fresh = _renamed(";".join(sessions[session_id][0] for session_id in order) + ";" + rest, model.now)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
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


def _turn(session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """Open a turn with a user message (no turn open, no compaction running: a well-behaved
    caller waits for the engine's bracket to close)."""
    turn, _, turns, _ = derive_loop_position(state.events)
    if turn is not None or _open_compaction(state.events) is not None:
        return None
    return build.open_turn(session_id, turns, build.user_message(view.new("m"), "read the parser"))


def _step(call: bool, session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """A step of the open turn (no step open): an assistant message with a tool call and its
    ``tool/call`` (the step left open for the result), or a text answer and the step's end."""
    turn, step, _, _ = derive_loop_position(state.events)
    if turn is None or step is not None:
        return None
    number = derive_next_step(state.events, turn)
    message_id, calls = view.new("m"), (view.new("c"),) if call else ()
    opened = build.open_step(session_id, turn, number, message_id, calls)
    return opened if call else [*opened, build.close_step(session_id, turn, number)]


def _result(session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """The result of the open step's pending call, and the step's end."""
    turn, step, _, pending = derive_loop_position(state.events)
    if turn is None or step is None or not pending:
        return None
    result = build.tool_result(pending[0], OUTPUT, False, turn, step)
    return [
        build.append_request(session_id, TOOL_RESULT, result, surfaceOp="append"),
        build.close_step(session_id, turn, step),
    ]


def _turn_end(session_id: str, state: SessionState, view: View) -> Sequence[Request] | None:
    """The end of the open turn (no step open, no compaction running)."""
    turn, step, _, _ = derive_loop_position(state.events)
    if turn is None or step is not None or _open_compaction(state.events) is not None:
        return None
    return [build.close_turn(session_id, turn)]


def _open_compaction(events: Sequence[Event]) -> str | None:
    """The compaction id of the bracket the caller's writer left open, if any (the unmatched
    ``compaction/start`` of :func:`spec.log.unclosed.derive_compaction_entry_state`)."""
    start = derive_compaction_entry_state(events).unmatched_start
    key = event_data(start).get("compactionId") if start is not None else None
    return key if isinstance(key, str) else None


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
    ("clock", {"now": build.START_TIME}),
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
    costs the checks of the logs that changed; and the logs that passed, by their text under the
    symmetry, so that a log reached again along another path (other names, other times) is not
    checked again. The invariants are symmetric, as the fingerprint already assumes; a log that
    fails is always checked afresh, so its violation names its own session."""

    def __init__(self) -> None:
        self.results: dict[tuple[str, int], tuple[object, tuple[Violation, ...]]] = {}
        self.passed: set[bytes] = set()

    def clear(self) -> None:
        """Forget every result (the spec was changed)."""
        self.results.clear()
        self.passed.clear()

    def get(
        self,
        kind: str,
        key: object,
        text: Callable[[], str],
        compute: Callable[[], tuple[Violation, ...]],
    ) -> tuple[Violation, ...]:
        hit = self.results.get((kind, id(key)))
        if hit is not None and hit[0] is key:
            return hit[1]
        digest = hashlib.blake2b(f"{kind};{_renamed(text())[0]}".encode(), digest_size=12).digest()
        found = () if digest in self.passed else compute()
        if not found:
            self.passed.add(digest)
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
            plan_create(name("s", 999), (session_id,), (), list(seed), meta, build.START_TIME, shared=True)
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


def checked_prefixes(model: ModelStore, before: ModelStore) -> dict[str, int]:
    """Per live session of ``model`` that extends its own live log in ``before``: that log's length
    (its fork boundaries were checked at ``before``)."""
    checked: dict[str, int] = {}
    for session_id, entry in model.live.items():
        earlier = before.live.get(session_id)
        if earlier is not None:
            count = len(earlier.state.events)
            if entry.state.events[:count] == earlier.state.events:
                checked[session_id] = count
    return checked


def check_invariants(model: ModelStore, checked: Mapping[str, int] | None = None) -> tuple[Violation, ...]:
    """Every invariant at a state, each log's checks computed once per log (:class:`_Cache`); a
    live log skips the fork boundaries before ``checked[its id]`` (checked at a state that
    passed, see :func:`checked_prefixes`)."""
    found: list[Violation] = []
    for session_id, entry in model.live.items():
        state = entry.state
        found += CACHE.get(
            "live",
            state,
            partial(_log_text, session_id, state.header, state.events),
            partial(check_live, session_id, state, (checked or {}).get(session_id, 0)),
        )
    for session_id, log in model.stored.items():
        found += CACHE.get(
            "stored",
            log,
            partial(_log_text, session_id, log.header, log.events, model.now),
            partial(check_stored, model, session_id),
        )
    return tuple(found)


def _log_text(session_id: str, header: Event, events: tuple[Event, ...], now: int | None = None) -> str:
    """What a log's checks read: its session id, header and events (and the clock, for a resume)."""
    clock = "" if now is None else f',"time":{now}'
    return f'"{session_id}";{TEXTS.event(header)};{TEXTS.log(events)}{clock}'


# --- the search ------------------------------------------------------------------------------------


@dataclass
class Coverage:
    """Per action: at how many states it was enabled, how many states it generated that differ
    from the one it left, and how many distinct new states it found."""

    enabled: Counter[str] = field(default_factory=Counter)
    changed: Counter[str] = field(default_factory=Counter)
    distinct: Counter[str] = field(default_factory=Counter)


Node = tuple[ModelStore, View, int]  # a state, its view and its fingerprint
Offer = tuple[
    int, int, int, ModelStore, View, dict[str, int]
]  # fingerprint, parent, action, state, view, checked
BATCH: Final = 400  # frontier states a part expands in one round


@dataclass
class Partition:
    """The states whose fingerprint is ``part`` modulo ``parts``: TLC's fingerprint server and
    worker in one. It keeps every fingerprint of its part it has found (with the parent and
    action that found it) and its share of the frontier, expands its states a batch at a time and
    sends each new state to the part that owns it (:meth:`step`); the owner alone decides whether
    it is new and checks the invariants there.

    Levels are synchronous (a level is expanded whole before the next one starts), so the first
    violation is at the least depth; a state's parent is the least (parent fingerprint, action)
    of the states of the level before that reach it, whatever the number of parts or the batch:
    a part expands its level in order of fingerprint and sends a state only the first time."""

    part: int
    parts: int
    seen: dict[int, tuple[int, int]] = field(default_factory=dict)  # parent, action (-1: initial)
    level: int = 0  # the depth of the frontier's states
    frontier: list[Node] = field(default_factory=list)  # the level's states left, least fingerprint last
    found: dict[int, Node] = field(default_factory=dict)  # the next level's states so far
    sent: set[int] = field(default_factory=set)  # fingerprints sent to another part
    coverage: Coverage = field(default_factory=Coverage)
    violations: list[tuple[Violation, int]] = field(default_factory=list)

    def step(self, incoming: Sequence[bytes], batch: int) -> tuple[list[bytes | None], tuple[int, ...]]:
        """Take the states other parts sent, then expand up to ``batch`` states of the level: the
        states for each other part (pickled, ``None`` for none) and :meth:`counts`."""
        for blob in incoming:
            offers, known = pickle.loads(blob)
            TEXTS.learn(known)
            for offer in offers:
                self.offer(*offer)
        out: list[list[Offer]] = [[] for _ in range(self.parts)]
        for _ in range(min(batch, len(self.frontier))):
            model, view, fingerprint = self.frontier[-1]  # taken off once expanded whole (Ctrl-C)
            for index in range(len(ALPHABET)):
                successor = _successor(model, view, fingerprint, index, self.coverage)
                if successor is None:
                    continue
                child, child_view, taken = successor
                owner = child % self.parts
                if owner == self.part:
                    self.offer(child, fingerprint, index, taken, child_view, checked_prefixes(taken, model))
                elif child not in self.sent:
                    self.sent.add(child)
                    out[owner].append(
                        (child, fingerprint, index, taken, child_view, checked_prefixes(taken, model))
                    )
            self.frontier.pop()
        blobs = [
            pickle.dumps((items, TEXTS.known([item[3] for item in items])), pickle.HIGHEST_PROTOCOL)
            if items
            else None
            for items in out
        ]
        return blobs, self.counts()

    def offer(
        self, child: int, parent: int, index: int, model: ModelStore, view: View, checked: Mapping[str, int]
    ) -> None:
        """A state found from ``parent`` by action ``index``: kept (and checked) when new; when
        found before in this level, its parent is the least of the two."""
        known = self.seen.get(child)
        if known is not None:
            if child in self.found and (parent, index) < known:
                self.seen[child] = (parent, index)
            return
        self.seen[child] = (parent, index)
        self.found[child] = (model, view, child)
        problems = check_invariants(model, checked)
        if problems:
            self.violations.append((problems[0], child))

    def next_level(self) -> tuple[int, ...]:
        """The level is expanded everywhere: the states found become the frontier."""
        for fingerprint in self.found:
            self.coverage.distinct[ALPHABET[self.seen[fingerprint][1]].name] += 1
        self.frontier = sorted(self.found.values(), key=lambda node: node[2], reverse=True)
        self.found = {}
        self.level += 1
        return self.counts()

    def counts(self) -> tuple[int, ...]:
        """Distinct states, the level's states left, the next level's found, violations, level."""
        return len(self.seen), len(self.frontier), len(self.found), len(self.violations), self.level

    def parent(self, fingerprint: int) -> tuple[int, int]:
        return self.seen[fingerprint]

    def export(self, whole: bool) -> Partition:
        """This part to keep (``whole``: with its states, to go on from; else what the report and
        the counterexample need)."""
        if whole:
            return self
        return replace(self, frontier=[], found={}, sent=set())


def _successor(
    model: ModelStore, view: View, fingerprint: int, index: int, coverage: Coverage
) -> tuple[int, View, ModelStore] | None:
    """Action ``index`` at a state, counted in ``coverage`` (enabled, changed the state): the new
    state's fingerprint, view and model, or ``None`` when it is not enabled or changes nothing."""
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
    return child, child_view, taken.model


def split(parts: Sequence[Partition], count: int) -> list[Partition]:
    """The same search in ``count`` parts (a search checkpointed with another number of workers;
    the levels are synchronous, so every part is at the same level)."""
    if len(parts) == count:
        return list(parts)
    merged = [Partition(index, count, level=parts[0].level) for index in range(count)]
    merged[0].coverage = _merged_coverage(parts)
    for part in parts:
        merged[0].violations += part.violations
        for fingerprint, parent in part.seen.items():
            merged[fingerprint % count].seen[fingerprint] = parent
        for node in part.frontier:
            merged[node[2] % count].frontier.append(node)
        for fingerprint, node in part.found.items():
            merged[fingerprint % count].found[fingerprint] = node
    for part in merged:
        part.frontier.sort(key=lambda node: node[2], reverse=True)
    return merged


def _merged_coverage(parts: Sequence[Partition]) -> Coverage:
    coverage = Coverage()
    for part in parts:
        coverage.enabled.update(part.coverage.enabled)
        coverage.changed.update(part.coverage.changed)
        coverage.distinct.update(part.coverage.distinct)
    return coverage


@dataclass
class Search:
    """The explorer's whole state (pickled by ``--checkpoint``): its parts (:class:`Partition`:
    every fingerprint seen with its parent and the action that found it, the frontier), the
    prefix it started from, and statistics."""

    parts: list[Partition]
    prefix: tuple[int, ...] = ()
    seconds: float = 0.0
    violation: tuple[Violation, int] | None = None
    queue: int = 0  # states found and not expanded yet
    depth: int = 0  # the depth of the deepest state found

    def note(self, counts: Sequence[tuple[int, ...]]) -> None:
        """The parts' :meth:`Partition.counts`: the queue and the depth."""
        self.queue = sum(entry[1] + entry[2] for entry in counts)
        self.depth = counts[0][4] + any(entry[2] for entry in counts)

    @property
    def coverage(self) -> Coverage:
        return _merged_coverage(self.parts)

    @property
    def generated(self) -> int:
        """States generated: every action enabled at a state expanded."""
        return sum(sum(part.coverage.enabled.values()) for part in self.parts)

    @property
    def distinct(self) -> int:
        return sum(len(part.seen) for part in self.parts)

    @property
    def parents(self) -> dict[int, tuple[int, int]]:
        """Every fingerprint seen, with its parent and the action that found it."""
        return {key: value for part in self.parts for key, value in part.seen.items()}

    def parent(self, fingerprint: int) -> tuple[int, int]:
        return self.parts[fingerprint % len(self.parts)].seen[fingerprint]


def start_search(prefix: Sequence[str] = ()) -> Search:
    """A search from the initial state, or from the state the actions named in ``prefix`` reach
    (to explore a region of the graph deeper than the whole of it)."""
    indices = tuple(ACTION_INDEX[action] for action in prefix)
    model, _ = replay(indices)
    fingerprint, view = canonicalize(model)
    part = Partition(0, 1, {fingerprint: (fingerprint, -1)}, frontier=[(model, view, fingerprint)])
    search = Search([part], indices, queue=1)
    found = check_invariants(model)
    if found:
        search.violation = (found[0], fingerprint)
    return search


def explore(
    search: Search,
    max_depth: int | None = None,
    max_states: int | None = None,
    seconds: float | None = None,
    report: Callable[[Search, bool], None] | None = None,
    interval: float = 10.0,
    workers: int = 1,
    cluster: str | None = None,
    keep: bool = True,
) -> Search:
    """Breadth first from ``search``'s frontier until it is empty, a bound is met or an invariant
    fails (the first violation found is at the least depth). The search runs in ``workers`` parts
    (:class:`Partition`): in this process for one, else each in a process of its own, or, given a
    Dask scheduler's ``cluster`` address, one on each of its workers; the states found, their
    parents and the coverage are the same whatever the parts. ``keep``: the search can go on
    after (its states come back from the workers; without, only what the report needs)."""
    began = time.perf_counter()
    spent = search.seconds
    last = began
    if search.violation is not None:
        return search
    interrupted = False
    with serve(partial(split, search.parts), workers, cluster) as servers:
        incoming: list[list[bytes]] = [[] for _ in servers]
        counts = [server.call("counts").result() for server in servers]
        while not any(entry[3] for entry in counts):
            if max_depth is not None and counts[0][4] >= max_depth:
                break
            if not any(entry[1] for entry in counts) and not any(incoming):  # the level is done
                if not any(entry[2] for entry in counts):
                    break  # the state space is exhausted
                counts = [server.call("next_level").result() for server in servers]
                continue
            now = time.perf_counter()
            if max_states is not None and sum(entry[0] for entry in counts) >= max_states:
                break
            if seconds is not None and now - began >= seconds:
                break
            if report is not None and now - last >= interval:
                search.seconds = spent + now - began
                search.parts = [server.call("export", False).result() for server in servers]
                search.note(counts)
                report(search, False)
                last = now
            try:
                incoming, counts = _round(servers, incoming, BATCH)
            except _Interrupted as stop:  # the parts finished their round: nothing is lost
                incoming, counts, interrupted = stop.sent, stop.counts, True
                break
            except KeyboardInterrupt:  # in this process: the state being expanded is expanded again
                interrupted = True
                break
        if any(incoming):  # what is on its way is delivered, so that the search can go on
            incoming, counts = _round(servers, incoming, 0)
        search.note(counts)
        search.parts = [server.call("export", keep).result() for server in servers]
    violations = sorted(
        (found for part in search.parts for found in part.violations), key=lambda found: found[1]
    )
    if violations:
        search.violation = violations[0]
    search.seconds = spent + time.perf_counter() - began
    if report is not None:
        report(search, True)
    if interrupted:
        raise KeyboardInterrupt
    return search


def _round(
    servers: Sequence[Server], incoming: Sequence[Sequence[bytes]], batch: int
) -> tuple[list[list[bytes]], list[tuple[int, ...]]]:
    """One round: every part takes what was sent to it and expands ``batch`` states, at once;
    what they send, by part, and their counts."""
    pending = [server.call("step", incoming[index], batch) for index, server in enumerate(servers)]
    sent: list[list[bytes]] = [[] for _ in servers]
    counts: list[tuple[int, ...]] = []
    interrupted = False
    for reply in pending:
        while True:
            try:
                blobs, entry = reply.result()
                break
            except KeyboardInterrupt:  # every reply is read first, so that nothing sent is lost
                interrupted = True
        counts.append(entry)
        for owner, blob in enumerate(blobs):
            if blob is not None:
                sent[owner].append(blob)
    if interrupted:
        raise _Interrupted(sent, counts)
    return sent, counts


class _Interrupted(KeyboardInterrupt):
    """Ctrl-C during a round, raised once every part answered: what they sent, and their counts."""

    def __init__(self, sent: list[list[bytes]], counts: list[tuple[int, ...]]) -> None:
        super().__init__()
        self.sent = sent
        self.counts = counts


def path_to(search: Search, fingerprint: int) -> list[int]:
    """The actions (indices in :data:`ALPHABET`) from the initial state to ``fingerprint``."""
    path: list[int] = []
    while True:
        parent, index = search.parent(fingerprint)
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
    rate = search.distinct / search.seconds if search.seconds else 0.0
    yield (
        f"{search.generated} states generated, {search.distinct} distinct states found, "
        f"{search.queue} states left on queue; depth {search.depth}; "
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
            elif not search.queue:
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
    parser.add_argument("--workers", type=int, default=1, help="parts of the search, a process each (fork)")
    parser.add_argument(
        "--cluster", metavar="ADDRESS", help="a Dask scheduler's address: a part on each of its workers"
    )
    parser.add_argument("--checkpoint", type=Path, help="save the search here when it stops")
    parser.add_argument("--resume", type=Path, help="go on from a search saved with --checkpoint")
    parser.add_argument(
        "--out", type=Path, default=Path("modelcheck-vectors"), help="where a violation's vector goes"
    )
    args = parser.parse_args(argv)
    search = load(args.resume) if args.resume else start_search()
    try:
        report = printer(sys.stdout)
        explore(
            search,
            args.max_depth,
            args.max_states,
            args.seconds,
            report,
            args.interval,
            args.workers,
            args.cluster,
            keep=args.checkpoint is not None,
        )
    except KeyboardInterrupt:
        print("interrupted")
    times = os.times()  # the workers' processes are joined: their time is the children's
    cpu = max(times.user + times.system + times.children_user + times.children_system, 1e-9)
    average = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(
        f"this run's CPU time (its workers' too): {cpu:.1f} s, {search.distinct / cpu:.0f} distinct states a CPU second; load average {average}"
    )
    if args.checkpoint:
        save(search, args.checkpoint)
        print(f"checkpoint written to {args.checkpoint}")
    if search.violation is not None:
        print(f"vector written to {write_vector(search, args.out)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
