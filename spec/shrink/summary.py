"""The summary checkpoint: what replaces a compacted span — the summarizer's output it may hold,
how it is framed, whether it is worth landing, and the two events that commit it
(SPEC-DECISIONS D8; notes/dsh-compaction-projection §4.2, §4.3, §4.5 step 6, §4.8).

The span itself (:func:`spec.shrink.compaction.plan_compaction_region`) and the bracket around the commit
(:mod:`spec.shrink.bracket`) are decided elsewhere; this module turns a span and a summary into the
``compaction/summary`` event and the checkpoint ``user/message`` that replaces the span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from spec.codes import Code, reject
from spec.log.events import Event, Message, derive_event_message
from spec.log.json import FrozenDict, FrozenList, JsonValue, snapshot_json
from spec.shrink.bracket import snapshot_compaction_data
from spec.shrink.compaction import CompactionRegion
from spec.shrink.tokens import PricedNode, estimate_message

CHECKPOINT_PREAMBLE: Final = (
    "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up "
    "context. Treat the captured context as established background and build on it without restating it. "
    "Continue the task directly from the messages that follow, without acknowledging this checkpoint."
)
SUMMARY_OPEN_TAG: Final = "<compacted-summary>"
SUMMARY_CLOSE_TAG: Final = "</compacted-summary>"
CHECKPOINT_PLUGIN: Final = "compact"

# ECMAScript WhiteSpace and LineTerminator, what String.prototype.trim removes.
_JS_WHITESPACE: Final = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"


def derive_checkpoint_source(compaction_id: str, source_command_id: str | None = None) -> FrozenDict:
    """``{kind: "plugin", plugin: "compact", compactionId, sourceCommandId?}``; the last key is
    left out when there is no command (notes §4.3)."""
    source: dict[str, JsonValue] = {
        "kind": "plugin",
        "plugin": CHECKPOINT_PLUGIN,
        "compactionId": compaction_id,
    }
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    return snapshot_compaction_data(source)


def derive_summary_blocks(output: Sequence[JsonValue]) -> FrozenList:
    """What a summarizer's output contributes: its top-level ``text`` blocks only (reasoning and
    tool calls are dropped). An image anywhere, even nested in a tool result, is refused, and so is
    output with no text block holding non-whitespace text (notes §4.8)."""
    pending: list[JsonValue] = list(output)
    while pending:
        block = pending.pop()
        if isinstance(block, dict):
            if block.get("type") == "image":
                raise reject(
                    Code.COMPACTION_SUMMARY_UNSUPPORTED_CONTENT,
                    "compaction summary cannot contain image output",
                )
            inner = block.get("content")
            if block.get("type") == "tool-result" and isinstance(inner, list):
                pending.extend(inner)
    texts = [block for block in output if isinstance(block, dict) and block.get("type") == "text"]
    if not any(isinstance(block.get("text"), str) and block["text"].strip(_JS_WHITESPACE) for block in texts):  # type: ignore[union-attr]
        raise reject(Code.COMPACTION_SUMMARY_EMPTY, "summarization produced no text summary content")
    return _frozen_list(texts)


def frame_summary(summary: Sequence[JsonValue]) -> FrozenList:
    """``frameSummary``: the preamble and an opening ``<compacted-summary>`` tag, the summary
    blocks, then the closing tag, each tag in a text block of its own (notes §4.8)."""
    opening: JsonValue = {"type": "text", "text": f"{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}"}
    closing: JsonValue = {"type": "text", "text": SUMMARY_CLOSE_TAG}
    return _frozen_list([opening, *summary, closing])


def derive_checkpoint_message(
    message_id: str, summary: Sequence[JsonValue], compaction_id: str, source_command_id: str | None = None
) -> FrozenDict:
    """The checkpoint ``user/message``: the framed summary, sourced from the compaction
    (notes §4.2). DSH mints ``message_id`` at random; here the caller supplies it."""
    message: dict[str, JsonValue] = {
        "id": message_id,
        "role": "user",
        "content": frame_summary(summary),
        "source": derive_checkpoint_source(compaction_id, source_command_id),
    }
    return snapshot_compaction_data(message)


def validate_summary_smaller(checkpoint_message: JsonValue, shadowed_token_count: int) -> None:
    """Reject a checkpoint that is not smaller than what it shadows (notes §4.5 step 6.2)."""
    framed = estimate_message(checkpoint_message)
    if framed >= shadowed_token_count:
        raise reject(
            Code.COMPACTION_SUMMARY_NOT_SMALLER,
            f"summary is not smaller than the shadowed content ({framed} estimated framed tokens >= {shadowed_token_count})",
        )


def derive_shadowed_token_count(priced: Sequence[PricedNode], region: CompactionRegion) -> int:
    """The shadow price of a region: the sum of the priced nodes at its positions, which must be
    exactly its shadowed seqs (notes §4.5 step 6.1)."""
    selected = priced[region.first : region.last + 1]
    if tuple(seq for seq, _ in selected) != region.shadowed:
        raise reject(
            Code.COMPACTION_SURFACE_CHANGED, "compaction: selected surface changed before summarization began"
        )
    return sum(tokens for _, tokens in selected)


def derive_summarization_messages(events: Sequence[Event], shadowed: Sequence[int]) -> tuple[Message, ...]:
    """The conversation the summarizer reads: the message of each shadowed node, in surface order,
    leaving out nodes that show none (notes §4.5 step 6.1). System prompt and tools come from the
    request header, outside the surface."""
    messages = (derive_event_message(events[seq]) for seq in shadowed)
    return tuple(message for message in messages if message is not None)


@dataclass(frozen=True)
class SummarizerOutput:
    """What a summarizer returns (notes §4.8): the summary blocks and the call's provenance."""

    summary: FrozenList
    provider: str
    model: str
    raw_output: FrozenList | None = None
    llm_stream_call: bool = False
    max_tokens: int | None = None
    usage: FrozenDict | None = None


