"""The edge inputs every ``pure-drt`` run tries first, before Hypothesis draws its budget
(:mod:`conformance.pure_drt`; Hypothesis's explicit phase).

Random drawing reaches a single edge of a single field rarely: a header valid in every field
but ``delegationDepth: true`` is one input in hundreds. These are those inputs, one edge at a
time, for the rules whose domain slips a port makes (issue 10): each header field at each of
its edges (integral floats, booleans for numbers, 2**53, null for absent, the wrong type);
session ids and cwds with every edge character (UTF-16 versus code points); JSONL text holding
every character some line splitters end a line at, with ``\\n`` and ``\\r\\n`` line ends, and
every edge of JSON text (numbers past and below a double, lone and inverted surrogate escapes, a
byte order mark, 20,000 levels of nesting); logs
with several content blocks, unknown block types, two tool calls in one message, and a seq or
a turn given as an integral float, a boolean or 2**53; tool-result text sized at the prune
thresholds, in one block or split over two.

And the value domain of every typed op argument (:data:`spec.protocol.TYPED_FIELDS`, issue 21
item 5): per field, its request template (:func:`field_template`) with the field at each edge of
its type (:func:`type_edges`); ``pure-drt`` sends each and compares every answer with the
specification's (:func:`conformance.pure_drt.check_fields`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from conformance import strategies as values
from conformance.cases import msg
from conformance.cases.build import NOW, Step, append, ok, start, turn
from conformance.cases.engine_build import LONG, attempt, history
from conformance.cases.spill import open_call
from conformance.cases.tool_rewrite import ORIGINAL, rewrite
from conformance.cases.tool_rewrite import setup as rewrite_setup
from conformance.drt_inputs import HEADER_EDGES
from spec.format.json_text import encode_json_text
from spec.log.events import (
    ASSISTANT_MESSAGE,
    COMPACTION_START,
    END_SEED,
    REQUEST_HEADER_DELTA,
    TOOL_RESULT,
    TURN_END,
    USER_MESSAGE,
)
from spec.log.json import JsonObject, JsonValue
from spec.protocol import FieldType, TypedField

BASE_HEADER: Final[JsonObject] = {
    "version": 4,
    "id": "s",
    "createdAt": 0,
    "delegationDepth": 0,
    "isSeeded": False,
}
EDGE_IDS: Final = ("s", "a/b", "~x", ".", "..", values.NON_BMP, f"id{values.NON_BMP}x", "é开", "\u2028")


def header_edges() -> list[JsonObject]:
    """The base header with one field at one edge, or one required field left out."""
    headers: list[JsonObject] = [
        {**BASE_HEADER, key: edge} for key, edges in HEADER_EDGES.items() for edge in edges
    ]
    headers += [{k: v for k, v in BASE_HEADER.items() if k != key} for key in BASE_HEADER]
    return headers


def event(seq: JsonValue, kind: str, data: JsonObject, surface: bool = True) -> JsonObject:
    return {"type": kind, "seq": seq, "time": 0, "data": data, **({"surfaceOp": "append"} if surface else {})}


def edge_log(
    seq_edge: JsonValue = 1,
    turn_edge: JsonValue = 1,
    call_ids: tuple[JsonValue, JsonValue] = ("c1", "c2"),
    answer_ids: tuple[JsonValue, JsonValue] = ("c1", "c2"),
    user_content: JsonValue | None = None,
) -> list[JsonValue]:
    """A turn with a user message of several blocks (one of a type no rule knows, one astral), an
    assistant message calling two tools and both results, one of them with two inner blocks;
    event 1's seq and the step events' turn are the given edges, the calls' ids ``call_ids``, the
    results answer ``answer_ids``, and ``user_content`` (when given) replaces the user's blocks."""
    blocks: list[JsonValue] = [
        values.text_block(f"wide {values.NON_BMP}"),
        values.UNKNOWN_BLOCK,
        values.IMAGE_BLOCK,
        values.text_block("line\u2028two"),
    ]
    calls: list[JsonValue] = [
        {"type": "tool-call", "id": c, "name": "read", "arguments": "{}"} for c in call_ids
    ]
    assistant: JsonObject = {
        "id": "a",
        "role": "assistant",
        "source": values.MODEL_SOURCE,
        "content": [values.text_block("x"), *calls],
    }
    inner: list[JsonValue] = [values.text_block(values.sized_text(9)), values.UNKNOWN_BLOCK]
    astral: list[JsonValue] = [values.text_block(values.NON_BMP)]
    content = blocks if user_content is None else user_content
    return [
        event(0, "turn/start", {"turn": 1}, surface=False),
        event(
            seq_edge,
            "user/message",
            {"id": "u", "role": "user", "source": {"kind": "user"}, "content": content},
        ),
        event(2, "step/start", {"turn": turn_edge, "step": 1}, surface=False),
        event(3, "assistant/message", {"turn": turn_edge, "step": 1, "message": assistant}),
        event(
            4,
            "tool/result",
            answering(values.tool_result_data("c1", inner, turn_edge, 1, "absent"), answer_ids[0]),
        ),
        event(
            5, "tool/result", answering(values.tool_result_data("c2", astral, 1, 1, "null"), answer_ids[1])
        ),
    ]


