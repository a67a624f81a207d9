"""Crash injection inside compaction brackets (issue 11 part 3): the crash family's compaction
workload, for a subject with capability ``compaction``, cut at every mutating-op boundary and at the
first, middle and last byte of each unsynced write, every reopened log checked against D3."""

from __future__ import annotations

from broken_subjects import ClosersOmitCompactionEnd

from conformance.crash import compaction_workload, crash_workloads, run_crash_checks
from conformance.subject import InProcessSubject
from reference.server import ReferenceSubject


def test_a_subject_with_compaction_gets_the_compaction_workload_and_one_without_does_not() -> None:
    assert "compaction" in dict(crash_workloads(("core", "compaction")))
    assert "compaction" not in dict(crash_workloads(("core",)))
    ops = [op for op, _ in compaction_workload()]
    assert ops.count("compact") == 2 and ops.count("compact_region") == 1


def test_the_reference_survives_a_power_cut_at_every_point_of_a_compaction() -> None:
    outcome = run_crash_checks(
        InProcessSubject(ReferenceSubject()),
        capabilities=ReferenceSubject.capabilities,
        workloads=("compaction",),
    )
    assert outcome.failures == [] and outcome.not_reached == []
    assert outcome.boundaries >= 40 and outcome.byte_cuts >= 40 and outcome.faults >= 100
    assert outcome.reached["D3.6"] >= 300  # every cut's resume checked for its closers
    assert outcome.seconds < 40, outcome.seconds


def test_a_resume_that_leaves_a_cut_compaction_open_fails_the_compaction_workload() -> None:
    outcome = run_crash_checks(
        InProcessSubject(ClosersOmitCompactionEnd()),
        capabilities=ReferenceSubject.capabilities,
        workloads=("compaction",),
        fail_fast=True,
    )
    assert outcome.failures, "the compaction workload missed a bracket left open"
    first = outcome.failures[0]
    assert "(compact" in first.name, first.name  # the cut fell inside a compaction
    assert "OPEN_COMPACTION" in " ".join(first.problems) or "D3.6" in " ".join(first.problems), first
