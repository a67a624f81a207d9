"""The lossless JSON domain in Python (SPEC-DECISIONS D5, D6; notes/dsh-session-core §5.2, §12 json.spec.ts)."""

from __future__ import annotations

import math
from collections import OrderedDict, defaultdict
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest

from spec.format.json_text import decode_json_text
from spec.log.json import (
    MAX_SAFE_INTEGER,
    NOT_JSON,
    FrozenDict,
    FrozenList,
    freeze_parsed_json,
    is_deep_equal_json,
    is_event_seq,
    is_safe_integer,
    snapshot_json,
    thaw_json,
)

DEPTH = 20_000  # nesting levels that must not meet Python's recursion limit (D6)

SCALARS = [
    None,
    True,
    False,
    "",
    "text",
    "\ud800",
    0,
    1,
    -1,
    1.5,
    -2.25,
    1.0,
    MAX_SAFE_INTEGER,
    -MAX_SAFE_INTEGER,
    1e300,
]
LOSSY_SCALARS = [
    pytest.param(-0.0, id="negative-zero"),
    pytest.param(math.nan, id="nan"),
    pytest.param(math.inf, id="infinity"),
    pytest.param(-math.inf, id="negative-infinity"),
    pytest.param(MAX_SAFE_INTEGER + 1, id="unsafe-int"),
    pytest.param(-MAX_SAFE_INTEGER - 1, id="unsafe-negative-int"),
    pytest.param(b"bytes", id="bytes"),
    pytest.param(bytearray(b"x"), id="bytearray"),
    pytest.param(1j, id="complex"),
    pytest.param(Decimal("1.5"), id="decimal"),
    pytest.param(Fraction(1, 2), id="fraction"),
    pytest.param(len, id="function"),
    pytest.param(object(), id="object"),
]


def nested_list(depth: int) -> list[Any]:
    root: list[Any] = []
    cursor = root
    for _ in range(depth - 1):
        child: list[Any] = []
        cursor.append(child)
        cursor = child
    return root


def nested_dict(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    cursor = root
    for _ in range(depth - 1):
        child: dict[str, Any] = {}
        cursor["k"] = child
        cursor = child
    return root


class DictSubclass(dict[str, Any]):
    pass


class ListSubclass(list[Any]):
    pass


# --- scalars -----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", SCALARS)
def test_every_json_scalar_snapshots_to_itself(value: Any) -> None:
    assert snapshot_json(value) is value


@pytest.mark.parametrize("value", LOSSY_SCALARS)
def test_a_lossy_or_foreign_scalar_is_not_json(value: Any) -> None:
    assert snapshot_json(value) is NOT_JSON


def test_a_boolean_is_not_a_safe_integer() -> None:
    assert not is_safe_integer(True)


def test_an_integral_float_counts_as_a_safe_integer() -> None:
    assert is_safe_integer(3.0) and is_event_seq(3.0)


def test_a_negative_number_is_not_an_event_seq() -> None:
    assert not is_event_seq(-1)


# --- containers --------------------------------------------------------------------------------


def test_a_snapshot_is_a_frozen_detached_copy() -> None:
    original: dict[str, Any] = {"a": [1, {"b": 2}]}
    snapshot = snapshot_json(original)
    original["a"][1]["b"] = 99
    assert snapshot == {"a": [1, {"b": 2}]}
    assert isinstance(snapshot, FrozenDict) and isinstance(snapshot["a"], FrozenList)


def test_shared_sub_values_are_accepted_and_copied_once_per_occurrence() -> None:
    shared = [1, 2]
    snapshot: Any = snapshot_json({"x": shared, "y": [shared, shared]})
    assert snapshot == {"x": [1, 2], "y": [[1, 2], [1, 2]]}
    assert snapshot["x"] is not snapshot["y"][0]
    assert snapshot["y"][0] is not snapshot["y"][1]


def test_already_frozen_containers_are_plain_json() -> None:
    frozen = snapshot_json({"a": [1]})
    assert snapshot_json({"inner": frozen}) == {"inner": {"a": [1]}}


def test_a_literal_proto_key_is_an_ordinary_key() -> None:
    assert snapshot_json({"__proto__": {"x": 1}}) == {"__proto__": {"x": 1}}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param((1, 2), id="tuple"),
        pytest.param({1, 2}, id="set"),
        pytest.param(frozenset({1}), id="frozenset"),
        pytest.param(range(3), id="range"),
        pytest.param(OrderedDict(a=1), id="ordered-dict"),
        pytest.param(defaultdict(int), id="defaultdict"),
        pytest.param(DictSubclass(a=1), id="dict-subclass"),
        pytest.param(ListSubclass([1]), id="list-subclass"),
        pytest.param({1: "a"}, id="int-key"),
        pytest.param({("a",): 1}, id="tuple-key"),
        pytest.param([1, (2,)], id="nested-tuple"),
        pytest.param({"a": {"b": {1, 2}}}, id="nested-set"),
        pytest.param([1, math.nan], id="nested-nan"),
        pytest.param({"a": [len]}, id="nested-function"),
        pytest.param([-0.0], id="nested-negative-zero"),
        pytest.param({"n": 2**60}, id="nested-unsafe-int"),
    ],
)
def test_exotic_containers_and_invalid_children_are_not_json(value: Any) -> None:
    assert snapshot_json(value) is NOT_JSON


