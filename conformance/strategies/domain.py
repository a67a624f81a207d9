"""The value domain's edges, as constants, and the strategies for texts, numbers, JSON values and
content blocks (:mod:`conformance.strategies` says what each edge is for)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, TypeVar

from hypothesis import strategies as st

from spec.log.json import MAX_SAFE_INTEGER, JsonObject, JsonValue

T = TypeVar("T")

# --- the edges, as constants -----------------------------------------------------------------------

NON_BMP: Final = "\U0001f600"  # one code point, two UTF-16 code units
LONE_SURROGATES: Final = ("\ud800", "\udfff")  # a high and a low surrogate, each alone
LINE_BREAKERS: Final = ("\u2028", "\u2029", "\x85", "\r", "\x0b", "\x0c")  # not line ends in JSONL
EDGE_CHARACTERS: Final = (
    NON_BMP,
    "\U00010000",
    *LONE_SURROGATES,
    *LINE_BREAKERS,
    "\x00",
    "\t",
    "é",
    "开",
    "~",
)
EDGE_TEXTS: Final = (
    "",
    "hello",
    NON_BMP,
    f"two{NON_BMP}{NON_BMP}",
    "a\u2028b",
    "\u2029",
    "x\x85y",
    "\r\n",
    "\x0b\x0c",
    "\ud800",
    "lone \udfff",
)
# Texts for the stateful workloads: one of each edge, short, so that a workload stays fast.
WORKLOAD_TEXTS: Final = (
    "hello",
    "",
    f"wide {NON_BMP}",
    "line\u2028break\u2029",
    "nel\x85cr\r",
    "lone \ud800",
)

SAFE_BOUND: Final = MAX_SAFE_INTEGER  # 2**53 - 1
# 2**53 as JSON text reads it: a double, and no safe integer (the int 2**53 is outside the domain)
UNSAFE_INTEGER: Final = float(MAX_SAFE_INTEGER + 1)
SAFE_EDGES: Final = (0, 1, -1, SAFE_BOUND, -SAFE_BOUND)
INTEGRAL_FLOATS: Final = (0.0, 1.0, 2.0, 7.0)
NUMBER_EDGES: Final = (*SAFE_EDGES, *INTEGRAL_FLOATS, UNSAFE_INTEGER, -UNSAFE_INTEGER, 0.5, -1.5, 1e300)
NOT_NUMBERS: Final[tuple[JsonValue, ...]] = (
    True,
    False,
    None,
    "1",
    [1],
    {"n": 1},
)  # where a number is expected

UNKNOWN_BLOCK: Final[JsonObject] = {"type": "x-custom", "payload": {"n": 1}}
IMAGE_BLOCK: Final[JsonObject] = {"type": "image", "data": "aGk=", "mimeType": "image/png"}
ABSENT_OR_NULL: Final = ("absent", "null", "value")  # how an optional key is given


def mostly(usual: st.SearchStrategy[T], rare: st.SearchStrategy[T], odds: int = 4) -> st.SearchStrategy[T]:
    """``usual`` ``odds`` times in ``odds + 1``, else ``rare`` (a weighted one_of: Hypothesis leans to
    a one_of's first branch, and to small numbers, so the usual case is drawn from the low end)."""
    return st.integers(0, odds).flatmap(lambda pick: usual if pick < odds else rare)


def text_block(text: str) -> JsonObject:
    return {"type": "text", "text": text}


# --- strategies: texts and numbers ---------------------------------------------------------------------


def texts(max_size: int = 12) -> st.SearchStrategy[str]:
    """Short texts mixing ASCII with every edge character (a surrogate pair's halves may come next to
    each other: as JSON text that is the one character they encode)."""
    pieces = st.one_of(
        st.sampled_from(EDGE_CHARACTERS), st.characters(min_codepoint=0x20, max_codepoint=0x7E)
    )
    return st.one_of(st.sampled_from(EDGE_TEXTS), st.lists(pieces, max_size=max_size).map("".join))


def identifiers() -> st.SearchStrategy[str]:
    """Non-empty ids: plain names most of the time, any edge text otherwise."""
    return st.one_of(st.sampled_from(("s", "a/b", "..", "~x", f"id{NON_BMP}")), texts().filter(bool))


def safe_integers(low: int = -MAX_SAFE_INTEGER, high: int = MAX_SAFE_INTEGER) -> st.SearchStrategy[int]:
    edges = [value for value in SAFE_EDGES if low <= value <= high]
    return st.one_of(
        st.sampled_from(edges or [low]), st.integers(max(low, -3), min(high, 12)), st.integers(low, high)
    )


def finite_floats() -> st.SearchStrategy[float]:
    """Floats of the domain: finite, never -0.0."""
    return st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda x: x != 0.0 or math.copysign(1.0, x) > 0
    )


