"""Where a log lives and its header line (SPEC-DECISIONS D1; notes/dsh-persistence §2.2-§2.3, §3):
a session id as one path segment, a cwd as a project directory, the relative path of a log, and
the first line of a log read back as a header (v4 as it is, DSH v0 upgraded, anything else refused).
"""

from __future__ import annotations

from typing import Any, Final

from conformance.cases.build import Cases, as_why, chained, pure
from spec.codes import Code
from spec.format.naming import validate_header_version_for_file_name
from spec.log.json import JsonObject

SEGMENT = "spec.storage.encode_segment"
PROJECT = "spec.storage.encode_project_key"
RELPATH = "spec.storage.derive_session_relpath"
LINE = "spec.storage.decode_header_line"

V4_LINE: Final[JsonObject] = {
    "type": "session",
    "version": 4,
    "id": "s",
    "createdAt": 7,
    "delegationDepth": 0,
    "isSeeded": True,
}
LINE_RULE: Final = (
    "a log's first line is an object with type session, a string id and a numeric version: "
    "4 is the header itself, 0 is upgraded, any other version is unsupported"
)


def segment_cases() -> Cases:
    for name, session_id in [
        ("a session id of safe characters is its own path segment", "abc-1.2_XYZ"),
        ("a slash in a session id is escaped", "a/b"),
        ("a tilde is escaped so the encoding stays injective", "~7E"),
        ("a single dot as an id is escaped whole", "."),
        ("two dots as an id are escaped whole", ".."),
        ("three dots as an id are kept", "..."),
        ("a non-ASCII character is escaped by its UTF-16 code unit", "caf\u00e9"),
        ("a character outside the BMP is escaped as two UTF-16 code units", "\U0001f600"),
        ("a space is escaped", "a b"),
        ("a dash, sorting before a dot, is kept", "-"),
        ("a dot and a dash are kept: only . and .. are escaped whole", ".-"),
    ]:
        yield pure(name, SEGMENT, id=session_id)
    yield pure("an empty session id has no path segment", SEGMENT, Code.EMPTY_PATH_SEGMENT, id="")


def project_key_cases() -> Cases:
    for name, cwd in [
        ("a POSIX cwd becomes its slug between double dashes", "/home/user/project"),
        ("a Windows cwd's separators and drive colon become dashes", "C:\\Users\\x"),
        ("a run of separators becomes one dash", "//a//b/"),
        ("the root cwd is 'root'", "/"),
        ("a non-ASCII character in a cwd is escaped", "/tmp/\u00e9t\u00e9"),
        ("a long cwd's slug is cut to 251 characters", "/" + "d" * 300),
    ]:
        yield pure(name, PROJECT, cwd=cwd)
    yield pure("an empty cwd has no project directory", PROJECT, Code.EMPTY_PROJECT_PATH, cwd="")


def relpath_cases() -> Cases:
    header: JsonObject = {
        "version": 4,
        "id": "s/1",
        "createdAt": 0,
        "cwd": "/work/p",
        "delegationDepth": 0,
        "isSeeded": False,
    }
    yield pure(
        "a compressed log lives under its project and session directories",
        RELPATH,
        header=header,
        compressed=True,
    )
    no_cwd = {key: value for key, value in header.items() if key != "cwd"}
    yield pure(
        "a session without a cwd lives under _no-cwd, uncompressed here",
        RELPATH,
        header=no_cwd,
        compressed=False,
    )


def header_line_cases() -> Cases:
    yield pure(
        "a version 4 header line is the header with type session in front",
        LINE,
        why=LINE_RULE,
        line=V4_LINE,
    )
    yield pure("a header line keeps unknown keys", LINE, why=LINE_RULE, line={**V4_LINE, "note": "kept"})
    yield pure(
        "a header line keeps unknown keys sorting after type",
        LINE,
        why=LINE_RULE,
        line={**V4_LINE, "zone": "kept"},
    )
    yield pure(
        "a header line must name the session it is read as",
        LINE,
        Code.HEADER_ID_MISMATCH,
        why="a header line read for a session names that session",
        line=V4_LINE,
        sessionId="t",
    )
    v0: JsonObject = {
        "type": "session",
        "version": 0,
        "id": "old",
        "createdAt": 7,
        "cwd": "/w",
        "seedLength": 2,
        "parentSession": "p",
    }
    yield pure(
        "a DSH v0 header line is upgraded: version 4, delegationDepth 0, isSeeded from seedLength",
        LINE,
        why=LINE_RULE,
        line=v0,
    )
    yield pure(
        "a DSH v0 header line with seedLength 0 is upgraded to isSeeded true: an empty seed counts",
        LINE,
        why=LINE_RULE,
        line={**v0, "seedLength": 0},
    )


