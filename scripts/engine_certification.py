"""Write docs/engine-certification.md: for each rule of docs/compaction.md, what certifies it in
another implementation — the vectors of the engine families whose ``rule`` is one of the rule's
spec functions (read from conformance/vectors/), the generated checks that reach it, and the broken
engine of tests/broken_engines.py that proves those checks catch its break.

``python -m scripts.engine_certification`` rewrites the page; ``--check`` exits 1 when it is stale
(tests/test_engine_certification.py runs the check).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
VECTORS: Final = ROOT / "conformance" / "vectors"
PAGE: Final = ROOT / "docs" / "engine-certification.md"
ENGINE_FAMILIES: Final = ("compaction", "overflow", "prune-pass", "spill", "projection", "checkpoint")


@dataclass(frozen=True)
class Rule:
    """One rule of docs/compaction.md: what it says, its spec functions, the generated checks
    that reach it and the broken engine whose break it is (``""``: none)."""

    says: str
    functions: tuple[str, ...]
    checks: str
    broken: str = ""


MACHINE: Final = "machine (`conformance/machine/engine.py`)"
RULES: Final = (
    Rule(
        "spill: a result over the limit is saved whole and logged as a head, a tail and where the rest is; the readback is byte for byte",
        (
            "should_spill",
            "derive_spill_preview",
            "derive_memory_spill_locator",
        ),
        f"{MACHINE}: `agent_step` through `spill`, `spill_read`",
        "SpillTruncatesReadback",
    ),
    Rule(
        "spill is best effort and on by default at 12500 tokens where a store is configured; `read` and nested calls never spill, nor a result that is not all text",
        (
            "plan_max_inline_tokens",
            "is_spill_candidate",
            "derive_spill_text",
        ),
        f"{MACHINE}: `spill` with a failing store and drawn limits",
    ),
    Rule(
        "prune: per oversized result a `compaction/prune` priced on the original, then its replacement; a second pass prunes nothing; `charsRemoved` adds up every pruned result",
        ("plan_prune_events", "validate_prune_config", "derive_chars_removed"),
        f"{MACHINE}: `prune`, and the pruner inside `compact_if_needed` and `overflow`",
    ),
    Rule(
        "a prune changes only a tool result's inner content (its call, ids and `isError` stay)",
        ("validate_tool_result_rewrite",),
        f"{MACHINE}: the whole-log checker after every engine step (rule `tool-rewrite`)",
        "PruneChangesIsError",
    ),
    Rule(
        "a prune with something to prune outside a turn is refused before anything is appended",
        ("validate_prune_in_turn",),
        f"{MACHINE}: `prune` between turns",
    ),
    Rule(
        "the summary span never cuts a tool call from its result",
        ("plan_compaction_region", "select_compactable_range"),
        f"{MACHINE}: `compact_region` over drawn spans, balanced or not",
        "SummarySpanCutsCallFromResult",
    ),
    Rule(
        "the bracket is always paired: every `compaction/start` gets exactly one `compaction/end`, with the error on every failure path (failure, timeout, cancellation, empty or image summary)",
        ("derive_compaction_end", "derive_summary_timeout"),
        f"{MACHINE}: every scripted attempt; crash (`conformance/crash/workloads.py` compaction workload): a power cut at every point of a bracket, resume closes it (D3.6)",
        "LeavesBracketOpenOnTimeout, WritesSecondCompactionEnd",
    ),
    Rule(
        "the lock: a live bracket refuses a second compaction; a bracket before a newer end-seed is stale; an automatic compaction belongs to the open turn, a manual one runs between turns",
        ("find_active_compaction", "plan_compaction_owner"),
        f"{MACHINE}: `compact`, `compact_region` and `append_log_only` brackets, forks and resumes",
    ),
    Rule(
        "summary framing and the shrink check: only text blocks, the checkpoint message cites the start, the summary and every shadowed node, and is smaller than the span",
        (
            "derive_summary_blocks",
            "plan_summary_replacement",
            "validate_summary_smaller",
        ),
        f"{MACHINE}: the `long`, `image` and `empty` attempts",
    ),
    Rule(
        "the surface must not change under the span while the summarizer runs (automatic: not at all)",
        ("validate_surface_stable",),
        f"{MACHINE}: the `append-user` attempt",
    ),
    Rule(
        "a manual compaction answers a code for each failure and flushes once its bracket is closed",
        ("derive_manual_outcome", "should_flush_after_close"),
        f"{MACHINE}: `compact`; crash: the compaction workload's fault injection",
    ),
    Rule(
        "pressure: at the threshold, prune, then summarize the head keeping the retained tail, at most `compactionRetries + 1` times; it needs the context window",
        (
            "is_under_pressure",
            "derive_context_tokens",
            "derive_request_header",
            "validate_context_capacity",
            "validate_pressure_relieved",
            "resolve_compact_spec",
            "derive_retain_ratio",
            "resolve_target_policy",
            "validate_compaction_policy",
        ),
        f"{MACHINE}: `compact_if_needed` with drawn windows",
    ),
    Rule(
        "overflow recovery retries only when `replaceGeneration` grew, at most `maxOverflowRetries` times, and only for a context overflow",
        (
            "is_overflow_retry_earned",
            "may_attempt_overflow_recovery",
        ),
        f"{MACHINE}: `overflow`, `overflow_reset`",
        "RetriesWithoutGrowth",
    ),
    Rule(
        "projection units: registrants of a key share it at one `stateVersion`, another is refused; a unit registered late reads the right state; an event a unit ignores returns the same state",
        (
            "validate_projection_unit",
            "plan_registration",
            "fold_projection",
            "derive_projection_changes",
        ),
        f"{MACHINE}: `project`, `unproject`, and `state_of` equal to the spec's fold after every step",
    ),
    Rule(
        "`snapshot` serves the wire units only, all at one log position",
        ("derive_wire_keys",),
        f"{MACHINE}: `snapshot` after every step",
    ),
    Rule(
        "the cache may be stale but never wrong: a row is caught up from the log, one of another version or "
        "lifecycle, a malformed record, a cursor outside the log or a state its schema refuses is dropped",
        (
            "decode_cache_row",
            "decode_cache_rows",
            "derive_cache_identity",
            "is_ledger_v1_state",
            "is_ledger_v2_state",
        ),
        f"{MACHINE}: `power_cut_after_flush` and the cache read after every power cut (`state_of_stored`)",
        "CacheAnswersFromStaleRow",
    ),
    Rule(
        "durability checkpoints flush before a model request, a tool and each pre-step, and fail closed: a failed flush and the action never runs",
        (
            "is_durability_checkpoint",
            "checkpoint_failure",
        ),
        f"{MACHINE}: `checkpoint`, `checkpoint_on_failing_disk`",
        "CheckpointFailsOpen",
    ),
)
HOST_CHOICES: Final = (
    "the deterministic summarizer, `summary_timeout` and the summarizer's thread",
    "compaction and checkpoint ids (`new_id`)",
    "`DirectorySpillStore`'s layout and modes, and the cache file `projections.json`'s format",
    "when cache rows are written (`turn/end`, close, every 200 events) — only that a row is never wrong is certified",
)


def vectors_by_function() -> dict[str, list[str]]:
    """Every engine vector's case key, by the spec function its ``rule`` names."""
    found: dict[str, list[str]] = defaultdict(list)
    for family in ENGINE_FAMILIES:
        for path in sorted((VECTORS / family).glob("*.json")):
            vector = json.loads(path.read_text(encoding="utf-8"))
            found[str(vector["rule"])].append(f"{family}/{path.stem}")
    return found


