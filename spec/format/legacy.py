"""Reading DSH v0 logs: the stored records of a version 0 log become this project's events
(SPEC-DECISIONS D1; notes/dsh-persistence §3.5-§3.7, §6.2; notes/dsh-session-core §13.1).

The read path, in order: packed chunk rows are expanded and every event must sit at its own seq;
the retired vocabulary is refused; each event gets the legacy conversions (a ``turn/start``
trigger removed, an old ``turn/end`` reason mapped, ``steering/message`` turned into
``user/message``, a message from before message identity given an id) and its message shape
checked; then an unknown type not marked ``ignorable`` is refused. Nothing is written back: the
conversions happen in memory on every read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from spec.codes import Code, SpecError, reject
from spec.format.chunk_rows import decode_storage_record
from spec.format.framing import (
    DecodedFrame,
    FramedLog,
    Inflate,
    LinePlace,
    decode_header_text,
    decode_zstd_frame,
    decode_zstd_log,
    describe_place,
    scan_zstd_frames,
)
from spec.format.json_text import encode_json_text
from spec.format.naming import decode_header_line
from spec.log.events import (
    ASSISTANT_MESSAGE,
    KNOWN_EVENT_TYPES,
    REQUEST_HEADER,
    REQUEST_HEADER_DELTA,
    TOOL_RESULT,
    TURN_END,
    TURN_START,
    USER_MESSAGE,
    Event,
    is_named,
)
from spec.log.header import LEGACY_FORMAT_VERSION
from spec.log.json import (
    FrozenDict,
    JsonObject,
    JsonValue,
    freeze_parsed_json,
    is_event_seq,
    is_json_number,
    is_safe_integer,
    js_text,
)
from spec.log.seed import MESSAGE_EVENT_TYPES, validate_message_shape

MODE_SET: Final = "mode/set"
STEERING_MESSAGE: Final = "steering/message"
SIMPLE_END_KINDS: Final = frozenset({"completed", "blocked", "max-tokens", "interrupted"})
FAILURE_OPTIONAL_KEYS: Final = ("status", "providerRetryAfterMs", "requestId")
RETIRED_TYPES: Final = frozenset({REQUEST_HEADER_DELTA, MODE_SET, REQUEST_HEADER})
"""The types of :func:`validate_no_retired_vocabulary`'s retired forms."""
CONVERTED_TYPES: Final = frozenset({TURN_START, TURN_END, STEERING_MESSAGE, *MESSAGE_EVENT_TYPES})
"""The types the legacy conversions look at (each conversion passes any other event unchanged)."""


def upgrade_v0_records(
    session_id: str, records: Sequence[JsonValue], places: Sequence[LinePlace] = (), frozen: bool = True
) -> tuple[Event, ...]:
    """The stored records of a v0 log (the lines after its header, parsed) become frozen events:
    rows expanded and seqs checked (:func:`decode_v0_events`), retired vocabulary refused, each
    event converted and its message shape checked in log order, then unknown types refused
    (notes/dsh-persistence §3.5, §3.6). ``places`` (one per record, from the framing) puts the
    file line and byte of the offending record into every refusal. Not ``frozen``: for a caller
    that only judges the events and hands none out (a checker), each event is left as parsed and
    converted, unfrozen (freezing changes no value, so every verdict is the same; issue 24)."""
    candidates: list[int] = []
    events, record_of = decode_v0_events(records, places, candidates, frozen)
    where = _event_places(places, record_of)
    validate_no_retired_vocabulary(session_id, events, where, candidates)
    upgraded: list[Event] = []
    message_ids = _MessageIds(upgraded)  # the ids of the events upgraded so far, read when asked
    all_known = True  # asked here as each event is upgraded, not in a pass of its own (issue 24)
    for index, event in enumerate(events):
        kind = event.get("type")
        # An event of no converted type passes every conversion and the shape rule unchanged, so
        # they are not asked (issue 24: a first sight reads every event once).
        if isinstance(kind, str) and kind in CONVERTED_TYPES:
            try:
                # Each conversion passes every type but its own, and only a steering message's
                # changes its type (to a user message, which the next one reads): each event is
                # asked only the conversions of its type, in their order (issue 24).
                if kind == TURN_START:
                    event = upgrade_turn_start(session_id, event)
                elif kind == TURN_END:
                    event = upgrade_turn_end(session_id, event)
                else:
                    if kind == STEERING_MESSAGE:
                        event = upgrade_steering_message(session_id, event)
                    event = upgrade_pre_identity_message(session_id, event, message_ids)
                    # The other types pass the shape rule: no subject to name.
                    if is_named(event.get("type"), MESSAGE_EVENT_TYPES):
                        validate_stored_message(event)
            except SpecError as error:
                raise reject(error.code, error.message + where(index)) from None
        if frozen:
            taken = freeze_parsed_json(event)
            assert isinstance(taken, FrozenDict)
            event = taken
        upgraded.append(event)
        all_known = all_known and is_known_event(event)
    if not all_known:  # after every conversion: the first unknown event is named by the rule's own pass
        validate_known_event_types(session_id, upgraded, where)
    return tuple(upgraded)