@pytest.mark.parametrize("depth", [1, 63, 64, 65, 200], ids=lambda depth: f"under-{depth}")
@pytest.mark.parametrize(
    "child",
    [
        pytest.param((2,), id="tuple"),
        pytest.param({1: "a"}, id="int-key"),
        pytest.param(DictSubclass(a=1), id="dict-subclass"),
        pytest.param(math.nan, id="nan"),
        pytest.param(-0.0, id="negative-zero"),
        pytest.param(2**60, id="unsafe-int"),
        pytest.param(len, id="function"),
    ],
)
def test_a_part_outside_the_domain_is_found_at_every_depth(depth: int, child: Any) -> None:
    """Shallow values (every event's data) and deep ones are copied by two walks: both refuse the
    same parts, at the bottom of ``depth`` levels of lists and dicts, and copy the same values."""
    outside: Any = [[1, "x", child]]
    inside: Any = [[1, "x", 1.5, None, True]]
    for level in range(depth):
        outside = {"k": outside, "n": level} if level % 2 else [outside, level]
        inside = {"k": inside, "n": level} if level % 2 else [inside, level]
    assert snapshot_json(outside) is NOT_JSON
    copy = snapshot_json(inside)
    assert copy == inside and copy is not inside and thaw_json(copy) == inside  # type: ignore[arg-type]


def test_a_list_containing_itself_is_not_json() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    assert snapshot_json(cycle) is NOT_JSON


def test_a_dict_that_is_its_own_grandchild_is_not_json() -> None:
    outer: dict[str, Any] = {}
    outer["inner"] = {"back": [outer]}
    assert snapshot_json(outer) is NOT_JSON


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.__setitem__("x", 1),
        lambda d: d.__delitem__("a"),
        lambda d: d.update(x=1),
        lambda d: d.pop("a"),
        lambda d: d.setdefault("x", 1),
        lambda d: d.clear(),
        lambda d: d.popitem(),
    ],
)
def test_a_frozen_object_refuses_every_mutation(mutate: Any) -> None:
    frozen = snapshot_json({"a": 1})
    with pytest.raises(TypeError):
        mutate(frozen)


@pytest.mark.parametrize(
    "mutate",
    [
        lambda items: items.append(1),
        lambda items: items.__setitem__(0, 1),
        lambda items: items.extend([1]),
        lambda items: items.insert(0, 1),
        lambda items: items.pop(),
        lambda items: items.remove(1),
        lambda items: items.sort(),
        lambda items: items.reverse(),
        lambda items: items.clear(),
    ],
)
def test_a_frozen_array_refuses_every_mutation(mutate: Any) -> None:
    frozen = snapshot_json([1, 2])
    with pytest.raises(TypeError):
        mutate(frozen)


# --- depth (D6) --------------------------------------------------------------------------------


def test_snapshot_accepts_twenty_thousand_levels_of_arrays() -> None:
    assert isinstance(snapshot_json(nested_list(DEPTH)), FrozenList)


def test_snapshot_accepts_twenty_thousand_levels_of_objects() -> None:
    assert isinstance(snapshot_json(nested_dict(DEPTH)), FrozenDict)


def test_freeze_parsed_json_freezes_twenty_thousand_levels() -> None:
    frozen = freeze_parsed_json(nested_dict(DEPTH))
    cursor: Any = frozen
    while cursor:
        assert isinstance(cursor, FrozenDict)
        cursor = cursor["k"]


def test_thaw_and_deep_equality_handle_twenty_thousand_levels() -> None:
    frozen: Any = snapshot_json(nested_list(DEPTH))
    thawed = thaw_json(frozen)
    assert type(thawed) is list
    assert is_deep_equal_json(thawed, frozen)


def test_a_cycle_deep_inside_a_deep_value_is_still_found() -> None:
    root = nested_list(DEPTH)
    cursor = root
    while cursor:
        cursor = cursor[0]
    cursor.append(root)
    assert snapshot_json(root) is NOT_JSON


@pytest.mark.parametrize("depth", [1, 3, 70], ids=["flat", "nested", "past the recursive copy"])
def test_the_copy_names_every_float_it_holds_and_nothing_else(depth: int) -> None:
    """``snapshot_json(value, floats)`` appends each float of the copy (in a dict, in a list, at
    the top, past the depth the recursive copy takes) and no other number: a writer that finds
    no small float among them writes orjson's line unsearched (issue 24)."""
    value: Any = {"f": 1e-06, "i": 7, "b": True, "s": "0.5", "l": [2.5, 3, None, {"g": -0.25}]}
    for _ in range(depth - 1):
        value = [value, 1.0]
    floats: list[float] = []
    copy = snapshot_json(value, floats)
    assert copy == value
    assert sorted(set(floats)) == sorted({1e-06, 2.5, -0.25} | ({1.0} if depth > 1 else set()))
    top: list[float] = []
    assert snapshot_json(1.5e-05, top) == 1.5e-05 and top == [1.5e-05]
    assert snapshot_json(3, top) == 3 and top == [1.5e-05]  # an int is no float
    assert snapshot_json({"nan": math.nan}, top) is NOT_JSON


# --- text --------------------------------------------------------------------------------------


def test_a_reader_refuses_nan_and_infinity() -> None:
    for text in ("NaN", "[Infinity]", "-Infinity"):
        with pytest.raises(ValueError):
            decode_json_text(text)


def test_a_reader_rounds_an_unsafe_integer_as_javascript_does() -> None:
    assert decode_json_text("9007199254740993") == 9007199254740992.0


def test_a_reader_maps_negative_zero_to_zero() -> None:
    value = decode_json_text("-0.0")
    assert isinstance(value, float) and math.copysign(1.0, value) > 0
