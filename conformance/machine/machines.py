"""The machines: :class:`SessionMachine` for every subject, :class:`StorageMachine` for one that
stores, :class:`CrashMachine` for one with a crash seam. Each drives its subject and the spec model
side by side through a :class:`~conformance.driver.Driver`, which raises on the first answer that
differs; after every step each live session's ``state`` is compared too.

The sessions a run creates go into the ``sessions`` bundle (a close moves one to ``closed``, a
resume moves it back), so a failing program names them: ``sessions_0 = state.create(...)``, then
``state.append_user(session=sessions_0, ...)``. A new session's name comes from the small pool
:data:`~conformance.machine.variants.POOL`, mostly one that is free (:func:`new_names`), and
Hypothesis prints a name that is some bundled session's id as that session (``child=sessions_0``:
the child would take the id of ``sessions_0``). A bundled session may have been lost in a crash
since; a request naming it must then miss, as one naming an id of
:data:`~conformance.machine.variants.MISSING_IDS` must.

A machine is made with the :class:`MachineRun` it belongs to: the subject, and the statistics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, TypeVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from conformance import builders as build
from conformance.divergence import Divergences, describe_program
from conformance.driver import Driver, Mismatch, Unsupported, as_sent, describe_request
from conformance.machine.replay import Step
from conformance.machine.variants import (
    BOUNDARIES,
    ERROR_FLAGS,
    INVALID_KINDS,
    KEEPS,
    LOG_ONLY_KINDS,
    METAS,
    MISSING_IDS,
    MORE_BLOCKS,
    MOSTLY,
    PLAIN_SEEDS,
    POOL,
    REPLACE_VARIANTS,
    REWRITE_VARIANTS,
    TEXTS,
    boundary_for,
    derive_announced_calls,
    derive_shadowed_seqs,
    derive_turn_and_step,
    invalid_append,
    log_only_payloads,
    meta_for,
    plain_seed_for,
    replace_append,
    rewrite_append,
    seed_prefix,
)
from conformance.subject import Response, Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.log.events import ASSISTANT_MESSAGE, TOOL_RESULT, USER_MESSAGE, Event
from spec.log.json import JsonValue, thaw_json
from spec.log.session import ABSENT
from spec.protocol import UNSUPPORTED_OP, Request

T = TypeVar("T")
Bundled = str | MultipleResults[str]  # the session id a rule puts in its bundle, or nothing (refused)


@dataclass
class MachineStats:
    """How much the machine did: examples run, rule steps taken, requests sent, seconds spent."""

    examples: int = 0
    steps: int = 0
    requests: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)  # "op ok" / "op CODE" -> count
    unsupported: set[str] = field(default_factory=set)  # ops the subject answered UNSUPPORTED_OP
    refused: dict[str, int] = field(default_factory=dict)  # how many times, per op

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    def count(self, outcome: str) -> None:
        self.steps += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


@dataclass(frozen=True)
class MachineRun:
    """What every machine of one run shares: the subject it drives, the statistics it keeps, the
    subject's target, and where disagreements go. With ``divergences``, an example stops at its
    first disagreement, which is recorded there, and the run goes on with the next example;
    without, the disagreement fails the run (so that Hypothesis can shrink it)."""

    subject: Subject
    stats: MachineStats
    target: Target = DEFAULT_TARGET
    divergences: Divergences | None = None
    capabilities: frozenset[str] = frozenset()  # what the subject declared (the engine rules ask)
    recorded: dict[str, tuple[Step, ...]] = field(
        default_factory=dict
    )  # the steps to each first disagreement


UNSUPPORTED: Final = Response(ok=False, error_code=UNSUPPORTED_OP, error_message="the subject lacks this op")
# Ops that change neither the subject nor the model: a disagreement on one is recorded and the
# example goes on (the rule that sent it sees the op as unsupported).
READ_ONLY_OPS: Final = frozenset({"state", "read", "snapshot", "state_of", "state_of_stored", "export"})
DIVERGED: Final = Response(
    ok=False, error_code="DIVERGED", error_message="the example stopped at a disagreement"
)


def has_live_session(machine: SessionMachine) -> bool:
    return bool(machine.driver.model.live)


def has_free_name(machine: SessionMachine) -> bool:
    return bool(free_names(machine))


def free_names(machine: SessionMachine) -> list[str]:
    """The names of the pool no session is live or stored under."""
    model = machine.driver.model
    return [name for name in POOL if name not in model.live and name not in model.stored]


@st.composite
def new_names(draw: st.DrawFn) -> str:
    """A name to create a session under: three times in four one that no session is live or
    stored under (when there is one), else any name of the pool, taken or not."""
    free = free_names(draw(st.runner()))
    return draw(st.sampled_from(free if free and draw(st.sampled_from(MOSTLY)) else POOL))


class SessionMachine(RuleBasedStateMachine):
    """The core ops: create (plain, seeded, with lineage meta, invalid meta), append of every kind
    (messages, tool calls and results, log-only boundaries, invalid ones), replace like a summary,
    rewrite like a prune, fork at good and bad boundaries, and the clock."""

    storage: ClassVar[str] = "none"  # what the subject is reset to
    sessions: ClassVar[Bundle[str]] = Bundle("sessions")

    def __init__(self, run: MachineRun) -> None:
        super().__init__()
        self.stats = run.stats
        self.capabilities = run.capabilities
        self.stats.examples += 1
        self.divergences = run.divergences
        self.program: list[str] = []
        self.steps: list[tuple[str, dict[str, object]]] = []  # the program, for its replay (as_sent then)
        self.recorded = run.recorded
        self.diverged = False
        self.driver = Driver(run.subject, target=run.target)
        self.do("reset", storage=self.storage)
        self.do("clock", now=build.START_TIME)
        self.steps.clear()  # every replay starts so (conformance.machine.replay.replay_program)

    def teardown(self) -> None:
        self.stats.requests += self.driver.requests

    # --- what the rules share ------------------------------------------------------------------

    def send(self, *requests: Request) -> None:
        for op, args in requests:
            self.do(op, **args)

    def do(self, op: str, **args: object) -> Response:
        """One step: ``op`` sent to the subject and the model, whose answers must agree. Once the
        example has diverged, nothing more is sent."""
        if self.diverged:
            return DIVERGED
        self.program.append(describe_request(op, args))
        self.steps.append((op, args))
        try:
            answer: Response | None = self.agreeing(
                lambda: self.driver.step(op, **args), goes_on=op in READ_ONLY_OPS
            )
        except Unsupported:
            self.stats.unsupported.add(op)
            self.stats.refused[op] = self.stats.refused.get(op, 0) + 1
            return UNSUPPORTED
        if answer is None:
            return DIVERGED if self.diverged else UNSUPPORTED
        self.stats.count(f"{op} {'ok' if answer.ok else answer.error_code}")
        return answer

    def agreeing(self, check: Callable[[], T], goes_on: bool = False) -> T | None:
        """``check()``, or ``None`` when it met a disagreement that this run records and goes on
        past: the example then stops (every later step is a no-op), unless ``goes_on`` says the
        step changed nothing (a read-only op), so that one difference in what a subject reports
        does not hide the rest of its behaviour."""
        if self.diverged:
            return None
        try:
            return check()
        except Mismatch as mismatch:
            if self.divergences is None:
                raise
            self.diverged = not goes_on
            self.divergences.record(
                mismatch.signature, describe_program(self.program, str(mismatch)), stops=not goes_on
            )
            if mismatch.signature not in self.recorded:
                self.recorded[mismatch.signature] = tuple((op, as_sent(args)) for op, args in self.steps)
            return None

    def events(self, session: str) -> tuple[Event, ...]:
        entry = self.driver.model.live.get(session)
        return entry.state.events if entry is not None else ()

    def nodes(self, session: str) -> tuple[int, ...]:
        entry = self.driver.model.live.get(session)
        return entry.state.surface.nodes if entry is not None else ()

    def miss(self, op: str, session: str) -> None:
        """``op`` naming a session no rule created."""
        if op == "append":
            self.do(
                "append", id=session, type=USER_MESSAGE, data=build.user_message("u0"), surfaceOp="append"
            )
        elif op == "fork":
            self.do("fork", source=session)
        else:
            self.do(op, id=session)

    def answer_a_call(
        self, session: str, data: st.DataObject, cite: bool, error: bool | str, text: str
    ) -> None:
        """A tool/result for a call the log announced (an unknown call when there is none), its
        content now and then several blocks, with message blocks after it now and then."""
        announced = derive_announced_calls(self.events(session))
        seq, call = data.draw(st.sampled_from(announced), label="call") if announced else (None, "c-unknown")
        turn, step = derive_turn_and_step(self.events(session))
        more = data.draw(st.sampled_from(MORE_BLOCKS), label="more blocks")
        # A stored log's tool/result is read back only with its one tool-result block (the stored
        # message rule, spec.format.legacy.validate_stored_events), which a store may apply to
        # either storage (a database serves "memory" too): blocks after it only without storage.
        after = (
            data.draw(st.sampled_from(MORE_BLOCKS), label="blocks after it") if self.storage == "none" else ()
        )
        self.do(
            "append",
            id=session,
            type=TOOL_RESULT,
            data=build.tool_result(call, text, error, turn, step, more, after),
            surfaceOp="append",
            sourceEventSeqs=[seq] if cite and seq is not None else ABSENT,
        )

    # --- sessions ------------------------------------------------------------------------------

    @initialize(
        target=sessions,
        name=st.just(POOL[0]),
        seed=st.sampled_from(PLAIN_SEEDS),
        meta=st.sampled_from(METAS[:6]),
    )
    def create_first(self, name: str, seed: str, meta: str) -> Bundled:
        """Every run starts with a session, valid meta and no seed or an empty one: Hypothesis
        runs each example with some rules left out, and one without ``create`` would have none."""
        return self.create(name, seed, meta)

    @rule(
        target=sessions,
        name=new_names(),
        seed=st.sampled_from(PLAIN_SEEDS),
        meta=st.sampled_from(METAS),
    )
    def create(self, name: str, seed: str, meta: str) -> Bundled:
        answer = self.do("create", id=name, seed=plain_seed_for(seed), meta=meta_for(meta))
        return name if answer.ok else multiple()

    @precondition(has_free_name)
    @rule(
        target=sessions,
        donor=sessions,
        name=new_names(),
        end_seed=st.booleans(),
        meta=st.sampled_from(METAS),
        data=st.data(),
    )
    def create_from_prefix(
        self, donor: str, name: str, end_seed: bool, meta: str, data: st.DataObject
    ) -> Bundled:
        """A session seeded with a prefix of the donor's log (an empty seed when it has none). Only
        while a name is free: with every name taken, ``create`` is refused before the seed is read."""
        events = self.events(donor)
        length = data.draw(st.integers(1, len(events)), label="prefix length") if events else 0
        seed = seed_prefix(events, length, end_seed) if events else []
        answer = self.do("create", id=name, seed=seed, meta=meta_for(meta))
        return name if answer.ok else multiple()

    @rule(
        target=sessions,
        source=sessions,
        child=new_names(),
        boundary=st.sampled_from(BOUNDARIES),
        data=st.data(),
    )
    def fork(self, source: str, child: str, boundary: str, data: st.DataObject) -> Bundled:
        count = len(self.events(source))
        chosen = data.draw(st.integers(0, count), label="boundary seq") if boundary.startswith("any") else 0
        answer = self.do("fork", source=source, boundary=boundary_for(boundary, count, chosen), child=child)
        return child if answer.ok else multiple()

    @rule(target=sessions, source=sessions, child=new_names(), beyond=st.integers(0, 2))
    def fork_past_the_end(self, source: str, child: str, beyond: int) -> Bundled:
        """A fork at a boundary just past the source's last event (its length, or one or two more):
        no such event, so INVALID_BOUNDARY, an empty log included. The general fork rule draws this
        boundary among ten; this rule makes sure every run meets the off-by-one edge."""
        boundary = len(self.events(source)) + beyond
        answer = self.do("fork", source=source, boundary=boundary, child=child)
        return child if answer.ok else multiple()

    @rule(session=st.sampled_from(MISSING_IDS), op=st.sampled_from(("append", "fork")))
    def touch_missing(self, session: str, op: str) -> None:
        """An append to, or a fork of, a session no rule created."""
        self.miss(op, session)

    @precondition(has_live_session)
    @rule(delta=st.integers(min_value=0, max_value=5))
    def tick(self, delta: int) -> None:
        self.do("clock", now=self.driver.model.now + delta)

    # --- appends -------------------------------------------------------------------------------

    @rule(session=sessions, text=st.sampled_from(TEXTS), more=st.sampled_from(MORE_BLOCKS))
    def append_user(self, session: str, text: str, more: tuple[JsonValue, ...] = ()) -> None:
        data = build.user_message(f"u{len(self.events(session))}", text, more=more)
        self.do("append", id=session, type=USER_MESSAGE, data=data, surfaceOp="append")

    @rule(
        session=sessions,
        calls=st.integers(min_value=0, max_value=2),
        empty=st.booleans(),
        cite=st.sampled_from(("no", "int", "float")),
        more=st.sampled_from(MORE_BLOCKS),
    )
    def append_assistant(
        self, session: str, calls: int, empty: bool, cite: str, more: tuple[JsonValue, ...]
    ) -> None:
        """An assistant message announcing ``calls`` tool calls after its text and ``more`` blocks,
        citing the last surface node (as an integer, or an integral float) or not."""
        seq, nodes = len(self.events(session)), self.nodes(session)
        turn, step = derive_turn_and_step(self.events(session))
        call_ids = tuple(f"c{seq}-{index}" for index in range(calls))
        text = None if empty else "ok"
        data = build.assistant_message(f"a{seq}", text, call_ids, turn, step, more=() if empty else more)
        cited: list[JsonValue] = [nodes[-1] if cite == "int" else float(nodes[-1])] if nodes else []
        sources: object = cited if cite != "no" else ABSENT
        self.do(
            "append",
            id=session,
            type=ASSISTANT_MESSAGE,
            data=data,
            surfaceOp="append",
            sourceEventSeqs=sources,
        )

    @rule(
        session=sessions,
        cite=st.booleans(),
        error=st.sampled_from(ERROR_FLAGS),
        text=st.sampled_from(TEXTS),
        data=st.data(),
    )
    def append_tool_result(
        self, session: str, cite: bool, error: bool | str, text: str, data: st.DataObject
    ) -> None:
        self.answer_a_call(session, data, cite, error, f"result {text}")

    @rule(session=sessions, kind=st.sampled_from(LOG_ONLY_KINDS), data=st.data())
    def append_log_only(self, session: str, kind: str, data: st.DataObject) -> None:
        payload = data.draw(log_only_payloads(kind, self.events(session)), label="data")
        # The compaction bracket is the engine's to write (engine_append); a caller's append of it,
        # like any store-only type, is refused (STORE_ONLY_EVENT), and is sent now and then too.
        engine = kind.startswith("compaction/") and data.draw(st.sampled_from(MOSTLY), label="by the engine")
        self.do("engine_append" if engine else "append", id=session, type=kind, data=payload)

    @rule(session=sessions, kind=st.sampled_from(INVALID_KINDS))
    def append_invalid(self, session: str, kind: str) -> None:
        self.do("append", id=session, **invalid_append(kind, len(self.events(session))))

    @rule(
        session=sessions,
        variant=st.sampled_from(REPLACE_VARIANTS),
        from_head=st.booleans(),
        extra=st.integers(min_value=0, max_value=2),
        data=st.data(),
    )
    def replace_span(
        self, session: str, variant: str, from_head: bool, extra: int, data: st.DataObject
    ) -> None:
        """A summary replacing 1 + ``extra`` surface nodes, from the head of the surface or not; on
        an empty surface, mostly a user message first, so that there is something to replace."""
        events, nodes = self.events(session), self.nodes(session)
        if not nodes and data.draw(st.sampled_from(MOSTLY), label="fill the empty surface first"):
            return self.append_user(session, "filler")
        start = (
            0 if from_head or not nodes else data.draw(st.integers(0, len(nodes) - 1), label="start index")
        )
        shadowed = derive_shadowed_seqs(events, nodes)
        stray = len(events)
        if variant == "start-shadowed" and shadowed:
            stray = data.draw(st.sampled_from(shadowed), label="shadowed start")
        request = replace_append(variant, nodes, len(events), nodes[start : start + extra + 1], stray)
        self.do("append", id=session, **request)

    @rule(session=sessions, variant=st.sampled_from(REWRITE_VARIANTS), data=st.data())
    def rewrite_result(self, session: str, variant: str, data: st.DataObject) -> None:
        """A prune-like rewrite of a tool/result node (or, as the variant says, of another node);
        with no result on the surface, mostly a tool result first, so that there is one."""
        events, nodes = self.events(session), self.nodes(session)
        results = [node for node in nodes if events[node].get("type") == TOOL_RESULT]
        others = [node for node in nodes if events[node].get("type") != TOOL_RESULT]
        if not results and data.draw(st.sampled_from(MOSTLY), label="answer a call first"):
            return self.answer_a_call(session, data, cite=False, error=False, text="result 0")
        original: JsonValue
        if variant == "not-a-result" and others:
            target, original = data.draw(st.sampled_from(others), label="node"), build.tool_result("c-other")
        elif results:
            target = data.draw(st.sampled_from(results), label="node")
            original = thaw_json(events[target]["data"])
        else:
            target, original = (nodes[0] if nodes else 0), build.tool_result("c-none")
        self.do("append", id=session, **rewrite_append(variant, nodes, target, original))

    # --- after every step ----------------------------------------------------------------------

    @invariant()
    def every_live_session_matches_the_model(self) -> None:
        self.agreeing(self.driver.check_all_live)


class StorageMachine(SessionMachine):
    """The session machine, on a subject that stores: flush, close, resume, read and reopen too.
    A closed session leaves ``sessions`` for ``closed``, and a resume brings it back."""

    storage: ClassVar[str] = "memory"
    closed: ClassVar[Bundle[str]] = Bundle("closed")

    @rule(session=SessionMachine.sessions)
    def flush(self, session: str) -> None:
        self.do("flush", id=session)

    @rule(target=closed, session=consumes(SessionMachine.sessions))
    def close(self, session: str) -> Bundled:
        return session if self.do("close", id=session).ok else multiple()

    @rule(target=SessionMachine.sessions, session=consumes(closed))
    def resume(self, session: str) -> Bundled:
        return session if self.do("resume", id=session).ok else multiple()

    @rule(name=st.sampled_from(POOL))
    def read(self, name: str) -> None:
        """A reader's view of what is stored under a name, whether a session is live under it or not."""
        self.do("read", id=name)

    @rule(session=SessionMachine.sessions)
    def reopen(self, session: str) -> None:
        """Close a session and resume it at once: the resume rules without a crash."""
        self.do("close", id=session)
        self.do("resume", id=session)

    @rule(session=st.sampled_from(MISSING_IDS), op=st.sampled_from(("append", "fork", "resume", "read")))
    def touch_missing(self, session: str, op: str) -> None:
        """An append to, a fork, a resume or a read of a session no rule created."""
        self.miss(op, session)


