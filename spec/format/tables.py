"""Storage rules for a database backend (SQLite, PostgreSQL): what a row holds, how a stored
session reads back, which table layouts a reader opens, and what a writer may conclude after a
commit whose outcome it never heard (SPEC-DECISIONS D1, D2, D3, D5; this project's choice,
docs/choices.md "Database backends").

A database keeps one row per session in a table of headers and one row per event in a table of
events keyed by ``(session, seq)``. The rows hold exactly the texts the file store writes: the
header row is the log's first line and each event row is one later line, so a session reads back
byte for byte as the file store would (D5), whatever the database makes of JSON. A row is keyed
by the session's path segment (:func:`spec.storage.encode_segment`): injective, ASCII, and the
same name the file store gives the session's directory, so an id with a lone surrogate (which
neither SQLite nor PostgreSQL can hold as text) still has a key.

A database only ever holds what this project writes: format v4. DSH's v0 logs are files; they are
read with the file store's reader and may be copied into a database, as v4.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from spec.codes import Code, reject
from spec.format.json_text import decode_json_text, encode_json_text
from spec.format.legacy import validate_stored_events
from spec.format.naming import decode_header_line, encode_header_line, encode_segment
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION
from spec.log.json import FrozenDict, JsonObject, freeze_parsed_json, is_event_seq, js_text

TABLE_LAYOUT_VERSION: Final = 1  # the layout of the tables this project writes (its schema version)


# --- rows ---------------------------------------------------------------------------------------


def encode_session_key(session_id: str) -> str:
    """A session's rows are keyed by its path segment: every id has exactly one key and no two
    ids share one; the empty id has none (notes/dsh-persistence §2.3)."""
    return encode_segment(session_id)


def encode_header_row(header: JsonObject) -> str:
    """The header row is the text of the log's first line, without its newline
    (spec.storage.encode_header_line; SPEC-DECISIONS D1, D5)."""
    return encode_json_text(encode_header_line(header))


def encode_event_row(event: Event) -> str:
    """An event row is the text of the event's line in a plain log, without its newline (D5)."""
    return encode_json_text(event)


def decode_header_row(key: str, text: str) -> FrozenDict:
    """A header row must be JSON text and a v4 header line, judged by the rules the file store
    applies to a log's first line, filed under the key of its own id. A database never holds a v0
    header (nothing here writes one), so one found there is damage, as is a row under another key."""
    try:
        value = decode_json_text(text)
    except ValueError:
        raise reject(
            Code.CORRUPT_LOG, f'corrupt session row: the header row "{key}" is not valid JSON'
        ) from None
    version, header = decode_header_line(value)
    if version != HEADER_FORMAT_VERSION:
        raise reject(
            Code.CORRUPT_LOG,
            f'corrupt session row: the header row "{key}" is format v{version}; a database holds only v4',
        )
    session_id = header.get("id")
    if not isinstance(session_id, str) or session_id == "" or encode_session_key(session_id) != key:
        raise reject(
            Code.CORRUPT_LOG,
            f'corrupt session row: the header row "{key}" holds the header of session {js_text(session_id)}',
        )
    return header


def decode_event_row(session_id: str, position: int, seq: object, text: str) -> Event:
    """The event row at ``position`` (rows read in seq order) must have key seq ``position`` and
    hold a JSON object whose own ``seq`` is that number: a stored log is numbered by position,
    with no gap and no duplicate, and its message events are well-formed
    (spec.legacy.validate_stored_events). Anything else is damage naming the row."""
    if not is_event_seq(seq) or seq != position:
        raise reject(
            Code.CORRUPT_LOG,
            f'corrupt session rows: "{session_id}" has a seq gap (expected row {position}, found {js_text(seq)})',
        )
    try:
        value = decode_json_text(text)
    except ValueError:
        raise reject(
            Code.CORRUPT_LOG, f'corrupt session row: event {position} of "{session_id}" is not valid JSON'
        ) from None
    if not isinstance(value, dict) or value.get("seq") != position or not is_event_seq(value.get("seq")):
        raise reject(
            Code.CORRUPT_LOG,
            f'corrupt session row: event row {position} of "{session_id}" does not hold the event with seq {position}',
        )
    event = freeze_parsed_json(value)
    assert isinstance(event, FrozenDict)
    validate_stored_events(session_id, (event,))
    return event


# --- the table layout ---------------------------------------------------------------------------


def plan_layout_migration(found: int | None) -> tuple[int, ...]:
    """The layout versions a store must step through to reach :data:`TABLE_LAYOUT_VERSION`: all of
    them from an empty database (``None``), none from the current one. A layout newer than this
    reader's is refused, never rewritten, as a log of a newer format is (spec.storage)."""
    if found is None:
        return tuple(range(1, TABLE_LAYOUT_VERSION + 1))
    if found > TABLE_LAYOUT_VERSION:
        raise reject(
            Code.UNSUPPORTED_FORMAT,
            f"the session tables are layout v{found}, but this reader knows only up to v{TABLE_LAYOUT_VERSION}: "
            "the database was written by a newer version — upgrade the reader to open it",
        )
    if found < 1:
        raise reject(Code.CORRUPT_LOG, f"the session tables claim layout v{found}, which never existed")
    return tuple(range(found + 1, TABLE_LAYOUT_VERSION + 1))


# --- a commit whose outcome is unknown ----------------------------------------------------------


def plan_unknown_commit(session_id: str, found: Sequence[str], pending: Sequence[str]) -> int:
    """After a commit failed without saying whether it happened (the connection dropped during
    it), the writer reads the rows stored past its durable count (``found``) and compares them with
    the rows it still holds (``pending``). Found rows that are exactly the first of the pending ones
    are that commit, which did happen: that many pending rows are durable already and must not be
    written twice. Anything else means another writer wrote to the session meanwhile, and this
    writer no longer owns it (SPEC-DECISIONS D2: one writer per session)."""
    if len(found) > len(pending) or any(stored != own for stored, own in zip(found, pending)):
        raise reject(
            Code.LOCKED,
            f'session "{session_id}" was written by another writer while this one had lost its connection; '
            "reopen it to continue from what is stored",
        )
    return len(found)
