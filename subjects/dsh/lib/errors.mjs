// DSH's rejections, mapped to this project's stable codes (spec/codes.py).
//
// DSH throws plain `Error`s whose messages name the rule (notes/dsh-session-core.md §3,
// notes/dsh-persistence.md), plus a few typed errors: SessionForkError carries DSH's own fork code
// (SPEC-DECISIONS D4 keeps those codes), the persistence package has
// SessionPersistenceCorruptionError and SessionFormatUnsupportedError, and file-system failures
// carry a Node errno `code`. The table below matches a message to the code of the rule it enforces;
// the first row that matches wins, so the more specific rows come first. A DSH exception that no
// row matches is INTERNAL, with its message (a crash inside DSH, or a message this table lacks).

/** [pattern, code]: patterns are tested against the error's message. */
const MESSAGE_CODES = [
  // lossless JSON and retired vocabulary (append, seed, header)
  [/carries non-JSON-serializable data/, "DATA_NOT_JSON"],
  [/carries non-JSON-serializable surface metadata/, "SURFACE_METADATA_NOT_JSON"],
  [/seed event at index \d+ is not losslessly JSON-serializable/, "SEED_NOT_JSON"],
  [/session header is not losslessly JSON-serializable/, "HEADER_NOT_JSON"],
  [/unsupported legacy request\/header-delta/, "LEGACY_HEADER_DELTA"],
  [/unsupported legacy request\/header reason "fallback"/, "LEGACY_FALLBACK_REASON"],
  [/unsupported legacy mode\/set/, "LEGACY_MODE_SET"],
  [/malformed pre-react-loop turn\/start/, "LEGACY_MALFORMED_TURN_START"],
  [/malformed pre-react-loop turn\/end/, "LEGACY_MALFORMED_TURN_END"],
  [/malformed pre-react-loop steering\/message/, "LEGACY_MALFORMED_MESSAGE"],
  // the seed envelope
  [/seed event at index \d+ has an invalid event envelope/, "SEED_ENVELOPE_INVALID"],
  [/seed event at index \d+ has seq .* seed must be contiguous from 0/, "SEED_SEQ_MISMATCH"],
  [/seed request\/header at index \d+ lacks provider\/model/, "REQUEST_HEADER_PROVIDER_MODEL"],
  [/seed request\/header at index \d+ has an invalid reasoningEffort/, "REQUEST_HEADER_REASONING_EFFORT"],
  [/seed request\/header at index \d+ has invalid adapterDefaults/, "REQUEST_HEADER_ADAPTER_DEFAULTS"],
  // message shapes (seed and restore)
  [/lacks an identified message/, "MESSAGE_UNIDENTIFIED"],
  [/message must have role/, "MESSAGE_ROLE"],
  [/message has invalid source/, "MESSAGE_SOURCE"],
  [/message has invalid content/, "MESSAGE_CONTENT"],
  [/message must have model source/, "MESSAGE_MODEL_SOURCE"],
  [/message must have tool source/, "MESSAGE_TOOL_SOURCE"],
  [/message must contain one tool-result block/, "MESSAGE_TOOL_BLOCK"],
  [/message has mismatched tool call ids/, "MESSAGE_TOOL_CALL_ID_MISMATCH"],
  // the surface
  [/session event seq .* is not contiguous/, "SEQ_NOT_CONTIGUOUS"],
  [/is not surface-eligible and cannot carry surfaceOp/, "SURFACE_OP_ON_LOG_ONLY"],
  [/is not surface-eligible and cannot carry sourceEventSeqs/, "PROVENANCE_ON_LOG_ONLY"],
  [/is surface-eligible and requires a surfaceOp marker/, "SURFACE_OP_MISSING"],
  [/carries an invalid replace surfaceOp/, "REPLACE_OP_INVALID"],
  [/carries an invalid surfaceOp/, "SURFACE_OP_INVALID"],
  [/sourceEventSeqs on event at seq .* must be an array/, "PROVENANCE_NOT_ARRAY"],
  [/sourceEventSeqs must not be empty/, "PROVENANCE_EMPTY"],
  [/sourceEventSeqs must densely contain/, "PROVENANCE_NOT_SEQ"],
  [/sourceEventSeqs must not contain duplicates/, "PROVENANCE_DUPLICATE"],
  [/sourceEventSeqs must reference earlier events/, "PROVENANCE_NOT_EARLIER"],
  [/sourceEventSeqs must include every shadowed surface node/, "PROVENANCE_MISSING_SHADOWED"],
  [/surface replace: start seq .* not found in surface/, "REPLACE_START_NOT_FOUND"],
  [/surface replace: end seq .* not found in surface/, "REPLACE_END_NOT_FOUND"],
  [/surface replace: start seq .* is after end seq/, "REPLACE_INVERTED"],
  [/tool\/result surface replacement must rewrite exactly one/, "TOOL_REWRITE_NOT_ONE_NODE"],
  [/tool\/result surface replacement must target a current tool\/result/, "TOOL_REWRITE_NOT_A_RESULT"],
  [/tool\/result surface replacement may change only content/, "TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT"],
  // the header
  [/session header uses retired policy baseline fields/, "HEADER_RETIRED_FIELDS"],
  [/session header is not a plain JSON record/, "HEADER_NOT_RECORD"],
  [/session header version must be/, "HEADER_VERSION"],
  [/session header id .* does not match session id/, "HEADER_ID_MISMATCH"],
  [/createdAt must be a non-negative safe integer/, "HEADER_CREATED_AT"],
  [/session header cwd must be/, "HEADER_CWD"],
  [/session header parentSession must be/, "HEADER_PARENT_SESSION"],
  [/session header seedLength must be/, "HEADER_SEED_LENGTH"],
  [/session header origin must be/, "HEADER_ORIGIN"],
  [/session header delegationDepth must be/, "HEADER_DELEGATION_DEPTH"],
  [/session header agentPreset must be/, "HEADER_AGENT_PRESET"],
  // the store and the persistence coordinator
  [/cannot prepare session ".*" while it is live/, "SESSION_ALREADY_EXISTS"],
  [/already has a persisted log on disk/, "SESSION_ALREADY_EXISTS"],
  [/already exists in this backend/, "SESSION_ALREADY_EXISTS"],
  [/\(id collision\)/, "SESSION_ALREADY_EXISTS"],
  [/^session ".*" already exists$/, "SESSION_ALREADY_EXISTS"],
  [/^session ".*" not found$/, "SESSION_NOT_FOUND"],
  [/is not live in this store/, "SESSION_NOT_FOUND"],
  // stored bytes
  [/malformed .*-chunks storage row/, "MALFORMED_CHUNK_ROW"],
  [/corrupt session log: header line is not valid JSON/, "HEADER_LINE_INVALID"],
  [/corrupt session log: first line is not a session header/, "HEADER_LINE_INVALID"],
  [/corrupt (Zstandard )?session log/, "CORRUPT_LOG"],
  [/empty or header-less (Zstandard )?session log/, "CORRUPT_LOG"],
  // storage naming
  [/cannot encode an empty path segment/, "EMPTY_PATH_SEGMENT"],
  [/cannot encode an empty project path/, "EMPTY_PROJECT_PATH"],
  // tool pairing (dsh-compaction)
  [/tool-pairing balance: surface seq .* has no matching session event/, "PAIRING_SURFACE_CORRUPT"],
  [/tool-pairing balance: tool\/result .* has no matching tool-call/, "PAIRING_ORPHAN_RESULT"],
  [/tool-pairing balance: surface seq .* not found/, "PAIRING_SEQ_NOT_ON_SURFACE"],
  // shadow prices (dsh-token-meter)
  [/token surface: replace at seq .* has no adjacent shadow price/, "TOKEN_SHADOW_PRICE_MISMATCH"],
  // pruning (dsh-compaction-tool-result-pruner)
  [/^ToolResultPruneConfig:/, "PRUNE_CONFIG_INVALID"],
  [/tool-result prune: failed to locate the removed text span/, "PRUNE_SPAN_NOT_FOUND"],
  [/tool-result prune: replacement must be smaller/, "PRUNE_NOT_SMALLER"],
  // summary compaction (dsh-compaction-basic)
  [/^compactRegion: (start|end) seq .* (not found in surface|is after end seq|is not a balanced boundary)/, "COMPACTION_RANGE_INVALID"],
  [/^compactRegion: no open turn/, "COMPACTION_NO_OPEN_TURN"],
  [/^summarization produced no text summary content/, "COMPACTION_SUMMARY_EMPTY"],
  [/^compaction summary cannot contain image output/, "COMPACTION_SUMMARY_UNSUPPORTED_CONTENT"],
  [/^summary is not smaller than the shadowed content/, "COMPACTION_SUMMARY_NOT_SMALLER"],
  [/^summarization timed out after/, "COMPACTION_SUMMARY_TIMEOUT"],
  [/^compaction: (the selected span|session surface|selected surface)/, "COMPACTION_SURFACE_CHANGED"],
  [/^compaction still above threshold/, "COMPACTION_STILL_ABOVE_THRESHOLD"],
  [/^compaction-basic: no context capacity/, "COMPACTION_NO_CAPACITY"],
  [/^BasicCompactionConfig/, "COMPACTION_CONFIG_INVALID"],
  [/already in progress; the session compaction lock is already active/, "COMPACTION_BUSY"],
  // projections (dsh-session-projection)
  [/^session projection .* stateVersion must be a non-negative integer/, "PROJECTION_UNIT_INVALID"],
  [/^session projection key .* is already registered at stateVersion .*; refusing to share it/, "PROJECTION_VERSION_CONFLICT"],
];

