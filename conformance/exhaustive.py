"""Exhaustive small-scope checking: every operation sequence up to a fixed depth.

Over a small alphabet of operations on one session (a user message, an assistant message with a
tool call, a tool result, turn start and end, a summary replacing the head of the surface, a prune
rewriting the last tool result, a fork at the last event, and for storage subjects flush and
crash-then-resume), the checker explores every sequence breadth first, deduplicating states by
the model's canonical key. Every transition is driven on the subject and on the spec model side by
side (same answers, codes included); every distinct state reached is compared with the subject
(each live session's ``state``, each stored session's ``read``) and checked against the spec's
own invariants: the core rules of the log checker, the crash-repair closers rule, the header's
lineage, the surface as a fold of the log, and closers that close everything.

The case is earned (:func:`conformance.report.earned`): it passes only when every letter of the
alphabet was driven (answered, not refused) at least :data:`MINIMUM_COVERAGE` times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from conformance import builders as build
from conformance import strategies as values
from conformance.crash.family import FAIL_FAST
from conformance.divergence import Divergences
from conformance.driver import Driver, Mismatch, Unsupported
from conformance.machine.replay import (
    Recording,
    ReplayTokenError,
    Step,
    with_replays,
)
from conformance.machine.variants import count_turns_started
from conformance.model import Expected, ModelStore, derive_model_key
from conformance.report import CaseResult, Coverage, Options, earned
from conformance.subject import Subject, SubjectDead
from conformance.targets import DEFAULT_TARGET, Target
from spec.checks.lineage import check_closers, check_header_lineage
from spec.checks.log import check_log
from spec.format.json_text import encode_json_text
from spec.lineage.repair import derive_closers
from spec.log.events import (
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    TURN_START,
    USER_MESSAGE,
    Event,
    event_data,
    tool_call_ids_of,
)
from spec.log.json import JsonValue
from spec.log.session import SessionState
from spec.log.surface import fold_surface
from spec.protocol import Request

SESSION: Final = "s"
CHILD: Final = "f"
MINIMUM_COVERAGE: Final = 10  # driven transitions per letter (the reference: see docs/choices.md)
# Sequence length per profile name: ci reaches 5 since replays are pipelined, and thorough stays at 5
# (6 would cost about eight times 5 again); --exhaustive-depth N overrides both, and scripts/certify-dsh.sh
# pins DSH at 4 (docs/choices.md, "The suite on every core, and the exhaustive family at depth 5").
DEPTHS: Final = {"ci": 5, "thorough": 5}


@dataclass(frozen=True)
class Letter:
    """One operation of the alphabet: its name and the requests it sends, given the model."""

    name: str
    requests: Callable[[ModelStore], Sequence[Request]]


@dataclass(frozen=True)
class ExhaustiveOutcome:
    """How far the search went: the depth, the distinct states, the transitions driven, the
    requests sent; ``failure`` is the first disagreement (with the sequence that reached it)."""

    depth: int
    alphabet: tuple[str, ...]
    states: int
    transitions: int
    requests: int
    seconds: float
    failure: str | None
    coverage: Coverage = field(default_factory=Coverage)
    refused_setup: str = ""  # the op of the search's own start the subject refused
    recorded: dict[str, tuple[str, ...]] = field(default_factory=dict)  # signature -> its letters


# --- the alphabet ----------------------------------------------------------------------------------


def _state(model: ModelStore) -> SessionState | None:
    entry = model.live.get(SESSION)
    return entry.state if entry is not None else None


def _events(model: ModelStore) -> tuple[Event, ...]:
    state = _state(model)
    return state.events if state is not None else ()


def _append(model: ModelStore, kind: str, data: JsonValue, **extra: JsonValue) -> Sequence[Request]:
    return [build.append_request(SESSION, kind, data, **extra)]


EDGE_TEXT: Final = (
    f"hi {values.NON_BMP}\u2028{values.LONE_SURROGATES[0]}"  # astral, a line breaker, a lone surrogate
)


def _user(model: ModelStore) -> Sequence[Request]:
    """A user message whose text holds an astral character, U+2028 and a lone surrogate, and a
    block of a type no rule knows after it."""
    data = build.user_message(f"u{len(_events(model))}", EDGE_TEXT, more=(values.UNKNOWN_BLOCK,))
    return _append(model, USER_MESSAGE, data, surfaceOp="append")


def _assistant_call(model: ModelStore) -> Sequence[Request]:
    seq = len(_events(model))
    data = build.assistant_message(f"a{seq}", "calling", (f"c{seq}",), more=(values.IMAGE_BLOCK,))
    return _append(model, ASSISTANT_MESSAGE, data, surfaceOp="append")  # its call is its third block


def _result(model: ModelStore) -> Sequence[Request]:
    """A result for the last call announced (or for an unknown call when there is none): two content
    blocks, ``isError`` left out, its turn an integral float, and the safe-integer bounds in its data."""
    calls = [
        call
        for event in _events(model)
        if event.get("type") == ASSISTANT_MESSAGE
        for call in tool_call_ids_of(event_data(event).get("message"))
    ]
    call = calls[-1] if calls else "c-none"
    more = (values.text_block(values.NON_BMP),)
    data = build.tool_result(call, "a long tool output", build.ABSENT_FLAG, 1.0, 1, more)
    data["bounds"] = [values.SAFE_BOUND, -values.SAFE_BOUND]
    return _append(model, TOOL_RESULT, data, surfaceOp="append")


def _turn_start(model: ModelStore) -> Sequence[Request]:
    return _append(model, TURN_START, build.turn_start(float(count_turns_started(_events(model)) + 1)))


def _turn_end(model: ModelStore) -> Sequence[Request]:
    return _append(model, "turn/end", build.turn_end(max(count_turns_started(_events(model)), 1)))


def _summary(model: ModelStore) -> Sequence[Request]:
    """A summary replacing the first two surface nodes (or the only one), citing both as integral
    floats; first, twice refused, the same citing a boolean and 2**53 (neither is a seq)."""
    state = _state(model)
    nodes = list(state.surface.nodes) if state else []
    span = nodes[:2] if nodes else [0]
    data = build.user_message(f"summary-{len(_events(model))}", "summary", kind="compact")
    op = build.replace_op(span[0], span[-1])
    return [
        *_append(model, USER_MESSAGE, data, surfaceOp=op, sourceEventSeqs=[*span, True]),
        *_append(model, USER_MESSAGE, data, surfaceOp=op, sourceEventSeqs=[*span, values.UNSAFE_INTEGER]),
        *_append(model, USER_MESSAGE, data, surfaceOp=op, sourceEventSeqs=[float(seq) for seq in span]),
    ]


def _prune(model: ModelStore) -> Sequence[Request]:
    """A rewrite of the last tool-result node with shorter content (or of the last node); first,
    refused, the same with its block's ``isError`` set to null where the original left it out."""
    state = _state(model)
    nodes = list(state.surface.nodes) if state else []
    results = [node for node in nodes if state is not None and state.events[node].get("type") == TOOL_RESULT]
    target = results[-1] if results else (nodes[-1] if nodes else 0)
    original = (
        state.events[target]["data"]
        if state is not None and target < len(state.events)
        else build.tool_result("c-none")
    )
    data = build.rewritten_result(original, "[pruned]")
    nulled = build.rewritten_result(original, "[pruned]", None)
    op = build.replace_op(target, target)
    return [
        *_append(model, TOOL_RESULT, nulled, surfaceOp=op, sourceEventSeqs=[target]),
        *_append(model, TOOL_RESULT, data, surfaceOp=op, sourceEventSeqs=[target]),
    ]


