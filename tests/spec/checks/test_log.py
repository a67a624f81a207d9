"""The whole-log checker (SPEC-DECISIONS D9; notes/dsh-session-core §11, invariant.spec.ts;
notes/dsh-compaction-projection §4.6, §7).

The invariant.spec.ts items about plugin wiring (scoped registration, veto and observer order,
reload, disposal) concern DSH's host plumbing, not the log, and have no counterpart here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from log_specs import (
    Spec,
    assistant,
    checkpoint,
    chunk,
    compaction_end,
    compaction_start,
    in_step,
    log,
    not_started_result,
    open_step,
    plain,
    prune,
    replace,
    request_context,
    rewrite,
    step_end,
    step_start,
    summary,
    tool_call,
    tool_result,
    tool_result_data,
    turn_end,
    turn_start,
    user,
)
from shared_material import shared_dir

from spec.checks.log import CORE_RULES, LEGACY_RULES, RELATIONAL_RULES, RULES, check_log
from spec.checks.violation import Violation
from spec.lineage.repair import derive_closers
from spec.log.surface import fold_surface


def rules_at(violations: tuple[Violation, ...]) -> list[tuple[str, int | None]]:
    return [(violation.rule, violation.seq) for violation in violations]


def assert_only(events: list[dict[str, Any]], rule: str, seq: int, words: str) -> None:
    """The checker reports one violation of ``events``: ``rule`` at ``seq``, its message saying ``words``."""
    violations = check_log(events)
    assert rules_at(violations) == [(rule, seq)] and words in violations[0].message, violations


# A well-formed turn: a user prompt, one step with a started and answered call, another without calls.
GOOD_TURN: tuple[Spec, ...] = (
    turn_start(1),
    user(),
    step_start(1, 1),
    request_context(),
    chunk(1, 1),
    assistant(1, 1, "c1"),
    tool_call(1, 1, "c1"),
    tool_result(1, 1, "c1"),
    step_end(1, 1),
    step_start(1, 2),
    assistant(1, 2),
    step_end(1, 2),
    turn_end(1),
)


# --- each rule, broken once by a minimal log ---------------------------------------------------------

BREAKS: dict[str, tuple[Callable[[], list[dict[str, Any]]], int | None, dict[str, Any] | None]] = {
    "seq-contiguous": (
        lambda: [{**e, "seq": 5} if e["seq"] == 1 else e for e in log(user("a"), user("b"))],
        5,
        None,
    ),
    "envelope": (lambda: [{**e, "extra": 1} for e in log(user())], 0, None),
    "message-shape": (
        lambda: log(
            (
                "user/message",
                {"role": "user", "source": {"kind": "user"}, "content": []},
                {"surfaceOp": "append"},
            )
        ),
        0,
        None,
    ),
    "surface-op": (lambda: log(("turn/start", {"turn": 1}, {"surfaceOp": "append"})), 0, None),
    "surface-replace": (lambda: log(user("a"), user("b", replace(7, 7), sourceEventSeqs=[0])), 1, None),
    "provenance": (lambda: log(user("a"), user("b", replace(0, 0))), 1, None),
    "tool-rewrite": (
        lambda: log(
            user("a"),
            (
                "tool/result",
                tool_result_data(1, 1, "c"),
                {"sourceEventSeqs": [0], "surfaceOp": replace(0, 0)},
            ),
        ),
        1,
        None,
    ),
    "turn-numbering": (lambda: log(turn_start(2)), 0, None),
    "turn-open": (lambda: log(turn_start(1), turn_start(2)), 1, None),
    "turn-end": (lambda: log(turn_start(1), turn_end(2)), 1, None),
    "step-open": (lambda: log(turn_start(1), step_start(1, 1), turn_end(1)), 2, None),
    "step-in-turn": (lambda: log(step_start(1, 1), step_end(1, 1)), 0, None),
    "step-numbering": (lambda: log(turn_start(1), step_start(1, 2), step_end(1, 2), turn_end(1)), 1, None),
    "step-scoped": (lambda: log(turn_start(1), chunk(1, 1), turn_end(1)), 1, None),
    "tool-result-pairing": (lambda: log(*in_step(tool_result(1, 1, "c"))), 2, None),
    "turn-enclosed": (lambda: log(request_context()), 0, None),
    "compaction-bracket": (lambda: log(compaction_end("k", None, error="x")), 0, None),
    "delegation-depth": (
        lambda: log(user("a")),
        None,
        {
            "version": 4,
            "id": "s",
            "createdAt": 0,
            "origin": "subagent",
            "delegationDepth": 0,
            "isSeeded": False,
        },
    ),
    "compaction-dangling": (
        lambda: log(user("a"), compaction_start("k", None), plain("session/end-seed")),
        1,
        None,
    ),
    "legacy-compaction-dangling": (
        lambda: log(user("a"), compaction_start("k", None), plain("session/end-seed")),
        1,
        None,
    ),
    "compaction-turn": (
        lambda: log(
            turn_start(1), compaction_start("k", None), compaction_end("k", None, error="x"), turn_end(1)
        ),
        1,
        None,
    ),
    "compaction-summary": (
        lambda: log(
            user("a"),
            compaction_start("k", None),
            summary("k", 0, 0, seqs=[]),
            checkpoint("k", 0, 0, [1, 2, 0]),
            compaction_end("k", None),
        ),
        2,
        None,
    ),
    "compaction-checkpoint": (lambda: log(user("a"), checkpoint("k", 0, 0, [0])), 1, None),
    "shadow-price": (lambda: log(user("a"), user("b", replace(0, 0), sourceEventSeqs=[0])), 1, None),
    "closers": (lambda: log(turn_start(1), step_start(1, 1), turn_end(1, kind="interrupted")), 2, None),
    "seed-length": (lambda: log(user()), None, {"seedLength": 2}),
    "end-seed": (lambda: log(user(), plain("session/end-seed")), None, {"seedLength": 0}),
}


def test_every_rule_has_an_explanation_and_a_level() -> None:
    assert all(text.strip() for text in RULES.values())
    assert set(RULES) == CORE_RULES | RELATIONAL_RULES and not CORE_RULES & RELATIONAL_RULES


def test_every_rule_has_a_minimal_breaking_log_here() -> None:
    assert set(BREAKS) == set(RULES)


@pytest.mark.parametrize("rule", sorted(BREAKS))
def test_a_minimal_log_breaking_a_rule_is_reported_with_that_rule_and_seq(rule: str) -> None:
    build, seq, header = BREAKS[rule]
    violations = check_log(build(), header, format_version=0 if rule in LEGACY_RULES else 4)
    assert (rule, seq) in rules_at(violations), violations


def test_a_log_breaking_three_rules_reports_all_three() -> None:
    events = log(turn_start(2), request_context(), user("x", replace(9, 9), sourceEventSeqs=[0]))
    events = [*events[:1], {**events[1], "seq": 4}, {**events[2], "seq": 5}]
    assert rules_at(check_log(events)) == [
        ("turn-numbering", 0),
        ("seq-contiguous", 4),
        ("surface-replace", 5),
        ("shadow-price", 5),
    ]


def test_well_formed_turns_report_nothing() -> None:
    assert check_log(log(*GOOD_TURN)) == ()


def test_an_empty_log_reports_nothing() -> None:
    assert check_log([]) == ()


def test_the_core_check_alone_ignores_relational_rules() -> None:
    assert check_log(log(turn_start(3), request_context(), turn_end(9)), relational=False) == ()


def test_the_checker_checks_no_message_its_read_path_checked_and_every_other_one() -> None:
    """``messages_checked``: the first that many events' messages were checked by the stored log's
    read path and are not checked again; the events after them are, and every other rule still
    judges every event."""
    build, _, _ = BREAKS["message-shape"]
    malformed = build()
    assert rules_at(check_log(malformed, relational=False)) == [("message-shape", 0)]
    assert check_log(malformed, relational=False, messages_checked=1) == ()
    two = [*log(user("a")), {**malformed[0], "seq": 1}]
    for checked in (0, 1):
        assert rules_at(check_log(two, relational=False, messages_checked=checked)) == [("message-shape", 1)]
    enveloped = [{**malformed[0], "extra": 1}]
    assert rules_at(check_log(enveloped, relational=False, messages_checked=1)) == [("envelope", 0)]


def test_a_violation_names_the_broken_rule_in_its_message() -> None:
    (violation,) = check_log(log(turn_start(1), turn_end(2)))
    assert violation == Violation("turn-end", 1, "turn/end 2 does not match open turn 1")


# --- core ---------------------------------------------------------------------------------------------


def test_a_seq_gap_is_reported_once_and_the_count_resumes_after_it() -> None:
    events = [
        {**event, "seq": event["seq"] + (10 if event["seq"] >= 2 else 0)}
        for event in log(user("a"), user("b"), user("c"), user("d"))
    ]
    assert rules_at(check_log(events)) == [("seq-contiguous", 12)]


def test_a_repeated_seq_is_not_contiguous() -> None:
    events = log(user("a"), user("b"))
    events[1]["seq"] = 0
    assert rules_at(check_log(events)) == [("seq-contiguous", 0)]


def test_every_violation_of_an_event_without_a_seq_is_at_its_position() -> None:
    """The replay places a seq-less event one past the event before it (seq 6 here), but all its
    violations point at its position, as every family's do (a fuzz finding: they were at two seqs)."""
    events = log(user("a"), user("b"), plain("request/header-delta"))
    events[1]["seq"] = 5
    del events[2]["seq"]
    assert rules_at(check_log(events, relational=False)) == [
        ("seq-contiguous", 2),
        ("envelope", 2),
        ("seq-contiguous", 5),
    ]