def validate_stored_events(
    session_id: str, events: Sequence[Event], places: Sequence[LinePlace] = ()
) -> None:
    """Events read from a v4 log need no conversion; each message event must have a well-formed
    message, as a restore requires (notes/dsh-persistence §3.6). Unlike a v0 log, a v4 log may hold
    event types this reader does not know: its writer (this project's Session, like DSH's) accepts
    any type, and refusing a log this project wrote would lose what it stored. The refusal of
    unknown types protects a reader of DSH's v0 logs from vocabulary newer than it (§3.5).
    ``places`` (one per event: a v4 record is one event) locates a refusal in the file."""
    where = _event_places(places, range(len(events)))
    for index, event in enumerate(events):
        kind = event.get("type")
        if not (isinstance(kind, str) and kind in MESSAGE_EVENT_TYPES):  # the shape rule passes the others
            continue  # (is_named, inlined: it runs on every stored event)
        try:
            validate_stored_message(event)
        except SpecError as error:
            raise reject(error.code, error.message + where(index)) from None


def validate_stored_message(event: Event) -> None:
    """A stored message event's message is well formed (:func:`spec.log.seed.validate_message_shape`),
    a refusal naming it ``session event at seq N``: the name is written only for a refusal (issue
    24: a read path checks every message of a log)."""
    try:
        validate_message_shape("", event)
    except SpecError:
        validate_message_shape(f"session event at seq {js_text(event.get('seq'))}", event)
        raise  # not reached: the same rule refuses the same event again, named


@dataclass(frozen=True)
class DecodedLog:
    """A stored log read: its format version, its v4 header, the committed events and those
    recovered from a torn final frame's complete blocks (they follow on)."""

    format_version: int
    header: FrozenDict
    events: tuple[Event, ...]
    recovered: tuple[Event, ...]


def decode_stored_log(session_id: str | None, stored: FramedLog, file_name: str | None = None) -> DecodedLog:
    """A framed log's events: the header line decides the version (:func:`decode_header_line`,
    which checks it against ``session_id`` and ``file_name`` when given); v4 records are taken as
    they are (:func:`decode_v4_events`) and their messages checked (:func:`validate_stored_events`),
    v0 records go through the legacy read path (:func:`upgrade_v0_records`). A refusal names its
    record's place (``stored.places``)."""
    version, header = decode_header_line(stored.header_line, session_id, file_name)
    header_id = str(header["id"])
    if version == LEGACY_FORMAT_VERSION:
        events = upgrade_v0_records(header_id, stored.records + stored.recovered, stored.places)
        recovered = sum(len(decode_storage_record(record)) for record in stored.recovered)
        committed = len(events) - recovered
        return DecodedLog(version, header, tuple(events[:committed]), tuple(events[committed:]))
    committed_events = decode_v4_events(stored.records, 0, stored.places)
    recovered_events = decode_v4_events(stored.recovered, len(committed_events), stored.places)
    validate_stored_events(header_id, committed_events + recovered_events, stored.places)
    return DecodedLog(version, header, committed_events, recovered_events)


