"""Crash injection: a storage workload cut short at every point a power loss can strike, each
reopened log checked against SPEC-DECISIONS D3, item by item (:mod:`conformance.crash_rules`).

For a subject with the ``crash-seam`` capability (storage on a simulated power-loss filesystem):

- **every boundary** — the workload runs once to count its mutating filesystem operations; then,
  for each of them, it runs again with ``arm_crash`` set to stop it there, and the power is cut
  keeping nothing unsynced, then keeping everything;
- **every byte** — wherever a cut leaves unsynced bytes, the power is cut again keeping each
  possible prefix of them (``crash keep {path, bytes}``), byte by byte;
- **faults** — the n-th ``fsync`` fails with EIO and the n-th write with ENOSPC (and EIO), for every
  n the workload reaches: the request that meets the fault must answer ``STORAGE_IO``, and after a
  power cut nothing flushed before it is lost.

- **damage** — the workload runs to the end, the power is cut, and ``damage`` flips a byte in the
  middle of the longest log: ``read`` and ``resume`` must answer ``CORRUPT_LOG``, and once the
  byte is flipped back the log must read as before (damage that is not a tail is never cut off).

After each cut every session is read back (D3 items 1-3; a torn tail is never corruption, item 5),
resumed (item 6: closers, then the end-seed rule), and the power cut once more, keeping nothing:
the log must now read exactly as the resume repaired it (item 4).

The workloads (:mod:`conformance.crash.workloads`): the standard one, a single-session one, and
for a subject with capability ``compaction`` one whose ``/compact`` and automatic compactions are
cut at every point, each event its own write, so that resume must close a bracket a cut left open.
The modules: ``workloads``, ``outcome`` (what was found), ``points`` (the seam's crash points),
``kill`` (SIGKILL over stdio) and ``family`` (the runner's entry point).

For a subject with storage but no seam, driven over stdio, :func:`run_kill_check` kills the
process (SIGKILL) at seeded random points while it appends and flushes, restarts it, resumes, and
checks that nothing flushed is lost and the log is a valid prefix.
"""

from conformance.crash.family import (
    FAIL_FAST,
    SUBJECT_ARGUMENT,
    check_crash,
    with_fixed_replay,
)
from conformance.crash.kill import run_kill_check
from conformance.crash.points import (
    run_crash_checks,
)
from conformance.crash.workloads import (
    compaction_workload,
    crash_workloads,
    standard_workload,
)
from spec.protocol import STORE_ROOT_ENV

__all__ = [
    "FAIL_FAST",
    "STORE_ROOT_ENV",
    "SUBJECT_ARGUMENT",
    "check_crash",
    "compaction_workload",
    "crash_workloads",
    "run_crash_checks",
    "run_kill_check",
    "standard_workload",
    "with_fixed_replay",
]