def _fork(model: ModelStore) -> Sequence[Request]:
    return [("fork", {"source": SESSION, "child": CHILD})]


def _flush(model: ModelStore) -> Sequence[Request]:
    """Flush every live session (the fork child too, so that a resume can bring it back)."""
    return [("flush", {"id": session_id}) for session_id in sorted(model.live)]


CRASH: Final = "crash"

CORE_LETTERS: Final = (
    Letter("user", _user),
    Letter("assistant+call", _assistant_call),
    Letter("result", _result),
    Letter("turn-start", _turn_start),
    Letter("turn-end", _turn_end),
    Letter("summary", _summary),
    Letter("prune", _prune),
    Letter("fork", _fork),
)
FLUSH_LETTER: Final = Letter("flush", _flush)
CRASH_LETTER: Final = Letter("crash+resume", lambda model: [(CRASH, {})])


def storage_for(capabilities: Sequence[str]) -> str:
    return "file" if "crash-seam" in capabilities else "memory" if "storage" in capabilities else "none"


def alphabet_for(capabilities: Sequence[str]) -> tuple[Letter, ...]:
    """The core letters, plus flush for a storage subject and crash-then-resume for a crash-seam one."""
    letters: tuple[Letter, ...] = CORE_LETTERS
    if "storage" in capabilities or "crash-seam" in capabilities:
        letters += (FLUSH_LETTER,)
    if "crash-seam" in capabilities:
        letters += (CRASH_LETTER,)
    return letters


