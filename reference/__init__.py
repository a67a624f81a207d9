"""The reference implementation: the specification made to run (sessions and their store, the
persistence backends, the compaction engine, projections, the CLI and the protocol server).

Modules moved into the chapter folders keep answering at their old paths (:mod:`spec._moved`).
"""

from spec import install_moved_modules

install_moved_modules(
    {
        "reference.fs": ("reference.persistence.fs",),
        "reference.powerloss": ("reference.persistence.powerloss",),
        "reference.compaction": ("reference.shrink.compaction",),
        "reference.spill": ("reference.shrink.spill",),
        "reference.checkpoints": ("reference.projections.checkpoints",),
    }
)
