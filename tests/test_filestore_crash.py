"""Crash injection on the file store: every point of a realistic workload, every state a power cut
there can leave, reopened and checked against SPEC-DECISIONS D3 items 1-6.

The power-loss model is :class:`reference.persistence.powerloss.PowerLossFileSystem`: a crash keeps what was
fsynced, any byte prefix of what was only written, and either fate of each directory's unsynced
entries. ``crash_at_op(n)`` stops the workload before its n-th mutating call; ``crash_states()``
then lists every distinct disk a power cut there could leave. Nothing here is sampled: each test
walks all of them. The oracle (:func:`check_reopen`) is the spec's: the reopened log must be a
prefix of what the session appended, at least what a completed flush made durable, followed by
``spec.lineage.repair.derive_closers`` of that prefix and the ``session/end-seed`` rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator

import pytest
import zstandard
from crash_reopen import (
    CWD,
    END_SEED_TIME,
    REOPENS,
    Journal,
    assistant_msg,
    check_every_crash_state,
    check_reopen,
    file_store,
    realistic_workload,
    run_workload,
    tool_result_msg,
    tool_round,
)
from event_builders import user_data

from reference.persistence.powerloss import CrashPlan, PowerLossFileSystem, SimulatedCrash
from reference.store import SessionStore
from spec.log.writers import COMPACTION_ENGINE
from tests.powerloss_harness import crash_states, snapshot

# --- the enumeration ---------------------------------------------------------------------------

MODES = {"zstd": True, "plain": False}
CHECKED: Counter[str] = Counter()  # crash states checked, per test family
REACHED: Counter[str] = Counter()  # which repair paths the enumeration reached


def workload_length(compressed: bool) -> int:
    fs, _ = run_workload(realistic_workload, compressed)
    return fs.mutation_count


OP_COUNTS = {mode: workload_length(compressed) for mode, compressed in MODES.items()}


@pytest.fixture(scope="module", autouse=True)
def report_crash_points() -> Iterator[None]:
    yield
    total = sum(CHECKED.values())
    print(
        f"\ncrash points (mutating calls + the finished run) per mode: { {m: n + 1 for m, n in OP_COUNTS.items()} }"
        f"\ncrash states checked against D3: {total} ({dict(CHECKED)})"
        f"\nsession reopens run for the workload and last-frame states: {REOPENS['distinct']}"
        f"\nrepair paths reached: {dict(REACHED)}"
    )


@pytest.mark.parametrize(
    ("mode", "crash_at"),
    [(mode, n) for mode, count in OP_COUNTS.items() for n in range(1, count + 2)],
)
def test_a_crash_before_any_mutating_call_of_the_workload_reopens_per_d3(mode: str, crash_at: int) -> None:
    """``crash_at`` = op count + 1 is the run that finished: its crash states are the last point."""
    compressed = MODES[mode]
    fs, journal = run_workload(realistic_workload, compressed, crash_at)
    assert (fs.crashed_at is None) == (crash_at > OP_COUNTS[mode])
    CHECKED[f"workload-{mode}"] += check_every_crash_state(fs, journal, compressed, REACHED)


def test_the_workload_is_long_enough_to_matter() -> None:
    """A guard on the test itself: the workload publishes two files, appends several frames,
    and ends with something buffered that never reaches the disk."""
    fs, journal = run_workload(realistic_workload, True)
    names = Counter(op.name for op in fs.ops)
    assert names["link"] == 2 and names["append"] >= 4
    main = journal.store.get("main")
    assert main is not None and journal.flushed["main"] == len(main.events) - 1


# --- every byte of the last unsynced frame of a real session --------------------------------------

BIG_OUTPUT_LINES = 1_300  # lines per tool output: two of them make ~140 kB, just over one zstd block
SMALL_OUTPUT_LINES = 3


def listing(prefix: str, lines: int) -> str:
    """Tool output that compresses very well but not to nothing: a build log that repeats itself,
    with a counter that moves every hundred lines."""
    return "\n".join(
        f"{prefix}: compiled batch {i // 100:03d} of module tree, no warnings" for i in range(lines)
    )


def session_with_tool_output(output_lines: int) -> Callable[[Journal], None]:
    """A finished first turn, then a second turn that opens a compaction and whose last batch holds
    two tool results of ``output_lines`` lines each. With :data:`BIG_OUTPUT_LINES` zstd writes that
    batch as two blocks, so a cut after the first block recovers the lines it holds (D3.4)."""

    def workload(journal: Journal) -> None:
        session = journal.store.create("real", meta={"cwd": CWD, "createdAt": 1})
        session.append("turn/start", {"turn": 1})
        session.append("user/message", user_data("u1", "List the sources."), "append")
        tool_round(session, 1, 1, "c1", "src/a.py")
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        journal.flush(session)
        session.append("turn/start", {"turn": 2})
        session.append("compaction/start", {"compactionId": "k2", "turn": 2}, writer=COMPACTION_ENGINE)
        session.append("user/message", user_data("u2", "Now all of them."), "append")
        journal.flush(session)
        session.append("step/start", {"turn": 2, "step": 1})
        session.append("assistant/message", assistant_msg("a2-1", 2, 1, "Listing.", ("c2", "c3")), "append")
        session.append("tool/call", {"turn": 2, "step": 1, "callId": "c2", "name": "list"})
        session.append("tool/result", tool_result_msg("c2", 2, 1, listing("src", output_lines)), "append")
        session.append("tool/call", {"turn": 2, "step": 1, "callId": "c3", "name": "list"})
        session.append("tool/result", tool_result_msg("c3", 2, 1, listing("lib", output_lines)), "append")
        session.append("step/end", {"turn": 2, "step": 1})
        journal.flush(session)

    return workload


LAST_FRAME_SESSIONS = {
    "zstd": session_with_tool_output(BIG_OUTPUT_LINES),
    "plain": session_with_tool_output(SMALL_OUTPUT_LINES),
}


def crash_at_last_fsync(
    workload: Callable[[Journal], None], compressed: bool
) -> tuple[PowerLossFileSystem, Journal]:
    """The workload stopped just before its last fsync: the last frame is written, not durable."""
    fs, _ = run_workload(workload, compressed)
    assert fs.ops[-1].name == "fsync" and fs.ops[-2].name == "append"
    return run_workload(workload, compressed, crash_at=fs.mutation_count)


@pytest.mark.parametrize("mode", MODES)
def test_every_byte_cut_of_the_last_unsynced_frame_reopens_per_d3(mode: str) -> None:
    compressed = MODES[mode]
    fs, journal = crash_at_last_fsync(LAST_FRAME_SESSIONS[mode], compressed)
    (unsynced,) = fs.unsynced_files()
    cuts = unsynced.pending + 1
    reached: Counter[str] = Counter()
    checked = check_every_crash_state(fs, journal, compressed, reached)
    namespaces = 2 ** len(fs.unsynced_dirs())
    assert checked == cuts * namespaces
    frame = snapshot(fs)[unsynced.path] or b""
    frame = frame[unsynced.kept :]
    clean_cuts = 2 if compressed else 1 + frame.count(b"\n")  # nothing, the whole frame, line ends
    assert reached["torn"] == (cuts - clean_cuts) * namespaces
    assert reached["compaction closed"] == checked
    if compressed:
        assert reached["partly recovered"] > 0, "no cut recovered some but not all lines of the torn frame"
    CHECKED[f"last-frame-{mode}"] += checked


def test_the_big_last_frame_spans_two_zstd_blocks_and_stays_small() -> None:
    """A guard on the test above: the frame really has more than one block (so a torn frame can
    recover some of its lines), yet is small enough to try every byte."""
    fs, _ = crash_at_last_fsync(LAST_FRAME_SESSIONS["zstd"], True)
    (unsynced,) = fs.unsynced_files()
    assert unsynced.pending < 5_000
    frame = snapshot(fs)[unsynced.path] or b""
    frame = frame[unsynced.kept :]
    assert len(zstandard.ZstdDecompressor().decompress(frame)) > 128 * 1024


# --- a crash while the reopen repairs the log ---------------------------------------------------


def short_open_turn(journal: Journal) -> None:
    """A short session left inside a turn with a started call and an open compaction."""
    session = journal.store.create("main", meta={"cwd": CWD, "createdAt": 1})
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_data("u1", "Read a.txt."), "append")
    journal.flush(session)
    session.append("compaction/start", {"compactionId": "k1", "turn": 1}, writer=COMPACTION_ENGINE)
    tool_round(session, 1, 1, "c1", "", answered=False)
    journal.flush(session)


def torn_state(mode: str) -> tuple[PowerLossFileSystem, Journal]:
    """A session whose last frame lost its final byte: the reopen must cut it (a zstd frame
    missing its checksum gives its lines back; a plain line missing its newline is dropped),
    rewrite the file and append closers."""
    compressed = MODES[mode]
    fs, journal = crash_at_last_fsync(short_open_turn, compressed)
    (unsynced,) = fs.unsynced_files()
    return fs.crash(CrashPlan(cuts={unsynced.path: unsynced.pending - 1})), journal


@pytest.mark.parametrize("mode", MODES)
def test_a_crash_during_the_repair_of_a_torn_log_still_reopens_per_d3(mode: str) -> None:
    compressed = MODES[mode]
    torn, journal = torn_state(mode)
    appended, headers = journal.appended(), journal.headers()

    def resume(fs: PowerLossFileSystem) -> None:
        SessionStore(file_store(fs, compressed), clock=lambda: END_SEED_TIME).resume("main")

    probe = torn.crash()
    resume(probe)
    repair_ops = probe.mutation_count
    assert repair_ops >= 4  # temp file, fsync, rename, directory fsync
    checked = 0
    for crash_at in range(1, repair_ops + 1):
        fs = torn.crash()
        fs.crash_at_op(crash_at)
        with pytest.raises(SimulatedCrash):
            resume(fs)
        for plan, after in crash_states(fs):
            checked += 1
            try:
                check_reopen(
                    after, compressed, "main", appended["main"], journal.flushed["main"], headers["main"]
                )
            except AssertionError as failure:
                raise AssertionError(f"repair crash at op {crash_at}, plan {plan}: {failure}") from failure
    CHECKED[f"repair-{mode}"] += checked
