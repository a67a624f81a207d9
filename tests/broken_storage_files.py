"""Storage subjects whose files are wrong while their answers are right: the reference with its
file store broken in exactly one way (a directory layout, a file name, the framing, the frames'
bytes) or its reader broken in one way. Every protocol answer of the writing workload is still
the reference's, so only the ``files`` family, which reads the bytes, can catch them
(tests/test_files_family.py; issue 10).

Each break swaps the class of the reference's :class:`FileStore` for a subclass that overrides
one method, the way a port would get one function wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import zstandard

import reference.persistence.filestore as filestore_module
from reference.persistence.filestore import FileStore
from reference.server import Args, ReferenceSubject
from spec.format.framing import encode_lines, measure_zstd_frame
from spec.format.naming import V0_ZSTD_NAME, derive_session_relpath
from spec.log.json import FrozenDict, JsonValue


class _BrokenFilesSubject(ReferenceSubject):
    """The reference, its file store of class :attr:`store_class`."""

    store_class: ClassVar[type[FileStore]] = FileStore

    def _open_store(self) -> None:
        super()._open_store()
        if isinstance(self.persistence, FileStore):
            self.persistence.__class__ = self.store_class


# --- the layout ------------------------------------------------------------------------------------


class _NoProjectDirStore(FileStore):
    def path_for(self, header: FrozenDict) -> str:
        _, session, name = derive_session_relpath(header, self.compressed)
        return f"{self.root}/_no-cwd/{session}/{name}"


class NoProjectDir(_BrokenFilesSubject):
    """Every log under ``_no-cwd``, whatever its cwd: D1 puts a session with a cwd under
    ``--<projectKey(cwd)>--``. The store still finds its logs (it looks in every project dir)."""

    store_class = _NoProjectDirStore


class _V0NameStore(FileStore):
    def path_for(self, header: FrozenDict) -> str:
        project, session, name = derive_session_relpath(header, self.compressed)
        return f"{self.root}/{project}/{session}/{V0_ZSTD_NAME if self.compressed else name}"


class V0FileName(_BrokenFilesSubject):
    """A compressed v4 log named ``session.jsonl.zstd``, DSH's v0 name: D1 names it
    ``session.v4.jsonl.zstd`` (and a reader refuses a v4 header under a v0 name)."""

    store_class = _V0NameStore


# --- the framing -----------------------------------------------------------------------------------


def _frames(batch_bytes: Callable[[bytes], bytes]) -> type[FileStore]:
    """A store whose compressed batches are ``batch_bytes`` of their plaintext."""

    class _Store(FileStore):
        def _batch_bytes(self, records: Sequence[JsonValue], compressed: bool) -> bytes:
            plaintext = encode_lines(records)
            return batch_bytes(plaintext) if compressed else plaintext

    return _Store


def _no_checksum(plaintext: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=False).compress(plaintext)


def _frame_per_line(plaintext: bytes) -> bytes:
    lines = plaintext.splitlines(keepends=True)
    return b"".join(filestore_module.compress_frame(text) for text in lines)


def _bad_checksum(plaintext: bytes) -> bytes:
    frame = filestore_module.compress_frame(plaintext)
    return frame[:-1] + bytes([frame[-1] ^ 0xFF])


class NoChecksum(_BrokenFilesSubject):
    """Frames without a content checksum: DSH's encoder writes one in every frame
    (notes/dsh-persistence §4.2), and a reader needs it to tell damage from data (D3 item 5)."""

    store_class = _frames(_no_checksum)


class FramePerLine(_BrokenFilesSubject):
    """One zstd frame per line instead of one per flush (D2: a flush writes one frame)."""

    store_class = _frames(_frame_per_line)


class UnreadableFrames(_BrokenFilesSubject):
    """Every frame's checksum wrong: the file is unreadable by ``zstd -dc`` and by the spec's
    reader, yet the store answers from its memory."""

    store_class = _frames(_bad_checksum)


# --- the bytes ---------------------------------------------------------------------------------------


class _SortedEventKeysStore(FileStore):
    def _batch_bytes(self, records: Sequence[JsonValue], compressed: bool) -> bytes:
        events = [
            {key: record[key] for key in sorted(record)}
            if isinstance(record, dict) and "seq" in record
            else record
            for record in records
        ]
        return super()._batch_bytes(events, compressed)


class EventKeysSorted(_BrokenFilesSubject):
    """Writes each event's keys sorted (``data, seq, surfaceOp, time, type``), as
    ``json.dumps(sort_keys=True)`` would: the same values, read back the same, but not the bytes
    of the log's canonical encoding (``type, seq, time, data, sourceEventSeqs?, surfaceOp?``:
    notes/dsh-session-core §1.1; docs/choices.md, "Byte-exact writing")."""

    store_class = _SortedEventKeysStore


WRITING_BREAKS: dict[type[ReferenceSubject], str] = {
    NoProjectDir: "layout",
    V0FileName: "layout",
    NoChecksum: "framing",
    FramePerLine: "framing",
    UnreadableFrames: "zstd-dc",
    EventKeysSorted: "lines",
}


# --- the reader ------------------------------------------------------------------------------------


def _inflate_unchecked(data: bytes) -> tuple[bytes, bool]:
    """A complete frame whose blocks are all raw, decoded without its checksum checked (the frame
    header and block structure only); any other frame, or a torn one, is left to the reference's
    reader. The block walk is bounded by the frame's bytes, whatever its header says."""
    measured = measure_zstd_frame(data, 0)
    if measured is None or measured.length != len(data) or len(data) < 5:
        return _STRICT_INFLATE(data)
    descriptor = data[4]  # RFC 8878 3.1.1.1.1: content-size flag, single segment, dictionary id
    single = descriptor >> 5 & 1
    at = 5 + (1 - single) + (0, 1, 2, 4)[descriptor & 3] + (single, 2, 4, 8)[descriptor >> 6]
    body = bytearray()
    while at + 3 <= len(data):
        header = int.from_bytes(data[at : at + 3], "little")
        size, last = header >> 3, header & 1
        if (header >> 1) & 3 != 0:  # not a raw block: the reference's reader decides
            return _STRICT_INFLATE(data)
        body += data[at + 3 : at + 3 + size]
        at += 3 + size
        if last:
            return bytes(body), True
    return _STRICT_INFLATE(data)


_STRICT_INFLATE = filestore_module.inflate_zstd


class ChecksumIgnored(ReferenceSubject):
    """A reader that never checks a frame's content checksum (DSH's decoder always does), so a
    frame whose bytes rotted reads as data instead of ``CORRUPT_LOG`` (D3 item 5). Its writing is
    the reference's."""

    def handle(self, request: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        filestore_module.inflate_zstd = _inflate_unchecked
        try:
            return super().handle(request)
        finally:
            filestore_module.inflate_zstd = _STRICT_INFLATE


class ExportsNothing(ReferenceSubject):
    """``export`` answers an empty set of files: whatever it stored, the suite finds no log where D1
    puts one (and must not call the checks that had nothing to read passed)."""

    def op_export(self, args: Args) -> JsonValue:
        super().op_export(args)
        return []