def decode_listed_header(data: bytes, compressed: bool, inflate: Inflate, file_name: str) -> FrozenDict:
    """The header a store's listing shows for one log file is its header line alone, read by
    :func:`decode_header_line` against the file's name; nothing after it is read, so a log damaged
    past its header line is listed (its ``read`` names the damage; SPEC-DECISIONS D2's ``list``,
    a listing without a full-log parse). The header line is the first non-skippable zstd frame,
    which must be complete, inflate whole and hold exactly that line (:func:`decode_zstd_log`), or
    the text before a plain log's first line break; a log without one is ``CORRUPT_LOG``."""
    if compressed:
        frames = [frame for frame in scan_zstd_frames(data).frames if not frame.skippable]
        if not frames:
            raise reject(Code.CORRUPT_LOG, "empty or header-less Zstandard session log")
        first = frames[0]
        plaintext = decode_zstd_frame(data[first.offset : first.offset + first.length], first.offset, inflate)
        line = decode_zstd_log([DecodedFrame(first.offset, plaintext)], None).header_line
    else:
        line_end = data.find(b"\n")
        if line_end < 0:
            raise reject(Code.CORRUPT_LOG, "empty or header-less session log")
        line = decode_header_text(data[:line_end])
    return decode_header_line(line, file_name=file_name)[1]


def derive_session_listing(headers: Iterable[FrozenDict]) -> list[FrozenDict]:
    """A store's listing (SPEC-DECISIONS D2's ``list``) is one header per stored log whose header
    line reads (:func:`decode_listed_header`), in ascending order of ``id`` by code point, and two
    logs naming one id (a store's damage) by their headers' compact JSON text. Which sessions it
    holds is what is stored, whatever the order the store keeps them in."""
    return sorted(headers, key=lambda header: (str(header["id"]), encode_json_text(header)))


def decode_v4_events(
    records: Sequence[JsonValue], first_seq: int = 0, places: Sequence[LinePlace] = ()
) -> tuple[Event, ...]:
    """A v4 log's records are its events as they are, each an object whose ``seq`` runs on from
    ``first_seq`` by one (SPEC-DECISIONS D1); otherwise the log is corrupt: a gap in complete
    records is damage, not a torn tail (D3). ``places`` (indexed by seq: a v4 record is one event)
    names a refusal's place in the file."""
    events: list[Event] = []
    for offset, record in enumerate(records):
        expected = first_seq + offset
        if not isinstance(record, dict) or not is_event_seq(record.get("seq")) or record["seq"] != expected:
            got = record.get("seq") if isinstance(record, dict) else record
            where = f" at {describe_place(places[expected])}" if expected < len(places) else ""
            raise reject(
                Code.CORRUPT_LOG,
                f"corrupt session log: seq gap in committed region{where}: expected seq {expected}, got {got}",
            )
        frozen = freeze_parsed_json(record)
        assert isinstance(frozen, FrozenDict)
        events.append(frozen)
    return tuple(events)


def decode_v0_events(
    records: Sequence[JsonValue],
    places: Sequence[LinePlace] = (),
    retired: list[int] | None = None,
    frozen: bool = True,
) -> tuple[list[JsonObject], list[int]]:
    """Each stored record gives its events (:func:`spec.format.chunk_rows.decode_storage_record`), and each
    event is an object whose ``seq`` equals its position in the log; otherwise the log is corrupt
    (notes/dsh-persistence §6.2). DSH tolerates a seq gap after the last ``turn/end`` as a torn
    tail; under SPEC-DECISIONS D3 a complete record never comes from a crash, so a gap is damage.
    Returns the events and, for each, the index of the record it came from (without ``places``,
    none: nothing names a place then). A refusal names the record's file line: its ``places``
    entry, or else its line counted from the header (line 1), one record per line. ``retired``,
    when given, gets the index of every event of a retired form's type (:func:`is_of_retired_type`,
    the only events :func:`validate_no_retired_vocabulary` searches: issue 24, a pass less). Not
    ``frozen``, a packed row's members are plain objects, as the records are
    (:func:`upgrade_v0_records`)."""
    events: list[JsonObject] = []
    record_of: list[int] = []
    placed = bool(places)
    for index, record in enumerate(records):
        try:
            decoded = decode_storage_record(record, None, frozen)
        except SpecError:  # read again, naming the row's place (named only when needed: issue 24)
            decoded = decode_storage_record(record, _record_place(places, index))
        for event in decoded:
            if not isinstance(event, dict):
                raise reject(
                    Code.CORRUPT_LOG,
                    f"corrupt session log: record at {_record_place(places, index)} is not an event object",
                )
            seq = event.get("seq")
            if seq != len(events) or type(seq) is bool:
                raise reject(
                    Code.CORRUPT_LOG,
                    f"corrupt session log: seq gap in committed region at {_record_place(places, index)}: "
                    f"expected seq {len(events)}, got {js_text(event.get('seq', 'undefined'))}",
                )
            if retired is not None and is_of_retired_type(event):
                retired.append(len(events))
            events.append(event)
            if placed:
                record_of.append(index)
    return events, record_of


