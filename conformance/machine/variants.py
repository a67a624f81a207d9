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
from conformance import strategies as values
from spec.log.events import (
    ASSISTANT_MESSAGE,
    END_SEED,
    STEP_END,
    STEP_START,
    TOOL_CALL,
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

POOL: Final = ("s0", "s1", "s2")  # the names sessions are created under: few, so that they collide
MISSING_IDS: Final = ("ghost", "s3")  # names no rule ever creates: a request naming one must miss
TEXTS: Final = values.WORKLOAD_TEXTS  # one of each edge: astral, line breakers, a lone surrogate
# Blocks after a message's text: none, most often; else several, of types no rule knows among them.
MORE_BLOCKS: Final[tuple[tuple[JsonValue, ...], ...]] = (
    (),
    (),
    (values.IMAGE_BLOCK,),
    (values.UNKNOWN_BLOCK, values.text_block(values.NON_BMP)),
)
ERROR_FLAGS: Final = (False, True, build.ABSENT_FLAG)  # a tool result block's isError: given, or left out
PLAIN_SEEDS: Final = ("none", "none", "empty")  # no seed twice as often as an empty one
METAS: Final = (
    "none",
    "none",
    "cwd",
    "created",
    "depth",
    "subagent",
    "created-float",
    "created-bound",
    "created-null",
    "bad-cwd",
    "bad-depth",
    "not-object",
    "depth-bool",
    "created-unsafe",
    "preset-null",
)
BOUNDARIES: Final = (
    "absent",
    "last",
    "any",
    "any-float",
    "past-end",
    "negative",
    "string",
    "float",
    "bool",
    "unsafe",
)
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
    "provenance-null",
    "provenance-bool",
    "provenance-unsafe",
    "provenance-float-later",
)
REPLACE_VARIANTS: Final = (
    "full",
    "full",
    "full-float",
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
    "ok-drop-later",
    "is-error",
    "is-error-null",
    "is-error-absent",
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


def _whole(value: object, default: int) -> int:
    return int(value) if is_safe_integer(value) else default


def derive_loop_position(events: Sequence[Event]) -> tuple[int | None, int | None, int, list[str]]:
    """Where the agent loop is: the open turn (or ``None``), the open step in it (or ``None``), the
    number of turns started, and the calls of the open step that started and have no result yet."""
    open_turn: int | None = None
    open_step: int | None = None
    turns = 0
    pending: list[str] = []
    for event in events:
        kind, data = event.get("type"), event_data(event)
        if kind == TURN_START:
            turns += 1
            open_turn, open_step, pending = _whole(data.get("turn"), turns), None, []
        elif kind == TURN_END:
            open_turn, open_step, pending = None, None, []
        elif kind == STEP_START and is_safe_integer(data.get("step")):
            open_step, pending = _whole(data.get("step"), 0), []
        elif kind == STEP_END:
            open_step, pending = None, []
        elif kind == TOOL_CALL and isinstance(data.get("callId"), str):
            pending.append(str(data["callId"]))
        elif kind == TOOL_RESULT and event.get("surfaceOp") == "append":
            message = data.get("message")
            source = message.get("source") if isinstance(message, dict) else None
            call = source.get("callId") if isinstance(source, dict) else None
            if isinstance(call, str) and call in pending:
                pending.remove(call)
    return open_turn, open_step, turns, pending


def derive_next_step(events: Sequence[Event], turn: int) -> int:
    """The number of the next step of ``turn``: one past its last ``step/start`` (1 before any)."""
    last = 0
    for event in events:
        data = event_data(event)
        if event.get("type") == TURN_START and data.get("turn") == turn:
            last = 0
        elif event.get("type") == STEP_START and is_safe_integer(data.get("step")):
            last = _whole(data.get("step"), last)
    return last + 1


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
        "created-float": {"createdAt": 7.0, "delegationDepth": 1.0},
        "created-bound": {"createdAt": values.SAFE_BOUND},
        "created-null": {"createdAt": None, "cwd": f"/work/{values.NON_BMP}"},
        "bad-cwd": {"cwd": "relative/path"},
        "bad-depth": {"delegationDepth": -1},
        "not-object": [1],
        "depth-bool": {"delegationDepth": True},
        "created-unsafe": {"createdAt": values.UNSAFE_INTEGER},
        "preset-null": {"agentPreset": None},
    }[name]


