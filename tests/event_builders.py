"""Small builders for well-formed session events and payloads, shared by the session-model tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spec.log.events import Event
from spec.log.session import ABSENT, SessionState, append_event
from spec.log.writers import CALLER, Writer

V4_HEADER_LINE: dict[str, Any] = {
    "type": "session",
    "version": 4,
    "id": "s",
    "createdAt": 1,
    "delegationDepth": 0,
    "isSeeded": False,
}
"""The header line of a minimal v4 log of session ``s``."""


def user_data(message_id: str = "u1", text: str = "hello", kind: str = "user") -> dict[str, Any]:
    """A user/message payload (the message itself is the data)."""
    return {
        "id": message_id,
        "role": "user",
        "source": {"kind": kind},
        "content": [{"type": "text", "text": text}],
    }


def assistant_data(
    message_id: str = "a1", text: str | None = "hi", calls: tuple[str, ...] = (), tool: str = "read"
) -> dict[str, Any]:
    """An assistant/message payload calling ``tool`` once per id of ``calls``; ``text=None`` gives
    empty content (a usage-only message)."""
    content: list[Any] = [] if text is None else [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": call, "name": tool, "arguments": "{}"} for call in calls]
    message = {
        "id": message_id,
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "p", "model": "m"},
    }
    return {"turn": 1, "step": 1, "message": message}


def tool_result_data(
    call_id: str = "c1", text: str = "result", message_id: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A tool/result payload answering ``call_id``."""
    block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}
    message = {
        "id": message_id or f"r-{call_id}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [block],
    }
    return {"turn": 1, "step": 1, "message": message, **extra}


def event(
    seq: int, kind: str, data: Any, surface_op: Any = ABSENT, sources: Any = ABSENT, time: int = 1000
) -> dict[str, Any]:
    """A raw event in the append key order: type, seq, time, data, sourceEventSeqs?, surfaceOp?."""
    built: dict[str, Any] = {"type": kind, "seq": seq, "time": time, "data": data}
    if sources is not ABSENT:
        built["sourceEventSeqs"] = sources
    if surface_op is not ABSENT:
        built["surfaceOp"] = surface_op
    return built


def replace(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "start": start, "end": end}


def user(seq: int, text: str = "hello", surface_op: Any = "append", sources: Any = ABSENT) -> dict[str, Any]:
    return event(seq, "user/message", user_data(f"u{seq}", text), surface_op, sources)


def assistant(
    seq: int, text: str | None = "hi", surface_op: Any = "append", sources: Any = ABSENT
) -> dict[str, Any]:
    return event(seq, "assistant/message", assistant_data(f"a{seq}", text), surface_op, sources)


def tool_result(
    seq: int, call_id: str = "c1", text: str = "result", surface_op: Any = "append", sources: Any = ABSENT
) -> dict[str, Any]:
    return event(seq, "tool/result", tool_result_data(call_id, text), surface_op, sources)


def turn_start(seq: int, turn: int = 1) -> dict[str, Any]:
    return event(seq, "turn/start", {"turn": turn})


def turn_end(seq: int, turn: int = 1, kind: str = "completed") -> dict[str, Any]:
    return event(seq, "turn/end", {"turn": turn, "reason": {"kind": kind}})


def chunk(seq: int, text: str = "h") -> dict[str, Any]:
    return event(
        seq,
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
    )


def at(value: object, *path: str | int) -> Any:
    """The JSON value at ``path`` inside ``value``, loosely typed for assertions and mutation attempts."""
    current: Any = value
    for key in path:
        current = current[key]
    return current


class EventLog:
    """A tiny log builder: :meth:`add` appends one event (time 0) and returns its seq."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def add(self, kind: str, data: Any, op: Any = None, sources: Any = None) -> int:
        """Append a ``kind`` event; ``op`` and ``sources`` are its surfaceOp and sourceEventSeqs
        (``None``: the key is absent)."""
        event: dict[str, Any] = {"type": kind, "seq": len(self.events), "time": 0, "data": data}
        if op is not None:
            event["surfaceOp"] = op
        if sources is not None:
            event["sourceEventSeqs"] = sources
        self.events.append(event)
        return len(self.events) - 1


def append_item(
    state: SessionState, item: Mapping[str, Any], time: int, writer: Writer = CALLER
) -> tuple[SessionState, Event]:
    """:func:`append_event` of an event given as JSON: its type and data, and its surfaceOp and
    sourceEventSeqs where it has them."""
    return append_event(
        state,
        item["type"],
        item["data"],
        item.get("surfaceOp", ABSENT),
        item.get("sourceEventSeqs", ABSENT),
        time=time,
        writer=writer,
    )
