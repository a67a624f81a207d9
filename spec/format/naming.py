"""Storage rules: where a session's log lives and how its first line names it (SPEC-DECISIONS
D1; notes/dsh-persistence §2, §3.1, §3.5).

A log is written as ``<root>/<project dir>/<session dir>/<file name>``; its first line (or first
zstd frame) is the header line; every later line is one stored record. How lines and frames are
cut out of the bytes is :mod:`spec.format.framing`; DSH v0 logs may also hold packed chunk rows, which
:mod:`spec.format.chunk_rows` expands (they are read, never written).
"""

from __future__ import annotations

from typing import Final

from spec.codes import Code, reject
from spec.log.header import HEADER_FIELD_ORDER, HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION, validate_header
from spec.log.json import FrozenDict, JsonObject, JsonValue, is_json_number, js_text, snapshot_json

# --- naming (notes/dsh-persistence §2) ----------------------------------------------------------

NO_CWD_DIR: Final = "_no-cwd"
V4_ZSTD_NAME: Final = "session.v4.jsonl.zstd"
V4_PLAIN_NAME: Final = "session.v4.jsonl"
V0_ZSTD_NAME: Final = "session.jsonl.zstd"
V0_PLAIN_NAME: Final = "session.jsonl"
FORMAT_OF_FILE_NAME: Final = {
    V4_ZSTD_NAME: HEADER_FORMAT_VERSION,
    V4_PLAIN_NAME: HEADER_FORMAT_VERSION,
    V0_ZSTD_NAME: LEGACY_FORMAT_VERSION,
    V0_PLAIN_NAME: LEGACY_FORMAT_VERSION,
}
LOG_NAMES: Final = tuple(FORMAT_OF_FILE_NAME)  # a reader looks for them in this order: v4 first

PROJECT_SLUG_MAX: Final = (
    251  # characters of the project slug kept; with the two "--" wrappers a name is at most 255
)
_SAFE_UNITS: Final = frozenset(map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"))
_SEPARATOR_UNITS: Final = frozenset(map(ord, "/\\:"))


def _utf16_code_units(text: str) -> list[int]:
    # DSH iterates JavaScript strings, i.e. UTF-16 code units; lone surrogates survive via surrogatepass.
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | data[i + 1] << 8 for i in range(0, len(data), 2)]


def _escape_unit(unit: int) -> str:
    return f"~{unit:04X}"


def encode_segment(session_id: str) -> str:
    """A session id becomes one path segment: each UTF-16 code unit in ``[A-Za-z0-9._-]`` is kept,
    every other unit (``~`` included) becomes ``~`` and 4 uppercase hex digits; ``.`` and ``..``
    are escaped whole; the empty id is refused. The mapping is injective
    (notes/dsh-persistence §2.3)."""
    if session_id == "":
        raise reject(Code.EMPTY_PATH_SEGMENT, "cannot encode an empty path segment")
    if session_id == ".":
        return "~002E"
    if session_id == "..":
        return "~002E~002E"
    return "".join(
        chr(unit) if unit in _SAFE_UNITS else _escape_unit(unit) for unit in _utf16_code_units(session_id)
    )


def encode_project_key(cwd: str) -> str:
    """A cwd becomes the project directory ``--<slug>--``: over its UTF-16 code units, a run of
    ``/``, ``\\`` or ``:`` becomes one ``-``, units in ``[A-Za-z0-9._-]`` are kept, others become
    ``~XXXX``; leading ``-`` are stripped, an empty slug is ``root``, and the slug is cut to 251
    characters (possibly inside an escape). Lossy by design; the empty cwd is refused
    (notes/dsh-persistence §2.2)."""
    if cwd == "":
        raise reject(Code.EMPTY_PROJECT_PATH, "cannot encode an empty project path")
    readable: list[str] = []
    in_separator_run = False
    for unit in _utf16_code_units(cwd):
        if unit in _SEPARATOR_UNITS:
            if not in_separator_run:
                readable.append("-")
            in_separator_run = True
        else:
            readable.append(chr(unit) if unit in _SAFE_UNITS else _escape_unit(unit))
            in_separator_run = False
    slug = "".join(readable).lstrip("-") or "root"
    return f"--{slug[:PROJECT_SLUG_MAX]}--"