def test_a_replace_after_a_seq_gap_finds_its_nodes_by_seq() -> None:
    events = log(user("a"), user("b"), user("c", replace(0, 0), sourceEventSeqs=[0]))
    events[1]["seq"], events[2]["seq"], events[2]["surfaceOp"] = 5, 6, replace(5, 5)
    events[2]["sourceEventSeqs"] = [5]
    assert [v.rule for v in check_log(events, relational=False)] == ["seq-contiguous"]


def test_a_refused_surface_event_leaves_the_surface_unchanged() -> None:
    events = log(user("a"), user("b", replace(0, 0)), user("c", replace(1, 1), sourceEventSeqs=[1]))
    assert rules_at(check_log(events, relational=False)) == [("provenance", 1), ("surface-replace", 2)]


def test_a_retired_header_delta_breaks_the_envelope_rule() -> None:
    assert rules_at(check_log(log(plain("request/header-delta")), relational=False)) == [("envelope", 0)]


def test_an_ignorable_flag_other_than_true_breaks_the_envelope_rule() -> None:
    events = log(plain("plugin/thing"))
    events[0]["ignorable"] = False
    assert rules_at(check_log(events)) == [("envelope", 0)]


def test_a_tool_result_that_rewrites_more_than_its_content_is_reported() -> None:
    kind, data, extra = rewrite(1, 1, "c", 4)
    data["message"]["content"][0]["isError"] = True
    answered = open_step(assistant(1, 1, "c"), tool_call(1, 1, "c"), tool_result(1, 1, "c"))
    events = log(*answered, step_end(1, 1), prune(4, 4), (kind, data, extra), turn_end(1))
    assert rules_at(check_log(events)) == [("tool-rewrite", 7)]


