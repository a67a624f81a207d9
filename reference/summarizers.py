"""Summarizers a host plugs into the compaction engine (:class:`reference.shrink.compaction.Summarizer`;
notes/dsh-compaction-projection §4.8): :class:`DeterministicSummarizer`, which needs no model, and
the two halves of a model-backed one — the messages it sends (:func:`derive_model_request`, the
span then DSH's compaction instruction) and the summary it makes of the model's answer
(:func:`summarizer_output_from_model`).

What a summary says is the summarizer's (a model's, in DSH), not a rule of the log: the engine
checks whatever it is handed (text blocks only, under the shrink bound; ``spec.shrink.summary``)
and writes it into the bracket. So these are a host's choices, kept out of the engine: no subject
runs them (the conformance protocol scripts its summarizer's attempts, ``spec.wire_engine``), and
the engine's certification lists them among the host's choices (docs/engine-certification.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from reference.shrink.compaction import AbortSignal, SummaryRequest
from spec.codes import Code, reject
from spec.log.events import Message
from spec.log.json import FrozenDict, FrozenList, JsonValue, snapshot_json
from spec.shrink.summary import SummarizerOutput, derive_summary_blocks, frame_summary
from spec.shrink.tokens import estimate_content

COMPACTION_INSTRUCTION: Final = """\
You are now the compaction engine of this coding assistant. Condense the conversation above into a \
checkpoint that lets the work continue without it. Write these Markdown sections, in this order:
## Primary Request and Intent
## Key Technical Concepts
## Files and Code
## Errors and Fixes
## Pending Jobs
## Current Work
## Next Step
## Critical Context
Keep exact paths, identifiers, commands and numbers. Write "(none)" under a section with nothing to \
say. If the conversation starts with an earlier <compacted-summary>, merge it into the new sections \
instead of copying it."""


def derive_model_request(request: SummaryRequest) -> list[Message]:
    """The messages a model-backed summarizer sends: the span's messages, then the instruction as
    a last user message (notes §4.8)."""
    instruction = snapshot_json(
        {
            "id": "compaction-instruction",
            "role": "user",
            "content": [{"type": "text", "text": COMPACTION_INSTRUCTION}],
            "source": {"kind": "plugin", "plugin": "dsh-compaction-basic"},
        }
    )
    assert isinstance(instruction, dict)
    return [*request.messages, instruction]


def summarizer_output_from_model(
    raw_output: Sequence[JsonValue],
    provider: str,
    model: str,
    max_tokens: int | None = None,
    usage: JsonValue = None,
) -> SummarizerOutput:
    """Turn a model's answer into a summarizer output: only its text blocks become the summary (an
    image or an empty answer is refused by ``spec.shrink.summary.derive_summary_blocks``), and the raw
    blocks are kept as provenance of one model call (notes §4.8)."""
    frozen_raw = snapshot_json(list(raw_output))
    frozen_usage = snapshot_json(usage) if usage is not None else None
    if not isinstance(frozen_raw, FrozenList) or not (
        frozen_usage is None or isinstance(frozen_usage, FrozenDict)
    ):
        raise reject(Code.DATA_NOT_JSON, "summarizer output is outside the lossless JSON domain")
    return SummarizerOutput(
        summary=derive_summary_blocks(frozen_raw),
        provider=provider,
        model=model,
        raw_output=frozen_raw,
        llm_stream_call=True,
        max_tokens=max_tokens,
        usage=frozen_usage,
    )


@dataclass(frozen=True)
class DeterministicSummarizer:
    """A summarizer that needs no model: one line per message (who spoke, the first
    ``excerpt_chars`` characters of its text, the tools it called), newest kept first when the
    budget is short, the whole framed checkpoint aimed at ``budget_ratio`` of the span's price.
    The same span always gives the same summary. A span too small to beat its own frame gives a
    summary that the engine's shrink check refuses, as it should."""

    excerpt_chars: int = 160  # code points of each message's text kept in its line
    budget_ratio: float = 0.5  # fraction of the shadowed price the framed checkpoint may cost
    provider: str = "reference"
    model: str = "deterministic-summarizer"

    def summarize(self, request: SummaryRequest, signal: AbortSignal) -> SummarizerOutput:
        signal.throw_if_aborted()
        lines = [self._line(message) for message in request.messages]
        heading = f"Earlier conversation condensed without a model ({len(lines)} messages; newest last):"
        budget = max(1, math.floor(request.shadowed_token_count * self.budget_ratio))
        kept: list[str] = []
        for line in reversed(lines):
            omitted = len(lines) - len(kept) - 1
            candidate = [line, *kept]
            if self._framed_cost(heading, candidate, omitted) > budget:
                break
            kept = candidate
        omitted = len(lines) - len(kept)
        text = "\n".join([heading, *([f"- ({omitted} earlier messages omitted)"] if omitted else []), *kept])
        summary = snapshot_json([{"type": "text", "text": text}])
        assert isinstance(summary, FrozenList)
        return SummarizerOutput(summary=summary, provider=self.provider, model=self.model)

    def _framed_cost(self, heading: str, lines: list[str], omitted: int) -> int:
        text = "\n".join([heading, *([f"- ({omitted} earlier messages omitted)"] if omitted else []), *lines])
        return estimate_content(frame_summary([{"type": "text", "text": text}])) + 4

    def _line(self, message: Message) -> str:
        role = message.get("role")
        source = message.get("source")
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        calls = [str(b.get("name")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool-call"]
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool-result"]
        if results:
            block = results[0]
            inner = block.get("content")
            who = f"tool result {block.get('toolCallId')}" + (
                " (error)" if block.get("isError") is True else ""
            )
            body = _text_of(inner if isinstance(inner, list) else [])
        else:
            kind = source.get("kind") if isinstance(source, dict) else None
            who = str(role) if kind in (None, "user", "model") else f"{role} ({kind})"
            body = _text_of(blocks)
        points = list(" ".join(body.split()))
        excerpt = "".join(points[: self.excerpt_chars]) + ("…" if len(points) > self.excerpt_chars else "")
        called = f"[called {', '.join(calls)}]" if calls else ""
        return f"- {who}: " + " ".join(part for part in (excerpt, called) if part)


def _text_of(blocks: Sequence[JsonValue]) -> str:
    return " ".join(
        str(b.get("text")) for b in blocks if isinstance(b, dict) and b.get("type") in ("text", "reasoning")
    )