def _record_place(places: Sequence[LinePlace], index: int) -> str:
    """Record ``index``'s place: its ``places`` entry, or its line counted from the header (line 1)."""
    return describe_place(places[index]) if index < len(places) else f"line {index + 2}"


def _event_places(places: Sequence[LinePlace], record_of: Sequence[int]) -> Callable[[int], str]:
    """For an event's index, the suffix that names its record's place (nothing without places)."""

    def where(index: int) -> str:
        record = record_of[index] if index < len(record_of) else None
        if record is None or record >= len(places):
            return ""
        return f", at {describe_place(places[record])}"

    return where


def validate_no_retired_vocabulary(
    session_id: str,
    events: Sequence[JsonObject],
    where: Callable[[int], str] = lambda index: "",
    candidates: Sequence[int] | None = None,
) -> None:
    """A stored log must not hold the retired ``request/header-delta`` or ``mode/set`` events, nor
    a ``request/header`` with reason ``fallback``; the whole log is searched for each in that
    order (notes/dsh-persistence §1.2 step 2, §3.6). ``where`` gives an event's place suffix.
    ``candidates``: the indices, in order, of the events :func:`is_of_retired_type` holds, when
    the caller found them as it read the log (:func:`decode_v0_events`)."""
    retired: tuple[tuple[Code, str, Callable[[JsonObject], bool]], ...] = (
        (
            Code.LEGACY_HEADER_DELTA,
            "request/header-delta event",
            lambda event: event.get("type") == REQUEST_HEADER_DELTA,
        ),
        (Code.LEGACY_MODE_SET, "mode/set event", lambda event: event.get("type") == MODE_SET),
        (
            Code.LEGACY_FALLBACK_REASON,
            'request/header reason "fallback"',
            lambda event: (
                event.get("type") == REQUEST_HEADER
                and isinstance(data := event.get("data"), dict)
                and data.get("reason") == "fallback"
            ),
        ),
    )
    # Each retired form is an event of one of these types: the others are never searched (issue 24).
    if candidates is None:
        candidates = [index for index, event in enumerate(events) if is_of_retired_type(event)]
    found = [(index, events[index]) for index in candidates]
    for code, what, is_retired in retired:
        for index, event in found:
            if is_retired(event):
                raise reject(
                    code,
                    f'session "{session_id}" contains unsupported legacy {what} at seq {_seq(event)}'
                    + where(index),
                )


def is_of_retired_type(event: JsonObject) -> bool:
    """An event's type is one of :data:`RETIRED_TYPES`, those of the retired forms."""
    kind = event.get("type")  # is_named, inlined: it runs on every stored event
    return isinstance(kind, str) and kind in RETIRED_TYPES


