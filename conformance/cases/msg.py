"""The data of the messages the vectors write, with the vectors' defaults: message ids ``u1``/``a1``,
call ``c1`` and the model source ``p``/``m``. Case modules call them as ``msg.user()``,
``msg.assistant(calls=["c1"])``, ``msg.result("c1")``; :func:`conformance.cases.build.log` and
:func:`conformance.cases.build.append` put such data on the surface as the kind its shape tells.
The builders themselves are the suite's own (:mod:`conformance.builders`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from conformance import builders as payloads
from spec.log.json import JsonObject, JsonValue

PROVIDER: Final = "p"  # the model source of every assistant message a vector writes
MODEL: Final = "m"


def user(message_id: str = "u1", text: str = "hello") -> JsonObject:
    """A user/message's data: the message itself."""
    return payloads.user_message(message_id, text)


def assistant(
    message_id: str = "a1", text: str | None = "hi", calls: Sequence[str] = (), turn: int = 1, step: int = 1
) -> JsonObject:
    """An assistant/message's data announcing ``calls``; ``text=None`` without calls is empty content."""
    return payloads.assistant_message(
        message_id, text, tuple(calls), turn, step, provider=PROVIDER, model=MODEL
    )


def result(
    call: str = "c1",
    text: str = "result",
    turn: int = 1,
    step: int = 1,
    is_error: bool = False,
    more: Sequence[JsonValue] = (),
    after: Sequence[JsonValue] = (),
) -> JsonObject:
    """A tool/result's data answering ``call``: its block holds ``text``, then the ``more`` blocks;
    ``after`` are message blocks after the tool-result block."""
    return payloads.tool_result(call, text, is_error, turn, step, more, after)


def rewritten(data: JsonObject, text: str) -> JsonObject:
    """A tool/result's data with its first block's inner content replaced by ``text``."""
    changed = payloads.rewritten_result(data, text)
    assert isinstance(changed, dict)
    return changed


def header(**config: JsonValue) -> JsonObject:
    """A request/header's data for the model source ``p``/``m``, with more ``config``."""
    return {"header": {"config": {"provider": PROVIDER, "model": MODEL, **config}}}
