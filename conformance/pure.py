"""The specification's pure functions in JSON form: the oracle of the ``call`` op
(conformance/PROTOCOL.md, capability ``pure``).

Each entry takes the op's ``input`` object, calls the ``spec`` function it is named after, and
returns its result as JSON, exactly as the protocol's table says. :func:`call_pure` raises the
spec's :class:`~spec.codes.SpecError` for a rejection, :class:`BadInput` for input of the wrong
shape and :class:`UnknownFunction` for a name not in the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from spec.checker import check_log
from spec.chunk_rows import decode_storage_record
from spec.framing import decode_jsonl_log
from spec.header import validate_header
from spec.json import JsonObject, JsonValue
from spec.legacy import upgrade_v0_records
from spec.pairing import derive_cut_balance, is_balanced_after, is_balanced_before
from spec.prune import PruneConfig, decode_prune_config, plan_prune_events, plan_pruned_content
from spec.repair import derive_closers
from spec.storage import (
    decode_header_line,
    derive_session_relpath,
    encode_project_key,
    encode_segment,
)
from spec.surface import fold_surface
from spec.tokens import ShadowClaim, fold_shadow_price, price_surface


class BadInput(Exception):
    """The input object does not have the shape the function's row in the protocol gives."""


class UnknownFunction(Exception):
    """No pure function has that name."""


PureFunction = Callable[[Mapping[str, JsonValue]], JsonValue]


def _list(value: JsonValue, key: str) -> list[JsonValue]:
    if not isinstance(value, list):
        raise BadInput(f"input {key!r} must be an array")
    return value


def _nodes(inputs: Mapping[str, JsonValue]) -> list[int]:
    return [int(seq) for seq in _list(inputs.get("nodes"), "nodes")]  # type: ignore[arg-type]


def _events(inputs: Mapping[str, JsonValue], key: str = "events") -> list[JsonObject]:
    return _list(inputs.get(key), key)  # type: ignore[return-value]


def _call_fold_surface(inputs: Mapping[str, JsonValue]) -> JsonValue:
    fold = fold_surface(_events(inputs))
    replacements: list[JsonValue] = [
        {"seq": r.seq, "start": r.start, "end": r.end, "shadowed": list(r.shadowed)} for r in fold.replacements
    ]
    return {"nodes": list(fold.nodes), "replaceGeneration": fold.replace_generation, "replacements": replacements}


def _call_plan_pruned_content(inputs: Mapping[str, JsonValue]) -> JsonValue:
    raw = inputs.get("config")
    if not isinstance(raw, dict):
        raise BadInput("input 'config' must be an object")
    config = PruneConfig(raw["thresholdChars"], raw["headChars"], raw["tailChars"])  # type: ignore[arg-type]
    return plan_pruned_content(_list(inputs.get("blocks"), "blocks"), config)


def _call_plan_prune_events(inputs: Mapping[str, JsonValue]) -> JsonValue:
    plans = plan_prune_events(_nodes(inputs), _events(inputs), decode_prune_config(inputs.get("config")))
    return [
        {
            "originalSeq": plan.original_seq,
            "callId": plan.call_id,
            "pruneData": plan.prune_data,
            "replacementData": plan.replacement_data,
            "surfaceOp": plan.surface_op,
            "sourceEventSeqs": plan.source_event_seqs,
            "charsBefore": plan.chars_before,
            "charsAfter": plan.chars_after,
        }
        for plan in plans
    ]


def _call_decode_prune_config(inputs: Mapping[str, JsonValue]) -> JsonValue:
    config = decode_prune_config(inputs.get("config"))
    return {"thresholdChars": config.threshold_chars, "headChars": config.head_chars, "tailChars": config.tail_chars}


def _call_fold_shadow_price(inputs: Mapping[str, JsonValue]) -> JsonValue:
    raw = inputs.get("claim")
    claim = None if not isinstance(raw, dict) else ShadowClaim(int(raw["start"]), int(raw["end"]), int(raw["tokens"]))  # type: ignore[arg-type]
    event = inputs.get("event")
    if not isinstance(event, dict):
        raise BadInput("input 'event' must be an object")
    after, delta = fold_shadow_price(claim, event)
    shown: JsonValue = None if after is None else {"start": after.start, "end": after.end, "tokens": after.tokens}
    return {"claim": shown, "delta": delta}


