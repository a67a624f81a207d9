"""The inputs of the ``pure-drt`` family (:mod:`conformance.pure_drt`): for each function of the
``call`` table, a strategy drawing structured inputs near the rule's boundaries four times in five
and inputs from the whole JSON value domain otherwise (:mod:`conformance.strategies`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Final

from hypothesis import strategies as st

from conformance import strategies as values
from spec.format.json_text import encode_json_text
from spec.format.naming import encode_header_line
from spec.log.json import JsonObject, JsonValue

Inputs = st.SearchStrategy[JsonObject]


# --- the inputs ------------------------------------------------------------------------------------


def anything(*keys: str) -> Inputs:
    """An input of the whole JSON domain: each key absent or any value, and now and then a key no
    row names."""
    return values.with_optional({}, {key: values.json_values() for key in (*keys, "other")})


def either(structured: Inputs, *keys: str) -> Inputs:
    """Structured inputs four times in five, the whole domain otherwise."""
    return values.mostly(structured, anything(*keys))


@st.composite
def log_and_nodes(draw: st.DrawFn, large: bool = False, seq: bool = False) -> JsonObject:
    events = draw(values.logs(large_results=large))
    drawn: JsonObject = {"events": events, "nodes": draw(values.surface_nodes(events))}
    if seq:
        nodes = drawn["nodes"]
        choices = st.sampled_from(nodes) if isinstance(nodes, list) and nodes else values.seq_like(3)
        drawn["seq"] = draw(st.one_of(choices, values.seq_like(len(events) + 1)))
    return drawn


def prune_configs() -> st.SearchStrategy[JsonValue]:
    """Prune configurations near their rules' edges: defaults, sizes that exactly fit the threshold,
    edge numbers, unknown keys, null."""
    sizes = st.one_of(
        st.sampled_from((0, 1, 5, 50, 1024, 4096, 8192, 9000, -1, 2.0, 0.5, True, None, "5")),
        values.numbers(),
    )
    keyed = values.with_optional({}, {"thresholdChars": sizes, "headChars": sizes, "tailChars": sizes})
    fitting = st.builds(
        lambda head, tail, slack: {
            "thresholdChars": head + 39 + tail + slack,
            "headChars": head,
            "tailChars": tail,
        },
        st.integers(0, 50),
        st.integers(0, 50),
        st.sampled_from((0, 0, 1, 8000)),
    )
    usual = st.one_of(st.none(), fitting, st.just({"thresholdChars": 9000}), keyed)
    return values.mostly(usual, values.json_values(), 3)


def exact_configs() -> st.SearchStrategy[JsonValue]:
    """``plan_pruned_content``'s config, taken as given: safe integers (the defaults most often)."""
    default = {"thresholdChars": 8192, "headChars": 4096, "tailChars": 1024}
    small = st.fixed_dictionaries(
        {key: st.integers(0, 60) for key in ("thresholdChars", "headChars", "tailChars")}
    )
    return values.mostly(st.one_of(st.just(default), small), prune_configs(), odds=3)


