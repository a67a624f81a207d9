"""Model checking by Hypothesis: a stateful machine drives a subject and the spec model side by side.

Step by step the machine creates sessions (plain, seeded, with lineage meta, invalid meta),
appends every kind of event (valid messages, tool calls and results, log-only boundaries, and
invalid ones), replaces spans of the surface like a summary, rewrites tool results like a prune,
forks at good and bad boundaries and, for storage subjects, flushes, closes, reads, resumes and
crashes. Every answer is compared with the model's (events, surface, replaceGeneration, derived
messages, firstLiveSeq, header, error codes), and after every step each live session's ``state``
is compared too. A crash is resolved by reading what survived and checking it against
SPEC-DECISIONS D3 items 1-3 before the model adopts it.

- :mod:`~conformance.machine.machines`: the three machines, each extending the one before;
- :mod:`~conformance.machine.variants`: the named pools the rules draw from and the requests
  they make;
- :mod:`~conformance.machine.family`: the profiles, a run, and the runner's entry point.
"""

from __future__ import annotations

from conformance.machine.family import (
    check_machine,
    machine_for,
    machine_settings,
    run_machine,
)
from conformance.machine.machines import (
    CrashMachine,
    SessionMachine,
    StorageMachine,
)

__all__ = [
    "CrashMachine",
    "SessionMachine",
    "StorageMachine",
    "check_machine",
    "machine_for",
    "machine_settings",
    "run_machine",
]
