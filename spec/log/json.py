"""The lossless JSON domain (SPEC-DECISIONS D5, D6; notes/dsh-session-core §5.2).

Every event, header and payload lives in this domain so that a JavaScript peer reads exactly the
values a Python writer meant. Values that enter the log are *snapshotted*: copied into frozen
containers (:class:`FrozenDict`, :class:`FrozenList`) whose mutators raise ``TypeError``, so
nothing handed out can change the log. All traversals are iterative: 20,000 levels of nesting
never meet Python's recursion limit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, NoReturn, TypeAlias, TypeGuard, Union, cast

MAX_SAFE_INTEGER: Final = 2**53 - 1  # the largest integer a double holds exactly (JS Number.MAX_SAFE_INTEGER)

JsonValue: TypeAlias = Union[bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"], None]
JsonObject: TypeAlias = dict[str, JsonValue]


def _refuse(*_: object, **__: object) -> NoReturn:
    raise TypeError("session log values are immutable; copy them with thaw_json() to edit")


class FrozenDict(dict[str, JsonValue]):
    """A JSON object that cannot be changed. It is a ``dict``, so it serialises and compares as one."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, JsonValue]]]:
        return (FrozenDict, (dict(self),))


class FrozenList(list[JsonValue]):
    """A JSON array that cannot be changed. It is a ``list``, so it serialises and compares as one."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _refuse
    sort = reverse = __iadd__ = __imul__ = _refuse

    def __copy__(self) -> FrozenList:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenList:
        return self

    def __reduce__(self) -> tuple[type[FrozenList], tuple[list[JsonValue]]]:
        return (FrozenList, (list(self),))


class _NotJson:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Final = _NotJson()
"""Returned by :func:`snapshot_json` for a value outside the domain (``None`` is JSON null)."""


def is_safe_integer(value: object) -> TypeGuard[int | float]:
    """A safe integer is an int (never a bool) with |n| <= 2**53 - 1; an integral float counts
    as that integer, as it does in JavaScript (D5)."""
    if type(value) is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if type(value) is float:
        return math.isfinite(value) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return False


def is_json_number(value: object) -> TypeGuard[int | float]:
    """A JSON number is an int or a float, never a bool (D5)."""
    return type(value) in (int, float)


def is_event_seq(value: object) -> TypeGuard[int | float]:
    """An event seq is a non-negative safe integer (notes/dsh-session-core §0). An int, what
    nearly every seq is, is decided here (issue 24: this runs a few times per stored event)."""
    if type(value) is int:
        return 0 <= value <= MAX_SAFE_INTEGER
    return is_safe_integer(value) and value >= 0


def int_field(record: Mapping[str, JsonValue], key: str) -> int:
    """The number at ``key`` of a record its caller has already checked, as an int (a JSON number
    may arrive as an integral float, D5). A missing key or a value that is not a number is the
    caller's bug, not a rejection: it raises ``KeyError`` or ``TypeError``."""
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{key} is {js_text(value)}, not a number")
    return int(value)


def _is_json_scalar(value: object) -> TypeGuard[bool | str | int | float | None]:
    if value is None or type(value) is bool or type(value) is str:
        return True
    if type(value) is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if type(value) is float:
        return math.isfinite(value) and not (value == 0.0 and math.copysign(1.0, value) < 0)
    return False


