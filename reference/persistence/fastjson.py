"""Reading many stored lines fast, with exactly the values the spec's reader gives (issue 14).

The spec's reader (:func:`spec.format.json_text.decode_json_text`) calls back into Python for
every number to give JavaScript's semantics (D5), builds a decoder per line and leaves the
freezing (D6) to a second pass. Here a batch of lines is parsed by a fast parser — ``orjson``
when it is installed, else one reusable standard-library decoder — and frozen in one pass that
also looks at every number. The result is the spec reader's, value for value, or nothing:

- an integer outside ±(2**53 - 1) becomes the double a JavaScript reader makes of it
  (``float(n)``, as the spec's reader does), and any zero float becomes ``0.0`` (-0 is mapped);
- a line the fast parser refuses (NaN, Infinity, a lone surrogate, nesting past its limit, bad
  JSON), or one holding a float too large to trust a parser's rounding of an integer literal, is
  not decided here: :func:`decode_lines` answers ``None`` and the caller takes the spec's path,
  which then accepts it or names the damage exactly as it always has.

Parsed JSON has no reference cycles, so the collector is paused while a batch is decoded.
"""

from __future__ import annotations

import gc
import importlib
import io
import json
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, NoReturn, overload

from spec.format import framing
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.events import Event
from spec.log.json import MAX_SAFE_INTEGER, FrozenDict, FrozenList, JsonValue, freeze_parsed_json

_orjson: Any
try:  # optional: the standard library's decoder is the fallback
    _orjson = importlib.import_module("orjson")
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None

_UNSURE_MAGNITUDE: Final = 2.0**64  # floats this large may come from huge integer literals


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


_STDLIB_SCAN: Final = json.JSONDecoder(parse_constant=_reject_constant).scan_once  # type: ignore[attr-defined]


class _Unsure(Exception):
    """A value the fast path does not decide; the spec's reader will."""


@contextmanager
def collector_paused(keep: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off for a while (freshly parsed, frozen JSON holds no
    cycles, so a collection during a load would only traverse it for nothing). With ``keep``,
    what is alive at the end is moved out of the collector's sight (``gc.freeze``) before it is
    switched back on: a resumed log lives as long as its session and can never form a cycle, and
    otherwise the first collections after the load would traverse all of it again."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if keep:
                gc.freeze()
            gc.enable()


_TRIM: list[Callable[[int], int] | None] = []  # glibc's malloc_trim, looked up once (None: not here)


def release_free_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``; nothing
    elsewhere). A bulk read frees its decompressed text, its lines and the parser's scratch all at
    once, and glibc keeps those pages mapped: without this, the process stays as large as the
    read's peak for as long as the session it resumed lives (issue 24: resident memory)."""
    if not _TRIM:
        trim = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                trim = ctypes.CDLL("libc.so.6").malloc_trim
                trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
            except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
                trim = None
        _TRIM.append(trim)
    if _TRIM[0] is not None:
        _TRIM[0](0)


def release_in_order(values: list[Any]) -> None:
    """Let ``values``' items go first to last, each freed then if nothing else holds it (the list is
    left empty). A parsed log's objects were made in that order, and freeing them in it touches
    memory the way it was laid out: a tuple or list being freed lets its items go last to first,
    which took half as long again for a resume's 100k judged events (issue 24: 56 against 35 ms)."""
    values.reverse()
    values.clear()  # a list clears last to first: reversed, its items go in their first order


