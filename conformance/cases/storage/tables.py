"""A database backend's rows (SPEC-DECISIONS D1, D2, D3, D5; docs/choices.md "Database backends"):
the texts a header row and an event row hold, how each reads back or is damage, which table
layouts a reader steps through or refuses, and what a writer concludes from the rows it finds
after a commit whose outcome it never heard. Pure calls, so that every subject is judged on them,
whatever store it has.
"""

from __future__ import annotations

import json
from typing import Final

from conformance.cases import msg
from conformance.cases.build import Cases, chained, pure
from conformance.cases.storage.naming import V4_LINE
from spec.codes import Code
from spec.log.json import JsonObject

HEADER_ROW = "spec.tables.encode_header_row"
EVENT_ROW = "spec.tables.encode_event_row"
READ_HEADER = "spec.tables.decode_header_row"
READ_EVENT = "spec.tables.decode_event_row"
LAYOUT = "spec.tables.plan_layout_migration"
UNKNOWN = "spec.tables.plan_unknown_commit"

HEADER: Final[JsonObject] = {key: value for key, value in V4_LINE.items() if key != "type"}
ROW: Final = '{"type":"session","version":4,"id":"s","createdAt":7,"delegationDepth":0,"isSeeded":true}'
ROW_RULE: Final = (
    "a database row holds exactly the text of the log line it stands for, so that a session reads "
    "back byte for byte as the file store would (SPEC-DECISIONS D5)"
)
DAMAGE_RULE: Final = (
    "a stored row that is not what this project writes is damage naming the row, never guessed at "
    "(SPEC-DECISIONS D3)"
)


def row_cases() -> Cases:
    yield pure("a header row is the log's first line, type first", HEADER_ROW, why=ROW_RULE, header=HEADER)
    yield pure(
        "a header row given its type already holds it once, first",
        HEADER_ROW,
        why=ROW_RULE,
        header={"id": "s", "version": 4, "type": "session", "createdAt": 7, "delegationDepth": 0},
    )
    yield pure(
        "an event row is the event's line, keys in its own order, non-ASCII raw",
        EVENT_ROW,
        why=ROW_RULE,
        event={
            "type": "custom/x",
            "seq": 0,
            "time": 0,
            "data": {"b": "h\u00e9llo \U0001d11e", "a": [1, None]},
        },
    )


def header_row_cases() -> Cases:
    yield pure(
        "a header row reads back as the header, under its own key",
        READ_HEADER,
        why=ROW_RULE,
        key="s",
        text=ROW,
    )
    yield pure(
        "a header row's session key is the id's path segment",
        READ_HEADER,
        why=ROW_RULE,
        text=ROW.replace('"id":"s"', '"id":"a/b"'),
        key="a~002Fb",
    )
    for name, key, text in (
        ("a header row that is not JSON is damage", "s", ROW[:-1]),
        ("a header row filed under another session's key is damage", "t", ROW),
        (
            "a header row under the raw id where its key is the id's segment is damage",
            "a/b",
            ROW.replace('"id":"s"', '"id":"a/b"'),
        ),
        (
            "a v0 header row is damage: a database holds only v4",
            "s",
            ROW.replace('"version":4', '"version":0'),
        ),
        ("a header row with an empty id is damage", "", ROW.replace('"id":"s"', '"id":""')),
    ):
        yield pure(name, READ_HEADER, Code.CORRUPT_LOG, why=DAMAGE_RULE, key=key, text=text)
    yield pure(
        "a header row of a newer format is unsupported, not damage",
        READ_HEADER,
        Code.UNSUPPORTED_FORMAT,
        why=DAMAGE_RULE,
        key="s",
        text=ROW.replace('"version":4', '"version":5'),
    )
    yield pure(
        "a header row that is JSON but no header is not a header line",
        READ_HEADER,
        Code.HEADER_LINE_INVALID,
        why=DAMAGE_RULE,
        key="s",
        text='{"type":"event","version":4,"id":"s"}',
    )


def message_row(message: JsonObject) -> str:
    """The row of a user/message event at seq 2 holding ``message``."""
    return json.dumps({"type": "user/message", "seq": 2, "time": 5, "data": message}, separators=(",", ":"))