def upgrade_turn_start(session_id: str, event: JsonObject) -> JsonObject:
    """A ``turn/start`` whose data has a ``trigger`` must be exactly ``{turn, trigger}`` with
    ``turn`` a safe integer >= 1 and ``trigger`` an object with a non-empty string ``kind``; the
    trigger is dropped (notes/dsh-persistence §3.6)."""
    if event.get("type") != TURN_START:
        return event
    data = _record(event.get("data"))
    if data is None or "trigger" not in data:
        return event
    trigger = _record(data["trigger"])
    if (
        not _is_turn_number(data.get("turn"))
        or set(data) != {"turn", "trigger"}
        or trigger is None
        or not isinstance(trigger.get("kind"), str)
        or trigger["kind"] == ""
    ):
        raise reject(
            Code.LEGACY_MALFORMED_TURN_START,
            f'session "{session_id}" contains malformed pre-react-loop turn/start at seq {_seq(event)}',
        )
    return {**event, "data": {"turn": data["turn"]}}


def upgrade_turn_end(session_id: str, event: JsonObject) -> JsonObject:
    """Every ``turn/end`` is exactly ``{turn, reason}`` with ``turn`` a safe integer >= 1 and a
    ``reason`` object with a string ``kind``. ``completed``, ``blocked``, ``max-tokens`` and
    ``interrupted`` carry nothing else. Old reasons are mapped: ``aborted`` without a cause gets
    the cause ``legacy``; ``disposed`` becomes ``aborted`` with cause ``disposed``; an ``error``
    with a ``step`` and a ``failure`` (or a ``message`` and optional ``code``) becomes ``error``
    with that failure (``code`` defaulting to ``UNKNOWN``). Other kinds pass unchanged
    (notes/dsh-persistence §3.6)."""
    if event.get("type") != TURN_END:
        return event
    data = _record(event.get("data"))
    if data is None:
        return event
    reason = _record(data.get("reason"))
    if (
        not _is_turn_number(data.get("turn"))
        or set(data) != {"turn", "reason"}
        or reason is None
        or not isinstance(reason.get("kind"), str)
    ):
        raise _malformed_turn_end(session_id, event)
    current = derive_current_turn_end_reason(reason)
    if current is None:
        raise _malformed_turn_end(session_id, event)
    if current is reason:
        return event
    return {**event, "data": {**data, "reason": current}}


def derive_current_turn_end_reason(reason: JsonObject) -> JsonObject | None:
    """The current form of a stored ``turn/end`` reason (the very same object when it is current
    already), or ``None`` when it is malformed (notes/dsh-persistence §3.6)."""
    kind = reason["kind"]
    if is_named(kind, SIMPLE_END_KINDS):
        return reason if set(reason) == {"kind"} else None
    if kind == "aborted":
        if "reason" in reason:
            return reason
        return {"kind": "aborted", "reason": {"kind": "legacy"}} if set(reason) == {"kind"} else None
    if kind == "disposed":
        return {"kind": "aborted", "reason": {"kind": "disposed"}} if set(reason) == {"kind"} else None
    if kind == "error":
        return reason if "error" in reason else derive_legacy_error_reason(reason)
    return reason


def derive_legacy_error_reason(reason: JsonObject) -> JsonObject | None:
    """An old ``error`` reason names its ``step`` (a safe integer >= 0) and either exactly a
    ``failure`` ``{message, code, status?, providerRetryAfterMs?, requestId?}`` or a string
    ``message`` with an optional string ``code``; it becomes ``{kind: "error", error}``
    (notes/dsh-persistence §3.6)."""
    step = reason.get("step")
    if not (isinstance(step, (int, float)) and is_safe_integer(step) and step >= 0):
        return None
    failure = _record(reason.get("failure"))
    if failure is not None and set(reason) == {"kind", "step", "failure"} and _is_legacy_failure(failure):
        return {"kind": "error", "error": failure}
    message_keys = {"kind", "step", "message"} | ({"code"} if "code" in reason else set())
    code = reason.get("code", "UNKNOWN")
    if set(reason) != message_keys or not isinstance(reason.get("message"), str) or not isinstance(code, str):
        return None
    return {"kind": "error", "error": {"message": reason["message"], "code": code}}


def _is_legacy_failure(failure: JsonObject) -> bool:
    return (
        {"message", "code"} <= set(failure) <= {"message", "code", *FAILURE_OPTIONAL_KEYS}
        and isinstance(failure["message"], str)
        and isinstance(failure["code"], str)
        and ("status" not in failure or is_json_number(failure["status"]))
        and ("providerRetryAfterMs" not in failure or is_json_number(failure["providerRetryAfterMs"]))
        and ("requestId" not in failure or isinstance(failure["requestId"], str))
    )


