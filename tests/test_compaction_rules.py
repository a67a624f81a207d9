"""Summary compaction and spill, the pure rules (notes/dsh-compaction-projection §4, §5, §10.2;
SPEC-DECISIONS D8)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from event_builders import EventLog
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.checks.compaction import is_compact_checkpoint
from spec.codes import Code, SpecError
from spec.log.json import FrozenList
from spec.log.surface import derive_messages, fold_surface
from spec.log.unclosed import find_active_compaction
from spec.shrink.bracket import (
    derive_compaction_end,
    derive_compaction_lifecycle,
    is_compaction_busy,
    plan_compaction_owner,
    validate_compaction_inactive,
)
from spec.shrink.compaction import (
    CompactionPolicy,
    CompactionRegion,
    CompactSpec,
    derive_retain_ratio,
    plan_compaction_region,
    resolve_compact_spec,
    resolve_target_policy,
    select_compactable_range,
    validate_compaction_policy,
    validate_surface_stable,
)
from spec.shrink.pairing import is_balanced_after, is_balanced_before
from spec.shrink.spill import (
    derive_spill_preview,
    derive_spill_text,
    should_spill,
    validate_max_inline_tokens,
)
from spec.shrink.summary import (
    CHECKPOINT_PREAMBLE,
    SummarizerOutput,
    derive_checkpoint_message,
    derive_checkpoint_source,
    derive_shadowed_token_count,
    derive_summarization_messages,
    derive_summary_blocks,
    frame_summary,
    plan_summary_replacement,
    validate_summary_smaller,
)
from spec.shrink.tokens import estimate_content, price_surface, utf16_length


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


class Log(EventLog):
    """A tiny log builder: each method appends one event and returns its seq."""

    def user(self, value: str = "hello there") -> int:
        message = {
            "id": f"u{len(self.events)}",
            "role": "user",
            "content": [text(value)],
            "source": {"kind": "user"},
        }
        return self.add("user/message", message, "append")

    def call(self, *call_ids: str) -> int:
        blocks = [{"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in call_ids]
        return self.add(
            "assistant/message",
            {
                "message": {
                    "id": f"a{len(self.events)}",
                    "role": "assistant",
                    "content": blocks,
                    "source": {"kind": "model", "provider": "p", "model": "m"},
                }
            },
            "append",
        )

    def result(self, call_id: str, output: str = "ok") -> int:
        message = {
            "id": f"r{len(self.events)}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": [text(output)]}],
        }
        return self.add("tool/result", {"message": message}, "append")

    @property
    def nodes(self) -> tuple[int, ...]:
        return fold_surface(self.events).nodes

    @property
    def priced(self) -> tuple[tuple[int, int], ...]:
        return price_surface(self.nodes, self.events)


def priced_as(nodes: tuple[int, ...], *prices: int) -> tuple[tuple[int, int], ...]:
    return tuple(zip(nodes, prices))


# --- policy ---------------------------------------------------------------------------------------


def test_the_default_policy_resolves_to_80_percent_threshold_and_16_percent_retention() -> None:
    policy = CompactionPolicy()
    assert (policy.threshold_ratio, derive_retain_ratio(policy), policy.retain_tokens) == (0.8, 0.16, None)
    assert (policy.max_tokens, policy.compaction_retries, policy.max_overflow_retries) == (8192, 1, 1)
    assert resolve_compact_spec(policy, 1000) == CompactSpec(threshold_tokens=800, retain_tokens=160)


def test_the_policy_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CompactionPolicy().max_tokens = 1  # type: ignore[misc]


def test_the_threshold_is_floored() -> None:
    assert resolve_compact_spec(CompactionPolicy(), 999).threshold_tokens == 799


@pytest.mark.parametrize(
    "threshold, retain, window, expected",
    [(0.5, 0.12, 1000, (500, 120)), (0.8, 0.1, 2000, (1600, 200)), (0.6, 0.2, 2000, (1200, 400))],
)
def test_ratios_scale_with_the_context_window(
    threshold: float, retain: float, window: int, expected: tuple[int, int]
) -> None:
    spec = resolve_compact_spec(CompactionPolicy(threshold_ratio=threshold, retain_ratio=retain), window)
    assert (spec.threshold_tokens, spec.retain_tokens) == expected


def test_an_override_naming_retain_tokens_replaces_the_inherited_retain_ratio() -> None:
    merged = resolve_target_policy(CompactionPolicy(retain_ratio=0.2), {"retainTokens": 50})
    assert (merged.retain_ratio, merged.retain_tokens) == (None, 50)
    assert resolve_compact_spec(merged, 1000) == CompactSpec(800, 50)


def test_an_override_naming_retain_ratio_replaces_the_inherited_retain_tokens() -> None:
    merged = resolve_target_policy(CompactionPolicy(retain_tokens=10), {"retainRatio": 0.1})
    assert (merged.retain_ratio, merged.retain_tokens) == (0.1, None)


def test_an_override_without_retention_inherits_the_default_form() -> None:
    merged = resolve_target_policy(CompactionPolicy(retain_tokens=10), {"thresholdRatio": 0.9})
    assert (merged.threshold_ratio, merged.retain_tokens, merged.retain_ratio) == (0.9, 10, None)


def test_an_override_with_an_unknown_key_is_rejected() -> None:
    with pytest.raises(SpecError, match='unknown key "auto"') as caught:
        resolve_target_policy(CompactionPolicy(), {"auto": True})
    assert caught.value.code == Code.COMPACTION_CONFIG_INVALID


@pytest.mark.parametrize(
    "policy, message",
    [
        (
            CompactionPolicy(threshold_ratio=0),
            "BasicCompactionConfig.thresholdRatio (0) must be a number in (0, 1]",
        ),
        (
            CompactionPolicy(threshold_ratio=1.5),
            "BasicCompactionConfig.thresholdRatio (1.5) must be a number in (0, 1]",
        ),
        (
            CompactionPolicy(threshold_ratio=True),
            "BasicCompactionConfig.thresholdRatio (true) must be a number in (0, 1]",
        ),
        (
            CompactionPolicy(retain_ratio=0.2, retain_tokens=5),
            "BasicCompactionConfig: retainRatio and retainTokens are mutually exclusive",
        ),
        (
            CompactionPolicy(retain_ratio=0.8),
            "BasicCompactionConfig: retainRatio (0.8) must be less than the resolved thresholdRatio (0.8)",
        ),
        (
            CompactionPolicy(retain_ratio=0),
            "BasicCompactionConfig.retainRatio (0) must be a number in (0, 1]",
        ),
        (
            CompactionPolicy(retain_tokens=-1),
            "BasicCompactionConfig.retainTokens (-1) must be a non-negative integer",
        ),
        (
            CompactionPolicy(summarization_provider="p"),
            "BasicCompactionConfig: summarizationProvider and summarizationModel must be set together as an empty or non-empty pair",
        ),
        (CompactionPolicy(max_tokens=0), "BasicCompactionConfig.maxTokens (0) must be a positive integer"),
        (
            CompactionPolicy(compaction_retries=-1),
            "BasicCompactionConfig.compactionRetries (-1) must be a non-negative integer",
        ),
        (
            CompactionPolicy(max_overflow_retries=1.5),
            "BasicCompactionConfig.maxOverflowRetries (1.5) must be a non-negative integer",
        ),
    ],
)
def test_an_invalid_policy_is_rejected(policy: CompactionPolicy, message: str) -> None:
    caught = refusal(lambda: validate_compaction_policy(policy))
    assert (caught.code, caught.message) == (Code.COMPACTION_CONFIG_INVALID, message)


def test_zero_overflow_retries_and_a_summarization_pair_are_valid() -> None:
    validate_compaction_policy(
        CompactionPolicy(max_overflow_retries=0, summarization_provider="p", summarization_model="m")
    )


@pytest.mark.parametrize("window", [0, -5, 1.5, True])
def test_a_context_window_must_be_a_positive_integer(window: Any) -> None:
    with pytest.raises(SpecError, match=r"contextWindow \(.*\) must be a positive integer") as caught:
        resolve_compact_spec(CompactionPolicy(), window)
    assert caught.value.code == Code.COMPACTION_CONFIG_INVALID


def test_retention_must_stay_below_the_threshold_tokens() -> None:
    caught = refusal(lambda: resolve_compact_spec(CompactionPolicy(retain_tokens=800), 1000, "p/m"))
    assert (
        caught.message
        == "BasicCompactionConfig: p/m retainTokens (800) must be less than threshold tokens 800"
    )


# --- range selection ------------------------------------------------------------------------------


def users(count: int) -> Log:
    log = Log()
    for _ in range(count):
        log.user()
    return log


def test_nothing_priced_selects_nothing() -> None:
    assert select_compactable_range((), (), [], 0) is None


def test_a_priced_surface_that_is_not_the_current_surface_is_rejected() -> None:
    log = users(3)
    with pytest.raises(SpecError, match="does not match") as caught:
        select_compactable_range(priced_as((0, 2, 1), 1, 1, 1), log.nodes, log.events, 0)
    assert caught.value.code == Code.COMPACTION_SURFACE_MISMATCH


def test_retain_zero_keeps_exactly_the_newest_node() -> None:
    log = users(3)
    assert select_compactable_range(priced_as(log.nodes, 5, 5, 5), log.nodes, log.events, 0) == (0, 1)


def test_the_tail_is_kept_until_its_price_reaches_the_retention() -> None:
    log = users(4)
    assert select_compactable_range(priced_as(log.nodes, 10, 10, 10, 10), log.nodes, log.events, 15) == (0, 1)


def test_a_tail_whose_price_equals_the_retention_is_enough() -> None:
    log = users(4)
    assert select_compactable_range(priced_as(log.nodes, 10, 10, 10, 10), log.nodes, log.events, 20) == (0, 1)


def test_retain_zero_keeps_the_newest_node_even_when_it_costs_nothing() -> None:
    log = users(3)
    assert select_compactable_range(priced_as(log.nodes, 5, 0, 0), log.nodes, log.events, 0) == (0, 1)


def test_retention_reached_only_at_the_head_selects_nothing() -> None:
    log = users(3)
    assert select_compactable_range(priced_as(log.nodes, 10, 1, 1), log.nodes, log.events, 12) is None


def test_retention_never_reached_selects_nothing() -> None:
    log = users(3)
    assert select_compactable_range(priced_as(log.nodes, 1, 1, 1), log.nodes, log.events, 100) is None


def test_the_cut_snaps_head_ward_over_an_open_tool_call() -> None:
    log = Log()
    first = log.user()
    log.call("c1")
    log.result("c1")
    log.user()
    assert select_compactable_range(priced_as(log.nodes, 5, 5, 5, 5), log.nodes, log.events, 10) == (
        first,
        first,
    )


def test_a_cut_that_would_consume_the_only_tool_pair_selects_nothing() -> None:
    log = Log()
    log.call("c1")
    log.result("c1")
    assert select_compactable_range(log.priced, log.nodes, log.events, 0) is None


def test_an_open_call_at_the_tail_stays_outside_the_region() -> None:
    log = Log()
    log.user()
    log.user()
    log.call("c1")
    assert select_compactable_range(priced_as(log.nodes, 5, 5, 5), log.nodes, log.events, 0) == (0, 1)


shapes = st.lists(st.sampled_from(["user", "closed", "open", "pair2"]), min_size=1, max_size=10)


def build(kinds: list[str]) -> Log:
    log = Log()
    for index, kind in enumerate(kinds):
        if kind == "user":
            log.user()
        elif kind == "pair2":
            log.call(f"x{index}", f"y{index}")
            log.result(f"x{index}")
            log.result(f"y{index}")
        else:
            log.call(f"c{index}")
            if kind == "closed":
                log.result(f"c{index}")
    return log


@given(shapes, st.data())
def test_a_selected_range_is_head_anchored_balanced_and_keeps_the_retention(
    kinds: list[str], data: st.DataObject
) -> None:
    log = build(kinds)
    nodes = log.nodes
    prices = data.draw(st.lists(st.integers(0, 20), min_size=len(nodes), max_size=len(nodes)))
    retain = data.draw(st.integers(0, 60))
    selected = select_compactable_range(priced_as(nodes, *prices), nodes, log.events, retain)
    if selected is None:
        return
    start, end = selected
    cut = nodes.index(end) + 1
    assert start == nodes[0]
    assert is_balanced_after(nodes, log.events, end) and is_balanced_before(nodes, log.events, start)
    assert cut < len(nodes) and sum(prices[cut:]) >= retain
    plan_compaction_region(nodes, log.events, start, end)


# --- region validation ----------------------------------------------------------------------------


def closed_step() -> tuple[Log, int, int, int, int]:
    log = Log()
    return log, log.user(), log.call("c1"), log.result("c1"), log.user()


@pytest.mark.parametrize(
    "bounds, message",
    [
        ((9, 3), "compactRegion: start seq 9 not found in surface"),
        ((0, 9), "compactRegion: end seq 9 not found in surface"),
        ((3, 0), "compactRegion: start seq 3 (position 3) is after end seq 0 (position 0) on the surface"),
        (
            (2, 3),
            "compactRegion: start seq 2 is not a balanced boundary (would split a step's tool-call/result pair)",
        ),
        (
            (0, 1),
            "compactRegion: end seq 1 is not a balanced boundary (would split a step, or the step is still open)",
        ),
    ],
)
def test_an_invalid_region_is_rejected(bounds: tuple[int, int], message: str) -> None:
    log, *_ = closed_step()
    caught = refusal(lambda: plan_compaction_region(log.nodes, log.events, *bounds))
    assert (caught.code, caught.message) == (Code.COMPACTION_RANGE_INVALID, message)


def test_a_balanced_region_names_its_positions_and_shadowed_nodes() -> None:
    log, user, _, result, _ = closed_step()
    assert plan_compaction_region(log.nodes, log.events, user, result) == CompactionRegion(
        0, 2, 0, 2, (0, 1, 2)
    )


# --- the durable lock -----------------------------------------------------------------------------


def bracket_log(*kinds: str) -> list[dict[str, Any]]:
    log = Log()
    for kind in kinds:
        data = {"turn": 1} if kind == "turn/start" else {"compactionId": "k", "turn": None}
        log.add(kind, data)
    return log.events


def test_a_log_without_compaction_is_not_busy() -> None:
    assert is_compaction_busy([]) is False


def test_an_unmatched_start_is_the_live_lock() -> None:
    events = bracket_log("compaction/start")
    assert is_compaction_busy(events) and find_active_compaction(events) is events[0]


def test_a_matched_start_releases_the_lock() -> None:
    assert (
        is_compaction_busy(bracket_log("compaction/start", "compaction/summary", "compaction/end")) is False
    )


def test_the_newest_bracket_event_decides_the_lock() -> None:
    assert is_compaction_busy(bracket_log("compaction/start", "compaction/end", "compaction/start")) is True


def test_a_summary_does_not_release_the_lock() -> None:
    assert is_compaction_busy(bracket_log("compaction/start", "compaction/summary")) is True


def test_an_unmatched_start_before_a_newer_end_seed_is_a_stale_orphan() -> None:
    assert is_compaction_busy(bracket_log("compaction/start", "session/end-seed")) is False


def test_an_unmatched_start_after_an_end_seed_is_live() -> None:
    assert is_compaction_busy(bracket_log("session/end-seed", "compaction/start")) is True


def test_a_busy_session_rejects_a_new_compaction_naming_the_stage() -> None:
    caught = refusal(
        lambda: validate_compaction_inactive(bracket_log("compaction/start"), "automatic pressure compaction")
    )
    assert caught.code == Code.COMPACTION_BUSY
    assert caught.message == (
        "automatic pressure compaction: compaction already in progress; the session compaction lock is already active"
    )


def test_a_manual_compaction_between_turns_owns_no_turn() -> None:
    assert plan_compaction_owner(bracket_log("turn/start", "turn/end"), manual=True) is None


def test_a_manual_compaction_during_an_open_turn_is_busy() -> None:
    with pytest.raises(SpecError, match="already has an open turn") as caught:
        plan_compaction_owner(bracket_log("turn/start"), manual=True)
    assert caught.value.code == Code.COMPACTION_BUSY


def test_an_automatic_compaction_is_owned_by_the_open_turn() -> None:
    assert plan_compaction_owner(bracket_log("turn/start", "turn/end", "turn/start"), manual=False) == 1


def test_an_automatic_compaction_outside_a_turn_is_rejected() -> None:
    with pytest.raises(SpecError, match="no open turn") as caught:
        plan_compaction_owner([], manual=False)
    assert caught.value.code == Code.COMPACTION_NO_OPEN_TURN


def test_a_standalone_start_carries_exactly_its_id_and_a_null_turn() -> None:
    assert derive_compaction_lifecycle("k", None) == {"compactionId": "k", "turn": None}


def test_a_failed_end_carries_the_lifecycle_and_the_error() -> None:
    lifecycle = derive_compaction_lifecycle("k", 2, "cmd")
    assert derive_compaction_end(lifecycle, "boom") == {
        "compactionId": "k",
        "sourceCommandId": "cmd",
        "turn": 2,
        "error": "boom",
    }


# --- the checkpoint -------------------------------------------------------------------------------


def test_a_checkpoint_source_omits_a_missing_command() -> None:
    assert derive_checkpoint_source("k") == {"kind": "plugin", "plugin": "compact", "compactionId": "k"}
    assert derive_checkpoint_source("k", "c")["sourceCommandId"] == "c"


@pytest.mark.parametrize(
    "source, expected",
    [
        ({"kind": "plugin", "plugin": "compact", "compactionId": "other-backend"}, True),
        ({"kind": "plugin", "plugin": "other"}, False),
        ({"kind": "user"}, False),
        (None, False),
    ],
)
def test_a_checkpoint_source_is_recognised_by_kind_and_plugin_only(source: Any, expected: bool) -> None:
    assert is_compact_checkpoint({"source": source}) is expected


def test_a_summary_is_framed_by_the_preamble_and_tags() -> None:
    assert frame_summary([text("S")]) == [
        text(CHECKPOINT_PREAMBLE + "\n\n<compacted-summary>"),
        text("S"),
        text("</compacted-summary>"),
    ]


def test_only_text_blocks_of_the_summarizer_output_are_kept() -> None:
    output = [
        {"type": "reasoning", "text": "r"},
        text("S"),
        {"type": "tool-call", "id": "c", "name": "n", "arguments": ""},
    ]
    assert derive_summary_blocks(output) == [text("S")]


@pytest.mark.parametrize(
    "output",
    [
        [text("S"), {"type": "image", "attachment": "a"}],
        [
            text("S"),
            {"type": "tool-result", "toolCallId": "c", "content": [{"type": "image", "attachment": "a"}]},
        ],
    ],
)
def test_an_image_in_the_summarizer_output_is_refused(output: list[Any]) -> None:
    with pytest.raises(SpecError, match="cannot contain image output") as caught:
        derive_summary_blocks(output)
    assert caught.value.code == Code.COMPACTION_SUMMARY_UNSUPPORTED_CONTENT


@pytest.mark.parametrize("output", [[], [{"type": "reasoning", "text": "r"}], [text(" \n\u3000\ufeff")]])
def test_output_without_non_whitespace_text_is_refused(output: list[Any]) -> None:
    with pytest.raises(SpecError, match="no text summary content") as caught:
        derive_summary_blocks(output)
    assert caught.value.code == Code.COMPACTION_SUMMARY_EMPTY


def test_a_summary_must_cost_less_than_what_it_shadows() -> None:
    checkpoint = derive_checkpoint_message("m", [text("S")], "k")
    price = estimate_content(checkpoint["content"]) + 4
    validate_summary_smaller(checkpoint, price + 1)  # one token more than the checkpoint: accepted
    caught = refusal(lambda: validate_summary_smaller(checkpoint, price))
    assert caught.code == Code.COMPACTION_SUMMARY_NOT_SMALLER
    assert (
        caught.message
        == f"summary is not smaller than the shadowed content ({price} estimated framed tokens >= {price})"
    )


def test_the_shadow_price_sums_the_region_and_requires_its_nodes() -> None:
    log, user, _, result, _ = closed_step()
    region = plan_compaction_region(log.nodes, log.events, user, result)
    assert derive_shadowed_token_count(priced_as(log.nodes, 1, 2, 3, 4), region) == 6
    with pytest.raises(SpecError, match="selected surface changed before summarization began") as caught:
        derive_shadowed_token_count(priced_as((0, 2, 1, 3), 1, 2, 3, 4), region)
    assert caught.value.code == Code.COMPACTION_SURFACE_CHANGED


def test_the_summarizer_reads_the_messages_of_the_shadowed_nodes() -> None:
    log = Log()
    user = log.user("question")
    host = log.add(
        "assistant/message",
        {"message": {"id": "h", "role": "assistant", "content": [], "source": {}}},
        "append",
    )
    assert derive_summarization_messages(log.events, (user, host)) == (log.events[user]["data"],)


def compacted() -> tuple[Log, CompactionRegion, Any]:
    log, user, _, result, _ = closed_step()
    region = plan_compaction_region(log.nodes, log.events, user, result)
    shadow_price = derive_shadowed_token_count(log.priced, region)
    lifecycle = derive_compaction_lifecycle("k", None)
    start = log.add("compaction/start", lifecycle)
    output = SummarizerOutput(summary=FrozenList([text("S")]), provider="p", model="m")
    plan = plan_summary_replacement(region, start, start + 1, lifecycle, output, shadow_price, "msg")
    log.add("compaction/summary", plan.summary_data)
    log.add("user/message", plan.checkpoint_data, plan.surface_op, plan.source_event_seqs)
    log.add("compaction/end", derive_compaction_end(lifecycle))
    return log, region, plan


def test_checkpoint_provenance_cites_the_start_the_summary_and_every_shadowed_node() -> None:
    _, region, plan = compacted()
    assert plan.source_event_seqs == [4, 5, *region.shadowed]


def test_a_landed_checkpoint_replaces_the_region_and_is_balanced_on_both_sides() -> None:
    log, _, _ = compacted()
    checkpoint = 6
    assert log.nodes == (checkpoint, 3)
    assert is_balanced_before(log.nodes, log.events, checkpoint) and is_balanced_after(
        log.nodes, log.events, checkpoint
    )
    assert derive_messages(log.events, log.nodes)[0]["source"] == {
        "kind": "plugin",
        "plugin": "compact",
        "compactionId": "k",
    }


def test_the_summary_event_records_range_seqs_price_and_route() -> None:
    log, region, plan = compacted()
    assert plan.summary_data == {
        "compactionId": "k",
        "summary": [text("S")],
        "shadowedRange": {"start": 0, "end": 2},
        "shadowedSeqs": [0, 1, 2],
        "shadowedTokenCount": derive_shadowed_token_count(price_surface((0, 1, 2, 3), log.events), region),
        "provider": "p",
        "model": "m",
    }


@pytest.mark.parametrize(
    "stream, raw, expected",
    [
        (True, [text("raw")], {"rawOutput": [text("raw")], "llmStreamCall": True}),
        (False, [text("raw")], {"rawOutput": [text("raw")]}),
        (False, None, {}),
    ],
)
def test_call_provenance_marks_only_a_streamed_call(stream: bool, raw: Any, expected: dict[str, Any]) -> None:
    output = SummarizerOutput(
        FrozenList([text("S")]), "p", "m", raw_output=FrozenList(raw) if raw else None, llm_stream_call=stream
    )
    plan = plan_summary_replacement(
        CompactionRegion(0, 0, 0, 0, (0,)), 1, 2, {"compactionId": "k", "turn": None}, output, 9, "m"
    )
    assert {
        key: plan.summary_data[key] for key in ("rawOutput", "llmStreamCall") if key in plan.summary_data
    } == expected


# --- re-validation after the summarizer ------------------------------------------------------------


def prepared() -> tuple[Log, CompactionRegion, tuple[tuple[int, int], ...]]:
    log, user, _, result, _ = closed_step()
    return log, plan_compaction_region(log.nodes, log.events, user, result), log.priced


@pytest.mark.parametrize("automatic", [True, False])
def test_a_log_only_append_keeps_the_surface_stable(automatic: bool) -> None:
    log, region, before = prepared()
    log.add("request/header", {})
    validate_surface_stable(before, log.priced, region, automatic, log.events)  # raises if unstable


def test_an_append_anywhere_breaks_an_automatic_compaction() -> None:
    log, region, before = prepared()
    log.user("injected")
    with pytest.raises(SpecError, match="session surface changed during summarization") as caught:
        validate_surface_stable(before, log.priced, region, True, log.events)
    assert caught.value.code == Code.COMPACTION_SURFACE_CHANGED


def test_an_append_outside_the_span_keeps_a_manual_compaction_stable() -> None:
    log, region, before = prepared()
    log.user("injected")
    validate_surface_stable(before, log.priced, region, False, log.events)  # raises if unstable


def test_a_replaced_span_edge_is_no_longer_a_valid_manual_target() -> None:
    log, region, before = prepared()
    log.add(
        "user/message",
        {"id": "x", "role": "user", "content": [], "source": {"kind": "user"}},
        {"op": "replace", "start": 0, "end": 0},
        [0],
    )
    with pytest.raises(SpecError, match="no longer a valid replacement target"):
        validate_surface_stable(before, log.priced, region, False, log.events)


def test_a_replaced_middle_node_changes_the_manual_span() -> None:
    log, _, before = prepared()
    region = plan_compaction_region(log.nodes, log.events, 0, 3)
    data = log.events[2]["data"]
    message = {**data["message"], "content": [{**data["message"]["content"][0], "content": [text("pruned")]}]}
    log.add("tool/result", {**data, "message": message}, {"op": "replace", "start": 2, "end": 2}, [2])
    with pytest.raises(SpecError, match="span changed during summarization"):
        validate_surface_stable(before, log.priced, region, False, log.events)


def test_a_repriced_span_was_rewritten_during_summarization() -> None:
    log, region, before = prepared()
    after = tuple((seq, tokens + 1) for seq, tokens in before)
    with pytest.raises(SpecError, match="span was rewritten during summarization"):
        validate_surface_stable(before, after, region, False, log.events)


# --- spill ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, limit, expected", [(100, None, False), (100, 100, False), (101, 100, True), (1, 0, True)]
)
def test_a_result_spills_only_strictly_above_a_configured_limit(
    tokens: int, limit: int | None, expected: bool
) -> None:
    assert should_spill(tokens, limit) is expected


@pytest.mark.parametrize("value", [-1, 1.5, True, "10"])
def test_an_invalid_inline_limit_is_rejected(value: Any) -> None:
    with pytest.raises(SpecError, match="maxInlineTokens must be a non-negative integer") as caught:
        validate_max_inline_tokens(value)
    assert caught.value.code == Code.SPILL_CONFIG_INVALID


def test_an_absent_or_zero_inline_limit_is_valid() -> None:
    validate_max_inline_tokens(None)
    validate_max_inline_tokens(0)


def test_only_an_all_text_result_can_spill() -> None:
    assert derive_spill_text([text("a"), text("b")]) == "ab"
    assert derive_spill_text([text("a"), {"type": "image", "attachment": "x"}]) is None


def test_a_spill_preview_keeps_a_head_and_a_tail_and_says_where_the_rest_is() -> None:
    original = "H" * 500 + "M" * 2000 + "T" * 500
    preview = derive_spill_preview(original, 200, "/spill/x.txt")
    assert preview is not None and estimate_content([text(preview)]) <= 200
    body, notice = preview.split("\n\n", 1)
    assert body.startswith("H") and body.endswith("T") and set(body) == {"H", "T"}
    assert (
        notice == f"(Omitted {3000 - len(body)} characters. Full formatted result stored at: /spill/x.txt. "
        "Use read with offset/limit, or grep this path to search within it.)"
    )


def test_a_limit_too_small_for_the_notice_keeps_the_result_inline() -> None:
    assert derive_spill_preview("x" * 1000, 10, "/spill/x.txt") is None


def test_a_spill_preview_never_splits_a_surrogate_pair() -> None:
    preview = derive_spill_preview("\U0001f600" * 1000, 60, "/p")
    assert preview is not None and not any("\ud800" <= char <= "\udfff" for char in preview)


@given(st.text(max_size=400), st.integers(0, 120))
def test_a_spill_preview_fits_the_limit_and_is_a_prefix_and_suffix_of_the_original(
    original: str, limit: int
) -> None:
    preview = derive_spill_preview(original, limit, "/p")
    if preview is None:
        return
    assert estimate_content([text(preview)]) <= limit
    body = preview.rsplit("\n\n(", 1)[0] if "\n\n(" in preview else ""
    kept = utf16_length(body)
    assert any(
        original.startswith(body[:cut]) and original.endswith(body[cut:]) for cut in range(len(body) + 1)
    )
    assert kept <= utf16_length(original)
