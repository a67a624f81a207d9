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
"""

from typing import Final

from spec.codes import Code, SpecError

CHAPTERS: Final = ("log", "format", "lineage", "shrink", "projections", "checks")
"""The chapters, each built only on those before it."""

__all__ = ["CHAPTERS", "Code", "SpecError"]
