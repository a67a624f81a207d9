"""The event envelope, the event vocabulary, and what one event shows the model.

An event is a JSON object ``{type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable?}``
(notes/dsh-session-core §1.1). The log holds events at ``log[i].seq == i``, never changed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, TypeAlias

from spec.log.json import JsonObject, JsonValue

Event: TypeAlias = JsonObject
"""One log entry. Events held by a session are frozen (spec.log.json.FrozenDict)."""

Message: TypeAlias = JsonObject
"""A model-visible message: ``{id, role, content, source}``."""

ENVELOPE_KEYS: Final = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})

USER_MESSAGE: Final = "user/message"
ASSISTANT_MESSAGE: Final = "assistant/message"
TOOL_RESULT: Final = "tool/result"
TOOL_CALL: Final = "tool/call"
TURN_START: Final = "turn/start"
TURN_END: Final = "turn/end"
STEP_START: Final = "step/start"
STEP_END: Final = "step/end"
ASSISTANT_CHUNK: Final = "assistant/chunk"
END_SEED: Final = "session/end-seed"
REQUEST_HEADER: Final = "request/header"
REQUEST_HEADER_DELTA: Final = "request/header-delta"
REQUEST_CONTEXT: Final = "request/context"
TODO_WRITE: Final = "todo/write"
COMPACTION_START: Final = "compaction/start"
COMPACTION_END: Final = "compaction/end"
COMPACTION_SUMMARY: Final = "compaction/summary"
COMPACTION_PRUNE: Final = "compaction/prune"

SURFACE_EVENT_TYPES: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})

KNOWN_EVENT_TYPES: Final = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)
"""The 48 types DSH knows (notes/dsh-session-core §2.4). A Session accepts any type; only the
storage read path refuses an unknown type that is not marked ``ignorable``."""


def is_named(value: object, names: Collection[str]) -> bool:
    """``value`` is one of ``names``: a string among them. Anything else (a number, a list, an
    object) never is, and asking is never an error, so that a rule reading a type, a kind or a code
    from any JSON value stays total.

    post: __return__ == (isinstance(value, str) and value in names)
    """
    return isinstance(value, str) and value in names


def is_surface_eligible_type(event_type: object) -> bool:
    """Exactly three types can join the surface: user/message, assistant/message, tool/result
    (notes/dsh-session-core §2.1)."""
    return isinstance(event_type, str) and event_type in SURFACE_EVENT_TYPES  # is_named, inlined: per event


def is_surface_event(event: Event) -> bool:
    """A surface event has an eligible type and carries its surfaceOp marker (§3.11)."""
    return is_surface_eligible_type(event.get("type")) and "surfaceOp" in event


def derive_event_message(event: Event) -> Message | None:
    """The message one event shows the model: a user/message's data, an assistant/message's or
    tool/result's ``data.message``; nothing for an assistant/message with empty content (it only
    hosts usage) or for any other type (notes/dsh-session-core §2.6)."""
    kind = event.get("type")
    data = event.get("data")
    if kind == USER_MESSAGE:
        return data if isinstance(data, dict) else None
    if kind not in (ASSISTANT_MESSAGE, TOOL_RESULT) or not isinstance(data, dict):
        return None
    message = data.get("message")
    if not isinstance(message, dict):
        return None
    if kind == ASSISTANT_MESSAGE:
        content = message.get("content")
        if isinstance(content, list) and len(content) == 0:
            return None
    return message


def event_data(event: Event) -> JsonObject:
    """The event's data when it is an object, else an empty object (for tolerant readers)."""
    data = event.get("data")
    return data if isinstance(data, dict) else {}


def tool_call_ids_of(message: JsonValue) -> list[str]:
    """The ids of the top-level ``tool-call`` blocks of an assistant message, in order."""
    if not isinstance(message, dict):
        return []
    content = message.get("content")
    if not isinstance(content, list):
        return []
    ids: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool-call":
            block_id = block.get("id")
            ids.append(block_id if isinstance(block_id, str) else str(block_id))
    return ids
