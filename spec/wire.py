"""The JSON form of the pure functions a subject exposes through the protocol's ``call`` op
(conformance/PROTOCOL.md, capability ``pure``).

Some rules are pure functions no session op reaches on its own (pairing balance, pruning, token
pricing, the log checker, repair closers, storage naming and framing, the v0 read path). A
subject in any language exposes them as ``call {function, input}``: ``function`` names the spec
function, ``input`` is a JSON object, the answer is the function's result as JSON or the rule's
code. :data:`WIRE_TABLE` holds one :class:`WireRow` per function: the frozen protocol name (the
module path the function had when protocol version 1 was written), the function itself, and the
adapter that decodes the input, calls the function and encodes the result, as the protocol's
table (generated from these rows) says; :data:`WIRE_FUNCTIONS` is the same rows, name to adapter. The
vector generator (through ``conformance``) and the reference's server both answer ``call`` with
it, so the JSON form is written once.

An input of the wrong shape (an array that is not one, a seq that is not a safe integer) is not a
rule's rejection: it raises :class:`WireInputError`, which a subject answers with the protocol's
``BAD_REQUEST``. Arguments a rule judges (an event, a header, a record, a prune config) are passed
to it as they are, so that the rule, not the adapter, rejects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias

from spec.checks.log import check_log
from spec.format.chunk_rows import decode_storage_record
from spec.format.framing import (
    DecodedFrame,
    FramedLog,
    LinePlace,
    decode_compressed_log,
    decode_jsonl_log,
    place_compressed_log,
)
from spec.format.json_text import decode_json_text, encode_json_text
from spec.format.legacy import upgrade_v0_records
from spec.format.naming import decode_header_line, derive_session_relpath, encode_project_key, encode_segment
from spec.format.tables import (
    decode_event_row,
    decode_header_row,
    encode_event_row,
    encode_header_row,
    plan_layout_migration,
    plan_unknown_commit,
)
from spec.lineage.repair import derive_closers
from spec.lineage.transfer import plan_session_copy
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION, validate_header
from spec.log.json import JsonObject, JsonValue, is_safe_integer
from spec.log.session import ABSENT
from spec.log.surface import SurfaceFold, fold_surface
from spec.projections.digest import SPEC_UNITS
from spec.projections.units import derive_projection_changes
from spec.shrink.pairing import derive_cut_balance, is_balanced_after, is_balanced_before
from spec.shrink.prune import (
    PruneConfig,
    PrunePlan,
    decode_prune_config,
    plan_prune_events,
    plan_pruned_content,
)
from spec.shrink.spill import plan_max_inline_tokens
from spec.shrink.tokens import ShadowClaim, fold_shadow_price, price_surface

Inputs: TypeAlias = Mapping[str, JsonValue]
WireFunction: TypeAlias = Callable[[Inputs], JsonValue]


@dataclass(frozen=True)
class WireRow:
    """One function of the ``call`` table: ``name`` is the protocol's and frozen (subjects call
    it), ``function`` the spec function whose rule it is, ``adapter`` its JSON form, ``input`` and
    ``result`` the JSON it takes and answers, as conformance/PROTOCOL.md's table shows them."""

    name: str
    function: Callable[..., object]
    adapter: WireFunction
    input: str
    result: str


class WireInputError(Exception):
    """A ``call`` input that does not have the shape its function's row gives (the protocol's
    ``BAD_REQUEST``; not a rule's rejection)."""


# --- decoding inputs ----------------------------------------------------------------------------


def decode_array(inputs: Inputs, key: str) -> list[JsonValue]:
    """``inputs[key]``, which must be an array."""
    value = inputs.get(key)
    if not isinstance(value, list):
        raise WireInputError(f"input {key!r} must be an array")
    return value


def decode_object(inputs: Inputs, key: str) -> JsonObject:
    """``inputs[key]``, which must be an object."""
    value = inputs.get(key)
    if not isinstance(value, dict):
        raise WireInputError(f"input {key!r} must be an object")
    return value