def render() -> str:
    vectors = vectors_by_function()
    lines = [
        "# What certifies each rule of the compaction engine",
        "",
        "Written by `scripts/engine_certification.py` (do not edit by hand). For each rule of",
        "[compaction.md](compaction.md): the spec functions that state it, the vectors (`conformance/vectors/`,",
        "by the `rule` each names) and the generated checks that hold another implementation to it, and the",
        "broken engine (`tests/broken_engines.py`) that `tests/test_broken_engines.py` shows is caught.",
        "",
        "| rule | spec | vectors | generated checks | broken engine caught |",
        "| --- | --- | --- | --- | --- |",
    ]
    for rule in RULES:
        keys = [key for function in rule.functions for key in vectors.get(function, [])]
        spec = "<br>".join(f"`{function}`" for function in rule.functions)
        shown = "<br>".join(f"`{key}`" for key in keys) or "none"
        lines.append(f"| {rule.says} | {spec} | {shown} | {rule.checks} | {rule.broken or '—'} |")
    lines += ["", "Not certified, as each implementation's own choice:", ""]
    lines += [f"- {choice}" for choice in HOST_CHOICES]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        fresh = PAGE.exists() and PAGE.read_text(encoding="utf-8") == text
        print("docs/engine-certification.md is fresh" if fresh else "docs/engine-certification.md is stale")
        return 0 if fresh else 1
    PAGE.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