def decode_lines(
    lines: Sequence[bytes],
    use_orjson: bool = True,
    frozen: bool = True,
    small_floats: list[float] | None = None,
    numbered: bool = False,
) -> list[JsonValue] | None:
    """Each line (UTF-8 already validated by the caller) as frozen JSON with the spec reader's
    values, or ``None`` when some line needs the spec's reader. Not ``frozen``: the same values in
    plain containers, for a caller that judges them, drops them and keeps the lines. Every float
    the values hold that :func:`encode_lines` may have orjson write otherwise (non-zero, below
    :data:`SMALL_FLOAT` in magnitude) is appended to ``small_floats`` when given: the walk that
    settles the numbers meets every float anyway (issue 24: a v0 log's migration). ``numbered``
    (a v4 log's records): ``None`` too unless each value is an object whose ``seq`` is the int of
    its place, asked as each object is settled (issue 24: a pass of its own over a resumed log)."""
    values: list[JsonValue] = []
    append = values.append
    small = [] if small_floats is None else small_floats
    settle = freeze_checked if frozen else settle_numbers
    in_one_loop = use_orjson and _orjson is not None and not frozen  # asks the seqs as it settles
    try:
        with collector_paused():
            if in_one_loop:
                # Parsed in one C loop, then settled in place: an object (every event) is walked
                # directly, its deeper containers after all of them (issue 24: resume).
                values = list(map(_orjson.loads, lines))
                deep: list[Any] = []
                for index, value in enumerate(values):
                    if type(value) is dict:
                        _settle(value, 0, deep, small)
                        if numbered and (type(seq := value.get("seq")) is not int or seq != index):
                            return None
                    elif numbered:
                        return None
                    else:
                        values[index] = settle(value, small)
                while deep:
                    _settle(deep.pop(), _RECURSIVE_DEPTH, deep, small)
            elif use_orjson and _orjson is not None:
                loads = _orjson.loads
                for line in lines:
                    append(settle(loads(line), small))
            else:
                scan = _STDLIB_SCAN
                for line in lines:
                    text = line.decode("utf-8")
                    value, end = scan(text, 0)
                    if end != len(text):
                        return None
                    append(settle(value, small))
    except (_Unsure, ValueError, OverflowError, StopIteration, RecursionError, TypeError):
        return None
    if numbered and not in_one_loop:
        for index, value in enumerate(values):
            if not isinstance(value, dict) or type(seq := value.get("seq")) is not int or seq != index:
                return None
    return values


def decode_event(line: bytes) -> Event:
    """One stored line that was judged before, as a frozen event with the spec reader's values:
    :func:`decode_lines` when it decides the line, else the spec's reader itself."""
    decided = decode_lines((line,))
    value = decided[0] if decided is not None else freeze_parsed_json(decode_json_text(line))
    if type(value) is not FrozenDict:  # pragma: no cover - a stored line was judged an event object
        raise TypeError("a stored line is not an event object")
    return value


_CHUNK: Final = 1024  # lines decoded together when a run of stored events is read