def snapshot_json(value: object, floats: list[float] | None = None) -> JsonValue | _NotJson:
    """Copy a value into frozen JSON containers, or return ``NOT_JSON`` if any part of it lies
    outside the lossless domain: only None, bool, str, safe ints, finite floats other than -0.0,
    lists and str-keyed dicts, with no container its own ancestor (D5). Shared sub-values that are
    not cycles are copied once per occurrence. A value nested at most :data:`_SHALLOW_DEPTH` deep
    (every event an agent appends) is copied by :func:`_copy_shallow`; a deeper one, or one that
    holds a cycle, by :func:`_snapshot_deep`, which never meets the recursion limit. Each float the
    walk meets is appended to ``floats`` when given (some perhaps twice, none missed): a writer
    that encodes the copy then knows its numbers without searching its text (issue 24: append)."""
    kind = type(value)
    source: Any = value
    if kind is dict or kind is FrozenDict or kind is list or kind is FrozenList:
        try:
            return _copy_shallow(source, _SHALLOW_DEPTH, floats)
        except _OutsideDomain:
            return NOT_JSON
        except (_TooDeep, RecursionError):
            return _snapshot_deep(source, floats)
    if isinstance(value, (dict, list)) or not _is_json_scalar(value):
        return NOT_JSON
    if floats is not None and kind is float:
        floats.append(source)
    return value


_SHALLOW_DEPTH: Final = 64  # levels of containers the recursive copy takes; deeper: the iterative walk


class _OutsideDomain(Exception):
    """Some part of the value is not JSON (:func:`_copy_shallow`)."""


class _TooDeep(Exception):
    """The value nests deeper than the recursive copy goes (or holds a cycle)."""


def _copy_shallow(value: Any, depth: int, floats: list[float] | None) -> FrozenDict | FrozenList:
    """:func:`snapshot_json` of an exact dict or list, recursively, ``depth`` levels at most (a
    cycle runs out of them too): raises :class:`_OutsideDomain` for a part outside the domain,
    :class:`_TooDeep` past ``depth``; the floats it meets go to ``floats`` when given."""
    if depth == 0:
        raise _TooDeep
    copy: FrozenDict | FrozenList
    children: Any
    put: Any
    is_dict = type(value) is dict or type(value) is FrozenDict
    if is_dict:
        copy = FrozenDict(value)
        children, put = dict.items(copy), dict.__setitem__
    else:
        copy = FrozenList(value)
        children, put = enumerate(copy), list.__setitem__
    for place, child in children:
        if is_dict and type(place) is not str:  # a key outside the domain (one walk for keys and values)
            raise _OutsideDomain
        kind = type(child)
        if kind is str or child is None or kind is bool:
            continue
        if kind is int:  # most numbers an event holds: judged here (issue 24, a tenth of the copy)
            if not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                raise _OutsideDomain
        elif kind is dict or kind is FrozenDict or kind is list or kind is FrozenList:
            put(copy, place, _copy_shallow(child, depth - 1, floats))
        elif not _is_json_scalar(child):
            raise _OutsideDomain
        elif floats is not None and kind is float:
            floats.append(cast(float, child))
    return copy


def _snapshot_deep(value: Any, floats: list[float] | None = None) -> JsonValue | _NotJson:
    """:func:`snapshot_json` of an exact dict or list at any depth, iteratively: each container is
    walked with its ancestors on a path, so a cycle is found however deep it lies; the floats it
    meets go to ``floats`` when given."""
    source: Any = value
    root: FrozenDict | FrozenList = (
        FrozenDict(source) if type(value) is dict or type(value) is FrozenDict else FrozenList(source)
    )
    # Each copy starts as a shallow copy of its source; the walk checks every key and scalar and
    # puts a copy in place of every container, so the result shares nothing mutable with ``value``.
    places = _places(root)
    if places is None:
        return NOT_JSON
    on_path: set[int] = {id(value)}
    stack: list[tuple[Any, Any, Any]] = [(value, root, places)]
    while stack:
        source, target, places = stack[-1]
        for place, child in places:
            child_kind = type(child)
            if child_kind is str or child is None or child_kind is bool:
                continue
            if (
                child_kind is dict
                or child_kind is FrozenDict
                or child_kind is list
                or child_kind is FrozenList
            ):
                if id(child) in on_path:
                    return NOT_JSON
                copy: Any = (
                    FrozenDict(child) if child_kind is dict or child_kind is FrozenDict else FrozenList(child)
                )
                if type(target) is FrozenDict:
                    dict.__setitem__(target, place, copy)
                else:
                    list.__setitem__(target, place, copy)
                places = _places(copy)
                if places is None:
                    return NOT_JSON
                on_path.add(id(child))
                stack.append((child, copy, places))
                break
            if not _is_json_scalar(child):
                return NOT_JSON
            if floats is not None and child_kind is float:
                floats.append(cast(float, child))
        else:
            stack.pop()
            on_path.discard(id(source))
    return root


