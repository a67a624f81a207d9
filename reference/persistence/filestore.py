"""The file store: format v4 JSONL logs, zstd-compressed (default) or plain, on a filesystem seam.

Layout (SPEC-DECISIONS D1)::

    <root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.v4.jsonl.zstd   (or session.v4.jsonl)
    <root>/_no-cwd/<encodeSegment(id)>/...                                    (no cwd)

A compressed file is frame 0 = the header line, then one zstd frame (content checksum on) per
durable batch. Durability (D2): ``flush`` appends one frame and fsyncs the file, and so does an
append that finds the buffer due under the store's batch policy (default: 200 ms of session time
or 1 MiB; ``batch=None`` leaves writing to ``flush``); a new session is published whole (temp file, fsync, link, fsync of the directory). One writer per session holds a
lock file beside the log. Opening a log for writing (D3) drops a torn tail by rewriting the file
atomically (complete lines recovered from a torn frame are kept), refuses damage that is not a
tail with a corrupt-log error naming the byte offset, and closes an open turn with the spec's
closers, appended as new events. DSH v0 logs are read; resuming one writes the converted log as
a new v4 file beside it and leaves the old file untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Final, NamedTuple, cast

import zstandard

from conformance.zstd_frames import inflate_zstd
from reference.persistence import fastjson
from reference.persistence.api import OpenReport, SessionStat, StoredLog
from reference.persistence.common import BufferedLogHandle
from reference.persistence.fs import FileSystem, LockHandle, RealFileSystem
from spec.codes import Code, SpecError, reject
from spec.format.framing import (
    DecodedFrame,
    FramedLog,
    decode_header_text,
    decode_log_bytes,
    decode_zstd_log,
    scan_zstd_frames,
)
from spec.format.legacy import (
    decode_listed_header,
    decode_stored_log,
    upgrade_v0_records,
    validate_stored_events,
)
from spec.format.naming import (
    LOG_NAMES,
    V0_PLAIN_NAME,
    V0_ZSTD_NAME,
    V4_PLAIN_NAME,
    V4_ZSTD_NAME,
    decode_header_line,
    derive_session_relpath,
    encode_header_line,
    encode_segment,
)
from spec.lineage.repair import derive_closers
from spec.log.events import Event
from spec.log.header import LEGACY_FORMAT_VERSION
from spec.log.json import FrozenDict, JsonValue
from spec.projections.durability import BatchPolicy, validate_batch_policy

DEFAULT_BATCH_POLICY: Final = BatchPolicy()  # 200 ms, 1 MiB: spec.projections.durability's defaults
LOCK_NAME = "session.lock"
ZSTD_LEVEL = 3  # zstd's default level, as DSH uses


def _random_token() -> str:
    """Six random bytes in hex, a temp file's name part (``secrets`` imported when first written,
    not by every reader of this module: ``dsh-session check`` starts faster, issue 24)."""
    import secrets

    return secrets.token_hex(6)


def _join(*parts: str) -> str:
    return "/".join(part.rstrip("/") if index == 0 else part for index, part in enumerate(parts))


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _dirname(path: str) -> str:
    head = path.rsplit("/", 1)[0]
    return head or "/"


# --- encoding -----------------------------------------------------------------------------------


_COMPRESSORS = threading.local()  # one compressor per thread, reused (a compressor is not thread-safe)


def compress_frame(plaintext: bytes) -> bytes:
    """One standard zstd frame with its content checksum (and its content size), by this thread's
    compressor: each call is one whole frame, so reusing the compressor changes no byte."""
    compressor = getattr(_COMPRESSORS, "compressor", None)
    if compressor is None:
        compressor = _COMPRESSORS.compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True)
    frame: bytes = compressor.compress(plaintext)
    return frame


class EncodedBatch(tuple[Event, ...]):
    """A batch of events with their JSONL text (``plaintext``: each event's line, encoded once as
    it was appended): :meth:`FileStore._batch_bytes` writes that text instead of encoding again."""

    plaintext: bytes

    def __new__(cls, events: Sequence[Event], plaintext: bytes) -> EncodedBatch:
        batch = super().__new__(cls, events)
        batch.plaintext = plaintext
        return batch


@dataclass(frozen=True)
class LoadedLog:
    """A parsed log: header, committed events, events recovered from a torn frame, and the offset
    the file must be cut back to (``None`` when clean)."""

    format_version: int
    header: FrozenDict
    events: Sequence[Event]  # a tuple, or the stored lines of a log read in bulk (StoredEvents)
    recovered: tuple[Event, ...]
    truncate_to: int | None
    plain: bool = False  # a v0 log read in bulk unfrozen: its events kept only as encoded lines
    small_floats: tuple[float, ...] | None = None  # read in bulk: its floats below 1e-4 (encode_lines)


def load_log(
    session_id: str | None, data: bytes, compressed: bool, file_name: str | None = None, frozen: bool = True
) -> LoadedLog:
    """Parse a log's bytes into events: the header's version must be the one ``file_name`` says
    (when given); v4 records are taken as they are (seqs must run 0, 1, 2...), v0 records go
    through the spec's legacy read path. A clean log takes the bulk path (:func:`load_clean_log`;
    not ``frozen``: a v4 log's judged events left plain, as a resume that keeps the lines wants);
    anything else, and anything that path is unsure of, the spec's."""
    fast = load_clean_log(session_id, data, compressed, file_name, frozen)
    if fast is not None:
        return fast
    return load_framed_log(session_id, decode_log_bytes(data, compressed, inflate_zstd), file_name)


