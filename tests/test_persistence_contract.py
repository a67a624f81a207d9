"""The persistence contract (tests/persistence_contract.py, SPEC-DECISIONS D2) on the in-memory
backend and the file store in zstd and plain mode, on the simulated power-loss disk."""

from __future__ import annotations

import pytest
from persistence_contract import Backend, contract_tests


@pytest.fixture(params=["memory", "zstd", "plain"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return Backend(request.param)


globals().update(contract_tests())
