"""Where the tests find ../shared (real DSH logs, golden scenarios), and how they skip without it."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent.parent / "shared"


def shared_dir(*parts: str) -> Path:
    """A folder under ../shared, or skip the test when it is absent (a user's clone has none)."""
    path = SHARED.joinpath(*parts)
    if not path.is_dir():
        pytest.skip(f"{path} is not present")
    return path