# --- the invariants --------------------------------------------------------------------------------


def check_state_invariants(state: SessionState, relational: bool = False) -> list[str]:
    """What must hold of any session a conforming store can reach: the log obeys the core rules,
    the closers rule and its header's lineage (with ``relational``, every rule of the whole-log
    checker); the surface is the fold of the log; and a log followed by its closers needs no more
    closers."""
    if relational:
        problems = [f"{v.rule} at seq {v.seq}: {v.message}" for v in check_log(state.events, state.header)]
    else:
        problems = [
            f"{v.rule} at seq {v.seq}: {v.message}" for v in check_log(state.events, relational=False)
        ]
        problems += [f"{v.rule}: {v.message}" for v in check_closers(state.events)]
        problems += [f"{v.rule}: {v.message}" for v in check_header_lineage(state.events, state.header)]
    fold = fold_surface(state.events)
    if fold.nodes != state.surface.nodes or fold.replace_generation != state.surface.replace_generation:
        problems.append("the surface is not the fold of the log")
    if derive_closers((*state.events, *derive_closers(state.events))):
        problems.append("the closers of the log do not close everything")
    return problems


# --- the search ------------------------------------------------------------------------------------

MEMORY: Final = 20_000  # model transitions remembered before the memory starts again


@dataclass
class _Remembering(Driver):
    """A driver that remembers the model's transitions (keyed by the model object, the op and its
    arguments), so that driving the subject back along a path costs the subject's answers, not the
    model's: every path starts from the cursor's one root model, so a replay meets the same objects."""

    memory: dict[tuple[int, str, str], tuple[ModelStore, ModelStore, Expected]] = field(default_factory=dict)

    def predict(self, model: ModelStore, op: str, args: dict[str, Any]) -> tuple[ModelStore, Expected]:
        key = (id(model), op, encode_json_text(args))
        known = self.memory.get(key)
        if known is not None and known[0] is model:  # the entry keeps its model alive: same id, same model
            return known[1], known[2]
        after, expected = super().predict(model, op, args)
        if len(self.memory) >= MEMORY:
            self.memory.clear()
        self.memory[key] = (model, after, expected)
        return after, expected


class _Cursor:
    """The subject's position: which letter sequence it has been driven through since its reset."""

    def __init__(self, subject: Any, storage: str, letters: Sequence[Letter], target: Target) -> None:
        self.subject = subject
        self.storage = storage
        self.letters = letters
        self.target = target
        self.root = ModelStore()
        self.memory: dict[tuple[int, str, str], tuple[ModelStore, ModelStore, Expected]] = {}
        self.keys: dict[int, tuple[ModelStore, str]] = {}
        self.driver: Driver = self._fresh()
        self.path: tuple[int, ...] | None = None
        self.requests = 0

    def _fresh(self) -> Driver:
        return _Remembering(self.subject, self.root, target=self.target, memory=self.memory)

    def key(self) -> str:
        """The model's canonical key (remembered per model object, as the transitions are)."""
        model = self.driver.model
        known = self.keys.get(id(model))
        if known is not None and known[0] is model:
            return known[1]
        if len(self.keys) >= MEMORY:
            self.keys.clear()
        key = derive_model_key(model)
        self.keys[id(model)] = (model, key)
        return key

    def goto(self, path: tuple[int, ...]) -> None:
        """Drive the subject to ``path``: onward when it is an extension, else reset and replay.
        The way there was driven before, so its requests are pipelined (:meth:`Driver.settle`):
        sent without waiting for each answer, then every answer checked in order."""
        if self.path is not None and path[: len(self.path)] == self.path:
            rest = path[len(self.path) :]
        else:
            self.requests += self.driver.requests
            self.driver = self._fresh()
            self.driver.queue("reset", storage=self.storage)
            self.driver.queue("clock", now=build.START_TIME)
            self.driver.queue("create", id=SESSION)
            rest = path
        for index in rest:
            self._drive(index, self.driver.queue)
        self.driver.settle()
        self.path = path

    def apply(self, index: int) -> None:
        """Letter ``index`` from where the subject is, each answer checked before the next request."""
        self._drive(index, self.driver.step)

    def _drive(self, index: int, send: Callable[..., object]) -> None:
        """Letter ``index``'s requests through ``send`` (a step, or a queued one); a crash first
        settles what is queued, since the model adopts what the subject kept."""
        for op, args in self.letters[index].requests(self.driver.ahead):
            if op == CRASH:
                self.driver.settle()
                self.driver.crash("none")
                for session_id in sorted(self.driver.model.stored):
                    send("resume", id=session_id)
            else:
                send(op, **args)

    def total_requests(self) -> int:
        return self.requests + self.driver.requests