/** dsh-compaction's ManualCompactionError classes (index.js:154-167) to codes. */
const MANUAL_COMPACTION_CODES = {
  busy: "COMPACTION_BUSY",
  cancelled: "ABORTED",
  changed: "COMPACTION_SURFACE_CHANGED",
  summary: "COMPACTION_SUMMARY_FAILED",
  commit: "COMPACTION_SUMMARY_FAILED",
  persistence: "COMPACTION_PERSISTENCE_FAILED",
};

/** Node errnos that mean the storage medium failed (the protocol's fail_next injects these). */
const STORAGE_ERRNOS = new Set(["EIO", "ENOSPC", "EDQUOT", "EROFS"]);

/** The code of one DSH message, or undefined when no row matches. */
export function codeOfMessage(message) {
  const inner = /^invalid seed event at index \d+: (.*)$/s.exec(message);
  if (inner !== null) return codeOfMessage(inner[1]);
  for (const [pattern, code] of MESSAGE_CODES) if (pattern.test(message)) return code;
  return undefined;
}

/** Whether an error (or one an AggregateError wraps) is a failure of the storage medium. */
function isStorageFailure(error) {
  if (error instanceof AggregateError) return error.errors.some(isStorageFailure);
  return typeof error?.code === "string" && STORAGE_ERRNOS.has(error.code);
}

