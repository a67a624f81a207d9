"""Shared test configuration: Hypothesis profiles, the location of ../shared, and a throwaway
PostgreSQL cluster for the tests that need one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Any]:
    """A throwaway PostgreSQL cluster for the whole run, started by the project itself
    (scripts/pg_cluster.py) and removed afterwards; the tests that use it are skipped only when the
    server binaries are not installed (``bash scripts/setup.sh`` installs them)."""
    from scripts.pg_cluster import PgCluster, why_unavailable

    reason = why_unavailable()
    if reason is not None:
        pytest.skip(reason)
    cluster = PgCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()
