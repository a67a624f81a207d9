"""Every rejection code of the specification, with a line on its meaning (SPEC-DECISIONS D4).

A rejection is a :class:`SpecError` carrying one of these codes and a human message. Codes are
stable: conformance vectors assert them, never the message text. The fork codes are DSH's own;
the rest are named after the rule they enforce.
"""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    # --- the lossless JSON domain (SPEC-DECISIONS D5; notes/dsh-session-core §5.2) ---
    DATA_NOT_JSON = "DATA_NOT_JSON"
    SURFACE_METADATA_NOT_JSON = "SURFACE_METADATA_NOT_JSON"

    # --- JSON text: the bytes and characters of a line or a message (D3, D5; docs/choices.md) ---
    JSON_TEXT_INVALID = "JSON_TEXT_INVALID"
    JSON_NOT_UTF8 = "JSON_NOT_UTF8"
    JSON_BYTE_ORDER_MARK = "JSON_BYTE_ORDER_MARK"
    JSON_NUMBER_OUT_OF_RANGE = "JSON_NUMBER_OUT_OF_RANGE"

    # --- the event envelope and legacy vocabulary (notes/dsh-session-core §1.3, §5.1) ---
    EVENT_TYPE_INVALID = "EVENT_TYPE_INVALID"
    LEGACY_HEADER_DELTA = "LEGACY_HEADER_DELTA"
    LEGACY_FALLBACK_REASON = "LEGACY_FALLBACK_REASON"

    # --- who writes which events (the resume/fork/compaction seed; SPEC-DECISIONS D3 item 6) ---
    STORE_ONLY_EVENT = "STORE_ONLY_EVENT"
    REPAIR_CLOSER_RESERVED = "REPAIR_CLOSER_RESERVED"

    # --- surface ops (notes/dsh-session-core §3.3-§3.5) ---
    SEQ_NOT_CONTIGUOUS = "SEQ_NOT_CONTIGUOUS"
    SURFACE_OP_ON_LOG_ONLY = "SURFACE_OP_ON_LOG_ONLY"
    PROVENANCE_ON_LOG_ONLY = "PROVENANCE_ON_LOG_ONLY"
    SURFACE_OP_MISSING = "SURFACE_OP_MISSING"
    SURFACE_OP_INVALID = "SURFACE_OP_INVALID"
    REPLACE_OP_INVALID = "REPLACE_OP_INVALID"
    REPLACE_START_NOT_FOUND = "REPLACE_START_NOT_FOUND"
    REPLACE_END_NOT_FOUND = "REPLACE_END_NOT_FOUND"
    REPLACE_INVERTED = "REPLACE_INVERTED"

    # --- provenance: sourceEventSeqs (notes/dsh-session-core §3.6) ---
    PROVENANCE_NOT_ARRAY = "PROVENANCE_NOT_ARRAY"
    PROVENANCE_EMPTY = "PROVENANCE_EMPTY"
    PROVENANCE_NOT_SEQ = "PROVENANCE_NOT_SEQ"
    PROVENANCE_DUPLICATE = "PROVENANCE_DUPLICATE"
    PROVENANCE_NOT_EARLIER = "PROVENANCE_NOT_EARLIER"
    PROVENANCE_MISSING_SHADOWED = "PROVENANCE_MISSING_SHADOWED"

    # --- tool-result rewrite (notes/dsh-session-core §3.7) ---
    TOOL_REWRITE_NOT_ONE_NODE = "TOOL_REWRITE_NOT_ONE_NODE"
    TOOL_REWRITE_NOT_A_RESULT = "TOOL_REWRITE_NOT_A_RESULT"
    TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT = "TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT"

    # --- seed validation (notes/dsh-session-core §1.3, §1.4, §4.2) ---
    SEED_NOT_JSON = "SEED_NOT_JSON"
    SEED_ENVELOPE_INVALID = "SEED_ENVELOPE_INVALID"
    SEED_SEQ_MISMATCH = "SEED_SEQ_MISMATCH"
    MESSAGE_UNIDENTIFIED = "MESSAGE_UNIDENTIFIED"
    MESSAGE_ROLE = "MESSAGE_ROLE"
    MESSAGE_SOURCE = "MESSAGE_SOURCE"
    MESSAGE_CONTENT = "MESSAGE_CONTENT"
    MESSAGE_MODEL_SOURCE = "MESSAGE_MODEL_SOURCE"
    MESSAGE_TOOL_SOURCE = "MESSAGE_TOOL_SOURCE"
    MESSAGE_TOOL_BLOCK = "MESSAGE_TOOL_BLOCK"
    MESSAGE_TOOL_CALL_ID_MISMATCH = "MESSAGE_TOOL_CALL_ID_MISMATCH"
    REQUEST_HEADER_PROVIDER_MODEL = "REQUEST_HEADER_PROVIDER_MODEL"
    REQUEST_HEADER_REASONING_EFFORT = "REQUEST_HEADER_REASONING_EFFORT"
    REQUEST_HEADER_ADAPTER_DEFAULTS = "REQUEST_HEADER_ADAPTER_DEFAULTS"

    # --- the session header (SPEC-DECISIONS D1; notes/dsh-session-core §1.5) ---
    HEADER_NOT_JSON = "HEADER_NOT_JSON"
    HEADER_NOT_RECORD = "HEADER_NOT_RECORD"
    HEADER_VERSION = "HEADER_VERSION"
    HEADER_ID_MISMATCH = "HEADER_ID_MISMATCH"
    HEADER_CREATED_AT = "HEADER_CREATED_AT"
    HEADER_CWD = "HEADER_CWD"
    HEADER_PARENT_SESSION = "HEADER_PARENT_SESSION"
    HEADER_SEED_LENGTH = "HEADER_SEED_LENGTH"
    HEADER_ORIGIN = "HEADER_ORIGIN"
    HEADER_DELEGATION_DEPTH = "HEADER_DELEGATION_DEPTH"
    HEADER_AGENT_PRESET = "HEADER_AGENT_PRESET"
    HEADER_IS_SEEDED = "HEADER_IS_SEEDED"
    HEADER_RETIRED_FIELDS = "HEADER_RETIRED_FIELDS"
    HEADER_LINE_INVALID = "HEADER_LINE_INVALID"
    UNSUPPORTED_FORMAT = "UNSUPPORTED_FORMAT"
    HEADER_VERSION_FILE_MISMATCH = "HEADER_VERSION_FILE_MISMATCH"

    # --- the store and fork (DSH's own codes; notes/dsh-session-core §7.1, §13.3) ---
    SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
    SESSION_NOT_LIVE = "SESSION_NOT_LIVE"
    SESSION_ALREADY_EXISTS = "SESSION_ALREADY_EXISTS"
    INVALID_BOUNDARY = "INVALID_BOUNDARY"
    OPEN_TURN = "OPEN_TURN"
    OPEN_COMPACTION = "OPEN_COMPACTION"

    # --- tool-pairing balance (notes/dsh-compaction-projection §2) ---
    PAIRING_SURFACE_CORRUPT = "PAIRING_SURFACE_CORRUPT"
    PAIRING_ORPHAN_RESULT = "PAIRING_ORPHAN_RESULT"
    PAIRING_SEQ_NOT_ON_SURFACE = "PAIRING_SEQ_NOT_ON_SURFACE"

    # --- pruning and compaction (notes/dsh-compaction-projection §4-§6; SPEC-DECISIONS D8) ---
    PRUNE_CONFIG_INVALID = "PRUNE_CONFIG_INVALID"
    PRUNE_SPAN_NOT_FOUND = "PRUNE_SPAN_NOT_FOUND"
    PRUNE_NOT_SMALLER = "PRUNE_NOT_SMALLER"
    COMPACTION_CONFIG_INVALID = "COMPACTION_CONFIG_INVALID"
    COMPACTION_SURFACE_MISMATCH = "COMPACTION_SURFACE_MISMATCH"
    COMPACTION_BUSY = "COMPACTION_BUSY"
    COMPACTION_SUMMARY_NOT_SMALLER = "COMPACTION_SUMMARY_NOT_SMALLER"
    COMPACTION_SURFACE_CHANGED = "COMPACTION_SURFACE_CHANGED"
    COMPACTION_RANGE_INVALID = "COMPACTION_RANGE_INVALID"
    COMPACTION_NO_OPEN_TURN = "COMPACTION_NO_OPEN_TURN"
    COMPACTION_SUMMARY_UNSUPPORTED_CONTENT = "COMPACTION_SUMMARY_UNSUPPORTED_CONTENT"
    COMPACTION_SUMMARY_EMPTY = "COMPACTION_SUMMARY_EMPTY"
    TOKEN_SURFACE_CORRUPT = "TOKEN_SURFACE_CORRUPT"
    TOKEN_SHADOW_PRICE_MISMATCH = "TOKEN_SHADOW_PRICE_MISMATCH"
    SPILL_CONFIG_INVALID = "SPILL_CONFIG_INVALID"
    PRUNE_OUTSIDE_TURN = "PRUNE_OUTSIDE_TURN"
    COMPACTION_SUMMARY_FAILED = "COMPACTION_SUMMARY_FAILED"
    COMPACTION_SUMMARY_TIMEOUT = "COMPACTION_SUMMARY_TIMEOUT"
    COMPACTION_COMMIT_FAILED = "COMPACTION_COMMIT_FAILED"
    COMPACTION_PERSISTENCE_FAILED = "COMPACTION_PERSISTENCE_FAILED"
    COMPACTION_STILL_ABOVE_THRESHOLD = "COMPACTION_STILL_ABOVE_THRESHOLD"
    COMPACTION_NO_CAPACITY = "COMPACTION_NO_CAPACITY"
    ABORTED = "ABORTED"
    SPILL_NOT_FOUND = "SPILL_NOT_FOUND"

    # --- projections and their cache (SPEC-DECISIONS D7; notes/dsh-compaction-projection §11) ---
    PROJECTION_UNIT_INVALID = "PROJECTION_UNIT_INVALID"
    PROJECTION_VERSION_CONFLICT = "PROJECTION_VERSION_CONFLICT"
    PROJECTION_STATE_INVALID = "PROJECTION_STATE_INVALID"
    PROJECTION_IDENTITY_BROKEN = "PROJECTION_IDENTITY_BROKEN"

    # --- durability checkpoints (seed 002; notes/dsh-compaction-projection §11.5) ---
    DURABILITY_CHECKPOINT_FAILED = "DURABILITY_CHECKPOINT_FAILED"
    BATCH_POLICY_INVALID = "BATCH_POLICY_INVALID"

    # --- storage naming, framing and reading (SPEC-DECISIONS D1-D3; notes/dsh-persistence §2-§6) ---
    EMPTY_PROJECT_PATH = "EMPTY_PROJECT_PATH"
    EMPTY_PATH_SEGMENT = "EMPTY_PATH_SEGMENT"
    MALFORMED_CHUNK_ROW = "MALFORMED_CHUNK_ROW"
    LEGACY_MALFORMED_TURN_START = "LEGACY_MALFORMED_TURN_START"
    LEGACY_MALFORMED_TURN_END = "LEGACY_MALFORMED_TURN_END"
    LEGACY_MALFORMED_MESSAGE = "LEGACY_MALFORMED_MESSAGE"
    LEGACY_MODE_SET = "LEGACY_MODE_SET"
    UNKNOWN_EVENT_TYPE = "UNKNOWN_EVENT_TYPE"
    CORRUPT_LOG = "CORRUPT_LOG"
    LOCKED = "LOCKED"
    STORAGE_IO = "STORAGE_IO"
    SESSION_CLOSED = "SESSION_CLOSED"