@dataclass(frozen=True)
class ExhaustivePart:
    """One subtree of the search (the sequences that begin with one letter): its outcome, with the
    states it reached besides the start, and its disagreements."""

    outcome: ExhaustiveOutcome
    divergences: Divergences


def exhaustive_parts(options: Options) -> int:
    """How many parts the runner's search splits into: one per letter of the alphabet (the first
    op), or one under fail-fast (the parts in turn, up to the first disagreement)."""
    return 1 if options.extra.get(FAIL_FAST) == "1" else len(alphabet_for(sorted(options.capabilities)))


def explore_part(
    subject: Any,
    capabilities: Sequence[str],
    depth: int,
    first: int,
    target: Target = DEFAULT_TARGET,
    fail_fast: bool = False,
) -> ExhaustivePart:
    """The sequences up to ``depth`` that begin with letter ``first``, breadth first, states
    deduplicated by model key within the part (the start is known to every part). A transition
    the subject answers differently is recorded and its branch is not explored further, while the
    rest of the part goes on; with ``fail_fast``, the first one ends the part as its failure."""
    letters = alphabet_for(capabilities)
    cursor = _Cursor(subject, storage_for(capabilities), letters, target)
    divergences = Divergences()
    started = time.perf_counter()
    transitions = 0
    coverage = Coverage()
    seen: set[str] = set()
    failure: str | None = None
    attempt: tuple[int, ...] = ()
    recorded: dict[str, tuple[str, ...]] = {}
    try:
        cursor.goto(())
        seen.add(cursor.key())
        _check_reached(cursor)
        frontier: list[tuple[int, ...]] = [()]
        for level in range(depth):
            next_frontier: list[tuple[int, ...]] = []
            for path in frontier:
                for index in range(len(letters)) if level else (first,):
                    attempt = (*path, index)
                    transitions += 1
                    try:
                        reached = _transition(cursor, path, index, seen)
                    except Unsupported:
                        if cursor.path == path:  # the letter was refused, not the way to it
                            coverage.refuse(letters[index].name)
                        cursor.path = None  # the letter stopped part-way: replay from a reset
                        continue
                    except Mismatch as mismatch:
                        coverage.drive(letters[index].name)
                        if fail_fast:
                            raise
                        steps = " -> ".join(letters[i].name for i in attempt)
                        divergences.record(mismatch.signature, f"after [{steps}]:\n{mismatch}")
                        recorded.setdefault(mismatch.signature, tuple(letters[i].name for i in attempt))
                        cursor.path = None  # the subject's state is unknown: replay from a reset
                        continue
                    coverage.drive(letters[index].name)
                    if reached:
                        next_frontier.append(attempt)
            frontier = next_frontier
    except SubjectDead:
        raise
    except Unsupported as refused:
        if transitions:
            raise
        outcome = ExhaustiveOutcome(
            depth, tuple(letter.name for letter in letters), 0, 0, cursor.total_requests(),
            time.perf_counter() - started, None, coverage, str(refused),
        )  # fmt: skip
        return ExhaustivePart(outcome, divergences)
    except Exception as error:
        steps = " -> ".join(letters[index].name for index in attempt)
        failure = f"after [{steps}]:\n{type(error).__name__}: {error}"
    outcome = ExhaustiveOutcome(
        depth=depth,
        alphabet=tuple(letter.name for letter in letters),
        states=len(seen) - 1,
        transitions=transitions,
        requests=cursor.total_requests(),
        seconds=time.perf_counter() - started,
        failure=failure,
        coverage=coverage,
        recorded=recorded,
    )
    return ExhaustivePart(outcome, divergences)