@st.composite
def valid_headers(draw: st.DrawFn, version: int = 4) -> JsonObject:
    """A header every rule accepts, its optional fields present or not."""
    header: JsonObject = {
        "version": version,
        "id": draw(values.identifiers()),
        "createdAt": draw(values.safe_integers(0)),
    }
    optional: Mapping[str, st.SearchStrategy[JsonValue]] = {
        "cwd": st.sampled_from(("/work", "/a//b", "/", f"/{values.NON_BMP}/\u2028", "/C:\\x")),
        "parentSession": values.identifiers(),
        "seedLength": st.one_of(values.safe_integers(0, 20), st.just(3.0)),
        "origin": st.just("subagent"),
        "agentPreset": values.texts(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            header[key] = draw(strategy)
    if version == 4 or draw(st.booleans()):
        header["delegationDepth"] = draw(st.sampled_from((0, 1, 2, 1.0)))
    if version == 4:
        header["isSeeded"] = draw(st.booleans())
    if draw(st.integers(0, 3)) == 0:
        header["extra"] = draw(values.json_values(4))
    return header


def header_records(version: int = 4) -> st.SearchStrategy[JsonObject]:
    """Headers: valid ones most of the time, else a valid one with one field at an edge, or one
    with every field near its edges."""
    edged = st.one_of(one_edge_headers(version), edge_headers(version))
    return values.mostly(valid_headers(version), edged, odds=2)


# Per header field, values a slip takes for valid: integral floats, booleans for numbers, 2**53,
# null for absent, the wrong type.
HEADER_EDGES: Final[Mapping[str, tuple[JsonValue, ...]]] = {
    "version": (4.0, "4", True, 5, None),
    "createdAt": (*values.NUMBER_EDGES, True, False, "0", None),
    "cwd": ("relative", "", None, 5, f"/{values.NON_BMP}"),
    "parentSession": (None, 5, ""),
    "seedLength": (*values.NUMBER_EDGES, True, False, None),
    "origin": ("other", None),
    "delegationDepth": (True, False, 1.0, -1, values.UNSAFE_INTEGER, None),
    "agentPreset": (None, 5),
    "isSeeded": (0, 1, "true", None),
}


@st.composite
def one_edge_headers(draw: st.DrawFn, version: int = 4) -> JsonObject:
    """A valid header with exactly one field set to an edge value (:data:`HEADER_EDGES`)."""
    header = draw(valid_headers(version))
    key = draw(st.sampled_from(sorted(HEADER_EDGES)))
    header[key] = draw(st.sampled_from(HEADER_EDGES[key]))
    return header


@st.composite
def edge_headers(draw: st.DrawFn, version: JsonValue = 4) -> JsonObject:
    """A header near its rules' edges: every optional field absent, null or drawn."""
    session_id = draw(values.identifiers())
    required: Mapping[str, st.SearchStrategy[JsonValue]] = {
        "version": values.mostly(st.just(version), st.sampled_from((4, 4.0, 0, 5, "4", True, None)), 2),
        "id": st.one_of(st.just(session_id), values.identifiers()),
        "createdAt": st.one_of(values.safe_integers(0), st.sampled_from(values.NUMBER_EDGES)),
    }
    optional: Mapping[str, st.SearchStrategy[JsonValue]] = {
        "cwd": st.sampled_from(("/work", "/a//b", "relative", "/", f"/{values.NON_BMP}", "C:\\x")),
        "parentSession": values.identifiers(),
        "seedLength": st.one_of(values.safe_integers(0, 20), st.sampled_from(values.NUMBER_EDGES)),
        "origin": st.sampled_from(("subagent", "other")),
        "delegationDepth": st.one_of(values.safe_integers(0, 3), st.sampled_from((1.0, True, -1))),
        "agentPreset": values.texts(),
        "isSeeded": st.one_of(st.booleans(), st.sampled_from((0, 1, "true"))),
        "extra": values.json_values(4),
    }
    return draw(values.with_optional(required, optional))


@st.composite
def header_lines(draw: st.DrawFn) -> JsonObject:
    version = draw(st.sampled_from((4, 0)))
    header = draw(header_records(version))
    line = dict(encode_header_line(header)) if draw(st.booleans()) else {"type": "session", **header}
    if draw(st.integers(0, 6)) == 0:
        line[draw(st.sampled_from(("sandboxMode", "type")))] = draw(values.json_scalars())
    drawn: JsonObject = {"line": line}
    if draw(st.booleans()):
        drawn["sessionId"] = header["id"] if draw(st.booleans()) else draw(values.identifiers())
    if draw(st.booleans()):
        drawn["fileName"] = draw(
            st.sampled_from(
                ("session.v4.jsonl.zstd", "session.v4.jsonl", "session.jsonl.zstd", "session.jsonl", "x.log")
            )
        )
    return drawn


@st.composite
def chunk_rows(draw: st.DrawFn) -> JsonValue:
    """DSH v0's packed chunk rows, most fields near their edges."""
    kind = draw(st.sampled_from(("text-chunks", "reasoning-chunks", "tool-call-chunks", "custom/x")))
    members = draw(st.lists(values.texts(4), max_size=4))
    gap: st.SearchStrategy[JsonValue] = st.one_of(
        values.safe_integers(0, 9), st.sampled_from((1.0, True, -1))
    )
    gaps = st.lists(gap, max_size=4)
    data: JsonObject = {"turn": 1, "step": 1, "index": draw(st.sampled_from((0, 1, 1.0, -1)))}
    dt: list[JsonValue] = [1] * max(len(members) - 1, 0)
    data["dt"] = dt if draw(st.booleans()) else draw(gaps)
    data["args" if kind == "tool-call-chunks" else "texts"] = list[JsonValue](members)
    if kind == "tool-call-chunks":
        data.update(id=draw(st.sampled_from(("c1", 1, None))), name="read")
    row: JsonObject = {
        "type": kind,
        "seq0": draw(values.seq_like(9)),
        "time0": draw(values.numbers()),
        "data": data,
    }
    if draw(st.integers(0, 5)) == 0:
        row[draw(st.sampled_from(("extra", "data", "seq0")))] = draw(values.json_scalars())
    return row


@st.composite
def jsonl_texts(draw: st.DrawFn) -> str:
    """A plain log as text: a header line, records (events with edge texts, chunk rows), then
    perhaps a damaged line, a torn last line cut at any point, or a line end other than ``\\n``."""
    header = draw(header_records(draw(st.sampled_from((4, 0)))))
    lines = [encode_json_text(encode_header_line(header))]
    events = draw(values.logs(max_events=4))
    records: list[JsonValue] = [*events, *draw(st.lists(chunk_rows(), max_size=1))]
    lines += [encode_json_text(record) for record in records]
    if draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
    ends = st.sampled_from(("\n", "\n", "\n", "\r\n", "\u2028"))
    text = "".join(line + draw(ends) for line in lines)
    if draw(st.booleans()):
        torn = encode_json_text(draw(values.logs(max_events=1)) or {"type": "x"})
        text += torn[: draw(st.integers(0, len(torn)))]
    return text


@st.composite
def compressed_frames(draw: st.DrawFn) -> JsonObject:
    """A zstd log's frames as a reader has them decompressed: a plain log's text cut into frames,
    at line ends (the writer's frame per flush: the header line alone first) or anywhere (a log
    compressed whole by a tool), empty frames among them, and perhaps the last one torn."""
    text = draw(jsonl_texts())
    if draw(st.booleans()):  # the writer's form: the header line, then whole lines per frame
        lines = text.splitlines(keepends=True)
        cuts = [0, *(i for i in range(1, len(lines)) if i == 1 or draw(st.booleans())), len(lines)]
        pieces = ["".join(lines[a:b]) for a, b in itertools.pairwise(cuts)]
    else:
        cuts = sorted(set(draw(st.lists(st.integers(0, len(text)), max_size=4))))
        bounds = [0, *cuts, len(text)]
        pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    frames: list[JsonValue] = []
    offset = draw(st.integers(0, 3))
    for piece in pieces:
        frames.append({"offset": offset, "text": piece})
        offset += len(piece.encode("utf-8", "surrogatepass")) // 2 + 9  # a frame is smaller, never empty
    torn_last = draw(st.booleans())
    torn = frames.pop() if frames and torn_last else None
    return {"frames": frames, "torn": torn}


@st.composite
def v0_records(draw: st.DrawFn) -> list[JsonValue]:
    """Records after a v0 header: events in the current and the legacy vocabulary (steering
    messages, messages from before identity, legacy turn/end reasons), chunk rows, unknown types."""
    records = list(draw(values.logs(max_events=5)))
    for _ in range(draw(st.integers(0, 2))):
        seq = len(records)
        legacy: JsonObject = draw(
            st.sampled_from(
                (
                    {
                        "type": "user/message",
                        "data": {"content": [values.text_block("old")], "source": {"kind": "user"}},
                        "surfaceOp": "append",
                    },
                    {
                        "type": "steering/message",
                        "data": {"turn": 1, "content": [values.text_block("w")], "source": {"kind": "user"}},
                        "surfaceOp": "append",
                    },
                    {
                        "type": "turn/end",
                        "data": {
                            "turn": 1,
                            "reason": {"kind": draw(st.sampled_from(("disposed", "error", "completed")))},
                        },
                    },
                    {"type": "custom/x", "data": {}, "ignorable": draw(st.sampled_from((True, False, None)))},
                    {"type": "mode/set", "data": {"mode": "plan"}},
                )
            )
        )
        records.append(
            {
                "type": legacy["type"],
                "seq": seq,
                "time": 5,
                **{k: v for k, v in legacy.items() if k != "type"},
            }
        )
    if draw(st.booleans()):
        row = draw(chunk_rows())
        if isinstance(row, dict):
            row["seq0"] = len(records)
        records.append(row)
    return records


@st.composite
def shadow_steps(draw: st.DrawFn) -> JsonObject:
    events = draw(values.logs(max_events=6))
    event: JsonValue = (
        draw(st.sampled_from(events)) if events else {"type": "x", "seq": 0, "time": 0, "data": {}}
    )
    tokens: st.SearchStrategy[JsonValue] = st.one_of(
        values.safe_integers(0, 100), st.sampled_from((1.5, True, None))
    )
    seqs = st.integers(0, max(len(events) - 1, 0))
    complete = st.fixed_dictionaries({"start": seqs, "end": seqs, "tokens": st.integers(0, 100)})
    edged = values.with_optional(
        {}, {"start": values.seq_like(8), "end": values.seq_like(8), "tokens": tokens}
    )
    claim: st.SearchStrategy[JsonValue] = st.one_of(st.none(), values.mostly(complete, edged))
    return {"claim": draw(claim), "event": event}


def checker_inputs() -> Inputs:
    @st.composite
    def build(draw: st.DrawFn) -> JsonObject:
        events = draw(values.logs())
        drawn: JsonObject = {"events": events}
        if draw(st.booleans()):
            drawn["header"] = draw(st.one_of(header_records(), st.none(), values.json_values(3)))
        if draw(st.booleans()):
            drawn["relational"] = draw(st.sampled_from((True, False, None, 0)))
        if draw(st.integers(0, 3)) == 0:
            drawn["formatVersion"] = draw(st.sampled_from((4, 0, 4.0, 1, True)))
        return drawn

    return build()


def spill_inputs() -> Inputs:
    edges: tuple[JsonValue, ...] = (0, 1, 12500, -1, 1.0, 0.5, True, "5")
    limits: st.SearchStrategy[JsonValue] = st.one_of(st.sampled_from(edges), values.numbers())
    not_booleans: tuple[JsonValue, ...] = (0, None, "true")
    has_store: st.SearchStrategy[JsonValue] = values.mostly(st.booleans(), st.sampled_from(not_booleans))
    return values.with_optional(
        {"hasStore": has_store}, {"maxInlineTokens": values.mostly(values.safe_integers(0, 20000), limits, 1)}
    )


@st.composite
def copy_inputs(draw: st.DrawFn) -> JsonObject:
    """A source log and what the destination holds: nothing, the same log, or one near it (another
    header, a prefix or a longer log, one event replaced)."""
    header, events = draw(header_records()), draw(values.logs())
    near: tuple[JsonValue, ...] = (
        None,
        {"header": header, "events": events},
        {"header": draw(header_records()), "events": events},
        {"header": header, "events": events[:-1]},
        {"header": header, "events": draw(values.logs())},
    )
    found = draw(st.sampled_from(near))
    return {"header": header, "events": events, "found": found}


@st.composite
def json_texts(draw: st.DrawFn) -> JsonObject:
    """A JSON text as ``text`` or as UTF-8 ``bytes``: a value's own line most of the time, else
    that line cut or with a byte changed, or any text at all."""
    line = encode_json_text(draw(values.json_values()))
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(line)))
        line = draw(st.sampled_from((line[:cut], line[:cut] + draw(values.texts(3)) + line[cut:], line)))
    text = draw(values.mostly(st.just(line), values.texts(), odds=3))
    if draw(st.booleans()):
        data = text.encode("utf-8", "surrogatepass")
        return {"bytes": list(draw(values.mostly(st.just(data), st.binary(max_size=12), odds=3)))}
    return {"text": text}


