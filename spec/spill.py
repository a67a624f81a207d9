"""Where spilled tool results go, and which results may spill (SPEC-DECISIONS D8; seed 002;
notes/dsh-compaction-projection §10.1-§10.2).

The size rule and the preview are in :mod:`spec.compaction` (``should_spill``,
``derive_spill_text``, ``derive_spill_preview``). This module adds the two rules around them: a
result spills only at the top level and never for the ``read`` tool (reading a spilled file back
must not spill again), and a spilled text is stored under a per-session directory whose name does
not reveal the session id.
"""

from __future__ import annotations

import hashlib
from typing import Final

from spec.storage import encode_segment

READ_TOOL_NAME: Final = "read"  # the tool a model uses to fetch a spilled result back
SPILL_LABEL: Final = "result"  # which part of a tool call was spilled
SESSION_DIR_HASH_CHARS: Final = 12  # hex characters of sha256(session id) in a spill directory name


def is_spill_candidate(tool_name: str, nested: bool) -> bool:
    """Only a top-level tool call's result may spill, and never the ``read`` tool's: the result
    of a nested call belongs to its parent, and a read of a spilled file must come back whole
    (notes §10.2 step 2)."""
    return not nested and tool_name != READ_TOOL_NAME


def derive_spill_session_dir(session_id: str) -> str:
    """A session's spill directory: ``session-`` and the first 12 hex digits of the SHA-256 of
    its id's UTF-8 bytes, stable for the session and free of path characters (notes §10.1)."""
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"session-{digest[:SESSION_DIR_HASH_CHARS]}"


def derive_spill_suggested_name(tool_name: str) -> str:
    """The name a spill asks for: the tool's name with ``.txt`` (notes §10.2 step 5)."""
    return f"{tool_name}.txt"


def derive_spill_file_name(token: str, suggested_name: str) -> str:
    """A spilled text's file name: a fresh random token (so that two spills never collide), a
    hyphen, and the suggested name as one safe path segment (notes §10.1; the segment encoding is
    the session directory's, ``spec.storage.encode_segment``)."""
    return f"{token}-{encode_segment(suggested_name)}"
