"""The surface's node list, as a structure whose lookups do not scan (issue 14).

A surface is a list of seqs that grows by ``append`` and changes by a splice (a replace puts its
seq where the first shadowed node stood and drops the rest of the span). Planning a replace asks
where two nodes stand; on a plain list that is a linear search, so a long session would get
slower at every replace. :class:`SurfaceNodes` holds the same values in the same order and answers
the same questions — ``index``, ``nodes[i]``, ``nodes[a:b]``, ``len``, iteration — with an
amortised O(1) ``append`` and lookups in O(log n), a splice costing O(span · log n).

How: every node gets a *slot* when it joins, slots never move, and a replace reuses the slot of
the first node it shadows, so slot order is surface order. A Fenwick tree counts the live slots
(a node's position is the number of live slots before its slot), and a union-find over dead slots
jumps from one live slot to the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload


class SurfaceNodes(Sequence[int]):
    """A list of distinct seqs with list semantics for reading, ``append``, and the one splice the
    surface needs: ``nodes[first : last + 1] = [seq]``."""

    __slots__ = ("_found", "_next", "_seqs", "_slot_of", "_tree")

    def __init__(self, nodes: Iterable[int] = ()) -> None:
        self._seqs: list[int] = []  # the seq each slot holds (a dead slot keeps its last one)
        self._slot_of: dict[int, int] = {}  # live seq -> its slot
        self._tree: list[int] = [0]  # Fenwick tree (1-based) over "this slot is live"
        self._next: list[int] = []  # union-find: a live slot points to itself, a dead one further on
        self._found: tuple[int, int] = (-1, -1)  # the position the last ``index`` found, and its slot
        seqs = list(nodes)
        slot_of = dict(zip(seqs, range(len(seqs))))
        if len(slot_of) != len(seqs):  # a seq given twice: as the appends one by one leave it
            for seq in seqs:
                self.append(seq)
            return
        # Every slot live, built at once as the appends one by one build it (issue 24: a resumed
        # session's surface): a Fenwick node counts the slots of its own lowest bit's span.
        self._seqs, self._slot_of = seqs, slot_of
        self._next = list(range(len(seqs)))
        self._tree = [0, *(index & -index for index in range(1, len(seqs) + 1))]

    # --- reading, as a list reads ----------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._slot_of)

    def __contains__(self, seq: object) -> bool:
        return seq in self._slot_of

    def __iter__(self) -> Iterator[int]:
        slot_of = self._slot_of
        for slot, seq in enumerate(self._seqs):
            if slot_of.get(seq) == slot:
                yield seq

    def index(self, seq: object, start: int = 0, stop: int | None = None) -> int:
        """The position of ``seq`` (``ValueError`` when it is not on the surface), in O(log n). The
        position and its slot are remembered until the next splice: a replace reads the span it
        found next (issue 24: a resume's prunes asked the tree the same question three times)."""
        slot = self._slot_of.get(seq) if isinstance(seq, int) else None
        if slot is None:
            raise ValueError(f"{seq!r} is not on the surface")
        found, at = self._found
        position = found if at == slot else self._live_before(slot)
        self._found = (position, slot)
        if (start or stop is not None) and position not in range(len(self))[start:stop]:
            raise ValueError(f"{seq!r} is not in the range searched")  # a list's start/stop, negatives too
        return position

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[int, ...]: ...

    def __getitem__(self, index: int | slice) -> int | tuple[int, ...]:
        positions = range(len(self))[index]  # a list's indexing: negatives, IndexError, slices
        if isinstance(positions, int):
            return self._seqs[self._slot_at(positions)]
        if positions.step != 1:
            return tuple(self)[index]
        taken: list[int] = []
        if positions:
            slot = self._slot_at(positions.start)
            taken.append(self._seqs[slot])
            for _ in positions[1:]:
                slot = self._live_from(slot + 1)
                taken.append(self._seqs[slot])
        return tuple(taken)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"SurfaceNodes({list(self)!r})"

    # --- changing ------------------------------------------------------------------------------

    def append(self, seq: int) -> None:
        """Push a node at the end: amortised O(1) (the Fenwick tree is built as it grows)."""
        slot = len(self._seqs)
        self._seqs.append(seq)
        self._next.append(slot)
        self._slot_of[seq] = slot
        tree = self._tree
        index = slot + 1
        total = 1
        child = index - 1
        lowest = index - (index & -index)
        while child > lowest:
            total += tree[child]
            child -= child & -child
        tree.append(total)

    def __setitem__(self, index: slice, value: Iterable[int]) -> None:
        """Only the surface's splice, ``nodes[first : last + 1] = [seq]`` with
        ``0 <= first <= last < len``; anything else is refused."""
        replacement = list(value)
        if not isinstance(index, slice) or index.step not in (None, 1) or len(replacement) != 1:
            raise TypeError("SurfaceNodes supports only nodes[first : last + 1] = [seq]")
        first, stop, _ = index.indices(len(self))
        if stop <= first:
            raise TypeError("SurfaceNodes supports only a splice of one node or more")
        slot = self._slot_at(first)
        self._found = (-1, -1)  # positions after the splice move
        victim = slot
        for _ in range(stop - first - 1):
            victim = self._live_from(victim + 1)
            self._kill(victim)
        del self._slot_of[self._seqs[slot]]
        self._seqs[slot] = replacement[0]
        self._slot_of[replacement[0]] = slot

    # --- the two structures ----------------------------------------------------------------------

    def _live_before(self, slot: int) -> int:
        """How many live slots come before ``slot`` (a Fenwick prefix sum)."""
        tree = self._tree
        total = 0
        index = slot
        while index > 0:
            total += tree[index]
            index -= index & -index
        return total

    def _slot_at(self, position: int) -> int:
        """The slot of the live node at ``position`` (a Fenwick descent, unless ``index`` just found
        that position)."""
        found, slot = self._found
        if found == position:
            return slot
        tree = self._tree
        size = len(tree) - 1
        slot = 0
        remaining = position + 1
        step = 1 << (size.bit_length() - 1) if size else 0
        while step:
            candidate = slot + step
            if candidate <= size and tree[candidate] < remaining:
                slot = candidate
                remaining -= tree[candidate]
            step >>= 1
        return slot

    def _live_from(self, slot: int) -> int:
        """The first live slot at or after ``slot`` (union-find with path halving)."""
        following = self._next
        while following[slot] != slot:
            following[slot] = following[following[slot]]
            slot = following[slot]
        return slot

    def _kill(self, slot: int) -> None:
        del self._slot_of[self._seqs[slot]]
        self._next[slot] = slot + 1  # past the last slot this names the next one appended
        tree = self._tree
        index = slot + 1
        while index < len(tree):
            tree[index] -= 1
            index += index & -index