def merge_parts(parts: Sequence[ExhaustivePart], divergences: Divergences | None = None) -> ExhaustiveOutcome:
    """The whole search from its parts, in part order: the start once and every part's states,
    transitions, requests, time and coverage summed; the first part's failure; each disagreement
    once, in the order the parts met them (into ``divergences``)."""
    coverage = Coverage()
    recorded: dict[str, tuple[str, ...]] = {}
    for part in parts:
        for kind, count in part.outcome.coverage.driven.items():
            coverage.driven[kind] = coverage.driven.get(kind, 0) + count
        for kind, count in part.outcome.coverage.refused.items():
            coverage.refused[kind] = coverage.refused.get(kind, 0) + count
        for signature, names in part.outcome.recorded.items():
            recorded.setdefault(signature, names)
        if divergences is not None:
            divergences.stops += part.divergences.stops
            for signature, found in part.divergences.found.items():
                known = divergences.found.setdefault(signature, replace(found, count=0))
                known.count += found.count
    first = parts[0].outcome
    refused = next((part.outcome.refused_setup for part in parts if part.outcome.refused_setup), "")
    return ExhaustiveOutcome(
        depth=first.depth,
        alphabet=first.alphabet,
        states=(0 if refused else 1) + sum(part.outcome.states for part in parts),
        transitions=sum(part.outcome.transitions for part in parts),
        requests=sum(part.outcome.requests for part in parts),
        seconds=sum(part.outcome.seconds for part in parts),
        failure=next((part.outcome.failure for part in parts if part.outcome.failure), None),
        coverage=coverage,
        refused_setup=refused,
        recorded=recorded,
    )


def run_exhaustive(
    subject: Any,
    capabilities: Sequence[str],
    depth: int,
    target: Target = DEFAULT_TARGET,
    divergences: Divergences | None = None,
) -> ExhaustiveOutcome:
    """Every letter sequence up to ``depth``: each part (:func:`explore_part`) in turn, merged.
    With ``divergences``, a transition the subject answers differently is recorded there and its
    branch is not explored further, while the rest of the search goes on; without, the first one
    ends its part as the search's failure."""
    parts = [
        explore_part(subject, capabilities, depth, first, target, fail_fast=divergences is None)
        for first in range(len(alphabet_for(capabilities)))
    ]
    return merge_parts(parts, divergences)


def _transition(cursor: _Cursor, path: tuple[int, ...], index: int, seen: set[str]) -> bool:
    """Apply letter ``index`` at ``path``; ``True`` when that reaches a state not seen before
    (which is then checked and kept for the next depth)."""
    cursor.goto(path)
    key_before = cursor.key()
    cursor.apply(index)
    key = cursor.key()
    cursor.path = (*path, index) if key != key_before else path  # unchanged: still at ``path``
    if key in seen:
        return False
    seen.add(key)
    _check_reached(cursor)
    return True


def _check_reached(cursor: _Cursor) -> None:
    """A newly reached state: the subject shows every live session and stored log as the model
    does, and each live session satisfies the spec's invariants."""
    driver = cursor.driver
    driver.check_all_live()
    for session_id in sorted(driver.model.stored):
        driver.step("read", id=session_id)
    for session_id, entry in sorted(driver.model.live.items()):
        problems = check_state_invariants(entry.state)
        if problems:
            raise Mismatch(f"session {session_id} breaks spec invariants:\n  " + "\n  ".join(problems))


