"""Framing: how a log's bytes are cut into lines (plain JSONL) or zstd frames, and how those lines
become the header line and the stored records (SPEC-DECISIONS D3; notes/dsh-persistence §3.3,
§4, §6).

Decompression itself is not here (it needs a zstd library): :func:`scan_zstd_frames` finds the
frame boundaries from their headers alone, and :func:`decode_zstd_frames` hands each frame to the
caller's :data:`Inflate` and judges what comes back, for :func:`decode_zstd_log`. What a record holds is read elsewhere
(:mod:`spec.format.naming` for the header line, :mod:`spec.format.chunk_rows` for DSH's packed rows).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from spec.codes import Code, SpecError, reject
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.json import JsonValue

# --- plain JSONL framing (notes/dsh-persistence §3.3, §6.2-§6.3; SPEC-DECISIONS D3) -------------

NEWLINE: Final = 0x0A  # the only line separator; "\r" is JSON whitespace


def encode_lines(records: Sequence[JsonValue]) -> bytes:
    """The canonical bytes of records written as JSONL: each record's compact JSON text
    (:func:`spec.format.json_text.encode_json_text`: keys in the record's own order, ``,`` and
    ``:`` with no space, non-ASCII raw) in UTF-8, ended by one ``\\n`` — no ``\\r``, no byte order
    mark, no empty line (notes/dsh-persistence §3.3-§3.4; docs/choices.md, "Byte-exact writing").
    A header line, one write's batch of events and one zstd frame's plaintext are each this."""
    return b"".join(encode_json_text(record).encode("utf-8") + b"\n" for record in records)


@dataclass(frozen=True)
class JsonlLine:
    """One complete line: its first byte's offset in the data and its bytes without the newline."""

    offset: int
    text: bytes

    @property
    def end(self) -> int:
        """The offset just past this line's newline."""
        return self.offset + len(self.text) + 1


@dataclass(frozen=True)
class JsonlScan:
    """The data cut at every newline: the complete lines, and where a last line without its
    newline (the torn tail) starts, if there is one."""

    lines: tuple[JsonlLine, ...]
    torn_offset: int | None


def split_jsonl(data: bytes) -> JsonlScan:
    """A JSONL log is lines ended by ``\\n``; bytes after the last ``\\n`` are a torn tail, never a
    line. Nothing is parsed here (notes/dsh-persistence §3.3)."""
    lines: list[JsonlLine] = []
    start = 0
    while (newline := data.find(NEWLINE, start)) != -1:
        lines.append(JsonlLine(offset=start, text=data[start:newline]))
        start = newline + 1
    return JsonlScan(lines=tuple(lines), torn_offset=start if start < len(data) else None)


@dataclass(frozen=True)
class LinePlace:
    """Where a line of a log is, as a person finds it: its 1-based line number (the header is
    line 1) and the offset of its first byte in the file; in a zstd log, the line and byte are
    those of the decompressed text (what ``zstdcat`` prints) and ``frame`` is the file offset of
    the frame that holds the line."""

    line: int
    byte: int
    frame: int | None = None


def describe_place(place: LinePlace) -> str:
    """A place as a reading error names it: ``line 12 (byte 345)``, or for a zstd log
    ``line 12 (byte 345 of the decompressed text, zstd frame at byte 89)``."""
    if place.frame is None:
        return f"line {place.line} (byte {place.byte})"
    return f"line {place.line} (byte {place.byte} of the decompressed text, zstd frame at byte {place.frame})"


@dataclass(frozen=True)
class FramedLog:
    """What a log's bytes hold: the parsed header line, the records after it that are committed,
    the records recovered from a torn zstd frame (kept, but they must be written again), and the
    offset the file must be cut back to so that the next open sees a clean log (``None`` when the
    log is clean already) (SPEC-DECISIONS D3 item 4). ``places`` says where each record's line is
    (committed records, then recovered ones), ``torn_place`` where a dropped torn tail starts."""

    header_line: JsonValue
    records: tuple[JsonValue, ...]
    recovered: tuple[JsonValue, ...] = ()
    truncate_to: int | None = None
    places: tuple[LinePlace, ...] = ()
    torn_place: LinePlace | None = None