def event_row_cases() -> Cases:
    line = '{"type":"custom/x","seq":3,"time":1,"data":{"n":-1.5,"t":"\u00e9"}}'
    yield pure(
        "an event row at its place reads back as the event it holds",
        READ_EVENT,
        why=ROW_RULE,
        sessionId="s",
        position=3,
        seq=3,
        text=line,
    )
    yield pure(
        "an event row's key seq may be written as an integral float",
        READ_EVENT,
        why=ROW_RULE,
        sessionId="s",
        position=0,
        seq=0.0,
        text='{"type":"custom/x","seq":0.0,"time":1,"data":null}',
    )
    yield pure(
        "a message event row reads back when its message is well formed",
        READ_EVENT,
        why=ROW_RULE,
        sessionId="s",
        position=2,
        seq=2,
        text=message_row(msg.user()),
    )
    for name, position, seq, text in (
        ("an event row after a gap is damage", 3, 4, line.replace('"seq":3', '"seq":4')),
        ("an event row before its place is damage", 3, 2, line.replace('"seq":3', '"seq":2')),
        ("an event row keyed past its place is damage, whatever its event says", 3, 4, line),
        ("an event row keyed before its place is damage, whatever its event says", 3, 2, line),
        ("an event row whose key seq is text is damage", 3, "3", line),
        ("an event row whose key seq is negative is damage", 0, -1, line),
        ("an event row whose key seq is a fraction is damage", 3, 3.5, line),
        ("an event row whose key seq is true is damage", 1, True, line.replace('"seq":3', '"seq":1')),
        ("an event row that is not JSON is damage", 3, 3, line[:-1]),
        ("an event row that holds an array is damage", 3, 3, "[3]"),
        ("an event row whose event has no seq is damage", 3, 3, '{"type":"custom/x","time":1,"data":null}'),
        ("an event row whose event has another seq is damage", 3, 3, line.replace('"seq":3', '"seq":4')),
        ("an event row whose event's seq is text is damage", 3, 3, line.replace('"seq":3', '"seq":"3"')),
        ("an event row whose event's seq is true is damage", 1, 1, line.replace('"seq":3', '"seq":true')),
    ):
        yield pure(
            name,
            READ_EVENT,
            Code.CORRUPT_LOG,
            why=DAMAGE_RULE,
            sessionId="s",
            position=position,
            seq=seq,
            text=text,
        )
    yield pure(
        "an event row holding a malformed message is refused as a restore refuses it",
        READ_EVENT,
        Code.MESSAGE_CONTENT,
        why=DAMAGE_RULE,
        sessionId="s",
        position=2,
        seq=2,
        text=message_row({**msg.user(), "content": "hi"}),
    )


LAYOUT_RULE: Final = (
    "a reader steps a database through every table layout from the one it holds to its own, "
    "refuses a newer one unrewritten and a layout that never existed as damage"
)


def layout_cases() -> Cases:
    yield pure("an empty database steps through every layout", LAYOUT, why=LAYOUT_RULE, found=None)
    yield pure("a database at the current layout needs no step", LAYOUT, why=LAYOUT_RULE, found=1)
    yield pure(
        "a database of a newer layout is refused, never rewritten",
        LAYOUT,
        Code.UNSUPPORTED_FORMAT,
        why=LAYOUT_RULE,
        found=2,
    )
    for what, found in (("0", 0), ("below 0", -1)):
        yield pure(
            f"a database claiming layout {what}, which never existed, is damage",
            LAYOUT,
            Code.CORRUPT_LOG,
            why=LAYOUT_RULE,
            found=found,
        )


COMMIT_RULE: Final = (
    "after a commit whose outcome was never heard, rows found that are exactly the first pending "
    "ones are that commit; anything else is another writer's, and this writer no longer owns the "
    "session (SPEC-DECISIONS D2)"
)


def unknown_commit_cases() -> Cases:
    rows = ['{"seq":3}', '{"seq":4}', '{"seq":5}']
    for name, found in (
        ("no row found: the commit did not happen", []),
        ("the first pending row found: one row is durable", rows[:1]),
        ("every pending row found: the commit happened whole", rows),
    ):
        yield pure(name, UNKNOWN, why=COMMIT_RULE, sessionId="s", found=found, pending=rows)
    for name, found in (
        ("a found row that differs from the pending one is another writer's", ['{"seq":3,"x":1}']),
        ("a later row differing is another writer's", [rows[0], '{"seq":9}']),
        ("more rows found than pending is another writer's", [*rows, '{"seq":6}']),
        ("the pending rows found out of order are another writer's", [rows[1], rows[0]]),
    ):
        yield pure(name, UNKNOWN, Code.LOCKED, why=COMMIT_RULE, sessionId="s", found=found, pending=rows)
    yield pure(
        "a row found when nothing is pending is another writer's",
        UNKNOWN,
        Code.LOCKED,
        why=COMMIT_RULE,
        sessionId="s",
        found=rows[:1],
        pending=[],
    )


cases: Final = chained(row_cases, header_row_cases, event_row_cases, layout_cases, unknown_commit_cases)
