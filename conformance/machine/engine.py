"""The engine's rules in the machine: summary compaction, pressure, the prune pass, overflow
recovery, spill, projections and checkpoints, interleaved with the agent loop's appends and with
every rule of the machine they extend — forks, flushes, closes, resumes and power cuts.

:class:`EngineRules` adds them to the :class:`~conformance.machine.machines.SessionMachine`;
:class:`EngineSessionMachine`, :class:`EngineStorageMachine` and :class:`EngineCrashMachine` are
the three machines with the engine's rules, chosen when a subject declares an engine capability
(:func:`conformance.machine.family.machine_for`). Each engine op is sent only when its capability
is declared, and answered against :mod:`conformance.engine_model`.

Two more checks hold after every step:

- **the whole-log checker.** An engine step on a well-formed log (``spec.checks.log.check_log``
  finds nothing in the model's log before it) must leave a well-formed log: the subject's live log
  (``state``) and, for a storage subject, its stored log read back (``read``) are checked by the
  whole-log checker after the step. The machine's other rules write ill-formed logs on purpose (a
  turn inside a turn, a replace without provenance); on those the checker is not asked, so what it
  judges is the engine's work alone.
- **the projections.** While a unit is registered, every live session's ``state_of`` must be the
  spec's fold of its log (``spec.projections.units.fold_projection``), however the subject got it.
"""

from __future__ import annotations

from functools import partial
from typing import Any, ClassVar, Final

from hypothesis import strategies as st
from hypothesis.stateful import MultipleResults, initialize, invariant, multiple, precondition, rule

from conformance import builders as build
from conformance.driver import Mismatch
from conformance.machine.machines import (
    UNSUPPORTED,
    CrashMachine,
    MachineRun,
    SessionMachine,
    StorageMachine,
)
from conformance.machine.variants import POOL, derive_loop_position, derive_next_step
from conformance.subject import Response
from spec.checks.log import check_log
from spec.log.events import TOOL_RESULT, USER_MESSAGE
from spec.log.json import JsonObject, JsonValue
from spec.projections.catalogue import PROJECTION_CATALOGUE

LONG: Final = "the earlier work, read and written down in full detail " * 12  # ~170 tokens a message
LONG_OUTPUT: Final = "tests/test_parser.py:12: assert parse(text) == expected\n" * 36  # ~2000 code points
SUMMARY: Final = "Condensed: the parser was read and its tests were run."
ATTEMPTS: Final = (
    "text",
    "text",
    "text",
    "long",
    "fail",
    "timeout",
    "cancel-during",
    "cancel-after",
    "image",
    "empty",
    "append-user",
)
STEP_KINDS: Final = ("text", "tool", "tool", "tool-open")
WINDOWS: Final = (None, 300, 600, 1200, 100000)  # tokens; None: no context window given
PRUNERS: Final = ("none", "none", "small", "default", "bad")
PRUNE_CONFIGS: Final[dict[str, JsonValue]] = {
    "small": {"thresholdChars": 400, "headChars": 100, "tailChars": 100},
    "default": None,
    "bad": {"thresholdChars": 50, "headChars": 100, "tailChars": 100},
}
MOMENTS: Final = ("model-request", "tool", "pre-step", "later")
FAULTS: Final = (("fsync", "EIO"), ("write", "ENOSPC"))  # a checkpoint's flush meets one
UNITS: Final = tuple(
    (name, version) for name, versions in PROJECTION_CATALOGUE.items() for version in versions
)


def has_capability(name: str) -> Any:
    """A precondition: the subject declared capability ``name``."""
    return lambda machine: name in machine.capabilities