def decode_string(inputs: Inputs, key: str) -> str:
    """``inputs[key]``, which must be a string."""
    value = inputs.get(key)
    if not isinstance(value, str):
        raise WireInputError(f"input {key!r} must be a string")
    return value


def decode_strings(inputs: Inputs, key: str) -> list[str]:
    """``inputs[key]``, which must be an array of strings."""
    values = decode_array(inputs, key)
    if not all(isinstance(value, str) for value in values):
        raise WireInputError(f"every entry of input {key!r} must be a string")
    return [str(value) for value in values]


def decode_present(inputs: Inputs, key: str) -> JsonValue:
    """``inputs[key]``, any JSON value (``null`` included), which must be present."""
    if key not in inputs:
        raise WireInputError(f"input {key!r} is missing")
    return inputs[key]


def decode_integer(value: JsonValue, what: str) -> int:
    """A safe integer (an integral float counts, as in JavaScript: D5)."""
    if not is_safe_integer(value):
        raise WireInputError(f"{what} must be a safe integer")
    assert isinstance(value, (int, float))
    return int(value)


def decode_events(inputs: Inputs, key: str = "events") -> list[Event]:
    """An array of event objects; what each event holds is the rules' to judge."""
    events: list[Event] = []
    for entry in decode_array(inputs, key):
        if not isinstance(entry, dict):
            raise WireInputError(f"every entry of input {key!r} must be an object")
        events.append(entry)
    return events


def decode_nodes(inputs: Inputs) -> list[int]:
    """``nodes``: the surface's seqs, an array of safe integers."""
    return [decode_integer(seq, "every node") for seq in decode_array(inputs, "nodes")]


def decode_exact_prune_config(inputs: Inputs) -> PruneConfig:
    """``config`` as ``{thresholdChars, headChars, tailChars}``, taken as given (not validated:
    :func:`spec.shrink.prune.plan_pruned_content` is called with any sizes)."""
    raw = decode_object(inputs, "config")
    sizes = [
        decode_integer(raw.get(key), f"config.{key}") for key in ("thresholdChars", "headChars", "tailChars")
    ]
    return PruneConfig(*sizes)


def decode_shadow_claim(inputs: Inputs) -> ShadowClaim | None:
    """``claim``: null, or ``{start, end, tokens}``."""
    if inputs.get("claim") is None:
        return None
    raw = decode_object(inputs, "claim")
    start, end, tokens = (decode_integer(raw.get(key), f"claim.{key}") for key in ("start", "end", "tokens"))
    return ShadowClaim(start, end, tokens)


# --- encoding results ---------------------------------------------------------------------------


def encode_surface_fold(fold: SurfaceFold) -> JsonValue:
    """``{nodes, replaceGeneration, replacements: [{seq, start, end, shadowed}]}``."""
    replacements: list[JsonValue] = [
        {"seq": r.seq, "start": r.start, "end": r.end, "shadowed": list(r.shadowed)}
        for r in fold.replacements
    ]
    return {
        "nodes": list(fold.nodes),
        "replaceGeneration": fold.replace_generation,
        "replacements": replacements,
    }


def encode_prune_config(config: PruneConfig) -> JsonValue:
    return {
        "thresholdChars": config.threshold_chars,
        "headChars": config.head_chars,
        "tailChars": config.tail_chars,
    }


def encode_prune_plan(plan: PrunePlan) -> JsonValue:
    return {
        "originalSeq": plan.original_seq,
        "callId": plan.call_id,
        "pruneData": plan.prune_data,
        "replacementData": plan.replacement_data,
        "surfaceOp": plan.surface_op,
        "sourceEventSeqs": plan.source_event_seqs,
        "charsBefore": plan.chars_before,
        "charsAfter": plan.chars_after,
    }


