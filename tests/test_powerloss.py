"""PowerLossFileSystem: what survives a power cut (SPEC-DECISIONS D3), faults, and crash points."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.crash import run_crash_checks
from conformance.subject import InProcessSubject
from reference.persistence.powerloss import (
    KEEP_ALL,
    MUTATING_OPS,
    CrashPlan,
    PowerLossFileSystem,
    SimulatedCrash,
    UnsyncedFile,
    _File,
)
from reference.server import ReferenceSubject
from tests.powerloss_harness import (
    Op,
    ProbedFileSystem,
    crash_at_every_op,
    crash_states,
    snapshot,
    sync_all,
)


def _durable_log(content: bytes = b"header\n") -> ProbedFileSystem:
    """/s/log holding ``content``, all of it durable."""
    fs = ProbedFileSystem()
    fs.makedirs("/s")
    fs.write_new("/s/log", content)
    sync_all(fs)
    return fs


def _contents(fs: PowerLossFileSystem, path: str) -> set[bytes | None]:
    """The content of ``path`` in every crash state (None: the file is gone)."""
    return {snapshot(after).get(path) for _, after in crash_states(fs)}


def _publish(
    fs: PowerLossFileSystem, data: bytes, *, fsync_file: bool = True, fsync_dir: bool = True
) -> None:
    """The store's durable publish (notes/dsh-persistence.md §5.3), with steps that can be skipped."""
    fs.makedirs("/s")
    fs.write_new("/s/log.tmp", data)
    if fsync_file:
        fs.fsync("/s/log.tmp")
    fs.link("/s/log.tmp", "/s/log")
    if fsync_dir:
        fs.fsync_dir("/s")
    fs.remove("/s/log.tmp")


# --- file content ---
def test_unsynced_appended_bytes_are_lost_on_a_drop_all_crash() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"unsynced\n")
    assert fs.crash().read_bytes("/s/log") == b"header\n"


def test_a_keep_all_crash_keeps_every_written_byte() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"unsynced\n")
    assert fs.crash(KEEP_ALL).read_bytes("/s/log") == b"header\nunsynced\n"


def test_fsynced_bytes_survive_every_crash() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"synced\n")
    fs.fsync("/s/log")
    fs.append("/s/log", b"not yet\n")
    for _, after in crash_states(fs):
        assert after.read_bytes("/s/log").startswith(b"header\nsynced\n")


def test_crash_states_produce_every_prefix_cut_of_the_unsynced_bytes() -> None:
    fs = _durable_log(b"h\n")
    fs.append("/s/log", b"abc")
    assert _contents(fs, "/s/log") == {b"h\n", b"h\na", b"h\nab", b"h\nabc"}


def test_a_cut_keeps_exactly_that_many_unsynced_bytes() -> None:
    fs = _durable_log(b"h\n")
    fs.append("/s/log", b"abcdef")
    assert fs.crash(CrashPlan(cuts={"/s/log": 4})).read_bytes("/s/log") == b"h\nabcd"


def test_cuts_of_two_files_combine() -> None:
    fs = _durable_log()
    fs.write_new("/s/other", b"")
    sync_all(fs)
    fs.append("/s/log", b"ab")
    fs.append("/s/other", b"xy")
    states = {(a.read_bytes("/s/log"), a.read_bytes("/s/other")) for _, a in crash_states(fs)}
    assert len(states) == 9


def test_unsynced_files_report_durable_kept_and_pending_sizes() -> None:
    fs = _durable_log(b"12345")
    fs.truncate("/s/log", 3)
    fs.append("/s/log", b"ab")
    assert fs.unsynced_files() == (UnsyncedFile(path="/s/log", durable=5, kept=3, pending=2),)


def test_an_unsynced_truncate_can_be_lost_whole() -> None:
    fs = _durable_log(b"complete\ntorn")
    fs.truncate("/s/log", 9)
    assert _contents(fs, "/s/log") == {b"complete\ntorn", b"complete\n"}


def test_a_synced_truncate_survives_every_crash() -> None:
    fs = _durable_log(b"complete\ntorn")
    fs.truncate("/s/log", 9)
    fs.fsync("/s/log")
    assert _contents(fs, "/s/log") == {b"complete\n"}


