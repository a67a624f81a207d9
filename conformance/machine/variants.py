"""What the machine's rules send: the named pools they draw from, and the request each named
variant makes from a session's current events and surface.

Nothing here decides validity (the spec model does), and nothing here keeps state: a rule draws a
variant's name and the values it needs, and these functions turn them into protocol arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from hypothesis import strategies as st

from conformance import builders as build
from spec.log.events import (
    ASSISTANT_MESSAGE,
    END_SEED,
    STEP_START,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    event_data,
    tool_call_ids_of,
)
from spec.log.json import JsonValue, is_safe_integer, thaw_json
from spec.log.session import ABSENT

Args = dict[str, object]

START_TIME: Final = 1_000  # ms: the clock every run starts at
POOL: Final = ("s0", "s1", "s2")  # the names sessions are created under: few, so that they collide
MISSING_IDS: Final = ("ghost", "s3")  # names no rule ever creates: a request naming one must miss
TEXTS: Final = ("hello", "more", "")
PLAIN_SEEDS: Final = ("none", "none", "empty")  # no seed twice as often as an empty one
METAS: Final = ("none", "none", "cwd", "created", "depth", "subagent", "bad-cwd", "bad-depth", "not-object")
BOUNDARIES: Final = ("absent", "last", "any", "past-end", "negative", "string", "float")
LOG_CALL_IDS: Final = ("c0", "c1", "c2", "c3")  # tool/call ids, unrelated to the calls messages announce
COMPACTION_IDS: Final = ("k0", "k1", "k2")

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
    "provenance-self",
    "provenance-later",
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
KEEPS: Final = ("none", "none", "all", "cut")  # what a power cut keeps of the unsynced bytes
MOSTLY: Final = (True, True, True, False)  # drawn for "three times in four"


# --- reading a session ------------------------------------------------------------------------------


def derive_turn_and_step(events: Sequence[Event]) -> tuple[int, int]:
    """The turn and step the log is in: the last ``turn/start`` and ``step/start`` (1 and 1 before any)."""
    turn, step = 1, 1
    for event in events:
        data = event_data(event)
        if event.get("type") == TURN_START and is_safe_integer(started := data.get("turn")):
            turn, step = int(started), 1
        elif event.get("type") == STEP_START and is_safe_integer(stepped := data.get("step")):
            step = int(stepped)
    return turn, step


def count_turns_started(events: Sequence[Event]) -> int:
    return sum(1 for event in events if event.get("type") == TURN_START)


def derive_announced_calls(events: Sequence[Event]) -> list[tuple[int, str]]:
    """Every tool call an assistant message announced: the message's seq and the call's id."""
    return [
        (seq, call)
        for seq, event in enumerate(events)
        if event.get("type") == ASSISTANT_MESSAGE
        for call in tool_call_ids_of(event_data(event).get("message"))
    ]


def derive_shadowed_seqs(events: Sequence[Event], nodes: Sequence[int]) -> list[int]:
    return [seq for seq in range(len(events)) if seq not in nodes]


# --- creating ---------------------------------------------------------------------------------------


def meta_for(name: str) -> object:
    """``create``'s meta by name: absent, four valid ones, three the header rules refuse."""
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


def plain_seed_for(name: str) -> object:
    return ABSENT if name == "none" else []


def seed_prefix(events: Sequence[Event], length: int, end_seed: bool) -> list[JsonValue]:
    """The first ``length`` events of a log as a seed, with a ``session/end-seed`` after them when
    ``end_seed`` asks for one and the prefix does not already end with one."""
    prefix: list[JsonValue] = [thaw_json(event) for event in events[:length]]
    if end_seed and (not events[:length] or events[length - 1].get("type") != END_SEED):
        prefix.append({"type": END_SEED, "seq": len(prefix), "time": START_TIME, "data": {}})
    return prefix


def boundary_for(name: str, count: int, chosen: int) -> object:
    """A fork boundary by name for a log of ``count`` events; ``any`` is the ``chosen`` seq."""
    return {
        "absent": ABSENT,
        "last": count - 1 if count else 0,
        "any": chosen,
        "past-end": count,
        "negative": -1,
        "string": "0",
        "float": 0.5,
    }[name]


# --- appending --------------------------------------------------------------------------------------