def encode_shadow_claim(claim: ShadowClaim | None) -> JsonValue:
    return None if claim is None else {"start": claim.start, "end": claim.end, "tokens": claim.tokens}


# --- the adapters -------------------------------------------------------------------------------


def _fold_shadow_price(inputs: Inputs) -> JsonValue:
    after, delta = fold_shadow_price(decode_shadow_claim(inputs), decode_object(inputs, "event"))
    return {"claim": encode_shadow_claim(after), "delta": delta}


def _check_log(inputs: Inputs) -> JsonValue:
    header = inputs.get("header")
    version = inputs.get("formatVersion", HEADER_FORMAT_VERSION)
    violations = check_log(
        decode_events(inputs),
        header if isinstance(header, dict) else None,
        inputs.get("relational") is not False,
        decode_integer(version, "formatVersion"),
    )
    return [{"rule": violation.rule, "seq": violation.seq} for violation in violations]


def _decode_header_line(inputs: Inputs) -> JsonValue:
    hint, name = inputs.get("sessionId"), inputs.get("fileName")
    version, header = decode_header_line(
        inputs.get("line"), hint if isinstance(hint, str) else None, name if isinstance(name, str) else None
    )
    return {"version": version, "header": header}


def decode_utf8(inputs: Inputs, key: str, what: str | None = None) -> bytes:
    """``inputs[key]``, a string, as the UTF-8 bytes it stands for (a lone surrogate has none)."""
    try:
        return decode_string(inputs, key).encode("utf-8")
    except UnicodeEncodeError:
        raise WireInputError(
            f"input {what or repr(key)} must be UTF-8 text (it holds a lone surrogate)"
        ) from None


def decode_frame(raw: JsonValue, what: str) -> DecodedFrame:
    """A decompressed frame: ``{offset, text}``, its file offset and its plaintext as UTF-8 text."""
    if not isinstance(raw, dict):
        raise WireInputError(f"{what} must be an object")
    return DecodedFrame(
        decode_integer(raw.get("offset"), f"{what}.offset"), decode_utf8(raw, "text", f"{what}.text")
    )


def encode_place(place: LinePlace | None) -> JsonValue:
    return None if place is None else {"line": place.line, "byte": place.byte, "frame": place.frame}


def _decode_jsonl_log(inputs: Inputs) -> JsonValue:
    stored = decode_jsonl_log(decode_utf8(inputs, "text"))
    return {
        "headerLine": stored.header_line,
        "records": list(stored.records),
        "truncateTo": stored.truncate_to,
    }


def decode_frames(inputs: Inputs) -> tuple[list[DecodedFrame], DecodedFrame | None]:
    """A zstd log's ``frames`` and ``torn`` final frame (null: none), each ``{offset, text}``."""
    frames = [decode_frame(raw, "every frame") for raw in decode_array(inputs, "frames")]
    torn = None if inputs.get("torn") is None else decode_frame(inputs.get("torn"), "torn")
    return frames, torn


def _decode_compressed_log(inputs: Inputs) -> JsonValue:
    stored: FramedLog = decode_compressed_log(*decode_frames(inputs))
    return {
        "headerLine": stored.header_line,
        "records": list(stored.records),
        "recovered": list(stored.recovered),
        "truncateTo": stored.truncate_to,
    }


def _place_compressed_log(inputs: Inputs) -> JsonValue:
    places, torn_place = place_compressed_log(*decode_frames(inputs))
    return {"places": [encode_place(place) for place in places], "tornPlace": encode_place(torn_place)}


def _plan_max_inline_tokens(inputs: Inputs) -> JsonValue:
    has_store = inputs.get("hasStore")
    if not isinstance(has_store, bool):
        raise WireInputError("input 'hasStore' must be a boolean")
    return plan_max_inline_tokens(inputs.get("maxInlineTokens", ABSENT), has_store)


