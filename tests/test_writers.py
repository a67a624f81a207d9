"""Who writes what, and no dangling compaction bracket (the resume/fork/compaction seed: "compaction/start
和 compaction/end 永远配对 … 日志里不会出现悬挂的 start"; spec.log.writers, spec.lineage.fork,
spec.log.seed)."""

from __future__ import annotations

from typing import Any

import pytest
from refusals import refusal

from reference.persistence.memory import MemoryPersistence
from reference.shrink.compaction import CompactionEngine
from reference.store import SessionStore
from reference.summarizers import DeterministicSummarizer
from spec.checks.log import check_log
from spec.codes import Code, SpecError
from spec.lineage.fork import plan_fork_seed
from spec.log.header import build_header
from spec.log.session import append_event, create_session_state
from spec.log.writers import CALLER, COMPACTION_ENGINE, STORE, Writer

START = {"compactionId": "k1", "turn": None}


def header() -> Any:
    return build_header("s", {}, 1, False)


def empty() -> Any:
    return create_session_state("s", None, header(), 1)


def code_of(writer: Writer, kind: str, data: Any) -> Code | None:
    try:
        append_event(empty(), kind, data, writer=writer)
    except SpecError as error:
        return error.code
    return None


@pytest.mark.parametrize("kind", ["compaction/start", "compaction/summary", "compaction/end"])
def test_the_compaction_bracket_is_the_engine_s_and_the_store_s_never_a_caller_s(kind: str) -> None:
    assert code_of(CALLER, kind, START) == Code.STORE_ONLY_EVENT
    assert code_of(COMPACTION_ENGINE, kind, START) is None
    assert code_of(STORE, kind, START) is None


def test_the_end_seed_is_the_store_s_alone() -> None:
    assert code_of(CALLER, "session/end-seed", {}) == Code.STORE_ONLY_EVENT
    assert code_of(COMPACTION_ENGINE, "session/end-seed", {}) == Code.STORE_ONLY_EVENT
    assert code_of(STORE, "session/end-seed", {}) is None


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}),
        ("tool/result", {"message": {}, "error": {"code": "TOOL_NOT_STARTED"}}),
        ("tool/result", {"message": {}, "error": {"code": "TOOL_OUTCOME_UNKNOWN"}}),
    ],
)
def test_repair_s_closers_are_recognised_by_content_and_refused_from_callers(kind: str, data: Any) -> None:
    assert code_of(CALLER, kind, data) == Code.REPAIR_CLOSER_RESERVED
    assert code_of(COMPACTION_ENGINE, kind, data) == Code.REPAIR_CLOSER_RESERVED
    assert code_of(STORE, kind, data) != Code.REPAIR_CLOSER_RESERVED


def test_ordinary_turn_ends_and_tool_errors_are_a_caller_s() -> None:
    assert code_of(CALLER, "turn/end", {"turn": 1, "reason": {"kind": "aborted"}}) is None
    assert code_of(CALLER, "tool/result", {"error": {"code": "EACCES"}}) != Code.REPAIR_CLOSER_RESERVED


def test_session_append_refuses_the_bracket_and_the_engine_path_takes_it() -> None:
    session = SessionStore(clock=lambda: 1).create("s")
    assert (
        refusal(lambda: session.append("compaction/start", START)).code == Code.STORE_ONLY_EVENT
        and session.seq == 0
    )
    session.append("compaction/start", START, writer=COMPACTION_ENGINE)
    assert session.events[-1]["type"] == "compaction/start"


def test_the_reference_engine_writes_its_bracket_through_its_own_path() -> None:
    session = SessionStore(clock=lambda: 1).create("s")
    for turn in (1, 2, 3):
        session.append("turn/start", {"turn": turn})
        text = {"type": "text", "text": "why? " * 300}
        message = {"id": f"u{turn}", "role": "user", "source": {"kind": "user"}, "content": [text]}
        session.append("user/message", message, "append")
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    CompactionEngine(DeterministicSummarizer()).compact_now(session)
    kinds = [event["type"] for event in session.events]
    assert kinds.count("compaction/start") == kinds.count("compaction/end") == 1


# --- no dangling bracket: forks and seeds ---------------------------------------------------------


def events(*kinds_and_data: tuple[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": kind, "seq": seq, "time": 1, "data": data} for seq, (kind, data) in enumerate(kinds_and_data)
    ]


def test_a_fork_refuses_a_boundary_inside_a_standalone_bracket() -> None:
    log = events(("compaction/start", START), ("note", {}), ("compaction/end", {**START, "error": "x"}))
    for boundary in (0, 1):
        with pytest.raises(SpecError) as caught:
            plan_fork_seed("p", log, boundary)
        assert caught.value.code == Code.OPEN_COMPACTION
        assert "ends inside open compaction k1" in caught.value.message
    assert len(plan_fork_seed("p", log, 2)) == 3


def test_a_stale_orphan_before_an_end_seed_is_no_lock_for_a_fork() -> None:
    log = events(("compaction/start", START), ("session/end-seed", {}))
    assert len(plan_fork_seed("p", log, 1)) == 2


def test_a_seed_that_would_get_the_marker_may_not_end_inside_a_bracket() -> None:
    assert (
        refusal(lambda: create_session_state("s", events(("compaction/start", START)), header(), 1)).code
        == Code.OPEN_COMPACTION
    )


def test_a_resume_of_a_log_left_inside_a_bracket_closes_it_before_its_end_seed() -> None:
    store = SessionStore(MemoryPersistence(batch=None), clock=lambda: 1)
    session = store.create("s")
    session.append("compaction/start", START, writer=COMPACTION_ENGINE)
    store.close("s")
    resumed = store.resume("s")
    assert [e["type"] for e in resumed.events] == ["compaction/start", "compaction/end", "session/end-seed"]
    assert check_log(list(resumed.events), dict(resumed.header)) == ()