def test_bytes_appended_after_an_unsynced_truncate_survive_only_as_a_prefix_after_the_cut() -> None:
    fs = _durable_log(b"abcd")
    fs.truncate("/s/log", 2)
    fs.append("/s/log", b"XY")
    assert _contents(fs, "/s/log") == {b"abcd", b"ab", b"abX", b"abXY"}


@given(
    st.lists(st.tuples(st.sampled_from(["append", "fsync"]), st.binary(min_size=1, max_size=4)), max_size=8)
)
def test_every_crash_state_is_the_last_synced_content_plus_a_prefix_of_what_followed(
    steps: list[tuple[str, bytes]],
) -> None:
    fs = _durable_log(b"h")
    synced = written = b"h"
    for op, data in steps:
        if op == "append":
            fs.append("/s/log", data)
            written += data
        else:
            fs.fsync("/s/log")
            synced = written
    expected = {written[:cut] for cut in range(len(synced), len(written) + 1)}
    assert _contents(fs, "/s/log") == expected


# --- directory entries ---
@pytest.mark.parametrize(("fsync_dir", "survivors"), [(False, {None, b"data"}), (True, {b"data"})])
def test_a_new_fsynced_file_can_vanish_until_its_directory_is_fsynced(
    fsync_dir: bool, survivors: set[bytes | None]
) -> None:
    fs = ProbedFileSystem()
    fs.makedirs("/s")
    sync_all(fs)
    fs.write_new("/s/log", b"data")
    fs.fsync("/s/log")
    if fsync_dir:
        fs.fsync_dir("/s")
    assert _contents(fs, "/s/log") == survivors


def test_a_renamed_file_without_fsync_dir_can_vanish_under_its_new_name() -> None:
    fs = _durable_log()
    fs.rename("/s/log", "/s/final")
    states = {tuple(after.listdir("/s")) for _, after in crash_states(fs)}
    assert states == {("log",), ("final",)}


def test_a_renamed_file_with_fsync_dir_stays_under_its_new_name() -> None:
    fs = _durable_log()
    fs.rename("/s/log", "/s/final")
    fs.fsync_dir("/s")
    states = {tuple(after.listdir("/s")) for _, after in crash_states(fs)}
    assert states == {("final",)}


def test_a_removed_file_without_fsync_dir_can_come_back() -> None:
    fs = _durable_log()
    fs.remove("/s/log")
    assert _contents(fs, "/s/log") == {None, b"header\n"}


def test_a_removed_file_keeps_its_unsynced_cuts_when_it_comes_back() -> None:
    fs = _durable_log(b"h")
    fs.append("/s/log", b"ab")
    fs.remove("/s/log")
    assert fs.unsynced_files() == (UnsyncedFile(path="/s/log", durable=1, kept=1, pending=2),)
    assert _contents(fs, "/s/log") == {None, b"h", b"ha", b"hab"}


def test_a_new_directory_vanishes_with_its_files_when_its_parent_was_not_synced() -> None:
    fs = ProbedFileSystem()
    fs.makedirs("/s")
    fs.write_new("/s/log", b"data")
    fs.fsync("/s/log")
    fs.fsync_dir("/s")
    assert _contents(fs, "/s/log") == {None, b"data"}
    fs.fsync_dir("/")
    assert _contents(fs, "/s/log") == {b"data"}


def test_hard_links_stay_one_file_after_a_crash() -> None:
    fs = _durable_log()
    fs.link("/s/log", "/s/log.tmp")
    after = fs.crash(KEEP_ALL)
    after.append("/s/log", b"more\n")
    assert after.read_bytes("/s/log.tmp") == b"header\nmore\n"


# --- the durable publish, at every crash point ---
def _crash_outcomes_of_publish(**skips: bool) -> set[bytes | None]:
    """What /s/log can hold after a power cut at any point of a publish, or after it."""
    points = crash_at_every_op(ProbedFileSystem, lambda fs: _publish(fs, b"header\nbatch\n", **skips))
    return {snapshot(point.after).get("/s/log") for point in points}


def test_a_published_file_is_whole_or_absent_after_a_crash_at_any_point() -> None:
    assert _crash_outcomes_of_publish() == {None, b"header\nbatch\n"}


def test_a_publish_without_fsync_of_the_temp_file_can_leave_a_half_written_file() -> None:
    assert b"header\n" in _crash_outcomes_of_publish(fsync_file=False)


