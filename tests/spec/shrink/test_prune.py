"""Tool-result pruning: config, the content transform, the session pass
(notes/dsh-compaction-projection §6, §12.2 tool-result-pruner.spec.ts)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from event_builders import EventLog
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code, SpecError
from spec.log.surface import fold_surface
from spec.shrink.prune import (
    PRUNE_MARKER,
    PRUNE_MARKER_CODE_POINTS,
    PruneConfig,
    PrunePlan,
    decode_prune_config,
    derive_code_points,
    derive_text_code_points,
    plan_prune_events,
    plan_pruned_content,
    validate_prune_config,
)
from spec.shrink.tokens import estimate_message, fold_shadow_price, price_surface

SMALL = PruneConfig(threshold_chars=50, head_chars=4, tail_chars=3)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def joined_text(blocks: Any) -> str:
    return "".join(block["text"] for block in blocks if block.get("type") == "text")


# --- config ---------------------------------------------------------------------------------------


def test_the_marker_is_39_code_points() -> None:
    assert len(derive_code_points(PRUNE_MARKER)) == PRUNE_MARKER_CODE_POINTS == 39


def test_the_defaults_are_8192_4096_1024_code_points() -> None:
    assert decode_prune_config(None) == PruneConfig() == PruneConfig(8192, 4096, 1024)


def test_the_config_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PruneConfig().head_chars = 1  # type: ignore[misc]


def test_a_partial_override_keeps_the_other_defaults() -> None:
    assert decode_prune_config({"headChars": 100}) == PruneConfig(8192, 100, 1024)


def test_a_key_whose_value_is_null_takes_its_default() -> None:
    # DSH resolves each key with `??` (and its Config schema defaults null too): docs/choices.md
    assert decode_prune_config({"thresholdChars": None, "tailChars": 100}) == PruneConfig(8192, 4096, 100)
    assert (
        decode_prune_config({"thresholdChars": None, "headChars": None, "tailChars": None}) == PruneConfig()
    )


def test_an_unknown_config_key_is_rejected_with_the_allowed_keys() -> None:
    caught = refusal(lambda: decode_prune_config({"maxChars": 1}))
    assert caught.code == Code.PRUNE_CONFIG_INVALID
    assert (
        caught.message
        == 'ToolResultPruneConfig: unknown key "maxChars" (allowed: thresholdChars, headChars, tailChars)'
    )


@pytest.mark.parametrize(
    "raw",
    [
        {"thresholdChars": 0},
        {"thresholdChars": 1.5},
        {"headChars": -1},
        {"tailChars": True},
        {"headChars": "4"},
    ],
)
def test_invalid_config_scalars_are_rejected(raw: Any) -> None:
    assert refusal(lambda: decode_prune_config(raw)).code == Code.PRUNE_CONFIG_INVALID


def test_an_output_budget_above_the_threshold_is_rejected() -> None:
    caught = refusal(
        lambda: validate_prune_config(PruneConfig(threshold_chars=8192, head_chars=5000, tail_chars=4000))
    )
    assert caught.code == Code.PRUNE_CONFIG_INVALID
    assert (
        caught.message
        == "ToolResultPruneConfig: headChars + marker + tailChars (9039) must be at most thresholdChars (8192)"
    )


def test_an_output_budget_equal_to_the_threshold_is_accepted() -> None:
    validate_prune_config(PruneConfig(threshold_chars=39, head_chars=0, tail_chars=0))


# --- the content transform ------------------------------------------------------------------------


def test_only_text_code_points_are_measured() -> None:
    blocks = [
        text("a\U0001f600b"),
        {"type": "reasoning", "text": "xxxxxxxx"},
        {"type": "image", "attachment": "y"},
    ]
    assert derive_text_code_points(blocks) == 3


def test_content_at_the_threshold_is_not_pruned() -> None:
    assert plan_pruned_content([text("x" * 50)], SMALL) is None


def test_content_one_code_point_over_the_threshold_is_pruned() -> None:
    assert plan_pruned_content([text("x" * 51)], SMALL) == [text("xxxx" + PRUNE_MARKER + "xxx")]


def test_head_and_tail_never_split_a_surrogate_pair() -> None:
    pruned = plan_pruned_content([text("\U0001f600" * 60)], SMALL)
    assert pruned == [text("\U0001f600" * 4 + PRUNE_MARKER + "\U0001f600" * 3)]


def test_a_surrogate_pair_held_as_two_python_characters_counts_as_one_code_point() -> None:
    pruned = plan_pruned_content([text("\ud83d\ude00" * 60)], SMALL)
    assert pruned == [text("\U0001f600" * 4 + PRUNE_MARKER + "\U0001f600" * 3)]


def test_non_text_blocks_keep_their_place_and_an_emptied_text_block_is_dropped() -> None:
    reasoning = {"type": "reasoning", "text": "r"}
    call = {"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"}
    blocks = [text("A" * 10), reasoning, call, text("B" * 40), text("C" * 10)]
    assert plan_pruned_content(blocks, SMALL) == [text("AAAA" + PRUNE_MARKER), reasoning, call, text("CCC")]


def test_the_marker_goes_into_the_first_text_block_that_touches_the_removed_span() -> None:
    blocks = [text("a" * 3), text("b" * 30), text("c" * 30)]
    assert plan_pruned_content(blocks, SMALL) == [text("aaa"), text("b" + PRUNE_MARKER), text("ccc")]


def test_a_head_ending_at_a_block_boundary_puts_the_marker_at_the_start_of_the_next_block() -> None:
    blocks = [text("a" * 4), text("b" * 60)]
    assert plan_pruned_content(blocks, SMALL) == [text("aaaa"), text(PRUNE_MARKER + "bbb")]


def test_zero_head_and_tail_leave_only_the_marker() -> None:
    assert plan_pruned_content([text("x" * 40)], PruneConfig(39, 0, 0)) == [text(PRUNE_MARKER)]


def test_other_fields_of_a_text_block_are_kept() -> None:
    pruned = plan_pruned_content([{"type": "text", "text": "x" * 60, "cache": True}], SMALL)
    assert pruned == [{"type": "text", "text": "xxxx" + PRUNE_MARKER + "xxx", "cache": True}]


def test_the_pruned_content_is_frozen() -> None:
    pruned = plan_pruned_content([text("x" * 60)], SMALL)
    assert pruned is not None
    with pytest.raises(TypeError):
        pruned[0]["text"] = "y"  # type: ignore[index,call-overload]


def test_a_removed_span_no_text_block_touches_is_reported() -> None:
    unvalidated = PruneConfig(threshold_chars=10, head_chars=100, tail_chars=0)
    with pytest.raises(SpecError, match="failed to locate the removed text span") as caught:
        plan_pruned_content([text("x" * 20)], unvalidated)
    assert caught.value.code == Code.PRUNE_SPAN_NOT_FOUND


def test_a_result_that_would_not_be_smaller_and_within_threshold_is_reported() -> None:
    unvalidated = PruneConfig(threshold_chars=10, head_chars=8, tail_chars=8)
    with pytest.raises(SpecError, match="replacement must be smaller and within threshold") as caught:
        plan_pruned_content([text("x" * 20)], unvalidated)
    assert caught.value.code == Code.PRUNE_NOT_SMALLER


@st.composite
def configs(draw: st.DrawFn) -> PruneConfig:
    head = draw(st.integers(0, 20))
    tail = draw(st.integers(0, 20))
    return PruneConfig(
        threshold_chars=head + 39 + tail + draw(st.integers(0, 20)), head_chars=head, tail_chars=tail
    )


blocks_strategy = st.lists(
    st.one_of(
        st.builds(text, st.text(st.characters(exclude_categories=["Cs"]), max_size=60)),
        st.just({"type": "image", "attachment": "i"}),
        st.just({"type": "reasoning", "text": "thinking"}),
    ),
    max_size=6,
)


@given(blocks_strategy, configs())
def test_pruning_is_idempotent(blocks: list[Any], config: PruneConfig) -> None:
    once = plan_pruned_content(blocks, config)
    assert plan_pruned_content(once if once is not None else blocks, config) is None


@given(blocks_strategy, configs())
def test_a_pruned_text_is_the_head_the_marker_and_the_tail(blocks: list[Any], config: PruneConfig) -> None:
    pruned = plan_pruned_content(blocks, config)
    points = derive_code_points(joined_text(blocks))
    if pruned is None:
        assert len(points) <= config.threshold_chars
    else:
        tail = points[len(points) - config.tail_chars :]
        assert joined_text(pruned) == "".join(points[: config.head_chars]) + PRUNE_MARKER + "".join(tail)
        kept: list[Any] = list(pruned)
        assert [b for b in kept if b["type"] != "text"] == [b for b in blocks if b["type"] != "text"]


# --- the session pass -----------------------------------------------------------------------------


class Log(EventLog):
    def add(self, kind: str, data: Any, op: Any = "append", sources: Any = None) -> int:
        return super().add(kind, data, op, sources)

    def user(self, value: str = "hi") -> int:
        return self.add(
            "user/message",
            {
                "id": f"u{len(self.events)}",
                "role": "user",
                "content": [text(value)],
                "source": {"kind": "user"},
            },
        )

    def call(self, call_id: str) -> int:
        block = {"type": "tool-call", "id": call_id, "name": "read", "arguments": "{}"}
        return self.add(
            "assistant/message",
            {
                "message": {
                    "id": f"a{call_id}",
                    "role": "assistant",
                    "content": [block],
                    "source": {"kind": "model", "provider": "p", "model": "m"},
                }
            },
        )

    def result(self, call_id: str, output: str, **extra: Any) -> int:
        message = {
            "id": f"r{call_id}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {"type": "tool-result", "toolCallId": call_id, "content": [text(output)], "isError": False}
            ],
        }
        return self.add("tool/result", {"turn": 1, "step": 1, "message": message, **extra})

    def apply(self, plans: tuple[PrunePlan, ...]) -> None:
        for plan in plans:
            self.add("compaction/prune", plan.prune_data, op=None)
            self.add("tool/result", plan.replacement_data, op=plan.surface_op, sources=plan.source_event_seqs)

    @property
    def nodes(self) -> tuple[int, ...]:
        return fold_surface(self.events).nodes


def two_results() -> tuple[Log, int, int]:
    log = Log()
    log.user()
    log.call("c1")
    big = log.result("c1", "x" * 60, isError=False, meta={"k": 1}, future="kept")
    log.call("c2")
    small = log.result("c2", "short")
    return log, big, small


def test_only_results_over_the_threshold_are_planned() -> None:
    log, big, _ = two_results()
    plans = plan_prune_events(log.nodes, log.events, SMALL)
    assert [(p.original_seq, p.call_id, p.chars_before, p.chars_after) for p in plans] == [
        (big, "c1", 60, 4 + 39 + 3)
    ]


def test_the_metering_event_prices_the_original_message() -> None:
    log, big, _ = two_results()
    (plan,) = plan_prune_events(log.nodes, log.events, SMALL)
    expected = {
        "shadowedRange": {"start": big, "end": big},
        "shadowedSeqs": [big],
        "shadowedTokenCount": estimate_message(log.events[big]["data"]["message"]),
    }
    assert plan.prune_data == expected


def test_the_replacement_names_the_original_as_its_range_and_source() -> None:
    log, big, _ = two_results()
    (plan,) = plan_prune_events(log.nodes, log.events, SMALL)
    assert (plan.surface_op, plan.source_event_seqs) == ({"op": "replace", "start": big, "end": big}, [big])


def test_the_replacement_changes_only_the_inner_content() -> None:
    log, big, _ = two_results()
    (plan,) = plan_prune_events(log.nodes, log.events, SMALL)
    original = log.events[big]["data"]
    inner = [text("xxxx" + PRUNE_MARKER + "xxx")]
    result = {**original["message"]["content"][0], "content": inner}
    assert plan.replacement_data == {**original, "message": {**original["message"], "content": [result]}}


def test_the_estimate_used_for_the_shadow_price_is_the_one_given() -> None:
    log, _, _ = two_results()
    (plan,) = plan_prune_events(log.nodes, log.events, SMALL, estimate=lambda message: 7)
    assert plan.prune_data.get("shadowedTokenCount") == 7


def test_applied_prunes_fold_as_valid_tool_result_rewrites() -> None:
    log, big, small = two_results()
    log.apply(plan_prune_events(log.nodes, log.events, SMALL))
    assert big not in log.nodes and small in log.nodes and fold_surface(log.events).replace_generation == 1


def test_a_second_pass_over_the_pruned_surface_plans_nothing() -> None:
    log, _, _ = two_results()
    log.apply(plan_prune_events(log.nodes, log.events, SMALL))
    assert plan_prune_events(log.nodes, log.events, SMALL) == ()


def test_results_shadowed_by_a_checkpoint_are_not_candidates() -> None:
    log, _big, _small = two_results()
    nodes = log.nodes
    log.add(
        "user/message",
        {"id": "k", "role": "user", "content": [text("summary")], "source": {"kind": "user"}},
        op={"op": "replace", "start": nodes[0], "end": nodes[-1]},
        sources=list(nodes),
    )
    assert plan_prune_events(log.nodes, log.events, SMALL) == ()


def test_a_pass_with_an_invalid_config_is_rejected() -> None:
    log, _, _ = two_results()
    assert (
        refusal(lambda: plan_prune_events(log.nodes, log.events, PruneConfig(10, 8, 8))).code
        == Code.PRUNE_CONFIG_INVALID
    )


def test_a_tool_result_without_a_content_array_is_skipped() -> None:
    log = Log()
    log.call("c1")
    log.add(
        "tool/result",
        {
            "message": {
                "id": "r",
                "role": "user",
                "source": {"kind": "tool", "callId": "c1"},
                "content": [{"type": "tool-result", "toolCallId": "c1", "content": "x" * 99}],
            }
        },
    )
    assert plan_prune_events(log.nodes, log.events, SMALL) == ()


@given(st.lists(st.integers(0, 120), min_size=1, max_size=6))
def test_a_metered_prune_pass_keeps_the_folded_token_count_equal_to_the_surface_price(
    sizes: list[int],
) -> None:
    log = Log()
    for index, size in enumerate(sizes):
        log.call(f"c{index}")
        log.result(f"c{index}", "y" * size)
    log.apply(plan_prune_events(log.nodes, log.events, SMALL))
    claim, total = None, 0
    for event in log.events:
        claim, delta = fold_shadow_price(claim, event)
        total += delta
    assert total == sum(tokens for _, tokens in price_surface(log.nodes, log.events))