def load_framed_log(session_id: str | None, stored: FramedLog, file_name: str | None = None) -> LoadedLog:
    """The events of a log already cut into its header line and records (:func:`load_log`), as
    the spec reads them (:func:`spec.format.legacy.decode_stored_log`)."""
    log = decode_stored_log(session_id, stored, file_name)
    return LoadedLog(log.format_version, log.header, log.events, log.recovered, stored.truncate_to)


def load_clean_log(
    session_id: str | None, data: bytes, compressed: bool, file_name: str | None = None, frozen: bool = True
) -> LoadedLog | None:
    """What :func:`load_log` gives for a clean log (no torn tail, every frame whole, every line
    valid), read in bulk (:func:`clean_records`), then judged by the spec's rules
    (:func:`judge_clean_records`). ``None`` when the log is anything else or either step refuses
    or is unsure; the spec's path then decides, so every error (its code, its message, its byte
    offset) is the spec's."""
    frames = None
    if compressed:
        frames = clean_zstd_lines(data)
        if frames is None:
            return None
    small_floats: list[float] = []
    bulk = clean_records(session_id, data, frames, file_name, frozen, small_floats=small_floats)
    loaded = None if bulk is None else judge_clean_records(*bulk)
    return None if loaded is None else replace(loaded, small_floats=tuple(small_floats))


def clean_zstd_frames(data: bytes, hold: int | None = None) -> list[tuple[int, bytes]] | None:
    """Each frame of a zstd log whose frames are all whole, as its file offset and plaintext
    (skippable frames left out), inflated by one decompressor; ``None`` when a frame is torn or
    damaged, or there is none. With ``hold`` (bytes of plaintext), ``None`` too as soon as the
    plaintext would pass it, having held little more (:func:`_inflate_frame`): a reader with a size
    limit reads a log within ``hold`` in this one pass, and counts only a larger one first (issue
    24: ``dsh-session check`` inflated every log twice)."""
    try:
        scan = scan_zstd_frames(data)
        if scan.torn_offset is not None:
            return None
        decompressor = zstandard.ZstdDecompressor()
        frames: list[tuple[int, bytes]] = []
        for frame in scan.frames:
            if frame.skippable:
                continue
            piece = data[frame.offset : frame.offset + frame.length]
            plaintext = _inflate_frame(decompressor, piece, hold)
            if plaintext is None:
                return None
            if hold is not None:
                hold -= len(plaintext)
            frames.append((frame.offset, plaintext))
    except (SpecError, zstandard.ZstdError, ValueError):
        return None
    return frames or None


_SLICE: Final = 1024  # compressed bytes inflated at a time: zstd makes at most ~32 MiB of them
_PIECE: Final = 1 << 16  # compressed bytes inflated at a time by clean_zstd_lines


class ZstdLines(NamedTuple):
    """A clean zstd log cut as :func:`clean_records` reads it: the header frame's plaintext, then
    the lines of every other frame, in order (without their line breaks)."""

    header: bytes
    lines: list[bytes]


