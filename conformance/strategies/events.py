"""Logs as an agent loop writes them, drawn from the value domain of
:mod:`conformance.strategies.domain`: one step function per kind of event."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from hypothesis import strategies as st

from conformance.strategies.domain import (
    NON_BMP,
    NOT_NUMBERS,
    NUMBER_EDGES,
    SAFE_BOUND,
    content_blocks,
    json_objects,
    mostly,
    pruned_text_blocks,
    safe_integers,
    seq_like,
    text_block,
    texts,
)
from spec.log.json import JsonObject, JsonValue, int_field

# --- strategies: events and logs --------------------------------------------------------------------

LOG_STEPS: Final = (
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user",
    "user",
    "assistant",
    "assistant",
    "tool/call",
    "tool/result",
    "tool/result",
    "summary",
    "rewrite",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "end-seed",
    "unknown",
    "chunk",
)
MODEL_SOURCE: Final[JsonObject] = {"kind": "model", "provider": "p", "model": "m"}


def tool_result_data(
    call: str, inner: list[JsonValue], turn: JsonValue, step: JsonValue, flag: str
) -> JsonObject:
    """A tool/result's data answering ``call`` with ``inner`` content; its block's ``isError`` is
    absent, ``null`` or a boolean as ``flag`` says."""
    block: JsonObject = {"type": "tool-result", "toolCallId": call, "content": inner}
    if flag != "absent":
        block["isError"] = None if flag == "null" else flag == "true"
    message: JsonObject = {
        "id": f"r-{call}",
        "role": "user",
        "source": {"kind": "tool", "callId": call},
        "content": [block],
    }
    return {"turn": turn, "step": step, "message": message}


@dataclass
class _LogSoFar:
    """What the steps of :func:`logs` keep between events: the log, its surface nodes, the seqs of
    its tool results, the open turn and step, the call ids announced, the clock."""

    events: list[JsonValue]
    nodes: list[int]
    results: list[int]
    calls: list[str]
    time: int
    turn: int = 0
    step: int = 0


Step = tuple[str, JsonValue, JsonObject]  # the event's type, data and surface keys
StepFn = Callable[[st.DrawFn, _LogSoFar, int, JsonValue], "Step | None"]


def _turn_start(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    log.turn, log.step = log.turn + 1, 0
    return "turn/start", {"turn": log.turn}, {}


def _turn_end(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    reason: JsonObject = {"kind": draw(st.sampled_from(("completed", "interrupted")))}
    return "turn/end", {"turn": max(log.turn, 1), "reason": reason}, {}


def _step_start(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    log.step += 1
    return "step/start", {"turn": number, "step": log.step}, {}


def _step_end(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    return "step/end", {"turn": number, "step": log.step}, {}


def _user(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    content = draw(content_blocks())
    data: JsonObject = {"id": f"u{seq}", "role": "user", "source": {"kind": "user"}, "content": content}
    return "user/message", data, {"surfaceOp": "append"}


def _assistant(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    announced = [f"c{seq}-{index}" for index in range(draw(st.integers(0, 2)))]
    log.calls += announced
    blocks: list[JsonValue] = draw(content_blocks(3))
    blocks += [{"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in announced]
    message: JsonObject = {
        "id": f"a{seq}",
        "role": "assistant",
        "source": MODEL_SOURCE,
        "content": draw(st.permutations(blocks)),
    }
    return (
        "assistant/message",
        {"turn": number, "step": log.step, "message": message},
        {"surfaceOp": "append"},
    )


def _tool_call(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    call = draw(st.sampled_from(log.calls))
    return "tool/call", {"turn": number, "step": log.step, "callId": call, "name": "read"}, {}


def _tool_result(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue, large: bool) -> Step:
    inner = draw(pruned_text_blocks() if large and draw(st.booleans()) else content_blocks())
    flag = draw(st.sampled_from(("absent", "null", "true", "false")))
    data = tool_result_data(draw(st.sampled_from(log.calls)), inner, number, log.step, flag)
    log.results.append(seq)
    return "tool/result", data, {"surfaceOp": "append"}


def _summary(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step | None:
    if not log.nodes:
        return None
    first = draw(st.integers(0, len(log.nodes) - 1))
    last = draw(st.integers(first, len(log.nodes) - 1))
    span: list[JsonValue] = list(log.nodes[first : last + 1])
    data: JsonObject = {
        "id": f"sum{seq}",
        "role": "user",
        "source": {"kind": "compact"},
        "content": [text_block("summary")],
    }
    extra: JsonObject = {
        "surfaceOp": {"op": "replace", "start": span[0], "end": span[-1]},
        "sourceEventSeqs": span,
    }
    return "user/message", data, extra


def _rewrite(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step | None:
    current = [node for node in log.results if node in log.nodes]
    if not current:
        return None
    target = draw(st.sampled_from(current))
    original: Any = log.events[target]
    shown: Any = original["data"]["message"]
    inner = [text_block(draw(texts()))]
    data = {**original["data"], "message": {**shown, "content": [{**shown["content"][0], "content": inner}]}}
    extra: JsonObject = {
        "surfaceOp": {"op": "replace", "start": target, "end": target},
        "sourceEventSeqs": [target],
    }
    return "tool/result", data, extra


def _compaction_start(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    return (
        "compaction/start",
        {"compactionId": "k1", "turn": log.turn if log.turn and draw(st.booleans()) else None},
        {},
    )


def _compaction_summary(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step | None:
    if not log.nodes:
        return None
    data: JsonObject = {
        "compactionId": "k1",
        "turn": None,
        "shadowedRange": {"start": log.nodes[0], "end": log.nodes[-1]},
        "shadowedSeqs": list[JsonValue](log.nodes),
        "shadowedTokenCount": draw(safe_integers(0, 10_000)),
    }
    return "compaction/summary", data, {}


def _compaction_end(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    return (
        "compaction/end",
        {"compactionId": "k1", "turn": None, **({"error": "x"} if draw(st.booleans()) else {})},
        {},
    )


def _end_seed(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    return "session/end-seed", {}, {}


def _chunk(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    chunk: JsonObject = {"type": "text-delta", "index": 0, "text": draw(texts(4))}
    return "assistant/chunk", {"turn": number, "step": log.step, "chunk": chunk}, {}


def _unknown(draw: st.DrawFn, log: _LogSoFar, seq: int, number: JsonValue) -> Step:
    kind = draw(st.sampled_from(("custom/x", "todo/write", "compaction/prune")))
    return kind, draw(json_objects(4)) if kind != "compaction/prune" else _metering(log.nodes, draw), {}


LOG_STEP_FNS: Final[Mapping[str, StepFn]] = {
    "turn/start": _turn_start,
    "turn/end": _turn_end,
    "step/start": _step_start,
    "step/end": _step_end,
    "user": _user,
    "assistant": _assistant,
    "tool/call": _tool_call,
    "summary": _summary,
    "rewrite": _rewrite,
    "compaction/start": _compaction_start,
    "compaction/summary": _compaction_summary,
    "compaction/end": _compaction_end,
    "end-seed": _end_seed,
    "chunk": _chunk,
}


@st.composite
def logs(draw: st.DrawFn, max_events: int = 10, large_results: bool = False) -> list[JsonValue]:
    """A log as an agent loop writes one, numbered from 0: turns, steps, messages with several
    content blocks, tool calls and results (sized around the prune thresholds when
    ``large_results``), summaries and prune-like rewrites replacing nodes of the surface, compaction
    brackets, end-seed markers, unknown types; it often ends inside a turn. Seqs are sometimes
    integral floats, and a few logs have one field set to an edge value. Each kind of event is one
    step function of :data:`LOG_STEP_FNS` (a step that does not fit the log so far, a summary
    with no surface, gives way to an unknown type)."""
    log = _LogSoFar([], [], [], [str(draw(st.sampled_from(("c0", NON_BMP))))], 0)
    log.time = draw(st.sampled_from((1000, 0, SAFE_BOUND)))
    for seq in range(draw(st.integers(0, max_events))):
        kind = draw(st.sampled_from(LOG_STEPS))
        number: JsonValue = float(log.turn) if draw(st.integers(0, 5)) == 0 else log.turn
        if kind == "tool/result":
            step: Step | None = _tool_result(draw, log, seq, number, large_results)
        else:
            step = LOG_STEP_FNS.get(kind, _unknown)(draw, log, seq, number)
        event_type, data, extra = step if step is not None else _unknown(draw, log, seq, number)
        log.events.append({"type": event_type, "seq": seq, "time": log.time, "data": data, **extra})
        _apply_surface(log.nodes, seq, extra.get("surfaceOp"))
    if log.events and draw(st.integers(0, 3)) == 0:
        _damage_one(draw, log.events)
    return log.events


def _metering(nodes: list[int], draw: st.DrawFn) -> JsonValue:
    target = nodes[-1] if nodes else 0
    tokens = draw(safe_integers(0, 10_000))
    return {
        "shadowedRange": {"start": target, "end": target},
        "shadowedSeqs": [target],
        "shadowedTokenCount": tokens,
    }


def _apply_surface(nodes: list[int], seq: int, op: JsonValue) -> None:
    if op == "append":
        nodes.append(seq)
    elif isinstance(op, dict) and op.get("start") in nodes and op.get("end") in nodes:
        first, last = nodes.index(int_field(op, "start")), nodes.index(int_field(op, "end"))
        nodes[first : last + 1] = [seq]


ENVELOPE_EDGES: Final = ("seq", "time", "data", "surfaceOp", "sourceEventSeqs", "type", "ignorable")


def _damage_one(draw: st.DrawFn, events: list[JsonValue]) -> None:
    """One field of one event set to an edge value (or removed), or the seq given as a float."""
    index = draw(st.integers(0, len(events) - 1))
    event = events[index]
    assert isinstance(event, dict)
    key = draw(st.sampled_from(ENVELOPE_EDGES))
    how = draw(st.sampled_from(("float", "edge", "absent", "null")))
    changed = dict(event)
    if how == "absent":
        changed.pop(key, None)
    elif how == "null":
        changed[key] = None
    elif how == "float" and key == "seq":
        changed["seq"] = float(index)
    else:
        edges: tuple[JsonValue, ...] = (*NUMBER_EDGES, *NOT_NUMBERS)
        changed[key] = draw(st.one_of(st.sampled_from(edges), seq_like(len(events))))
    events[index] = changed


def surface_nodes(events: list[JsonValue]) -> st.SearchStrategy[list[JsonValue]]:
    """Nodes for a log: its surface as a writer would keep it (the appends and replaces folded),
    mostly; else any seqs of it, out-of-range seqs and edge values among them."""
    nodes: list[int] = []
    for event in events:
        seq = event.get("seq") if isinstance(event, dict) else None
        if isinstance(event, dict) and isinstance(seq, int):
            _apply_surface(nodes, seq, event.get("surfaceOp"))
    folded: list[JsonValue] = list(nodes)
    seqs = st.integers(-1, len(events) + 1)
    plain = st.lists(st.one_of(seqs, seqs.map(float)), max_size=6)
    edged = st.builds(lambda items, edge: [*items, edge], plain, seq_like(len(events) + 1))
    anything = mostly(plain, edged, odds=2)
    return mostly(st.just(folded), st.one_of(st.permutations(folded), anything), odds=2)
