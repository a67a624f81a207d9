"""The value domain the suite draws from: the edges of D5's lossless JSON and of JSON text, as
constants and as Hypothesis strategies (SPEC-DECISIONS D5; issue 10).

A port to another language slips where its own types differ from JavaScript's, so every
generated workload draws its texts, numbers, content blocks and optional keys from here: the
``pure-drt`` family (:mod:`conformance.pure_drt`), the machine (:mod:`conformance.machine.variants`),
the exhaustive checker's alphabet and the crash workloads; the vector cases use the constants.
The edges, one kind per group:

- **code points versus UTF-16**: a character outside the Basic Multilingual Plane is one code
  point and two UTF-16 code units (:data:`NON_BMP`);
- **lone surrogates**, which JSON text carries as ``\\ud800`` escapes and UTF-8 cannot
  (:data:`LONE_SURROGATES`);
- **characters some line splitters end a line at** (Python's ``str.splitlines``, JavaScript's
  ``/^/m``), while JSONL ends a line only at ``\\n``: U+2028, U+2029 and U+0085 appear raw inside
  JSON strings, ``\\r``, ``\\x0b`` and ``\\x0c`` only escaped (:data:`LINE_BREAKERS`);
- **integer-valued floats** where an integer is expected: ``1.0`` is the integer 1 (D5);
- **the safe-integer bound**: ``2**53 - 1`` and its negative are safe, ``2**53`` is not (as JSON
  text it is a double, not a safe integer);
- **booleans where numbers are expected**: ``true`` is not ``1``;
- **content arrays with several blocks**, and block types no rule knows;
- **optional keys absent versus null**: an absent key is JavaScript's ``undefined``, ``null`` is a
  value the rules judge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, TypeVar

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


# --- strategies: events and logs --------------------------------------------------------------------

LOG_STEPS: Final = (
    "turn/start",
    "turn/end",
    "step/start",
    "step/end",
    "user",
    "user",
    "assistant",
    "assistant",
    "tool/call",
    "tool/result",
    "tool/result",
    "summary",
    "rewrite",
    "compaction/start",
    "compaction/summary",
    "compaction/end",
    "end-seed",
    "unknown",
    "chunk",
)
MODEL_SOURCE: Final[JsonObject] = {"kind": "model", "provider": "p", "model": "m"}


def tool_result_data(
    call: str, inner: list[JsonValue], turn: JsonValue, step: JsonValue, flag: str
) -> JsonObject:
    """A tool/result's data answering ``call`` with ``inner`` content; its block's ``isError`` is
    absent, ``null`` or a boolean as ``flag`` says."""
    block: JsonObject = {"type": "tool-result", "toolCallId": call, "content": inner}
    if flag != "absent":
        block["isError"] = None if flag == "null" else flag == "true"
    message: JsonObject = {
        "id": f"r-{call}",
        "role": "user",
        "source": {"kind": "tool", "callId": call},
        "content": [block],
    }
    return {"turn": turn, "step": step, "message": message}


@st.composite
def logs(draw: st.DrawFn, max_events: int = 10, large_results: bool = False) -> list[JsonValue]:
    """A log as an agent loop writes one, numbered from 0: turns, steps, messages with several
    content blocks, tool calls and results (sized around the prune thresholds when
    ``large_results``), summaries and prune-like rewrites replacing nodes of the surface, compaction
    brackets, end-seed markers, unknown types; it often ends inside a turn. Seqs are sometimes
    integral floats, and a few logs have one field set to an edge value."""
    events: list[JsonValue] = []
    nodes: list[int] = []
    results: list[int] = []
    turn, step, calls = 0, 0, [str(draw(st.sampled_from(("c0", NON_BMP))))]
    time = draw(st.sampled_from((1000, 0, SAFE_BOUND)))
    for seq in range(draw(st.integers(0, max_events))):
        kind = draw(st.sampled_from(LOG_STEPS))
        number: JsonValue = float(turn) if draw(st.integers(0, 5)) == 0 else turn
        extra: JsonObject = {}
        if kind == "turn/start":
            turn, step = turn + 1, 0
            data: JsonValue = {"turn": turn}
        elif kind == "turn/end":
            data = {
                "turn": max(turn, 1),
                "reason": {"kind": draw(st.sampled_from(("completed", "interrupted")))},
            }
        elif kind == "step/start":
            step += 1
            data = {"turn": number, "step": step}
        elif kind == "step/end":
            data = {"turn": number, "step": step}
        elif kind == "user":
            kind, extra = "user/message", {"surfaceOp": "append"}
            content = draw(content_blocks())
            data = {"id": f"u{seq}", "role": "user", "source": {"kind": "user"}, "content": content}
        elif kind == "assistant":
            kind, extra = "assistant/message", {"surfaceOp": "append"}
            announced = [f"c{seq}-{index}" for index in range(draw(st.integers(0, 2)))]
            calls += announced
            blocks: list[JsonValue] = draw(content_blocks(3))
            blocks += [
                {"type": "tool-call", "id": call, "name": "read", "arguments": "{}"} for call in announced
            ]
            message: JsonObject = {
                "id": f"a{seq}",
                "role": "assistant",
                "source": MODEL_SOURCE,
                "content": draw(st.permutations(blocks)),
            }
            data = {"turn": number, "step": step, "message": message}
        elif kind == "tool/call":
            data = {"turn": number, "step": step, "callId": draw(st.sampled_from(calls)), "name": "read"}
        elif kind == "tool/result":
            kind, extra = "tool/result", {"surfaceOp": "append"}
            inner = draw(pruned_text_blocks() if large_results and draw(st.booleans()) else content_blocks())
            flag = draw(st.sampled_from(("absent", "null", "true", "false")))
            data = tool_result_data(draw(st.sampled_from(calls)), inner, number, step, flag)
            results.append(seq)
        elif kind == "summary" and nodes:
            first = draw(st.integers(0, len(nodes) - 1))
            last = draw(st.integers(first, len(nodes) - 1))
            span: list[JsonValue] = list(nodes[first : last + 1])
            kind = "user/message"
            data = {
                "id": f"sum{seq}",
                "role": "user",
                "source": {"kind": "compact"},
                "content": [text_block("summary")],
            }
            extra = {
                "surfaceOp": {"op": "replace", "start": span[0], "end": span[-1]},
                "sourceEventSeqs": span,
            }
        elif kind == "rewrite" and [node for node in results if node in nodes]:
            target = draw(st.sampled_from([node for node in results if node in nodes]))
            original: Any = events[target]
            shown: Any = original["data"]["message"]
            block = shown["content"][0]
            kind = "tool/result"
            inner = [text_block(draw(texts()))]
            data = {**original["data"], "message": {**shown, "content": [{**block, "content": inner}]}}
            extra = {
                "surfaceOp": {"op": "replace", "start": target, "end": target},
                "sourceEventSeqs": [target],
            }
        elif kind == "compaction/start":
            data = {"compactionId": "k1", "turn": turn if turn and draw(st.booleans()) else None}
        elif kind == "compaction/summary" and nodes:
            data = {
                "compactionId": "k1",
                "turn": None,
                "shadowedRange": {"start": nodes[0], "end": nodes[-1]},
                "shadowedSeqs": list(nodes),
                "shadowedTokenCount": draw(safe_integers(0, 10_000)),
            }
        elif kind == "compaction/end":
            data = {"compactionId": "k1", "turn": None, **({"error": "x"} if draw(st.booleans()) else {})}
        elif kind == "end-seed":
            kind, data = "session/end-seed", {}
        elif kind == "chunk":
            kind = "assistant/chunk"
            data = {
                "turn": number,
                "step": step,
                "chunk": {"type": "text-delta", "index": 0, "text": draw(texts(4))},
            }
        else:
            kind = draw(st.sampled_from(("custom/x", "todo/write", "compaction/prune")))
            data = draw(json_objects(4)) if kind != "compaction/prune" else _metering(nodes, draw)
        event: JsonObject = {"type": kind, "seq": seq, "time": time, "data": data, **extra}
        events.append(event)
        _apply_surface(nodes, seq, extra.get("surfaceOp"))
    if events and draw(st.integers(0, 3)) == 0:
        _damage_one(draw, events)
    return events


def _metering(nodes: list[int], draw: st.DrawFn) -> JsonValue:
    target = nodes[-1] if nodes else 0
    tokens = draw(safe_integers(0, 10_000))
    return {
        "shadowedRange": {"start": target, "end": target},
        "shadowedSeqs": [target],
        "shadowedTokenCount": tokens,
    }


def _apply_surface(nodes: list[int], seq: int, op: JsonValue) -> None:
    if op == "append":
        nodes.append(seq)
    elif isinstance(op, dict) and op.get("start") in nodes and op.get("end") in nodes:
        first, last = nodes.index(int(op["start"])), nodes.index(int(op["end"]))  # type: ignore[arg-type]
        nodes[first : last + 1] = [seq]


ENVELOPE_EDGES: Final = ("seq", "time", "data", "surfaceOp", "sourceEventSeqs", "type", "ignorable")


def _damage_one(draw: st.DrawFn, events: list[JsonValue]) -> None:
    """One field of one event set to an edge value (or removed), or the seq given as a float."""
    index = draw(st.integers(0, len(events) - 1))
    event = events[index]
    assert isinstance(event, dict)
    key = draw(st.sampled_from(ENVELOPE_EDGES))
    how = draw(st.sampled_from(("float", "edge", "absent", "null")))
    changed = dict(event)
    if how == "absent":
        changed.pop(key, None)
    elif how == "null":
        changed[key] = None
    elif how == "float" and key == "seq":
        changed["seq"] = float(index)
    else:
        edges: tuple[JsonValue, ...] = (*NUMBER_EDGES, *NOT_NUMBERS)
        changed[key] = draw(st.one_of(st.sampled_from(edges), seq_like(len(events))))
    events[index] = changed


def surface_nodes(events: list[JsonValue]) -> st.SearchStrategy[list[JsonValue]]:
    """Nodes for a log: its surface as a writer would keep it (the appends and replaces folded),
    mostly; else any seqs of it, out-of-range seqs and edge values among them."""
    nodes: list[int] = []
    for event in events:
        seq = event.get("seq") if isinstance(event, dict) else None
        if isinstance(event, dict) and isinstance(seq, int):
            _apply_surface(nodes, seq, event.get("surfaceOp"))
    folded: list[JsonValue] = list(nodes)
    seqs = st.integers(-1, len(events) + 1)
    plain = st.lists(st.one_of(seqs, seqs.map(float)), max_size=6)
    edged = st.builds(lambda items, edge: [*items, edge], plain, seq_like(len(events) + 1))
    anything = mostly(plain, edged, odds=2)
    return mostly(st.just(folded), st.one_of(st.permutations(folded), anything), odds=2)


__all__ = [
    "ABSENT_OR_NULL",
    "EDGE_CHARACTERS",
    "EDGE_TEXTS",
    "IMAGE_BLOCK",
    "INTEGRAL_FLOATS",
    "LINE_BREAKERS",
    "LONE_SURROGATES",
    "NON_BMP",
    "NOT_NUMBERS",
    "NUMBER_EDGES",
    "PRUNE_SIZES",
    "SAFE_BOUND",
    "SAFE_EDGES",
    "UNKNOWN_BLOCK",
    "UNSAFE_INTEGER",
    "WORKLOAD_TEXTS",
    "content_blocks",
    "finite_floats",
    "identifiers",
    "json_objects",
    "json_scalars",
    "json_values",
    "logs",
    "mostly",
    "numbers",
    "pruned_text_blocks",
    "safe_integers",
    "seq_like",
    "sized_text",
    "surface_nodes",
    "text_block",
    "texts",
    "tool_result_data",
    "with_optional",
]
