"""Durability checkpoints: flush before a model request, before a tool runs and at each pre-step;
fail closed when the flush fails (seed 002; notes/dsh-compaction-projection §11.5 item 2)."""

from __future__ import annotations

import errno

import pytest
from refusals import refusal
from shrink_builders import Conversation, RecordingSink, sink_session

from reference.persistence.filestore import FileStore
from reference.projections.checkpoints import DurabilityCheckpoints
from reference.store import SessionStore
from spec.codes import Code
from spec.projections.durability import CHECKPOINT_MOMENTS, Moment, is_durability_checkpoint
from tests.powerloss_harness import ProbedFileSystem


def test_a_model_request_is_sent_only_after_the_log_is_flushed() -> None:
    sink = RecordingSink()
    session = sink_session(sink)
    Conversation(session).prompt("hello")
    assert DurabilityCheckpoints(session).before_model_request(lambda: sink.flushed_upto) == session.seq


def test_a_tool_runs_only_after_the_log_is_flushed() -> None:
    sink = RecordingSink()
    session = sink_session(sink)
    Conversation(session).prompt("hello")
    assert DurabilityCheckpoints(session).before_tool(lambda: sink.flushed_upto) == session.seq


def test_each_pre_step_flushes() -> None:
    sink = RecordingSink()
    session = sink_session(sink)
    checkpoints = DurabilityCheckpoints(session)
    checkpoints.pre_step()
    checkpoints.pre_step()
    assert sink.flushes == 2


@pytest.mark.parametrize("moment", CHECKPOINT_MOMENTS)
def test_a_failed_flush_fails_closed_and_the_action_is_not_run(moment: Moment) -> None:
    sink = RecordingSink()
    session = sink_session(sink)

    sink.fail_flushes("fsync failed")
    ran: list[bool] = []
    caught = refusal(lambda: DurabilityCheckpoints(session).guard(moment, lambda: ran.append(True)))
    assert caught.code == Code.DURABILITY_CHECKPOINT_FAILED
    assert isinstance(caught.__cause__, OSError) and "fsync failed" in caught.message
    assert ran == []


def test_a_storage_failure_under_a_real_store_keeps_the_tool_from_running() -> None:
    fs = ProbedFileSystem()
    store = SessionStore(persistence=FileStore("/data", fs=fs), clock=lambda: 5)
    session = store.create("cp", meta={"createdAt": 1})
    session.flush()
    Conversation(session).prompt("run the migration")
    fs.fail_next("fsync", errno.EIO)
    ran: list[bool] = []
    assert (
        refusal(lambda: DurabilityCheckpoints(session).before_tool(lambda: ran.append(True))).code
        == Code.DURABILITY_CHECKPOINT_FAILED
    )
    assert ran == []


def test_everything_before_a_checkpoint_survives_a_power_cut_after_it() -> None:
    fs = ProbedFileSystem()
    store = SessionStore(persistence=FileStore("/data", fs=fs), clock=lambda: 5)
    session = store.create("cp", meta={"createdAt": 1})
    Conversation(session).prompt("remember me")
    DurabilityCheckpoints(session).before_model_request(lambda: None)
    durable = FileStore("/data", fs=fs.crash()).read("cp").events
    assert durable == session.events


def test_an_unknown_moment_is_a_programming_error() -> None:
    with pytest.raises(ValueError):
        DurabilityCheckpoints(sink_session(RecordingSink())).checkpoint("lunch")  # type: ignore[arg-type]


def test_there_are_exactly_three_checkpoint_moments() -> None:
    assert CHECKPOINT_MOMENTS == ("model-request", "tool", "pre-step")
    assert all(is_durability_checkpoint(moment) for moment in CHECKPOINT_MOMENTS)
    assert not is_durability_checkpoint("turn-end")
