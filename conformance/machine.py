"""Model checking by Hypothesis: a stateful machine drives a subject and the spec model side by side.

The machine holds a small pool of session ids and, step by step, creates sessions (plain, seeded,
with lineage meta, invalid meta), appends every kind of event (valid messages, tool calls and
results, log-only boundaries, and invalid ones), replaces head spans like a summary, rewrites tool
results like a prune, forks at good and bad boundaries and, for storage subjects, flushes, closes,
reads, resumes and crashes. Every answer is compared with the model's (events, surface,
replaceGeneration, derived messages, firstLiveSeq, header, error codes) and after every step each
live session's ``state`` is compared too. A crash is resolved by reading what survived and checking
it against SPEC-DECISIONS D3 items 1-3 before the model adopts it.

Hypothesis machines are classes, so :func:`build_machine` makes one per subject.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conformance import builders as build
from conformance.driver import Driver
from conformance.report import CaseResult, Options
from conformance.subject import Subject
from spec.log.events import (
    ASSISTANT_MESSAGE,
    END_SEED,
    STEP_START,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    tool_call_ids_of,
)
from spec.log.json import JsonValue, thaw_json
from spec.log.session import ABSENT, SessionState

POOL: Final = ("s0", "s1", "s2")
START_TIME: Final = 1_000  # ms: the clock the machine starts every run at
PICK: Final = st.integers(min_value=0, max_value=1 << 16)

# (max_examples, stateful_step_count, derandomize, shrink) per Hypothesis profile name
MACHINE_PROFILES: Final = {
    "ci": (100, 50, True, False),
    "thorough": (400, 60, False, True),
}

LOG_ONLY_KINDS: Final = (
    "turn/start",
    "turn/start",
    "turn/end",
    "step/start",
    "step/start",
    "step/end",
    "tool/call",
    "assistant/chunk",
    "todo/write",
    "compaction/start",
    "compaction/end",
    "session/end-seed",
    "unknown/kind",
)
INVALID_KINDS: Final = (
    "surfaceOp-null",
    "surfaceOp-missing",
    "surfaceOp-string",
    "surfaceOp-on-log-only",
    "provenance-on-log-only",
    "empty-type",
    "legacy-header-delta",
    "legacy-fallback",
    "replace-op-malformed",
    "provenance-duplicate",
    "provenance-not-earlier",
    "provenance-empty",
    "provenance-not-array",
    "provenance-not-seq",
)
REPLACE_VARIANTS: Final = (
    "full",
    "full",
    "extra",
    "missing-one",
    "no-provenance",
    "start-shadowed",
    "end-unknown",
    "inverted",
)
REWRITE_VARIANTS: Final = (
    "ok",
    "ok",
    "is-error",
    "message-id",
    "call-id",
    "not-a-result",
    "two-nodes",
    "missing-provenance",
)
BOUNDARIES: Final = ("absent", "last", "any", "past-end", "negative", "string", "float")
SEEDS: Final = ("none", "none", "empty", "prefix", "prefix-end-seed")
METAS: Final = ("none", "none", "cwd", "created", "depth", "subagent", "bad-cwd", "bad-depth", "not-object")


@dataclass
class MachineStats:
    """How much the machine did: examples run, rule steps taken, requests sent, seconds spent."""

    examples: int = 0
    steps: int = 0
    requests: int = 0
    seconds: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)  # "op ok" / "op CODE" -> count

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class MachineOutcome:
    """One machine run: ``failure`` is the (shrunk) counterexample, ``None`` when every step agreed."""

    stats: MachineStats
    failure: str | None
    storage: str


def profile_name() -> str:
    """The Hypothesis profile to run under: ``HYPOTHESIS_PROFILE``, default ``ci``."""
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    return name if name in MACHINE_PROFILES else "ci"


def machine_settings(profile: str) -> settings:
    """``ci`` is deterministic and small; ``thorough`` is long and random."""
    examples, steps, derandomize, shrink = MACHINE_PROFILES.get(profile, MACHINE_PROFILES["ci"])
    phases = [Phase.explicit, Phase.reuse, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=derandomize,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
        print_blob=False,
    )


def storage_kind(capabilities: Sequence[str]) -> str:
    """A crash-seam subject stores on its power-loss filesystem, a storage one in memory."""
    if "crash-seam" in capabilities:
        return "file"
    if "storage" in capabilities:
        return "memory"
    return "none"


def run_machine(subject: Any, capabilities: Sequence[str], profile: str | None = None) -> MachineOutcome:
    """Run the machine against ``subject`` under ``profile``; the failure text names the steps."""
    stats = MachineStats()
    storage = storage_kind(capabilities)
    machine = build_machine(subject, storage, "crash-seam" in capabilities, stats)
    started = time.perf_counter()
    failure: str | None = None
    try:
        run_state_machine_as_test(machine, settings=machine_settings(profile or profile_name()))  # type: ignore[no-untyped-call,unused-ignore]
    except Exception as error:
        notes = "\n".join(getattr(error, "__notes__", ()))
        failure = f"{type(error).__name__}: {error}\n{notes}".strip()
    stats.seconds = time.perf_counter() - started
    return MachineOutcome(stats, failure, storage)


def build_machine(
    subject: Any, storage: str, crash_seam: bool, stats: MachineStats
) -> type[RuleBasedStateMachine]:
    """A RuleBasedStateMachine class bound to ``subject``."""
    has_storage = storage != "none"

    class SubjectMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            stats.examples += 1
            self.driver = Driver(subject)
            self.driver.step("reset", storage=storage)
            self.driver.step("clock", now=START_TIME)

        def teardown(self) -> None:
            stats.requests += self.driver.requests

        # --- helpers ---------------------------------------------------------------------------

        def target(self, pick: int) -> str:
            """Mostly a live session; one time in ten any id of the pool (maybe not live)."""
            live = sorted(self.driver.model.live)
            if live and pick % 10 != 9:
                return live[pick % len(live)]
            return POOL[pick % len(POOL)]

        def live(self, session_id: str) -> SessionState | None:
            entry = self.driver.model.live.get(session_id)
            return entry.state if entry is not None else None

        def events(self, session_id: str) -> tuple[Event, ...]:
            state = self.live(session_id)
            return state.events if state is not None else ()

        def nodes(self, session_id: str) -> tuple[int, ...]:
            state = self.live(session_id)
            return state.surface.nodes if state is not None else ()

        def next_seq(self, session_id: str) -> int:
            return len(self.events(session_id))

        def turn_and_step(self, session_id: str) -> tuple[int, int]:
            turn, step = 1, 1
            for event in self.events(session_id):
                data = event.get("data")
                if (
                    event.get("type") == TURN_START
                    and isinstance(data, dict)
                    and isinstance(data.get("turn"), int)
                ):
                    turn, step = int(data["turn"]), 1  # type: ignore[arg-type]
                elif (
                    event.get("type") == STEP_START
                    and isinstance(data, dict)
                    and isinstance(data.get("step"), int)
                ):
                    step = int(data["step"])  # type: ignore[arg-type]
            return turn, step

        def turns_started(self, session_id: str) -> int:
            return sum(1 for event in self.events(session_id) if event.get("type") == TURN_START)

        def do(self, op: str, **args: Any) -> Any:
            stats.steps += 1
            answer = self.driver.step(op, **args)
            outcome = f"{op} {'ok' if answer.ok else answer.error_code}"
            stats.outcomes[outcome] = stats.outcomes.get(outcome, 0) + 1
            return answer

        # --- sessions --------------------------------------------------------------------------

        @initialize(seeded=st.sampled_from(("none", "empty")), meta=st.sampled_from(METAS[:6]))
        def first_session(self, seeded: str, meta: str) -> None:
            self.create(POOL[0], seeded, meta, 0)

        @rule(id_pick=PICK, seeded=st.sampled_from(SEEDS), meta=st.sampled_from(METAS), pick=PICK)
        def create_session(self, id_pick: int, seeded: str, meta: str, pick: int) -> None:
            """Mostly an id neither live nor stored; one time in ten any id of the pool."""
            model = self.driver.model
            free = [
                session_id
                for session_id in POOL
                if session_id not in model.live and session_id not in model.stored
            ]
            session_id = (
                free[id_pick % len(free)] if free and id_pick % 10 != 9 else POOL[id_pick % len(POOL)]
            )
            self.create(session_id, seeded, meta, pick)

        def create(self, session_id: str, seeded: str, meta: str, pick: int) -> None:
            self.do("create", id=session_id, seed=self.seed_for(seeded, pick), meta=meta_for(meta))

        def seed_for(self, seeded: str, pick: int) -> object:
            if seeded == "none":
                return ABSENT
            if seeded == "empty":
                return []
            donors = [events for events in (self.events(sid) for sid in POOL) if events]
            if not donors:
                return []
            donor = donors[pick % len(donors)]
            prefix: list[JsonValue] = [thaw_json(event) for event in donor[: 1 + pick % len(donor)]]
            if seeded == "prefix-end-seed" and (not prefix or not _is_type(prefix[-1], END_SEED)):
                prefix.append({"type": END_SEED, "seq": len(prefix), "time": START_TIME, "data": {}})
            return prefix

        @precondition(any_live)
        @rule(source_pick=PICK, child_pick=PICK, boundary=st.sampled_from(BOUNDARIES), pick=PICK)
        def fork(self, source_pick: int, child_pick: int, boundary: str, pick: int) -> None:
            source = self.target(source_pick)
            free = [session_id for session_id in POOL if session_id not in self.driver.model.live]
            child = (
                free[child_pick % len(free)]
                if free and child_pick % 10 != 9
                else POOL[child_pick % len(POOL)]
            )
            count = self.next_seq(source)
            chosen: object = {
                "absent": ABSENT,
                "last": count - 1 if count else 0,
                "any": pick % (count + 1),
                "past-end": count,
                "negative": -1,
                "string": "0",
                "float": 0.5,
            }[boundary]
            self.do("fork", source=source, boundary=chosen, child=child)

        @precondition(any_live)
        @rule(delta=st.integers(min_value=0, max_value=5))
        def tick(self, delta: int) -> None:
            self.do("clock", now=self.driver.model.now + delta)

        # --- appends ---------------------------------------------------------------------------

        @precondition(any_live)
        @rule(session=PICK, text=st.sampled_from(("hello", "more", "")))
        def append_user(self, session: int, text: str) -> None:
            session_id = self.target(session)
            seq = self.next_seq(session_id)
            self.do(
                "append",
                id=session_id,
                type=USER_MESSAGE,
                data=build.user_message(f"u{seq}", text),
                surfaceOp="append",
            )

        @precondition(any_live)
        @rule(
            session=PICK, calls=st.integers(min_value=0, max_value=2), empty=st.booleans(), cite=st.booleans()
        )
        def append_assistant(self, session: int, calls: int, empty: bool, cite: bool) -> None:
            session_id = self.target(session)
            seq = self.next_seq(session_id)
            turn, step = self.turn_and_step(session_id)
            call_ids = tuple(f"c{seq}-{index}" for index in range(calls))
            data = build.assistant_message(f"a{seq}", None if empty else "ok", call_ids, turn, step)
            sources: object = ABSENT
            if cite:
                nodes = self.nodes(session_id)
                sources = [nodes[-1]] if nodes else []
            self.do(
                "append",
                id=session_id,
                type=ASSISTANT_MESSAGE,
                data=data,
                surfaceOp="append",
                sourceEventSeqs=sources,
            )

        @precondition(any_live)
        @rule(session=PICK, pick=PICK, cite=st.booleans(), error=st.booleans())
        def append_tool_result(self, session: int, pick: int, cite: bool, error: bool) -> None:
            session_id = self.target(session)
            announced = [
                (event["seq"], call)
                for event in self.events(session_id)
                if event.get("type") == ASSISTANT_MESSAGE and isinstance(event.get("data"), dict)
                for call in tool_call_ids_of(event["data"].get("message"))  # type: ignore[union-attr]
            ]
            turn, step = self.turn_and_step(session_id)
            seq, call = announced[pick % len(announced)] if announced else (None, "c-unknown")
            sources: object = [seq] if cite and seq is not None else ABSENT
            data = build.tool_result(str(call), f"result {pick % 7}", error, turn, step)
            self.do(
                "append",
                id=session_id,
                type=TOOL_RESULT,
                data=data,
                surfaceOp="append",
                sourceEventSeqs=sources,
            )

        @precondition(any_live)
        @rule(session=PICK, kind=st.sampled_from(LOG_ONLY_KINDS), pick=PICK)
        def append_log_only(self, session: int, kind: str, pick: int) -> None:
            """A log-only event, of a known type or not: a Session takes any type, and a v4
            reader reads back whatever a v4 writer stored."""
            session_id = self.target(session)
            turn, step = self.turn_and_step(session_id)
            started = self.turns_started(session_id)
            data: Any = {
                "turn/start": build.turn_start(started + 1),
                "turn/end": build.turn_end(max(started, 1)),
                "step/start": build.step_start(turn, step + 1),
                "step/end": build.step_end(turn, step),
                "tool/call": build.tool_call(f"c{pick % 4}", turn, step),
                "assistant/chunk": {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": "text-delta", "index": 0, "text": "h"},
                },
                "todo/write": {"todos": [{"content": "x", "status": "pending"}]},
                "compaction/start": build.compaction_start(f"k{pick % 3}", turn if pick % 2 else None),
                "compaction/end": {"compactionId": f"k{pick % 3}", "turn": None},
                "session/end-seed": {},
                "unknown/kind": {"n": pick % 5},
            }[kind]
            self.do("append", id=session_id, type=kind, data=data)

        @precondition(any_live)
        @rule(session=PICK, kind=st.sampled_from(INVALID_KINDS), pick=PICK)
        def append_invalid(self, session: int, kind: str, pick: int) -> None:
            session_id = self.target(session)
            seq = self.next_seq(session_id)
            user = build.user_message(f"u{seq}")
            args: Any = {
                "surfaceOp-null": {"type": USER_MESSAGE, "data": user, "surfaceOp": None},
                "surfaceOp-missing": {"type": USER_MESSAGE, "data": user},
                "surfaceOp-string": {"type": USER_MESSAGE, "data": user, "surfaceOp": "prepend"},
                "surfaceOp-on-log-only": {
                    "type": TURN_START,
                    "data": build.turn_start(1),
                    "surfaceOp": "append",
                },
                "provenance-on-log-only": {
                    "type": TURN_END,
                    "data": build.turn_end(1),
                    "sourceEventSeqs": [0],
                },
                "empty-type": {"type": "", "data": {}},
                "legacy-header-delta": {"type": "request/header-delta", "data": {}},
                "legacy-fallback": {"type": "request/header", "data": {"reason": "fallback"}},
                "replace-op-malformed": {
                    "type": USER_MESSAGE,
                    "data": user,
                    "surfaceOp": {"op": "replace", "start": 0},
                },
                "provenance-duplicate": {
                    "type": USER_MESSAGE,
                    "data": user,
                    "surfaceOp": "append",
                    "sourceEventSeqs": [0, 0],
                },
                "provenance-not-earlier": {
                    "type": USER_MESSAGE,
                    "data": user,
                    "surfaceOp": "append",
                    "sourceEventSeqs": [seq + pick % 3],
                },
                "provenance-empty": {
                    "type": USER_MESSAGE,
                    "data": user,
                    "surfaceOp": "append",
                    "sourceEventSeqs": [],
                },
                "provenance-not-array": {
                    "type": USER_MESSAGE,
                    "data": user,
                    "surfaceOp": "append",
                    "sourceEventSeqs": 0,
                },
                "provenance-not-seq": {
                    "type": USER_MESSAGE,
                    "data": user,
                    "surfaceOp": "append",
                    "sourceEventSeqs": [-1],
                },
            }[kind]
            self.do("append", id=session_id, **args)

        @precondition(any_live)
        @rule(session=PICK, first=PICK, length=PICK, variant=st.sampled_from(REPLACE_VARIANTS))
        def replace_span(self, session: int, first: int, length: int, variant: str) -> None:
            """A summary-like user/message replacing a span of the surface (from its head, mostly)."""
            session_id = self.target(session)
            nodes = self.nodes(session_id)
            if not nodes and first % 4:
                return self.append_user(session, "filler")
            seq = self.next_seq(session_id)
            start_at = 0 if first % 3 else (first % len(nodes) if nodes else 0)
            end_at = min(start_at + length % 3, len(nodes) - 1) if nodes else 0
            span = list(nodes[start_at : end_at + 1])
            start, end = (nodes[start_at], nodes[end_at]) if nodes else (0, 0)
            sources: object = span
            if variant == "extra":
                sources = sorted(set(span) | {seq - 1}) if seq else span
            elif variant == "missing-one":
                others = [s for s in range(seq) if s not in span]
                sources = span[1:] if len(span) > 1 else (others[-1:] or ABSENT)
            elif variant == "no-provenance":
                sources = ABSENT
            elif variant == "start-shadowed":
                shadowed = [s for s in range(seq) if s not in nodes]
                start = shadowed[first % len(shadowed)] if shadowed else seq
            elif variant == "end-unknown":
                end = seq + 1
            elif variant == "inverted" and len(nodes) > 1:
                start, end = nodes[-1], nodes[0]
                sources = list(nodes)
            data = build.user_message(f"summary-{seq}", "summary of earlier work", kind="compact")
            self.do(
                "append",
                id=session_id,
                type=USER_MESSAGE,
                data=data,
                surfaceOp=build.replace_op(start, end),
                sourceEventSeqs=sources,
            )

        @precondition(any_live)
        @rule(session=PICK, pick=PICK, variant=st.sampled_from(REWRITE_VARIANTS))
        def rewrite_result(self, session: int, pick: int, variant: str) -> None:
            """A prune-like tool/result that replaces one tool/result node with shorter content."""
            session_id = self.target(session)
            events, nodes = self.events(session_id), self.nodes(session_id)
            if not any(events[node].get("type") == TOOL_RESULT for node in nodes) and pick % 4:
                return self.append_tool_result(session, pick, False, False)
            results = [node for node in nodes if events[node].get("type") == TOOL_RESULT]
            others = [node for node in nodes if events[node].get("type") != TOOL_RESULT]
            if variant == "not-a-result" and others:
                target = others[pick % len(others)]
                original: JsonValue = build.tool_result("c-other")
            elif results:
                target = results[pick % len(results)]
                original = thaw_json(events[target]["data"])
            else:
                target, original = (nodes[0] if nodes else 0), build.tool_result("c-none")
            data: Any = build.rewritten_result(
                original, "[pruned]", not _is_error(original) if variant == "is-error" else None
            )
            if variant == "message-id" and isinstance(data, dict) and isinstance(data.get("message"), dict):
                data = {**data, "message": {**data["message"], "id": "renamed"}}
            if variant == "call-id" and isinstance(data, dict):
                data = {**data, "step": 99}
            end = target
            if variant == "two-nodes" and nodes and nodes.index(target) + 1 < len(nodes):
                end = nodes[nodes.index(target) + 1]
            sources: object = [target] if end == target else [target, end]
            if variant == "missing-provenance":
                sources = ABSENT
            self.do(
                "append",
                id=session_id,
                type=TOOL_RESULT,
                data=data,
                surfaceOp=build.replace_op(target, end),
                sourceEventSeqs=sources,
            )

        # --- storage ---------------------------------------------------------------------------

        if has_storage:

            @precondition(lambda self: bool(self.driver.model.live))
            @rule(pick=PICK)
            def flush(self, pick: int) -> None:
                self.do("flush", id=sorted(self.driver.model.live)[pick % len(self.driver.model.live)])

            @precondition(lambda self: bool(self.driver.model.live))
            @rule(pick=PICK)
            def close(self, pick: int) -> None:
                """Close one time in three, flush otherwise: sessions should live long enough to grow."""
                live = sorted(self.driver.model.live)
                self.do("close" if pick % 3 == 0 else "flush", id=live[pick % len(live)])

            @rule(pick=PICK)
            def resume(self, pick: int) -> None:
                """Mostly a stored session that is not live; one time in ten any id of the pool."""
                model = self.driver.model
                resting = sorted(session_id for session_id in model.stored if session_id not in model.live)
                chosen = (
                    resting[pick % len(resting)] if resting and pick % 10 != 9 else POOL[pick % len(POOL)]
                )
                self.do("resume", id=chosen)

            @rule(session_id=st.sampled_from(POOL))
            def read(self, session_id: str) -> None:
                self.do("read", id=session_id)

            @precondition(any_live)
            @rule(pick=PICK)
            def reopen(self, pick: int) -> None:
                """Close a live session and resume it at once: the resume rules without a crash."""
                live = sorted(self.driver.model.live)
                session_id = live[pick % len(live)]
                self.do("close", id=session_id)
                self.do("resume", id=session_id)

        if crash_seam:

            @precondition(any_live)
            @rule(keep=st.sampled_from(("none", "none", "all", "cut")), pick=PICK)
            def crash(self, keep: str, pick: int) -> None:
                """Power loss, then (most times) every surviving session is resumed at once."""
                stats.steps += 1
                stats.outcomes[f"crash {keep}"] = stats.outcomes.get(f"crash {keep}", 0) + 1
                self.power_cut(keep, pick)
                if pick % 4:
                    for session_id in sorted(self.driver.model.stored):
                        self.do("resume", id=session_id)

        def power_cut(self, keep: str, pick: int) -> None:
            """Crash keeping nothing unsynced, everything, or a cut of one unsynced file."""
            chosen: object = keep
            if keep == "cut":
                unsynced = self.driver.raw("unsynced")
                files = unsynced.result if unsynced.ok and isinstance(unsynced.result, list) else []
                if files:
                    entry = files[pick % len(files)]
                    chosen = {"path": entry["path"], "bytes": pick % (int(entry["bytes"]) + 1)}
                else:
                    chosen = "none"
            self.driver.crash(chosen)

        # --- after every step ------------------------------------------------------------------

        @invariant()
        def every_live_session_matches_the_model(self) -> None:
            self.driver.check_all_live()

    SubjectMachine.__name__ = SubjectMachine.__qualname__ = "SubjectMachine"
    return SubjectMachine


def any_live(machine: Any) -> bool:
    return bool(machine.driver.model.live)


def meta_for(name: str) -> object:
    return {
        "none": ABSENT,
        "cwd": {"cwd": "/work/project"},
        "created": {"createdAt": 7},
        "depth": {"delegationDepth": 2, "agentPreset": "explore"},
        "subagent": {"origin": "subagent", "delegationDepth": 1},
        "bad-cwd": {"cwd": "relative/path"},
        "bad-depth": {"delegationDepth": -1},
        "not-object": [1],
    }[name]


def _is_type(event: JsonValue, kind: str) -> bool:
    return isinstance(event, dict) and event.get("type") == kind


def _is_error(data: JsonValue) -> bool:
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, dict) and first.get("isError") is True


__all__ = [
    "MachineOutcome",
    "MachineStats",
    "build_machine",
    "check_machine",
    "machine_settings",
    "profile_name",
    "run_machine",
]


# --- the "machine" family ---------------------------------------------------------------------------


def check_machine(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: one case, named with how much ran and how fast."""
    outcome = run_machine(subject, sorted(options.capabilities), options.profile)
    stats = outcome.stats
    name = (
        f"every generated step agrees with the spec model ({stats.steps} steps in {stats.examples} runs, "
        f"{stats.steps_per_second:.0f} steps/s, storage {outcome.storage})"
    )
    if outcome.failure is None:
        return [CaseResult("machine", name, "passed", seconds=stats.seconds)]
    hint = (
        ""
        if options.profile == "thorough"
        else "\n(not shrunk under the ci profile; --profile thorough shrinks it)"
    )
    return [CaseResult("machine", name, "failed", outcome.failure + hint, seconds=stats.seconds)]