def test_crash_at_every_op_cuts_the_power_before_each_mutating_call_and_after_the_last() -> None:
    points = list(crash_at_every_op(ProbedFileSystem, lambda fs: _publish(fs, b"abc")))
    stops = {(point.op_number, point.crashed_at.name if point.crashed_at else None) for point in points}
    assert stops == {
        (1, "makedirs"),
        (2, "write_new"),
        (3, "fsync"),
        (4, "link"),
        (5, "fsync_dir"),
        (6, "remove"),
        (7, None),
    }


# --- faults ---
def test_a_failed_fsync_raises_eio_and_leaves_durable_content_unchanged() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"batch\n")
    fs.fail_next("fsync", errno.EIO)
    with pytest.raises(OSError) as caught:
        fs.fsync("/s/log")
    assert caught.value.errno == errno.EIO
    assert fs.crash().read_bytes("/s/log") == b"header\n"


def test_a_failed_fsync_leaves_the_written_bytes_visible_and_a_later_fsync_makes_them_durable() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"batch\n")
    fs.fail_next("fsync", errno.EIO)
    with pytest.raises(OSError):
        fs.fsync("/s/log")
    assert fs.read_bytes("/s/log") == b"header\nbatch\n"
    fs.fsync("/s/log")
    assert fs.crash().read_bytes("/s/log") == b"header\nbatch\n"


def test_an_append_failing_with_enospc_writes_nothing() -> None:
    fs = _durable_log()
    fs.fail_next("append", errno.ENOSPC)
    with pytest.raises(OSError) as caught:
        fs.append("/s/log", b"batch\n")
    assert caught.value.errno == errno.ENOSPC
    assert fs.read_bytes("/s/log") == b"header\n"
    assert fs.crash(KEEP_ALL).read_bytes("/s/log") == b"header\n"


def test_a_write_new_failing_with_enospc_creates_no_file() -> None:
    fs = ProbedFileSystem()
    fs.makedirs("/s")
    fs.fail_next("write_new", errno.ENOSPC)
    with pytest.raises(OSError):
        fs.write_new("/s/log.tmp", b"data")
    assert not fs.exists("/s/log.tmp")


def test_fail_next_with_after_fails_the_call_after_that_many_matching_calls() -> None:
    fs = _durable_log()
    fs.fail_next("append", errno.EIO, after=2)
    fs.append("/s/log", b"1")
    fs.fsync("/s/log")
    fs.append("/s/log", b"2")
    with pytest.raises(OSError):
        fs.append("/s/log", b"3")
    fs.append("/s/log", b"4")
    assert fs.read_bytes("/s/log") == b"header\n124"


def test_a_fault_fires_once() -> None:
    fs = _durable_log()
    fs.fail_next("fsync", errno.EIO)
    with pytest.raises(OSError):
        fs.fsync("/s/log")
    fs.fsync("/s/log")


def test_a_failed_call_is_logged_with_its_errno() -> None:
    fs = _durable_log()
    fs.fail_next("append", errno.ENOSPC)
    with pytest.raises(OSError):
        fs.append("/s/log", b"abc")
    assert fs.ops[-1] == Op("append", "/s/log", 0, errno=errno.ENOSPC)


def test_a_failing_append_can_leave_a_prefix_of_its_bytes_unsynced() -> None:
    fs = _durable_log()
    fs.fail_next("append", errno.ENOSPC, written=2)
    with pytest.raises(OSError):
        fs.append("/s/log", b"batch\n")
    assert fs.read_bytes("/s/log") == b"header\nba"
    assert fs.ops[-1] == Op("append", "/s/log", 2, errno=errno.ENOSPC)
    assert _contents(fs, "/s/log") == {b"header\n", b"header\nb", b"header\nba"}


def test_only_a_failing_append_can_leave_a_written_prefix() -> None:
    with pytest.raises(ValueError):
        ProbedFileSystem().fail_next("write_new", errno.ENOSPC, written=2)


def test_a_read_can_be_made_to_fail() -> None:
    fs = _durable_log()
    fs.fail_next("read_bytes", errno.EIO)
    with pytest.raises(OSError):
        fs.read_bytes("/s/log")


def test_fail_next_of_an_unknown_op_is_refused() -> None:
    with pytest.raises(ValueError):
        ProbedFileSystem().fail_next("write", errno.EIO)


