"""Seed validation: the checks an inherited or restored event passes before it enters a session
(notes/dsh-session-core §1.3, §1.4, §4.2).

A seed is stricter than ``append``: besides the envelope and the surface rules it checks the shape
of every message and every ``request/header``, because a seed comes from outside the process (a
fork, a resume, a caller) and must be replayable. ``append`` builds its own envelope and checks no
message shape (§5.4); that asymmetry is DSH's and is kept (§14.1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeAlias, cast

from spec.codes import Code, SpecError, reject
from spec.log.events import (
    ASSISTANT_MESSAGE,
    END_SEED,
    ENVELOPE_KEYS,
    REQUEST_HEADER,
    REQUEST_HEADER_DELTA,
    SURFACE_EVENT_TYPES,
    TOOL_RESULT,
    USER_MESSAGE,
    Event,
    event_data,
    is_named,
)
from spec.log.json import (
    MAX_SAFE_INTEGER,
    NOT_JSON,
    FrozenDict,
    JsonValue,
    freeze_parsed_json,
    is_event_seq,
    is_safe_integer,
    js_text,
    snapshot_json,
)
from spec.log.provenance import validate_provenance
from spec.log.surface import APPEND, SurfacePlan, plan_surface_event
from spec.log.unclosed import find_active_compaction

MESSAGE_EVENT_TYPES: Final = frozenset({USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT})
ADAPTER_DEFAULT_KEYS: Final = frozenset({"reasoningEffort", "maxTokens"})

SeedMode: TypeAlias = Literal["snapshot", "shared", "restore", "restore-kept"]
"""How a seed's entries are taken (:func:`take_seed_event`): ``snapshot``, copied into the lossless
JSON domain; ``shared``, a prefix of a live session's log (a fork's seed); ``restore``, freshly
parsed JSON frozen in place; ``restore-kept``, a restore whose caller keeps each entry's stored
text."""
RESTORE_MODES: Final = frozenset({"restore", "restore-kept"})


def validate_seed_event(index: int, source: object, mode: SeedMode, message_checked: bool = False) -> Event:
    """Seed entry ``index`` becomes a frozen event after, in order: the JSON snapshot (snapshot
    mode), the ownership freeze (restore mode; skipped when the caller keeps the entry's stored
    text, ``restore-kept``) or nothing (a shared seed's frozen entry), the envelope check with the
    legacy ``request/header-delta`` check first, the LLM-shape checks (a restored entry whose
    message the storage read path checked already, ``message_checked``, is not checked twice:
    :func:`validate_seed_llm_shape`), the legacy ``fallback`` reason check, and ``seq == index``
    (notes/dsh-session-core §1.3, §4.2 steps 1-4)."""
    event = take_seed_event(index, source, mode)
    validate_seed_envelope(index, event)
    validate_seed_llm_shape(index, event, message_checked and mode in RESTORE_MODES)
    validate_seed_request_header_reason(index, event)
    validate_seed_seq(index, event)
    return event


LOG_ONLY_ENVELOPE_KEYS: Final = ENVELOPE_KEYS - {"surfaceOp", "sourceEventSeqs"}
_NO_RUN_TYPES: Final = frozenset({REQUEST_HEADER, REQUEST_HEADER_DELTA})


def take_seed_run(
    seed: Sequence[object], start: int, mode: SeedMode, messages_checked: int
) -> tuple[int, list[int]]:
    """How many seed entries from index ``start`` on, in a row, pass every per-event rule
    (:func:`validate_seed_event`, the entry taken as it is, then :func:`plan_seed_surface` against
    the seed before them) as log-only events (no plan) or as appends (an :class:`AppendPlan`) whose
    message a stored log's read path checked (index below ``messages_checked``), with the seqs
    of those appends, in order (what their plans put on the surface). The per-event rules decided
    for a run of entries in one call (issue 24: a resume folds 100k stored events, four in five
    log-only and most others appends, and each rule's own call per event was most of the fold); the fold
    (:func:`spec.log.session.fold_seed`) keeps such a run as it is and judges the entry that ends
    it rule by rule, so every verdict, code and message stays the per-event rules'.

    Such an entry, taken as it is (``restore-kept``: a ``dict`` or a :class:`FrozenDict`;
    ``shared``: a :class:`FrozenDict`, and no append, whose message a fork's seed has checked
    by no read path; no run in the other modes, which copy or freeze each entry), has a ``data``,
    ``ignorable`` absent or ``true``, an int ``seq`` equal to its index, an int ``time`` that is a
    safe integer, and a string ``type`` that is not ``request/header`` nor the retired
    ``request/header-delta``; then either the type is not surface-eligible and the entry has only
    the keys of a log-only envelope (no ``surfaceOp``, no ``sourceEventSeqs``), or it is
    surface-eligible, has only envelope keys, its ``surfaceOp`` is ``"append"`` and
    :func:`spec.log.provenance.validate_provenance` passes it with nothing shadowed. Anything else
    ends the run, even where the per-event rules would pass it (an integral float seq or time, a
    replace): the fold judges that entry by them."""
    taken = (dict, FrozenDict) if mode == "restore-kept" else (FrozenDict,) if mode == "shared" else ()
    checked = messages_checked if mode == "restore-kept" else 0
    entries = cast(Sequence[Event], seed)  # what each entry is, asked of its type just below
    appended: list[int] = []
    index, end = start, len(entries)
    while index < end:
        entry = entries[index]
        if type(entry) not in taken:
            break
        kind, seq, time = entry.get("type"), entry.get("seq"), entry.get("time")
        if (
            type(kind) is not str
            or kind in _NO_RUN_TYPES
            or type(seq) is not int
            or seq != index
            or type(time) is not int
            or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
            or "data" not in entry
        ):
            break
        # Its type, seq, time and data are there: four keys are the log-only envelope's, exactly.
        if len(entry) != 4 and "ignorable" in entry and entry["ignorable"] is not True:
            break
        if kind not in SURFACE_EVENT_TYPES:
            if len(entry) != 4 and not LOG_ONLY_ENVELOPE_KEYS.issuperset(entry):
                break
        else:
            if index >= checked or entry.get("surfaceOp") != APPEND or not ENVELOPE_KEYS.issuperset(entry):
                break
            if "sourceEventSeqs" in entry:  # none cited and nothing shadowed: nothing to judge
                try:
                    validate_provenance(entry, ())
                except SpecError:
                    break  # judged rule by rule, which names it as the per-event rules do
            appended.append(index)
        index += 1
    return index - start, appended


def take_seed_event(index: int, source: object, mode: SeedMode) -> Event:
    """Snapshot mode copies the entry into the lossless JSON domain; restore mode takes ownership of
    freshly parsed JSON and freezes it in place, with no JSON check (§4.2 step 1, §14.2). Either
    way the entry must be an object: ``None``, a scalar or an array is an invalid envelope (§14.16).

    A restore whose caller keeps each entry's stored text (``restore-kept``) judges the parsed entry
    as it is, unfrozen: the caller drops it once judged and hands out only fresh frozen readings of
    that text, so no judged entry is ever held by anyone (D6 holds: what is handed out is frozen;
    the verdict is the same, since freezing changes no value).

    A *shared* seed is a prefix of a live session's own log (a fork's seed): its entries are events
    a session state holds, frozen all the way down and in the lossless domain since they entered
    it, so a frozen entry is taken as it is and the child holds the parent's very objects, which
    nobody can change (D6 asks that what is handed out cannot change, not that it be a copy). Any
    other entry of a shared seed is snapshotted as in snapshot mode."""
    if mode == "shared" and type(source) is FrozenDict:
        return source
    if mode in RESTORE_MODES:
        if not isinstance(source, dict):
            raise _invalid_envelope(index)
        if mode == "restore-kept":
            return source
        frozen = freeze_parsed_json(source)
        assert isinstance(frozen, FrozenDict)
        return frozen
    snapshot = snapshot_json(source)
    if snapshot is NOT_JSON:
        raise reject(Code.SEED_NOT_JSON, f"seed event at index {index} is not losslessly JSON-serializable")
    if not isinstance(snapshot, FrozenDict):
        raise _invalid_envelope(index)
    return snapshot


def validate_seed_envelope(index: int, event: Event) -> None:
    """A seed event is not the retired ``request/header-delta``; its keys are envelope keys only;
    ``type`` is a string, ``seq`` an event seq, ``time`` a safe integer (negative allowed),
    ``data`` present (``null`` allowed) and ``ignorable``, if present, exactly ``true`` (§1.3)."""
    kind = event.get("type")
    if kind == REQUEST_HEADER_DELTA:
        raise reject(
            Code.LEGACY_HEADER_DELTA,
            f"seed event at index {index} uses unsupported legacy request/header-delta format",
        )
    seq, time = event.get("seq"), event.get("time")
    if (
        not ENVELOPE_KEYS.issuperset(event)
        or not isinstance(kind, str)
        or not is_event_seq(seq)
        or not is_safe_integer(time)
        or "data" not in event
        or ("ignorable" in event and event["ignorable"] is not True)
    ):
        raise _invalid_envelope(index)


def validate_seed_llm_shape(index: int, event: Event, message_checked: bool = False) -> None:
    """A seeded ``request/header`` names its provider and model; a seeded message event carries a
    well-formed message (§1.3 step 4, §1.4). ``message_checked``: the event was read from a stored
    log whose read path has checked that very message by the same rule
    (:func:`validate_message_shape`, through ``spec.format.legacy.validate_stored_events`` or
    ``upgrade_v0_records``), which refuses the log before any seed is folded, so checking it again
    could never fail and is skipped (issue 24: a resume judges each rule once per event)."""
    kind = event.get("type")
    if kind == REQUEST_HEADER:
        validate_request_header_shape(index, event.get("data"))
    elif not message_checked and is_named(kind, MESSAGE_EVENT_TYPES):
        validate_message_shape(f"seed {kind} at index {index}", event)


def validate_request_header_shape(index: int, data: JsonValue) -> None:
    """``data.header.config`` is an object with non-empty string ``provider`` and ``model``; its
    ``reasoningEffort``, if present, is a non-empty string; ``data.header.adapterDefaults``, if
    present, is an object whose keys are among ``reasoningEffort``/``maxTokens``, each exactly
    ``true`` and each marking a field the config sets (§1.4)."""
    header = data.get("header") if isinstance(data, dict) else None
    config = header.get("config") if isinstance(header, dict) else None
    if not isinstance(header, dict) or not isinstance(config, dict) or not _has_provider_model(config):
        raise reject(
            Code.REQUEST_HEADER_PROVIDER_MODEL, f"seed request/header at index {index} lacks provider/model"
        )
    if "reasoningEffort" in config and not _is_non_empty_string(config["reasoningEffort"]):
        raise reject(
            Code.REQUEST_HEADER_REASONING_EFFORT,
            f"seed request/header at index {index} has an invalid reasoningEffort",
        )
    if "adapterDefaults" in header and not _is_valid_adapter_defaults(header["adapterDefaults"], config):
        raise reject(
            Code.REQUEST_HEADER_ADAPTER_DEFAULTS,
            f"seed request/header at index {index} has invalid adapterDefaults",
        )


def _is_valid_adapter_defaults(markers: JsonValue, config: dict[str, JsonValue]) -> bool:
    if not isinstance(markers, dict):
        return False
    return all(
        key in ADAPTER_DEFAULT_KEYS and value is True and key in config for key, value in markers.items()
    )


def validate_message_shape(subject: str, event: Event) -> None:
    """The message of a message event (``data`` for user/message, ``data.message`` otherwise) has a
    non-empty string ``id``, the role its type requires, a ``source`` object with a non-empty
    ``kind``, and an array ``content``; an assistant's source is a model with provider and model;
    a tool result's source is a tool with a ``callId`` and its content is exactly one
    ``tool-result`` block naming the same call. Other event types pass (§1.4)."""
    kind = event.get("type")
    if not is_named(kind, MESSAGE_EVENT_TYPES):
        return
    data = event.get("data")
    message = data if kind == USER_MESSAGE else (data.get("message") if isinstance(data, dict) else None)
    if not isinstance(message, dict) or not _is_non_empty_string(message.get("id")):
        raise reject(Code.MESSAGE_UNIDENTIFIED, f"{subject} lacks an identified message")
    role = "assistant" if kind == ASSISTANT_MESSAGE else "user"
    if message.get("role") != role:
        raise reject(Code.MESSAGE_ROLE, f'{subject} message must have role "{role}"')
    source = message.get("source")
    if not isinstance(source, dict) or not _is_non_empty_string(source.get("kind")):
        raise reject(Code.MESSAGE_SOURCE, f"{subject} message has invalid source")
    content = message.get("content")
    if not isinstance(content, list):
        raise reject(Code.MESSAGE_CONTENT, f"{subject} message has invalid content")
    if kind == ASSISTANT_MESSAGE and (source["kind"] != "model" or not _has_provider_model(source)):
        raise reject(Code.MESSAGE_MODEL_SOURCE, f"{subject} message must have model source")
    if kind == TOOL_RESULT:
        validate_tool_result_message(subject, source, content)


def validate_tool_result_message(
    subject: str, source: dict[str, JsonValue], content: list[JsonValue]
) -> None:
    """A tool result's source is ``{kind: "tool", callId}`` with a non-empty ``callId``; its content
    is one ``tool-result`` block with an array ``content`` whose ``toolCallId`` is that call (§1.4)."""
    if source.get("kind") != "tool" or not _is_non_empty_string(source.get("callId")):
        raise reject(Code.MESSAGE_TOOL_SOURCE, f"{subject} message must have tool source")
    block = content[0] if len(content) == 1 else None
    if (
        not isinstance(block, dict)
        or block.get("type") != "tool-result"
        or not isinstance(block.get("content"), list)
    ):
        raise reject(Code.MESSAGE_TOOL_BLOCK, f"{subject} message must contain one tool-result block")
    if block.get("toolCallId") != source["callId"]:
        raise reject(Code.MESSAGE_TOOL_CALL_ID_MISMATCH, f"{subject} message has mismatched tool call ids")


def validate_seed_request_header_reason(index: int, event: Event) -> None:
    """A seeded ``request/header`` whose data has ``reason: "fallback"`` is retired vocabulary
    (§1.3, checked after the envelope and LLM-shape checks)."""
    if event.get("type") != REQUEST_HEADER:  # the type first: nearly no event is one
        return
    data = event.get("data")
    if isinstance(data, dict) and data.get("reason") == "fallback":
        raise reject(
            Code.LEGACY_FALLBACK_REASON,
            f'seed event at index {index} uses unsupported legacy request/header reason "fallback"',
        )


def validate_seed_seq(index: int, event: Event) -> None:
    """Seed entry ``index`` has ``seq == index``: a seed is contiguous from 0 (§1.3, §4.2 step 4)."""
    seq = event.get("seq")
    if seq != index:
        raise reject(
            Code.SEED_SEQ_MISMATCH,
            f"seed event at index {index} has seq {js_text(seq)} (expected {index}); seed must be contiguous from 0",
        )


def plan_seed_surface(index: int, nodes: Sequence[int], event: Event, events: Sequence[Event]) -> SurfacePlan:
    """A validated seed event passes the surface rules against the seed before it (§4.2 step 5).
    A rejection keeps its code, and its message gains the prefix
    ``invalid seed event at index {index}: ``, as DSH wraps it; keeping the code (rather than one
    generic seed code) lets a caller tell *which* surface rule the seed broke."""
    try:
        return plan_surface_event(nodes, event, index, events)
    except SpecError as error:
        raise reject(error.code, f"invalid seed event at index {index}: {error.message}") from error


def needs_end_seed(seed_given: bool, events: Sequence[Event]) -> bool:
    """Construction appends ``session/end-seed`` exactly when a seed was given (an empty one counts)
    and the log does not already end with that marker; so replaying a session's own events never
    grows its log (notes/dsh-session-core §4.2 step 5, §4.4)."""
    return seed_given and (len(events) == 0 or events[-1].get("type") != END_SEED)


def validate_end_seed_outside_open_compaction(events: Sequence[Event]) -> None:
    """``session/end-seed`` is never written while a compaction bracket is open, so a seed that is
    about to get the marker must not end inside the live bracket the lock rule sees
    (:func:`spec.log.unclosed.find_active_compaction`). The marker would turn that bracket into a
    stale orphan that nothing ever closes, and the seed promises "compaction/start 和
    compaction/end 永远配对 … 日志里不会出现悬挂的 start". A restored log never trips this: its
    closers close the bracket first (SPEC-DECISIONS D3 item 6)."""
    start = find_active_compaction(events)
    if start is not None:
        compaction_id = event_data(start).get("compactionId")
        raise reject(
            Code.OPEN_COMPACTION,
            f"seed ends inside open compaction {js_text(compaction_id)} (its compaction/start is seq "
            f"{js_text(start.get('seq'))}); inherit a prefix that ends before it or after its compaction/end",
        )


def _invalid_envelope(index: int) -> SpecError:
    return reject(Code.SEED_ENVELOPE_INVALID, f"seed event at index {index} has an invalid event envelope")


def _has_provider_model(record: dict[str, JsonValue]) -> bool:
    return _is_non_empty_string(record.get("provider")) and _is_non_empty_string(record.get("model"))


def _is_non_empty_string(value: object) -> bool:
    return isinstance(value, str) and value != ""
