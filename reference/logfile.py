"""Reading a log file as a user has it: whatever its name, compressed by this project's writer
(one zstd frame per flush), compressed whole by the standard ``zstd`` tool, or plain JSONL.

The form is told by content, never by the file name: bytes that start with a zstd frame's magic
number (``28 b5 2f fd``, or a skippable frame's) are a zstd log, anything else is plain JSONL. A
zstd log is read by the spec's reader rule (:func:`spec.format.framing.decode_compressed_log`):
a first frame that is exactly the header line is the writer's form, a first frame holding more
is a log compressed whole by a tool, whose joined plaintext is read as a plain log.

This is the reader of every command that is given files: ``dsh-session check`` and ``explain``,
the ``logs:`` source of ``dsh-session copy``, and the pytest plugin. It never writes, so a torn
tail is reported, not repaired. The file store keeps to its own layout and its writer's form
(:mod:`reference.persistence.filestore`).

Every way a path can fail to be read is an :class:`InputError` (a missing path, a directory, a
file the user may not read, a file past a reading limit) or a :class:`spec.codes.SpecError` (bytes
that are not a valid log), each with a stable code and a sentence, never a traceback.

Reading is bounded (:class:`ReadLimits`, settable through the environment): a zstd log whose
plaintext would pass ``DSH_SESSION_MAX_DECOMPRESSED_BYTES`` (default 512 MiB) is refused
``DECOMPRESSED_TOO_LARGE`` after a streaming count that holds one chunk at a time, before anything
is kept; a line longer than ``DSH_SESSION_MAX_LINE_BYTES`` (default 64 MiB) is ``LINE_TOO_LONG``;
the first 64 KiB of a plain log are read by the spec's rules before the rest, so damage near the
start (a file of blank lines, of ``{}`` lines) is named exactly at once; then a plain log is streamed
(:class:`FileLines`: a MiB at a time, one line held beyond the records), stops at the first
damaged line, and a record that is no event counts: one more than
``DSH_SESSION_MAX_NON_EVENT_LINES`` (default 1,000) is ``TOO_MANY_NON_EVENT_LINES``.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property, partial
from typing import BinaryIO, Final, TypeVar

import zstandard

from conformance.zstd_frames import inflate_zstd
from reference.exits import LOG_FILE_SUFFIXES
from reference.persistence.filestore import (
    LoadedLog,
    clean_records,
    clean_zstd_frames,
    judge_clean_records,
    load_framed_log,
)
from spec.format.chunk_rows import CHUNK_ROW_TAGS, decode_storage_record
from spec.format.framing import (
    SKIPPABLE_MAGIC_BASE,
    SKIPPABLE_MAGIC_MASK,
    ZSTD_MAGIC,
    DecodedFrame,
    FramedLog,
    JsonlLine,
    LinePlace,
    decode_compressed_log,
    decode_jsonl_lines,
    decode_jsonl_log,
    decode_zstd_frames,
    describe_place,
    is_header_frame,
)
from spec.log.events import Event
from spec.log.header import LEGACY_FORMAT_VERSION
from spec.log.json import JsonValue

T = TypeVar("T")


class InputCode(StrEnum):
    """Why a path given on the command line could not be read (not a spec rule: the bytes were
    never reached)."""

    PATH_NOT_FOUND = "PATH_NOT_FOUND"
    PATH_IS_A_DIRECTORY = "PATH_IS_A_DIRECTORY"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    READ_FAILED = "READ_FAILED"
    LINE_TOO_LONG = "LINE_TOO_LONG"
    DECOMPRESSED_TOO_LARGE = "DECOMPRESSED_TOO_LARGE"
    TOO_MANY_NON_EVENT_LINES = "TOO_MANY_NON_EVENT_LINES"
    LIMIT_INVALID = "LIMIT_INVALID"


class InputError(Exception):
    """A path that cannot be read, with a stable ``code`` and a ``message`` that says so."""

    def __init__(self, code: InputCode, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message

    def __reduce__(self) -> tuple[type[InputError], tuple[InputCode, str]]:
        return (type(self), (self.code, self.message))  # pickled whole (dsh-session check --jobs)


class LogForm(StrEnum):
    """How a log file's bytes are laid out."""

    JSONL = "jsonl"  # plain JSON lines
    ZSTD_FRAMES = "zstd, one frame per flush"  # the writer's form
    ZSTD_WHOLE = "zstd, compressed whole"  # a tool's form: frames cut anywhere


