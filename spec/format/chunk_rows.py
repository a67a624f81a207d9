"""Packed chunk rows, read-only: DSH v0 logs may store a run of streamed deltas as one row, which
a reader expands back into the ``assistant/chunk`` events it stands for (notes/dsh-session-core
§13.1; notes/dsh-persistence §3.2). This project never writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from spec.codes import Code, SpecError, reject
from spec.log.json import FrozenDict, JsonObject, JsonValue, is_event_seq, is_json_number, is_safe_integer

# Row tag -> the delta chunk type its members decode to.
CHUNK_ROW_TAGS: Final = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_ROW_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_ROW_DATA_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})


def decode_storage_record(value: JsonValue, where: str | None = None, frozen: bool = True) -> list[JsonValue]:
    """One stored v0 record gives the events it holds: an object tagged ``text-chunks``,
    ``reasoning-chunks`` or ``tool-call-chunks`` is a packed row, validated strictly and expanded
    into its ``assistant/chunk`` members; any other value is one event, passed through unchecked
    (notes/dsh-session-core §13.1). ``where`` (the row's line in its file) goes into the message
    of a malformed row; not ``frozen``, the members are plain objects (:func:`expand_chunk_row`)."""
    tag = value.get("type") if isinstance(value, dict) else None
    if not (isinstance(tag, str) and tag in CHUNK_ROW_TAGS):  # is_named, inlined: once per record
        return [value]
    assert isinstance(value, dict)
    try:
        members = validate_chunk_row(tag, value)
    except SpecError as error:
        if where is None:
            raise
        raise reject(
            error.code, error.message.replace(" storage row:", f" storage row at {where}:", 1)
        ) from None
    return expand_chunk_row(tag, value, members, frozen)


def validate_chunk_row(tag: str, row: JsonObject) -> list[str]:
    """A packed row is exactly ``{type, seq0, time0, data}`` with ``seq0`` an event seq and
    ``time0`` a safe integer; ``data`` is exactly ``{turn, step, index, dt, texts}`` (text and
    reasoning) or ``{turn, step, index, id, name?, dt, args}`` (tool call, string id and name);
    turn/step/index are numbers; the members are a non-empty string array; ``dt`` holds one safe
    integer gap per member after the first; and every member seq and running time stays a safe
    integer. Returns the members (notes/dsh-session-core §13.1)."""
    if set(row) != _ROW_ENVELOPE_KEYS:
        raise _malformed_row(tag, "envelope must be exactly {type, seq0, time0, data}")
    if not is_event_seq(row["seq0"]):
        raise _malformed_row(tag, "seq0 must be a non-negative safe integer")
    if not is_safe_integer(row["time0"]):
        raise _malformed_row(tag, "time0 must be a safe integer")
    data = row["data"]
    # DSH tests "is an object" with typeof, which admits arrays; an array then fails the exact-keys check.
    if not isinstance(data, (dict, list)):
        raise _malformed_row(tag, "data must be an object")
    keys = set(data) if isinstance(data, dict) else set()
    if tag == "tool-call-chunks":
        with_name = keys == _TOOL_ROW_DATA_KEYS | {"name"}
        if not with_name and keys != _TOOL_ROW_DATA_KEYS:
            raise _malformed_row(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
        assert isinstance(data, dict)
        if not isinstance(data["id"], str) or (with_name and not isinstance(data["name"], str)):
            raise _malformed_row(tag, "id (and name when present) must be strings")
        payload_key = "args"
    else:
        if keys != _TEXT_ROW_DATA_KEYS:
            raise _malformed_row(tag, "data must be exactly {turn, step, index, dt, texts}")
        assert isinstance(data, dict)
        payload_key = "texts"
    members = _validate_run_data(tag, data, payload_key)
    _validate_run_bounds(tag, _as_int(row["seq0"]), _as_int(row["time0"]), _gaps_of(data), len(members))
    return members


def _validate_run_data(tag: str, data: JsonObject, payload_key: str) -> list[str]:
    if not (is_json_number(data["turn"]) and is_json_number(data["step"]) and is_json_number(data["index"])):
        raise _malformed_row(tag, "turn/step/index must be numbers")
    payload = data[payload_key]
    entries = payload if isinstance(payload, list) else []
    members = [entry for entry in entries if isinstance(entry, str)]
    if not members or len(members) != len(entries):
        raise _malformed_row(tag, f"{payload_key} must be a non-empty string array")
    gaps = data["dt"]
    if not isinstance(gaps, list):
        raise _malformed_row(tag, "dt must be an array of safe integers")
    for gap in gaps:  # a loop, not all() over a generator: a row is read per stored record (issue 24)
        if not is_safe_integer(gap):
            raise _malformed_row(tag, "dt must be an array of safe integers")
    if len(gaps) != len(members) - 1:
        raise _malformed_row(tag, f"dt length {len(gaps)} does not match {len(members)} members")
    return members


def _validate_run_bounds(tag: str, seq0: int, time0: int, gaps: list[int], count: int) -> None:
    if not is_safe_integer(seq0 + count - 1):
        raise _malformed_row(tag, "member seqs must stay safe integers")
    time = time0
    for gap in gaps:
        time += gap
        if not is_safe_integer(time):
            raise _malformed_row(tag, "member times must stay safe integers")


def expand_chunk_row(
    tag: str, row: JsonObject, members: Sequence[str], frozen: bool = True
) -> list[JsonValue]:
    """Member ``k`` of a valid row is ``{type: "assistant/chunk", seq: seq0 + k, time: time0 plus
    the first k gaps, data: {turn, step, chunk}}``, the chunk carrying the row's index (and, for a
    tool call, its id and name) and the member text (notes/dsh-persistence §3.2). Each event is
    built frozen (its leaves are the row's scalars and strings), so a reader that freezes what it
    reads finds nothing left to freeze (issue 24: a v0 log's first sight); not ``frozen``, as plain
    objects, for a reader that judges the events unfrozen and keeps none of them (issue 24: a
    first resume makes no frozen copy of the three objects it has just built for each member)."""
    data = row["data"]
    assert isinstance(data, dict)
    gaps = _gaps_of(data)
    seq, time = _as_int(row["seq0"]), _as_int(row["time0"])
    delta, turn, step, index = CHUNK_ROW_TAGS[tag], data["turn"], data["step"], data["index"]
    tool_call = tag == "tool-call-chunks"
    events: list[JsonValue] = []
    for k, member in enumerate(members):
        if k > 0:
            time += gaps[k - 1]
        chunk: JsonObject = {"type": delta, "index": index}
        if tool_call:
            chunk["id"] = data["id"]
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk["text"] = member
        if frozen:
            body = FrozenDict({"turn": turn, "step": step, "chunk": FrozenDict(chunk)})
            events.append(FrozenDict({"type": "assistant/chunk", "seq": seq + k, "time": time, "data": body}))
        else:
            plain: JsonObject = {"turn": turn, "step": step, "chunk": chunk}
            events.append({"type": "assistant/chunk", "seq": seq + k, "time": time, "data": plain})
    return events


def _as_int(value: JsonValue) -> int:
    # Integral floats count as the integer they equal (D5); output seqs and times are ints.
    assert isinstance(value, (int, float))
    return int(value)


def _gaps_of(data: JsonObject) -> list[int]:
    # Integral floats count as the integer they equal (D5), as in _as_int; the row was validated.
    gaps = data["dt"]
    assert isinstance(gaps, list)
    return [int(gap) for gap in gaps]  # type: ignore[arg-type]


def _malformed_row(tag: str, why: str) -> Exception:
    return reject(Code.MALFORMED_CHUNK_ROW, f"malformed {tag} storage row: {why}")