@dataclass(frozen=True)
class SummaryReplacementPlan:
    """The commit body: ``compaction/summary`` with ``summary_data``, then at once the checkpoint
    ``user/message`` with ``checkpoint_data``, ``surface_op`` and ``source_event_seqs``."""

    summary_data: FrozenDict
    checkpoint_data: FrozenDict
    surface_op: FrozenDict
    source_event_seqs: FrozenList


def plan_summary_replacement(
    region: CompactionRegion,
    start_seq: int,
    summary_seq: int,
    lifecycle: Mapping[str, JsonValue],
    output: SummarizerOutput,
    shadowed_token_count: int,
    message_id: str,
) -> SummaryReplacementPlan:
    """The two events that commit a summary (notes §4.2, §4.5 step 6.5). The summary event carries
    the ids, the summary, the call provenance (``rawOutput`` and ``llmStreamCall: true`` only for a
    streamed call), the shadowed range, seqs and price, and the route. The checkpoint replaces the
    region and cites the ``compaction/start``, the ``compaction/summary`` and every shadowed node,
    in that order (notes §4.2; checkpoint provenance §4.3)."""
    compaction_id = lifecycle.get("compactionId")
    command = lifecycle.get("sourceCommandId")
    data: dict[str, JsonValue] = {"compactionId": compaction_id}
    if "sourceCommandId" in lifecycle:
        data["sourceCommandId"] = command
    data["summary"] = output.summary
    if output.llm_stream_call:
        data["rawOutput"] = output.raw_output
        data["llmStreamCall"] = True
    elif output.raw_output is not None:
        data["rawOutput"] = output.raw_output
    data["shadowedRange"] = {"start": region.start, "end": region.end}
    data["shadowedSeqs"] = list(region.shadowed)
    data["shadowedTokenCount"] = shadowed_token_count
    data["provider"] = output.provider
    data["model"] = output.model
    if output.max_tokens is not None:
        data["maxTokens"] = output.max_tokens
    if output.usage is not None:
        data["usage"] = output.usage
    checkpoint = derive_checkpoint_message(
        message_id, output.summary, str(compaction_id), command if isinstance(command, str) else None
    )
    return SummaryReplacementPlan(
        summary_data=snapshot_compaction_data(data),
        checkpoint_data=checkpoint,
        surface_op=snapshot_compaction_data({"op": "replace", "start": region.start, "end": region.end}),
        source_event_seqs=_frozen_list([start_seq, summary_seq, *region.shadowed]),
    )


# --- helpers ----------------------------------------------------------------------------------------


def _frozen_list(value: Sequence[JsonValue]) -> FrozenList:
    frozen = snapshot_json(list(value))
    if not isinstance(frozen, FrozenList):
        raise reject(Code.DATA_NOT_JSON, "compaction data is outside the lossless JSON domain")
    return frozen