@st.composite
def header_rows(draw: st.DrawFn) -> JsonObject:
    """A header row to read back under its key: the text written for a header most of the time,
    else any text; the header's own id for key most of the time, else any text."""
    header = draw(header_records())
    key = header["id"] if isinstance(header.get("id"), str) else draw(values.texts())
    text = draw(values.mostly(st.just(encode_json_text(header)), values.texts()))
    return {"key": draw(values.mostly(st.just(key), values.texts())), "text": text}


@st.composite
def event_rows(draw: st.DrawFn) -> JsonObject:
    """An event row to read back at its place: the text written for an event of a log most of
    the time, else any text; the event's own seq for the row's key most of the time."""
    events = draw(values.logs(max_events=3)) or [{"seq": 0, "type": "x"}]
    position = draw(st.integers(0, len(events) - 1))
    event = events[position]
    seq = event.get("seq") if isinstance(event, dict) else position
    return {
        "sessionId": draw(values.texts()),
        "position": position,
        "seq": draw(values.mostly(st.just(seq), values.seq_like(4))),
        "text": draw(values.mostly(st.just(encode_json_text(event)), values.texts())),
    }


@st.composite
def unknown_commits(draw: st.DrawFn) -> JsonObject:
    """Rows a writer still holds after a commit it never heard of, and the rows found stored past
    the durable count: a prefix of the pending ones most of the time, else others."""
    events: list[JsonValue] = [encode_json_text(event) for event in draw(values.logs(max_events=4))]
    cut = draw(st.integers(0, len(events)))
    others: st.SearchStrategy[list[JsonValue]] = st.lists(values.texts(), max_size=3)
    found = draw(values.mostly(st.just(events[:cut]), others))
    return {"sessionId": draw(values.texts()), "found": found, "pending": events}