def plain_seed_for(name: str) -> object:
    return ABSENT if name == "none" else []


def seed_prefix(events: Sequence[Event], length: int, end_seed: bool) -> list[JsonValue]:
    """The first ``length`` events of a log as a seed, with a ``session/end-seed`` after them when
    ``end_seed`` asks for one and the prefix does not already end with one."""
    prefix: list[JsonValue] = [thaw_json(event) for event in events[:length]]
    if end_seed and (not events[:length] or events[length - 1].get("type") != END_SEED):
        prefix.append({"type": END_SEED, "seq": len(prefix), "time": build.START_TIME, "data": {}})
    return prefix


def boundary_for(name: str, count: int, chosen: int) -> object:
    """A fork boundary by name for a log of ``count`` events; ``any`` is the ``chosen`` seq."""
    return {
        "absent": ABSENT,
        "last": count - 1 if count else 0,
        "any": chosen,
        "any-float": float(chosen),
        "past-end": count,
        "negative": -1,
        "string": "0",
        "float": 0.5,
        "bool": True,
        "unsafe": values.UNSAFE_INTEGER,
    }[name]


# --- appending --------------------------------------------------------------------------------------


def log_only_payloads(kind: str, events: Sequence[Event]) -> st.SearchStrategy[JsonValue]:
    """The data of a log-only event of ``kind`` (a known type or not: a session takes any type, and
    a v4 reader reads back whatever a v4 writer stored), fitting the turn and step the log is in."""
    turn, step = derive_turn_and_step(events)
    started = count_turns_started(events)
    calls, compactions = st.sampled_from(LOG_CALL_IDS), st.sampled_from(COMPACTION_IDS)
    payloads: dict[str, st.SearchStrategy[JsonValue]] = {
        "turn/start": st.sampled_from((started + 1, float(started + 1))).map(build.turn_start),
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
        "unknown/kind": st.sampled_from((*values.NUMBER_EDGES, *values.NOT_NUMBERS)).map(lambda n: {"n": n}),
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
        "provenance-null": cited(None),
        "provenance-bool": cited([True]),
        "provenance-unsafe": cited([values.UNSAFE_INTEGER]),
        "provenance-float-later": cited([float(seq + 1)]),
    }
    return appends[kind]


def replace_append(variant: str, nodes: Sequence[int], seq: int, span: Sequence[int], stray: int) -> Args:
    """A summary-like user/message replacing ``span`` of the surface ``nodes``, as the variant
    says: citing the span (``full``), more, less or nothing; starting at ``stray``, a seq no longer
    on the surface (``start-shadowed``); ending past the log; or inverted."""
    start, end = (span[0], span[-1]) if span else (0, 0)
    sources: object = list(span)
    if variant == "full-float":
        sources = [float(seq) for seq in span]
    elif variant == "extra":
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
        original, "[pruned]", not is_error_result(original) if variant == "is-error" else ABSENT
    )
    message = data.get("message") if isinstance(data, dict) else None
    if variant.startswith(("is-error-", "ok-drop")) and isinstance(data, dict) and isinstance(message, dict):
        data = {**data, "message": rewrite_first_block(message, variant)}
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


def rewrite_first_block(message: dict[str, JsonValue], variant: str) -> JsonValue:
    """The rewritten message's blocks as the variant says: its ``isError`` set to ``null`` or left
    out (the rule tells both from ``false`` and from each other), or its later blocks dropped (as
    the prune does: the rule compares the first block only)."""
    blocks = message.get("content")
    if not isinstance(blocks, list) or not blocks or not isinstance(blocks[0], dict):
        return message
    first: dict[str, JsonValue] = dict(blocks[0])
    if variant == "ok-drop-later":
        return {**message, "content": [first]}
    if variant == "is-error-null":
        first["isError"] = None
    elif "isError" in first:
        del first["isError"]
    else:
        first["isError"] = False
    return {**message, "content": [first, *blocks[1:]]}


def is_error_result(data: JsonValue) -> bool:
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    first = content[0] if isinstance(content, list) and content else None
    return isinstance(first, dict) and first.get("isError") is True