def answering(data: JsonObject, call: JsonValue) -> JsonObject:
    """A tool/result's data (:func:`conformance.strategies.tool_result_data`) answering ``call``,
    which may be any JSON value."""
    message = as_object(data["message"])
    content = message["content"]
    assert isinstance(content, list)
    block = {**as_object(content[0]), "toolCallId": call}
    source = {**as_object(message["source"]), "callId": call}
    return {**data, "message": {**message, "source": source, "content": [block]}}


def edge_logs() -> list[list[JsonValue]]:
    """The edge log, with each edge in event 1's seq and in the steps' turn, and with a type that
    is not a string (an array, an object, a number, null) or only looks like ``user/message`` (a
    plugin's ``x-user/message``, ``user/message-x``) on its user message, which any rule reading
    a type must take as an unknown one, never fail on; then with values a host language's
    equality confuses: calls ``1`` and ``0`` answered by ``true`` and ``false`` (and by ``1.0``
    and ``0.0``, which are the same numbers), a user message whose content is ``""`` or ``[]``."""
    edges: tuple[JsonValue, ...] = (1, 1.0, True, values.UNSAFE_INTEGER, None)
    log = edge_log()
    odd_types: tuple[JsonValue, ...] = (
        [1],
        {"type": "user/message"},
        1,
        None,
        *(edge.value for edge in lookalike_types()[:2]),
    )
    return [
        log,
        *(edge_log(seq_edge=e) for e in edges[1:]),
        *(edge_log(turn_edge=e) for e in edges[1:]),
        *([log[0], {**as_object(log[1]), "type": kind}, *log[2:]] for kind in odd_types),
        edge_log(call_ids=(1, 0), answer_ids=(True, False)),
        edge_log(call_ids=(1, 0), answer_ids=(1.0, 0.0)),
        edge_log(user_content=""),
        edge_log(user_content=[]),
    ]


def as_object(value: JsonValue) -> JsonObject:
    assert isinstance(value, dict)
    return value


def jsonl_edges() -> list[JsonObject]:
    """A header line and an event whose text holds one line-breaking character raw, with ``\\n``
    or ``\\r\\n`` line ends."""
    header = encode_json_text({"type": "session", **BASE_HEADER})
    texts: list[JsonObject] = []
    for breaker in (*values.LINE_BREAKERS, values.NON_BMP):
        line = encode_json_text(event(0, "custom/x", {"text": f"a{breaker}b"}, surface=False))
        texts += [{"text": f"{header}{end}{line}{end}"} for end in ("\n", "\r\n")]
    return texts


JSON_TEXT_EDGES: Final = (
    "1e999999",  # past the largest double: refused, never Infinity
    "1" + "0" * 400,
    "[1e-400,-1e-400]",  # below the smallest: 0
    "[0.1000000000000000055511151231257827,9007199254740993]",  # the nearest double
    '["\\ud800","\\udc00","\\udc00\\ud800","\\ud83d\\ude00"]',  # lone, inverted, paired halves
    "[\u0661]",  # a digit outside ASCII
    "[" * 20_000 + "]" * 20_000,  # D6: any depth
)


def json_text_edges() -> list[JsonObject]:
    """A header line and an event whose data is one edge of JSON text (docs/choices.md "JSON
    text's edges"), and the same event after a byte order mark."""
    header = encode_json_text({"type": "session", **BASE_HEADER})
    lines = [f'{{"type":"custom/x","seq":0,"time":0,"data":{data}}}' for data in JSON_TEXT_EDGES]
    lines.append('\ufeff{"type":"custom/x","seq":0,"time":0,"data":{}}')
    return [{"text": f"{header}\n{line}\n"} for line in lines]