def decode_jsonl_log(data: bytes) -> FramedLog:
    """A plain log's first complete line is its header line; every later complete line is one
    record and must parse; the torn tail is dropped and the file is cut back to where it starts.
    A complete line that does not parse is a corrupt log naming its line and byte offset — even
    the last one: a crash only loses a suffix of the bytes, so a line that kept its newline kept
    all of its bytes (SPEC-DECISIONS D3 items 4-5). DSH instead drops such a line silently, with
    every later line, when no ``turn/end`` follows it (notes/dsh-persistence §6.2, §11 item 3).
    The bytes are cut by :func:`split_jsonl` and read by :func:`decode_jsonl_lines`."""
    scan = split_jsonl(data)
    return decode_jsonl_lines(scan.lines, lambda: scan.torn_offset)


def decode_jsonl_lines(
    lines: Iterable[JsonlLine],
    torn_offset: Callable[[], int | None],
    on_record: Callable[[JsonValue, LinePlace], None] | None = None,
) -> FramedLog:
    """The rule of :func:`decode_jsonl_log` on a plain log's complete lines, taken one at a time
    in order: the first damaged line stops the read, so a reader that streams a file holds one
    line beyond the records. ``torn_offset`` is asked once they are all taken (where the bytes
    after the last newline start, if any); ``on_record`` sees each record and its place as it is
    read (a reader's own limits)."""
    stream = iter(lines)
    first = next(stream, None)
    if first is None:
        raise reject(Code.CORRUPT_LOG, "empty or header-less session log")
    header_line = decode_header_text(first.text)
    records: list[JsonValue] = []
    places: list[LinePlace] = []
    for number, line in enumerate(stream, start=2):
        place = LinePlace(line=number, byte=line.offset)
        record = decode_record_text(line.text, describe_place(place))
        if on_record is not None:
            on_record(record, place)
        records.append(record)
        places.append(place)
    torn = torn_offset()
    return FramedLog(
        header_line=header_line,
        records=tuple(records),
        truncate_to=torn,
        places=tuple(places),
        torn_place=None if torn is None else LinePlace(len(places) + 2, torn),
    )


def decode_header_text(text: bytes) -> JsonValue:
    """The header line is UTF-8 JSON; anything else is not a header (notes/dsh-persistence §6.2)."""
    try:
        return decode_json_text(text.decode("utf-8"))
    except ValueError:
        raise reject(Code.HEADER_LINE_INVALID, "corrupt session log: header line is not valid JSON") from None


def decode_record_text(text: bytes, where: str) -> JsonValue:
    """A committed record line is strict UTF-8 holding one JSON value; an empty line, invalid UTF-8
    or bad JSON is damage at ``where`` (a valid JavaScript writer never produces invalid UTF-8,
    so nothing is gained by decoding leniently as Node does) (notes/dsh-persistence §3.3)."""
    try:
        return decode_json_text(text.decode("utf-8"))
    except ValueError:
        raise reject(
            Code.CORRUPT_LOG, f"corrupt session log: unparsable committed event at {where}"
        ) from None


# --- zstd framing (notes/dsh-persistence §4; RFC 8878 §3.1) --------------------------------------

ZSTD_MAGIC: Final = 0xFD2FB528  # little-endian on disk: 28 B5 2F FD
SKIPPABLE_MAGIC_BASE: Final = 0x184D2A50  # skippable frames use 0x184D2A50..0x184D2A5F
SKIPPABLE_MAGIC_MASK: Final = 0xFFFFFFF0
_DICTIONARY_ID_BYTES: Final = (0, 1, 2, 4)  # by Dictionary_ID_Flag
_RESERVED_DESCRIPTOR_BITS: Final = 0x18  # the reserved bit 3 and the unused bit 4; DSH refuses both
_RESERVED_BLOCK_TYPE: Final = 3
_RLE_BLOCK_TYPE: Final = 1
_CHECKSUM_BYTES: Final = 4  # XXH64 low 32 bits


@dataclass(frozen=True)
class ZstdFrame:
    """A structurally complete frame: ``data[offset : offset + length]``. A skippable frame carries
    no plaintext and is skipped by readers."""

    offset: int
    length: int
    skippable: bool = False


@dataclass(frozen=True)
class ZstdScan:
    """The complete frames in order, and where an incomplete final frame starts, if there is one."""

    frames: tuple[ZstdFrame, ...]
    torn_offset: int | None


