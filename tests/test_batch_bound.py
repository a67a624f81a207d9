"""The bounded loss window: a batch policy writes and fsyncs buffered appends without a flush, so a
crash never loses more than the bound (seed 002: "append 是分批 fsync 的，而 flush 是一个真正的持久性屏障";
spec.projections.durability).

The bound, as these tests state and check it: under a policy of ``D`` ms and ``B`` bytes, after a
power cut at any point, the events lost among those whose append had returned are fewer than ``B``
bytes of JSONL text in all, and each of them is less than ``D`` ms older (in the events' own
``time``) than the newest event whose append had returned.
"""

from __future__ import annotations

import errno
import itertools
from collections.abc import Callable, Iterator, Sequence

import pytest
from event_builders import user_data
from refusals import refusal

from reference.persistence.filestore import FileStore
from reference.persistence.memory import MemoryPersistence
from reference.persistence.powerloss import PowerLossFileSystem, SimulatedCrash, UnsyncedFile
from reference.store import SessionStore
from spec.codes import Code, SpecError
from spec.format.framing import encode_lines
from spec.log.events import Event
from spec.log.json import FrozenDict, int_field, is_safe_integer
from spec.projections.durability import (
    DEFAULT_BATCH_MAX_BYTES,
    DEFAULT_BATCH_MAX_DELAY_MS,
    NOTHING_PENDING,
    BatchPolicy,
    apply_pending_events,
    decode_batch_policy,
    derive_event_bytes,
    is_batch_due,
)
from tests.powerloss_harness import ProbedFileSystem, crash_states

ROOT = "/data"
POLICY = BatchPolicy(max_delay_ms=100, max_bytes=1_500)  # ms, bytes
# ms between appends: mostly small steps, with pauses past the delay bound now and then
STEPS = (3, 9, 1, 30, 2, 140, 5, 5, 70, 1, 1, 1, 40, 200, 8, 60, 4, 2, 95, 6)


def event(seq: int, time: int, text: str = "x") -> FrozenDict:
    return FrozenDict({"type": "note", "seq": seq, "time": time, "data": {"text": text}})


def is_within_loss_bound(policy: BatchPolicy, lost: Sequence[Event], newest_time: int) -> bool:
    """The bound these tests state (the module's docstring): what a crash lost of the appends that
    had returned is fewer than ``max_bytes`` bytes in all (each event's bytes as
    :func:`derive_event_bytes` counts them), and each event is less than ``max_delay_ms`` older
    than the newest appended event's time. It is what :func:`is_batch_due`, checked on each append,
    must give; no answer of a subject depends on it, so it lives here, not in ``spec/``."""
    if policy.max_bytes is not None and sum(derive_event_bytes(event) for event in lost) >= policy.max_bytes:
        return False
    if policy.max_delay_ms is None:
        return True
    for event in lost:
        time = event.get("time")
        if is_safe_integer(time) and newest_time - int(time) >= policy.max_delay_ms:
            return False
    return True


# --- the rule -------------------------------------------------------------------------------------


def test_the_defaults_are_200_ms_and_1_mib() -> None:
    assert (DEFAULT_BATCH_MAX_DELAY_MS, DEFAULT_BATCH_MAX_BYTES) == (200, 1_048_576)
    assert BatchPolicy() == BatchPolicy(200, 1_048_576)


def test_a_batch_is_due_once_its_oldest_event_is_the_delay_older_than_the_newest() -> None:
    policy = BatchPolicy(max_delay_ms=100, max_bytes=None)
    pending = apply_pending_events(policy, NOTHING_PENDING, [event(0, 1_000)])
    assert not is_batch_due(policy, pending, 1_099)
    assert is_batch_due(policy, pending, 1_100)


def test_the_earliest_time_counts_even_when_the_clock_went_back() -> None:
    policy = BatchPolicy(max_delay_ms=100, max_bytes=None)
    pending = apply_pending_events(policy, NOTHING_PENDING, [event(0, 1_000), event(1, 900)])
    assert pending.earliest_time == 900 and is_batch_due(policy, pending, 1_000)


def test_a_batch_is_due_once_its_jsonl_bytes_reach_the_byte_bound() -> None:
    one = event(0, 1, "a" * 50)
    policy = BatchPolicy(max_delay_ms=None, max_bytes=2 * derive_event_bytes(one))
    first = apply_pending_events(policy, NOTHING_PENDING, [one])
    assert not is_batch_due(policy, first, 1)
    assert is_batch_due(policy, apply_pending_events(policy, first, [event(1, 1, "a" * 50)]), 1)


def test_nothing_buffered_is_never_due_and_a_delay_of_0_writes_every_append() -> None:
    assert not is_batch_due(BatchPolicy(0, 0), NOTHING_PENDING, 5)
    assert is_batch_due(
        BatchPolicy(0, None), apply_pending_events(BatchPolicy(0, None), NOTHING_PENDING, [event(0, 5)]), 5
    )


def test_an_event_costs_its_utf8_jsonl_line() -> None:
    assert (
        derive_event_bytes(event(0, 1, "é"))
        == len('{"type":"note","seq":0,"time":1,"data":{"text":"é"}}'.encode()) + 1
    )