@dataclass(frozen=True)
class LogFile:
    """A log file read: its form, the log, and where each event's line is in the file (one place
    per event of ``log.events + log.recovered``; a packed v0 row gives all its events one place).
    ``torn_place`` is where a torn tail the reader dropped starts. ``located`` is the places, or
    how to count them when first asked (a clean log read in bulk: most checks find nothing to
    locate, issue 24)."""

    path: str
    form: LogForm
    log: LoadedLog
    located: tuple[LinePlace, ...] | Callable[[], tuple[LinePlace, ...]]
    torn_place: LinePlace | None

    @cached_property
    def places(self) -> tuple[LinePlace, ...]:
        return self.located if isinstance(self.located, tuple) else self.located()

    @property
    def events(self) -> tuple[Event, ...]:
        return (*self.log.events, *self.log.recovered)


def is_zstd_data(data: bytes) -> bool:
    """Whether bytes start with a zstd frame (RFC 8878 §3.1.1: the frame magic, or a skippable
    frame's magic); this, not the file's name, says a log is compressed."""
    if len(data) < 4:
        return False
    magic = int.from_bytes(data[:4], "little")
    return magic == ZSTD_MAGIC or magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC_BASE


def read_bytes(path: str) -> bytes:
    """A file's bytes, or the :class:`InputError` that says why there are none."""
    with open_log(path) as file:
        return read_or_fail(path, file.read)


def open_log(path: str) -> BinaryIO:
    """The file at ``path`` opened for reading, or the :class:`InputError` that says why not."""
    return read_or_fail(path, lambda: open(path, "rb"))


def read_or_fail(path: str, read: Callable[[], T]) -> T:
    """What ``read`` gives, an :class:`OSError` it raises mapped to the :class:`InputError` that
    says it for ``path``."""
    try:
        return read()
    except FileNotFoundError:
        raise InputError(InputCode.PATH_NOT_FOUND, f"{path}: no such file or directory") from None
    except IsADirectoryError:
        raise InputError(
            InputCode.PATH_IS_A_DIRECTORY, f"{path} is a directory; give the log file inside it"
        ) from None
    except PermissionError:
        raise InputError(InputCode.PERMISSION_DENIED, f"{path}: permission denied (cannot read it)") from None
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno is not None else str(error)
        if error.errno == errno.ENOTDIR:
            raise InputError(InputCode.PATH_NOT_FOUND, f"{path}: {reason}") from None
        raise InputError(InputCode.READ_FAILED, f"{path}: could not be read ({reason})") from None


MIB: Final = 1 << 20
PROBE_BYTES: Final = 64 * 1024  # the head of a plain log read by the spec's rules before the rest
ONE_PASS_BYTES: Final = 64 * MIB  # a zstd log's plaintext read in bulk without being counted first


CHUNK_BYTES: Final = MIB  # a plain log is read this much at a time


@dataclass(frozen=True)
class ReadLimits:
    """How much a reader takes from one file before it refuses it (see the module docstring)."""

    max_line_bytes: int = 64 * MIB
    max_decompressed_bytes: int = 512 * MIB
    max_non_event_lines: int = 1_000

    @classmethod
    def from_environment(cls) -> ReadLimits:
        values: dict[str, int] = {}
        for field, variable in LIMIT_VARIABLES.items():
            text = os.environ.get(variable)
            if text is None:
                continue
            if not text.isdigit() or int(text) < 1:
                raise InputError(InputCode.LIMIT_INVALID, f"{variable}={text!r} is not a positive number")
            values[field] = int(text)
        return cls(**values)