def scan_zstd_frames(data: bytes) -> ZstdScan:
    """A zstd log is frames back to back. Frame boundaries are found from frame and block headers
    alone, without decompressing; a final frame the data ends inside is torn, and so are 1-3
    trailing bytes whatever they are; 4 or more bytes that start no frame are corruption
    (notes/dsh-persistence §4.3). A frame that cannot end before the data does is torn only if
    no complete frames follow it: a crash loses a suffix, so complete frames after a "torn" one
    mean a damaged middle frame (SPEC-DECISIONS D3 item 5)."""
    frames: list[ZstdFrame] = []
    start = 0
    while start < len(data):
        frame = measure_zstd_frame(data, start)
        if frame is None:
            validate_nothing_complete_after(data, start)
            return ZstdScan(frames=tuple(frames), torn_offset=start)
        frames.append(frame)
        start += frame.length
    return ZstdScan(frames=tuple(frames), torn_offset=None)


def validate_nothing_complete_after(data: bytes, torn_start: int) -> None:
    """No run of complete frames reaching the end of the data starts after a torn frame's start;
    one that does means the frame at ``torn_start`` is damaged, not torn (D3 item 5)."""
    magic = ZSTD_MAGIC.to_bytes(4, "little")
    candidate = data.find(magic, torn_start + 1)
    while candidate != -1:
        if _frames_reach_the_end(data, candidate):
            raise reject(
                Code.CORRUPT_LOG,
                f"corrupt Zstandard session log: frame at byte {torn_start} is damaged "
                f"(complete frames follow it from byte {candidate})",
            )
        candidate = data.find(magic, candidate + 1)


def _frames_reach_the_end(data: bytes, start: int) -> bool:
    try:
        while start < len(data):
            frame = measure_zstd_frame(data, start)
            if frame is None:
                return False
            start += frame.length
    except SpecError:
        return False
    return True


def measure_zstd_frame(data: bytes, start: int) -> ZstdFrame | None:
    """The frame starting at ``start``, or ``None`` when the data ends before it does. A frame is
    the magic, a header sized by its descriptor (window byte unless single-segment, 0/1/2/4
    dictionary-id bytes, 0/1/2/4/8 content-size bytes), blocks up to the one flagged last (3-byte
    header; an RLE block carries 1 byte, others ``size`` bytes), and a 4-byte checksum when the
    descriptor says so. A skippable frame is its magic, a 4-byte size and that many bytes.
    Refused: an unknown magic, a reserved descriptor bit, the reserved block type
    (notes/dsh-persistence §4.3; RFC 8878 §3.1). DSH refuses skippable frames too; this reader
    skips them, as RFC 8878 asks, since this project never writes them."""
    end = len(data)
    if end - start < 4:
        return None
    magic = int.from_bytes(data[start : start + 4], "little")
    if magic & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC_BASE:
        if end - start < 8:
            return None
        length = 8 + int.from_bytes(data[start + 4 : start + 8], "little")
        return ZstdFrame(offset=start, length=length, skippable=True) if start + length <= end else None
    if magic != ZSTD_MAGIC:
        raise reject(Code.CORRUPT_LOG, f"corrupt Zstandard session log: invalid frame magic at byte {start}")
    position = start + 4
    if position >= end:
        return None
    descriptor = data[position]
    if descriptor & _RESERVED_DESCRIPTOR_BITS:
        raise reject(
            Code.CORRUPT_LOG, f"corrupt Zstandard session log: reserved frame-header bit at byte {position}"
        )
    position += 1 + _frame_header_rest(descriptor)
    while True:
        if position + 3 > end:
            return None  # also when the payload of the block before ran past the end
        block_header = int.from_bytes(data[position : position + 3], "little")
        is_last, block_type, size = block_header & 1, (block_header >> 1) & 3, block_header >> 3
        if block_type == _RESERVED_BLOCK_TYPE:
            raise reject(
                Code.CORRUPT_LOG, f"corrupt Zstandard session log: reserved block type at byte {position}"
            )
        position += 3 + (1 if block_type == _RLE_BLOCK_TYPE else size)
        if is_last:
            break
    if descriptor & 0x04:
        position += _CHECKSUM_BYTES
    return ZstdFrame(offset=start, length=position - start) if position <= end else None


def _frame_header_rest(descriptor: int) -> int:
    """Header bytes after the descriptor: window descriptor, dictionary id, frame content size."""
    single_segment = bool(descriptor & 0x20)
    content_size_flag = descriptor >> 6
    content_size_bytes = (1 if single_segment else 0) if content_size_flag == 0 else 1 << content_size_flag
    return (0 if single_segment else 1) + _DICTIONARY_ID_BYTES[descriptor & 3] + content_size_bytes


@dataclass(frozen=True)
class DecodedFrame:
    """A frame's offset in the file and its plaintext (for a torn frame: the plaintext of its
    complete blocks, which may end inside a line)."""

    offset: int
    plaintext: bytes


