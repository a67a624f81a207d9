"""The persistence models' crash states on hand-made traces are exactly the documented set
(conformance/CRASH-STATES.md)."""

from __future__ import annotations

import zstandard

from conformance.trace.persistence import (
    ROOT,
    Call,
    Create,
    Entry,
    Rename,
    Sync,
    Tree,
    Truncate,
    Write,
)
from conformance.trace.states import (
    enumerate_strict,
    enumerate_weak,
    find_boundaries,
    sample_byte_cuts,
    seeded_sampler,
)

NO_RANDOM = seeded_sampler(0, 0)  # only the fixed cuts: 1, n-1, n//2, and around each boundary


def files(tree: Tree) -> dict[str, bytes]:
    return tree.files()


def one_file_trace() -> list[Call]:
    """Create ``f``, write five bytes with a newline in them, fsync ``f``, fsync the root."""
    return [
        Call(Create(ROOT, "f", 1), "openat(f, O_CREAT)"),
        Call(Write(1, 0, b"ab\ncd"), "write(f, 5 bytes at 0)"),
        Call(Sync(1), "fsync(f)"),
        Call(Sync(ROOT), "fsync(./)"),
    ]


def test_the_byte_cuts_of_a_write_are_its_ends_its_middle_and_around_each_line_end() -> None:
    assert sample_byte_cuts(b"ab\ncd", "seed", 0) == (1, 2, 3, 4)
    assert sample_byte_cuts(b"abcdefghij", "seed", 0) == (1, 5, 9)
    assert sample_byte_cuts(b"x", "seed", 3) == ()


def test_seeded_byte_cuts_are_the_same_for_the_same_seed_and_stay_inside_the_write() -> None:
    data = bytes(range(200))
    first = sample_byte_cuts(data, "7:3", 8)
    assert first == sample_byte_cuts(data, "7:3", 8)
    assert all(0 < cut < len(data) for cut in first)
    assert set(sample_byte_cuts(data, "7:3", 0)) < set(first)


def test_the_boundaries_of_zstd_data_are_its_frame_ends_not_its_newline_bytes() -> None:
    one = zstandard.ZstdCompressor(write_checksum=True).compress(b'{"type":"session"}\n')
    two = zstandard.ZstdCompressor(write_checksum=True).compress(b"\n" * 50)
    assert find_boundaries(one + two) == (len(one),)
    assert find_boundaries(b"a\nb\nc") == (2, 4)


def test_the_strict_model_is_every_prefix_and_each_write_torn_at_its_cuts() -> None:
    states = list(enumerate_strict(Tree(()), one_file_trace(), NO_RANDOM))
    assert [(state.point, files(state.tree)) for state in states] == [
        (0, {}),
        (1, {"f": b""}),
        (1, {"f": b"a"}),
        (1, {"f": b"ab"}),
        (1, {"f": b"ab\n"}),
        (1, {"f": b"ab\nc"}),
        (2, {"f": b"ab\ncd"}),
        (3, {"f": b"ab\ncd"}),
        (4, {"f": b"ab\ncd"}),
    ]


def test_the_weak_model_varies_each_unsynced_item_against_both_extremes() -> None:
    states = [
        (state.point, files(state.tree)) for state in enumerate_weak(Tree(()), one_file_trace(), NO_RANDOM)
    ]
    empty: dict[str, bytes] = {}
    blank = {"f": b""}
    whole = {"f": b"ab\ncd"}
    expected = [
        (0, empty),
        (0, empty),
        # after the create: the root's new entry may be lost
        (1, empty),
        (1, blank),
        (1, empty),  # the entry lost, nothing else pending
        (1, blank),  # the entry kept, nothing else pending
        # after the write: the entry and f's bytes, each cut while the other is at an extreme
        (2, empty),
        (2, whole),
        (2, empty),  # entry lost, f's bytes kept
        (2, blank),  # entry kept, f's bytes lost
        (2, blank),  # f's write lost, the entry kept
        (2, empty),
        (2, {"f": b"a"}),
        (2, empty),
        (2, {"f": b"ab"}),
        (2, empty),
        (2, {"f": b"ab\n"}),
        (2, empty),
        (2, {"f": b"ab\nc"}),
        (2, empty),  # f's write whole, the entry lost
        # after fsync(f): only the entry is pending
        (3, empty),
        (3, whole),
        (3, empty),
        (3, whole),
        # after fsync(./): nothing is pending
        (4, whole),
        (4, whole),
    ]
    assert states == expected


def test_every_strict_state_is_also_a_weak_state() -> None:
    strict = {state.tree.key() for state in enumerate_strict(Tree(()), one_file_trace(), NO_RANDOM)}
    weak = {state.tree.key() for state in enumerate_weak(Tree(()), one_file_trace(), NO_RANDOM)}
    assert strict <= weak


def test_a_rename_is_not_durable_until_its_directory_is_synced() -> None:
    initial = Tree((Entry("log", False, b"old", 1),))
    calls = [
        Call(Create(ROOT, "tmp", 2), "openat(tmp, O_CREAT)"),
        Call(Write(2, 0, b"new"), "write(tmp)"),
        Call(Sync(2), "fsync(tmp)"),
        Call(Rename(ROOT, "tmp", ROOT, "log"), "rename(tmp, log)"),
        Call(Sync(ROOT), "fsync(./)"),
    ]
    at_rename = {
        Tree(state.tree.entries).key(): files(state.tree)
        for state in enumerate_weak(initial, calls, NO_RANDOM)
        if state.point == 4
    }
    assert sorted(at_rename.values(), key=repr) == sorted(
        [{"log": b"old"}, {"log": b"old", "tmp": b"new"}, {"log": b"new"}], key=repr
    )
    after_sync = [
        files(state.tree) for state in enumerate_weak(initial, calls, NO_RANDOM) if state.point == 5
    ]
    assert after_sync == [{"log": b"new"}, {"log": b"new"}]


def test_an_unsynced_truncate_may_be_lost_whole() -> None:
    initial = Tree((Entry("log", False, b"abcdef", 1),))
    calls = [Call(Truncate(1, 3), "ftruncate(log, 3)"), Call(Sync(1), "fsync(log)")]
    pending = {
        files(state.tree)["log"] for state in enumerate_weak(initial, calls, NO_RANDOM) if state.point == 1
    }
    assert pending == {b"abcdef", b"abc"}
    synced = {
        files(state.tree)["log"] for state in enumerate_weak(initial, calls, NO_RANDOM) if state.point == 2
    }
    assert synced == {b"abc"}


def test_an_fsync_of_a_file_does_not_make_its_name_durable_but_keeps_its_bytes_for_any_name() -> None:
    calls = one_file_trace()[:3]
    after_fsync = [
        files(state.tree) for state in enumerate_weak(Tree(()), calls, NO_RANDOM) if state.point == 3
    ]
    assert {} in after_fsync
    assert all(tree in ({}, {"f": b"ab\ncd"}) for tree in after_fsync)


def test_hard_links_share_one_file_in_a_crash_state_and_in_its_key() -> None:
    linked = Tree((Entry("a", False, b"x", 1), Entry("b", False, b"x", 1)))
    copied = Tree((Entry("a", False, b"x", 1), Entry("b", False, b"x", 2)))
    assert linked.key() != copied.key()
