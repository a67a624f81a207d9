"""The cores that carry CrossHair contracts (scripts/crosshair_budget.py), tested directly, and the
JSON-facing functions that call them keeping their error order."""

from __future__ import annotations

from itertools import accumulate
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code, SpecError
from spec.lineage.fork import plan_fork_seed_length
from spec.log.events import TURN_END, TURN_START
from spec.log.provenance import decode_cited_seqs, validate_cited_seqs
from spec.log.unclosed import derive_open_turn_start
from spec.shrink.pairing import derive_cut_balance, derive_cut_balance_from_deltas
from spec.shrink.prune import PRUNE_MARKER_CODE_POINTS, PruneConfig, plan_text_cuts

# --- tool-pairing balance ---------------------------------------------------------------------------


@given(st.lists(st.integers(min_value=0, max_value=3), max_size=12))
def test_a_cut_is_balanced_exactly_when_the_deltas_before_it_sum_to_zero(opens: list[int]) -> None:
    deltas = [delta for open_count in opens for delta in (open_count, *([-1] * open_count))]
    cuts = derive_cut_balance_from_deltas(range(len(deltas)), deltas)
    assert cuts == tuple(total == 0 for total in accumulate(deltas, initial=0))


def test_a_running_count_below_zero_is_an_orphan_result_at_that_node() -> None:
    with pytest.raises(SpecError, match="tool/result at surface seq 12 has no matching tool-call") as caught:
        derive_cut_balance_from_deltas((10, 11, 12), (1, -1, -1))
    assert caught.value.code == Code.PAIRING_ORPHAN_RESULT


def _result(seq: int) -> dict[str, Any]:
    return {"type": "tool/result", "seq": seq, "time": seq, "data": {}, "surfaceOp": "append"}


def test_an_orphan_result_before_a_corrupt_node_is_the_error_reported() -> None:
    events = [_result(0), {**_result(1), "seq": 7}]
    assert refusal(lambda: derive_cut_balance((0, 1), events)).code == Code.PAIRING_ORPHAN_RESULT


def test_a_corrupt_node_before_an_orphan_result_is_the_error_reported() -> None:
    events = [{**_result(0), "seq": 7}, _result(1)]
    assert refusal(lambda: derive_cut_balance((0, 1), events)).code == Code.PAIRING_SURFACE_CORRUPT


# --- provenance ---------------------------------------------------------------------------------------


def test_an_integral_float_cited_seq_reads_as_that_integer() -> None:
    cited = decode_cited_seqs({"type": "user/message", "seq": 5, "sourceEventSeqs": [3.0, 1]})
    assert cited == (3, 1) and all(type(seq) is int for seq in cited)


def test_an_event_without_cited_seqs_decodes_to_none() -> None:
    assert decode_cited_seqs({"type": "user/message", "seq": 5}) is None


def test_a_cited_seq_equal_to_the_event_seq_is_not_earlier() -> None:
    with pytest.raises(SpecError, match="must reference earlier events: 4 >= current seq 4") as caught:
        validate_cited_seqs(4, (1, 4), ())
    assert caught.value.code == Code.PROVENANCE_NOT_EARLIER


def test_a_duplicate_is_reported_before_a_later_seq() -> None:
    assert refusal(lambda: validate_cited_seqs(4, (9, 1, 1), ())).code == Code.PROVENANCE_DUPLICATE


def test_shadowed_nodes_missing_from_the_cited_seqs_are_listed_in_surface_order() -> None:
    with pytest.raises(SpecError, match=r"missing 3, 1$") as caught:
        validate_cited_seqs(9, (2,), (3, 2, 1))
    assert caught.value.code == Code.PROVENANCE_MISSING_SHADOWED


def test_no_cited_seqs_cover_no_shadowed_node() -> None:
    assert refusal(lambda: validate_cited_seqs(9, None, (3,))).code == Code.PROVENANCE_MISSING_SHADOWED


# --- prune ----------------------------------------------------------------------------------------------


@st.composite
def _valid_configs(draw: st.DrawFn) -> PruneConfig:
    head = draw(st.integers(min_value=0, max_value=30))
    tail = draw(st.integers(min_value=0, max_value=30))
    slack = draw(st.integers(min_value=0, max_value=30))
    return PruneConfig(
        threshold_chars=head + PRUNE_MARKER_CODE_POINTS + tail + slack, head_chars=head, tail_chars=tail
    )


@given(st.lists(st.integers(min_value=0, max_value=80), max_size=6), _valid_configs())
def test_text_cuts_keep_exactly_head_plus_tail_code_points_with_one_marker(
    lengths: list[int], config: PruneConfig
) -> None:
    cuts = plan_text_cuts(lengths, config)
    if sum(lengths) <= config.threshold_chars:
        assert cuts is None
        return
    assert cuts is not None
    assert (
        sum(cut.head_end + cut.length - cut.tail_start for cut in cuts)
        == config.head_chars + config.tail_chars
    )
    assert [cut.marker for cut in cuts].count(True) == 1


def test_the_first_text_block_meeting_the_span_carries_the_marker() -> None:
    cuts = plan_text_cuts([3, 50, 3], PruneConfig(threshold_chars=45, head_chars=3, tail_chars=3))
    assert cuts is not None
    assert [cut.marker for cut in cuts] == [False, True, False]
    assert [(cut.head_end, cut.tail_start) for cut in cuts] == [(3, 3), (0, 50), (0, 0)]


def test_head_and_tail_covering_everything_find_no_span() -> None:
    assert (
        refusal(lambda: plan_text_cuts([6], PruneConfig(threshold_chars=1, head_chars=6, tail_chars=6))).code
        == Code.PRUNE_SPAN_NOT_FOUND
    )


# --- fork -----------------------------------------------------------------------------------------------


@given(st.lists(st.sampled_from([TURN_START, TURN_END, "user/message", "step/start"]), max_size=12))
def test_the_open_turn_is_the_last_turn_start_with_no_turn_end_after_it(kinds: list[str]) -> None:
    unclosed = [i for i, kind in enumerate(kinds) if kind == TURN_START and TURN_END not in kinds[i + 1 :]]
    assert derive_open_turn_start(kinds) == (unclosed[-1] if unclosed else None)


def test_a_boundary_past_the_last_event_does_not_exist() -> None:
    with pytest.raises(
        SpecError, match=r'fork boundary 3 does not exist in session "s" \(last seq: 2\)'
    ) as caught:
        plan_fork_seed_length("s", (0, 1, 2), 3)
    assert caught.value.code == Code.INVALID_BOUNDARY


def test_a_boundary_whose_event_has_another_seq_does_not_match() -> None:
    with pytest.raises(SpecError, match="does not match a contiguous event seq") as caught:
        plan_fork_seed_length("s", (0, 5, 2), 1)
    assert caught.value.code == Code.INVALID_BOUNDARY


def test_the_seed_takes_the_events_up_to_and_including_the_boundary() -> None:
    assert plan_fork_seed_length("s", (0, 1, 2, 3), 2) == 3