MEANING: dict[Code, str] = {
    Code.DATA_NOT_JSON: "event data is outside the lossless JSON domain (D5)",
    Code.SURFACE_METADATA_NOT_JSON: "surfaceOp or sourceEventSeqs is outside the lossless JSON domain",
    Code.JSON_TEXT_INVALID: "JSON text must be exactly one JSON value (RFC 8259): no NaN, Infinity, "
    "trailing commas or extra data",
    Code.JSON_NOT_UTF8: "JSON text is strict UTF-8: invalid, overlong or surrogate-encoding bytes (UTF-16 "
    "and UTF-32 included) and raw surrogate code points are refused",
    Code.JSON_BYTE_ORDER_MARK: "JSON text must not begin with a byte order mark (JSON.parse refuses one)",
    Code.JSON_NUMBER_OUT_OF_RANGE: "a JSON number beyond the largest double would read as Infinity, "
    "which the domain does not hold (D5)",
    Code.EVENT_TYPE_INVALID: "an event type must be a non-empty string",
    Code.LEGACY_HEADER_DELTA: "request/header-delta is a retired legacy event type",
    Code.LEGACY_FALLBACK_REASON: "request/header with reason 'fallback' is retired legacy vocabulary",
    Code.STORE_ONLY_EVENT: "session/end-seed is written by the store, the compaction bracket by its engine; "
    "a caller cannot append them",
    Code.REPAIR_CLOSER_RESERVED: "an interrupted turn/end or a TOOL_NOT_STARTED/TOOL_OUTCOME_UNKNOWN result "
    "is a crash-repair closer, written only by a resume",
    Code.SEQ_NOT_CONTIGUOUS: "an event's seq must equal its position in the log",
    Code.SURFACE_OP_ON_LOG_ONLY: "only user/message, assistant/message and tool/result may carry surfaceOp",
    Code.PROVENANCE_ON_LOG_ONLY: "only surface-eligible events may carry sourceEventSeqs",
    Code.SURFACE_OP_MISSING: "a surface-eligible event must carry a surfaceOp",
    Code.SURFACE_OP_INVALID: "surfaceOp must be 'append' or a replace object",
    Code.REPLACE_OP_INVALID: "a replace op is exactly {op:'replace', start, end} with event seqs",
    Code.REPLACE_START_NOT_FOUND: "a replace's start seq must be a node currently on the surface",
    Code.REPLACE_END_NOT_FOUND: "a replace's end seq must be a node currently on the surface",
    Code.REPLACE_INVERTED: "a replace's start node must not come after its end node on the surface",
    Code.PROVENANCE_NOT_ARRAY: "sourceEventSeqs, when present, must be an array",
    Code.PROVENANCE_EMPTY: "sourceEventSeqs may be empty only on assistant/message",
    Code.PROVENANCE_NOT_SEQ: "every sourceEventSeqs entry must be a non-negative safe integer",
    Code.PROVENANCE_DUPLICATE: "sourceEventSeqs must not repeat a seq",
    Code.PROVENANCE_NOT_EARLIER: "sourceEventSeqs may cite only earlier events",
    Code.PROVENANCE_MISSING_SHADOWED: "a replace's sourceEventSeqs must cite every shadowed node",
    Code.TOOL_REWRITE_NOT_ONE_NODE: "a tool/result replace rewrites exactly one surface node",
    Code.TOOL_REWRITE_NOT_A_RESULT: "a tool/result replace must target a tool/result node",
    Code.TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT: "a tool/result rewrite may change only message.content[0].content",
    Code.SEED_NOT_JSON: "a seed event is outside the lossless JSON domain",
    Code.SEED_ENVELOPE_INVALID: "a seed event's envelope has unknown keys or badly typed fields",
    Code.SEED_SEQ_MISMATCH: "seed events must be numbered 0, 1, 2... in order",
    Code.MESSAGE_UNIDENTIFIED: "a seeded message must be an object with a non-empty string id",
    Code.MESSAGE_ROLE: "a seeded message has the role its event type requires",
    Code.MESSAGE_SOURCE: "a seeded message has a source object with a non-empty kind",
    Code.MESSAGE_CONTENT: "a seeded message's content must be an array",
    Code.MESSAGE_MODEL_SOURCE: "a seeded assistant message has a model source with provider and model",
    Code.MESSAGE_TOOL_SOURCE: "a seeded tool result has a tool source with a callId",
    Code.MESSAGE_TOOL_BLOCK: "a seeded tool result holds exactly one tool-result block, itself with array content",
    Code.MESSAGE_TOOL_CALL_ID_MISMATCH: "a seeded tool result's block and source name the same call",
    Code.REQUEST_HEADER_PROVIDER_MODEL: "a seeded request/header's config names a non-empty provider and model",
    Code.REQUEST_HEADER_REASONING_EFFORT: "a seeded request/header's reasoningEffort, when present, is a "
    "non-empty string",
    Code.REQUEST_HEADER_ADAPTER_DEFAULTS: "a seeded request/header's adapterDefaults, when present, is an object "
    "marking with true only reasoningEffort or maxTokens, each where the config sets it",
    Code.HEADER_NOT_JSON: "the session header is outside the lossless JSON domain",
    Code.HEADER_NOT_RECORD: "the session header, and a create's meta when given, must be a JSON object",
    Code.HEADER_VERSION: "the in-memory header carries the format version this spec writes (4)",
    Code.HEADER_ID_MISMATCH: "the header id must equal the session id",
    Code.HEADER_CREATED_AT: "createdAt must be a non-negative safe integer",
    Code.HEADER_CWD: "cwd, when present, must be an absolute path string",
    Code.HEADER_PARENT_SESSION: "parentSession, when present, must be a string",
    Code.HEADER_SEED_LENGTH: "seedLength, when present, must be a non-negative safe integer",
    Code.HEADER_ORIGIN: "origin, when present, must be 'subagent'",
    Code.HEADER_DELEGATION_DEPTH: "delegationDepth must be a non-negative safe integer",
    Code.HEADER_AGENT_PRESET: "agentPreset, when present, must be a string",
    Code.HEADER_IS_SEEDED: "isSeeded must be a boolean, always present",
    Code.HEADER_RETIRED_FIELDS: "a header line must not carry the retired sandboxMode/approvalPolicy fields",
    Code.HEADER_LINE_INVALID: "the first line of a log must be a session header line",
    Code.UNSUPPORTED_FORMAT: "the log's format version is neither 4 (written) nor 0 (read-only)",
    Code.HEADER_VERSION_FILE_MISMATCH: "a log's file name and its header's format version must agree "
    "(session.v4.jsonl[.zstd]: 4; session.jsonl[.zstd]: 0)",
    Code.SESSION_NOT_FOUND: "no live session has that id",
    Code.SESSION_NOT_LIVE: "the session object is not the store's live instance",
    Code.SESSION_ALREADY_EXISTS: "a live session already has that id",
    Code.INVALID_BOUNDARY: "a fork boundary must be the seq of an existing event",
    Code.OPEN_TURN: "a fork boundary must not lie inside an open turn",
    Code.OPEN_COMPACTION: "a seed that gets session/end-seed (a fork's prefix, an explicit seed) must not end "
    "inside an open compaction bracket",
    Code.PAIRING_SURFACE_CORRUPT: "every surface node must name the log event with that seq",
    Code.PAIRING_ORPHAN_RESULT: "a tool/result on the surface must follow an open tool call",
    Code.PAIRING_SEQ_NOT_ON_SURFACE: "a pairing query must name a seq on the current surface",
    Code.PRUNE_CONFIG_INVALID: "prune thresholds must fit head + marker + tail within the threshold",
    Code.PRUNE_SPAN_NOT_FOUND: "the prune transform could not place its marker",
    Code.PRUNE_NOT_SMALLER: "a pruned result must be smaller and within the threshold",
    Code.COMPACTION_CONFIG_INVALID: "compaction ratios and token budgets must be consistent",
    Code.COMPACTION_SURFACE_MISMATCH: "priced nodes must equal the current surface",
    Code.COMPACTION_BUSY: "another compaction is in flight (an unmatched compaction/start)",
    Code.COMPACTION_SUMMARY_NOT_SMALLER: "a summary must cost fewer tokens than the span it replaces",
    Code.COMPACTION_SURFACE_CHANGED: "the surface changed while the summary was being written",
    Code.COMPACTION_RANGE_INVALID: "a compaction range must be a balanced span of the current surface",
    Code.COMPACTION_NO_OPEN_TURN: "an automatic compaction must run inside an open turn",
    Code.COMPACTION_SUMMARY_UNSUPPORTED_CONTENT: "a summarizer's output must not contain an image",
    Code.COMPACTION_SUMMARY_EMPTY: "a summarizer's output must hold a text block with non-whitespace text",
    Code.TOKEN_SURFACE_CORRUPT: "every priced surface node must name the log event with that seq",
    Code.TOKEN_SHADOW_PRICE_MISMATCH: "a replace must follow the metering event that prices its exact range",
    Code.SPILL_CONFIG_INVALID: "maxInlineTokens, when set, must be a non-negative integer",
    Code.PRUNE_OUTSIDE_TURN: "a prune replacement (a replacing tool/result) is appended only inside an open turn",
    Code.COMPACTION_SUMMARY_FAILED: "a manual compaction could not produce a smaller summary (the attempt is logged)",
    Code.COMPACTION_SUMMARY_TIMEOUT: "the summarizer did not answer within the engine's timeout",
    Code.COMPACTION_COMMIT_FAILED: "a compaction's commit appends did not all land; inspect the log before retrying",
    Code.COMPACTION_PERSISTENCE_FAILED: "a manual compaction committed but its durability flush failed",
    Code.COMPACTION_STILL_ABOVE_THRESHOLD: "pressure compaction ran out of attempts while still above the threshold",
    Code.COMPACTION_NO_CAPACITY: "pressure compaction needs the context window of the routed model",
    Code.ABORTED: "the caller cancelled the operation through its abort signal",
    Code.SPILL_NOT_FOUND: "no spilled text is stored at that locator",
    Code.PROJECTION_UNIT_INVALID: "a projection unit has a non-empty key, a non-negative integer stateVersion and callables",
    Code.PROJECTION_VERSION_CONFLICT: "a projection key is shared only by registrants of the same stateVersion",
    Code.PROJECTION_STATE_INVALID: "a projection state is plain JSON that passes the unit's stateSchema",
    Code.PROJECTION_IDENTITY_BROKEN: "a projection unit returns the very same state for an event it does not "
    "care about, never a new equal one",
    Code.DURABILITY_CHECKPOINT_FAILED: "the flush before a model request, a tool or a step failed, so it was not run",
    Code.BATCH_POLICY_INVALID: "a batch policy's maxDelayMs and maxBytes are absent or non-negative integers",
    Code.EMPTY_PROJECT_PATH: "projectKey needs a non-empty cwd",
    Code.EMPTY_PATH_SEGMENT: "encodeSegment needs a non-empty id",
    Code.MALFORMED_CHUNK_ROW: "a packed chunk row must have the exact v0 row shape",
    Code.LEGACY_MALFORMED_TURN_START: "a v0 turn/start with a trigger has the exact legacy shape",
    Code.LEGACY_MALFORMED_TURN_END: "a v0 turn/end has the exact legacy shape",
    Code.LEGACY_MALFORMED_MESSAGE: "a v0 steering/message has one of its two legacy shapes",
    Code.LEGACY_MODE_SET: "mode/set is a retired legacy event type",
    Code.UNKNOWN_EVENT_TYPE: "a stored event of unknown type must be marked ignorable",
    Code.CORRUPT_LOG: "stored bytes are damaged somewhere other than a torn tail",
    Code.LOCKED: "another writer holds this session",
    Code.STORAGE_IO: "the storage medium failed (fsync, write, ENOSPC...)",
    Code.SESSION_CLOSED: "the session handle is closed",
}


class SpecError(Exception):
    """A rejection: a stable ``code`` for machines and a ``message`` for people."""

    def __init__(self, code: Code, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[type[SpecError], tuple[Code, str]]:
        return (type(self), (self.code, self.message))


def reject(code: Code, message: str) -> SpecError:
    """Build the error for a rejection (``raise reject(...)`` reads as the rule)."""
    return SpecError(code, message)