def numbers() -> st.SearchStrategy[JsonValue]:
    """Any number of the domain, the edges first: safe integers, integral floats, 2**53, fractions."""
    return st.one_of(st.sampled_from(NUMBER_EDGES), safe_integers(), finite_floats())


def seq_like(limit: int) -> st.SearchStrategy[JsonValue]:
    """A value where a seq below ``limit`` is expected: mostly one, as an int or an integral float,
    else an edge (negative, fractional, 2**53, a boolean, a string, null)."""
    valid = st.integers(0, max(limit - 1, 0))
    return st.one_of(
        valid,
        valid.map(float),
        st.sampled_from((-1, 0.5, UNSAFE_INTEGER, SAFE_BOUND, True, False, "0", None, limit)),
    )


# --- strategies: JSON values --------------------------------------------------------------------------


def json_scalars() -> st.SearchStrategy[JsonValue]:
    return st.one_of(st.none(), st.booleans(), numbers(), texts())


def json_values(max_leaves: int = 8) -> st.SearchStrategy[JsonValue]:
    """Any value of the lossless domain, edges included."""
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(texts(6), children, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def json_objects(max_leaves: int = 8) -> st.SearchStrategy[dict[str, JsonValue]]:
    return st.dictionaries(texts(6), json_values(max_leaves), max_size=4)


def with_optional(
    required: Mapping[str, st.SearchStrategy[JsonValue]],
    optional: Mapping[str, st.SearchStrategy[JsonValue]],
) -> st.SearchStrategy[JsonObject]:
    """An object with every ``required`` key and each ``optional`` key absent, ``null`` or drawn."""

    @st.composite
    def build(draw: st.DrawFn) -> JsonObject:
        value: JsonObject = {key: draw(strategy) for key, strategy in required.items()}
        for key, strategy in optional.items():
            how = draw(st.sampled_from(ABSENT_OR_NULL))
            if how != "absent":
                value[key] = None if how == "null" else draw(strategy)
        return value

    return build()


# --- strategies: content blocks --------------------------------------------------------------------


def content_blocks(max_size: int = 4) -> st.SearchStrategy[list[JsonValue]]:
    """A message's content: several blocks, text and others (an image, an unknown type, a text block
    whose text is not a string)."""
    others: tuple[JsonValue, ...] = (
        IMAGE_BLOCK,
        UNKNOWN_BLOCK,
        {"type": "text", "text": 5},
        {"type": "text"},
    )
    block: st.SearchStrategy[JsonValue] = st.one_of(texts().map(text_block), st.sampled_from(others))
    return st.lists(block, max_size=max_size)


def sized_text(size: int) -> str:
    """A text of exactly ``size`` code points that holds every kind of edge character once it is
    long enough (its UTF-16 length is larger: it holds astral characters)."""
    unit = f"ab{NON_BMP}c\u2028d\x85e\ud800f"  # 10 code points, 12 UTF-16 code units
    return (unit * (size // len(unit) + 1))[:size]


# Sizes around the prune thresholds (code points): the default threshold, head and tail.
PRUNE_SIZES: Final = (0, 1, 38, 39, 40, 1023, 1024, 1025, 4095, 4096, 4097, 5159, 5160, 8191, 8192, 8193)


def pruned_text_blocks() -> st.SearchStrategy[list[JsonValue]]:
    """Tool-result content sized around the prune thresholds: text blocks (split in one to three)
    whose sizes sum near 8192, 4096 or 1024 code points, with other blocks between them."""

    @st.composite
    def build(draw: st.DrawFn) -> list[JsonValue]:
        total = draw(st.sampled_from(PRUNE_SIZES)) + draw(st.integers(-2, 2))
        parts = draw(st.integers(1, 3))
        cuts = sorted(draw(st.lists(st.integers(0, max(total, 0)), min_size=parts - 1, max_size=parts - 1)))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, max(total, 0)])]
        blocks: list[JsonValue] = []
        for size in sizes:
            if draw(st.booleans()):
                blocks.append(draw(st.sampled_from((IMAGE_BLOCK, UNKNOWN_BLOCK))))
            blocks.append(text_block(sized_text(size)))
        return blocks

    return build()