def upgrade_steering_message(session_id: str, event: JsonObject) -> JsonObject:
    """A ``steering/message`` becomes a ``user/message``: data exactly ``{turn, message}`` (safe
    integer turn, object message) unwraps to the message; data exactly ``{turn, content, source}``
    becomes ``{content, source, id, role: "user"}`` with the legacy id; anything else is refused
    (notes/dsh-persistence §3.6)."""
    if event.get("type") != STEERING_MESSAGE:
        return event
    data = _record(event.get("data"))
    if data is None:
        raise _malformed_steering(session_id, event)
    wrapped = _record(data.get("message"))
    if wrapped is not None and is_safe_integer(data.get("turn")) and set(data) == {"turn", "message"}:
        return {**event, "type": USER_MESSAGE, "data": wrapped}
    if not is_safe_integer(data.get("turn")) or set(data) != {"turn", "content", "source"}:
        raise _malformed_steering(session_id, event)
    message = {key: value for key, value in data.items() if key != "turn"}
    return {
        **event,
        "type": USER_MESSAGE,
        "data": {**message, "id": legacy_message_id(session_id, event), "role": "user"},
    }


def upgrade_pre_identity_message(
    session_id: str, event: JsonObject, message_ids: Mapping[float, str]
) -> JsonObject:
    """A message event from before message identity gets an id, ``legacy-message:<sessionId>:<seq>``:
    a ``user/message`` with ``content`` and ``source`` but no ``id``/``role``/``message`` gains
    ``id`` and ``role: "user"``; an ``assistant/message`` with ``content`` and ``provenance``
    wraps them into ``message`` (source = the provenance with ``kind: "model"``); a
    ``tool/result`` with ``callId``, ``content`` and ``isError`` wraps them into a ``tool-result``
    message, and a replacing one inherits the id of the message at its replace ``start``
    (``message_ids`` maps seqs to the ids of earlier messages). Current-looking events pass
    unchanged, so that malformed ones fail the shape check (notes/dsh-persistence §3.6)."""
    data = _record(event.get("data"))
    kind = event.get("type")
    if data is None:
        return event
    if kind == USER_MESSAGE:
        if any(key in data for key in ("id", "role", "message")) or not {"content", "source"} <= set(data):
            return event
        return {**event, "data": {**data, "id": legacy_message_id(session_id, event), "role": "user"}}
    if kind == ASSISTANT_MESSAGE:
        if "message" in data or not {"content", "provenance"} <= set(data):
            return event
        rest = {key: value for key, value in data.items() if key not in ("content", "provenance")}
        source = {**(_record(data["provenance"]) or {}), "kind": "model"}
        message: JsonObject = {
            "id": legacy_message_id(session_id, event),
            "role": "assistant",
            "content": data["content"],
            "source": source,
        }
        return {**event, "data": {**rest, "message": message}}
    if kind == TOOL_RESULT:
        if "message" in data or not {"callId", "content", "isError"} <= set(data):
            return event
        return {**event, "data": _wrap_legacy_tool_result(session_id, event, data, message_ids)}
    return event


def _wrap_legacy_tool_result(
    session_id: str, event: JsonObject, data: JsonObject, message_ids: Mapping[float, str]
) -> JsonObject:
    rest = {key: value for key, value in data.items() if key not in ("callId", "content", "isError")}
    call_id = data["callId"]
    message: JsonObject = {}
    start = _replacement_start(event)
    if start is None:
        message["id"] = legacy_message_id(session_id, event)
    elif start in message_ids:
        message["id"] = message_ids[start]
    # A replace of a seq that carried no message id leaves the id absent: the shape check refuses it.
    message["role"] = "user"
    message["content"] = [
        {"type": "tool-result", "toolCallId": call_id, "content": data["content"], "isError": data["isError"]}
    ]
    message["source"] = {"kind": "tool", "callId": call_id}
    return {**rest, "message": message}