def derive_session_relpath(header: JsonObject, compressed: bool) -> tuple[str, str, str]:
    """A version 4 log lives at ``<project dir>/<session dir>/<file name>`` under the root: the
    project dir is :func:`encode_project_key` of the header's cwd, or ``_no-cwd`` without one; the
    session dir is :func:`encode_segment` of its id; the file is ``session.v4.jsonl.zstd``, or
    ``session.v4.jsonl`` uncompressed (SPEC-DECISIONS D1)."""
    session_id = header.get("id")
    if not isinstance(session_id, str):
        raise reject(Code.EMPTY_PATH_SEGMENT, "header id cannot name a storage path")
    cwd = header.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise reject(Code.HEADER_CWD, "session header cwd must be a string")
    project_dir = NO_CWD_DIR if cwd is None else encode_project_key(cwd)
    return project_dir, encode_segment(session_id), V4_ZSTD_NAME if compressed else V4_PLAIN_NAME


# --- the header line (notes/dsh-persistence §3.1, §3.5; SPEC-DECISIONS D1) ----------------------

HEADER_LINE_TYPE: Final = "session"
RETIRED_HEADER_FIELDS: Final = ("sandboxMode", "approvalPolicy")
READABLE_FORMAT_VERSIONS: Final = (HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION)


def encode_header_line(header: JsonObject) -> JsonObject:
    """The first line of a log is the in-memory header with ``type: "session"`` in front: then the
    D1 fields in D1 order, then any other keys in the order the header holds them. The header is
    expected valid already (spec.log.header.validate_header)."""
    line: JsonObject = {"type": HEADER_LINE_TYPE}
    line.update((key, header[key]) for key in HEADER_FIELD_ORDER if key in header)
    line.update((key, value) for key, value in header.items() if key not in line)
    return line


def decode_header_line(
    value: JsonValue, session_id_hint: str | None = None, file_name: str | None = None
) -> tuple[int, FrozenDict]:
    """The first line gives ``(format version, in-memory v4 header)``. It must be an object; a
    numeric ``version`` other than 4 and 0 is refused before anything else is looked at; then it
    must be the version the log's ``file_name`` says, when one is given
    (:func:`validate_header_version_for_file_name`); then ``type`` is ``"session"`` and ``id`` a
    string (equal to the hint when one is given); a v4 line is the header itself, a v0 line is
    upgraded (:func:`upgrade_v0_header`); neither may carry the retired policy fields
    (notes/dsh-persistence §3.1, §3.5; SPEC-DECISIONS D1)."""
    if not isinstance(value, dict):
        raise reject(Code.HEADER_LINE_INVALID, "corrupt session log: first line is not a session header")
    version = read_header_line_version(value)
    if file_name is not None:
        validate_header_version_for_file_name(file_name, version)
    session_id = value.get("id")
    if value.get("type") != HEADER_LINE_TYPE or not isinstance(session_id, str):
        raise reject(Code.HEADER_LINE_INVALID, "corrupt session log: first line is not a session header")
    expected_id = session_id if session_id_hint is None else session_id_hint
    if version == LEGACY_FORMAT_VERSION:
        header = upgrade_v0_header(expected_id, value)
    else:
        header = _snapshot_header(_header_fields(value))
        validate_header(expected_id, header)
    validate_no_retired_header_fields(value)
    return version, header


