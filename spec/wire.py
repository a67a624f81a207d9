"""The JSON form of the pure functions a subject exposes through the protocol's ``call`` op
(conformance/PROTOCOL.md, capability ``pure``).

Some rules are pure functions no session op reaches on its own (pairing balance, pruning, token
pricing, the log checker, repair closers, storage naming and framing, the v0 read path). A
subject in any language exposes them as ``call {function, input}``: ``function`` names the spec
function, ``input`` is a JSON object, the answer is the function's result as JSON or the rule's
code. :data:`WIRE_FUNCTIONS` is that mapping, name to adapter; each adapter decodes its input,
calls the function it is named after and encodes the result, as the protocol's table says. The
vector generator (through ``conformance``) and the reference's server both answer ``call`` with
it, so the JSON form is written once.

An input of the wrong shape (an array that is not one, a seq that is not a safe integer) is not a
rule's rejection: it raises :class:`WireInputError`, which a subject answers with the protocol's
``BAD_REQUEST``. Arguments a rule judges (an event, a header, a record, a prune config) are passed
to it as they are, so that the rule, not the adapter, rejects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, TypeAlias

from spec.checks.log import check_log
from spec.format.chunk_rows import decode_storage_record
from spec.format.framing import decode_jsonl_log
from spec.format.legacy import upgrade_v0_records
from spec.format.naming import decode_header_line, derive_session_relpath, encode_project_key, encode_segment
from spec.lineage.repair import derive_closers
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


def _decode_jsonl_log(inputs: Inputs) -> JsonValue:
    try:
        data = decode_string(inputs, "text").encode("utf-8")
    except UnicodeEncodeError:
        raise WireInputError("input 'text' must be UTF-8 text (it holds a lone surrogate)") from None
    stored = decode_jsonl_log(data)
    return {
        "headerLine": stored.header_line,
        "records": list(stored.records),
        "truncateTo": stored.truncate_to,
    }


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


def _validate_header(inputs: Inputs) -> JsonValue:
    validate_header(decode_string(inputs, "sessionId"), inputs.get("header"))
    return None


WIRE_FUNCTIONS: Final[Mapping[str, WireFunction]] = {
    "spec.surface.fold_surface": lambda i: encode_surface_fold(fold_surface(decode_events(i))),
    "spec.pairing.derive_cut_balance": lambda i: list(derive_cut_balance(decode_nodes(i), decode_events(i))),
    "spec.pairing.is_balanced_before": lambda i: is_balanced_before(
        decode_nodes(i), decode_events(i), decode_integer(i.get("seq"), "seq")
    ),
    "spec.pairing.is_balanced_after": lambda i: is_balanced_after(
        decode_nodes(i), decode_events(i), decode_integer(i.get("seq"), "seq")
    ),
    "spec.prune.decode_prune_config": lambda i: encode_prune_config(decode_prune_config(i.get("config"))),
    "spec.prune.plan_pruned_content": lambda i: plan_pruned_content(
        decode_array(i, "blocks"), decode_exact_prune_config(i)
    ),
    "spec.prune.plan_prune_events": lambda i: [
        encode_prune_plan(plan)
        for plan in plan_prune_events(decode_nodes(i), decode_events(i), decode_prune_config(i.get("config")))
    ],
    "spec.tokens.price_surface": lambda i: [
        list(node) for node in price_surface(decode_nodes(i), decode_events(i))
    ],
    "spec.tokens.fold_shadow_price": _fold_shadow_price,
    "spec.checker.check_log": _check_log,
    "spec.repair.derive_closers": lambda i: list(derive_closers(decode_events(i))),
    "spec.storage.encode_segment": lambda i: encode_segment(decode_string(i, "id")),
    "spec.storage.encode_project_key": lambda i: encode_project_key(decode_string(i, "cwd")),
    "spec.storage.derive_session_relpath": lambda i: list(
        derive_session_relpath(decode_object(i, "header"), i.get("compressed") is not False)
    ),
    "spec.storage.decode_header_line": _decode_header_line,
    "spec.chunk_rows.decode_storage_record": lambda i: decode_storage_record(i.get("record")),
    "spec.framing.decode_jsonl_log": _decode_jsonl_log,
    "spec.legacy.upgrade_v0_records": lambda i: list(
        upgrade_v0_records(decode_string(i, "sessionId"), decode_array(i, "records"))
    ),
    "spec.header.validate_header": _validate_header,
    "spec.spill.plan_max_inline_tokens": _plan_max_inline_tokens,
    "spec.projection.derive_projection_changes": _derive_projection_changes,
}
"""Every function of capability ``pure``, by the name a ``call`` gives (the protocol's table)."""