# --- invariant.spec.ts --------------------------------------------------------------------------------


def test_accepts_a_well_formed_turn_step_and_tool_sequence() -> None:
    assert check_log(log(*GOOD_TURN, turn_start(2), user(), turn_end(2))) == ()


def test_rejects_non_monotonic_event_sequence_numbers() -> None:
    events = log(user("a"), user("b"), user("c"))
    events[2]["seq"] = 1
    assert ("seq-contiguous", 1) in rules_at(check_log(events))


def test_a_turn_start_while_a_turn_is_open_says_the_turn_is_still_open() -> None:
    (violation,) = check_log(log(turn_start(1), turn_start(2)))
    assert violation.rule == "turn-open" and "turn 1 is still open" in violation.message


def test_a_turn_end_for_another_turn_does_not_match_the_open_turn() -> None:
    (violation,) = check_log(log(turn_start(1), turn_end(2)))
    assert violation.rule == "turn-end" and "does not match open turn 1" in violation.message


def test_turn_numbers_rise_by_one() -> None:
    (violation,) = check_log(log(turn_start(1), turn_end(1), turn_start(3), turn_end(3)))
    assert (violation.rule, violation.seq) == (
        "turn-numbering",
        2,
    ) and "expected turn 2, got 3" in violation.message


def test_a_turn_started_over_an_open_one_counts_as_the_next_turn() -> None:
    events = log(turn_start(1), turn_start("x"), turn_end("x"), turn_start(3), turn_end(3))
    assert rules_at(check_log(events)) == [("turn-open", 1), ("turn-numbering", 1)]


def test_execution_records_are_allowed_inside_a_step() -> None:
    events = log(
        *in_step(
            plain("todo/write", {"todos": []}),
            plain(
                "request/header", {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}
            ),
            request_context(),
        ),
    )
    assert check_log(events) == ()


