"""The JSON form of the engine ops (conformance/PROTOCOL.md, "Engine ops"): the scripted
summarizer's attempts, the policies and thresholds the suite declares, the projection catalogue's
names, and the shapes the ops answer in.

A compaction engine calls a summarizer, which in a real host is a model. The protocol makes it
deterministic: the suite scripts each attempt — the ``compactionId`` the attempt takes, and what its
summarizer does (returns a text or blocks, fails, times out, is cancelled, or sees the surface
change while it runs). The suite's model and the reference's server both read a request with
these functions, so the JSON form is written once, as :mod:`spec.wire` does for ``call``. A value of
the wrong shape raises :class:`spec.wire.WireInputError` (the protocol's ``BAD_REQUEST``); a value a
rule judges (a policy, a prune configuration, a ``stateVersion``) goes to that rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from spec.codes import Code, SpecError, reject
from spec.log.json import FrozenList, JsonObject, JsonValue, is_safe_integer, snapshot_json
from spec.log.session import ABSENT
from spec.projections.catalogue import PROJECTION_CATALOGUE
from spec.projections.durability import CHECKPOINT_MOMENTS, Moment
from spec.projections.units import ProjectionUnit, validate_projection_unit
from spec.shrink.bracket import CompactionResult, derive_abort_reason, derive_summary_timeout
from spec.shrink.compaction import CompactionPolicy, resolve_target_policy
from spec.shrink.engine import Append, Trigger
from spec.shrink.prune import PruneConfig, PrunedEntry, decode_prune_config, derive_chars_removed
from spec.shrink.summary import SummarizerOutput
from spec.wire import WireInputError

SCRIPT_PROVIDER: Final = "script"  # the provider a scripted summarizer reports
SCRIPT_MODEL: Final = "scripted"  # and its model
CANCEL_DURING: Final = "during"  # the caller cancels while the summarizer runs; it stops
CANCEL_AFTER: Final = "after"  # the caller cancels just after the summarizer answered


def decode_append_request(value: object, what: str) -> Append:
    """``{type, data, surfaceOp?, sourceEventSeqs?}``, as the ``append`` op takes them; the rules
    judge the values when the event is appended."""
    if not isinstance(value, dict):
        raise WireInputError(f"{what} must be an object with the append op's keys")
    return Append(
        value.get("type", ABSENT),
        value.get("data", ABSENT),
        value.get("surfaceOp", ABSENT),
        value.get("sourceEventSeqs", ABSENT),
    )


# --- the scripted summarizer ----------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One scripted compaction attempt: the id its ``compaction/start`` and checkpoint take, and what
    its summarizer does — answer ``blocks``, fail with the message ``failure``, run past a
    ``timeout`` of that many seconds, be cancelled ``during`` its run or ``after`` its answer, and
    ``append`` an event to the session while it runs (a surface change under the summarizer)."""

    compaction_id: str
    blocks: FrozenList | None = None
    failure: str | None = None
    timeout: int | None = None
    cancel: str | None = None
    append: Append | None = None


def decode_attempt(value: object) -> Attempt:
    """An attempt object: ``compactionId`` (a non-empty string) and exactly one outcome —
    ``text`` (one text block), ``blocks`` (an array the engine filters), ``fail`` (a message),
    ``timeout`` (positive whole seconds) or ``cancel: "during"``; ``cancel: "after"`` and ``append``
    go with ``text`` or ``blocks``."""
    if not isinstance(value, dict):
        raise WireInputError("an attempt must be an object")
    compaction_id = value.get("compactionId")
    if not isinstance(compaction_id, str) or compaction_id == "":
        raise WireInputError("an attempt's compactionId must be a non-empty string")
    outcomes: list[str] = [key for key in ("text", "blocks", "fail", "timeout") if key in value]
    cancel = value.get("cancel")
    if cancel not in (None, CANCEL_DURING, CANCEL_AFTER):
        raise WireInputError('an attempt\'s cancel is "during" or "after"')
    if cancel == CANCEL_DURING:
        outcomes.append("cancel")
    if len(outcomes) != 1:
        raise WireInputError("an attempt has exactly one of text, blocks, fail, timeout and cancel 'during'")
    answers = outcomes[0] in ("text", "blocks")
    if (cancel == CANCEL_AFTER or "append" in value) and not answers:
        raise WireInputError("cancel 'after' and append go with an attempt that answers text or blocks")
    blocks: FrozenList | None = None
    if "text" in value:
        text = value["text"]
        if not isinstance(text, str):
            raise WireInputError("an attempt's text must be a string")
        blocks = _frozen_list([{"type": "text", "text": text}])
    elif "blocks" in value:
        raw = value["blocks"]
        if not isinstance(raw, list):
            raise WireInputError("an attempt's blocks must be an array")
        blocks = _frozen_list(raw)
    failure = value.get("fail")
    if "fail" in value and not isinstance(failure, str):
        raise WireInputError("an attempt's fail must be a message string")
    timeout = value.get("timeout")
    if "timeout" in value and not (is_safe_integer(timeout) and timeout >= 1):
        raise WireInputError("an attempt's timeout must be a positive whole number of seconds")
    append = decode_append_request(value["append"], "an attempt's append") if "append" in value else None
    return Attempt(
        compaction_id=compaction_id,
        blocks=blocks,
        failure=failure if isinstance(failure, str) else None,
        timeout=int(timeout) if is_safe_integer(timeout) else None,
        cancel=cancel if isinstance(cancel, str) else None,
        append=append,
    )