def legacy_message_id(session_id: str, event: JsonObject) -> str:
    """The id minted for a message stored before messages had ids (notes/dsh-persistence §3.6)."""
    return f"legacy-message:{session_id}:{_seq(event)}"


def validate_known_event_types(
    session_id: str, events: Sequence[JsonObject], where: Callable[[int], str] = lambda index: ""
) -> None:
    """After conversion, every event's type is one of the 48 DSH knows, or the event is marked
    ``ignorable: true``; an unknown required event might change how the rest of the log reads, so
    the log is refused (notes/dsh-persistence §3.5). ``where`` gives an event's place suffix."""
    for index, event in enumerate(events):
        if is_known_event(event):
            continue
        kind = event.get("type")
        raise reject(
            Code.UNKNOWN_EVENT_TYPE,
            f'session "{session_id}" contains event type "{js_text(kind)}" (seq {_seq(event)}) unknown to this harness '
            "and not marked ignorable; refusing to interpret the log — it was likely written by a newer harness"
            + where(index),
        )


def is_known_event(event: JsonObject) -> bool:
    """An event's type is one of the 48 DSH knows, or the event is marked ``ignorable: true``
    (the rule :func:`validate_known_event_types` holds every converted event to)."""
    kind = event.get("type")  # is_named, inlined: it runs on every converted event
    return (isinstance(kind, str) and kind in KNOWN_EVENT_TYPES) or event.get("ignorable") is True


class _MessageIds(Mapping[float, str]):
    """The seq -> message id map of the events upgraded so far (``upgraded``, where position and
    seq are equal: :func:`decode_v0_events`), each id read from its event when asked: only a
    replacing tool result from before message identity asks, so a log in the current vocabulary
    reads no event's id (issue 24: a first sight upgrades every event once). Any number names
    the event at that seq (``3.0`` is seq 3), as a ``dict`` keyed by int seqs answers it."""

    __slots__ = ("_events",)

    def __init__(self, events: list[Event]) -> None:
        self._events = events

    def _id_at(self, seq: object) -> str | None:
        if type(seq) is float and seq.is_integer():
            seq = int(seq)
        if type(seq) is not int or not 0 <= seq < len(self._events):
            return None
        return _message_id_of(self._events[seq])

    def __getitem__(self, seq: float) -> str:
        message_id = self._id_at(seq)
        if message_id is None:
            raise KeyError(seq)
        return message_id

    def __contains__(self, seq: object) -> bool:
        return self._id_at(seq) is not None

    def __iter__(self) -> Iterator[float]:
        return (seq for seq, event in enumerate(self._events) if _message_id_of(event) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def _message_id_of(event: Event) -> str | None:
    data = event.get("data")
    if not isinstance(data, dict):
        return None
    message = data if event.get("type") == USER_MESSAGE else data.get("message")
    message_id = message.get("id") if isinstance(message, dict) else None
    return message_id if isinstance(message_id, str) else None


def _replacement_start(event: JsonObject) -> int | float | None:
    # Any number counts as a target, as in DSH; a fractional one names no message, so no id is inherited.
    op = _record(event.get("surfaceOp"))
    start = op.get("start") if op is not None and op.get("op") == "replace" else None
    return start if isinstance(start, (int, float)) and not isinstance(start, bool) else None


def _record(value: JsonValue) -> JsonObject | None:
    return value if isinstance(value, dict) else None


def _is_turn_number(value: JsonValue) -> bool:
    return isinstance(value, (int, float)) and is_safe_integer(value) and value >= 1


def _seq(event: JsonObject) -> str:
    return js_text(event.get("seq", "undefined"))


def _malformed_turn_end(session_id: str, event: JsonObject) -> Exception:
    return reject(
        Code.LEGACY_MALFORMED_TURN_END,
        f'session "{session_id}" contains malformed pre-react-loop turn/end at seq {_seq(event)}',
    )


def _malformed_steering(session_id: str, event: JsonObject) -> Exception:
    return reject(
        Code.LEGACY_MALFORMED_MESSAGE,
        f'session "{session_id}" contains malformed pre-react-loop steering/message at seq {_seq(event)}',
    )