def bad_header_line_cases() -> Cases:
    value: Any
    for name, code, value in [
        (
            "a header line from a newer format is unsupported",
            Code.UNSUPPORTED_FORMAT,
            {**V4_LINE, "version": 5},
        ),
        (
            "a header line of an unknown older format is unsupported",
            Code.UNSUPPORTED_FORMAT,
            {**V4_LINE, "version": 3},
        ),
        (
            "a header line whose version is a string is not a header",
            Code.HEADER_LINE_INVALID,
            {**V4_LINE, "version": "4"},
        ),
        ("a first line that is not an object is not a header", Code.HEADER_LINE_INVALID, []),
        (
            "a first line whose type is not session is not a header",
            Code.HEADER_LINE_INVALID,
            {**V4_LINE, "type": "event"},
        ),
        (
            "a first line whose type sorts after session is not a header either",
            Code.HEADER_LINE_INVALID,
            {**V4_LINE, "type": "turn"},
        ),
        (
            "a header line without an id is not a header",
            Code.HEADER_LINE_INVALID,
            {k: v for k, v in V4_LINE.items() if k != "id"},
        ),
        (
            "a header line may not carry the retired sandboxMode field",
            Code.HEADER_RETIRED_FIELDS,
            {**V4_LINE, "sandboxMode": "off"},
        ),
        (
            "a version 4 header line obeys the header rules",
            Code.HEADER_IS_SEEDED,
            {k: v for k, v in V4_LINE.items() if k != "isSeeded"},
        ),
        (
            "a version 4 header line's createdAt is a non-negative safe integer",
            Code.HEADER_CREATED_AT,
            {**V4_LINE, "createdAt": -1},
        ),
    ]:
        yield pure(name, LINE, code, why=line_rule(code), line=value)


def line_rule(code: Code) -> str:
    """The rule a refused header line breaks."""
    if code == Code.HEADER_RETIRED_FIELDS:
        return "a header line carries none of the retired policy fields"
    if code in (Code.HEADER_IS_SEEDED, Code.HEADER_CREATED_AT):
        return "a version 4 header line is a header and obeys every header rule (spec.header.validate_header)"
    return LINE_RULE


def file_name_cases() -> Cases:
    v0 = {"type": "session", "version": 0, "id": "s", "createdAt": 7, "delegationDepth": 2}
    yield pure(
        "a v4 file name holding a v0 header is refused, naming both",
        LINE,
        Code.HEADER_VERSION_FILE_MISMATCH,
        why=as_why(FILE_NAME_RULE),
        line=v0,
        fileName="session.v4.jsonl",
        comment="read as v0 it would be migrated onto its own name; appended to as v4 it would mix formats",
    )
    yield pure(
        "a v0 file name holding a v4 header is refused",
        LINE,
        Code.HEADER_VERSION_FILE_MISMATCH,
        why=as_why(FILE_NAME_RULE),
        line=V4_LINE,
        fileName="session.jsonl.zstd",
        comment="a v0 reader would read the v4 records as its own",
    )
    yield pure(
        "a v4 file name holding a v4 header is read",
        LINE,
        why=as_why(FILE_NAME_RULE),
        line=V4_LINE,
        fileName="session.v4.jsonl.zstd",
    )
    yield pure(
        "a v0 file name holding a v0 header is read and upgraded",
        LINE,
        why=as_why(FILE_NAME_RULE),
        line=v0,
        fileName="session.jsonl",
    )
    yield pure(
        "a file name outside a store names no format",
        LINE,
        why=as_why(FILE_NAME_RULE),
        line=v0,
        fileName="exported-session.jsonl",
    )
    yield pure(
        "an unsupported version is refused as such before the file name is compared",
        LINE,
        Code.UNSUPPORTED_FORMAT,
        why=LINE_RULE,
        line={**V4_LINE, "version": 5},
        fileName="session.v4.jsonl",
    )


FILE_NAME_RULE: Final = validate_header_version_for_file_name.__doc__ or ""


cases: Final = chained(
    segment_cases, project_key_cases, relpath_cases, header_line_cases, bad_header_line_cases, file_name_cases
)