def decode_attempts(value: object, needed: int) -> tuple[Attempt, ...]:
    """An array of at least ``needed`` attempts, one per compaction the op may run."""
    if not isinstance(value, list) or len(value) < needed:
        raise WireInputError(f"attempts must be an array of at least {needed} attempt(s)")
    return tuple(decode_attempt(entry) for entry in value)


def derive_attempt_failure(attempt: Attempt) -> SpecError | None:
    """How a scripted summarizer fails, when it does: a ``fail`` is a summary failure with that
    message (its text is what ``compaction/end`` records); a ``timeout`` is the failure the engine's
    deadline gives (:func:`spec.shrink.bracket.derive_summary_timeout`)."""
    if attempt.failure is not None:
        return reject(Code.COMPACTION_SUMMARY_FAILED, attempt.failure)
    if attempt.timeout is not None:
        return derive_summary_timeout(attempt.timeout)
    return None


def derive_attempt_output(attempt: Attempt) -> SummarizerOutput:
    """What a scripted summarizer that answers returns: its blocks as they are (the engine keeps
    only the text, :func:`spec.shrink.summary.derive_summary_blocks`), from provider ``script``
    and model ``scripted``, with no raw output."""
    blocks = attempt.blocks if attempt.blocks is not None else _frozen_list([])
    return SummarizerOutput(summary=blocks, provider=SCRIPT_PROVIDER, model=SCRIPT_MODEL)


def run_attempt(
    attempt: Attempt, append: Callable[[Append], object], cancel: Callable[[], None]
) -> SummarizerOutput:
    """What a scripted summarizer does for ``attempt``: cancelled during its run (``cancel``, then
    the abort reason raised), failing, or answering — after its scripted ``append``, if any (a
    refused one changes nothing: the surface is as it was), and then perhaps cancelled."""
    if attempt.cancel == CANCEL_DURING:
        cancel()
        raise derive_abort_reason()
    failure = derive_attempt_failure(attempt)
    if failure is not None:
        raise failure
    if attempt.append is not None:
        try:
            append(attempt.append)
        except SpecError:
            pass
    output = derive_attempt_output(attempt)
    if attempt.cancel == CANCEL_AFTER:
        cancel()
    return output


# --- what the suite declares ----------------------------------------------------------------------


def decode_policy(value: object) -> CompactionPolicy:
    """The pressure policy: absent or ``null`` is the default policy; an object names camelCase
    policy keys that override it (:func:`spec.shrink.compaction.resolve_target_policy`, which
    refuses unknown keys and bad values with ``COMPACTION_CONFIG_INVALID``)."""
    if value is ABSENT or value is None:
        return resolve_target_policy(CompactionPolicy(), None)
    if not isinstance(value, dict):
        raise WireInputError("policy must be an object")
    return resolve_target_policy(CompactionPolicy(), value)


def decode_pruner(value: object) -> PruneConfig | None:
    """Whether pressure and overflow prune first: absent, no pruner is loaded; otherwise the
    pruner's configuration (:func:`spec.shrink.prune.decode_prune_config`: ``null`` or missing keys
    take the defaults)."""
    if value is ABSENT:
        return None
    return decode_prune_config(value)


def decode_trigger(value: object) -> Trigger:
    """``compact_if_needed``'s trigger: ``pressure`` or ``context-overflow``."""
    if value == "pressure" or value == "context-overflow":
        return value
    raise WireInputError('trigger is "pressure" or "context-overflow"')


def decode_context_window(value: object) -> int | None:
    """The routed model's context window in tokens, or ``None`` when the suite gives none (a rule
    judges a window that is not a positive integer)."""
    return None if value is ABSENT or value is None else value  # type: ignore[return-value]


