"""``fail_next``'s ``after`` counted exactly by the crash family (conformance/crash/points.py,
``run_fault_countdown``): over rounds of one append and a flush, each making one write and one
fsync, a fault armed after ``n`` of them stops round ``n + 1``. The reference passes; a seam that
counts from one, or drops a fault armed for a later call, fails; a subject whose rounds make other
counts is told it was not judged."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from broken_storage_files import _BrokenFilesSubject
from broken_subjects import ArmsFaultsOnlyForTheNextCall, MutantSubject

from conformance.crash.outcome import CrashOutcome
from conformance.crash.points import COUNTDOWN_ROUNDS, FAULTS, TWO_FAULTS, run_fault_countdown
from conformance.subject import InProcessSubject
from reference.persistence.faulty import FaultyFileSystem
from reference.persistence.filestore import FileStore
from reference.server import ReferenceSubject
from spec.codes import Code, reject
from spec.log.events import Event


class _CountsFromOne(FaultyFileSystem):
    def fail_next(self, kind: str, code: int, after: int) -> None:
        super().fail_next(kind, code, max(after - 1, 0))  # "after 1" taken as "the first one fails"


class CountsFaultsFromOne(MutantSubject):
    """Its seam fails the ``after``-th call, not the one after ``after`` of them."""

    fs_class = _CountsFromOne


class _SyncsTheFolderToo(FaultyFileSystem):
    def fsync(self, path: str) -> None:
        super().fsync(path)
        self.inner.fsync_dir(path.rsplit("/", 1)[0] or "/")


class SyncsTheFolderOnEveryFsync(MutantSubject):
    """A conforming store whose every flush also fsyncs the log's folder: three operations a round."""

    fs_class = _SyncsTheFolderToo


class _RollbackUnguardedStore(FileStore):
    def _append_batch(self, path: str, events: Sequence[Event], compressed: bool) -> None:
        before = self.fs.size(path)
        try:
            self.fs.append(path, self._batch_bytes(events, compressed))
            self.fs.fsync(path)
        except OSError as error:
            self.fs.truncate(path, before)  # unguarded: a failure while undoing escapes as it is
            self.fs.fsync(path)
            raise reject(Code.STORAGE_IO, f"could not make {path!r} durable: {error}") from error


class RollbackFailureEscapes(_BrokenFilesSubject):
    """A failed append's cut back to the old size is fsynced unguarded: when that fsync fails too
    (a second fault), the request answers INTERNAL, not STORAGE_IO."""

    store_class = _RollbackUnguardedStore


def countdown(subject: ReferenceSubject, compressed: bool) -> CrashOutcome:
    outcome = CrashOutcome()
    run_fault_countdown(InProcessSubject(subject), compressed, outcome)
    return outcome


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
def test_the_reference_fails_exactly_the_call_after_the_ones_a_fault_lets_through(compressed: bool) -> None:
    outcome = countdown(ReferenceSubject(), compressed)
    assert outcome.failures == [] and outcome.not_reached == []
    assert outcome.points == len(FAULTS) * COUNTDOWN_ROUNDS + len(TWO_FAULTS)


@pytest.mark.parametrize("broken", [CountsFaultsFromOne, ArmsFaultsOnlyForTheNextCall])
def test_a_seam_that_miscounts_after_fails_the_countdown(broken: type[MutantSubject]) -> None:
    outcome = countdown(broken(), compressed=False)
    assert outcome.failures
    assert all("not round" in problem for case in outcome.failures for problem in case.problems)


def test_rounds_of_other_counts_are_not_judged_and_say_so() -> None:
    outcome = countdown(SyncsTheFolderOnEveryFsync(), compressed=False)
    assert outcome.points == 0 and outcome.failures == []
    assert outcome.not_reached == [
        "plain: fail_next's after counted exactly (a round of one append and a flush made [3, 3, 3] "
        "mutating operations, not one write and one fsync)"
    ]


def test_a_failure_while_undoing_a_failed_append_still_answers_storage_io() -> None:
    outcome = countdown(RollbackFailureEscapes(), compressed=False)
    names = [case.name for case in outcome.failures]
    assert names == [
        f"plain: fail_next {a} and {b} armed at once, over rounds of one of each" for a, b in TWO_FAULTS
    ]
    assert all("INTERNAL" in problem for case in outcome.failures for problem in case.problems)
