"""dsh-session-spec: the executable specification of the DSH session event log.

Every rule is a typed pure function with a docstring that states it; every rejection is a
:class:`spec.codes.SpecError` with a stable code. The README's "short tour" gives a reading order;
the chapters are the subpackages:

- ``spec.log``: the value domain, the event envelope, the header, the surface and the session;
- ``spec.lineage``: seeds, fork, crash repair and resume;
- ``spec.shrink``: tool pairing, token prices, pruning, spill and summary compaction;
- ``spec.projections``: projections as folds of the log, and durability checkpoints;
- ``spec.format``: JSON text, file naming, framing and DSH's v0 records;
- ``spec.checks``: the whole-log checker.
"""

from spec.codes import Code, SpecError

__all__ = ["Code", "SpecError"]