Inflate: TypeAlias = Callable[[bytes], tuple[bytes, bool]]
"""A zstd library's decompression of one frame's bytes: the plaintext of the blocks it decoded,
and whether the frame ended, checksum verified, exactly where the bytes do; ``ValueError`` (its
message the library's reason) when the bytes do not decode."""


def decode_zstd_frame(frame: bytes, offset: int, inflate: Inflate) -> bytes:
    """A complete frame's plaintext: the frame at byte ``offset`` must inflate whole, to its end
    and with its checksum verified, or the log is corrupt, naming that offset (D3 item 5)."""
    try:
        plaintext, whole = inflate(frame)
        if not whole:
            raise ValueError("frame did not end where its structure says")
    except ValueError as error:
        raise reject(
            Code.CORRUPT_LOG,
            f"corrupt Zstandard session log: frame at byte {offset} failed validation ({error})",
        ) from None
    return plaintext


def decode_zstd_frames(data: bytes, inflate: Inflate) -> tuple[list[DecodedFrame], DecodedFrame | None]:
    """A zstd log's frames decompressed, as :func:`decode_zstd_log` takes them: the data is cut by
    :func:`scan_zstd_frames`; skippable frames are left out; every other complete frame is read
    by :func:`decode_zstd_frame`; a torn final frame gives the plaintext of the blocks it holds
    whole, or nothing when they do not decode (D3 item 4)."""
    scan = scan_zstd_frames(data)
    frames = [
        DecodedFrame(
            frame.offset,
            decode_zstd_frame(data[frame.offset : frame.offset + frame.length], frame.offset, inflate),
        )
        for frame in scan.frames
        if not frame.skippable
    ]
    if scan.torn_offset is None:
        return frames, None
    try:
        plaintext = inflate(data[scan.torn_offset :])[0]
    except ValueError:
        plaintext = b""
    return frames, DecodedFrame(scan.torn_offset, plaintext)


def decode_zstd_log(frames: Sequence[DecodedFrame], torn: DecodedFrame | None) -> FramedLog:
    """A zstd log's first frame holds exactly the header line; every later complete frame holds
    whole lines, each one record; a complete frame whose plaintext does not end a line, or holds
    a line that does not parse, is a corrupt log naming the frame's byte offset. A torn final
    frame is cut off the file, but the complete lines of its plaintext are recovered and must be
    written again (SPEC-DECISIONS D3 items 4-5; notes/dsh-persistence §4.4, §6.4). ``frames`` are
    the complete non-skippable frames, decompressed and checksum-verified by the caller. This is
    the form a writer produces, one frame per flush; a log compressed whole by a tool is read by
    :func:`decode_compressed_log`."""
    if not frames:
        raise reject(Code.CORRUPT_LOG, "empty or header-less Zstandard session log")
    if not is_header_frame(frames[0]):
        raise reject(
            Code.CORRUPT_LOG,
            "corrupt Zstandard session log: first frame is not exactly one header line (a log compressed "
            "whole, as by the zstd tool, is read by dsh-session check and explain; a store opens only the "
            "one-frame-per-flush form it writes)",
        )
    header_line = decode_header_text(frames[0].plaintext[:-1])
    records: list[JsonValue] = []
    places: list[LinePlace] = []
    line_number, text_offset = 1, len(frames[0].plaintext)
    for frame in frames[1:]:
        scan = split_jsonl(frame.plaintext)
        if scan.torn_offset is not None:
            raise reject(
                Code.CORRUPT_LOG,
                f"corrupt Zstandard session log: complete frame at byte {frame.offset} contains a torn "
                f"JSONL record (line {line_number + len(scan.lines) + 1} of the decompressed text)",
            )
        for line in scan.lines:
            line_number += 1
            place = LinePlace(line_number, text_offset + line.offset, frame.offset)
            records.append(decode_record_text(line.text, describe_place(place)))
            places.append(place)
        text_offset += len(frame.plaintext)
    if torn is None:
        return FramedLog(header_line=header_line, records=tuple(records), places=tuple(places))
    recovered: list[JsonValue] = []
    torn_scan = split_jsonl(torn.plaintext)
    for line in torn_scan.lines:
        line_number += 1
        place = LinePlace(line_number, text_offset + line.offset, torn.offset)
        recovered.append(decode_record_text(line.text, f"{describe_place(place)}, in the torn frame"))
        places.append(place)
    return FramedLog(
        header_line=header_line,
        records=tuple(records),
        recovered=tuple(recovered),
        truncate_to=torn.offset,
        places=tuple(places),
        torn_place=LinePlace(line_number + 1, text_offset + (torn_scan.torn_offset or 0), torn.offset)
        if torn_scan.torn_offset is not None
        else None,
    )