def clean_zstd_lines(data: bytes) -> ZstdLines | None:
    """The header frame's plaintext and every other frame's lines, when the frames are all whole
    and each after the header is non-empty text ending with a line break (skippable frames left
    out); ``None`` when anything is not so, or there is no frame (the spec's reader then decides).
    The very lines :func:`clean_records` cuts from :func:`clean_zstd_frames`' plaintexts, but each
    frame is inflated :data:`_PIECE` compressed bytes at a time and cut as it comes, so no frame's
    text is held whole (issue 24: a migrated log is one frame of the whole log, 51 MB at 100k,
    held beside its lines: a sixth of a resume's page faults)."""
    try:
        scan = scan_zstd_frames(data)
        if scan.torn_offset is not None:
            return None
        decompressor = zstandard.ZstdDecompressor()
        header: bytes | None = None
        lines: list[bytes] = []
        for frame in scan.frames:
            if frame.skippable:
                continue
            piece = data[frame.offset : frame.offset + frame.length]
            if header is None:
                header = _inflate_frame(decompressor, piece, None)
                if header is None:
                    return None
                continue
            stream = decompressor.decompressobj()
            rest, empty = b"", True
            for start in range(0, len(piece), _PIECE):
                cut = stream.decompress(piece[start : start + _PIECE]).split(b"\n")
                if rest:
                    cut[0] = rest + cut[0]
                rest = cut.pop()  # what follows the piece's last line break (b"": none)
                empty = empty and not cut and not rest
                lines += cut
            if rest or empty or not stream.eof or stream.unused_data:
                return None
    except (SpecError, zstandard.ZstdError, ValueError):
        return None
    return None if header is None else ZstdLines(header, lines)


def _inflate_frame(decompressor: zstandard.ZstdDecompressor, piece: bytes, hold: int | None) -> bytes | None:
    """One whole frame's plaintext, or ``None`` when it is not one whole frame or, with ``hold``,
    more than ``hold`` bytes. A frame that declares its content size is inflated in one call (or
    refused before it is, past ``hold``); one that does not, as DSH's writer leaves it, through a
    stream of the same decompressor (not a failed one-shot call and a new decompressor per frame:
    issue 24), with ``hold`` a small slice at a time, given up as soon as it passes ``hold`` so a
    bomb is never held whole. Damage raises ``zstandard.ZstdError``."""
    declared = zstandard.frame_content_size(piece)
    if hold is not None and declared > hold:
        return None
    if declared > 0:
        plaintext: bytes = decompressor.decompress(piece)
        return plaintext
    stream = decompressor.decompressobj()
    if hold is None:
        plaintext = stream.decompress(piece)
        return plaintext if stream.eof and not stream.unused_data else None
    parts: list[bytes] = []
    size = 0
    for start in range(0, len(piece), _SLICE):
        part = stream.decompress(piece[start : start + _SLICE])
        size += len(part)
        if size > hold:
            return None
        parts.append(part)
    return b"".join(parts) if stream.eof and not stream.unused_data else None


def clean_records(
    session_id: str | None,
    data: bytes,
    frames: list[tuple[int, bytes]] | ZstdLines | None,
    file_name: str | None = None,
    frozen: bool = True,
    checked_only: bool = False,
    small_floats: list[float] | None = None,
) -> tuple[int, FrozenDict, list[JsonValue], list[bytes]] | None:
    """The version, header and records of a clean log, parsed in bulk: a plain log is ``data``, a
    zstd log is ``frames`` (:func:`clean_zstd_frames`; the first is the header line's, every other
    ends with a newline; or already cut, :func:`clean_zstd_lines`); the lines parsed (their UTF-8 checked too) by
    :func:`fastjson.decode_lines`, the header by the spec's rules (against ``file_name`` when
    given), with the lines themselves; a v4 log's records left plain unless ``frozen``, a v0 log's
    plain too unless ``frozen`` and not ``checked_only`` (a caller that hands no event out,
    :func:`judge_clean_records`); the floats below 1e-4 in magnitude appended to ``small_floats``
    (:func:`fastjson.decode_lines`). ``None`` when anything there is not clean, the parser is
    unsure, or a v4 log's record is not an object whose ``seq`` is its place (counted from 0: the
    spec's path then names the gap, as :func:`spec.format.legacy.decode_v4_events` does)."""
    try:
        lines: list[bytes] = []
        if isinstance(frames, ZstdLines):
            header_line = decode_zstd_log([DecodedFrame(0, frames.header)], None).header_line
            body: list[bytes] = []
            lines = frames.lines
        elif frames is not None:
            body = [plaintext for _, plaintext in frames[1:]]
            if any(not part.endswith(b"\n") for part in body):
                return None
            header_line = decode_zstd_log([DecodedFrame(0, frames[0][1])], None).header_line
        else:
            if not data.endswith(b"\n"):
                return None
            end = data.find(b"\n")
            header_line = decode_header_text(data[:end])
            body = [data[end + 1 :]]
        for part in body:  # each frame cut at its own line breaks: no joined copy of the text
            cut = part.split(b"\n")
            cut.pop()  # the part ends with a newline (or is empty: a log of its header alone)
            lines += cut
        del body
        version, header = decode_header_line(header_line, session_id, file_name)
        # A line of invalid UTF-8 is damage the spec names: the parser refuses it (both of
        # fastjson.decode_lines' parsers check UTF-8 strictly), so the text is not decoded here.
        legacy = version == LEGACY_FORMAT_VERSION
        records = fastjson.decode_lines(
            lines,
            frozen=frozen and not checked_only if legacy else frozen,
            small_floats=small_floats,
            numbered=not legacy,  # a v4 record is one event, whose seq is its place
        )
    except (SpecError, ValueError):
        return None
    return None if records is None else (version, header, records, lines)