/** The protocol error `{code, message}` for an exception thrown by DSH. */
export function protocolErrorOf(error) {
  const message = error instanceof Error ? error.message : String(error);
  if (isStorageFailure(error)) return { code: "STORAGE_IO", message };
  if (error?.name === "SessionForkError" && typeof error.code === "string") return { code: error.code, message };
  if (error?.name === "ManualCompactionError") return { code: MANUAL_COMPACTION_CODES[error.code] ?? "INTERNAL", message };
  if (error?.name === "AbortError") return { code: "ABORTED", message };
  if (error?.name === "SessionFormatUnsupportedError") {
    const code = /unknown to this harness and not marked ignorable/.test(message) ? "UNKNOWN_EVENT_TYPE" : "UNSUPPORTED_FORMAT";
    return { code, message };
  }
  if (error?.name === "SessionPersistenceCorruptionError") {
    // A stored log that fails validation: the rule that failed if a legacy or header rule names
    // it, otherwise the log is corrupt.
    const inner = error.cause instanceof Error ? codeOfMessage(error.cause.message) : undefined;
    const kept = inner !== undefined && /^(LEGACY_|HEADER_|MALFORMED_CHUNK_ROW|CORRUPT_LOG)/.test(inner);
    return { code: kept ? inner : "CORRUPT_LOG", message };
  }
  const code = codeOfMessage(message);
  return code === undefined ? { code: "INTERNAL", message: `${error?.name ?? "Error"}: ${message}` } : { code, message };
}

// --- the checker's rule ids (conformance/PROTOCOL.md, capability `checker-rule:<id>`) ---
//
// DSH publishes no whole-log checker, but it states rules about a whole log in two places, and the
// subject claims exactly the rule ids they state, in both profiles: the `Session` constructor, which
// validates every event of a seed or a restored log (dsh-session lib/index.js:1374-1391: the
// envelope, message shapes, retired vocabulary, contiguous seqs, surface metadata), and the
// `./invariant` companions every release publishes beside its root (dsh-session lib/invariant.js:
// turns, steps, calls; dsh-compaction lib/invariant.js: brackets, owners, summaries, checkpoints).
// A rule DSH publishes a check for is a rule DSH states, as a browser is judged on every feature it
// ships; as shipped, no package root loads a companion (dsh-invariants README.md:48), so check_log
// answers what that default runs, the constructor alone, and a log that breaks a companion's rule
// passes it: a deviation of the profile, not an unanswered case. What no published package states
// (shadow prices, closers, lineage, a start left dangling) is not claimed.

/** The rule ids DSH's restore path states: a violation throws in the Session constructor. */
export const RESTORE_RULES = ["seq-contiguous", "envelope", "message-shape", "surface-op", "surface-replace", "provenance", "tool-rewrite"];

/** The rule ids the session and compaction invariant companions state. */
export const COMPANION_RULES = [
  "turn-numbering", "turn-open", "turn-end", "step-open", "step-in-turn", "step-numbering", "step-scoped", "tool-result-pairing", "turn-enclosed",
  "compaction-bracket", "compaction-turn", "compaction-summary", "compaction-checkpoint",
];