def _derive_projection_changes(inputs: Inputs) -> JsonValue:
    unit = SPEC_UNITS.get(decode_string(inputs, "unit"))
    if unit is None:
        raise WireInputError(f"input 'unit' must name a unit of the specification: {sorted(SPEC_UNITS)}")
    state, changed = derive_projection_changes(unit, decode_events(inputs))
    return {"state": state, "changed": list(changed)}


def _plan_session_copy(inputs: Inputs) -> JsonValue:
    raw = inputs.get("found")
    found = None
    if raw is not None:
        held = decode_object(inputs, "found")
        found = (decode_object(held, "header"), decode_events(held))
    return plan_session_copy(decode_object(inputs, "header"), decode_events(inputs), found)


def _decode_json_text(inputs: Inputs) -> JsonValue:
    """Exactly one of ``text`` (a string: the text's code units, a lone surrogate included) and
    ``bytes`` (an array of byte values: the text as bytes, read as UTF-8)."""
    if ("text" in inputs) == ("bytes" in inputs):
        raise WireInputError("give exactly one of the inputs 'text' and 'bytes'")
    if "text" in inputs:
        return decode_json_text(decode_string(inputs, "text"))
    values = [decode_integer(value, "every byte") for value in decode_array(inputs, "bytes")]
    if not all(0 <= value <= 255 for value in values):
        raise WireInputError("every byte must be 0 to 255")
    return decode_json_text(bytes(values))


def _plan_layout_migration(inputs: Inputs) -> JsonValue:
    found = decode_present(inputs, "found")
    return list(plan_layout_migration(None if found is None else decode_integer(found, "found")))


def _validate_header(inputs: Inputs) -> JsonValue:
    validate_header(decode_string(inputs, "sessionId"), inputs.get("header"))
    return None