def judge_clean_records(
    version: int,
    header: FrozenDict,
    records: list[JsonValue],
    lines: list[bytes],
    checked_only: bool = False,
) -> LoadedLog | None:
    """The spec's rules on records parsed in bulk from ``lines`` (by :func:`clean_records`, which
    refuses a v4 log whose seqs do not run 0, 1, 2...): a v4 log's messages must be well formed
    (:func:`validate_stored_events`), and its events are kept
    as those lines (:class:`fastjson.StoredEvents`, the judged events, frozen or plain as parsed,
    held until the session settles them); a v0 log's records go through the whole legacy read path
    (:func:`upgrade_v0_records`: rows expanded, seqs, retired vocabulary, conversions, shapes, known
    types), its events frozen as its records were parsed (plain ones, :attr:`LoadedLog.plain`, for
    a checker, which hands none out, and for a resume, which keeps them only as the lines it
    writes: :meth:`FileStore._open_locked`; no event is copied to be frozen). ``None`` when a rule
    refuses (the spec's path names it)."""
    try:
        if version == LEGACY_FORMAT_VERSION:
            plain = bool(records) and type(records[0]) is not FrozenDict and not checked_only
            with fastjson.collector_paused():
                upgraded = upgrade_v0_records(str(header["id"]), records, frozen=not (plain or checked_only))
                return LoadedLog(version, header, upgraded, (), None, plain)
        frozen = not records or type(records[0]) is FrozenDict
        events = cast(list[Event], records)  # each an event object numbered by its place: clean_records
        validate_stored_events(str(header["id"]), events)
    except SpecError:
        return None
    return LoadedLog(version, header, fastjson.StoredEvents(lines, events, frozen=frozen), (), None)


def _kept_as_written(
    events: Sequence[Event], small_floats: tuple[float, ...] | None
) -> tuple[fastjson.StoredEvents, EncodedBatch]:
    """Judged plain events (a v0 log read in bulk and converted, then its closers) as the batch
    that writes them, encoded once, and as the lines of that very text, which hold them from now
    on: the plain events are the judged ones, for the resume to fold and drop
    (:class:`fastjson.StoredEvents`). ``small_floats`` are those the read met
    (:attr:`LoadedLog.small_floats`): the conversions and the closers make no float of their own
    (a packed row's seqs and times are ints, a closer takes the last event's time), so they are
    every small float of ``events``."""
    text = fastjson.encode_lines(events, small_floats)
    lines = text.split(b"\n")
    lines.pop()  # the text ends with a newline; a JSON line holds no raw one
    if len(lines) != len(events):  # pragma: no cover - encode_lines writes one line per event
        raise AssertionError("one line per event")
    return fastjson.StoredEvents(lines, events, frozen=False), EncodedBatch(events, text)


# --- the service --------------------------------------------------------------------------------


