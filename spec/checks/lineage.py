"""The checker's relational rules about where a log's events came from: the closers crash repair
writes for a turn a crash left open, the events a fork or seed inherited, as the header's
lineage describes them, and a sub-agent's delegation depth (SPEC-DECISIONS D3 item 6, D1, D9; notes/dsh-session-core §4.3-§4.5, §9).
The rule ids are in :data:`spec.checks.log.RULES`; :func:`spec.checks.log.check_log` runs this family
with the others.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from spec.checks.violation import Violation, violation_seq
from spec.lineage.repair import RepairScan, apply_repair_scan, derive_closers_after
from spec.log.events import COMPACTION_END, END_SEED, STEP_END, TOOL_RESULT, TURN_END, Event
from spec.log.json import JsonObject, is_event_seq, js_text
from spec.log.writers import is_interrupted_turn_end, is_repair_tool_result

# --- crash-repair closers (SPEC-DECISIONS D3 item 6) ------------------------------------------------


def check_closers(events: Sequence[Event]) -> Iterator[Violation]:
    """Wherever a turn is open, see whether the events from there on are exactly the closers repair
    derives for the log so far; a ``turn/end`` with reason ``interrupted`` must be the last event
    of such a block, and a ``tool/result`` that says it is repair's (``TOOL_NOT_STARTED``,
    ``TOOL_OUTCOME_UNKNOWN``) must lie inside one: only a resume writes them
    (notes/dsh-session-core §9; SPEC-DECISIONS D3 item 6; :mod:`spec.log.writers`)."""
    scan = RepairScan()
    verified_ends: set[int] = set()
    verified: set[int] = set()
    for position, event in enumerate(events):
        if (
            scan.open_turn is not None
            and position > 0
            and event.get("type") in (TOOL_RESULT, COMPACTION_END, STEP_END, TURN_END)
        ):
            # Only a block that ends with an interrupted turn/end matters, and its length is known
            # before its closers are built: build them only where such a turn/end stands.
            end = position + count_closers(scan) - 1
            if end < len(events) and _is_interrupted_turn_end(events[end]):
                expected = derive_closers_after(
                    scan, events[position - 1], violation_seq(events[position - 1], position - 1) + 1
                )
                if tuple(events[position : position + len(expected)]) == expected:
                    verified_ends.add(position + len(expected) - 1)
                    verified.update(range(position, position + len(expected)))
        at = violation_seq(event, position)
        if _is_interrupted_turn_end(event) and position not in verified_ends:
            yield Violation(
                "closers",
                at,
                f"interrupted turn/end at seq {at} does not end the closers repair derives for the log before them",
            )
        elif is_repair_tool_result(event.get("type"), event.get("data")) and position not in verified:
            yield Violation(
                "closers",
                at,
                f"tool/result at seq {at} carries crash repair's error code but is not one of the closers "
                "repair derives for the log before it",
            )
        scan = apply_repair_scan(scan, event)


def count_closers(scan: RepairScan) -> int:
    """How many closers :func:`spec.lineage.repair.derive_closers_after` derives for a scan with
    an open turn: a result per pending call, a compaction/end per open compaction, step/end if a
    step is open, and turn/end."""
    return len(scan.pending_calls) + len(scan.open_compactions) + (scan.open_step is not None) + 1


def _is_interrupted_turn_end(event: Event) -> bool:
    return is_interrupted_turn_end(event.get("type"), event.get("data"))


# --- the header's lineage (notes/dsh-session-core §4.3-§4.5; SPEC-DECISIONS D1) -------------------


def check_header_lineage(events: Sequence[Event], header: JsonObject) -> Iterator[Violation]:
    """``seedLength`` counts inherited events, so it is at most the log's length, and the inherited
    events end with a ``session/end-seed`` at ``seedLength - 1`` (the seed already ended with one)
    or at ``seedLength``; ``isSeeded: true`` promises an end-seed somewhere."""
    if "seedLength" in header:
        seed_length = header["seedLength"]
        if not is_event_seq(seed_length) or seed_length > len(events):
            yield Violation(
                "seed-length",
                None,
                f"header seedLength {js_text(seed_length)} is not a seq within the log's {len(events)} events",
            )
        elif not any(
            0 <= at < len(events) and events[at].get("type") == END_SEED
            for at in (int(seed_length) - 1, int(seed_length))
        ):
            yield Violation(
                "end-seed",
                None,
                f"no session/end-seed at seq {js_text(seed_length)} or just before it (header seedLength)",
            )
    if header.get("isSeeded") is True and not any(event.get("type") == END_SEED for event in events):
        yield Violation("end-seed", None, "the header says isSeeded but the log has no session/end-seed")
    if not is_delegation_depth_consistent(header):
        yield Violation(
            "delegation-depth",
            None,
            f"header origin is subagent but delegationDepth is {js_text(header.get('delegationDepth'))}: "
            "a sub-agent's depth is 1 or more",
        )


def is_delegation_depth_consistent(header: JsonObject) -> bool:
    """A sub-agent is never at the top level: a header whose ``origin`` is ``subagent`` has a
    ``delegationDepth`` of 1 or more (the resume/fork/compaction seed: a resumed sub-agent that lost
    its depth "会以为自己在顶层，绕过递归深度限制"). Depth is the header's, kept verbatim by a resume; a
    fork's child inherits neither ``origin`` nor ``delegationDepth``
    (:func:`spec.lineage.fork.derive_child_meta`), so it is consistent too. A header without a
    sub-agent origin may have any depth (DSH's own logs have depth 1 without it)."""
    if header.get("origin") != "subagent":
        return True
    depth = header.get("delegationDepth")
    return is_event_seq(depth) and depth >= 1