INPUTS: Final[Mapping[str, Callable[[], Inputs]]] = {
    "spec.surface.fold_surface": lambda: either(
        st.builds(lambda events: {"events": events}, values.logs()), "events"
    ),
    "spec.pairing.derive_cut_balance": lambda: either(log_and_nodes(), "nodes", "events"),
    "spec.pairing.is_balanced_before": lambda: either(log_and_nodes(seq=True), "nodes", "events", "seq"),
    "spec.pairing.is_balanced_after": lambda: either(log_and_nodes(seq=True), "nodes", "events", "seq"),
    "spec.prune.decode_prune_config": lambda: st.builds(lambda config: {"config": config}, prune_configs()),
    "spec.prune.plan_pruned_content": lambda: either(
        st.fixed_dictionaries(
            {
                "blocks": st.one_of(values.pruned_text_blocks(), values.content_blocks()),
                "config": exact_configs(),
            }
        ),
        "blocks",
        "config",
    ),
    "spec.prune.plan_prune_events": lambda: either(
        st.builds(
            lambda drawn, config: {**drawn, "config": config}, log_and_nodes(large=True), prune_configs()
        ),
        "nodes",
        "events",
        "config",
    ),
    "spec.tokens.price_surface": lambda: either(log_and_nodes(), "nodes", "events"),
    "spec.tokens.fold_shadow_price": lambda: either(shadow_steps(), "claim", "event"),
    "spec.checker.check_log": lambda: either(checker_inputs(), "events", "header"),
    "spec.repair.derive_closers": lambda: either(
        st.builds(lambda events: {"events": events}, values.logs()), "events"
    ),
    "spec.storage.encode_segment": lambda: either(st.builds(lambda text: {"id": text}, values.texts()), "id"),
    "spec.storage.encode_project_key": lambda: either(
        st.builds(lambda text: {"cwd": "/" + text}, values.texts())
        | st.builds(lambda text: {"cwd": text}, values.texts()),
        "cwd",
    ),
    "spec.storage.derive_session_relpath": lambda: either(
        st.fixed_dictionaries(
            {"header": header_records()}, optional={"compressed": st.sampled_from((True, False, None, 0))}
        ),
        "header",
        "compressed",
    ),
    "spec.storage.decode_header_line": lambda: either(header_lines(), "line", "sessionId", "fileName"),
    "spec.chunk_rows.decode_storage_record": lambda: either(
        st.builds(lambda row: {"record": row}, chunk_rows()), "record"
    ),
    "spec.framing.decode_jsonl_log": lambda: either(
        st.builds(lambda text: {"text": text}, jsonl_texts()), "text"
    ),
    "spec.framing.decode_compressed_log": lambda: either(compressed_frames(), "frames", "torn"),
    "spec.framing.place_compressed_log": lambda: either(compressed_frames(), "frames", "torn"),
    "spec.legacy.upgrade_v0_records": lambda: either(
        st.fixed_dictionaries({"sessionId": values.identifiers(), "records": v0_records()}),
        "sessionId",
        "records",
    ),
    "spec.header.validate_header": lambda: either(
        st.builds(
            lambda header: {
                "sessionId": header.get("id", "s") if isinstance(header.get("id"), str) else "s",
                "header": header,
            },
            header_records(),
        ),
        "sessionId",
        "header",
    ),
    "spec.spill.plan_max_inline_tokens": lambda: either(spill_inputs(), "maxInlineTokens", "hasStore"),
    "spec.transfer.plan_session_copy": lambda: either(copy_inputs(), "header", "events", "found"),
    "spec.projection.derive_projection_changes": lambda: either(
        st.builds(lambda events: {"unit": "sessionDigest", "events": events}, values.logs()), "unit", "events"
    ),
    "spec.json_text.decode_json_text": lambda: either(json_texts(), "text", "bytes"),
    "spec.json_text.encode_json_text": lambda: either(
        st.builds(lambda value: {"value": value}, values.json_values()), "value"
    ),
    "spec.tables.encode_header_row": lambda: either(
        st.builds(lambda h: {"header": h}, header_records()), "header"
    ),
    "spec.tables.encode_event_row": lambda: either(
        st.builds(lambda events: {"event": events[0] if events else {}}, values.logs(max_events=2)), "event"
    ),
    "spec.tables.decode_header_row": lambda: either(header_rows(), "key", "text"),
    "spec.tables.decode_event_row": lambda: either(event_rows(), "sessionId", "position", "seq", "text"),
    "spec.tables.plan_layout_migration": lambda: either(
        st.builds(lambda found: {"found": found}, st.one_of(st.none(), st.integers(-2, 6))), "found"
    ),
    "spec.tables.plan_unknown_commit": lambda: either(unknown_commits(), "sessionId", "found", "pending"),
}
