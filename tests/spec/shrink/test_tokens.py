"""Token estimation and the shadow-price fold (notes/dsh-compaction-projection §3, §7)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code, SpecError
from spec.shrink.tokens import (
    ShadowClaim,
    estimate_content,
    estimate_message,
    estimate_system_tokens,
    estimate_tools_tokens,
    fold_shadow_price,
    price_surface,
    utf16_length,
)


def text(value: str, kind: str = "text") -> dict[str, Any]:
    return {"type": kind, "text": value}


def test_a_text_block_costs_its_length_over_four_rounded_up_plus_four() -> None:
    assert estimate_content([text("abcde")]) == 2 + 4


def test_a_reasoning_block_is_priced_like_text() -> None:
    assert estimate_content([text("abcd", "reasoning")]) == 1 + 4


def test_lengths_are_utf16_code_units_so_an_astral_character_counts_two() -> None:
    assert estimate_content([text("\U0001f600" * 3)]) == 2 + 4


def test_utf16_length_counts_a_lone_surrogate_once() -> None:
    assert utf16_length("a\ud800\U0001f600") == 4


def test_a_tool_call_rounds_its_name_and_arguments_separately() -> None:
    assert (
        estimate_content([{"type": "tool-call", "id": "c", "name": "ab", "arguments": "abcde"}]) == 1 + 2 + 4
    )


def test_a_tool_result_costs_its_inner_content_plus_four() -> None:
    block: Any = {"type": "tool-result", "toolCallId": "c", "content": [text("abcd")], "isError": False}
    assert estimate_content([block]) == (1 + 4) + 4


def test_an_unknown_block_costs_four_plus_its_compact_json_text() -> None:
    block: Any = {"type": "image", "attachment": {"id": "x"}}
    assert estimate_content([block]) == 4 + -(-len('{"type":"image","attachment":{"id":"x"}}') // 4)


def test_a_lone_surrogate_in_an_unknown_block_is_priced_as_its_json_escape() -> None:
    block: Any = {"type": "image", "attachment": "\ud800"}
    assert estimate_content([block]) == 4 + -(-len('{"type":"image","attachment":"\\ud800"}') // 4)


def test_a_text_block_without_a_string_text_is_priced_as_an_unknown_block() -> None:
    assert estimate_content([{"type": "text", "text": 12345}]) == 4 + -(
        -len('{"type":"text","text":12345}') // 4
    )


def test_a_message_costs_its_content_plus_four() -> None:
    assert estimate_message({"role": "user", "content": [text("abcd"), text("e")]}) == (1 + 4) + (1 + 4) + 4


def test_a_message_with_empty_content_costs_the_role_overhead() -> None:
    assert estimate_message({"role": "user", "content": []}) == 4


@pytest.mark.parametrize("system, expected", [(None, 0), ("", 0), ("abcde", 2 + 4)])
def test_the_system_prompt_costs_its_text_plus_four_when_present(system: str | None, expected: int) -> None:
    assert estimate_system_tokens(system) == expected


def test_no_tools_cost_nothing() -> None:
    assert estimate_tools_tokens([]) == 0 and estimate_tools_tokens(None) == 0


def test_tools_cost_the_json_text_of_the_list_plus_four() -> None:
    assert estimate_tools_tokens([{"name": "read"}]) == -(-len('[{"name":"read"}]') // 4) + 4


def test_deeply_nested_tool_results_are_priced_without_recursion() -> None:
    content: list[Any] = [text("abcd")]
    for _ in range(20_000):
        content = [{"type": "tool-result", "toolCallId": "c", "content": content}]
    assert estimate_content(content) == 20_000 * 4 + (1 + 4)


@given(st.lists(st.text(max_size=20), max_size=6))
def test_the_price_of_blocks_is_the_sum_of_their_prices(texts: list[str]) -> None:
    blocks = [text(value) for value in texts]
    assert estimate_content(blocks) == sum(estimate_content([block]) for block in blocks)


# --- pricing the surface --------------------------------------------------------------------------


def event(seq: int, kind: str, data: Any, op: Any = "append") -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": 0, "data": data, "surfaceOp": op}


USER = {"id": "u", "role": "user", "content": [text("abcdefgh")], "source": {"kind": "user"}}
HOST = {"message": {"id": "a", "role": "assistant", "content": [], "source": {"kind": "model"}}}


def test_each_surface_node_is_priced_by_the_message_it_shows() -> None:
    events = [event(0, "user/message", USER)]
    assert price_surface((0,), events) == ((0, (2 + 4) + 4),)


def test_a_node_that_shows_no_message_costs_nothing() -> None:
    events = [event(0, "assistant/message", HOST)]
    assert price_surface((0,), events) == ((0, 0),)


def test_pricing_a_node_without_its_event_is_rejected() -> None:
    assert (
        refusal(lambda: price_surface((1,), [event(0, "user/message", USER)])).code
        == Code.TOKEN_SURFACE_CORRUPT
    )


# --- the shadow-price fold ------------------------------------------------------------------------


def metering(seq: int, kind: str, start: int, end: int, tokens: int) -> dict[str, Any]:
    return {
        "type": kind,
        "seq": seq,
        "time": 0,
        "data": {
            "shadowedRange": {"start": start, "end": end},
            "shadowedSeqs": [start],
            "shadowedTokenCount": tokens,
        },
    }


@pytest.mark.parametrize("kind", ["compaction/summary", "compaction/prune"])
def test_a_metering_event_arms_a_claim_at_no_cost(kind: str) -> None:
    assert fold_shadow_price(None, metering(3, kind, 1, 2, 40)) == (ShadowClaim(1, 2, 40), 0)


def test_any_other_log_only_event_expires_the_claim() -> None:
    assert fold_shadow_price(
        ShadowClaim(1, 2, 40), {"type": "turn/end", "seq": 4, "time": 0, "data": {}}
    ) == (None, 0)


def test_an_append_adds_its_price_and_clears_the_claim() -> None:
    assert fold_shadow_price(ShadowClaim(1, 2, 40), event(4, "user/message", USER)) == (None, 10)


def test_a_replace_under_a_matching_claim_adds_its_price_minus_the_shadowed_price() -> None:
    replace = event(4, "user/message", USER, {"op": "replace", "start": 1, "end": 2})
    assert fold_shadow_price(ShadowClaim(1, 2, 40), replace) == (None, 10 - 40)


def test_a_replace_without_a_claim_is_legacy_drift_at_no_cost() -> None:
    replace = event(4, "user/message", USER, {"op": "replace", "start": 1, "end": 2})
    assert fold_shadow_price(None, replace) == (None, 0)


def test_a_replace_over_another_range_than_the_claim_is_rejected() -> None:
    replace = event(4, "user/message", USER, {"op": "replace", "start": 1, "end": 3})
    with pytest.raises(
        SpecError, match=r"over range 1-3 has no adjacent shadow price \(armed claim covers 1-2\)"
    ) as caught:
        fold_shadow_price(ShadowClaim(1, 2, 40), replace)
    assert caught.value.code == Code.TOKEN_SHADOW_PRICE_MISMATCH