class StoredEvents(Sequence[Event]):
    """A log whose judged events are kept as their stored line bytes (issue 24: memory), each
    decoded when read, frozen, with the spec reader's values (D5, D6): a read hands out a fresh
    frozen event that nobody can change, equal to the one judged. ``judged`` are the events the
    spec's rules ran on, held until :meth:`settle` lets them go: ``frozen`` ones (as a reader
    freezes them) are what reads return meanwhile, so each line is decoded once; plain ones (a
    resume judges the parsed lines unfrozen) are never handed out, only :meth:`judged_events`
    gives them to the resume that judges them.
    ``tail`` holds the events that follow the stored lines (a live session's appends, shared and
    only ever grown); :meth:`snapshot` is this log at its current length, which never changes.
    Compares equal to any tuple, list or log of equal events."""

    __slots__ = ("_frozen", "_judged", "_length", "_lines", "_tail")

    def __init__(
        self,
        lines: Sequence[bytes],
        judged: Sequence[Event] | None = None,
        tail: list[Event] | None = None,
        length: int | None = None,
        frozen: bool = True,
    ) -> None:
        if judged is not None and len(judged) != len(lines):
            raise ValueError("one judged event per stored line")
        self._lines = lines
        self._judged = judged
        self._tail: list[Event] = [] if tail is None else tail
        self._length = length
        self._frozen = frozen

    def settle(self) -> None:
        """Drop the judged events: from now on every read decodes its line."""
        self._judged = None

    @property
    def lines(self) -> Sequence[bytes]:
        return self._lines

    @property
    def text_kept(self) -> bool:
        """The judged events are plain: only :meth:`judged_events` gives them (to be judged)."""
        return self._judged is not None and not self._frozen

    def judged_events(self) -> tuple[Event, ...]:
        """The judged events (frozen or plain, as held) and the tail, for the spec's rules to run on
        once more (a resume folding its seed); every line decoded when nothing is held."""
        if self._judged is None:
            return tuple(self)
        return (*self._judged, *self._tail[: len(self) - len(self._lines)])

    def with_tail(self, tail: list[Event]) -> StoredEvents:
        """These stored lines followed by ``tail`` (which the caller goes on growing)."""
        return StoredEvents(self._lines, self._judged, tail, None, self._frozen)

    def snapshot(self) -> StoredEvents:
        return StoredEvents(self._lines, self._judged, self._tail, len(self), self._frozen)

    def __len__(self) -> int:
        return len(self._lines) + len(self._tail) if self._length is None else self._length

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Event, ...]: ...

    def __getitem__(self, index: int | slice) -> Event | tuple[Event, ...]:
        length = len(self)
        if isinstance(index, slice):
            start, stop, step = index.indices(length)
            if step == 1:
                return tuple(self._run(start, max(start, stop)))
            return tuple(self._at(position) for position in range(start, stop, step))
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("event index out of range")
        return self._at(index)

    def _at(self, index: int) -> Event:
        stored = len(self._lines)
        if index >= stored:
            return self._tail[index - stored]
        if self._judged is not None and self._frozen:
            return self._judged[index]
        return decode_event(self._lines[index])

    def _run(self, start: int, stop: int) -> Iterator[Event]:
        """Events ``start`` to ``stop`` in order: lines decoded a chunk at a time (one parser loop
        and one pause of the collector per chunk, not per event), then the tail's."""
        stored = min(len(self._lines), stop)
        if self._judged is not None and self._frozen:
            yield from self._judged[start:stored]
        else:
            for first in range(start, stored, _CHUNK):
                chunk = self._lines[first : min(first + _CHUNK, stored)]
                decoded = decode_lines(chunk)
                yield from map(decode_event, chunk) if decoded is None else decoded  # type: ignore[misc]
        if stop > len(self._lines):
            yield from self._tail[max(start, len(self._lines)) - len(self._lines) : stop - len(self._lines)]

    def __iter__(self) -> Iterator[Event]:
        return self._run(0, len(self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, (tuple, list, StoredEvents)):
            return NotImplemented
        return len(self) == len(other) and all(mine == theirs for mine, theirs in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"StoredEvents({len(self)} events, {len(self._lines)} stored as lines)"


def encode_lines(records: Sequence[JsonValue], small_floats: Collection[float] | None = None) -> bytes:
    """:func:`spec.format.framing.encode_lines`'s very bytes, faster: a record is written by orjson
    when each of its floats is, alone, written alike by orjson and the spec's encoder: orjson's text
    for a float-free JSON value is the spec encoder's (compact, keys in order, non-ASCII raw, the
    same escapes; ``tests/test_fastjson.py`` checks it property-wise), and it writes a float inside
    a value as it writes it alone. A record with a float the two write otherwise (``1e-6`` against
    ``1e-06``), one orjson refuses (a lone surrogate, an integer past 64 bits) and every record
    without orjson go to the spec's encoder (issue 24: a v0 log's migration writes every event
    once). The floats are looked for only when orjson's text holds ``e-`` or ``0.0000``: orjson
    writes every float alike with the spec's encoder but those below 1e-4 in magnitude, which it
    writes as ``0.0000...`` or with a negative exponent (``tests/test_fastjson.py`` checks it
    property-wise), so a text holding neither has no float to compare (issue 24: the walk was a
    fifth of a flush's encoding). Both are searched for once in the whole text, and line by line
    only when found (issue 24: a search per record was two fifths of a v0 migration's encoding).
    ``small_floats``, when given, holds every float of the records below :data:`SMALL_FLOAT` in
    magnitude (a superset will do: the walk that read them met each, :func:`decode_lines`; the
    copies that made an appended event met every float it holds, ``Session.append``): none of
    them below it means no float to compare, and the text is not searched (issue 24: the two
    searches were a third of a v0 migration's encoding, and a tenth of the append row)."""
    if _orjson is None:
        return framing.encode_lines(records)
    dumps, newline = _orjson.dumps, _orjson.OPT_APPEND_NEWLINE
    if len(records) == 1:  # one appended event, encoded as it is appended: its line as orjson writes it
        try:
            line: bytes = dumps(records[0], option=newline)
        except (TypeError, ValueError):
            line = b""
        if line and (_none_small(small_floats) or not may_write_otherwise(line)):
            return line
    # Each orjson result is dropped at once (held together, their spare capacity adds up), written
    # to a buffer whose text is then handed out as it is (a bytearray's is copied: issue 24, the
    # copy was a fifth of a v0 migration's encoding).
    buffer = io.BytesIO()
    write = buffer.write
    for record in records:
        try:
            write(dumps(record, option=newline))  # the line break written by orjson: one copy less
        except (TypeError, ValueError):  # orjson.JSONEncodeError is a TypeError
            write(encode_json_text(record).encode("utf-8") + b"\n")
    out = buffer.getvalue()
    del buffer
    if _none_small(small_floats) or not may_write_otherwise(out):  # one search of the whole text
        return out
    # Rare: a line may hold a float orjson writes otherwise; such a record the spec encodes (a line
    # the spec encoded already is encoded alike again). A JSON line holds no raw line break, so
    # the text cuts into the records' lines at its line breaks.
    lines = [line + b"\n" for line in out.split(b"\n")[:-1]]
    del out
    for index, line in enumerate(lines):
        if may_write_otherwise(line) and not all(
            dumps(number) == encode_json_text(number).encode() for number in _floats_in(records[index])
        ):
            lines[index] = encode_json_text(records[index]).encode("utf-8") + b"\n"
    return b"".join(lines)


def _none_small(floats: Collection[float] | None) -> bool:
    """``floats`` is given (every float of some records, or more) and none of them is one orjson
    may write otherwise: non-zero and below :data:`SMALL_FLOAT` in magnitude."""
    if not floats:  # none given (not known), or none held: the common appended event's (issue 24)
        return floats is not None
    return not any(0.0 < abs(number) < SMALL_FLOAT for number in floats)


def may_write_otherwise(text: bytes) -> bool:
    """Does orjson's ``text`` hold ``e-`` or ``0.0000``, where a float it writes otherwise would
    be (:func:`encode_lines`)? Asked only of a text whose floats are not all known to be written
    alike (issue 24: the copies of an appended event name its floats, the read of a log its small
    ones), so its cost is that of the rare text that may hold one."""
    return b"e-" in text or b"0.0000" in text


def _floats_in(value: JsonValue) -> list[float]:
    """Every float in a JSON value (its text is the one part orjson may write otherwise)."""
    if type(value) is float:
        return [value]
    floats: list[float] = []
    if not isinstance(value, (dict, list)):
        return floats
    stack: list[Any] = [value]
    pop, push = stack.pop, stack.append
    while stack:
        container = pop()
        for child in container.values() if isinstance(container, dict) else container:
            kind = type(child)
            if kind is float:
                floats.append(child)
            elif kind is FrozenDict or kind is FrozenList or isinstance(child, (dict, list)):
                push(child)
    return floats


SMALL_FLOAT: Final = 1e-4  # orjson writes a float alike with the spec's encoder unless it is smaller


def freeze_checked(value: Any, small: list[float] | None = None) -> JsonValue:
    """Freshly parsed JSON (nobody else holds it) frozen in one pass over its containers, each
    number given the spec reader's value; raises :class:`_Unsure` for a float it cannot vouch for.
    Each non-zero float below :data:`SMALL_FLOAT` in magnitude is appended to ``small`` (when
    given)."""
    kind = type(value)
    root: FrozenDict | FrozenList
    if small is None:
        small = []
    if kind is dict:
        root = FrozenDict(value)
    elif kind is list:
        root = FrozenList(value)
    else:
        return _checked_scalar(value, small)
    stack: list[Any] = [root]
    pop, push = stack.pop, stack.append
    children: Iterable[tuple[Any, Any]]
    put: Callable[[Any, Any, Any], None]
    where: Any
    child: Any
    set_item, set_index = dict.__setitem__, list.__setitem__
    while stack:
        container = pop()
        if type(container) is FrozenDict:
            children, put = dict.items(container), set_item
        else:
            children, put = enumerate(container), set_index
        for where, child in children:
            kind = type(child)
            if kind is str:
                continue
            if kind is dict:
                frozen: Any = FrozenDict(child)
                put(container, where, frozen)
                push(frozen)
            elif kind is list:
                frozen = FrozenList(child)
                put(container, where, frozen)
                push(frozen)
            elif kind is int:
                if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                    put(container, where, float(child))
            elif kind is float:
                if child == 0.0:
                    put(container, where, 0.0)
                elif not -_UNSURE_MAGNITUDE < child < _UNSURE_MAGNITUDE:
                    raise _Unsure
                elif -SMALL_FLOAT < child < SMALL_FLOAT:
                    small.append(child)
    return root


def settle_numbers(value: Any, small: list[float] | None = None) -> JsonValue:
    """:func:`freeze_checked` without the freezing: freshly parsed JSON's numbers given the spec
    reader's values in place, its containers left plain (no copies; a container holding a number
    to change is walked twice, once to find it and once to change it), its small floats appended
    to ``small`` likewise. Containers nested at most :data:`_RECURSIVE_DEPTH` levels are walked by
    recursion (a fifth faster than a stack: issue 24, resume); deeper ones are left on a stack,
    each settled by the same walk from there."""
    if small is None:
        small = []
    if type(value) is dict or type(value) is list:
        deep: list[Any] = []
        _settle(value, 0, deep, small)
        while deep:
            _settle(deep.pop(), _RECURSIVE_DEPTH, deep, small)
        settled: JsonValue = value
        return settled
    return _checked_scalar(value, small)


_RECURSIVE_DEPTH: Final = 64  # containers nested deeper wait on settle_numbers' stack


def _settle(container: Any, depth: int, deep: list[Any], small: list[float]) -> None:
    is_dict = type(container) is dict
    changes = False
    for child in container.values() if is_dict else container:
        kind = type(child)  # the kinds in the order they are most often met (issue 24: resume)
        if kind is str:
            continue
        if kind is int:
            if child > MAX_SAFE_INTEGER or child < -MAX_SAFE_INTEGER:
                changes = True
        elif kind is dict or kind is list:
            _settle(child, depth + 1, deep, small) if depth < _RECURSIVE_DEPTH else deep.append(child)
        elif kind is float:
            if not -_UNSURE_MAGNITUDE < child < _UNSURE_MAGNITUDE:
                raise _Unsure
            if child == 0.0:
                changes = True
            elif -SMALL_FLOAT < child < SMALL_FLOAT:
                small.append(child)
    if changes:
        _settle_in_place(container, is_dict)


def _settle_in_place(container: Any, is_dict: bool) -> None:
    places = container.items() if is_dict else enumerate(container)
    for where, child in list(places):
        if type(child) is int or type(child) is float:
            container[where] = _checked_scalar(child)


def _checked_scalar(value: JsonValue, small: list[float] | None = None) -> JsonValue:
    if type(value) is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return float(value)
    if type(value) is float:
        if value == 0.0:
            return 0.0
        if not -_UNSURE_MAGNITUDE < value < _UNSURE_MAGNITUDE:
            raise _Unsure
        if small is not None and -SMALL_FLOAT < value < SMALL_FLOAT:
            small.append(value)
    return value
