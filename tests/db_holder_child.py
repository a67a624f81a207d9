"""A child process that becomes the writer of one session and then waits to be killed.

    python -m tests.db_holder_child sqlite PATH SESSION
    python -m tests.db_holder_child postgres DSN SCHEMA SESSION

It opens the session for writing (creating and flushing it first when it is not stored), prints
``holding`` on stdout, and blocks reading stdin until the parent kills it or closes stdin.
"""

from __future__ import annotations

import sys

from reference.persistence.database import DatabaseStore
from reference.store import SessionStore
from spec.codes import Code, SpecError


def open_database(argv: list[str]) -> tuple[DatabaseStore, str]:
    if argv[0] == "sqlite":
        from reference.persistence.sqlite import SqliteStore

        return SqliteStore(argv[1]), argv[2]
    from reference.persistence.postgres import PostgresStore

    return PostgresStore(argv[1], argv[2]), argv[3]


def main() -> None:
    database, session_id = open_database(sys.argv[1:])
    store = SessionStore(database, clock=lambda: 1)
    try:
        session = store.resume(session_id)
    except SpecError as error:
        if error.code != Code.SESSION_NOT_FOUND:
            raise
        session = store.create(session_id)
    session.append("turn/start", {"turn": 1})
    session.flush()
    print("holding", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