def test_an_idle_user_message_between_turns_is_allowed() -> None:
    assert check_log(log(turn_start(1), turn_end(1), user())) == ()


@pytest.mark.parametrize("kind", ["request/context", "request/header", "todo/write"])
def test_an_execution_record_outside_a_turn_is_not_turn_enclosed(kind: str) -> None:
    data = (
        {"header": {"config": {"provider": "p", "model": "m"}}, "reason": "initial"}
        if kind == "request/header"
        else {}
    )
    assert rules_at(check_log(log(turn_start(1), turn_end(1), plain(kind, data)))) == [("turn-enclosed", 2)]


def test_an_unknown_plugin_event_outside_a_turn_is_allowed() -> None:
    assert check_log(log(plain("plugin/custom", {"x": 1}))) == ()


def test_a_step_in_another_turn_names_the_open_turn() -> None:
    (violation,) = check_log(log(turn_start(1), step_start(2, 1), step_end(2, 1), turn_end(1)))[:1]
    assert violation.rule == "step-in-turn" and "open turn is 1" in violation.message


def test_a_step_start_while_a_step_is_open_says_the_step_is_still_open() -> None:
    violations = check_log(
        log(turn_start(1), step_start(1, 1), step_start(1, 2), step_end(1, 2), turn_end(1))
    )
    assert (
        rules_at(violations) == [("step-open", 2)] and "while step 1 is still open" in violations[0].message
    )


def test_a_turn_end_while_a_step_is_open_says_the_step_is_still_open() -> None:
    (violation,) = check_log(log(turn_start(1), step_start(1, 1), turn_end(1)))
    assert violation.rule == "step-open" and "while step 1 is still open" in violation.message


@pytest.mark.parametrize("wrong", [assistant(1, 2), step_end(1, 2)])
def test_a_step_scoped_event_naming_another_step_is_reported(wrong: Spec) -> None:
    violations = check_log(log(*in_step(wrong)))
    assert rules_at(violations)[0] == ("step-scoped", 2) and "open is turn 1/step 1" in violations[0].message


def test_step_numbers_rise_by_one_within_a_turn() -> None:
    events = log(
        turn_start(1), step_start(1, 1), step_end(1, 1), step_start(1, 3), step_end(1, 3), turn_end(1)
    )
    (violation,) = check_log(events)
    assert violation.rule == "step-numbering" and "expected step 2 in turn 1, got 3" in violation.message


def test_step_numbers_restart_at_one_in_each_turn() -> None:
    assert check_log(log(*GOOD_TURN, turn_start(2), step_start(2, 1), step_end(2, 1), turn_end(2))) == ()


def test_a_chunk_after_its_step_ended_names_no_open_step() -> None:
    events = log(turn_start(1), step_start(1, 1), step_end(1, 1), chunk(1, 1), turn_end(1))
    (violation,) = check_log(events)
    assert violation.rule == "step-scoped" and "open is turn 1/step null" in violation.message


def test_a_tool_result_without_a_prior_tool_call_is_unpaired() -> None:
    events = log(*in_step(assistant(1, 1, "c"), tool_result(1, 1, "c")))
    (violation,) = check_log(events)
    assert violation.rule == "tool-result-pairing" and "no prior tool/call" in violation.message


def test_an_appended_tool_result_outside_a_step_is_step_checked() -> None:
    events = log(*open_step(tool_call(1, 1, "c")), step_end(1, 1), tool_result(1, 1, "c"), turn_end(1))
    assert rules_at(check_log(events)) == [("step-scoped", 4)]


def test_a_tool_result_replacement_in_a_turn_without_a_step_is_accepted() -> None:
    events = log(
        *in_step(tool_call(1, 1, "c"), tool_result(1, 1, "c")),
        turn_start(2),
        prune(3, 3),
        rewrite(1, 1, "c", 3),
        turn_end(2),
    )
    assert check_log(events) == ()


def test_a_tool_result_replacement_outside_a_turn_is_not_turn_enclosed() -> None:
    events = log(
        *in_step(tool_call(1, 1, "c"), tool_result(1, 1, "c")),
        prune(3, 3),
        rewrite(1, 1, "c", 3),
    )
    assert rules_at(check_log(events)) == [("turn-enclosed", 7)]