def decode_moment(value: object) -> Moment:
    """A durability checkpoint's moment: ``model-request``, ``tool`` or ``pre-step``."""
    if value not in CHECKPOINT_MOMENTS:
        raise WireInputError(f"moment must be one of {', '.join(CHECKPOINT_MOMENTS)}")
    return value


def decode_catalogue_unit(name: object, state_version: object = ABSENT) -> ProjectionUnit:
    """The catalogue unit named ``name`` (:data:`spec.projections.catalogue.PROJECTION_CATALOGUE`)
    at ``state_version`` (absent: its first). A version that is not a non-negative integer breaks
    the unit contract (``PROJECTION_UNIT_INVALID``); a name or a version the catalogue does not
    list is a request the protocol does not know."""
    versions = PROJECTION_CATALOGUE.get(name) if isinstance(name, str) else None
    if versions is None:
        raise WireInputError(f"unit must be one of {', '.join(PROJECTION_CATALOGUE)}")
    first = next(iter(versions.values()))
    if state_version is ABSENT:
        return first
    if not (is_safe_integer(state_version) and state_version >= 0):
        validate_projection_unit(replace(first, state_version=state_version))  # type: ignore[arg-type]
    unit = versions.get(int(state_version))  # type: ignore[call-overload]
    if unit is None:
        raise WireInputError(f"the catalogue defines {name} at stateVersion {', '.join(map(str, versions))}")
    return unit


def derive_tool_result_content(data: object) -> list[JsonValue]:
    """The inner content of a tool/result's data: ``message.content[0].content``, which must be an
    array (what spill and prune work on)."""
    message = data.get("message") if isinstance(data, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    block = content[0] if isinstance(content, list) and content else None
    inner = block.get("content") if isinstance(block, dict) else None
    if not isinstance(inner, list):
        raise WireInputError("data must be a tool/result's: message.content[0].content an array")
    return inner


def with_tool_result_content(data: JsonObject, inner: JsonValue) -> JsonObject:
    """``data`` with the inner content of its tool-result block replaced by the array ``inner``
    (everything else kept)."""
    assert isinstance(inner, list)
    message = data["message"]
    assert isinstance(message, dict)
    content = message["content"]
    assert isinstance(content, list) and isinstance(content[0], dict)
    block = {**content[0], "content": list(inner)}
    return {**data, "message": {**message, "content": [block, *content[1:]]}}


def derive_tool_call_id(data: JsonObject) -> str:
    """The call a tool/result answers, as its message's source names it (or its block's
    ``toolCallId``); empty when it names none."""
    message = data.get("message")
    source = message.get("source") if isinstance(message, dict) else None
    call = source.get("callId") if isinstance(source, dict) else None
    return call if isinstance(call, str) else ""


# --- answers --------------------------------------------------------------------------------------


def encode_compaction_result(result: CompactionResult | None) -> JsonObject | None:
    """A committed compaction, as ``compact``, ``compact_region`` and ``compact_if_needed`` answer
    it: ``{compactionId, sourceCommandId?, startSeq, summarySeq, endSeq, summary, shadowedRange,
    shadowedSeqs, shadowedTokenCount}`` (notes §4.1 ``CompactionResult``); ``null`` when nothing was
    compacted."""
    if result is None:
        return None
    encoded: JsonObject = {"compactionId": result.compaction_id}
    if result.source_command_id is not None:
        encoded["sourceCommandId"] = result.source_command_id
    shadowed = result.shadowed_seqs
    encoded.update(
        {
            "startSeq": result.start_seq,
            "summarySeq": result.summary_seq,
            "endSeq": result.end_seq,
            "summary": list(result.summary),
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": list(shadowed),
            "shadowedTokenCount": result.shadowed_token_count,
        }
    )
    return encoded


def encode_prune_result(entries: Sequence[PrunedEntry]) -> JsonObject:
    """``{pruned: [{originalSeq, replacementSeq, callId, charsBefore, charsAfter}], charsRemoved}``
    (notes §6.3 ``PruneResult``)."""
    pruned: list[JsonValue] = [
        {
            "originalSeq": entry.original_seq,
            "replacementSeq": entry.replacement_seq,
            "callId": entry.call_id,
            "charsBefore": entry.chars_before,
            "charsAfter": entry.chars_after,
        }
        for entry in entries
    ]
    return {
        "pruned": pruned,
        "charsRemoved": derive_chars_removed(entries),
    }


def _frozen_list(value: Sequence[JsonValue]) -> FrozenList:
    frozen = snapshot_json(list(value))
    if not isinstance(frozen, FrozenList):
        raise WireInputError("blocks must be lossless JSON")
    return frozen