def log_only_payloads(kind: str, events: Sequence[Event]) -> st.SearchStrategy[JsonValue]:
    """The data of a log-only event of ``kind`` (a known type or not: a session takes any type, and
    a v4 reader reads back whatever a v4 writer stored), fitting the turn and step the log is in."""
    turn, step = derive_turn_and_step(events)
    started = count_turns_started(events)
    calls, compactions = st.sampled_from(LOG_CALL_IDS), st.sampled_from(COMPACTION_IDS)
    payloads: dict[str, st.SearchStrategy[JsonValue]] = {
        "turn/start": st.just(build.turn_start(started + 1)),
        "turn/end": st.just(build.turn_end(max(started, 1))),
        "step/start": st.just(build.step_start(turn, step + 1)),
        "step/end": st.just(build.step_end(turn, step)),
        "tool/call": calls.map(lambda call: build.tool_call(call, turn, step)),
        "assistant/chunk": st.just(
            {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": "h"}}
        ),
        "todo/write": st.just({"todos": [{"content": "x", "status": "pending"}]}),
        "compaction/start": st.builds(build.compaction_start, compactions, st.sampled_from((turn, None))),
        "compaction/end": compactions.map(lambda compaction: {"compactionId": compaction, "turn": None}),
        "session/end-seed": st.just({}),
        "unknown/kind": st.integers(min_value=0, max_value=4).map(lambda n: {"n": n}),
    }
    return payloads[kind]


def invalid_append(kind: str, seq: int) -> Args:
    """An append the rules refuse, by what is wrong with it; ``seq`` is the seq it would get."""
    user = build.user_message(f"u{seq}")

    def cited(sources: object) -> Args:
        return {"type": USER_MESSAGE, "data": user, "surfaceOp": "append", "sourceEventSeqs": sources}

    appends: dict[str, Args] = {
        "surfaceOp-null": {"type": USER_MESSAGE, "data": user, "surfaceOp": None},
        "surfaceOp-missing": {"type": USER_MESSAGE, "data": user},
        "surfaceOp-string": {"type": USER_MESSAGE, "data": user, "surfaceOp": "prepend"},
        "surfaceOp-on-log-only": {"type": TURN_START, "data": build.turn_start(1), "surfaceOp": "append"},
        "provenance-on-log-only": {"type": TURN_END, "data": build.turn_end(1), "sourceEventSeqs": [0]},
        "empty-type": {"type": "", "data": {}},
        "legacy-header-delta": {"type": "request/header-delta", "data": {}},
        "legacy-fallback": {"type": "request/header", "data": {"reason": "fallback"}},
        "replace-op-malformed": {
            "type": USER_MESSAGE,
            "data": user,
            "surfaceOp": {"op": "replace", "start": 0},
        },
        "provenance-duplicate": cited([0, 0]),
        "provenance-self": cited([seq]),
        "provenance-later": cited([seq + 1]),
        "provenance-empty": cited([]),
        "provenance-not-array": cited(0),
        "provenance-not-seq": cited([-1]),
    }
    return appends[kind]


def replace_append(variant: str, nodes: Sequence[int], seq: int, span: Sequence[int], stray: int) -> Args:
    """A summary-like user/message replacing ``span`` of the surface ``nodes``, as the variant
    says: citing the span (``full``), more, less or nothing; starting at ``stray``, a seq no longer
    on the surface (``start-shadowed``); ending past the log; or inverted."""
    start, end = (span[0], span[-1]) if span else (0, 0)
    sources: object = list(span)
    if variant == "extra":
        sources = sorted({*span, seq - 1}) if seq else list(span)
    elif variant == "missing-one":
        others = [other for other in range(seq) if other not in span]
        sources = list(span[1:]) if len(span) > 1 else (others[-1:] or ABSENT)
    elif variant == "no-provenance":
        sources = ABSENT
    elif variant == "start-shadowed":
        start = stray
    elif variant == "end-unknown":
        end = seq + 1
    elif variant == "inverted" and len(nodes) > 1:
        start, end, sources = nodes[-1], nodes[0], list(nodes)
    return {
        "type": USER_MESSAGE,
        "data": build.user_message(f"summary-{seq}", "summary of earlier work", kind="compact"),
        "surfaceOp": build.replace_op(start, end),
        "sourceEventSeqs": sources,
    }


def rewrite_append(variant: str, nodes: Sequence[int], target: int, original: JsonValue) -> Args:
    """A prune-like tool/result replacing the node ``target`` (whose data was ``original``) with
    shorter content, as the variant says: only the content (``ok``), or also the error flag, the
    message id or the step; two nodes at once; or without provenance."""
    data: JsonValue = build.rewritten_result(
        original, "[pruned]", not is_error_result(original) if variant == "is-error" else None
    )
    message = data.get("message") if isinstance(data, dict) else None
    if variant == "message-id" and isinstance(data, dict) and isinstance(message, dict):
        data = {**data, "message": {**message, "id": "renamed"}}
    if variant == "call-id" and isinstance(data, dict):
        data = {**data, "step": 99}
    end = target
    if variant == "two-nodes" and target in nodes and nodes.index(target) + 1 < len(nodes):
        end = nodes[nodes.index(target) + 1]
    sources: object = [target] if end == target else [target, end]
    if variant == "missing-provenance":
        sources = ABSENT
    return {
        "type": TOOL_RESULT,
        "data": data,
        "surfaceOp": build.replace_op(target, end),
        "sourceEventSeqs": sources,
    }


def is_error_result(data: JsonValue) -> bool:
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, dict) and first.get("isError") is True