def _call_check_log(inputs: Mapping[str, JsonValue]) -> JsonValue:
    header = inputs.get("header")
    relational = inputs.get("relational", True)
    violations = check_log(_events(inputs), header if isinstance(header, dict) else None, relational is not False)
    return [{"rule": violation.rule, "seq": violation.seq} for violation in violations]


def _call_derive_session_relpath(inputs: Mapping[str, JsonValue]) -> JsonValue:
    header = inputs.get("header")
    if not isinstance(header, dict):
        raise BadInput("input 'header' must be an object")
    return list(derive_session_relpath(header, inputs.get("compressed") is not False))


def _call_decode_header_line(inputs: Mapping[str, JsonValue]) -> JsonValue:
    hint = inputs.get("sessionId")
    version, header = decode_header_line(inputs.get("line"), hint if isinstance(hint, str) else None)
    return {"version": version, "header": header}


def _call_decode_jsonl_log(inputs: Mapping[str, JsonValue]) -> JsonValue:
    text = inputs.get("text")
    if not isinstance(text, str):
        raise BadInput("input 'text' must be a string")
    stored = decode_jsonl_log(text.encode("utf-8"))
    return {"headerLine": stored.header_line, "records": list(stored.records), "truncateTo": stored.truncate_to}


def _call_validate_header(inputs: Mapping[str, JsonValue]) -> JsonValue:
    validate_header(str(inputs.get("sessionId")), inputs.get("header"))
    return None


PURE_FUNCTIONS: Final[Mapping[str, PureFunction]] = {
    "spec.surface.fold_surface": _call_fold_surface,
    "spec.pairing.derive_cut_balance": lambda i: list(derive_cut_balance(_nodes(i), _events(i))),
    "spec.pairing.is_balanced_before": lambda i: is_balanced_before(_nodes(i), _events(i), int(i["seq"])),  # type: ignore[arg-type]
    "spec.pairing.is_balanced_after": lambda i: is_balanced_after(_nodes(i), _events(i), int(i["seq"])),  # type: ignore[arg-type]
    "spec.prune.decode_prune_config": _call_decode_prune_config,
    "spec.prune.plan_pruned_content": _call_plan_pruned_content,
    "spec.prune.plan_prune_events": _call_plan_prune_events,
    "spec.tokens.price_surface": lambda i: [list(node) for node in price_surface(_nodes(i), _events(i))],
    "spec.tokens.fold_shadow_price": _call_fold_shadow_price,
    "spec.checker.check_log": _call_check_log,
    "spec.repair.derive_closers": lambda i: list(derive_closers(_events(i))),
    "spec.storage.encode_segment": lambda i: encode_segment(str(i.get("id"))),
    "spec.storage.encode_project_key": lambda i: encode_project_key(str(i.get("cwd"))),
    "spec.storage.derive_session_relpath": _call_derive_session_relpath,
    "spec.storage.decode_header_line": _call_decode_header_line,
    "spec.chunk_rows.decode_storage_record": lambda i: decode_storage_record(i.get("record")),
    "spec.framing.decode_jsonl_log": _call_decode_jsonl_log,
    "spec.legacy.upgrade_v0_records": lambda i: list(
        upgrade_v0_records(str(i.get("sessionId")), _list(i.get("records"), "records"))
    ),
    "spec.header.validate_header": _call_validate_header,
}


def call_pure(function: str, inputs: Mapping[str, JsonValue]) -> JsonValue:
    """The result of the pure function named ``function`` on ``inputs``."""
    adapter = PURE_FUNCTIONS.get(function)
    if adapter is None:
        raise UnknownFunction(f"unknown pure function {function!r}")
    try:
        return adapter(inputs)
    except (KeyError, TypeError, ValueError) as error:
        raise BadInput(f"{function}: input does not fit ({error!r})") from error
