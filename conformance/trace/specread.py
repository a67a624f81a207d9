"""Reading a crash state's log with the specification's own reader, not the subject's.

The log of a session is where SPEC-DECISIONS D1 puts it,
``<root>/--<projectKey>--/<encodeSegment(id)>/session.v4.jsonl[.zstd]`` (or DSH 0.1's
``session.jsonl[.zstd]``), and its bytes are read by ``spec.framing`` (lines and zstd frames),
``spec.storage`` (the header line) and ``spec.legacy`` (a v0 log's records). Complete frames are
decompressed with their checksums verified; a torn final frame gives the lines of its complete
blocks, which a writer must keep (D3 item 4).

What this tells apart: when a subject's ``read`` of a state breaks D3 but the spec's reader finds
a valid log in the same files, the subject cannot read its own files; when the spec's reader
breaks D3 too, the subject wrote (or failed to make durable) a bad file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from conformance.trace.persistence import Tree
from conformance.zstd_frames import inflate_zstd
from spec.codes import SpecError
from spec.format.framing import decode_log_bytes
from spec.format.legacy import decode_stored_log
from spec.format.naming import LOG_NAMES, derive_session_relpath
from spec.log.events import Event
from spec.log.header import HEADER_FORMAT_VERSION
from spec.log.json import FrozenDict, JsonValue


@dataclass(frozen=True)
class SpecView:
    """One session's log as the spec's reader sees it in a tree: where it is (``None``: no log
    file where D1 puts it), its header and events (those recovered from a torn frame included),
    whether a torn tail waits to be cut off, or the error code and message of a log that does not
    read."""

    path: str | None
    header: FrozenDict | None = None
    events: tuple[Event, ...] = ()
    torn: bool = False
    code: str | None = None
    message: str | None = None
    format_version: int = HEADER_FORMAT_VERSION  # the format the log was stored in (0: DSH v0)

    @property
    def found(self) -> bool:
        return self.path is not None and self.code is None


def locate_log(files: Mapping[str, bytes], header: Mapping[str, JsonValue]) -> str | None:
    """The path of a session's log in a tree, by D1's layout (the header gives cwd and id)."""
    try:
        project, session, _ = derive_session_relpath(dict(header), True)
    except SpecError:
        return None
    for name in LOG_NAMES:
        path = f"{project}/{session}/{name}"
        if path in files:
            return path
    return None


def read_with_spec(tree: Tree, header: Mapping[str, JsonValue]) -> SpecView:
    """The log of the session ``header`` describes, read from ``tree`` by the spec's rules."""
    files = tree.files()
    path = locate_log(files, header)
    if path is None:
        return SpecView(None)
    return read_log_file(str(header.get("id")), path, files[path])


def read_log_file(session_id: str, path: str, data: bytes) -> SpecView:
    """One log file's bytes read by the spec's rules, as the log of ``session_id``: a v4 or a v0
    log by its header line (which must agree with the file's name), compressed when the name ends
    in ``.zstd``."""
    try:
        stored = decode_log_bytes(data, path.endswith(".zstd"), inflate_zstd)
        log = decode_stored_log(session_id, stored, path.rsplit("/", 1)[-1])
    except SpecError as error:
        return SpecView(path, code=str(error.code), message=error.message)
    return SpecView(
        path,
        log.header,
        log.events + log.recovered,
        stored.truncate_to is not None,
        format_version=log.format_version,
    )


__all__ = [
    "SpecView",
    "locate_log",
    "read_log_file",
    "read_with_spec",
]