class CrashMachine(StorageMachine):
    """The storage machine, on a subject whose storage is a simulated power-loss filesystem: power
    cuts too, each one's survivors checked against SPEC-DECISIONS D3 items 1-3 before the model
    adopts them."""

    storage: ClassVar[str] = "file"

    @precondition(has_live_session)
    @rule(
        target=SessionMachine.sessions,
        keep=st.sampled_from(KEEPS),
        then_resume=st.sampled_from(MOSTLY),
        data=st.data(),
    )
    def crash(self, keep: str, then_resume: bool, data: st.DataObject) -> MultipleResults[str]:
        """Power loss keeping nothing unsynced, everything, or a cut of one unsynced file; then
        (most times, so that the run goes on) every surviving session is resumed at once, and is
        back in play."""
        if self.diverged:
            return multiple()
        self.stats.count(f"crash {keep}")
        keep_plan = self.plan_cut(data) if keep == "cut" else keep
        self.program.append(f"crash {keep_plan!r}")
        self.steps.append(("crash", {"keep": keep_plan}))
        if self.agreeing(lambda: self.driver.crash(keep_plan)) is None and self.diverged:
            return multiple()
        self.after_power_cut()
        if not then_resume:
            return multiple()
        survivors = sorted(self.driver.model.stored)
        return multiple(*(session for session in survivors if self.do("resume", id=session).ok))

    def after_power_cut(self) -> None:
        """What a machine checks between a power cut and the resumes (nothing here)."""

    def plan_cut(self, data: st.DataObject) -> Any:
        """Keep a drawn number of one unsynced file's bytes (nothing when none are unsynced)."""
        unsynced = self.driver.raw("unsynced")
        files = unsynced.result if unsynced.ok and isinstance(unsynced.result, list) else []
        if not files:
            return "none"
        entry = data.draw(st.sampled_from(files), label="unsynced file")
        return {
            "path": entry["path"],
            "bytes": data.draw(st.integers(0, int(entry["bytes"])), label="bytes kept"),
        }