class EngineRules(SessionMachine):
    """The engine's rules, added to whichever machine a subject gets (see the module docstring)."""

    def __init__(self, run: MachineRun) -> None:
        super().__init__(run)
        self.compactions = 0

    # --- what the rules share ------------------------------------------------------------------

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def next_compaction_id(self) -> str:
        self.compactions += 1
        return f"k{self.compactions}"

    def attempt(self, variant: str) -> JsonObject:
        """A scripted attempt by name (``spec.wire_engine.decode_attempt``'s shapes)."""
        compaction_id = self.next_compaction_id()
        behaviours: dict[str, JsonObject] = {
            "text": {"text": SUMMARY},
            "long": {"text": LONG * 4},
            "fail": {"fail": "the model is unavailable"},
            "timeout": {"timeout": 30},
            "cancel-during": {"cancel": "during"},
            "cancel-after": {"text": SUMMARY, "cancel": "after"},
            "image": {"blocks": [{"type": "text", "text": SUMMARY}, {"type": "image", "data": "AA=="}]},
            "empty": {"blocks": [{"type": "text", "text": "  "}]},
            "append-user": {
                "text": SUMMARY,
                "append": {
                    "type": USER_MESSAGE,
                    "data": build.user_message(f"steer-{compaction_id}", "one more thing"),
                    "surfaceOp": "append",
                },
            },
        }
        return {"compactionId": compaction_id, **behaviours[variant]}

    def is_well_formed(self, session: str) -> bool:
        """Does the model's log of ``session`` pass the whole-log checker?"""
        entry = self.driver.model.live.get(session)
        return entry is not None and not check_log(entry.state.events, entry.state.header)

    def engine_step(self, session: str, op: str, **args: object) -> Response:
        """An engine op on ``session``, answered against the model; on a log that was well formed
        before it, the subject's logs must be well formed after it."""
        well_formed = self.is_well_formed(session)
        answer = self.do(op, id=session, **args)
        if well_formed and answer is not UNSUPPORTED and not self.diverged:
            self.stats.outcomes["whole-log checks"] = self.stats.outcomes.get("whole-log checks", 0) + 1
            self.agreeing(lambda: self.check_well_formed(session, op))
        return answer

    def check_well_formed(self, session: str, op: str) -> None:
        """The whole-log checker on the subject's live log and, with storage, on what it stored."""
        views = [("state", self.driver.raw("state", id=session))]
        if self.storage != "none":
            views.append(("read", self.driver.raw("read", id=session)))
        for view, answer in views:
            result = answer.result if answer.ok and isinstance(answer.result, dict) else None
            if result is None:
                continue  # not stored yet: read has nothing to show
            header = result.get("header") if self.driver.target.format == 4 else None
            found = check_log(result.get("events", []), header, format_version=self.driver.target.format)
            if found:
                rules = ", ".join(sorted({violation.rule for violation in found}))
                shown = "\n  ".join(f"{v.rule} at seq {v.seq}: {v.message}" for v in found[:5])
                raise Mismatch(
                    f"after {op} on {session}, the whole-log checker finds in the {view} log:\n  {shown}",
                    f"{op}: the {view} log breaks {rules}",
                )

    # --- the agent loop, well formed ------------------------------------------------------------

    @rule(session=SessionMachine.sessions, long=st.booleans())
    def agent_turn(self, session: str, long: bool) -> None:
        """The agent loop opens a turn with a question, or closes the open one (its step first)."""
        if session not in self.driver.model.live:
            return
        events = self.events(session)
        turn, step, turns, _ = derive_loop_position(events)
        if turn is None:
            message = build.user_message(f"u{len(events) + 1}", LONG if long else "a short question")
            self.send(*build.open_turn(session, turns, message))
            return
        if step is not None:
            self.send(build.close_step(session, turn, step))
        self.send(build.close_turn(session, turn))

    @rule(
        session=SessionMachine.sessions,
        kind=st.sampled_from(STEP_KINDS),
        long=st.booleans(),
        spill=st.booleans(),
        data=st.data(),
    )
    def agent_step(self, session: str, kind: str, long: bool, spill: bool, data: st.DataObject) -> None:
        """One step of the open turn (a turn is opened first when none is): a text answer; a tool
        call and its result — through the spill policy when the subject has one and it is drawn —
        and the step's end; or a tool call left without its result, the step still open."""
        if session not in self.driver.model.live:
            return
        if derive_loop_position(self.events(session))[0] is None:
            self.agent_turn(session, long)
        events = self.events(session)
        turn, step, _, _ = derive_loop_position(events)
        if turn is None:
            return  # the turn did not open (the example has diverged)
        if step is not None:
            self.send(build.close_step(session, turn, step))
        step = derive_next_step(self.events(session), turn)
        seq = len(self.events(session))
        calls = () if kind == "text" else (f"c{seq}",)
        self.send(*build.open_step(session, turn, step, f"a{seq}", calls))
        if kind == "tool-open":
            return
        for call in calls:
            self.answer(session, call, turn, step, long, spill, data)
        self.send(build.close_step(session, turn, step))

    def answer(
        self, session: str, call: str, turn: int, step: int, long: bool, spill: bool, data: st.DataObject
    ) -> None:
        result = build.tool_result(call, LONG_OUTPUT if long else "3 passed", False, turn, step)
        if not (spill and self.has("spill")):
            self.send(build.append_request(session, TOOL_RESULT, result, surfaceOp="append"))
            return
        self.engine_step(
            session,
            "spill",
            toolName=data.draw(st.sampled_from(("grep", "grep", "read")), label="tool"),
            data=result,
            maxInlineTokens=data.draw(st.sampled_from((None, 20, 200, 2000)), label="maxInlineTokens"),
            storeFails=data.draw(st.sampled_from((False, False, False, True)), label="store fails"),
        )

    # --- summary compaction ---------------------------------------------------------------------

    @precondition(has_capability("compaction"))
    @rule(session=SessionMachine.sessions, variant=st.sampled_from(ATTEMPTS), command=st.booleans())
    def compact(self, session: str, variant: str, command: bool) -> None:
        """``/compact`` with a scripted summary (between turns it compacts; in a turn it is busy)."""
        extra: dict[str, object] = {"sourceCommandId": f"cmd-{self.compactions + 1}"} if command else {}
        self.engine_step(session, "compact", attempt=self.attempt(variant), **extra)

    @precondition(has_capability("compaction"))
    @rule(session=SessionMachine.sessions, variant=st.sampled_from(ATTEMPTS), data=st.data())
    def compact_region(self, session: str, variant: str, data: st.DataObject) -> None:
        """Automatic compaction of a span drawn from the surface, balanced or not."""
        nodes = self.nodes(session)
        if not nodes:
            return
        first = data.draw(st.integers(0, len(nodes) - 1), label="first position")
        last = data.draw(st.integers(first, len(nodes) - 1), label="last position")
        self.engine_step(
            session, "compact_region", start=nodes[first], end=nodes[last], attempt=self.attempt(variant)
        )

    @precondition(has_capability("compaction"))
    @rule(
        session=SessionMachine.sessions,
        variants=st.lists(st.sampled_from(ATTEMPTS), min_size=2, max_size=2),
        overflow=st.booleans(),
        window=st.sampled_from(WINDOWS),
        pruner=st.sampled_from(PRUNERS),
    )
    def compact_if_needed(
        self, session: str, variants: list[str], overflow: bool, window: int | None, pruner: str
    ) -> None:
        """Pressure with a drawn window (or none), or the forced overflow compaction; with or
        without a pruner first."""
        args: dict[str, object] = {"trigger": "context-overflow" if overflow else "pressure"}
        if window is not None:
            args["contextWindow"] = window
        if pruner != "none":
            args["prune"] = PRUNE_CONFIGS[pruner]
        attempts = [self.attempt(variant) for variant in variants]
        self.engine_step(session, "compact_if_needed", attempts=attempts, **args)

    # --- prune, overflow ------------------------------------------------------------------------

    @precondition(has_capability("prune"))
    @rule(session=SessionMachine.sessions, pruner=st.sampled_from(("small", "small", "default", "bad")))
    def prune(self, session: str, pruner: str) -> None:
        self.engine_step(session, "prune", config=PRUNE_CONFIGS[pruner])

    @precondition(has_capability("overflow"))
    @rule(
        session=SessionMachine.sessions,
        variant=st.sampled_from(ATTEMPTS),
        code=st.sampled_from(("CONTEXT_WINDOW_EXCEEDED", "CONTEXT_WINDOW_EXCEEDED", "RATE_LIMITED")),
        pruner=st.sampled_from(("none", "small")),
        retries=st.sampled_from((None, None, 0, 2)),
    )
    def overflow(self, session: str, variant: str, code: str, pruner: str, retries: int | None) -> None:
        """A model request refused for its size (mostly): the recovery compacts and says whether to retry."""
        args: dict[str, object] = {"code": code}
        if pruner != "none":
            args["prune"] = PRUNE_CONFIGS[pruner]
        if retries is not None:
            args["policy"] = {"maxOverflowRetries": retries}
        self.engine_step(session, "overflow", attempt=self.attempt(variant), **args)

    @precondition(has_capability("overflow"))
    @rule(session=SessionMachine.sessions)
    def overflow_reset(self, session: str) -> None:
        self.do("overflow_reset", id=session)

    # --- spill ----------------------------------------------------------------------------------

    @precondition(has_capability("spill"))
    @rule(data=st.data())
    def spill_read(self, data: st.DataObject) -> None:
        """Read back a text the spill store saved (or one it never did)."""
        saved = list(self.driver.model.engine.spills) or ["memory://spill/nothing-here"]
        self.do("spill_read", locator=data.draw(st.sampled_from(saved), label="locator"))

    # --- projections ----------------------------------------------------------------------------

    @initialize()
    def register_units(self) -> None:
        """Every run starts with the catalogue's units registered, so that their states are
        compared from the first event on."""
        if self.has("projection"):
            for name, versions in PROJECTION_CATALOGUE.items():
                self.do("project", unit=name, stateVersion=next(iter(versions)))

    @precondition(has_capability("projection"))
    @rule(unit=st.sampled_from(UNITS), release=st.sampled_from((False, False, True)))
    def project(self, unit: tuple[str, int], release: bool) -> None:
        """Register a unit at a drawn version (another version than the key's is refused), or, one
        time in three, let one registrant of its key go (so that the cache is mostly in use)."""
        name, version = unit
        if release:
            self.do("unproject", unit=name)
        else:
            self.do("project", unit=name, stateVersion=version)

    @precondition(lambda machine: "projection" in machine.capabilities and machine.storage != "none")
    @rule(name=st.sampled_from(POOL), unit=st.sampled_from(tuple(PROJECTION_CATALOGUE)))
    def state_of_stored(self, name: str, unit: str) -> None:
        """A unit's state for what is stored under a name, live or not."""
        self.do("state_of_stored", id=name, unit=unit)

    @invariant()
    def projections_match_the_fold(self) -> None:
        if not self.has("projection") or self.diverged:
            return
        for session in sorted(self.driver.model.live):
            for key in sorted(self.driver.model.engine.units):
                check = partial(self.driver.step, "state_of", id=session, unit=key)
                if self.agreeing(check, goes_on=True) is None:
                    return
            if self.agreeing(partial(self.driver.step, "snapshot", id=session), goes_on=True) is None:
                return

    # --- durability checkpoints -----------------------------------------------------------------

    @precondition(has_capability("checkpoint"))
    @rule(session=SessionMachine.sessions, moment=st.sampled_from(MOMENTS), guarded=st.booleans())
    def checkpoint(self, session: str, moment: str, guarded: bool) -> None:
        """A checkpoint at a moment (``later`` is none of the three), with an action inside the open
        turn when one is drawn and a turn is open."""
        turn, _, _, _ = derive_loop_position(self.events(session))
        args: dict[str, object] = {"moment": moment}
        if guarded and turn is not None:
            args["then"] = {"type": "todo/write", "data": {"todos": [{"content": "x", "status": "pending"}]}}
        self.engine_step(session, "checkpoint", **args)