def test_not_started_repair_results_and_unresolved_calls_at_step_end_pass_the_pairing_rule() -> None:
    events = log(*in_step(assistant(1, 1, "a", "b"), tool_call(1, 1, "b"), not_started_result(1, 1, "a")))
    # The pairing rule lets repair's not-started result answer a call that never started (DSH's
    # companion does too); the closers rule says this one is no closer: its turn went on and ended.
    assert rules_at(check_log(events)) == [("closers", 4)]


def test_a_result_in_a_later_step_does_not_answer_an_earlier_call() -> None:
    events = log(
        *open_step(tool_call(1, 1, "c")),
        step_end(1, 1),
        step_start(1, 2),
        tool_result(1, 2, "c"),
        step_end(1, 2),
        turn_end(1),
    )
    assert rules_at(check_log(events)) == [("tool-result-pairing", 5)]


def test_a_seed_with_two_turn_starts_is_reported() -> None:
    events = log(turn_start(1), turn_start(1), plain("session/end-seed"))
    assert [v.rule for v in check_log(events)] == ["turn-open", "turn-numbering"]


def test_an_end_seed_inside_an_open_turn_keeps_the_turn_open() -> None:
    events = log(
        turn_start(1),
        plain("session/end-seed"),
        step_start(1, 1),
        step_end(1, 1),
        turn_end(1),
        plain("session/end-seed"),
    )
    assert check_log(events) == ()


# --- compaction brackets and shadow prices --------------------------------------------------------------


def compacted_turn() -> list[dict[str, Any]]:
    """A turn compacting its two user messages (seqs 1-2) into a checkpoint."""
    return log(
        turn_start(1),
        user("a"),
        user("b"),
        compaction_start("k", 1),
        summary("k", 1, 2),
        checkpoint("k", 1, 2, [3, 4, 1, 2]),
        compaction_end("k", 1),
        turn_end(1),
    )


def test_a_compaction_inside_its_turn_is_well_formed() -> None:
    assert check_log(compacted_turn()) == ()


def test_a_standalone_compaction_between_turns_is_well_formed() -> None:
    events = log(
        user("a"),
        compaction_start("k", None, sourceCommandId="cmd"),
        summary("k", 0, 0, sourceCommandId="cmd"),
        checkpoint("k", 0, 0, [1, 2, 0]),
        compaction_end("k", None, sourceCommandId="cmd"),
    )
    events[3]["data"]["source"]["sourceCommandId"] = "cmd"
    assert check_log(events) == ()


def test_a_failed_compaction_is_a_start_and_an_end_with_an_error() -> None:
    assert (
        check_log(log(user("a"), compaction_start("k", None), compaction_end("k", None, error="boom"))) == ()
    )


def test_a_compaction_start_while_one_is_open_is_reported() -> None:
    events = log(
        compaction_start("k1", None), compaction_start("k2", None), compaction_end("k2", None, error="x")
    )
    assert_only(events, "compaction-bracket", 1, "still compacting")


def test_a_compaction_end_with_another_id_does_not_match() -> None:
    violations = check_log(log(compaction_start("k1", None), compaction_end("k2", None, error="x")))
    assert rules_at(violations) == [("compaction-bracket", 1)] and "does not match" in violations[0].message


def test_a_successful_compaction_end_needs_a_summary() -> None:
    assert rules_at(check_log(log(compaction_start("k", None), compaction_end("k", None)))) == [
        ("compaction-bracket", 1)
    ]


def test_a_second_summary_in_one_compaction_is_reported() -> None:
    events = compacted_turn()
    events.insert(5, {**events[4], "seq": 5})
    events = [{**event, "seq": seq} for seq, event in enumerate(events)]
    events[6]["surfaceOp"], events[6]["sourceEventSeqs"] = replace(1, 2), [3, 5, 1, 2]
    assert ("compaction-bracket", 5) in rules_at(check_log(events))


def test_a_turn_boundary_cannot_cross_an_open_compaction() -> None:
    events = log(turn_start(1), compaction_start("k", 1), turn_end(1))
    assert_only(events, "compaction-turn", 2, "cannot cross an open compaction for turn 1")


def test_a_standalone_compaction_inside_a_turn_is_reported() -> None:
    events = log(
        turn_start(1), compaction_start("k", None), compaction_end("k", None, error="x"), turn_end(1)
    )
    assert rules_at(check_log(events)) == [("compaction-turn", 1), ("compaction-turn", 2)]