# --- crash points ---
def test_ops_log_every_mutating_call_in_order() -> None:
    fs = ProbedFileSystem()
    _publish(fs, b"abc")
    assert fs.ops == (
        Op("makedirs", "/s"),
        Op("write_new", "/s/log.tmp", 3),
        Op("fsync", "/s/log.tmp"),
        Op("link", "/s/log.tmp", target="/s/log"),
        Op("fsync_dir", "/s"),
        Op("remove", "/s/log.tmp"),
    )


def test_crash_at_op_stops_at_exactly_the_nth_mutating_call() -> None:
    fs = ProbedFileSystem()
    fs.crash_at_op(4)
    with pytest.raises(SimulatedCrash):
        _publish(fs, b"abc")
    assert fs.crashed_at == Op("link", "/s/log.tmp", target="/s/log")
    assert [op.name for op in fs.ops] == ["makedirs", "write_new", "fsync"]
    assert snapshot(fs) == {"/s": None, "/s/log.tmp": b"abc"}


def test_crash_at_op_counts_from_the_moment_it_is_armed_and_every_call_after_it_raises() -> None:
    fs = _durable_log()
    fs.crash_at_op(1)
    with pytest.raises(SimulatedCrash):
        try:
            fs.append("/s/log", b"x")
        except Exception:
            pytest.fail("a store's cleanup handler caught the power cut")
    with pytest.raises(SimulatedCrash):
        fs.read_bytes("/s/log")
    assert fs.crash(KEEP_ALL).read_bytes("/s/log") == b"header\n"


def test_reads_are_not_crash_points() -> None:
    fs = _durable_log()
    fs.crash_at_op(1)
    fs.read_bytes("/s/log")
    fs.listdir("/s")
    with pytest.raises(SimulatedCrash):
        fs.fsync("/s/log")


# --- the crash API itself ---
def test_crash_leaves_the_filesystem_it_was_taken_from_unchanged() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"unsynced")
    fs.crash()
    assert fs.read_bytes("/s/log") == b"header\nunsynced"
    assert fs.crash(KEEP_ALL).read_bytes("/s/log") == b"header\nunsynced"


def test_everything_in_a_crashed_filesystem_is_durable() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"x")
    after = fs.crash(KEEP_ALL)
    assert after.unsynced_files() == () and after.unsynced_dirs() == ()


def test_no_lock_is_held_after_a_crash() -> None:
    fs = _durable_log()
    assert fs.try_lock("/s/session.lock") is not None
    assert fs.crash(KEEP_ALL).try_lock("/s/session.lock") is not None


def test_crash_states_yield_each_outcome_once() -> None:
    fs = ProbedFileSystem()
    fs.makedirs("/s")
    sync_all(fs)
    fs.write_new("/s/new", b"abc")  # when its name is lost, its four cuts are one outcome
    snapshots = [tuple(snapshot(after).items()) for _, after in crash_states(fs)]
    assert len(snapshots) == len(set(snapshots)) == 5


def test_each_crash_state_is_what_its_plan_makes() -> None:
    fs = _durable_log(b"h")
    fs.append("/s/log", b"ab")
    fs.rename("/s/log", "/s/final")
    for plan, after in crash_states(fs):
        assert snapshot(fs.crash(plan)) == snapshot(after)


def test_cut_choices_restrict_the_cuts_enumerated() -> None:
    fs = _durable_log(b"h")
    fs.append("/s/log", b"abcdef")
    states = {a.read_bytes("/s/log") for _, a in crash_states(fs, lambda f: (0, f.pending))}
    assert states == {b"h", b"habcdef"}


def test_a_plan_naming_a_file_without_unsynced_bytes_is_refused() -> None:
    with pytest.raises(ValueError):
        _durable_log().crash(CrashPlan(cuts={"/s/log": 0}))


def test_a_plan_cutting_past_the_unsynced_bytes_is_refused() -> None:
    fs = _durable_log()
    fs.append("/s/log", b"ab")
    with pytest.raises(ValueError):
        fs.crash(CrashPlan(cuts={"/s/log": 3}))


def test_a_plan_naming_a_directory_without_unsynced_entries_is_refused() -> None:
    with pytest.raises(ValueError):
        _durable_log().crash(CrashPlan(dirs={"/s": True}))


