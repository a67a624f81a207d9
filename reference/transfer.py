"""``dsh-session copy``: copy sessions from one backend to another, each verified by reading it
back, and safe to interrupt.

    dsh-session copy --from file:/var/dsh/sessions --to postgres:'host=db dbname=dsh' [SESSION...]

An endpoint is ``KIND:WHERE``:

- ``file:ROOT`` — a file store (logs written zstd-compressed); ``file+plain:ROOT`` writes plain JSONL;
- ``sqlite:PATH`` — an SQLite database file;
- ``postgres:DSN`` — a PostgreSQL database; an empty DSN means ``$DSH_POSTGRES_DSN`` (then libpq's
  defaults); ``postgres:DSN#SCHEMA`` picks a schema other than ``dsh_session``;
- ``logs:PATH`` (source only) — loose log files under PATH, as ``dsh-session check`` finds them,
  DSH's v0 logs included, read with the file store's reader (and written out as v4).

An in-memory store is no endpoint: it dies with the process that would copy into it.

What is copied is each session's durable log as a reader sees it (a torn tail is not part of it,
and no closers are added). Each session is written with one flush — one transaction, or one
whole-file publication — so an interrupted copy leaves it either complete or absent. A session the
destination already holds is skipped when it holds exactly the same log (so running the copy again
completes an interrupted one) and refused, untouched, when it holds anything else
(:mod:`spec.lineage.transfer`). Every copy is read back and compared, and the whole-log checker must give
it the verdict it gives the source. One line per session goes to stderr as the copy runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final, TextIO

from reference.logfile import InputCode, InputError, find_logs, read_log_file
from reference.persistence.api import PersistenceService, StoredLog
from reference.persistence.database import DatabaseStore
from reference.persistence.filestore import FileStore, load_log
from spec.checks.log import check_session_copy
from spec.codes import Code, SpecError, reject
from spec.format.naming import LOG_NAMES
from spec.lineage.transfer import ALREADY_COPIED, plan_session_copy
from spec.log.header import HEADER_FORMAT_VERSION

KINDS: Final = ("file", "file+plain", "sqlite", "postgres", "logs")
EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_UNREADABLE = 0, 1, 2, 3  # the convention of every dsh-session command


class EndpointError(ValueError):
    """An endpoint that cannot be used (a usage error: exit status 2, no traceback)."""


@dataclass(frozen=True)
class Endpoint:
    kind: str
    where: str
    schema: str | None = None


def parse_endpoint(text: str) -> Endpoint:
    """``KIND:WHERE`` (see the module docstring)."""
    kind, colon, where = text.partition(":")
    if not colon or kind not in KINDS:
        if kind == "memory":
            raise EndpointError(
                "memory: is no endpoint: an in-memory store dies with the process that copies into it"
            )
        raise EndpointError(f"{text!r} is not an endpoint: write KIND:WHERE, KIND one of {', '.join(KINDS)}")
    if kind != "postgres":
        if not where:
            raise EndpointError(f"{text!r} names no path")
        return Endpoint(kind, where)
    from reference.persistence.postgres import DEFAULT_SCHEMA, SCHEMA_NAME

    dsn, hash_mark, schema = where.rpartition("#")
    if hash_mark and SCHEMA_NAME.fullmatch(schema):
        return Endpoint(kind, dsn, schema)
    return Endpoint(kind, where, DEFAULT_SCHEMA)


# --- sources ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceEntry:
    """One session to copy: how progress names it, its id when known, and how to read it."""

    label: str
    session_id: str | None
    load: Callable[[], StoredLog]


def _given(log: StoredLog) -> Callable[[], StoredLog]:
    return lambda: log


def _failing(error: SpecError) -> Callable[[], StoredLog]:
    def load() -> StoredLog:
        raise error

    return load


def _read_file(path: str) -> StoredLog:
    """A loose log file, read as ``dsh-session check`` reads it (its form told by its content)."""
    try:
        loaded = read_log_file(path).log
    except InputError as error:
        raise reject(Code.STORAGE_IO, error.message) from None
    return StoredLog(loaded.header, (*loaded.events, *loaded.recovered), loaded.format_version)


def loose_log_entries(path: str) -> Iterator[SourceEntry]:
    """Every log file under ``path`` (or ``path`` itself), in sorted order."""
    for found in find_logs([path]):
        try:
            log = _read_file(found)
        except SpecError as error:
            yield SourceEntry(found, None, _failing(error))
            continue
        yield SourceEntry(found, str(log.header["id"]), _given(log))


def file_store_entries(store: FileStore) -> Iterator[SourceEntry]:
    """Every session directory's log, readable or not (``FileStore.list`` skips unreadable ones,
    and a copy must not pass over a session in silence)."""
    fs = store.fs
    if not fs.is_dir(store.root):
        return
    for project in fs.listdir(store.root):
        project_dir = f"{store.root}/{project}"
        if not fs.is_dir(project_dir):
            continue
        for session in fs.listdir(project_dir):
            for name in LOG_NAMES:
                candidate = f"{project_dir}/{session}/{name}"
                if fs.exists(candidate):
                    yield _file_entry(store, candidate)
                    break


def _file_entry(store: FileStore, path: str) -> SourceEntry:
    try:
        header = load_log(None, store.fs.read_bytes(path), path.endswith(".zstd")).header
    except (SpecError, OSError) as error:
        failure = (
            error
            if isinstance(error, SpecError)
            else reject(Code.STORAGE_IO, f"could not read {path}: {error}")
        )
        return SourceEntry(path, None, _failing(failure))
    session_id = str(header["id"])
    return SourceEntry(session_id, session_id, partial(store.read, session_id))


def database_entries(store: DatabaseStore) -> Iterator[SourceEntry]:
    for key, found in store.list_rows():
        if isinstance(found, SpecError):
            yield SourceEntry(f"{store.location}#{key}", None, _failing(found))
            continue
        session_id = str(found["id"])
        yield SourceEntry(session_id, session_id, partial(store.read, session_id))


def require_source(endpoint: Endpoint) -> None:
    """A source is read, never made: a path that does not exist is :class:`InputError`
    ``PATH_NOT_FOUND`` before any store is opened on it (an SQLite store would create the file and
    its directory; a file store would copy nothing and report success)."""
    if endpoint.kind != "postgres" and not os.path.exists(endpoint.where):
        raise InputError(
            InputCode.PATH_NOT_FOUND,
            f"the source {endpoint.kind}:{endpoint.where} does not exist; nothing was copied or created",
        )


def open_store(endpoint: Endpoint, source: bool = False) -> PersistenceService:
    """The store an endpoint names (not ``logs:``, which is no store); a source SQLite database is
    opened read-only."""
    if endpoint.kind in ("file", "file+plain"):
        return FileStore(os.path.abspath(endpoint.where), compressed=endpoint.kind == "file")
    if endpoint.kind == "sqlite":
        from reference.persistence.sqlite import SqliteStore

        return SqliteStore(endpoint.where, read_only=source)
    if endpoint.kind == "postgres":
        from reference.persistence.postgres import PostgresStore

        return PostgresStore(endpoint.where or None, endpoint.schema or "dsh_session")
    raise EndpointError(f"{endpoint.kind}: can only be a source")


def source_entries(
    endpoint: Endpoint, store: PersistenceService | None, sessions: Sequence[str]
) -> list[SourceEntry]:
    """What to copy: the named sessions, or every session of the source."""
    if endpoint.kind == "logs":
        entries = list(loose_log_entries(endpoint.where))
        return [entry for entry in entries if entry.session_id in sessions] if sessions else entries
    assert store is not None
    if sessions:
        return [
            SourceEntry(session_id, session_id, partial(store.read, session_id)) for session_id in sessions
        ]
    if isinstance(store, FileStore):
        return list(file_store_entries(store))
    if isinstance(store, DatabaseStore):
        return list(database_entries(store))
    return [
        SourceEntry(str(header["id"]), str(header["id"]), partial(store.read, str(header["id"])))
        for header in store.list()
    ]


# --- the copy --------------------------------------------------------------------------------------


@dataclass
class CopyTally:
    copied: int = 0
    already_there: int = 0
    refused: int = 0
    unreadable: int = 0
    unverified: int = 0

    @property
    def status(self) -> int:
        if self.unreadable:
            return EXIT_UNREADABLE
        return EXIT_REFUSED if self.refused or self.unverified else EXIT_OK


def _read_destination(destination: PersistenceService, session_id: str) -> StoredLog | None:
    try:
        return destination.read(session_id)
    except SpecError as error:
        if error.code == Code.SESSION_NOT_FOUND:
            return None
        raise


def copy_session(source: StoredLog, destination: PersistenceService) -> str:
    """Copy one session (or find it copied already); returns ``"copied"`` or ``"already there"``.
    Raises a typed error when it is refused or the copy does not read back as the source."""
    session_id = str(source.header["id"])
    found = _read_destination(destination, session_id)
    plan = plan_session_copy(
        source.header, source.events, None if found is None else (found.header, found.events)
    )
    if plan != ALREADY_COPIED:
        handle = destination.create(source.header)
        try:
            handle.append(source.events)
            handle.flush()
        finally:
            handle.close()
    copied = destination.read(session_id)
    problems = check_session_copy(source.header, source.events, copied.header, copied.events)
    if problems:
        raise reject(
            Code.CORRUPT_LOG,
            f'the copy of "{session_id}" does not read back as the source: {"; ".join(problems)}',
        )
    return "already there" if plan == ALREADY_COPIED else "copied"


def run_copy(entries: Sequence[SourceEntry], destination: PersistenceService, progress: TextIO) -> CopyTally:
    tally = CopyTally()
    width = len(str(len(entries)))
    for number, entry in enumerate(entries, start=1):
        prefix = f"[{number:>{width}}/{len(entries)}] {entry.label}"
        try:
            source = entry.load()
            if source.format_version != HEADER_FORMAT_VERSION:
                prefix += f" (v{source.format_version}, copied as v{HEADER_FORMAT_VERSION})"
        except SpecError as error:
            tally.unreadable += 1
            print(
                f"{prefix}: unreadable, not copied [{error.code}] {error.message}", file=progress, flush=True
            )
            continue
        try:
            outcome = copy_session(source, destination)
        except SpecError as error:
            if error.code == Code.SESSION_ALREADY_EXISTS:
                tally.refused += 1
                print(f"{prefix}: refused [{error.code}] {error.message}", file=progress, flush=True)
            else:
                tally.unverified += 1
                print(f"{prefix}: failed [{error.code}] {error.message}", file=progress, flush=True)
            continue
        if outcome == "copied":
            tally.copied += 1
        else:
            tally.already_there += 1
        print(f"{prefix}: {outcome}, {len(source.events)} events, verified", file=progress, flush=True)
    return tally


def command_copy(
    source: str, destination: str, sessions: Sequence[str], out: TextIO, progress: TextIO = sys.stderr
) -> int:
    """``dsh-session copy``: exit 0 when every session is at the destination and verified, 1 when
    one was refused or failed to verify, 2 when an endpoint is unusable (a usage error), 3 when a
    session or an endpoint could not be read."""
    try:
        source_endpoint, destination_endpoint = parse_endpoint(source), parse_endpoint(destination)
        if destination_endpoint.kind == "logs":
            raise EndpointError("logs: can only be a source: write to file:, sqlite: or postgres:")
        require_source(source_endpoint)
        source_store = None if source_endpoint.kind == "logs" else open_store(source_endpoint, source=True)
        destination_store = open_store(destination_endpoint)
    except (EndpointError, ValueError) as error:
        print(f"dsh-session copy: {error}", file=out)
        return EXIT_USAGE
    except InputError as error:
        print(f"dsh-session copy: cannot read the source [{error.code}] {error.message}", file=out)
        return EXIT_UNREADABLE
    except SpecError as error:
        print(f"dsh-session copy: cannot open an endpoint [{error.code}] {error.message}", file=out)
        return EXIT_UNREADABLE
    try:
        entries = source_entries(source_endpoint, source_store, sessions)
        tally = run_copy(entries, destination_store, progress)
    except SpecError as error:
        print(f"dsh-session copy: stopped [{error.code}] {error.message}", file=out)
        return EXIT_UNREADABLE
    finally:
        for store in (source_store, destination_store):
            if isinstance(store, DatabaseStore):
                store.close()
    print(
        f"{tally.copied} copied, {tally.already_there} already there, {tally.refused} refused, "
        f"{tally.unreadable} unreadable, {tally.unverified} failed",
        file=out,
    )
    return tally.status