def test_a_compaction_end_names_the_owner_of_its_start() -> None:
    events = log(turn_start(1), compaction_start("k", 1), compaction_end("k", 2, error="x"), turn_end(1))
    assert_only(events, "compaction-turn", 2, "owner 2 does not match compaction/start owner 1")


def test_a_summary_range_must_span_its_shadowed_seqs() -> None:
    events = compacted_turn()
    events[4]["data"]["shadowedSeqs"] = [1]
    assert rules_at(check_log(events)) == [("compaction-summary", 4)]


def test_a_compaction_checkpoint_without_its_bracket_is_reported() -> None:
    events = log(user("a"), summary("k", 0, 0), checkpoint("k", 0, 0, [1, 0]))
    assert ("compaction-checkpoint", 2) in rules_at(check_log(events))


def test_an_end_seed_makes_an_open_compaction_a_stale_orphan_reported_as_dangling_once() -> None:
    events = log(
        compaction_start("k1", None),
        plain("session/end-seed"),
        compaction_start("k2", None),
        compaction_end("k2", None, error="x"),
    )
    assert_only(events, "compaction-dangling", 0, "session/end-seed at seq 1")


def test_a_dangling_start_in_a_v0_log_is_reported_as_legacy_and_not_as_dangling() -> None:
    events = log(compaction_start("k1", None), plain("session/end-seed"))
    assert rules_at(check_log(events, format_version=0)) == [("legacy-compaction-dangling", 0)]
    assert {"legacy-compaction-dangling"} == LEGACY_RULES


def test_a_start_still_open_at_the_end_of_the_log_is_the_live_lock_not_dangling() -> None:
    assert check_log(log(user("a"), compaction_start("k1", None))) == ()


def test_a_stale_orphan_is_never_closed_afterwards() -> None:
    events = log(
        compaction_start("k1", None), plain("session/end-seed"), compaction_end("k1", None, error="x")
    )
    assert rules_at(check_log(events)) == [("compaction-dangling", 0), ("compaction-bracket", 2)]


def test_turn_boundaries_before_the_end_seed_may_cross_an_inherited_orphan() -> None:
    events = log(turn_start(1), compaction_start("k", 1), turn_end(1), plain("session/end-seed"))
    assert rules_at(check_log(events, format_version=0)) == [("legacy-compaction-dangling", 1)]


def test_a_replace_without_its_metering_event_has_no_shadow_price() -> None:
    events = log(user("a"), user("b", replace(0, 0), sourceEventSeqs=[0]))
    assert_only(events, "shadow-price", 1, "has no adjacent shadow price")


def test_a_metering_event_over_another_range_does_not_price_the_replace() -> None:
    events = compacted_turn()
    events[4]["data"]["shadowedRange"], events[4]["data"]["shadowedSeqs"] = {"start": 1, "end": 1}, [1]
    assert_only(events, "shadow-price", 5, "armed claim covers 1-1")


def test_a_prune_meters_a_tool_result_and_not_a_user_message() -> None:
    events = log(
        turn_start(1), user("a"), prune(1, 1), user("b", replace(1, 1), sourceEventSeqs=[1]), turn_end(1)
    )
    assert rules_at(check_log(events)) == [("shadow-price", 3)]


def test_a_summary_whose_replace_never_came_is_allowed() -> None:
    events = log(
        user("a"),
        compaction_start("k", None),
        summary("k", 0, 0),
        compaction_end("k", None, error="replace refused"),
    )
    assert check_log(events) == ()


# --- crash-repair closers and lineage ------------------------------------------------------------------


def test_a_repaired_log_passes_every_rule() -> None:
    events = log(
        turn_start(1),
        user(),
        step_start(1, 1),
        assistant(1, 1, "a", "b"),
        tool_call(1, 1, "b"),
        compaction_start("k", 1),
    )
    assert check_log(events + list(derive_closers(events))) == ()


def test_a_repaired_log_goes_on_with_its_next_turn() -> None:
    events = log(turn_start(1), step_start(1, 1))
    repaired = events + list(derive_closers(events))
    more = [
        {**event, "seq": len(repaired) + event["seq"]}
        for event in log(plain("session/end-seed"), turn_start(2), turn_end(2))
    ]
    assert check_log(repaired + more) == ()


def test_an_interrupted_turn_end_that_leaves_a_call_unanswered_is_not_a_closer() -> None:
    events = log(*open_step(assistant(1, 1, "c")), step_end(1, 1), turn_end(1, kind="interrupted"))
    events[3] = {**events[3], "type": "plugin/x"}
    assert rules_at(check_log(events)) == [("step-open", 4), ("closers", 4)]