def _places(copy: FrozenDict | FrozenList) -> Any:
    """The (key or index, value) pairs of a fresh copy, or ``None`` when a key is not a string."""
    if type(copy) is FrozenDict:
        return iter(dict.items(copy)) if all(type(key) is str for key in copy) else None
    return enumerate(copy)


def freeze_parsed_json(value: JsonValue) -> JsonValue:
    """Take ownership of freshly parsed JSON (plain dicts and lists nobody else holds) and
    return it frozen, touching each container once (D6: restore takes ownership, no second
    deep copy). The caller must not keep references into ``value``. A frozen container is
    returned as it is: this module only ever builds them frozen all the way down."""
    if not isinstance(value, (dict, list)) or type(value) in (FrozenDict, FrozenList):
        return value
    root: FrozenDict | FrozenList = FrozenDict(value) if isinstance(value, dict) else FrozenList(value)
    stack: list[FrozenDict | FrozenList] = [root]
    while stack:
        container = stack.pop()
        items: Any = container.items() if isinstance(container, dict) else enumerate(container)
        replacements: list[tuple[Any, FrozenDict | FrozenList]] = []
        for key, child in items:
            if type(child) is dict:
                frozen: FrozenDict | FrozenList = FrozenDict(child)
            elif type(child) is list:
                frozen = FrozenList(child)
            else:
                continue
            replacements.append((key, frozen))
            stack.append(frozen)
        for key, frozen in replacements:
            if isinstance(container, dict):
                dict.__setitem__(container, key, frozen)
            else:
                list.__setitem__(container, key, frozen)
    return root


def thaw_json(value: JsonValue) -> JsonValue:
    """A plain, mutable deep copy of a JSON value (for callers who want to edit one)."""
    if not isinstance(value, (dict, list)):
        return value
    root: dict[str, JsonValue] | list[JsonValue] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        for key, child in source.items() if isinstance(source, dict) else enumerate(source):
            if isinstance(child, (dict, list)):
                copy: Any = {} if isinstance(child, dict) else []
                stack.append((child, copy))
                child = copy
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return root


def is_deep_equal_json(a: JsonValue, b: JsonValue) -> bool:
    """JSON deep equality: arrays pairwise, objects by key set regardless of order, scalars by
    value (notes/dsh-session-core §3.7). ``True`` and ``1`` differ, as they do in JSON."""
    stack: list[tuple[Any, Any]] = [(a, b)]
    while stack:
        left, right = stack.pop()
        if left is right:
            continue
        if isinstance(left, list) or isinstance(right, list):
            if not (isinstance(left, list) and isinstance(right, list)) or len(left) != len(right):
                return False
            stack.extend(zip(left, right))
        elif isinstance(left, dict) or isinstance(right, dict):
            if not (isinstance(left, dict) and isinstance(right, dict)) or len(left) != len(right):
                return False
            for key, value in left.items():
                if key not in right:
                    return False
                stack.append((value, right[key]))
        elif (type(left) is bool) != (type(right) is bool) or left != right:
            return False
    return True


def index_of(items: list[int], value: int) -> int:
    """Position of ``value`` in ``items``, or -1 (JavaScript's ``indexOf``)."""
    try:
        return items.index(value)
    except ValueError:
        return -1


def js_text(value: object) -> str:
    """A value as JavaScript's ``String(x)`` prints it in messages: ``2`` for 2.0, ``undefined``
    for a missing value, ``null``, ``true``/``false``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value)
