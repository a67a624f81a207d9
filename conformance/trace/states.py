"""The two persistence models' crash states: every on-disk state a crash may leave after the calls
a subject made (conformance/CRASH-STATES.md explains both models and the sampling rule, with
examples). The calls are replayed on a :class:`~conformance.trace.persistence.Disk`, which keeps
what is durable and what is pending; from that:

- **strict** (in order, like ext4 ``data=journal``): a crash after any prefix of the calls; the
  write in flight may be torn at a sampled byte. Fsync changes nothing here.
- **weak** (like ext4 ``data=ordered`` without the ordering an application must not rely on): a
  crash after any prefix; then each file keeps any prefix of its pending data calls (the last one
  possibly torn at a sampled byte) and each directory any prefix of its pending entry changes,
  independently of each other. Bounded as documented: every item takes each of its cuts while all
  the others keep nothing, and again while all the others keep everything.

Everything here is pure: no I/O, no clock, randomness only from seeded generators.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from conformance.trace.persistence import Call, Cut, Disk, Item, Tree, Write
from spec.codes import SpecError
from spec.format.framing import ZSTD_MAGIC, measure_zstd_frame

MODELS: Final = ("strict", "weak")
Model: TypeAlias = Literal["strict", "weak"]


# --- byte cuts ---------------------------------------------------------------------------------

RANDOM_CUTS: Final = {"ci": 2, "thorough": 8}  # seeded byte cuts per unsynced write, besides the fixed ones


def sample_byte_cuts(data: bytes, seed: str, random_cuts: int) -> tuple[int, ...]:
    """The bytes of a write a torn crash keeps, strictly between nothing and everything: the first
    byte, all but the last, half; one before, at and after every boundary inside the write (the end
    of each zstd frame when the data starts with the zstd magic, else the end of each line); and
    ``random_cuts`` more drawn from a generator seeded with ``seed``."""
    size = len(data)
    if size < 2:
        return ()
    cuts = {1, size - 1, size // 2}
    for boundary in find_boundaries(data):
        cuts.update((boundary - 1, boundary, boundary + 1))
    generator = random.Random(seed)
    cuts.update(generator.randrange(1, size) for _ in range(random_cuts))
    return tuple(sorted(cut for cut in cuts if 0 < cut < size))


def find_boundaries(data: bytes) -> tuple[int, ...]:
    """Offsets inside ``data`` where a unit ends: zstd frames (read with the spec's frame
    measure) when ``data`` starts with the zstd magic, else lines (just past each ``\\n``)."""
    if data[:4] == ZSTD_MAGIC.to_bytes(4, "little"):
        ends: list[int] = []
        start = 0
        while start < len(data):
            try:
                frame = measure_zstd_frame(data, start)
            except SpecError:
                break
            if frame is None:
                break
            start += frame.length
            ends.append(start)
        return tuple(end for end in ends if end < len(data))
    return tuple(index + 1 for index, byte in enumerate(data[:-1]) if byte == 0x0A)


# --- the enumerations ----------------------------------------------------------------------------


NOTHING_UNSYNCED: Final = "nothing unsynced"  # what a weak state keeps when every pending call is lost


@dataclass(frozen=True)
class CrashState:
    """One state a model allows: the crash comes after the first ``point`` calls; ``survived``
    says what of the pending calls it kept; ``tree`` is what is on disk."""

    model: Model
    point: int
    survived: str
    tree: Tree


Sampler: TypeAlias = Callable[[int, Write], Sequence[int]]  # (call index, write) -> byte cuts


def seeded_sampler(seed: int, random_cuts: int) -> Sampler:
    """:func:`sample_byte_cuts` with a seed per call, so a state can be rebuilt from its name."""
    return lambda index, write: sample_byte_cuts(write.data, f"{seed}:{index}", random_cuts)


def enumerate_strict(initial: Tree, calls: Sequence[Call], sample: Sampler) -> Iterator[CrashState]:
    """Every prefix of the calls, and each write torn at its sampled byte cuts with every call
    before it done."""
    disk = Disk(initial)
    yield CrashState("strict", 0, "nothing of the trace", disk.current())
    for index, call in enumerate(calls):
        disk.apply(call.op)
        if isinstance(call.op, Write):
            item: Item = ("data", call.op.inode)
            last = len(disk.pending_data[call.op.inode]) - 1
            for torn in sample(index, call.op):
                survived = (
                    f"calls 1-{index} whole, call {index + 1} torn after {torn} of {len(call.op.data)} bytes"
                )
                yield CrashState(
                    "strict", index, survived, disk.crash({item: Cut(last, torn)}, rest_full=True)
                )
        yield CrashState("strict", index + 1, f"calls 1-{index + 1} whole", disk.current())


def enumerate_weak(initial: Tree, calls: Sequence[Call], sample: Sampler) -> Iterator[CrashState]:
    """At every prefix: nothing pending kept; everything kept; and each pending item at each of
    its cuts while the others keep nothing, then while they keep everything."""
    disk = Disk(initial)
    write_index = {id(call.op): index for index, call in enumerate(calls) if isinstance(call.op, Write)}

    def sample_pending(write: Write) -> Sequence[int]:
        return sample(write_index.get(id(write), -1), write)

    for point in range(len(calls) + 1):
        if point:
            disk.apply(calls[point - 1].op)
        yield CrashState("weak", point, NOTHING_UNSYNCED, disk.crash({}, rest_full=False))
        yield CrashState("weak", point, "everything unsynced", disk.crash({}, rest_full=True))
        for item in disk.unsynced():
            full = disk.full_cut(item)
            where = _describe_item(disk, item)
            for cut in disk.cuts(item, sample_pending):
                what = f"{cut.calls} of {full.calls} unsynced {where}" + (
                    f", then {cut.torn} bytes of the next" if cut.torn is not None else ""
                )
                if cut != Cut(0):
                    yield CrashState(
                        "weak",
                        point,
                        f"{what}, nothing else unsynced",
                        disk.crash({item: cut}, rest_full=False),
                    )
                if cut != full:
                    yield CrashState(
                        "weak",
                        point,
                        f"{what}, everything else unsynced",
                        disk.crash({item: cut}, rest_full=True),
                    )


def enumerate_states(
    model: Model, initial: Tree, calls: Sequence[Call], sample: Sampler
) -> Iterator[CrashState]:
    return (enumerate_strict if model == "strict" else enumerate_weak)(initial, calls, sample)


def _describe_item(disk: Disk, item: Item) -> str:
    kind, inode = item
    if kind == "entries":
        return f"entry changes of {disk.path_of(inode)}/"
    return f"data calls of {disk.path_of(inode)}"


__all__ = [
    "MODELS",
    "NOTHING_UNSYNCED",
    "RANDOM_CUTS",
    "CrashState",
    "Model",
    "Sampler",
    "enumerate_states",
    "enumerate_strict",
    "enumerate_weak",
    "find_boundaries",
    "sample_byte_cuts",
    "seeded_sampler",
]