def test_an_interrupted_turn_end_after_the_step_closed_is_a_closer_block_of_one() -> None:
    events = log(*open_step(assistant(1, 1, "c")), step_end(1, 1), turn_end(1, kind="interrupted"))
    assert check_log(events) == ()


def test_repair_closers_outside_any_open_turn_are_findings_not_a_crash() -> None:
    # Found by pure-drt: an interrupted turn/end, or a tool/result with repair's code, where no
    # turn is open made the closers rule read a seq it had not computed (the spec must be total).
    closer = turn_end(1, kind="interrupted")
    assert ("closers", 0) in rules_at(check_log(log(closer)))
    assert ("closers", 2) in rules_at(check_log(log(turn_start(1), turn_end(1), closer)))


def test_a_seed_length_within_the_log_with_its_end_seed_is_well_formed() -> None:
    events = log(turn_start(1), turn_end(1), plain("session/end-seed"))
    assert check_log(events, {"seedLength": 2}) == ()


def test_a_seed_that_already_ended_with_an_end_seed_is_well_formed() -> None:
    events = log(plain("session/end-seed"), user())
    assert check_log(events, {"seedLength": 1}) == ()


def test_a_seeded_header_without_an_end_seed_is_reported() -> None:
    assert rules_at(check_log(log(user()), {"isSeeded": True})) == [("end-seed", None)]


# --- DSH's own answers ----------------------------------------------------------------------------------

DSH_MESSAGE_RULES: tuple[tuple[str, str], ...] = (
    (
        r"is not surface-eligible and cannot carry|invalid (replace )?surfaceOp|requires a surfaceOp",
        "surface-op",
    ),
    (r"surface replace: (start|end) seq \d+ (not found|\(index)", "surface-replace"),
    (r"sourceEventSeqs", "provenance"),
    (r"tool/result surface replacement", "tool-rewrite"),
)


def expected_rule(message: str) -> str:
    return next(rule for pattern, rule in DSH_MESSAGE_RULES if re.search(pattern, message))


def test_the_core_check_refuses_exactly_the_appends_dsh_refused() -> None:
    """Replays DSH's 300 golden scenarios: an append DSH refused breaks the core rule its message
    names at the new seq; an append it accepted breaks none, except message-shape (DSH's append does
    not check message shapes that a restore does, notes/dsh-session-core §14.1)."""
    refused = 0
    for path in sorted(shared_dir("golden", "dsh-0.1.0-rc.8").glob("scenario-*.jsonl")):
        sessions: dict[str, list[Any]] = {}
        for line in path.read_text().splitlines():
            record = json.loads(line)
            op, response = record["op"], record["response"]
            if op["op"] in ("create", "fork") and "result" in response:
                sessions[response["result"]["id"]] = list(response["result"]["events"])
            elif op["op"] == "append":
                events = sessions[op["id"]]
                attempt = response.get("result") or {
                    "type": op["type"],
                    "seq": len(events),
                    "time": 1000,
                    "data": op["data"],
                    **{key: op[key] for key in ("sourceEventSeqs", "surfaceOp") if key in op},
                }
                found = {
                    v.rule for v in check_log([*events, attempt], relational=False) if v.seq == len(events)
                }
                if "result" in response:
                    assert found <= {"message-shape"}, (path.name, found)
                    events.append(response["result"])
                else:
                    assert expected_rule(response["error"]["message"]) in found, (
                        path.name,
                        response["error"],
                        found,
                    )
                    refused += 1
    assert refused > 0


# --- properties -------------------------------------------------------------------------------------------