def validate_header_version_for_file_name(file_name: str, version: int) -> None:
    """A store's log file names its format: ``session.v4.jsonl[.zstd]`` holds a version 4 header,
    DSH's ``session.jsonl[.zstd]`` a version 0 one, and a header of the other version is refused,
    naming both, rather than read by the wrong rules or appended to in the wrong format (seed 002:
    "文件名里的 v4 跟头里的格式版本是配套的"). Any other file name (a log outside a store) names no
    format."""
    named = FORMAT_OF_FILE_NAME.get(file_name)
    if named is not None and named != version:
        raise reject(
            Code.HEADER_VERSION_FILE_MISMATCH,
            f'log file "{file_name}" is named for format v{named}, but its header line says version {version}; '
            "the file was renamed or written by another tool: move it to the name of its version",
        )


def read_header_line_version(line: JsonObject) -> int:
    """A header line's ``version`` must be a number; 4 (written) and 0 (DSH, read-only) are read,
    any other number is an unsupported format named in the error (SPEC-DECISIONS D1;
    notes/dsh-persistence §3.5)."""
    version = line.get("version")
    if not is_json_number(version):
        raise reject(Code.HEADER_LINE_INVALID, "corrupt session log: first line is not a session header")
    assert isinstance(version, (int, float))
    if version in READABLE_FORMAT_VERSIONS:
        return int(version)
    shown_id, shown_version = js_text(line.get("id", "undefined")), js_text(version)
    if version > HEADER_FORMAT_VERSION:
        raise reject(
            Code.UNSUPPORTED_FORMAT,
            f'session "{shown_id}" uses log format v{shown_version}, but this reader reads only v4 (and v0 read-only): '
            "the log was written by a newer writer — upgrade the reader to open it",
        )
    raise reject(
        Code.UNSUPPORTED_FORMAT,
        f'session "{shown_id}" uses log format v{shown_version}, which this reader does not support '
        "(it reads v4, and v0 read-only) and for which it ships no upgrade path",
    )


def upgrade_v0_header(session_id: str, line: JsonObject) -> FrozenDict:
    """A DSH v0 header line becomes the in-memory v4 header: ``version`` 4, the v0 fields kept,
    ``delegationDepth`` kept or defaulted to 0, ``isSeeded`` true exactly when the line has a
    ``seedLength`` (DSH writes it only for sessions created from a seed, i.e. forks), unknown keys
    kept after them; then the v4 header rules apply (SPEC-DECISIONS D1; notes/dsh-persistence §3.1).

    DSH's own reader requires ``delegationDepth`` on the line; this reader defaults it, because
    older DSH writers omitted it (19 of the 110 corpus logs have none)."""
    fields = _header_fields(line)
    fields.setdefault("delegationDepth", 0)
    fields["isSeeded"] = "seedLength" in line
    header = _snapshot_header(fields)
    validate_header(session_id, header)
    return header


def validate_no_retired_header_fields(line: JsonObject) -> None:
    """A header line must not carry the retired ``sandboxMode``/``approvalPolicy`` baseline
    (notes/dsh-persistence §3.1)."""
    if any(key in line for key in RETIRED_HEADER_FIELDS):
        raise reject(Code.HEADER_RETIRED_FIELDS, "session header uses retired policy baseline fields")


def _header_fields(line: JsonObject) -> JsonObject:
    # The in-memory header is the line without its type, with the version it is read as.
    fields = {key: value for key, value in line.items() if key != "type"}
    fields["version"] = HEADER_FORMAT_VERSION
    return fields


def _snapshot_header(fields: JsonObject) -> FrozenDict:
    # D1 order first, other keys after, as encode_header_line writes them.
    ordered: JsonObject = {key: fields[key] for key in HEADER_FIELD_ORDER if key in fields}
    ordered.update((key, value) for key, value in fields.items() if key not in ordered)
    snapshot = snapshot_json(ordered)
    if not isinstance(snapshot, FrozenDict):
        raise reject(Code.HEADER_NOT_JSON, "session header is not losslessly JSON-serializable")
    return snapshot
