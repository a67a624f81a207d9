"""What the vectors must cover, and the codes excused from it.

Every code of :mod:`spec.codes` is expected by at least one vector, except those listed here with
the reason no vector expects them: :data:`UNREACHABLE` (no request can provoke them) and
:data:`NOT_YET_COVERED` (a later protocol version would reach them). Every rule of the whole-log
checker is reported by at least one vector. :func:`validate_coverage` holds the generator to both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from conformance.cases.build import GenerationError
from spec.checks.log import RULES
from spec.codes import Code

UNREACHABLE: Final[Mapping[Code, str]] = {
    Code.SURFACE_METADATA_NOT_JSON: "surfaceOp and sourceEventSeqs arrive as JSON, and an absent key means "
    "'not passed'; no request carries a value outside the lossless domain (D5 keeps -0 and unsafe integers "
    "out of vectors)",
    Code.SEED_NOT_JSON: "seed entries arrive as JSON; no request carries a value outside the lossless domain",
    Code.HEADER_NOT_JSON: "meta arrives as JSON and the header keeps only its known fields; no request "
    "carries a value outside the lossless domain",
    Code.SESSION_NOT_LIVE: "a question of object identity (a stale session object); the protocol names "
    "sessions by id",
    Code.SESSION_CLOSED: "a closed persistence handle; the protocol's close releases the session, after "
    "which its id answers SESSION_NOT_FOUND",
    Code.COMPACTION_SURFACE_MISMATCH: "the engine prices the surface it selects from, so the priced seqs are "
    "the surface's; only a caller of select_compactable_range with another pricing meets it",
    Code.COMPACTION_COMMIT_FAILED: "the commit appends (the summary, the checkpoint, the end) are valid by "
    "construction and a session append never fails on storage (a batch write that fails stays buffered); "
    "a power cut during them answers CRASHED instead, which the crash family's compaction workload covers",
    Code.PROJECTION_STATE_INVALID: "the engine ops register units from the spec's catalogue, which keep their "
    "stateSchema; a unit of the subject's own that breaks it is not reachable through the protocol",
    Code.PROJECTION_IDENTITY_BROKEN: "the catalogue's units keep the identity rule; a subject's own unit is "
    "checked for it through spec.projection.derive_projection_changes (the projection vectors)",
}

NOT_YET_COVERED: Final[Mapping[Code, str]] = {}
"""Codes a later protocol version would reach; none is left since the engine ops (protocol
version 2, "Engine ops") reach the compaction engine, projections, spill and checkpoints."""

CHECKER_FUNCTION: Final = "spec.checker.check_log"  # the pure function whose results name checker rules


def excused_codes() -> dict[str, str]:
    """Every code no vector needs to expect, with its reason."""
    return {str(code): reason for code, reason in {**UNREACHABLE, **NOT_YET_COVERED}.items()}


def covered_codes(vectors: Mapping[str, str]) -> set[str]:
    """Every code some vector expects (``vectors``: relative path to file text)."""
    codes: set[str] = set()
    for text in vectors.values():
        vector = json.loads(text)
        expects = [vector["expect"]] if "expect" in vector else [step["expect"] for step in vector["steps"]]
        codes.update(expect["code"] for expect in expects if not expect["ok"])
    return codes


def checker_rules_covered(vectors: Mapping[str, str]) -> set[str]:
    """Every checker rule id some vector's expected violations name."""
    rules: set[str] = set()
    for text in vectors.values():
        vector = json.loads(text)
        if vector.get("function") == CHECKER_FUNCTION and vector["expect"]["ok"]:
            rules.update(violation["rule"] for violation in vector["expect"]["result"])
    return rules


def validate_coverage(vectors: Mapping[str, str]) -> None:
    """Every code is expected by some vector or excused with a reason; every checker rule is
    reported by some vector; no excused code is in fact covered."""
    covered = covered_codes(vectors)
    excused = set(excused_codes())
    missing = sorted(str(code) for code in Code if str(code) not in covered | excused)
    if missing:
        raise GenerationError(f"codes no vector expects and no reason excuses: {missing}")
    stale = sorted(covered & excused)
    if stale:
        raise GenerationError(f"codes excused although a vector covers them: {stale}")
    rules = sorted(set(RULES) - checker_rules_covered(vectors))
    if rules:
        raise GenerationError(f"checker rules no vector reports: {rules}")