def test_relative_paths_are_refused() -> None:
    with pytest.raises(ValueError):
        ProbedFileSystem().makedirs("s")


# --- the crash family holds the seam to the protocol (conformance/crash/points.py) ---
def _seam_enter_is(fs: PowerLossFileSystem, op: str, path: str) -> None:
    """``_enter`` comparing the operation count with the armed one by identity."""
    if fs._crashed:
        raise SimulatedCrash(f"{op} {path}")
    if op in MUTATING_OPS:
        fs._mutations += 1
        if fs._mutations is fs._crash_after:
            fs._crashed = True
            raise SimulatedCrash(f"{op} {path}")


def _seam_power_back_on(fs: PowerLossFileSystem, op: str, path: str) -> None:
    """``_enter`` failing only the armed operation: the calls after it go through."""
    if fs._crashed:
        raise SimulatedCrash(f"{op} {path}")
    if op in MUTATING_OPS:
        fs._mutations += 1
        if fs._mutations == fs._crash_after:
            raise SimulatedCrash(f"{op} {path}")


def _seam_counts_from(origin: int) -> Callable[[PowerLossFileSystem], None]:
    made = PowerLossFileSystem.__init__

    def init(fs: PowerLossFileSystem) -> None:
        made(fs)
        fs._mutations = origin

    return init


_WRITE_NEW: Final = PowerLossFileSystem.write_new


def _seam_new_file_one_byte_long(fs: PowerLossFileSystem, path: str, data: bytes) -> None:
    """``write_new`` recording a new file as durable up to -1 bytes: ``unsynced`` shows one byte
    more than was written (of a temporary file, whose name differs from replay to replay)."""
    _WRITE_NEW(fs, path, data)
    parent, name = fs._parent(path)
    created = fs._nodes[parent.current[name]]
    assert isinstance(created, _File)
    created.kept = -1


SEAM_BREAKS: Final[dict[str, tuple[type, str, object, str]]] = {
    "ops counts one before reset": (PowerLossFileSystem, "__init__", _seam_counts_from(1), "right after reset"),
    "keeping every unsynced byte refused": (
        UnsyncedFile, "cuts", lambda f: tuple(range(f.pending)), "the bounds of a byte cut"
    ),
    "a cut past the unsynced bytes accepted": (
        UnsyncedFile, "cuts", lambda f: tuple(range(f.pending + 2)), "the bounds of a byte cut"
    ),
    "a plan's cuts not checked": (PowerLossFileSystem, "_validate", lambda fs, plan: None, "the bounds of a byte cut"),
    "synced files listed": (_File, "is_unsynced", lambda f: f.kept <= len(f.data), "with no unsynced bytes"),
    "armed from reset": (
        PowerLossFileSystem, "crash_at_op", lambda fs, n: setattr(fs, "_crash_after", fs._mutations | n), "midway"
    ),
    "a new file shown one byte longer": (
        PowerLossFileSystem, "write_new", _seam_new_file_one_byte_long, "what keep none and keep all kept"
    ),
    "counts compared by identity": (PowerLossFileSystem, "_enter", _seam_enter_is, "past 300 operations"),
    "the power back on after the crash": (
        PowerLossFileSystem, "_enter", _seam_power_back_on, "the power out after it"
    ),
}  # fmt: skip


def _seam_failures() -> list[str]:
    outcome = run_crash_checks(
        InProcessSubject(ReferenceSubject()),
        capabilities=ReferenceSubject.capabilities,
        workloads=("single session",),
        every_byte=False,
    )
    return [f"{case.name}: {' '.join(case.problems)}" for case in outcome.failures]


def test_the_reference_seam_passes_the_crash_familys_checks_of_it() -> None:
    assert _seam_failures() == []


@pytest.mark.parametrize("break_", sorted(SEAM_BREAKS))
def test_a_seam_that_breaks_the_protocol_fails_the_crash_family(
    break_: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each seam break the crash family once let pass (issue 26, mutants of powerloss.py) now fails
    a point of the single-session workload, for the reason named."""
    owner, name, broken, point = SEAM_BREAKS[break_]
    monkeypatch.setattr(owner, name, broken)
    failed = _seam_failures()
    assert any(point in failure for failure in failed), failed
