"""Write DSH's expectation files from a certification run, every deviation with its reason.

  python -m scripts.dsh_expectations RUN.json OUT.json [--version V]

``RUN.json`` is ``python -m conformance … --json RUN.json`` run against ``subjects/dsh`` (as
``scripts/certify-dsh.sh`` does, which leaves its runs under ``.tools/reports/``). The file is the
generic one ``--write-expectations`` writes (:func:`conformance.expectations.write_expectations`:
each case that did not pass, with its fingerprint), its cause, kind and source filled in from
:data:`CAUSES`, the hand-written list of what DSH does, where, and what kind of deviation it is
(``subjects/dsh/FINDINGS.md`` has the evidence). A cause may hold in one profile only: the profile
is read from ``OUT.json``'s name (``dsh-<V>-invariants[-kill].json`` is "DSH with invariants", any
other "DSH as shipped"). A case no cause explains, or one whose outcome differs from its cause's status,
is refused: the script prints it and exits 1, so a new deviation is never written down without a
reason. Re-run it when the suite gains cases, and review the diff:

  bash scripts/certify-dsh.sh        # leaves .tools/reports/dsh-0.1.0-rc.8-{seam,kill}.json
  python -m scripts.dsh_expectations .tools/reports/dsh-0.1.0-rc.8-seam.json \
      conformance/expectations/dsh-0.1.0-rc.8.json
  python -m scripts.dsh_expectations .tools/reports/dsh-0.1.0-rc.8-kill.json \
      conformance/expectations/dsh-0.1.0-rc.8-kill.json
  bash scripts/certify-dsh.sh        # now exits 0
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from conformance.expectations import Expectation, encode_expectations, write_expectations

ROOT: Final = Path(__file__).resolve().parent.parent

SESSION: Final = "@deepseek-ai/dsh-session lib/index.js"
PERSISTENCE: Final = "@deepseek-ai/dsh-session-persistence lib/index.js"
JSONL: Final = "@deepseek-ai/dsh-session-persistence-jsonl lib/index.js"
PRUNER: Final = "@deepseek-ai/dsh-compaction-tool-result-pruner lib/index.js"
METER: Final = "@deepseek-ai/dsh-token-meter lib/index.js"
COMPACTION: Final = "@deepseek-ai/dsh-compaction lib/index.js"
PROJECTION: Final = "@deepseek-ai/dsh-session-projection lib/index.js"
UNPUBLISHED: Final = (
    "a session with no events is never published: its flush and close write nothing, so read and resume "
    "do not find it, and the files family finds no log where D1 puts one"
)
GENERATED: Final = (
    "the generated programs meet the deviations listed as the diverges- cases (an append of any type, a "
    "non-object meta, ids checked against live sessions only, the compaction bracket unclosed by repair, an "
    "empty session never published); which of them a run meets first depends on the programs Hypothesis draws"
)
GENERATED_SOURCE: Final = SESSION + ":1444-1463, :1656-1668, :1845; " + PERSISTENCE + ":831, :1249-1302"
BASIC: Final = "@deepseek-ai/dsh-compaction-basic lib/index.js"
SPILL: Final = "@deepseek-ai/dsh-spill-policy lib/index.js"
ONLY_AT_RC8: Final = (
    "npm view <package> versions: 0.1 line published at 0.1.0-rc.8 only, peerDependencies dsh-session "
    "^0.1.0-rc.8; subjects/dsh/releases/<version>/package.json; subjects/dsh/lib/dsh.mjs"
)
ENGINE_FAMILIES: Final = ("compaction", "spill", "overflow", "checkpoint")
"""The engine capabilities whose packages (dsh-compaction-basic, dsh-spill-policy,
dsh-session-checkpoint-policy) are published at 0.1.0-rc.8 and at no other 0.1 release."""


@dataclass(frozen=True)
class Cause:
    """What DSH does, where, what kind of deviation it is, and which cases it explains: keys matching one of ``keys`` (shell
    patterns), or cases of one of ``rules`` (the spec function a vector exercises); with a ``detail``
    (one text or several), only those whose report says it (one of them). Prefer a rule, a family
    pattern or a detail that names the deviation over one case's key, so that new cases of the same
    deviation (another family's vectors, a stateful family's ``diverges-`` case) are explained too."""

    status: str | tuple[str, ...]  # the outcome it explains (one, or each of several)
    reason: str
    source: str
    kind: str  # conformance.report.KINDS
    keys: tuple[str, ...] = ()
    rules: tuple[str, ...] = ()
    detail: str | tuple[str, ...] = ""
    invariants: bool | None = None  # the profile it holds in: as shipped (False), with invariants, or both

    @property
    def statuses(self) -> tuple[str, ...]:
        return (self.status,) if isinstance(self.status, str) else self.status

    def explains(self, case: Mapping[str, Any], invariants: bool = False) -> bool:
        if self.invariants is not None and self.invariants != invariants:
            return False
        key, rule = str(case["key"]), str(case.get("rule", ""))
        said = str(case.get("detail", ""))
        details = (self.detail,) if isinstance(self.detail, str) else self.detail
        if any(details) and not any(part and part in said for part in details):
            return False
        # ``rules`` are frozen protocol call names: a pure case's answer names the one it called (a
        # run stored before vectors named rules by their stable names gives it as the rule too)
        return any(fnmatch.fnmatchcase(key, pattern) for pattern in self.keys) or any(
            name == rule or f"{name} " in f"{said} " for name in self.rules
        )


CAUSES: tuple[Cause, ...] = (
    Cause(
        "failed",
        "crash repair closes an interrupted turn and its tool calls but never an open compaction bracket: "
        "for a compaction/start without its end it derives no compaction/end",
        SESSION + ":608-725 (interruptedTurnClosers)",
        kind="derived-rule",
        keys=(
            "repair/an-open-compaction-*",
            "repair/two-open-compactions-*",
            "repair/of-two-open-compactions-*",
            "repair/a-compaction-opened-between-turns-and-still-open-*",
            "repair/a-session-end-seed-turns-before-the-log-s-end-orphans-*",
        ),
    ),
    Cause(
        "failed",
        "DSH bounds a packed row's member seqs in doubles: seq0 + count - 1 rounds back down to 2^53-1 when "
        "seq0 + count passes 2^53, so a row whose last members' seqs are not safe integers is expanded instead "
        "of refused as malformed",
        SESSION + ":964 (the member-seq bound)",
        kind="subject-bug",
        keys=("storage/a-packed-row-whose-members-seqs-would-pass-*",),
    ),
    Cause(
        "failed",
        UNPUBLISHED,
        PERSISTENCE + ":808-816, :831, :1277",
        kind="decision",
        keys=("header/a-createdat-of-0-is-kept-*",),
        detail="got SESSION_NOT_FOUND",
    ),
    Cause(
        "failed",
        "the store turns a session id into a file name before it looks the session up, and refuses an "
        "empty id with its own error instead of answering that no such session exists",
        JSONL + ":85 (encodePathSegment)",
        kind="robustness",
        keys=("pure-drt/read-id-empty-string",),
    ),
    Cause(
        "failed",
        "append takes a message event's data unchecked: data that is an array is put on the surface as "
        "the message itself",
        SESSION + ":1444-1463",
        kind="robustness",
        keys=(
            "pure-drt/engine-append-data-empty-array",
            "pure-drt/append-data-empty-array",
        ),
    ),
    Cause(
        "unsupported",
        "DSH states some of the checker's rules, not all: its restore path (the Session constructor, which "
        "validates every event of a seed or a stored log) states seq-contiguous, envelope, message-shape, "
        "surface-op, surface-replace, provenance and tool-rewrite, and the invariant companions every release "
        "publishes the turn, step, call and compaction rules; a vector whose verdict depends on another rule "
        "(or on every rule: a log judged valid as a whole) is not answered. No published package states "
        "shadow-price (the token meter folds a replace with no metering event at zero cost), closers, "
        "seed-length, end-seed or delegation-depth (the restore path checks the header's field types only), "
        "or compaction-dangling (the compaction companion lets an end-seed orphan a start)",
        SESSION + ":1374-1391 (the seed's validation), :1114-1128 (the header's); "
        "@deepseek-ai/dsh-session lib/invariant.js:119-160, @deepseek-ai/dsh-compaction lib/invariant.js:56-67 "
        "(inheritedOrphanStartSeqs); " + METER + ":94-143 (foldSurfaceProjection); SPEC-DECISIONS D9",
        kind="spec-version",
        keys=("checker/*", "pure-drt/spec-checker-*"),
        detail="does not declare checker-rule",
    ),
    Cause(
        "failed",
        "DSH as shipped runs none of the invariant companions that state the turn, step, call and compaction "
        "rules: they are optional subpaths (./invariant) that no package root loads, so its default "
        "composition checks a whole log with the Session constructor alone, which accepts a log that breaks "
        "only a companion's rule (and stops at its own first refusal); the profile with invariants runs them",
        "@deepseek-ai/dsh-session README.md:7 (the optional companion), lib/index.js:1-4 (the root imports no "
        "./invariant), package.json:21-24 (its own export); @deepseek-ai/dsh-invariants README.md:48 (the "
        "root entrypoint of each owner remains independent of diagnostics), :69 (compositions add companions "
        "explicitly); @deepseek-ai/dsh-compaction lib/index.js:1",
        kind="decision",
        # a checker vector's key begins with the rule it is about; the companions' rules only, so a
        # failure on a rule DSH's restore path states is never filed here
        keys=(
            *(
                f"checker/{rule}-*"
                for rule in (
                    "turn-numbering",
                    "turn-open",
                    "turn-end",
                    "step-open",
                    "step-in-turn",
                    "step-numbering",
                    "step-scoped",
                    "tool-result-pairing",
                    "turn-enclosed",
                    "compaction-bracket",
                    "compaction-turn",
                    "compaction-summary",
                    "compaction-checkpoint",
                )
            ),
            "checker/every-problem-is-reported-not-only-the-first",
        ),
        detail="call spec.checker.check_log: result differs",
        invariants=False,
    ),
    Cause(
        "failed",
        "DSH refuses a log at its first violation (its restore path and its invariant companions throw), "
        "so it names one violation where the checker reports every one it finds",
        SESSION + ":1374-1391; @deepseek-ai/dsh-invariants lib/index.js:92-94 (fail throws InvariantError); "
        "SPEC-DECISIONS D9",
        kind="decision",
        keys=(
            "checker/compaction-bracket-a-number-as-a-compactionid-is-a-violation",
            "checker/compaction-bracket-an-empty-compactionid-is-a-violation",
            "checker/compaction-bracket-an-empty-sourcecommandid-is-a-violation",
            "checker/compaction-checkpoint-a-checkpoint-replace-belongs-to-an-open-compaction",
            "checker/compaction-turn-a-closed-compaction-is-no-orphan-of-a-later-end-seed",
            "checker/compaction-turn-a-start-is-no-orphan-until-an-end-seed-comes-*",
            "checker/every-problem-is-reported-not-only-the-first",
            "checker/step-open-a-step-start-inside-a-step-drops-that-step-s-unanswered-calls",
            "checker/turn-enclosed-a-tool-result-replace-outside-a-turn-is-a-violation",
        ),
        invariants=True,
    ),
    Cause(
        "failed",
        "DSH's restore path ends a log that does not end with a session/end-seed with one, so the compaction "
        "companion counts a start still open at the end a stale orphan and lets a turn/end cross it",
        SESSION + ":1391 (the appended end-seed); @deepseek-ai/dsh-compaction lib/invariant.js "
        ":56-67, :164-182 (inheritedOrphanStartSeqs, seed)",
        kind="derived-rule",
        keys=("checker/compaction-turn-a-turn-end-crossing-an-open-start-is-reported-when-no-end-seed-*",),
        invariants=True,
    ),
    Cause(
        "not run",
        "DSH 0.1 writes format 0: the cases about the format 4 header itself do not apply",
        "SPEC-DECISIONS D11; " + SESSION + ":1117",
        kind="spec-version",
        rules=("spec.header.validate_header", "spec.storage.decode_header_line"),
    ),
    Cause(
        "unsupported",
        "DSH reads a log only as a file of its JSONL store (published in the 0.1 line at rc.8 only, so a release "
        "paired with none reads no log at all), in format 0 only: a header of any other version is refused "
        "before any framing rule applies (the suite hands it its own format 4 header lines in format 0), and "
        "a packed row comes back as the events it packs, never as the stored record the protocol's result holds",
        JSONL
        + ":181-195 (refuseForeignFormatVersion, parseHeaderRecord), :919-952 (readPrefix); "
        + "@deepseek-ai/dsh-session lib/index.js:1029-1034 (decodeStorageRecord); "
        + ONLY_AT_RC8,
        kind="spec-version",
        rules=("spec.framing.decode_jsonl_log",),
    ),
    Cause(
        "unsupported",
        "the token meter prices the events it folds into its own surface, never a list of nodes: a node that "
        "names no event of the log cannot be put to it",
        METER + ":112-129 (foldSurfaceProjection), :355-367 (foldSurfaceTokens)",
        kind="harness",
        rules=("spec.tokens.price_surface",),
    ),
    Cause(
        "failed",
        "append never checks its event type: an empty, a non-string or an absent type is committed",
        SESSION + ":1444-1463",
        kind="subject-bug",
        keys=(
            "session/an-empty-event-type-is-rejected",
            "session/an-event-type-that-is-not-a-string-is-rejected",
            "session/an-append-without-a-type-is-rejected-as-an-invalid-event-type",
            "session/a-rejected-append-changes-nothing-and-consumes-no-seq",
            "pure-drt/append-type-*",
            "pure-drt/engine-append-type-*",
        ),
    ),
    Cause(
        "failed",
        "create ignores a meta that is not an object (every field reads as undefined) instead of refusing it",
        SESSION + ":1656-1668",
        kind="robustness",
        keys=(
            "header/meta-that-is-a-string-is-not-a-header-record-and-no-session-is-created",
            "header/meta-that-is-an-array-is-not-a-header-record-and-no-session-is-created",
            "pure-drt/create-meta-*",
        ),
    ),
    Cause(
        "failed",
        "a seed entry that is null crashes envelope validation (TypeError, reading 'type' of null)",
        SESSION + ":1195",
        kind="robustness",
        keys=("seed/a-seed-entry-that-is-null-is-not-an-event",),
    ),
    Cause(
        "failed",
        "crash repair writes no compaction/end for a compaction a crash left open (the seed's rule, D3 item 6)",
        SESSION + ":626-725 (interruptedTurnClosers)",
        kind="spec-version",
        keys=(
            "repair/*-resuming-a-log-left-inside-a-compaction-*",
            "repair/an-open-compaction-is-closed-after-the-call-results-and-before-the-step-and-turn",
            "repair/an-open-compaction-outside-a-turn-gets-its-compaction-end-alone",
            "crash/d3-6",
            "pure-drt/spec-repair-derive-closers",
        ),
    ),
    Cause(
        "failed",
        "a damaged committed line is read anyway: invalid UTF-8 becomes U+FFFD, and a line that does not parse "
        "or decode (a record that is not an object, a malformed chunk row) or breaks the seqs is taken for a "
        "torn tail (dropped on read, cut off by resume) unless a later line holds a turn/end (D3 item 5)",
        JSONL + ":275-299, :279, :928-937, :1238-1247",
        kind="subject-bug",
        keys=(
            "crash/d3-5",
            "storage/a-complete-line-that-does-not-parse-is-a-corrupt-log-not-a-torn-tail",
            "storage/even-the-last-complete-line-must-parse",
            "json/a-digit-outside-ascii-is-not-a-json-digit",
            "json/a-stored-line-that-begins-with-a-byte-order-mark-is-damage",
            "pure-drt/spec-framing-decode-jsonl-log",
            "storage/a-seq-gap-in-a-stored-log-is-corruption",
            "storage/a-stored-record-that-is-not-an-object-is-corruption",
            "pure-drt/spec-legacy-upgrade-v0-records",
        ),
    ),
    Cause(
        "failed",
        "a stored number past the largest double is read as JavaScript's JSON.parse reads it, as Infinity (which "
        "the protocol's JSON, like DSH's own next write, shows as null), instead of being refused as damage: "
        "the project's JSON domain holds finite numbers only (D5)",
        JSONL + ":279 (JSON.parse of each complete line)",
        kind="derived-rule",
        keys=("json/a-stored-number-past-the-largest-double-*",),
    ),
    Cause(
        "failed",
        "minting skips only live ids, so a minted id can name a stored session",
        SESSION + ":1649-1652",
        kind="subject-bug",
        keys=("storage/a-minted-id-skips-ids-that-are-stored",),
    ),
    Cause(
        "failed",
        "create consults only live sessions: creating a stored id succeeds and fails at the next flush "
        "(or adopts the stored log when the new seed reproduces it)",
        PERSISTENCE + ":1249-1302",
        kind="subject-bug",
        keys=(
            "files/a-dsh-v0-log-holding-mode-set-is-refused",
            "storage/creating-a-session-whose-id-is-stored-is-rejected",
        ),
    ),
    Cause(
        "failed",
        UNPUBLISHED,
        PERSISTENCE + ":808-816, :831, :1277",
        kind="decision",
        keys=(
            "exhaustive/diverges-resume-expected-ok-got-session-not-found",
            "exhaustive/diverges-read-expected-ok-got-session-not-found",
        ),
    ),
    Cause(
        "failed",
        "the pruner's Config schema takes any number as a size, past the safe integers (1e+300 included), "
        "where decode_prune_config refuses a size that is not a non-negative safe integer",
        PRUNER + ":62-66 (Config)",
        kind="robustness",
        keys=("pure-drt/spec-prune-decode-prune-config",),
        detail="expected PRUNE_CONFIG_INVALID, got success",
    ),
    Cause(
        "failed",
        "the pruner crashes on a tool result whose content is not blocks, and empties a text block whose "
        "text is not a string",
        PRUNER + ":149-150, :103-114",
        kind="robustness",
        keys=(
            "prune/a-configuration-that-is-not-an-object-is-rejected",
            "prune/a-tool-result-whose-first-content-entry-is-not-a-block-is-skipped",
            "prune/blocks-that-are-not-text-are-kept-in-place-and-not-measured",
            "pure-drt/spec-prune-*",
        ),
    ),
    Cause(
        "failed",
        "the tool-pairing balance reads an assistant message's data.message.content without checking its "
        "shape: a surface message whose data is not a message crashes (TypeError) instead of opening no call",
        COMPACTION + ":21-27 (eventDelta)",
        kind="robustness",
        keys=("pure-drt/spec-pairing-*",),
    ),
    Cause(
        "failed",
        "the subject's adapter names an event that has no seq by its position (DSH's drive needs a "
        "seq), so an event the spec's fold skips (no safe-integer seq) is folded and counted as a "
        "change: an artefact of the adapter, met when the generated log holds such an event",
        "subjects/dsh/lib/engine.mjs (projectionChanges)",
        kind="harness",
        keys=("pure-drt/spec-projection-derive-projection-changes",),
        detail="result differs at $.changed",
    ),
    Cause(
        "failed",
        "a metering event whose range has no end still arms a claim",
        METER + ":112-121",
        kind="subject-bug",
        keys=("tokens/a-metering-event-without-a-usable-range-arms-nothing",),
    ),
    Cause(
        "failed",
        "the token meter prices a message without checking its shape: data or content that is not "
        "blocks crashes the fold (TypeError) instead of pricing nothing",
        METER + ":23-25, :45",
        kind="robustness",
        keys=("pure-drt/spec-tokens-fold-shadow-price",),
    ),
    Cause(
        "failed",
        "the store's path encoding reads the id's length before checking it: a header without an id "
        "crashes (TypeError) instead of failing as an empty path segment",
        JSONL + ":84-85, :145-146",
        kind="robustness",
        keys=("pure-drt/spec-storage-derive-session-relpath",),
    ),
    Cause(
        "failed",
        "append commits any event type, the store's and crash repair's own included (session/end-seed, "
        "the compaction bracket, an interrupted turn/end, a result with repair's error code)",
        SESSION + ":1444-1463",
        kind="derived-rule",
        keys=(
            "session/*-cannot-be-appended*",
            "session/an-interrupted-turn-end-cannot-be-appended*",
            "session/a-tool-result-with-error-code-*",
        ),
    ),
    Cause(
        "failed",
        "fork checks only the open turn at its boundary, and a seed is not checked for an open compaction "
        "bracket, so a child can inherit a dangling compaction/start",
        SESSION + ":1866-1874",
        kind="derived-rule",
        keys=(
            "fork/a-fork-without-a-boundary-of-a-log-that-ends-inside-a-compaction-is-rejected",
            "fork/a-boundary-at-a-compaction-start-is-inside-that-compaction",
            "fork/a-boundary-inside-a-standalone-compaction-bracket-is-rejected",
            "session/a-seed-that-ends-inside-an-open-compaction-bracket-is-rejected",
        ),
    ),
    Cause(
        "failed",
        "fork checks only live sessions for the child id, so a stored child id is refused late or not at all",
        SESSION + ":1845",
        kind="subject-bug",
        keys=("fork/a-stored-child-id-is-rejected-*",),
    ),
    Cause(
        "failed",
        "a cancelled compaction's compaction/end records the cancellation's own message (the runtime's "
        'AbortError, "This operation was aborted"), where the spec derives the fixed text "the operation '
        'was aborted"',
        BASIC + ":463-466 (errorChain(error)); @deepseek-ai/dsh-llm lib/index.js:313",
        kind="derived-rule",
        keys=("compaction/*", "overflow/*", "machine/*", "exhaustive/*"),
        detail='expected "the operation was aborted", got "This operation was aborted"',
    ),
    Cause(
        "failed",
        "the token meter refuses an assistant message outside a step (no matching step/start), so "
        "compaction cannot price a log the spec accepts",
        METER + ":526, :534",
        kind="derived-rule",
        keys=("*",),
        detail="has no matching step/start event",
    ),
    Cause(
        "failed",
        "DSH's spill policy spills nothing unless its maxInlineBytes is configured (omitted, the plugin "
        "registers nothing); the spec's default of 12500 tokens where a spill store is configured is derived "
        "from the value DSH's bundle ships (50000 bytes), which a host passes as configuration",
        SPILL + ":23, :86; notes/dsh-compaction-projection.md §10.2",
        kind="derived-rule",
        keys=("spill/spill-is-on-by-default-*",),
        detail="expected 12500, got null",
    ),
    Cause(
        ("failed", "error"),
        "DSH's spill policy bounds a result's UTF-8 bytes (maxInlineBytes) and writes its notice in bytes; "
        "the spec's limit is estimated tokens and its notice counts characters (notes §10.2, adapted from "
        "bytes to tokens)",
        SPILL + ":52, :85-87, :101-121, :142",
        kind="spec-version",
        keys=("spill/*",),
    ),
    Cause(
        "unsupported",
        "DSH's write-behind has no byte bound: its only batch setting is writeBatchMaxDelayMs",
        PERSISTENCE + ":785-794; " + JSONL + ":775",
        kind="derived-rule",
        keys=("storage/*", "pure-drt/reset-batchmaxbytes-*"),
        detail="UNSUPPORTED_OP for reset",
    ),
    Cause(
        ("failed", "error"),
        "DSH's write-behind delay is at least 1 ms (the store's Config schema), so a delay bound of 0 is "
        "refused",
        JSONL + ":775; " + PERSISTENCE + ":793",
        kind="derived-rule",
        keys=("storage/*", "pure-drt/reset-batch*"),
        detail="expected number >= 1 but got 0",
    ),
    Cause(
        "failed",
        "DSH's write-behind is a wall-clock timer armed at a batch's first event (the subject keeps it from "
        "firing mid-case, so that a run does not depend on the machine's speed): an op never writes a batch "
        "that the events' times say is due, so appends older than the bound are not durable when it answers",
        PERSISTENCE + ":326-333, :354-358",
        kind="derived-rule",
        keys=("storage/*batch*", "storage/with-a-*-bound-*"),
    ),
    Cause(
        ("failed", "error"),
        "DSH 0.1 reads only its own log names (session.jsonl[.zstd]): a placed format 4 log "
        "(session.v4.jsonl[.zstd]) is no session to it",
        JSONL + ":156-158 (logPath), :803-808 (locate)",
        kind="spec-version",
        keys=("files/*", "projection/*"),
        detail="got SESSION_NOT_FOUND",
    ),
    Cause(
        "failed",
        "a v0 file whose header says version 4 is read as a log of a newer format (UNSUPPORTED_FORMAT), "
        "not as a header that disagrees with its file name",
        PERSISTENCE + ":481 (sessionFormatVersionRefusal)",
        kind="spec-version",
        keys=("files/a-dsh-v0-log-whose-header-says-version-4-*",),
    ),
    Cause(
        "failed",
        "a last line that parses but fails the packed row's validation is dropped as a torn tail, so the "
        "log reads as if the row were never written instead of being refused (D3 item 5's tolerance)",
        JSONL + ":275-299; " + SESSION + ":912-919 (validateRunData)",
        kind="subject-bug",
        keys=("files/a-dsh-v0-log-with-a-packed-row-whose-dt-does-not-match-*",),
    ),
    Cause(
        "failed",
        "compaction takes any positive integer as a context window, 2**53 included (no safe-integer bound)",
        BASIC + ":106-108 (resolveCompactSpec)",
        kind="robustness",
        keys=("pure-drt/compact-if-needed-contextwindow-*",),
    ),
    Cause(
        "failed",
        "the spill policy takes any non-negative integer as its limit, 2**53 and 1e+300 included (no safe-integer "
        "bound)",
        SPILL + ":87",
        kind="robustness",
        keys=("pure-drt/spill-maxinlinetokens-*", "pure-drt/spec-spill-plan-max-inline-tokens"),
    ),
    Cause(
        "failed",
        "DSH's write-behind delay is at least 1 ms (the store's Config schema), so the crash family's "
        "compaction workload, written with a delay bound of 0, cannot be replayed",
        JSONL + ":775; " + PERSISTENCE + ":793",
        kind="derived-rule",
        keys=("crash/*",),
        detail="BATCH_POLICY_INVALID",
    ),
    Cause(
        "failed",
        "the projection registry has no host-only units: snapshot serves every registered key, the "
        "sessionDigest included (SPEC-DECISIONS D7 serves the wire units only)",
        PROJECTION + ":105-115",
        kind="decision",
        keys=("*",),  # a vector of the rule, or a stateful family's diverges- case
        detail="differs at $.values.sessionDigest: unexpected",
    ),
    Cause(
        "failed",
        "the prune pass never checks for an open turn: it appends its compaction/prune and replacement "
        "outside one",
        PRUNER + ":136-193 (pruneSession)",
        kind="derived-rule",
        keys=("*",),  # a vector of the rule, or a stateful family's diverges- case
        detail=("expected PRUNE_OUTSIDE_TURN, got success", "expected error PRUNE_OUTSIDE_TURN"),
    ),
    Cause(
        "unsupported",
        "the kill check runs DSH on the real file system, where no storage fault can be injected: the "
        "subject declares no crash-seam there, and these cases are certified by the seam run",
        "subjects/dsh/server.mjs (without --seam); PROTOCOL.md capability crash-seam",
        kind="harness",
        keys=("*",),
        detail="does not declare crash-seam",
    ),
    Cause(
        "not run",
        "the kill check kills the whole process, which tears no file and damages no committed line, so D3 "
        "items 4 and 5 are not reached there (the seam run reaches them)",
        "conformance/crash.py (kill check); SPEC-DECISIONS D3",
        kind="harness",
        keys=("crash/d3-4", "crash/d3-5"),
    ),
    Cause(
        "failed",
        GENERATED,
        GENERATED_SOURCE,
        kind="subject-bug",
        keys=("machine/agrees", "exhaustive/agrees", "machine/diverges-*"),
    ),
    Cause(
        "failed",
        UNPUBLISHED,
        PERSISTENCE + ":808-816, :831, :1277",
        kind="decision",
        keys=("files/layout",),
        detail="no log at",
    ),
)


# Releases before 0.1.0-rc.8 (certify-dsh.sh VERSION, scripts/compatibility.py): packages first
# published at rc.8, whose peer range (dsh-session ^0.1.0-rc.8) an older session does not meet, so
# the release's pin cannot pair them. Listed last, so that a cause of rc.8's own comes first.
CAUSES += (
    Cause(
        "unsupported",
        "no JSONL store (dsh-session-persistence-jsonl) pairs with this release: its only 0.1 release needs "
        "dsh-session 0.1.0-rc.8 or later, so the subject declares no storage",
        ONLY_AT_RC8,
        kind="spec-version",
        keys=("*",),
        detail=(
            "does not declare storage",
            "does not declare import",
            "does not declare batch-policy",
            "needs capability export",
            "needs capability storage",
            "needs capability crash-seam, or capability storage over stdio",
            "UNSUPPORTED_OP for reset",
        ),
    ),
    Cause(
        "unsupported",
        "this release publishes no compaction engine, spill policy or checkpoint policy "
        "(dsh-compaction-basic, dsh-spill-policy, dsh-session-checkpoint-policy are published at 0.1.0-rc.8 "
        "and not at another 0.1 release), so the subject declares none of these capabilities",
        "npm view <package> versions; subjects/dsh/lib/dsh.mjs",
        kind="spec-version",
        keys=("*",),
        detail=tuple(f"does not declare {family}" for family in ENGINE_FAMILIES),
    ),
    Cause(
        "unsupported",
        "no tool-result pruner pairs with this release: its only 0.1 release needs dsh-session 0.1.0-rc.8 or "
        "later, so the subject declares no prune",
        ONLY_AT_RC8,
        kind="spec-version",
        keys=("*",),
        detail="does not declare prune",
    ),
    Cause(
        "unsupported",
        "this release publishes no session projection registry (dsh-session-projection exists at "
        "0.1.0-rc.6 and rc.8, not at rc.7 or 0.1.1-rc.2), so the subject declares no projection",
        "npm view @deepseek-ai/dsh-session-projection versions; subjects/dsh/lib/dsh.mjs",
        kind="spec-version",
        keys=("*",),
        detail=("does not declare projection", "UNSUPPORTED_OP for spec.projection."),
    ),
    Cause(
        "unsupported",
        "no package computing the function pairs with this release (the pruner; the JSONL store, whose naming, "
        "scanner and v0 upgrade the subject drives; the spill policy: first published at rc.8, needing "
        "dsh-session 0.1.0-rc.8 or later)",
        ONLY_AT_RC8,
        kind="spec-version",
        keys=("*",),
        detail=tuple(
            f"UNSUPPORTED_OP for spec.{name}"
            for name in (
                "prune.",
                "storage.",
                "pairing.",
                "tokens.fold_shadow_price",
                "legacy.",
                "framing.",
                "spill.",
            )
        ),
    ),
)


# The profile "DSH with invariants" (certify-dsh.sh --invariants): DSH's optional invariant companions
# refuse appends that the spec's core, like DSH's core without them, accepts (a case whose set-up
# meets the refusal ends in error). Listed first, so that a refusal of theirs is never explained by a
# cause of the core's.
INVARIANT_SOURCE: Final = (
    "@deepseek-ai/dsh-{} lib/invariant.js{} (InvariantError); notes/dsh-session-core.md §2.2, §11.1"
)
INVARIANT_CAUSES: Final = {
    "session": (
        "with DSH's invariant companion, dsh-session refuses an append that breaks its turn, step and call "
        "enclosure (an event outside an open turn or step, a tool/result before its tool/call, a turn or step "
        "number out of order); the spec's core accepts it, as DSH's core does: these relations are checked "
        "only by the optional companion",
        ":14-105",
    ),
    "compaction": (
        "with DSH's invariant companion, dsh-compaction refuses a compaction event outside its bracket (an end "
        "or summary with no start, a start inside an open compaction, a compaction event that crosses a turn, "
        "a successful end with no summary); the spec's core accepts it, as DSH's core does",
        ":36-160",
    ),
}
CAUSES = (
    *(
        Cause(
            ("failed", "error"),
            reason,
            INVARIANT_SOURCE.format(package, lines),
            kind="decision",
            keys=("*",),
            detail=(
                f'invariant violated by "@deepseek-ai/dsh-{package}"',
                f'invariant violated by \\"@deepseek-ai/dsh-{package}\\"',  # inside a JSON answer
            ),
        )
        for package, (reason, lines) in INVARIANT_CAUSES.items()
    ),
    Cause(
        "failed",
        "the generated programs meet the invariant companions' refusals: an append the spec's core accepts "
        "answers DSH's InvariantError (which one a run meets first depends on the programs drawn)",
        INVARIANT_SOURCE.format("session", "") + "; @deepseek-ai/dsh-compaction lib/invariant.js",
        kind="decision",
        keys=(
            "exhaustive/diverges-append-expected-ok-got-internal",
            "machine/diverges-append-expected-ok-got-internal",
        ),
    ),
    Cause(
        "failed",
        "the kill check's workload appends a step's events with no turn open, which the invariant companion "
        "refuses, so the crash rounds find no session where one was flushed",
        INVARIANT_SOURCE.format("session", ":14-105"),
        kind="decision",
        keys=("crash/d3-1",),
        detail="--invariants",
    ),
    Cause(
        "not run",
        "the kill check's workload appends a step's events with no turn open, which the invariant companion "
        "refuses, so the crash rounds observe nothing for these properties",
        INVARIANT_SOURCE.format("session", ":14-105"),
        kind="decision",
        keys=("crash/d3-2", "crash/d3-3", "crash/d3-6"),
    ),
    *CAUSES,
)


def cause_of(case: Mapping[str, Any], invariants: bool = False) -> Cause | None:
    """The first cause that explains the case with the case's own outcome in the profile (as shipped,
    or with invariants), or ``None``."""
    return next((c for c in CAUSES if case["outcome"] in c.statuses and c.explains(case, invariants)), None)


def explain(
    cases: Sequence[Mapping[str, Any]], invariants: bool = False
) -> tuple[list[Expectation], list[str]]:
    """The expectation entries for the cases that did not pass (cause, kind and source from
    :data:`CAUSES`, the fingerprint from the run), and the problems (unexplained cases, or a cause
    whose status is not the case's outcome)."""
    problems: list[str] = []
    for case in cases:
        causes = [cause for cause in CAUSES if cause.explains(case, invariants)]
        if case["outcome"] == "passed" or cause_of(case, invariants) is not None:
            continue
        if causes:
            said = " or ".join(sorted({status for cause in causes for status in cause.statuses}))
            problems.append(f"{case['key']} ended {case['outcome']}, its causes say {said}")
        else:
            problems.append(
                f"no cause explains {case['key']} ({case['outcome']}): {str(case['detail'])[:200]}"
            )
    written = write_expectations("dsh", "", cases, explainer_for(invariants))
    return [entry for entry in written.expectations if not entry.todo], problems


def explainer_for(invariants: bool) -> Callable[[Mapping[str, Any]], tuple[str, str, str] | None]:
    """:func:`cause_of` in one profile, as :func:`conformance.expectations.write_expectations` asks
    for it."""

    def explainer(case: Mapping[str, Any]) -> tuple[str, str, str] | None:
        cause = cause_of(case, invariants)
        return None if cause is None else (cause.reason, cause.kind, cause.source)

    return explainer


def is_invariants(expectations: Path) -> bool:
    """Whether an expectation file is of the profile "DSH with invariants", as its name says
    (``dsh-<VERSION>-invariants[-kill].json``, the name ``certify-dsh.sh --invariants`` reads)."""
    return expectations.name.removesuffix(".json").removesuffix("-kill").endswith("-invariants")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the --json output of a certification run")
    parser.add_argument("out", type=Path, help="the expectation file to write")
    args = parser.parse_args(argv)
    run = json.loads(args.run.read_text(encoding="utf-8"))
    invariants = is_invariants(args.out)
    _, problems = explain(run["cases"], invariants)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    subject = run["subject"]
    written = write_expectations(
        str(subject["name"]), str(subject["version"]), run["cases"], explainer_for(invariants)
    )
    args.out.write_text(encode_expectations(written), encoding="utf-8")
    print(f"wrote {args.out}: {len(written.expectations)} expected deviations of {len(run['cases'])} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
