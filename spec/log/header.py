"""The session header, format version 4 (SPEC-DECISIONS D1; notes/dsh-session-core §1.5).

The header names the session and its lineage. In memory it is a frozen JSON object::

    {version: 4, id, createdAt, cwd?, parentSession?, seedLength?, origin?,
     delegationDepth, agentPreset?, isSeeded}

On disk it is the first line, with ``type: "session"`` in front (spec.format.naming). Unknown extra keys
are kept: this project loses nothing it was given.
"""

from __future__ import annotations

from typing import Final

from spec.codes import Code, reject
from spec.log.json import NOT_JSON, FrozenDict, JsonObject, JsonValue, is_event_seq, js_text, snapshot_json

HEADER_FORMAT_VERSION: Final = 4  # the version this project writes (D1)
LEGACY_FORMAT_VERSION: Final = 0  # DSH 0.1 logs: read, never written (D1)

# The header fields in their written order; the others are optional.
HEADER_FIELD_ORDER: Final = (
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
    "isSeeded",
)
LINEAGE_META_KEYS: Final = ("cwd", "parentSession", "seedLength", "origin", "delegationDepth", "agentPreset")


def is_absolute_path(path: str) -> bool:
    """A cwd is absolute when it starts with ``/`` (POSIX ``path.isAbsolute``)."""
    return path.startswith("/")


def validate_header(session_id: str, record: JsonValue) -> JsonObject:
    """A header is a JSON object with ``version`` 4, the session's ``id``, a non-negative safe
    integer ``createdAt``, an absolute ``cwd`` if any, a string ``parentSession`` if any, a
    non-negative safe integer ``seedLength`` if any, ``origin`` "subagent" if any, a non-negative
    safe integer ``delegationDepth``, a string ``agentPreset`` if any and a boolean ``isSeeded``.
    Checked in that order; the first failure is the error. Returns the record unchanged."""
    if not isinstance(record, dict):
        raise reject(Code.HEADER_NOT_RECORD, "session header is not a plain JSON record")
    version = record.get("version")
    if version != HEADER_FORMAT_VERSION or type(version) is bool:
        raise reject(
            Code.HEADER_VERSION,
            f"session header version must be {HEADER_FORMAT_VERSION}, got {_shown(record, 'version')}",
        )
    if record.get("id") != session_id:
        raise reject(
            Code.HEADER_ID_MISMATCH,
            f'session header id "{_shown(record, "id")}" does not match session id "{session_id}"',
        )
    if not is_event_seq(record.get("createdAt")):
        raise reject(Code.HEADER_CREATED_AT, "session header createdAt must be a non-negative safe integer")
    if "cwd" in record:
        cwd = record["cwd"]
        if not isinstance(cwd, str):
            raise reject(Code.HEADER_CWD, "session header cwd must be a string")
        if not is_absolute_path(cwd):
            raise reject(Code.HEADER_CWD, f'session header cwd must be an absolute path, got "{cwd}"')
    if "parentSession" in record and not isinstance(record["parentSession"], str):
        raise reject(Code.HEADER_PARENT_SESSION, "session header parentSession must be a string")
    if "seedLength" in record and not is_event_seq(record["seedLength"]):
        raise reject(Code.HEADER_SEED_LENGTH, "session header seedLength must be a non-negative safe integer")
    if "origin" in record and record["origin"] != "subagent":
        raise reject(Code.HEADER_ORIGIN, 'session header origin must be "subagent"')
    if not is_event_seq(record.get("delegationDepth")):
        raise reject(
            Code.HEADER_DELEGATION_DEPTH, "session header delegationDepth must be a non-negative safe integer"
        )
    if "agentPreset" in record and not isinstance(record["agentPreset"], str):
        raise reject(Code.HEADER_AGENT_PRESET, "session header agentPreset must be a string")
    if type(record.get("isSeeded")) is not bool:
        raise reject(Code.HEADER_IS_SEEDED, "session header isSeeded must be a boolean")
    return record


def build_header(session_id: str, meta: JsonValue, now: int, is_seeded: bool) -> FrozenDict:
    """:func:`plan_header_record`, snapshotted and validated."""
    return snapshot_header(session_id, plan_header_record(session_id, meta, now, is_seeded))


def plan_header_record(session_id: str, meta: JsonValue, now: int, is_seeded: bool) -> dict[str, object]:
    """The header record of a new session, not yet validated: ``version`` 4, the id, ``createdAt``
    from ``meta`` (now when it is absent or ``null``), the lineage fields ``meta`` gives
    (``delegationDepth`` defaults to 0), and ``isSeeded``; other ``meta`` keys are dropped. A
    lineage field given as ``null`` is kept, so the header rules judge it: ``cwd: null`` is refused
    (SPEC-DECISIONS D1, as DSH copies every field that is not undefined; notes/dsh-session-core §4.6)."""
    given = meta if isinstance(meta, dict) else {}
    if meta is not None and not isinstance(meta, dict):
        raise reject(Code.HEADER_NOT_RECORD, "session header is not a plain JSON record")
    created = given.get("createdAt")
    header: dict[str, object] = {
        "version": HEADER_FORMAT_VERSION,
        "id": session_id,
        "createdAt": now if created is None else created,
    }
    for key in LINEAGE_META_KEYS:
        if key in given:
            header[key] = given[key]
    header.setdefault("delegationDepth", 0)
    header["isSeeded"] = is_seeded
    return _ordered(header)


def snapshot_header(session_id: str, record: object) -> FrozenDict:
    """A supplied header is copied into the lossless JSON domain first, then validated."""
    snapshot = snapshot_json(record)
    if snapshot is NOT_JSON:
        raise reject(Code.HEADER_NOT_JSON, "session header is not losslessly JSON-serializable")
    if not isinstance(snapshot, FrozenDict):
        raise reject(Code.HEADER_NOT_RECORD, "session header is not a plain JSON record")
    validate_header(session_id, snapshot)
    return snapshot


def _ordered(header: dict[str, object]) -> dict[str, object]:
    known: dict[str, object] = {key: header[key] for key in HEADER_FIELD_ORDER if key in header}
    extra = {key: value for key, value in header.items() if key not in known}
    return {**known, **extra}


def _shown(record: JsonObject, key: str) -> str:
    return js_text(record[key]) if key in record else "undefined"