def surface_inputs(nodes: bool = False, seq: bool = False) -> list[JsonObject]:
    inputs: list[JsonObject] = []
    for log in edge_logs():
        drawn: JsonObject = {"events": log}
        if nodes:
            drawn["nodes"] = [1, 3, 4, 5]
        if seq:
            drawn["seq"] = 4
        inputs.append(drawn)
    return inputs


def prune_edges() -> list[JsonObject]:
    """Text at the default thresholds, whole or split over two blocks with an unknown block
    between, astral characters included (:func:`conformance.strategies.sized_text`)."""
    inputs: list[JsonObject] = []
    for size in (8191, 8192, 8193, 8200):
        whole: list[JsonValue] = [values.text_block(values.sized_text(size))]
        half = values.sized_text(size // 2)
        split: list[JsonValue] = [
            values.text_block(half),
            values.UNKNOWN_BLOCK,
            values.text_block(half + "x"),
        ]
        inputs += [{"blocks": blocks, "config": DEFAULT_PRUNE} for blocks in (whole, split)]
    return inputs


DEFAULT_PRUNE: Final[JsonObject] = {"thresholdChars": 8192, "headChars": 4096, "tailChars": 1024}
NUMBER_INPUTS: Final[tuple[JsonValue, ...]] = (*values.NUMBER_EDGES, *values.NOT_NUMBERS)

EDGE_INPUTS: Final[Mapping[str, Callable[[], list[JsonObject]]]] = {
    "spec.header.validate_header": lambda: [{"sessionId": "s", "header": h} for h in header_edges()],
    "spec.storage.decode_header_line": lambda: [
        {"line": {"type": "session", **h}, "sessionId": "s"} for h in header_edges()
    ],
    "spec.storage.encode_segment": lambda: [{"id": t} for t in (*EDGE_IDS, *values.EDGE_TEXTS)],
    "spec.storage.encode_project_key": lambda: [{"cwd": f"/{t}"} for t in (*EDGE_IDS, *values.EDGE_TEXTS)],
    "spec.storage.derive_session_relpath": lambda: [
        {"header": {**BASE_HEADER, "id": i, **cwd}, "compressed": c}
        for i in EDGE_IDS
        for cwd in ({}, {"cwd": None}, {"cwd": f"/w/{values.NON_BMP}"})
        for c in (True, False)
    ],
    "spec.framing.decode_jsonl_log": lambda: [*jsonl_edges(), *json_text_edges()],
    "spec.surface.fold_surface": surface_inputs,
    "spec.repair.derive_closers": surface_inputs,
    "spec.checker.check_log": surface_inputs,
    "spec.pairing.derive_cut_balance": lambda: surface_inputs(nodes=True),
    "spec.pairing.is_balanced_before": lambda: surface_inputs(nodes=True, seq=True),
    "spec.pairing.is_balanced_after": lambda: surface_inputs(nodes=True, seq=True),
    "spec.tokens.price_surface": lambda: surface_inputs(nodes=True),
    "spec.prune.plan_pruned_content": prune_edges,
    "spec.prune.decode_prune_config": lambda: [{"config": {"thresholdChars": n}} for n in NUMBER_INPUTS],
    "spec.spill.plan_max_inline_tokens": lambda: [
        {"hasStore": True, "maxInlineTokens": n} for n in NUMBER_INPUTS
    ],
}


# --- the value domain of every typed op argument (spec.protocol.TYPED_FIELDS) ----------------------

LOOKALIKE_OF: Final = (
    USER_MESSAGE,
    ASSISTANT_MESSAGE,
    TOOL_RESULT,
    TURN_END,
    END_SEED,
    COMPACTION_START,
    REQUEST_HEADER_DELTA,
)
"""The known event types some rule treats apart (the surface's three, the closers, the store's
own, the retired vocabulary): a plugin's type that shares one's prefix or suffix is any other type."""


@dataclass(frozen=True)
class Edge:
    """One edge of a field's domain: ``label`` names it in a case and in the coverage table;
    ``absent`` leaves the key out of the request (``value`` is then unused)."""

    label: str
    value: JsonValue
    absent: bool = False


ABSENT_EDGE: Final = Edge("absent", None, absent=True)
NULL_EDGE: Final = Edge("null", None)


def lookalike_types() -> list[Edge]:
    """Unknown type names that share a known type's suffix (``x-tool/result``) or prefix
    (``tool/result-x``)."""
    return [Edge(name, name) for known in LOOKALIKE_OF for name in (f"x-{known}", f"{known}-x")]


Labelled: TypeAlias = tuple[tuple[str, JsonValue], ...]
OTHER_EDGES: Final[Mapping[str, Labelled]] = {
    "boolean": (("1", 1), ("0", 0), ("string true", "true")),
    "string": (("empty string", ""), ("number", 1), ("true", True), ("empty array", [])),
    "json": (("empty string", ""), ("empty array", []), ("empty object", {}), ("0", 0), ("false", False)),
    "array": (("empty object", {}), ("empty string", "")),
    "object": (("empty array", []), ("empty string", "")),
}
"""Per kind of type (:data:`KIND_OF`), what a host language confuses with its values: numbers
for booleans, the empty string and other types for text, the empty or falsy value of every
type for content."""
KIND_OF: Final[Mapping[str, str]] = {"session-id": "string", "event-type": "string"}


def number_edges(number: int) -> Labelled:
    """A number's edges: booleans, ``number`` as an integral float and as a string, 2**53, -1."""
    return (
        ("true", True),
        ("false", False),
        ("integral float", float(number)),
        ("2**53", values.UNSAFE_INTEGER),
        ("minus 1", -1),
        ("number as string", str(number)),
    )


def type_edges(kind: FieldType, usual: JsonValue) -> list[Edge]:
    """The edges of a field of type ``kind`` whose valid value in its request is ``usual``
    (:func:`number_edges`, :data:`OTHER_EDGES`, and for an event type :func:`lookalike_types`),
    each but ``usual`` itself, then null and absent for every field (D5)."""
    if kind in ("integer", "count", "seq"):
        edges = number_edges(usual if isinstance(usual, int) and not isinstance(usual, bool) else 0)
    else:
        edges = OTHER_EDGES[KIND_OF.get(kind, kind)]
    found = [Edge(label, value) for label, value in edges if same_json(value) != same_json(usual)]
    return [*found, NULL_EDGE, ABSENT_EDGE, *(lookalike_types() if kind == "event-type" else [])]


def same_json(value: JsonValue) -> tuple[str, str]:
    """What tells two values apart as the host language must: their JSON and their type (``1``
    and ``1.0`` differ here, as ``true`` and ``1`` do)."""
    return type(value).__name__, encode_json_text(value)


def field_edges(field: TypedField) -> list[Edge]:
    """Every edge of ``field``'s type, from the usual value in its request template."""
    template = field_template(field)
    return type_edges(field.type, read_path(template.request, field.field))


@dataclass(frozen=True)
class FieldTemplate:
    """How a typed field is exercised: ``setup`` (the first a ``reset``) brings the subject to where
    ``request`` is valid; ``after`` reads what it did."""

    setup: tuple[JsonObject, ...]
    request: JsonObject
    after: tuple[JsonObject, ...] = ()


def _requests(steps: Sequence[Step]) -> tuple[JsonObject, ...]:
    return tuple(step.request for step in steps)


def _opened(*steps: Step, storage: str = "none") -> tuple[JsonObject, ...]:
    return _requests([*start(storage), *steps])


def _state(session: str = "s") -> tuple[JsonObject, ...]:
    return ({"op": "state", "id": session},)


APPEND_REQUEST: Final[JsonObject] = {
    "op": "append",
    "id": "s",
    "type": USER_MESSAGE,
    "data": msg.user(),
    "surfaceOp": "append",
}
META: Final[JsonObject] = {
    "createdAt": NOW,
    "cwd": "/w",
    "parentSession": "p",
    "seedLength": 0,
    "origin": "subagent",
    "delegationDepth": 1,
    "agentPreset": "a",
}


def _templates() -> dict[str, FieldTemplate]:
    """The request each op's typed fields are put at their edges in, by op (or ``op.field`` where
    the field needs a request of its own)."""
    # Each batch bound is put at its edges with the other bound at a value every store accepts:
    # a delay of 1 ms is valid for the spec (a non-negative integer, validate_batch_policy) and for
    # a store whose delay must be at least 1 ms (DSH), so a byte-bound case tests the byte bound and
    # is never decided by a refused delay; a delay case names no byte bound at all.
    delay: JsonObject = {"op": "reset", "storage": "memory", "batchMaxDelayMs": 1}
    created = _opened(ok("create", id="s"))
    region = (*_opened(*history(2)), *_requests([turn(3), append(msg.user("u3", LONG))]))
    return {
        "reset.batchMaxDelayMs": FieldTemplate(({"op": "reset"},), delay, (*created[1:], *_state())),
        "reset.batchMaxBytes": FieldTemplate(
            ({"op": "reset"},), {**delay, "batchMaxBytes": 0}, (*created[1:], *_state())
        ),
        "reset.compressed": FieldTemplate(
            ({"op": "reset"},),
            {"op": "reset", "storage": "memory", "compressed": True},
            (*created[1:], *_state()),
        ),
        "clock": FieldTemplate(_opened()[:1], {"op": "clock", "now": NOW}, (*created[2:], *_state())),
        "create": FieldTemplate(
            _opened(), {"op": "create", "id": "t", "seed": [], "meta": META}, _state("t")
        ),
        "append": FieldTemplate((*created, turn().request), APPEND_REQUEST, _state()),
        "append.sourceEventSeqs": FieldTemplate(
            _opened(*rewrite_setup()), rewrite(msg.rewritten(ORIGINAL, "short")), _state()
        ),
        "engine_append": FieldTemplate(
            (*created, turn().request), {**APPEND_REQUEST, "op": "engine_append"}, _state()
        ),
        "fork": FieldTemplate(
            _opened(*history(1)), {"op": "fork", "source": "s", "boundary": 5, "child": "c"}, _state("c")
        ),
        "state": FieldTemplate(created, {"op": "state", "id": "s"}),
        "read": FieldTemplate(
            _opened(ok("create", id="s"), turn(), ok("flush", id="s"), storage="memory"),
            {"op": "read", "id": "s"},
        ),
        "compact": FieldTemplate(
            _opened(*history(2)),
            {"op": "compact", "id": "s", "attempt": attempt("k1"), "sourceCommandId": "cmd"},
            _state(),
        ),
        "compact_region": FieldTemplate(
            region,
            {"op": "compact_region", "id": "s", "start": 1, "end": 9, "attempt": attempt("k1")},
            _state(),
        ),
        "compact_if_needed": FieldTemplate(
            region,
            {
                "op": "compact_if_needed",
                "id": "s",
                "contextWindow": 600,
                "attempts": [attempt("k1"), attempt("k2")],
            },
            _state(),
        ),
        "spill": FieldTemplate(
            _opened(*open_call()),
            {
                "op": "spill",
                "id": "s",
                "toolName": "grep",
                "data": msg.result("c1", "x" * 400),
                "maxInlineTokens": 10,
                "nested": False,
                "storeFails": False,
            },
            _state(),
        ),
        "project": FieldTemplate(
            created,
            {"op": "project", "unit": "sessionDigest", "stateVersion": 1},
            ({"op": "state_of", "id": "s", "unit": "sessionDigest"},),
        ),
        "checkpoint": FieldTemplate(
            _opened(ok("create", id="s"), turn(), storage="memory"),
            {"op": "checkpoint", "id": "s", "moment": "model-request"},
            ({"op": "read", "id": "s"},),
        ),
        "call": FieldTemplate(
            _opened()[:1], {"op": "call", "function": "spec.storage.encode_segment", "input": {"id": "s"}}
        ),
    }


def field_template(field: TypedField) -> FieldTemplate:
    templates = _templates()
    return templates.get(field.name) or templates[field.op]


def read_path(request: JsonObject, path: str) -> JsonValue:
    """The value at dotted ``path`` of ``request`` (``None`` when a key is missing)."""
    value: JsonValue = request
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def with_edge(request: JsonObject, path: str, edge: Edge) -> JsonObject:
    """``request`` with dotted ``path`` at ``edge`` (the key left out for the absent edge)."""
    key, _, rest = path.partition(".")
    if rest:
        inner = request.get(key)
        assert isinstance(inner, dict)
        return {**request, key: with_edge(inner, rest, edge)}
    changed = {k: v for k, v in request.items() if k != key}
    return changed if edge.absent else {**changed, key: edge.value}
