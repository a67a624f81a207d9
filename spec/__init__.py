"""dsh-session-spec: the executable specification of the DSH session event log.

Every rule is a typed pure function with a docstring that states it; every rejection is a
:class:`spec.codes.SpecError` with a stable code. The chapters are the subpackages, in the order
they build on each other (:data:`CHAPTERS`): a module imports from its own chapter and the ones
before it, never from a later one (``tests/test_layering.py``). ``spec.codes`` comes before every
chapter; ``spec.wire`` and ``spec.wire_engine`` after them all.

- ``spec.log``: the value domain, the event envelope, the header, the surface, seeds, what a log
  leaves open (a turn, the compaction lock) and the session;
- ``spec.format``: JSON text, file naming, framing and DSH's v0 records;
- ``spec.lineage``: fork, crash repair, resume and copying between stores;
- ``spec.shrink``: tool pairing, token prices, pruning, spill and summary compaction;
- ``spec.projections``: projections as folds of the log, and durability checkpoints;
- ``spec.checks``: the whole-log checker, which judges a log by the rules of every chapter.

Modules moved into those chapters keep answering at their protocol version 1 paths
(:mod:`spec._moved`).
"""

from typing import Final

from spec._moved import install as install_moved_modules
from spec.codes import Code, SpecError

CHAPTERS: Final = ("log", "format", "lineage", "shrink", "projections", "checks")
"""The chapters, each built only on those before it."""

# old module path -> where it lives now (protocol version 1 named functions by the old paths)
MOVED_MODULES: Final = {
    "spec.json": ("spec.log.json", "spec.format.json_text"),
    "spec.events": ("spec.log.events",),
    "spec.header": ("spec.log.header",),
    "spec.surface": ("spec.log.surface",),
    "spec.provenance": ("spec.log.provenance",),
    "spec.tool_rewrite": ("spec.log.tool_rewrite",),
    "spec.session": ("spec.log.session",),
    "spec.seed": ("spec.log.seed",),
    "spec.fork": ("spec.lineage.fork",),
    "spec.repair": ("spec.lineage.repair",),
    "spec.pairing": ("spec.shrink.pairing",),
    "spec.tokens": ("spec.shrink.tokens",),
    "spec.prune": ("spec.shrink.prune",),
    "spec.spill": ("spec.shrink.spill",),
    "spec.summary": ("spec.shrink.summary",),
    "spec.bracket": ("spec.shrink.bracket",),
    "spec.pressure": ("spec.shrink.pressure",),
    "spec.compaction": ("spec.shrink.compaction",),
    "spec.projection": ("spec.projections.units",),
    "spec.durability": ("spec.projections.durability",),
    "spec.storage": ("spec.format.naming",),
    "spec.framing": ("spec.format.framing",),
    "spec.chunk_rows": ("spec.format.chunk_rows",),
    "spec.legacy": ("spec.format.legacy",),
    "spec.checker": ("spec.checks.log",),
    "spec.checker_turns": ("spec.checks.turns",),
    "spec.checker_compaction": ("spec.checks.compaction",),
    "spec.checker_lineage": ("spec.checks.lineage",),
    "spec.violation": ("spec.checks.violation",),
}
install_moved_modules(MOVED_MODULES)

__all__ = ["CHAPTERS", "MOVED_MODULES", "Code", "SpecError", "install_moved_modules"]
