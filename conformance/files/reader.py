"""A store's files read by the specification's rules: which session each log belongs to, and what
``read`` of it must show (or the code it must answer).

A set of files is a mapping of relative paths (``/``-separated, under the store root) to bytes.
A log lives at ``<project dir>/<session dir>/<file name>`` (SPEC-DECISIONS D1): the session dir is
``encode_segment`` of the session's id, which :func:`decode_segment` inverts, and a reader looks
for the v4 names before DSH's v0 ones. The bytes are read as :mod:`conformance.trace.specread`
reads a crash state's log.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from conformance.trace.specread import read_log_file
from spec.codes import SpecError
from spec.format.naming import LOG_NAMES, encode_segment
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION
from spec.log.json import FrozenDict, JsonValue

_ESCAPE: Final = re.compile(r"~([0-9A-F]{4})")
_SAFE: Final = re.compile(r"[A-Za-z0-9._-]")


class FilesError(ValueError):
    """A ``files`` argument of the wrong shape (the protocol's ``BAD_REQUEST``)."""


def decode_files(value: object) -> dict[str, bytes]:
    """``[{"path", "bytes"}, ...]``: relative ``/``-separated paths (no empty, ``.`` or ``..``
    part), each once, with their bytes in base64."""
    if not isinstance(value, list):
        raise FilesError("files must be an array of {path, bytes}")
    files: dict[str, bytes] = {}
    for entry in value:
        path = entry.get("path") if isinstance(entry, dict) else None
        text = entry.get("bytes") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not isinstance(text, str):
            raise FilesError("every file is {path: string, bytes: base64 string}")
        if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")) or path in files:
            raise FilesError(f"file path {path!r} must be relative, each part a name, and given once")
        try:
            files[path] = base64.b64decode(text, validate=True)
        except binascii.Error:
            raise FilesError(f"the bytes of {path!r} are not base64") from None
    return files


def encode_files(files: Mapping[str, bytes]) -> list[JsonValue]:
    """The protocol's form of a set of files, in path order."""
    return [
        {"path": path, "bytes": base64.b64encode(data).decode("ascii")}
        for path, data in sorted(files.items())
    ]


def decode_segment(segment: str) -> str | None:
    """The session id whose ``encode_segment`` is ``segment``, or ``None`` when no id encodes to it
    (notes/dsh-persistence §2.3: kept characters, ``~XXXX`` per other UTF-16 code unit)."""
    units = bytearray()
    at = 0
    while at < len(segment):
        match = _ESCAPE.match(segment, at)
        if match is not None:
            units += int(match.group(1), 16).to_bytes(2, "little")
            at = match.end()
        elif _SAFE.match(segment, at):
            units += ord(segment[at]).to_bytes(2, "little")
            at += 1
        else:
            return None
    session_id = bytes(units).decode("utf-16-le", "surrogatepass")
    try:
        return session_id if encode_segment(session_id) == segment else None
    except SpecError:
        return None


@dataclass(frozen=True)
class PlacedLog:
    """One session's log among a set of files: where it is, and what reading it gives (a header
    and events) or the code a read must answer."""

    path: str
    header: FrozenDict | None = None
    events: tuple[Event, ...] = ()
    code: str | None = None
    format_version: int = HEADER_FORMAT_VERSION  # the format the log was stored in (0: DSH v0)


def locate_logs(files: Mapping[str, bytes]) -> dict[str, list[str]]:
    """Every session id with a log file where D1 puts one, and the paths of its logs (one per
    project directory holding it, the preferred name in each)."""
    found: dict[str, list[str]] = {}
    by_dir: dict[tuple[str, str], list[str]] = {}
    for path in files:
        parts = path.split("/")
        if len(parts) == 3 and parts[2] in LOG_NAMES:
            by_dir.setdefault((parts[0], parts[1]), []).append(parts[2])
    for (project, session), names in sorted(by_dir.items()):
        session_id = decode_segment(session)
        if session_id is None:
            continue
        name = min(names, key=LOG_NAMES.index)
        found.setdefault(session_id, []).append(f"{project}/{session}/{name}")
    return found


def read_placed(files: Mapping[str, bytes]) -> dict[str, PlacedLog]:
    """What a reader finds for each session: its log read by the spec's rules, or the code a read
    answers (``CORRUPT_LOG`` for an id that several project directories hold)."""
    logs: dict[str, PlacedLog] = {}
    for session_id, paths in locate_logs(files).items():
        if len(paths) > 1:
            logs[session_id] = PlacedLog(paths[0], code="CORRUPT_LOG")
            continue
        view = read_log_file(session_id, paths[0], files[paths[0]])
        logs[session_id] = PlacedLog(paths[0], view.header, view.events, view.code, view.format_version)
    return logs


def log_files(files: Mapping[str, bytes]) -> Sequence[str]:
    """Every path whose file name is a log's, wherever it is."""
    return sorted(path for path in files if path.rsplit("/", 1)[-1] in LOG_NAMES)


__all__ = [
    "FilesError",
    "PlacedLog",
    "decode_files",
    "decode_segment",
    "encode_files",
    "locate_logs",
    "log_files",
    "read_placed",
]