class EngineSessionMachine(EngineRules):
    """The session machine with the engine's rules."""

    storage: ClassVar[str] = "none"


class EngineStorageMachine(EngineRules, StorageMachine):
    """The storage machine with the engine's rules."""


class EngineCrashMachine(EngineRules, CrashMachine):
    """The crash machine with the engine's rules: compactions, prunes and spills cut by power loss
    too, each crash resolved as the crash machine does, the projection cache read straight after it;
    a power cut right after every session's flush, whose cache rows are then behind the log; and a
    checkpoint on a disk whose next write or fsync fails."""

    @precondition(has_capability("checkpoint"))
    @rule(
        session=SessionMachine.sessions,
        moment=st.sampled_from(MOMENTS[:3]),
        fault=st.sampled_from(FAULTS),
    )
    def checkpoint_on_failing_disk(self, session: str, moment: str, fault: tuple[str, str]) -> None:
        """An event appended inside a turn (one opened if none is), a fault armed on the next write
        or fsync, then a checkpoint guarding an action: it must fail closed, and the action must
        never happen."""
        if session not in self.driver.model.live:
            return
        # Something for the flush to write, with no turn/end (whose cache write flushes the log):
        # the fault is then met by this checkpoint, never left armed for a write the model omits.
        if derive_loop_position(self.events(session))[0] is None:
            self.agent_turn(session, long=False)
        else:
            data = build.user_message(f"u{len(self.events(session))}", "and one more thing")
            self.send(build.append_request(session, USER_MESSAGE, data, surfaceOp="append"))
        self.do("fail_next", fsOp=fault[0], errno=fault[1])
        then = {"type": "todo/write", "data": {"todos": [{"content": "y", "status": "pending"}]}}
        self.engine_step(session, "checkpoint", moment=moment, then=then)

    @precondition(lambda machine: "projection" in machine.capabilities and bool(machine.driver.model.live))
    @rule(target=SessionMachine.sessions)
    def power_cut_after_flush(self) -> MultipleResults[str]:
        """Every live session flushed (what came after a cache row's turn/end is then durable, the
        row behind the log), power loss keeping nothing unsynced, the cache read as after any cut,
        then every survivor resumed."""
        if self.diverged:
            return multiple()
        for session in sorted(self.driver.model.live):
            self.do("flush", id=session)
        self.stats.count("crash after flush")
        self.program.append("crash 'none'")
        self.steps.append(("crash", {"keep": "none"}))
        if self.agreeing(lambda: self.driver.crash("none")) is None:
            return multiple()
        self.after_power_cut()
        survivors = sorted(self.driver.model.stored)
        return multiple(*(session for session in survivors if self.do("resume", id=session).ok))

    def after_power_cut(self) -> None:
        """Before any resume rewrites them, every unit's state of every stored session, read
        through the cache (rows that may be behind what the cut kept)."""
        if not self.has("projection"):
            return
        for name in sorted(self.driver.model.stored):
            for unit in sorted(PROJECTION_CATALOGUE):
                self.do("state_of_stored", id=name, unit=unit)


__all__ = [
    "EngineCrashMachine",
    "EngineRules",
    "EngineSessionMachine",
    "EngineStorageMachine",
]