LIMIT_VARIABLES: Final = {
    "max_line_bytes": "DSH_SESSION_MAX_LINE_BYTES",
    "max_decompressed_bytes": "DSH_SESSION_MAX_DECOMPRESSED_BYTES",
    "max_non_event_lines": "DSH_SESSION_MAX_NON_EVENT_LINES",
}


class FileLines:
    """The complete lines of a plain log read from ``file`` a chunk at a time, for
    :func:`spec.format.framing.decode_jsonl_lines`: at most one line is held beyond the chunk, and
    a line (or a torn tail) longer than ``limit`` bytes is refused ``LINE_TOO_LONG`` as soon as it
    is, before the rest of it is read. ``torn_offset`` is where the bytes after the last newline
    start, once every line is taken."""

    def __init__(self, file: BinaryIO, limit: int, where: str) -> None:
        self.file = file
        self.limit = limit
        self.where = where
        self.torn_offset: int | None = None

    def __iter__(self) -> Iterator[JsonlLine]:
        pending: list[bytes] = []  # the start of a line that goes on past the chunks read so far
        pending_bytes = 0
        start = 0  # the file offset of the line being read
        while chunk := self.file.read(CHUNK_BYTES):
            cut = 0
            while (newline := chunk.find(b"\n", cut)) != -1:
                self._measure(start, pending_bytes + newline - cut)
                text = b"".join([*pending, chunk[cut:newline]]) if pending else chunk[cut:newline]
                pending, pending_bytes = [], 0
                yield JsonlLine(offset=start, text=text)
                start += len(text) + 1
                cut = newline + 1
            if cut < len(chunk):
                pending.append(chunk[cut:])
                pending_bytes += len(chunk) - cut
                self._measure(start, pending_bytes)
        self.torn_offset = start if pending_bytes else None

    def _measure(self, start: int, length: int) -> None:
        if length > self.limit:
            raise InputError(
                InputCode.LINE_TOO_LONG,
                f"{self.where}: the line at byte {start} is longer than {self.limit} bytes "
                "(DSH_SESSION_MAX_LINE_BYTES)",
            )


def read_jsonl_file(file: BinaryIO, limits: ReadLimits, where: str) -> FramedLog:
    """A plain log read from ``file`` line by line by the spec's reader rule
    (:func:`spec.format.framing.decode_jsonl_lines`), which stops at the first damaged line; a
    record that is no event (not an object with a string ``type``) counts, and one more than
    ``limits.max_non_event_lines`` of them is ``TOO_MANY_NON_EVENT_LINES``."""
    lines = FileLines(file, limits.max_line_bytes, where)
    non_events = 0

    def count(record: JsonValue, place: LinePlace) -> None:
        nonlocal non_events
        if isinstance(record, dict) and isinstance(record.get("type"), str):
            return
        non_events += 1
        if non_events > limits.max_non_event_lines:
            raise InputError(
                InputCode.TOO_MANY_NON_EVENT_LINES,
                f"{where}: more than {limits.max_non_event_lines} lines are no event (the last at "
                f"{describe_place(place)}) (DSH_SESSION_MAX_NON_EVENT_LINES)",
            )

    return decode_jsonl_lines(lines, lambda: lines.torn_offset, count)


