"""A tiny log builder for the checker's and crash repair's tests: each helper returns an event as
``(type, data, extra envelope keys)``, and :func:`log` numbers them 0, 1, 2..."""

from __future__ import annotations

from typing import Any

from spec.lineage.repair import TOOL_NOT_STARTED

Spec = tuple[str, Any, dict[str, Any]]


def log(*specs: Spec, time: int = 1000) -> list[dict[str, Any]]:
    """Number the given events 0, 1, 2... (all at ``time``)."""
    return [
        {"type": kind, "seq": seq, "time": time, "data": data, **extra}
        for seq, (kind, data, extra) in enumerate(specs)
    ]


def turn_start(turn: Any) -> Spec:
    return ("turn/start", {"turn": turn}, {})


def turn_end(turn: Any, kind: str = "completed") -> Spec:
    return ("turn/end", {"turn": turn, "reason": {"kind": kind}}, {})


def step_start(turn: Any, step: Any) -> Spec:
    return ("step/start", {"turn": turn, "step": step}, {})


def step_end(turn: Any, step: Any) -> Spec:
    return ("step/end", {"turn": turn, "step": step}, {})


def open_step(*inner: Spec, turn: int = 1, step: int = 1) -> tuple[Spec, ...]:
    """``inner`` inside step ``step`` of turn ``turn``, the step and the turn opened and left open."""
    return (turn_start(turn), step_start(turn, step), *inner)


def in_step(*inner: Spec, turn: int = 1, step: int = 1) -> tuple[Spec, ...]:
    """``inner`` inside step ``step`` of turn ``turn``, the step and the turn opened and ended."""
    return (*open_step(*inner, turn=turn, step=step), step_end(turn, step), turn_end(turn))


def user(text: str = "hi", surface_op: Any = "append", **extra: Any) -> Spec:
    data = {
        "id": f"u-{text}",
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": text}],
    }
    return ("user/message", data, {"surfaceOp": surface_op, **extra})


def assistant(turn: Any, step: Any, *call_ids: str) -> Spec:
    content = [{"type": "text", "text": "ok"}] + [
        {"type": "tool-call", "id": c, "name": "bash", "arguments": "{}"} for c in call_ids
    ]
    message = {
        "id": f"a-{turn}-{step}",
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    return ("assistant/message", {"turn": turn, "step": step, "message": message}, {"surfaceOp": "append"})


def chunk(turn: Any, step: Any) -> Spec:
    return (
        "assistant/chunk",
        {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": "o"}},
        {},
    )


def tool_call(turn: Any, step: Any, call_id: str) -> Spec:
    return (
        "tool/call",
        {"turn": turn, "step": step, "callId": call_id, "name": "bash", "arguments": "{}"},
        {},
    )


def tool_result_data(turn: Any, step: Any, call_id: str, text: str = "out") -> dict[str, Any]:
    block = {
        "type": "tool-result",
        "toolCallId": call_id,
        "isError": False,
        "content": [{"type": "text", "text": text}],
    }
    message = {
        "id": f"r-{call_id}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [block],
    }
    return {"turn": turn, "step": step, "message": message}


def tool_result(turn: Any, step: Any, call_id: str, surface_op: Any = "append", **extra: Any) -> Spec:
    return ("tool/result", tool_result_data(turn, step, call_id), {"surfaceOp": surface_op, **extra})


def not_started_result(turn: Any, step: Any, call_id: str) -> Spec:
    data = tool_result_data(turn, step, call_id)
    data["message"]["content"][0]["isError"] = True
    data["error"] = {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
    return ("tool/result", data, {"surfaceOp": "append"})


def replace(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


def rewrite(turn: Any, step: Any, call_id: str, shadowed: int) -> Spec:
    """A tool/result that rewrites the result at ``shadowed`` (same call, new text)."""
    return (
        "tool/result",
        tool_result_data(turn, step, call_id, text="pruned"),
        {"sourceEventSeqs": [shadowed], "surfaceOp": replace(shadowed, shadowed)},
    )


def plain(kind: str, data: Any = None) -> Spec:
    return (kind, {} if data is None else data, {})


def request_context() -> Spec:
    return plain("request/context", {"provider": "p", "model": "m"})


def compaction_start(compaction_id: str, turn: Any, **extra: Any) -> Spec:
    return plain("compaction/start", {"compactionId": compaction_id, **extra, "turn": turn})


def summary(compaction_id: str, start: int, end: int, seqs: list[int] | None = None, **extra: Any) -> Spec:
    return plain(
        "compaction/summary",
        {
            "compactionId": compaction_id,
            **extra,
            "summary": [{"type": "text", "text": "s"}],
            "shadowedRange": {"start": start, "end": end},
            "shadowedSeqs": seqs if seqs is not None else list(range(start, end + 1)),
            "shadowedTokenCount": 10,
            "provider": "p",
            "model": "m",
        },
    )


def checkpoint(compaction_id: str, start: int, end: int, sources: list[int]) -> Spec:
    data = {
        "id": f"ck-{compaction_id}",
        "role": "user",
        "content": [{"type": "text", "text": "summary"}],
        "source": {"kind": "plugin", "plugin": "compact", "compactionId": compaction_id},
    }
    return ("user/message", data, {"sourceEventSeqs": sources, "surfaceOp": replace(start, end)})


def compaction_end(compaction_id: str, turn: Any, **extra: Any) -> Spec:
    return plain("compaction/end", {"compactionId": compaction_id, "turn": turn, **extra})


def prune(start: int, end: int) -> Spec:
    return plain(
        "compaction/prune",
        {"shadowedRange": {"start": start, "end": end}, "shadowedSeqs": [start], "shadowedTokenCount": 5},
    )


def end_seed() -> Spec:
    return plain("session/end-seed")