class FileStore:
    """Session logs under ``root`` on ``fs`` (the real filesystem unless a seam is given)."""

    def __init__(
        self,
        root: str,
        fs: FileSystem | None = None,
        compressed: bool = True,
        temp_token: Callable[[], str] = _random_token,
        batch: BatchPolicy | None = DEFAULT_BATCH_POLICY,
    ) -> None:
        if batch is not None:
            validate_batch_policy(batch)
        self.root = root.rstrip("/") or "/"
        self.fs: FileSystem = fs if fs is not None else RealFileSystem()
        self.compressed = compressed
        self.batch = batch
        self._temp_token = temp_token

    # --- paths ---

    def path_for(self, header: FrozenDict) -> str:
        project, session, name = derive_session_relpath(header, self.compressed)
        return _join(self.root, project, session, name)

    def locate(self, session_id: str) -> str | None:
        """The log of ``session_id``: its session directory may sit under any project directory;
        v4 files are preferred over v0 ones. Two project directories holding it is corruption."""
        segment = encode_segment(session_id)
        if not self.fs.is_dir(self.root):
            return None
        found: list[str] = []
        for project in sorted(self.fs.listdir(self.root)):
            session_dir = _join(self.root, project, segment)
            if not self.fs.is_dir(session_dir):
                continue
            for name in LOG_NAMES:
                candidate = _join(session_dir, name)
                if self.fs.exists(candidate):
                    found.append(candidate)
                    break
        if len(found) > 1:
            raise reject(
                Code.CORRUPT_LOG,
                f'duplicate session id "{session_id}" appears in several project directories: {found}',
            )
        return found[0] if found else None

    # --- service API ---

    def create(self, header: FrozenDict) -> FileLogHandle:
        """A new session's handle. Nothing is visible on disk until its first flush publishes
        the header and the first batch as one whole file."""
        session_id = str(header["id"])
        if self.locate(session_id) is not None:
            raise reject(Code.SESSION_ALREADY_EXISTS, f'session "{session_id}" already exists on disk')
        path = self.path_for(header)
        lock = self._lock(path, session_id)
        return FileLogHandle(
            self, path, header, (), lock, published=False, report=OpenReport(), batch=self.batch
        )

    def open(self, session_id: str) -> FileLogHandle:
        """Take over a stored log as its single writer, repairing it first (D3)."""
        path = self.locate(session_id)
        if path is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        lock = self._lock(path, session_id)
        try:
            return self._open_locked(session_id, path, lock)
        except OSError as error:
            self.fs.unlock(lock)
            raise reject(Code.STORAGE_IO, f'could not open "{path}" for writing: {error}') from error
        except BaseException:
            self.fs.unlock(lock)
            raise

    def read(self, session_id: str) -> StoredLog:
        """The durable log as a reader sees it: no lock, nothing changed, no closers."""
        path = self.locate(session_id)
        if path is None:
            raise reject(Code.SESSION_NOT_FOUND, f'session "{session_id}" not found')
        loaded = load_log(session_id, self.fs.read_bytes(path), path.endswith(".zstd"), _basename(path))
        return StoredLog(loaded.header, (*loaded.events, *loaded.recovered), loaded.format_version)

    def stat(self, session_id: str) -> SessionStat | None:
        path = self.locate(session_id)
        if path is None:
            return None
        size = self.fs.size(path)
        version = 0 if path.endswith((V0_ZSTD_NAME, V0_PLAIN_NAME)) else 4
        return SessionStat(session_id, version, size, f"v{version}:{size}", path)

    def list(self) -> list[FrozenDict]:
        """The header of every stored session whose log reads (unreadable ones are skipped)."""
        headers: list[FrozenDict] = []
        if not self.fs.is_dir(self.root):
            return headers
        for project in sorted(self.fs.listdir(self.root)):
            project_dir = _join(self.root, project)
            if not self.fs.is_dir(project_dir):
                continue
            for session in sorted(self.fs.listdir(project_dir)):
                for name in LOG_NAMES:
                    candidate = _join(project_dir, session, name)
                    if self.fs.exists(candidate):
                        try:
                            headers.append(self._read_header(candidate))
                        except SpecError:
                            pass
                        break
        return headers

    # --- internals ---

    def _read_header(self, path: str) -> FrozenDict:
        """The header the listing shows for the log at ``path`` (:func:`decode_listed_header`)."""
        return decode_listed_header(
            self.fs.read_bytes(path), path.endswith(".zstd"), inflate_zstd, _basename(path)
        )

    def _lock(self, log_path: str, session_id: str) -> LockHandle:
        session_dir = _dirname(log_path)
        self._ensure_dirs(session_dir)
        lock = self.fs.try_lock(_join(session_dir, LOCK_NAME))
        if lock is None:
            raise reject(Code.LOCKED, f'session "{session_id}" already has a writer')
        return lock

    def _ensure_dirs(self, session_dir: str) -> None:
        """Create the project and session directories, making each new entry durable."""
        if self.fs.is_dir(session_dir):
            return
        chain = []
        path = session_dir
        while not self.fs.is_dir(path):
            chain.append(path)
            parent = _dirname(path)
            if parent == path:
                break
            path = parent
        self.fs.makedirs(session_dir)
        for created in reversed(chain):
            self.fs.fsync_dir(_dirname(created))

    def _open_locked(self, session_id: str, path: str, lock: LockHandle) -> FileLogHandle:
        compressed_source = path.endswith(".zstd")
        loaded = load_log(
            session_id, self.fs.read_bytes(path), compressed_source, _basename(path), frozen=False
        )
        stored = (*loaded.events, *loaded.recovered) if loaded.recovered else loaded.events
        closers = derive_closers(
            stored.judged_events() if isinstance(stored, fastjson.StoredEvents) else stored
        )
        resumed: Sequence[Event] = (
            stored.with_tail(list(closers))
            if isinstance(stored, fastjson.StoredEvents)
            else (*stored, *closers)
        )
        if loaded.format_version == LEGACY_FORMAT_VERSION:
            # Migration: the converted log becomes a new v4 file beside the v0 one, published whole.
            written = _join(_dirname(path), V4_ZSTD_NAME if self.compressed else V4_PLAIN_NAME)
            if loaded.plain:
                # Read in bulk unfrozen: the events are kept as the lines written for them, as a v4
                # log read in bulk is, and never handed out (issue 24: a v0 log's first sight).
                resumed, batch = _kept_as_written(resumed, loaded.small_floats)
                self._publish(written, loaded.header, batch)
            else:
                self._publish(written, loaded.header, resumed)
            report = OpenReport(
                torn_bytes_dropped=0
                if loaded.truncate_to is None
                else self.fs.size(path) - loaded.truncate_to,
                recovered_events=len(loaded.recovered),
                closers_appended=len(closers),
                migrated_from_v0=True,
            )
        else:
            written, torn_bytes = path, 0
            if loaded.truncate_to is not None:
                torn_bytes = self.fs.size(path) - loaded.truncate_to
                self._rewrite_clean(path, loaded.truncate_to, loaded.recovered + closers, compressed_source)
            elif closers:
                self._append_batch(path, closers, compressed_source)
            report = OpenReport(torn_bytes, len(loaded.recovered), len(closers))
        return FileLogHandle(
            self,
            written,
            loaded.header,
            resumed,
            lock,
            published=True,
            report=report,
            batch=self.batch,
            messages_checked=len(stored),  # both read paths check every stored message (load_log)
        )

    def _batch_bytes(self, records: Sequence[JsonValue], compressed: bool) -> bytes:
        """Records as one batch: JSONL lines (an :class:`EncodedBatch`'s own text), as one zstd
        frame when compressed."""
        plaintext = records.plaintext if isinstance(records, EncodedBatch) else fastjson.encode_lines(records)
        return compress_frame(plaintext) if compressed else plaintext

    def _publish(self, path: str, header: FrozenDict, events: Sequence[Event]) -> None:
        """Whole-file publication: temp file, fsync, link to the final name (never overwriting),
        fsync the directory; the temp name is then removed."""
        compressed = path.endswith(".zstd")
        data = self._batch_bytes([encode_header_line(header)], compressed)
        if events:
            data += self._batch_bytes(events, compressed)
        self._ensure_dirs(_dirname(path))
        try:
            temp = self._install(path, data, self.fs.link)
        except FileExistsError:
            raise reject(
                Code.SESSION_ALREADY_EXISTS, f'refusing to publish "{path}": a log already exists'
            ) from None
        try:
            self.fs.fsync_dir(_dirname(path))
        except OSError:
            # Not durable, so not published: take the name back so that a retry can link again.
            self._remove_quietly(path)
            self._remove_quietly(temp)
            raise
        self._remove_quietly(temp)

    def _rewrite_clean(self, path: str, keep: int, tail: Sequence[Event], compressed: bool) -> None:
        """Replace the file, atomically, by its first ``keep`` bytes plus ``tail`` as a new batch."""
        data = self.fs.read_bytes(path)[:keep]
        if tail:
            data += self._batch_bytes(tail, compressed)
        self._install(path, data, self.fs.rename)
        self.fs.fsync_dir(_dirname(path))

    def _install(self, path: str, data: bytes, place: Callable[[str, str], None]) -> str:
        """Write ``data`` to a temp file beside ``path``, fsync it, then ``place`` it at ``path``
        (link: never overwriting; rename: atomically replacing). Returns the temp name; on any
        failure the temp file is removed and the error raised."""
        temp = self._write_temp(path, data)
        try:
            self.fs.fsync(temp)
            place(temp, path)
        except BaseException:
            self._remove_quietly(temp)
            raise
        return temp

    def _append_batch(self, path: str, events: Sequence[Event], compressed: bool) -> None:
        """One batch (one zstd frame), then fsync. On failure the file is cut back to its old size
        so a retry starts clean, and the error is a typed storage error."""
        data = self._batch_bytes(events, compressed)
        before = self.fs.size(path)
        try:
            self.fs.append(path, data)
            self.fs.fsync(path)
        except OSError as error:
            try:
                self.fs.truncate(path, before)
                self.fs.fsync(path)
            except OSError:
                pass
            raise reject(Code.STORAGE_IO, f'could not make "{path}" durable: {error}') from error

    def _write_temp(self, path: str, data: bytes) -> str:
        """Write ``data`` to a fresh temp file beside ``path``; a name a crash left behind is
        skipped, never reused."""
        for _ in range(100):
            temp = f"{path}.{self._temp_token()}.tmp"
            try:
                self.fs.write_new(temp, data)
            except FileExistsError:
                continue
            return temp
        raise reject(Code.STORAGE_IO, f'no free temp-file name beside "{path}"')

    def _remove_quietly(self, path: str) -> None:
        try:
            self.fs.remove(path)
        except OSError:
            pass


