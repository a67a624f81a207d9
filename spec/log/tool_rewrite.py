"""The tool-result rewrite rule (notes/dsh-session-core §3.7).

Pruning shrinks a tool result by appending a ``tool/result`` that replaces it. That replacement
may change the result's inner content blocks and nothing else: same turn, step, error, meta,
message id, source, call id and ``isError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.codes import Code, reject
from spec.log.events import TOOL_RESULT, Event
from spec.log.json import JsonValue, is_deep_equal_json


def validate_tool_result_rewrite(event: Event, shadowed: Sequence[int], original: Event | None) -> None:
    """A replacing tool/result shadows exactly one node; that node is a tool/result; and the two
    are deep-equal once ``data.message.content[0].content`` is set aside in both (blocks after
    index 0 are not compared). ``original`` is the log event of the shadowed node."""
    if event.get("type") != TOOL_RESULT:
        return
    if len(shadowed) != 1:
        raise reject(
            Code.TOOL_REWRITE_NOT_ONE_NODE,
            "tool/result surface replacement must rewrite exactly one current node",
        )
    if original is None or original.get("type") != TOOL_RESULT:
        raise reject(
            Code.TOOL_REWRITE_NOT_A_RESULT,
            "tool/result surface replacement must target a current tool/result",
        )
    if not is_deep_equal_json(_comparison_view(original.get("data")), _comparison_view(event.get("data"))):
        raise reject(
            Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT,
            "tool/result surface replacement may change only content",
        )


def _comparison_view(data: JsonValue) -> JsonValue:
    """``data`` with ``message.content`` reduced to its first block, whose inner content is null."""
    if not isinstance(data, dict):
        return data
    message = data.get("message")
    if not isinstance(message, dict):
        return {**data, "message": message}
    content = message.get("content")
    first = content[0] if isinstance(content, list) and content else None
    first_view: JsonValue = {**first, "content": None} if isinstance(first, dict) else {"content": None}
    return {**data, "message": {**message, "content": [first_view]}}