def check_line_lengths(text: bytes, limit: int, where: str, offset: int = 0) -> None:
    """:class:`InputError` ``LINE_TOO_LONG`` when a run of bytes without a newline is longer than
    ``limit``. Any such run holds a whole aligned block of ``limit // 2`` bytes, so only blocks
    without a newline are measured: a search per block, not per line."""
    block = max(limit // 2, 1)
    for start in range(0, len(text), block):
        if text.find(b"\n", start, start + block) != -1:
            continue
        begin = text.rfind(b"\n", 0, start) + 1
        end = text.find(b"\n", start)
        length = (len(text) if end == -1 else end) - begin
        if length > limit:
            raise InputError(
                InputCode.LINE_TOO_LONG,
                f"{where}: the line at byte {offset + begin} is longer than {limit} bytes "
                "(DSH_SESSION_MAX_LINE_BYTES)",
            )


def check_decompressed_size(data: bytes, limit: int, where: str) -> None:
    """:class:`InputError` ``DECOMPRESSED_TOO_LARGE`` when the frames' plaintext passes ``limit``,
    counted as a stream (one chunk held at a time). Damage stops the count: the spec's reader names it."""
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    total = 0
    try:
        while chunk := reader.read(MIB):
            total += len(chunk)
            if total > limit:
                raise InputError(
                    InputCode.DECOMPRESSED_TOO_LARGE,
                    f"{where}: {len(data)} compressed bytes decompress to more than {limit} bytes "
                    "(DSH_SESSION_MAX_DECOMPRESSED_BYTES)",
                )
    except zstandard.ZstdError:
        return


def frame_log_bytes(
    data: bytes, limits: ReadLimits | None = None, where: str = "the log"
) -> tuple[LogForm, FramedLog]:
    """Cut a log's bytes into header line and records by the spec's rules for the form their
    content shows, within ``limits``."""
    limits = limits or ReadLimits()
    if not is_zstd_data(data):
        return LogForm.JSONL, read_jsonl_file(io.BytesIO(data), limits, where)
    check_decompressed_size(data, limits.max_decompressed_bytes, where)
    frames, torn = decode_zstd_frames(data, inflate_zstd)
    for frame in (*frames, *([torn] if torn is not None else [])):
        check_line_lengths(
            frame.plaintext, limits.max_line_bytes, f"{where} (zstd frame at byte {frame.offset})"
        )
    form = LogForm.ZSTD_FRAMES if not frames or is_header_frame(frames[0]) else LogForm.ZSTD_WHOLE
    return form, decode_compressed_log(frames, torn)


def probe_head(file: BinaryIO, file_name: str) -> None:
    """Read the whole lines of a plain log's first :data:`PROBE_BYTES` by the spec's rules, so
    that damage there is named before the rest of the file is read (a file of ``{}`` lines is
    corrupt at line 2, not past the non-event limit); raises what the spec's reader raises, else
    returns with the file back at its start (the full read decides)."""
    head = file.read(PROBE_BYTES + 1)
    file.seek(0)
    if len(head) <= PROBE_BYTES or is_zstd_data(head):
        return
    cut = head.rfind(b"\n", 0, PROBE_BYTES)
    if cut > 0:
        load_framed_log(None, decode_jsonl_log(head[: cut + 1]), file_name)


def read_log_file(
    path: str,
    limits: ReadLimits | None = None,
    checked_only: bool = False,
    opener: Callable[[str], BinaryIO] = open_log,
) -> LogFile:
    """Read the log at ``path``: :class:`InputError` when the file cannot be read or passes a
    reading limit (``limits``, by default :meth:`ReadLimits.from_environment`),
    :class:`spec.codes.SpecError` (with the file line and byte where it can say) when its bytes
    are not a valid log. A plain log is streamed (:func:`read_jsonl_file`): what is held is the
    records read and one line; a zstd log is read whole, its plaintext bounded first, a clean one
    in bulk (:func:`read_clean_zstd_log`). ``checked_only``: the caller only checks the events and
    hands none out, so a v0 log read in bulk leaves them unfrozen (:func:`judge_clean_records`).
    ``opener`` opens the file (by default on the real filesystem; a store's seam for the protocol's
    ``check``)."""
    limits = limits or ReadLimits.from_environment()

    def read(file: BinaryIO) -> LogFile | tuple[LogForm, FramedLog]:
        probe_head(file, os.path.basename(path))
        magic = file.read(4)
        file.seek(0)
        if is_zstd_data(magic):
            data = file.read()
            clean = read_clean_zstd_log(path, data, limits, checked_only)
            return clean or frame_log_bytes(data, limits, path)
        return LogForm.JSONL, read_jsonl_file(file, limits, path)

    with opener(path) as file:
        read_in = read_or_fail(path, lambda: read(file))
    if isinstance(read_in, LogFile):
        return read_in
    form, framed = read_in
    log = load_framed_log(None, framed, os.path.basename(path))
    records = framed.records + framed.recovered
    if log.format_version == LEGACY_FORMAT_VERSION:
        places = tuple(
            place for record, place in zip(records, framed.places) for _ in range(_event_count(record))
        )
    else:
        places = framed.places
    return LogFile(path, form, log, places, framed.torn_place)


def read_clean_zstd_log(
    path: str, data: bytes, limits: ReadLimits, checked_only: bool = False
) -> LogFile | None:
    """A clean zstd log in the writer's form (the first frame exactly the header line, every frame
    whole, every line valid) read in bulk, within ``limits`` as :func:`frame_log_bytes` bounds it:
    the frames inflated at once (:func:`clean_zstd_frames`), the records parsed by the bulk parser
    and judged by the spec's rules (:func:`judge_clean_records`), each record's place counted from
    the frames. The same :class:`LogFile` the spec's reader gives, or ``None`` when the log is
    anything else or the bulk path is unsure: the spec's reader then decides and names the damage."""
    # One pass for a log whose plaintext is within ONE_PASS_BYTES (and the limit); a larger one
    # (or a damaged one) has its plaintext counted first, so nothing past the limit is ever held.
    frames = clean_zstd_frames(data, min(limits.max_decompressed_bytes, ONE_PASS_BYTES))
    if frames is None:
        check_decompressed_size(data, limits.max_decompressed_bytes, path)
        frames = clean_zstd_frames(data)
    if frames is None or not is_header_frame(DecodedFrame(*frames[0])):
        return None
    for offset, plaintext in frames:
        check_line_lengths(plaintext, limits.max_line_bytes, f"{path} (zstd frame at byte {offset})")
    bulk = clean_records(None, data, frames, os.path.basename(path), checked_only=checked_only)
    if bulk is None:
        return None
    log = judge_clean_records(*bulk, checked_only=checked_only)
    if log is None:
        return None
    records = bulk[2] if log.format_version == LEGACY_FORMAT_VERSION else None
    return LogFile(path, LogForm.ZSTD_FRAMES, log, partial(_frame_places, frames, records), None)


def _frame_places(
    frames: list[tuple[int, bytes]], records: Sequence[JsonValue] | None
) -> tuple[LinePlace, ...]:
    """Each record's place in a clean zstd log (its line counted from the header frame's, its
    byte in the plaintext, its frame's offset), one per event: a v0 log's ``records`` give each
    row's place to all the events it packs."""
    places: list[LinePlace] = []
    line, text_offset = 1, len(frames[0][1])
    for offset, plaintext in frames[1:]:
        start = 0
        while start < len(plaintext):
            line += 1
            places.append(LinePlace(line, text_offset + start, offset))
            start = plaintext.index(b"\n", start) + 1
        text_offset += len(plaintext)
    if records is not None:
        places = [place for record, place in zip(records, places) for _ in range(_event_count(record))]
    return tuple(places)


def _event_count(record: JsonValue) -> int:
    if isinstance(record, dict) and record.get("type") in CHUNK_ROW_TAGS:
        return len(decode_storage_record(record))
    return 1


def find_logs(paths: Sequence[str]) -> Iterator[str]:
    """Each path as given (a file is read whatever its name), or, for a directory, every file
    below it whose name is a log's (:data:`LOG_FILE_SUFFIXES`), sorted."""
    for path in paths:
        if not os.path.isdir(path):
            yield path
            continue
        for folder, subfolders, files in os.walk(path):
            subfolders.sort()
            for name in sorted(files):
                if name.endswith(LOG_FILE_SUFFIXES):
                    yield os.path.join(folder, name)