@st.composite
def agent_log(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A log an agent loop would write: turns of steps with tool calls, prunes and compactions."""
    events: list[dict[str, Any]] = []

    def emit(spec: Spec) -> int:
        kind, data, extra = spec
        events.append({"type": kind, "seq": len(events), "time": 1000, "data": data, **extra})
        return len(events) - 1

    def compact(turn: int | None, compaction_id: str) -> None:
        nodes = fold_surface(events).nodes
        if not nodes:
            return
        first = draw(st.integers(0, len(nodes) - 1))
        last = draw(st.integers(first, len(nodes) - 1))
        start_seq = emit(compaction_start(compaction_id, turn))
        if draw(st.booleans()):
            emit(compaction_end(compaction_id, turn, error="summary failed"))
            return
        summary_seq = emit(
            summary(compaction_id, nodes[first], nodes[last], seqs=list(nodes[first : last + 1]))
        )
        emit(
            checkpoint(
                compaction_id, nodes[first], nodes[last], [start_seq, summary_seq, *nodes[first : last + 1]]
            )
        )
        emit(compaction_end(compaction_id, turn))

    for turn in range(1, draw(st.integers(0, 3)) + 1):
        emit(turn_start(turn))
        emit(user(f"prompt-{turn}"))
        for step in range(1, draw(st.integers(0, 3)) + 1):
            emit(step_start(turn, step))
            emit(chunk(turn, step))
            calls = [f"c{turn}-{step}-{i}" for i in range(draw(st.integers(0, 3)))]
            emit(assistant(turn, step, *calls))
            results: list[tuple[str, int]] = []
            for call in calls:
                fate = draw(st.sampled_from(["answered", "started", "dropped"]))
                if fate != "dropped":
                    emit(tool_call(turn, step, call))
                if fate == "answered":
                    results.append((call, emit(tool_result(turn, step, call))))
            emit(step_end(turn, step))
            prune_one = draw(st.booleans())
            if results and prune_one:
                call, seq = draw(st.sampled_from(results))
                if seq in fold_surface(events).nodes:
                    emit(prune(seq, seq))
                    emit(rewrite(turn, step, call, seq))
        if draw(st.booleans()):
            compact(turn, f"k{turn}")
        emit(turn_end(turn))
        if draw(st.booleans()):
            compact(None, f"m{turn}")
    return events


@given(agent_log())
def test_an_agent_loop_log_is_well_formed(events: list[dict[str, Any]]) -> None:
    assert check_log(events) == ()


@given(agent_log(), st.data())
def test_a_log_cut_anywhere_and_repaired_is_well_formed(
    events: list[dict[str, Any]], data: st.DataObject
) -> None:
    cut = events[: data.draw(st.integers(0, len(events)))]
    assert check_log(cut + list(derive_closers(cut))) == ()


ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 4), st.sampled_from(["1", "c1", ""]), st.just({"a": 1})
)


@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(
                    [
                        "turn/start",
                        "turn/end",
                        "step/start",
                        "step/end",
                        "tool/call",
                        "tool/result",
                        "assistant/message",
                        "user/message",
                        "compaction/start",
                        "compaction/summary",
                        "compaction/end",
                        "compaction/prune",
                        "session/end-seed",
                        "request/context",
                        "plugin/x",
                    ]
                ),
                "seq": st.integers(0, 6),
                "time": st.just(0),
                "data": st.fixed_dictionaries(
                    {},
                    optional={
                        "turn": ANY_VALUE,
                        "step": ANY_VALUE,
                        "callId": ANY_VALUE,
                        "compactionId": ANY_VALUE,
                        "shadowedRange": st.just({"start": 0, "end": 0}),
                        "error": ANY_VALUE,
                    },
                ),
            },
            optional={
                "surfaceOp": st.one_of(
                    st.just("append"), st.builds(replace, st.integers(0, 3), st.integers(0, 3)), ANY_VALUE
                ),
                "sourceEventSeqs": st.lists(st.integers(-1, 5), max_size=3),
            },
        ),
        max_size=12,
    )
)
def test_the_checker_is_total_and_reports_only_known_rules(events: list[dict[str, Any]]) -> None:
    violations = check_log(events, {"seedLength": 3, "isSeeded": True})
    assert all(violation.rule in RULES for violation in violations)
    assert [v.seq for v in violations if v.seq is not None] == sorted(
        v.seq for v in violations if v.seq is not None
    )


def test_a_result_with_repair_s_error_code_outside_a_closer_block_breaks_the_closers_rule() -> None:
    events = log(*in_step(assistant(1, 1, "c1"), not_started_result(1, 1, "c1")))
    assert ("closers", 3) in rules_at(check_log(events))


def test_repair_s_own_results_inside_its_closer_block_pass_the_closers_rule() -> None:
    events = log(*open_step(assistant(1, 1, "c1", "c2"), tool_call(1, 1, "c1")))
    repaired = [*events, *derive_closers(events)]
    assert [e["type"] for e in repaired[4:]] == ["tool/result", "tool/result", "step/end", "turn/end"]
    assert "closers" not in [rule for rule, _ in rules_at(check_log(repaired))]
