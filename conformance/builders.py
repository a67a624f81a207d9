"""Well-formed event payloads for the suite's generated workloads (machine, exhaustive, crash)
and for the cases the vectors are generated from (``conformance/cases/build.py`` calls these with
the vectors' own model source, provider ``p`` and model ``m``).

These build the JSON an agent loop would append: messages with stable ids derived from the seq
they will get, tool calls and results that answer each other, and the log-only boundaries of turns
and steps. Nothing here decides validity; the spec model does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from spec.log.events import (
    ASSISTANT_MESSAGE,
    STEP_END,
    STEP_START,
    TOOL_CALL,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
)
from spec.log.json import JsonObject, JsonValue
from spec.log.session import ABSENT, Absent
from spec.protocol import Request

PROVIDER: Final = "suite"
MODEL: Final = "model-1"
ABSENT_FLAG: Final = "absent"  # a tool result block's isError left out (not null, not false)
START_TIME: Final = 1_000  # ms: the clock every stateful run (machine, crash, modelcheck, ...) starts at


def user_message(
    message_id: str, text: str = "hello", kind: str = "user", more: Sequence[JsonValue] = ()
) -> JsonObject:
    """A user/message payload: the message itself is the data; ``more`` blocks follow the text."""
    return {
        "id": message_id,
        "role": "user",
        "source": {"kind": kind},
        "content": [{"type": "text", "text": text}, *more],
    }


def assistant_message(
    message_id: str,
    text: str | None = "ok",
    calls: tuple[str, ...] = (),
    turn: int = 1,
    step: int = 1,
    *,
    provider: str = PROVIDER,
    model: str = MODEL,
    more: Sequence[JsonValue] = (),
) -> JsonObject:
    """An assistant/message payload announcing ``calls``, from ``provider``'s ``model``, with
    ``more`` blocks between the text and the calls; ``text=None``, nothing more and no calls gives
    empty content, a usage-only message that derives nothing."""
    content: list[JsonValue] = [] if text is None else [{"type": "text", "text": text}]
    content += list(more)
    content += [{"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in calls]
    message: JsonObject = {
        "id": message_id,
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": provider, "model": model},
    }
    return {"turn": turn, "step": step, "message": message}


def tool_result(
    call_id: str,
    text: str = "result",
    is_error: bool | str = False,
    turn: JsonValue = 1,
    step: JsonValue = 1,
    more: Sequence[JsonValue] = (),
    after: Sequence[JsonValue] = (),
) -> JsonObject:
    """A tool/result payload answering ``call_id``: its block's content is the text, then ``more``
    blocks; ``is_error`` :data:`ABSENT_FLAG` leaves the block's ``isError`` out; ``after`` are
    message blocks after the tool-result block."""
    block: JsonObject = {"type": "tool-result", "toolCallId": call_id}
    if is_error != ABSENT_FLAG:
        block["isError"] = is_error
    block["content"] = [{"type": "text", "text": text}, *more]
    message: JsonObject = {
        "id": f"r-{call_id}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [block, *after],
    }
    return {"turn": turn, "step": step, "message": message}


def rewritten_result(original: JsonValue, text: str, is_error: JsonValue | Absent = ABSENT) -> JsonValue:
    """``original`` (a tool/result's data) with the text of its first block's content replaced; a
    given ``is_error`` (``None`` too) also changes the block's ``isError`` flag, which the rewrite
    rule forbids."""
    if not isinstance(original, dict):
        return original
    message = original.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    if (
        not isinstance(message, dict)
        or not isinstance(blocks, list)
        or not blocks
        or not isinstance(blocks[0], dict)
    ):
        return original
    block: JsonObject = {**blocks[0], "content": [{"type": "text", "text": text}]}
    if not isinstance(is_error, Absent):
        block["isError"] = is_error
    content: list[JsonValue] = [block, *blocks[1:]]
    return {**original, "message": {**message, "content": content}}


def turn_start(turn: int | float) -> JsonObject:
    return {"turn": turn}


def turn_end(turn: int, kind: str = "completed") -> JsonObject:
    return {"turn": turn, "reason": {"kind": kind}}


def step_start(turn: int, step: int) -> JsonObject:
    return {"turn": turn, "step": step}


def step_end(turn: int, step: int) -> JsonObject:
    return {"turn": turn, "step": step}


def tool_call(call_id: str, turn: int = 1, step: int = 1) -> JsonObject:
    return {"turn": turn, "step": step, "callId": call_id, "name": "read"}


def compaction_start(compaction_id: str, turn: int | None) -> JsonObject:
    return {"compactionId": compaction_id, "turn": turn}


def replace_op(start: int, end: int) -> JsonObject:
    return {"op": "replace", "start": start, "end": end}


# --- the agent loop's requests -------------------------------------------------------------------


def append_request(session_id: str, kind: str, data: JsonValue, **extra: JsonValue) -> Request:
    return ("append", {"id": session_id, "type": kind, "data": data, **extra})


def open_turn(session_id: str, turns: int, message: JsonObject) -> list[Request]:
    """Turn ``turns + 1`` opened with the user's ``message``."""
    return [
        append_request(session_id, TURN_START, turn_start(turns + 1)),
        append_request(session_id, USER_MESSAGE, message, surfaceOp="append"),
    ]


def open_step(
    session_id: str, turn: int, step: int, message_id: str, calls: tuple[str, ...]
) -> list[Request]:
    """A step opened by an assistant message that answers ``done`` or announces ``calls``, with a
    ``tool/call`` for each (the step left open for their results)."""
    message = assistant_message(message_id, None if calls else "done", calls, turn, step)
    return [
        append_request(session_id, STEP_START, step_start(turn, step)),
        append_request(session_id, ASSISTANT_MESSAGE, message, surfaceOp="append"),
        *(append_request(session_id, TOOL_CALL, tool_call(call, turn, step)) for call in calls),
    ]


def close_step(session_id: str, turn: int, step: int) -> Request:
    return append_request(session_id, STEP_END, step_end(turn, step))


def close_turn(session_id: str, turn: int) -> Request:
    return append_request(session_id, TURN_END, turn_end(turn))
