"""Projections, made to run: the registry of fold units with its cache (:mod:`.registry`), and
durability checkpoints (:mod:`.checkpoints`). The registry's names are importable from the
package too, where they lived before the package existed."""

from reference.projections.registry import (
    CACHE_FILE_NAME,
    DIGEST_KEY,
    DIGEST_ZERO,
    SESSION_DIGEST,
    CacheMedium,
    FileCacheMedium,
    MemoryCacheMedium,
    ProjectionCache,
    Projections,
    ProjectionSnapshot,
    apply_session_digest,
    is_digest_state,
)

__all__ = [
    "CACHE_FILE_NAME",
    "DIGEST_KEY",
    "DIGEST_ZERO",
    "SESSION_DIGEST",
    "CacheMedium",
    "FileCacheMedium",
    "MemoryCacheMedium",
    "ProjectionCache",
    "ProjectionSnapshot",
    "Projections",
    "apply_session_digest",
    "is_digest_state",
]