WIRE_TABLE: Final[tuple[WireRow, ...]] = (
    WireRow(
        "spec.surface.fold_surface",
        fold_surface,
        lambda i: encode_surface_fold(fold_surface(decode_events(i))),
        "`events`",
        '`{"nodes", "replaceGeneration", "replacements": [{"seq", "start", "end", "shadowed"}]}`',
    ),
    WireRow(
        "spec.pairing.derive_cut_balance",
        derive_cut_balance,
        lambda i: list(derive_cut_balance(decode_nodes(i), decode_events(i))),
        "`nodes`, `events`",
        "`[bool, …]`, one per cut (N+1)",
    ),
    WireRow(
        "spec.pairing.is_balanced_before",
        is_balanced_before,
        lambda i: is_balanced_before(decode_nodes(i), decode_events(i), decode_integer(i.get("seq"), "seq")),
        "`nodes`, `events`, `seq`",
        "bool",
    ),
    WireRow(
        "spec.pairing.is_balanced_after",
        is_balanced_after,
        lambda i: is_balanced_after(decode_nodes(i), decode_events(i), decode_integer(i.get("seq"), "seq")),
        "`nodes`, `events`, `seq`",
        "bool",
    ),
    WireRow(
        "spec.prune.decode_prune_config",
        decode_prune_config,
        lambda i: encode_prune_config(decode_prune_config(i.get("config"))),
        "`config` (object or null)",
        '`{"thresholdChars", "headChars", "tailChars"}`',
    ),
    WireRow(
        "spec.prune.plan_pruned_content",
        plan_pruned_content,
        lambda i: plan_pruned_content(decode_array(i, "blocks"), decode_exact_prune_config(i)),
        '`blocks`, `config` (`{"thresholdChars", "headChars", "tailChars"}`, used as given, not validated)',
        "blocks, or null when nothing is pruned",
    ),
    WireRow(
        "spec.prune.plan_prune_events",
        plan_prune_events,
        lambda i: [
            encode_prune_plan(plan)
            for plan in plan_prune_events(
                decode_nodes(i), decode_events(i), decode_prune_config(i.get("config"))
            )
        ],
        "`nodes`, `events`, `config` (as for `decode_prune_config`)",
        '`[{"originalSeq", "callId", "pruneData", "replacementData", "surfaceOp", "sourceEventSeqs", "charsBefore", "charsAfter"}]`',
    ),
    WireRow(
        "spec.tokens.price_surface",
        price_surface,
        lambda i: [list(node) for node in price_surface(decode_nodes(i), decode_events(i))],
        "`nodes`, `events`",
        "`[[seq, tokens], …]`",
    ),
    WireRow(
        "spec.tokens.fold_shadow_price",
        fold_shadow_price,
        _fold_shadow_price,
        '`claim` (null or `{"start", "end", "tokens"}`), `event`',
        '`{"claim", "delta"}`',
    ),
    WireRow(
        "spec.checker.check_log",
        check_log,
        _check_log,
        "`events`, `header?`, `relational?` (default true), `formatVersion?` (the format the log was stored in: 4, the default, or 0 for a DSH v0 log, whose dangling compaction starts are reported as `legacy-compaction-dangling`)",
        '`[{"rule", "seq"}, …]` in the checker\'s order (messages are left out: the suite compares rule ids)',
    ),
    WireRow(
        "spec.repair.derive_closers",
        derive_closers,
        lambda i: list(derive_closers(decode_events(i))),
        "`events`",
        "events",
    ),
    WireRow(
        "spec.storage.encode_segment",
        encode_segment,
        lambda i: encode_segment(decode_string(i, "id")),
        "`id`",
        "string",
    ),
    WireRow(
        "spec.storage.encode_project_key",
        encode_project_key,
        lambda i: encode_project_key(decode_string(i, "cwd")),
        "`cwd`",
        "string",
    ),
    WireRow(
        "spec.storage.derive_session_relpath",
        derive_session_relpath,
        lambda i: list(derive_session_relpath(decode_object(i, "header"), i.get("compressed") is not False)),
        "`header`, `compressed`",
        "`[projectDir, sessionDir, fileName]`",
    ),
    WireRow(
        "spec.storage.decode_header_line",
        decode_header_line,
        _decode_header_line,
        "`line`, `sessionId?`, `fileName?` (the log's file name: `session.v4.jsonl[.zstd]` must hold version 4, `session.jsonl[.zstd]` version 0, else `HEADER_VERSION_FILE_MISMATCH`)",
        '`{"version", "header"}`',
    ),
    WireRow(
        "spec.chunk_rows.decode_storage_record",
        decode_storage_record,
        lambda i: decode_storage_record(i.get("record")),
        "`record`",
        "`[value, …]`",
    ),
    WireRow(
        "spec.framing.decode_jsonl_log",
        decode_jsonl_log,
        _decode_jsonl_log,
        "`text` (the log's bytes as UTF-8 text)",
        '`{"headerLine", "records", "truncateTo"}`',
    ),
    WireRow(
        "spec.framing.decode_compressed_log",
        decode_compressed_log,
        _decode_compressed_log,
        '`frames` (`[{"offset", "text"}, …]`: each complete frame\'s file offset and plaintext, as UTF-8 text), `torn` (null, or the torn final frame\'s `{"offset", "text"}`: the plaintext of its whole blocks)',
        '`{"headerLine", "records", "recovered", "truncateTo"}`: the committed records, the records recovered from a torn final frame, and the file offset it is cut at (null: none)',
    ),
    WireRow(
        "spec.framing.place_compressed_log",
        place_compressed_log,
        _place_compressed_log,
        "as `spec.framing.decode_compressed_log`",
        '`{"places": [{"line", "byte", "frame"}, …], "tornPlace"}`: each record\'s place (committed, then recovered) and where a dropped torn tail starts (null: none), `byte` in the decompressed text',
    ),
    WireRow(
        "spec.legacy.upgrade_v0_records",
        upgrade_v0_records,
        lambda i: list(upgrade_v0_records(decode_string(i, "sessionId"), decode_array(i, "records"))),
        "`sessionId`, `records`",
        "events",
    ),
    WireRow(
        "spec.header.validate_header",
        validate_header,
        _validate_header,
        "`sessionId`, `header`",
        "`null` when valid",
    ),
    WireRow(
        "spec.spill.plan_max_inline_tokens",
        plan_max_inline_tokens,
        _plan_max_inline_tokens,
        "`maxInlineTokens?` (absent: not configured; `null`: spill off), `hasStore` (bool)",
        "the limit as an integer, or `null` (no spilling)",
    ),
    WireRow(
        "spec.transfer.plan_session_copy",
        plan_session_copy,
        _plan_session_copy,
        '`header`, `events` (the source\'s log), `found` (null: the destination holds no session of that id; else `{"header", "events"}`, the log it holds)',
        '`"write"` or `"already-copied"`',
    ),
    WireRow(
        "spec.projection.derive_projection_changes",
        derive_projection_changes,
        _derive_projection_changes,
        '`unit` (`"sessionDigest"`, the seed\'s digest: `spec/projections/digest.py`), `events`',
        '`{"state", "changed": [bool, …]}`: the unit folded from its `init` over `events`, and per event whether `apply` returned a different state (by identity: the same object, or for a scalar the same value, means unchanged)',
    ),
    WireRow(
        "spec.json_text.decode_json_text",
        decode_json_text,
        _decode_json_text,
        "`text` (a string: the JSON text's code units) or `bytes` (an array of byte values 0-255: the text as bytes), exactly one",
        "the value",
    ),
    WireRow(
        "spec.json_text.encode_json_text",
        encode_json_text,
        lambda i: encode_json_text(decode_present(i, "value")),
        "`value`",
        "string: the value's one line of JSON text",
    ),
    WireRow(
        "spec.tables.encode_header_row",
        encode_header_row,
        lambda i: encode_header_row(decode_object(i, "header")),
        "`header`",
        "string: the header row's text",
    ),
    WireRow(
        "spec.tables.encode_event_row",
        encode_event_row,
        lambda i: encode_event_row(decode_object(i, "event")),
        "`event`",
        "string: the event row's text",
    ),
    WireRow(
        "spec.tables.decode_header_row",
        decode_header_row,
        lambda i: decode_header_row(decode_string(i, "key"), decode_string(i, "text")),
        "`key` (the row's session key), `text` (the row's text)",
        "the header",
    ),
    WireRow(
        "spec.tables.decode_event_row",
        decode_event_row,
        lambda i: decode_event_row(
            decode_string(i, "sessionId"),
            decode_integer(i.get("position"), "position"),
            decode_present(i, "seq"),
            decode_string(i, "text"),
        ),
        "`sessionId`, `position` (the row's place in seq order), `seq` (the row's key seq, any JSON value), `text` (the row's text)",
        "the event",
    ),
    WireRow(
        "spec.tables.plan_layout_migration",
        plan_layout_migration,
        _plan_layout_migration,
        "`found` (null: an empty database; else the layout version it holds, an integer)",
        "`[version, …]`: the layouts to step through",
    ),
    WireRow(
        "spec.tables.plan_unknown_commit",
        plan_unknown_commit,
        lambda i: plan_unknown_commit(
            decode_string(i, "sessionId"), decode_strings(i, "found"), decode_strings(i, "pending")
        ),
        "`sessionId`, `found` (the rows stored past the durable count, as texts), `pending` (the rows the writer still holds)",
        "integer: how many pending rows are durable already",
    ),
)
"""Every function of capability ``pure``: its protocol name, the spec function, the adapter, and the
JSON its ``call`` takes and answers (conformance/PROTOCOL.md's table is generated from it)."""

WIRE_FUNCTIONS: Final[Mapping[str, WireFunction]] = {row.name: row.adapter for row in WIRE_TABLE}
"""Every function of capability ``pure``, by the name a ``call`` gives (the protocol's table)."""