@pytest.mark.parametrize(
    ("text", "characters", "units", "size"),
    [("\u20ac" * 3, 3, 3, 9), ("\U0001f600" * 3, 3, 6, 12), ("e\u0301", 2, 2, 3)],
    ids=["multi-byte", "astral", "combining"],
)
def test_the_byte_bound_counts_utf8_bytes_never_characters_or_utf16_units(
    text: str, characters: int, units: int, size: int
) -> None:
    """A character outside ASCII costs its UTF-8 bytes: 3 for "€", 4 for an astral character (one
    code point, two UTF-16 units); a line exactly at the bound is due, one byte short is not."""
    line = derive_event_bytes(event(0, 1, text))
    ascii_part = derive_event_bytes(event(0, 1, ""))
    assert (len(text), len(text.encode("utf-16-le")) // 2, line - ascii_part) == (characters, units, size)
    pending = apply_pending_events(BatchPolicy(None, line), NOTHING_PENDING, [event(0, 1, text)])
    assert is_batch_due(BatchPolicy(None, line), pending, 1)
    assert not is_batch_due(BatchPolicy(None, line + 1), pending, 1)


def test_lines_a_writer_already_encoded_count_as_the_events_would() -> None:
    """A writer that encoded its events (one line each) passes the lines: the same buffer as when
    the rule encodes them itself; lines that are not one per event are a caller's bug."""
    events = [event(0, 5, "é" * 40), event(1, 3, "x")]
    lines = [encode_lines((one,)) for one in events]
    policy = BatchPolicy(100, 1_000)
    assert apply_pending_events(policy, NOTHING_PENDING, events, lines) == apply_pending_events(
        policy, NOTHING_PENDING, events
    )
    assert apply_pending_events(policy, NOTHING_PENDING, events, lines).bytes == sum(map(len, lines))
    with pytest.raises(ValueError):
        apply_pending_events(policy, NOTHING_PENDING, events, lines[:1])


@pytest.mark.parametrize(("delay", "size"), [(-1, None), (None, 1.5), ("1", None), (True, None)])
def test_a_bound_that_is_not_a_non_negative_integer_is_refused(delay: object, size: object) -> None:
    assert refusal(lambda: decode_batch_policy(delay, size)).code == Code.BATCH_POLICY_INVALID


def test_no_bound_given_is_no_policy_and_one_bound_leaves_the_other_open() -> None:
    assert decode_batch_policy(None, None) is None
    assert decode_batch_policy(50, None) == BatchPolicy(max_delay_ms=50, max_bytes=None)


def test_the_loss_bound_refuses_an_old_event_or_too_many_bytes() -> None:
    policy = BatchPolicy(max_delay_ms=100, max_bytes=1_000)
    assert is_within_loss_bound(policy, [event(5, 950)], 1_000)
    assert not is_within_loss_bound(policy, [event(5, 900)], 1_000)
    assert not is_within_loss_bound(policy, [event(n, 1_000, "a" * 300) for n in range(3)], 1_000)


# --- the handles ----------------------------------------------------------------------------------


def clock_from(steps: tuple[int, ...], start: int = 10_000) -> Callable[[], int]:
    times = itertools.accumulate(itertools.cycle(steps), initial=start)
    return lambda: next(times)


def test_an_append_past_the_delay_makes_the_memory_backend_durable_without_a_flush() -> None:
    persistence = MemoryPersistence(batch=BatchPolicy(max_delay_ms=100, max_bytes=None))
    times = iter([0, 1_000, 1_050, 1_100])
    session = SessionStore(persistence, clock=lambda: next(times)).create("s")
    session.append("note", {"n": 1})
    assert persistence.stat("s") is None
    session.append("note", {"n": 2})
    assert persistence.stat("s") is None
    session.append("note", {"n": 3})
    assert [e["data"] for e in persistence.read("s").events] == [{"n": 1}, {"n": 2}, {"n": 3}]


def test_without_a_policy_only_flush_writes() -> None:
    persistence = MemoryPersistence(batch=None)
    times = iter(range(0, 100_000, 10_000))
    session = SessionStore(persistence, clock=lambda: next(times)).create("s")
    for n in range(5):
        session.append("note", {"n": n})
    assert persistence.stat("s") is None
    session.flush()
    assert len(persistence.read("s").events) == 5


def test_a_failed_automatic_write_keeps_the_batch_and_flush_reports_it() -> None:
    fs = ProbedFileSystem()
    store = SessionStore(FileStore(ROOT, fs=fs, batch=BatchPolicy(0, None)), clock=clock_from((1,)))
    session = store.create("s", meta={"cwd": "/w"})
    session.append("note", {"n": 0})  # published by the policy
    fs.fail_next("fsync", errno.EIO)
    session.append("note", {"n": 1})  # the automatic write fails quietly
    handle = store._handles["s"]
    assert handle.deferred_failure is not None and handle.deferred_failure.code == Code.STORAGE_IO
    assert [e["data"] for e in FileStore(ROOT, fs=fs).read("s").events] == [{"n": 0}]
    fs.fail_next("fsync", errno.EIO)
    with pytest.raises(SpecError) as caught:
        session.flush()  # the storage still fails: the barrier reports it
    assert caught.value.code == Code.STORAGE_IO
    session.flush()
    assert [e["data"] for e in FileStore(ROOT, fs=fs.crash()).read("s").events] == [{"n": 0}, {"n": 1}]


@pytest.mark.parametrize("fs_op", ["write_new", "fsync"])
def test_a_failed_automatic_write_keeps_the_batch_s_age_so_the_next_append_retries_it(fs_op: str) -> None:
    """The batch a failed write keeps is as old as its oldest event, not aged afresh from the
    failure: the next append is due at once and writes every buffered event."""
    fs = ProbedFileSystem()
    now = [0]
    store = SessionStore(FileStore(ROOT, fs=fs, batch=BatchPolicy(100, None)), clock=lambda: now[0])
    session = store.create("s", meta={"cwd": "/w"})
    session.append("note", {"n": 0})  # t=0
    if fs_op == "fsync":
        session.flush()
    now[0] = 10
    session.append("note", {"n": 1})  # the batch begins (or goes on) here
    fs.fail_next(fs_op, errno.EIO)
    now[0] = 110
    session.append("note", {"n": 2})  # due, and its write fails quietly
    assert store._handles["s"].deferred_failure is not None
    now[0] = 120
    session.append("note", {"n": 3})  # still due: 100 ms or more after the batch began
    kept = FileStore(ROOT, fs=fs.crash()).read("s").events
    assert [e["data"]["n"] for e in kept] == [0, 1, 2, 3]


# --- the proof under power loss, at every crash point ----------------------------------------------


def workload(
    fs: PowerLossFileSystem, compressed: bool, policy: BatchPolicy | None, returned: list[Event]
) -> None:
    """One session on ``fs`` that never flushes: 60 appends of uneven size at uneven times; each
    event whose append returned is added to ``returned``."""
    tokens = itertools.count()
    store = SessionStore(
        FileStore(ROOT, fs=fs, compressed=compressed, temp_token=lambda: f"t{next(tokens)}", batch=policy),
        clock=clock_from(STEPS),
    )
    session = store.create("s", meta={"cwd": "/work"})
    for n in range(60):
        text = "word " * (n % 7) * 20
        returned.append(session.append("user/message", user_data(f"u{n}", text or "hi"), "append"))


def few_cuts(unsynced: UnsyncedFile) -> Iterator[int | None]:
    """The cuts that matter for what survives: lost whole, none, one byte, half, all but one, all."""
    if unsynced.can_revert:
        yield None
    yield from sorted({0, 1, unsynced.pending // 2, max(unsynced.pending - 1, 0), unsynced.pending})


def surviving(after: PowerLossFileSystem) -> tuple[Event, ...]:
    try:
        return FileStore(ROOT, fs=after).read("s").events
    except SpecError as error:
        assert error.code == Code.SESSION_NOT_FOUND
        return ()


def crash_outcomes(
    compressed: bool, policy: BatchPolicy | None
) -> Iterator[tuple[int, list[Event], tuple[Event, ...], tuple[Event, ...]]]:
    """For every mutating call of the workload (and its end): the power cut before that call, then
    every crash state a few cuts per unsynced file give; yields the crash point, the events whose
    append had returned, every event the workload appends when it runs whole, and what survived."""
    probe: list[Event] = []
    probe_fs = ProbedFileSystem()
    workload(probe_fs, compressed, policy, probe)
    for n in range(1, probe_fs.mutation_count + 2):
        fs = ProbedFileSystem()
        fs.crash_at_op(n)
        returned: list[Event] = []
        try:
            workload(fs, compressed, policy, returned)
        except SimulatedCrash:
            pass
        for _, after in crash_states(fs, few_cuts):
            yield n, returned, tuple(probe), surviving(after)


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
def test_no_more_than_the_bound_is_ever_lost_at_every_crash_point(compressed: bool) -> None:
    points = set()
    for n, returned, whole, kept in crash_outcomes(compressed, POLICY):
        points.add(n)
        assert kept == whole[: len(kept)], f"crash point {n}: what survived is not a prefix of the log"
        lost = returned[len(kept) :]
        if returned:
            assert is_within_loss_bound(POLICY, lost, int_field(returned[-1], "time")), (
                f"crash point {n}: {len(lost)} returned appends lost, beyond {POLICY}"
            )
    assert len(points) > 40, "the workload writes often enough to have many crash points"


def test_without_a_policy_the_same_workload_loses_more_than_the_bound() -> None:
    """The control: the proof above can fail. Without a policy nothing reaches the disk, so a cut
    at the end loses every append."""
    returned: list[Event] = []
    fs = ProbedFileSystem()
    workload(fs, True, None, returned)
    assert surviving(fs.crash()) == ()
    assert not is_within_loss_bound(POLICY, returned, int_field(returned[-1], "time"))
