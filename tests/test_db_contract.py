"""The persistence contract (tests/persistence_contract.py, SPEC-DECISIONS D2), run once more
against the database backends: SQLite on a file, PostgreSQL on the cluster the tests started.

Each contract test is taken as it is; only the ``backend`` fixture differs. A "restart" is a new
process on the same database: the old store is abandoned (its writer locks released, as its
death would release them; nothing it buffered is flushed) and a new one is opened.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from persistence_contract import contract_tests

from reference.persistence.database import DatabaseStore
from reference.persistence.postgres import PostgresStore
from reference.persistence.sqlite import SqliteStore
from reference.store import SessionStore


class DatabaseBackend:
    """The contract's view of a backend: ``service``, ``restart()`` and ``store()``."""

    def __init__(self, kind: str, open_store: Any) -> None:
        self.kind = kind
        self._open = open_store
        self.service: DatabaseStore = open_store()
        self._opened = [self.service]

    def restart(self) -> DatabaseStore:
        self.service.close()
        self.service = self._open()
        self._opened.append(self.service)
        return self.service

    def store(self, start: int = 1_000) -> SessionStore:
        ticks = itertools.count(start)
        return SessionStore(self.service, clock=lambda: next(ticks))

    def close(self) -> None:
        for service in self._opened:
            service.close()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DatabaseBackend]:
    if request.param == "sqlite":
        opened = DatabaseBackend("sqlite", lambda: SqliteStore(str(tmp_path / "sessions.sqlite3")))
        yield opened
        opened.close()
        return
    cluster = request.getfixturevalue("postgres_cluster")
    schema = f"contract_{secrets.token_hex(6)}"
    opened = DatabaseBackend("postgres", lambda: PostgresStore(cluster.dsn, schema, lock_wait_ms=0))
    yield opened
    opened.service.drop_schema()
    opened.close()


# Every contract test that takes a backend runs here too, with this module's fixture.
globals().update(contract_tests())