def replay_letters(subject: Subject, steps: Sequence[Step], storage: str, target: Target) -> str | None:
    """The exhaustive checker's replayer (:mod:`conformance.machine.replay`): the search's start,
    then each letter, every state reached checked as the search checks a new one; a refused
    letter changes nothing and the replay goes on."""
    every = {letter.name: letter for letter in (*CORE_LETTERS, FLUSH_LETTER, CRASH_LETTER)}
    unknown = sorted({name for name, _ in steps} - set(every))
    if unknown:
        raise ReplayTokenError(f"--replay: no such letters: {', '.join(unknown)}")
    cursor = _Cursor(subject, storage, [every[name] for name, _ in steps], target)
    try:
        cursor.goto(())
        _check_reached(cursor)
        for index in range(len(steps)):
            try:
                cursor.apply(index)
            except Unsupported:
                continue
            _check_reached(cursor)
    except Mismatch as mismatch:
        return mismatch.signature
    return None


def exhaustive_depth(options: Options) -> int:
    """The search's depth: the run's own (``--exhaustive-depth``) when it names one, else its
    profile's (:data:`DEPTHS`)."""
    if options.exhaustive_depth is not None:
        return options.exhaustive_depth
    return DEPTHS.get(options.profile, DEPTHS["ci"])


def exhaustive_part(subject: Subject, options: Options, index: int) -> list[ExhaustivePart]:
    """Part ``index`` of the runner's search: the sequences that begin with letter ``index``; under
    fail-fast, every letter's in turn until one ends at a disagreement (mutation testing wants
    the verdict, not every disagreement)."""
    depth = exhaustive_depth(options)
    target = options.target or DEFAULT_TARGET
    capabilities = sorted(options.capabilities)
    if exhaustive_parts(options) > 1:
        return [explore_part(subject, capabilities, depth, index, target)]
    parts: list[ExhaustivePart] = []
    for first in range(len(alphabet_for(capabilities))):
        parts.append(explore_part(subject, capabilities, depth, first, target, fail_fast=True))
        if parts[-1].outcome.failure is not None:
            break
    return parts


def check_exhaustive(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: every part of the search, then :func:`finish_exhaustive`."""
    pieces = [exhaustive_part(subject, options, index) for index in range(exhaustive_parts(options))]
    return finish_exhaustive(subject, options, pieces)


def finish_exhaustive(
    subject: Subject, options: Options, pieces: Sequence[Sequence[ExhaustivePart]]
) -> list[CaseResult]:
    """The family's cases from its parts' pieces: one case, named with the depth and the distinct
    states explored, and one case for each distinct disagreement (its branch left unexplored, the
    search going on)."""
    divergences = Divergences()
    outcome = merge_parts([part for piece in pieces for part in piece], divergences)
    depth = outcome.depth
    name = (
        f"every sequence of up to {depth} ops over {len(outcome.alphabet)} letters agrees with the spec model "
        f"({outcome.states} distinct states, {outcome.transitions} transitions)"
    )

    def earn(result: CaseResult) -> CaseResult:
        return earned(result, outcome.coverage, outcome.alphabet, MINIMUM_COVERAGE)

    if outcome.failure is None and not divergences:
        refused = (
            f"the subject refused the search's start ({outcome.refused_setup})"
            if outcome.refused_setup
            else ""
        )
        return [earn(CaseResult("exhaustive", name, "passed", refused, outcome.seconds, case_id="agrees"))]
    found = f"{len(divergences.found)} distinct disagreements, their branches not explored further"
    detail = f"{outcome.failure or found}\nalphabet: {', '.join(outcome.alphabet)}"
    main = earn(CaseResult("exhaustive", name, "failed", detail, seconds=outcome.seconds, case_id="agrees"))
    storage = storage_for(sorted(options.capabilities))
    recordings = {
        signature: Recording("exhaustive", storage, tuple((name, {}) for name in names))
        for signature, names in outcome.recorded.items()
    }
    cases = divergences.cases("exhaustive", f"{outcome.transitions} transitions")
    return [main, *with_replays(cases, recordings, subject, replay_letters, options)]


__all__ = [
    "ExhaustiveOutcome",
    "ExhaustivePart",
    "Letter",
    "alphabet_for",
    "check_exhaustive",
    "check_state_invariants",
    "exhaustive_depth",
    "exhaustive_part",
    "exhaustive_parts",
    "finish_exhaustive",
    "run_exhaustive",
]