class FileLogHandle(BufferedLogHandle):
    """The writer of one log file: buffers appends, writes one batch per flush."""

    def __init__(
        self,
        store: FileStore,
        path: str,
        header: FrozenDict,
        durable: Sequence[Event],
        lock: LockHandle,
        published: bool,
        report: OpenReport,
        batch: BatchPolicy | None = None,
        messages_checked: int = 0,
    ) -> None:
        super().__init__(header, durable, report, batch, messages_checked)
        self._store = store
        self.path = path
        self._lock = lock
        self._published = published
        self._lines: list[bytes] = []  # the JSONL lines of the events not yet written, when encoded at append

    def _encode(self, events: Sequence[Event], floats: Collection[float] | None) -> Sequence[bytes] | None:
        """Under a byte bound every appended event is encoded anyway, to be counted: its line is
        kept and becomes the batch's text, so no event is encoded twice (without one, a flush
        encodes its batch at once)."""
        if self._batch is None or self._batch.max_bytes is None:
            return None
        # Many events at once (a fork's or a seeded session's log) are encoded in one call and cut
        # into their lines: a JSON line holds no raw line break, so each piece is one event's line.
        if len(events) == 1:  # one appended event (the common case): its line
            lines: list[bytes] = [fastjson.encode_lines(events, floats)]
        else:
            lines = fastjson.encode_lines(events, floats).splitlines(keepends=True)
        if len(lines) != len(events):
            lines = [fastjson.encode_lines((event,)) for event in events]
        self._lines += lines
        return lines

    def _write_pending(self, pending: Sequence[Event]) -> None:
        if self._lines:
            if len(self._lines) != len(pending):
                raise AssertionError("the kept lines are not the pending events'")
            pending = EncodedBatch(pending, b"".join(self._lines))
        if not self._published:
            try:
                self._store._publish(self.path, self._header, pending)
            except OSError as error:
                raise reject(Code.STORAGE_IO, f'could not publish "{self.path}": {error}') from error
            self._published = True
        elif pending:
            self._store._append_batch(self.path, pending, self.path.endswith(".zstd"))
        self._lines = []

    def _release(self) -> None:
        self._store.fs.unlock(self._lock)