def decode_log_bytes(data: bytes, compressed: bool, inflate: Inflate) -> FramedLog:
    """A store's log file by the framing rules: plain lines (:func:`decode_jsonl_log`), or, when
    ``compressed``, the writer's zstd frames (:func:`decode_zstd_log`), each complete frame
    decompressed by ``inflate`` and matched against its checksum (:func:`decode_zstd_frames`); a
    failure is a corrupt log naming the frame's offset (notes/dsh-persistence §4.4)."""
    if not compressed:
        return decode_jsonl_log(data)
    return decode_zstd_log(*decode_zstd_frames(data, inflate))


def is_header_frame(frame: DecodedFrame) -> bool:
    """Whether a frame's plaintext is exactly one line: a writer's first frame, the header line
    alone (notes/dsh-persistence §4.4)."""
    return frame.plaintext.endswith(b"\n") and frame.plaintext.count(NEWLINE) == 1


def decode_compressed_log(frames: Sequence[DecodedFrame], torn: DecodedFrame | None) -> FramedLog:
    """How a reader takes any zstd log. A first frame that is exactly the header line is the
    writer's frame-per-flush form (:func:`decode_zstd_log`). A first frame holding more than the
    header line is a log compressed whole by a tool (``zstd file.jsonl``, one frame or several
    cut anywhere): its frames' plaintexts, joined, are the plain log that was compressed and are
    read by the plain rules — every complete line a record, bytes after the last newline a torn
    tail of that text, dropped and reported at ``torn_place``. An incomplete final frame is a torn
    tail of the file: cut at its offset, the complete lines of its plaintext recovered. A writer
    never produces this form and never appends to it (docs/choices.md, "Reading logs as users
    have them")."""
    if not frames or is_header_frame(frames[0]):
        return decode_zstd_log(frames, torn)
    committed = b"".join(frame.plaintext for frame in frames)
    text = committed + (torn.plaintext if torn is not None else b"")
    scan = split_jsonl(text)
    if not scan.lines:
        raise reject(Code.CORRUPT_LOG, "empty or header-less Zstandard session log")
    header_line = decode_header_text(scan.lines[0].text)
    frame_starts: list[tuple[int, int]] = []  # (offset in the joined text, offset in the file)
    text_start = 0
    for frame in (*frames, *([torn] if torn is not None else [])):
        frame_starts.append((text_start, frame.offset))
        text_start += len(frame.plaintext)
    records: list[JsonValue] = []
    recovered: list[JsonValue] = []
    places: list[LinePlace] = []
    for number, line in enumerate(scan.lines[1:], start=2):
        place = LinePlace(number, line.offset, _frame_holding(frame_starts, line.offset))
        value = decode_record_text(line.text, describe_place(place))
        (records if line.end <= len(committed) else recovered).append(value)
        places.append(place)
    torn_place = None
    if scan.torn_offset is not None:
        torn_place = LinePlace(
            len(scan.lines) + 1, scan.torn_offset, _frame_holding(frame_starts, scan.torn_offset)
        )
    return FramedLog(
        header_line=header_line,
        records=tuple(records),
        recovered=tuple(recovered),
        truncate_to=None if torn is None else torn.offset,
        places=tuple(places),
        torn_place=torn_place,
    )


def place_compressed_log(
    frames: Sequence[DecodedFrame], torn: DecodedFrame | None
) -> tuple[tuple[LinePlace, ...], LinePlace | None]:
    """Where a zstd log's records are, as :func:`decode_compressed_log` reads them: each record's
    line (the header line is line 1), its byte offset in the decompressed text and the file offset
    of the frame holding its first byte, committed records then recovered ones; and where a dropped
    torn tail of the text starts (``None``: none). A reader that reports a damaged or recovered
    record names it by its place (docs/choices.md, "Reading logs as users have them"); a log that
    :func:`decode_compressed_log` refuses has no places."""
    stored = decode_compressed_log(frames, torn)
    return stored.places, stored.torn_place


def _frame_holding(frame_starts: Sequence[tuple[int, int]], text_offset: int) -> int:
    """The file offset of the frame whose plaintext holds ``text_offset`` of the joined text
    (the last frame starting at or before it; empty frames hold nothing)."""
    index = bisect_right(frame_starts, text_offset, key=lambda start: start[0]) - 1
    return frame_starts[max(index, 0)][1]