/** A restore-path code (codeOfMessage) to the rule id it states. */
const RESTORE_RULE_OF_CODE = {
  SEED_NOT_JSON: "envelope", SEED_ENVELOPE_INVALID: "envelope", LEGACY_HEADER_DELTA: "envelope", LEGACY_FALLBACK_REASON: "envelope",
  SEED_SEQ_MISMATCH: "seq-contiguous", SEQ_NOT_CONTIGUOUS: "seq-contiguous",
  REQUEST_HEADER_PROVIDER_MODEL: "message-shape", MESSAGE_UNIDENTIFIED: "message-shape", MESSAGE_ROLE: "message-shape",
  MESSAGE_SOURCE: "message-shape", MESSAGE_CONTENT: "message-shape", MESSAGE_MODEL_SOURCE: "message-shape",
  MESSAGE_TOOL_SOURCE: "message-shape", MESSAGE_TOOL_BLOCK: "message-shape", MESSAGE_TOOL_CALL_ID_MISMATCH: "message-shape",
  SURFACE_OP_ON_LOG_ONLY: "surface-op", PROVENANCE_ON_LOG_ONLY: "surface-op", SURFACE_OP_MISSING: "surface-op",
  REPLACE_OP_INVALID: "surface-op", SURFACE_OP_INVALID: "surface-op",
  PROVENANCE_NOT_ARRAY: "provenance", PROVENANCE_EMPTY: "provenance", PROVENANCE_NOT_SEQ: "provenance", PROVENANCE_DUPLICATE: "provenance",
  PROVENANCE_NOT_EARLIER: "provenance", PROVENANCE_MISSING_SHADOWED: "provenance",
  REPLACE_START_NOT_FOUND: "surface-replace", REPLACE_END_NOT_FOUND: "surface-replace", REPLACE_INVERTED: "surface-replace",
  TOOL_REWRITE_NOT_ONE_NODE: "tool-rewrite", TOOL_REWRITE_NOT_A_RESULT: "tool-rewrite", TOOL_REWRITE_CHANGES_MORE_THAN_CONTENT: "tool-rewrite",
};

/** [package, pattern, rule]: a companion's InvariantError message to the rule it states; the
 * first row that matches wins. */
const COMPANION_RULE_OF_MESSAGE = [
  ["@deepseek-ai/dsh-session", /^seq must strictly increase/, "seq-contiguous"],
  ["@deepseek-ai/dsh-session", /^turn\/start \S+ while turn \S+ is still open/, "turn-open"],
  ["@deepseek-ai/dsh-session", /^turn\/start expected turn/, "turn-numbering"],
  ["@deepseek-ai/dsh-session", /^turn\/end \S+ does not match open turn/, "turn-end"],
  ["@deepseek-ai/dsh-session", /^(turn\/end|step\/start) \S+ while step \S+ is still open/, "step-open"],
  ["@deepseek-ai/dsh-session", /^step\/start in turn \S+ but open turn is/, "step-in-turn"],
  ["@deepseek-ai/dsh-session", /^step\/start expected step/, "step-numbering"],
  ["@deepseek-ai/dsh-session", /^\S+ names turn \S+\/step \S+ but open is/, "step-scoped"],
  ["@deepseek-ai/dsh-session", /^tool\/result for .* with no prior tool\/call in this step/, "tool-result-pairing"],
  ["@deepseek-ai/dsh-session", /appended outside any open turn/, "turn-enclosed"],
  ["@deepseek-ai/dsh-compaction", /^compaction checkpoint /, "compaction-checkpoint"],
  ["@deepseek-ai/dsh-compaction", /^turn\/(start|end) cannot cross an open/, "compaction-turn"],
  ["@deepseek-ai/dsh-compaction", /^compaction\/\S+ (is standalone but turn|for turn .* appended outside any open turn|names turn)/, "compaction-turn"],
  ["@deepseek-ai/dsh-compaction", /^compaction\/end owner /, "compaction-turn"],
  ["@deepseek-ai/dsh-compaction", /^compaction\/summary (shadowedSeqs|shadowedRange|shadowedTokenCount) /, "compaction-summary"],
  ["@deepseek-ai/dsh-compaction", /^compaction\//, "compaction-bracket"],
  ["@deepseek-ai/dsh-compaction", /^successful compaction\/end requires/, "compaction-bracket"],
];

/** The rule id a refusal of a whole log states: a restore-path error's (through its code) or an
 * InvariantError's; a refusal no row names is `dsh:<its message>`, which no rule id equals, so
 * the case fails and shows it. */
export function checkerRuleOf(error) {
  const message = error instanceof Error ? error.message : String(error);
  if (error?.name === "InvariantError") {
    const inner = message.replace(/^invariant violated by "[^"]*": /, "");
    for (const [owner, pattern, rule] of COMPANION_RULE_OF_MESSAGE) if (owner === error.packageName && pattern.test(inner)) return rule;
    return `dsh:${message}`;
  }
  return RESTORE_RULE_OF_CODE[codeOfMessage(message)] ?? `dsh:${message}`;
}
