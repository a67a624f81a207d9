"""Storage rules: where a session's log lives, how its first line names it, how a stored line turns
into events, and how lines and zstd frames are cut out of bytes (SPEC-DECISIONS D1, D3, D5;
notes/dsh-persistence §2-§4, §6; notes/dsh-session-core §13.1).

Everything here is pure: bytes and JSON values in, values out. Decompression is not here (it
needs a zstd library); the reference decompresses the frames this module finds and hands the
plaintexts back to :func:`decode_zstd_log`.

A log is written as ``<root>/<project dir>/<session dir>/<file name>``; its first line (or first
zstd frame) is the header line; every later line is one stored record. Version 4 logs hold events
verbatim. DSH v0 logs may also hold packed chunk rows, which :func:`decode_storage_record`
expands; they are read, never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from spec.codes import Code, SpecError, reject
from spec.header import HEADER_FIELD_ORDER, HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION, validate_header
from spec.json import FrozenDict, JsonObject, JsonValue, decode_json_text, is_event_seq, is_safe_integer, js_text, snapshot_json

# --- naming (notes/dsh-persistence §2) ----------------------------------------------------------

NO_CWD_DIR: Final = "_no-cwd"
V4_ZSTD_NAME: Final = "session.v4.jsonl.zstd"
V4_PLAIN_NAME: Final = "session.v4.jsonl"
V0_ZSTD_NAME: Final = "session.jsonl.zstd"
V0_PLAIN_NAME: Final = "session.jsonl"

PROJECT_SLUG_MAX: Final = 251  # characters of the project slug kept; with the two "--" wrappers a name is at most 255
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
    return "".join(chr(unit) if unit in _SAFE_UNITS else _escape_unit(unit) for unit in _utf16_code_units(session_id))


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
    expected valid already (spec.header.validate_header)."""
    line: JsonObject = {"type": HEADER_LINE_TYPE}
    line.update((key, header[key]) for key in HEADER_FIELD_ORDER if key in header)
    line.update((key, value) for key, value in header.items() if key not in line)
    return line


def decode_header_line(value: JsonValue, session_id_hint: str | None = None) -> tuple[int, FrozenDict]:
    """The first line gives ``(format version, in-memory v4 header)``. It must be an object; a
    numeric ``version`` other than 4 and 0 is refused before anything else is looked at; then
    ``type`` is ``"session"`` and ``id`` a string (equal to the hint when one is given); a v4 line
    is the header itself, a v0 line is upgraded (:func:`upgrade_v0_header`); neither may carry the
    retired policy fields (notes/dsh-persistence §3.1, §3.5; SPEC-DECISIONS D1)."""
    if not isinstance(value, dict):
        raise reject(Code.HEADER_LINE_INVALID, "corrupt session log: first line is not a session header")
    version = read_header_line_version(value)
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


def read_header_line_version(line: JsonObject) -> int:
    """A header line's ``version`` must be a number; 4 (written) and 0 (DSH, read-only) are read,
    any other number is an unsupported format named in the error (SPEC-DECISIONS D1;
    notes/dsh-persistence §3.5)."""
    version = line.get("version")
    if not _is_number(version):
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


# --- packed chunk rows, read-only (notes/dsh-session-core §13.1; notes/dsh-persistence §3.2) ------

# Row tag -> the delta chunk type its members decode to.
CHUNK_ROW_TAGS: Final = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_ROW_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_ROW_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_ROW_DATA_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})


def decode_storage_record(value: JsonValue) -> list[JsonValue]:
    """One stored v0 record gives the events it holds: an object tagged ``text-chunks``,
    ``reasoning-chunks`` or ``tool-call-chunks`` is a packed row, validated strictly and expanded
    into its ``assistant/chunk`` members; any other value is one event, passed through unchecked
    (notes/dsh-session-core §13.1)."""
    if not isinstance(value, dict) or value.get("type") not in CHUNK_ROW_TAGS:
        return [value]
    tag = value["type"]
    assert isinstance(tag, str)
    members = validate_chunk_row(tag, value)
    return expand_chunk_row(tag, value, members)


def validate_chunk_row(tag: str, row: JsonObject) -> list[str]:
    """A packed row is exactly ``{type, seq0, time0, data}`` with ``seq0`` an event seq and
    ``time0`` a safe integer; ``data`` is exactly ``{turn, step, index, dt, texts}`` (text and
    reasoning) or ``{turn, step, index, id, name?, dt, args}`` (tool call, string id and name);
    turn/step/index are numbers; the members are a non-empty string array; ``dt`` holds one safe
    integer gap per member after the first; and every member seq and running time stays a safe
    integer. Returns the members (notes/dsh-session-core §13.1)."""
    if set(row) != _ROW_ENVELOPE_KEYS:
        raise _malformed_row(tag, "envelope must be exactly {type, seq0, time0, data}")
    if not is_event_seq(row["seq0"]):
        raise _malformed_row(tag, "seq0 must be a non-negative safe integer")
    if not is_safe_integer(row["time0"]):
        raise _malformed_row(tag, "time0 must be a safe integer")
    data = row["data"]
    # DSH tests "is an object" with typeof, which admits arrays; an array then fails the exact-keys check.
    if not isinstance(data, (dict, list)):
        raise _malformed_row(tag, "data must be an object")
    keys = set(data) if isinstance(data, dict) else set()
    if tag == "tool-call-chunks":
        with_name = keys == _TOOL_ROW_DATA_KEYS | {"name"}
        if not with_name and keys != _TOOL_ROW_DATA_KEYS:
            raise _malformed_row(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
        assert isinstance(data, dict)
        if not isinstance(data["id"], str) or (with_name and not isinstance(data["name"], str)):
            raise _malformed_row(tag, "id (and name when present) must be strings")
        payload_key = "args"
    else:
        if keys != _TEXT_ROW_DATA_KEYS:
            raise _malformed_row(tag, "data must be exactly {turn, step, index, dt, texts}")
        assert isinstance(data, dict)
        payload_key = "texts"
    members = _validate_run_data(tag, data, payload_key)
    _validate_run_bounds(tag, _as_int(row["seq0"]), _as_int(row["time0"]), _gaps_of(data), len(members))
    return members


def _validate_run_data(tag: str, data: JsonObject, payload_key: str) -> list[str]:
    if not all(_is_number(data[key]) for key in ("turn", "step", "index")):
        raise _malformed_row(tag, "turn/step/index must be numbers")
    payload = data[payload_key]
    if not isinstance(payload, list) or len(payload) == 0 or not all(isinstance(entry, str) for entry in payload):
        raise _malformed_row(tag, f"{payload_key} must be a non-empty string array")
    gaps = data["dt"]
    if not isinstance(gaps, list) or not all(is_safe_integer(gap) for gap in gaps):
        raise _malformed_row(tag, "dt must be an array of safe integers")
    if len(gaps) != len(payload) - 1:
        raise _malformed_row(tag, f"dt length {len(gaps)} does not match {len(payload)} members")
    return payload  # type: ignore[return-value]


def _validate_run_bounds(tag: str, seq0: int, time0: int, gaps: list[int], count: int) -> None:
    if not is_safe_integer(seq0 + count - 1):
        raise _malformed_row(tag, "member seqs must stay safe integers")
    time = time0
    for gap in gaps:
        time += gap
        if not is_safe_integer(time):
            raise _malformed_row(tag, "member times must stay safe integers")


def expand_chunk_row(tag: str, row: JsonObject, members: Sequence[str]) -> list[JsonValue]:
    """Member ``k`` of a valid row is ``{type: "assistant/chunk", seq: seq0 + k, time: time0 plus
    the first k gaps, data: {turn, step, chunk}}``, the chunk carrying the row's index (and, for a
    tool call, its id and name) and the member text (notes/dsh-persistence §3.2)."""
    data = row["data"]
    assert isinstance(data, dict)
    gaps = _gaps_of(data)
    seq, time = _as_int(row["seq0"]), _as_int(row["time0"])
    events: list[JsonValue] = []
    for k, member in enumerate(members):
        if k > 0:
            time += gaps[k - 1]
        chunk: JsonObject = {"type": CHUNK_ROW_TAGS[tag], "index": data["index"]}
        if tag == "tool-call-chunks":
            chunk["id"] = data["id"]
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            chunk["text"] = member
        events.append(
            {"type": "assistant/chunk", "seq": seq + k, "time": time, "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk}}
        )
    return events


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _as_int(value: JsonValue) -> int:
    # Integral floats count as the integer they equal (D5); output seqs and times are ints.
    assert isinstance(value, (int, float))
    return int(value)


def _gaps_of(data: JsonObject) -> list[int]:
    gaps = data["dt"]
    assert isinstance(gaps, list)
    return [_as_int(gap) for gap in gaps]


def _malformed_row(tag: str, why: str) -> Exception:
    return reject(Code.MALFORMED_CHUNK_ROW, f"malformed {tag} storage row: {why}")


# --- plain JSONL framing (notes/dsh-persistence §3.3, §6.2-§6.3; SPEC-DECISIONS D3) -------------

NEWLINE: Final = 0x0A  # the only line separator; "\r" is JSON whitespace


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
class StoredLog:
    """What a log's bytes hold: the parsed header line, the records after it that are committed,
    the records recovered from a torn zstd frame (kept, but they must be written again), and the
    offset the file must be cut back to so that the next open sees a clean log (``None`` when the
    log is clean already) (SPEC-DECISIONS D3 item 4)."""

    header_line: JsonValue
    records: tuple[JsonValue, ...]
    recovered: tuple[JsonValue, ...] = ()
    truncate_to: int | None = None


def decode_jsonl_log(data: bytes) -> StoredLog:
    """A plain log's first complete line is its header line; every later complete line is one
    record and must parse; the torn tail is dropped and the file is cut back to where it starts.
    A complete line that does not parse is a corrupt log naming its line and byte offset — even
    the last one: a crash only loses a suffix of the bytes, so a line that kept its newline kept
    all of its bytes (SPEC-DECISIONS D3 items 4-5). DSH instead drops such a line silently, with
    every later line, when no ``turn/end`` follows it (notes/dsh-persistence §6.2, §11 item 3)."""
    scan = split_jsonl(data)
    if not scan.lines:
        raise reject(Code.CORRUPT_LOG, "empty or header-less session log")
    header_line = decode_header_text(scan.lines[0].text)
    records = tuple(
        decode_record_text(line.text, f"line {number} (byte {line.offset})")
        for number, line in enumerate(scan.lines[1:], start=1)
    )
    return StoredLog(header_line=header_line, records=records, truncate_to=scan.torn_offset)


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
        raise reject(Code.CORRUPT_LOG, f"corrupt session log: unparsable committed event at {where}") from None


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
        raise reject(Code.CORRUPT_LOG, f"corrupt Zstandard session log: reserved frame-header bit at byte {position}")
    position += 1 + _frame_header_rest(descriptor)
    while True:
        if position + 3 > end:
            return None  # also when the payload of the block before ran past the end
        block_header = int.from_bytes(data[position : position + 3], "little")
        is_last, block_type, size = block_header & 1, (block_header >> 1) & 3, block_header >> 3
        if block_type == _RESERVED_BLOCK_TYPE:
            raise reject(Code.CORRUPT_LOG, f"corrupt Zstandard session log: reserved block type at byte {position}")
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


def decode_zstd_log(frames: Sequence[DecodedFrame], torn: DecodedFrame | None) -> StoredLog:
    """A zstd log's first frame holds exactly the header line; every later complete frame holds
    whole lines, each one record; a complete frame whose plaintext does not end a line, or holds
    a line that does not parse, is a corrupt log naming the frame's byte offset. A torn final
    frame is cut off the file, but the complete lines of its plaintext are recovered and must be
    written again (SPEC-DECISIONS D3 items 4-5; notes/dsh-persistence §4.4, §6.4). ``frames`` are
    the complete non-skippable frames, decompressed and checksum-verified by the caller."""
    if not frames:
        raise reject(Code.CORRUPT_LOG, "empty or header-less Zstandard session log")
    header_scan = split_jsonl(frames[0].plaintext)
    if len(header_scan.lines) != 1 or header_scan.torn_offset is not None:
        raise reject(Code.CORRUPT_LOG, "corrupt Zstandard session log: first frame is not exactly one header line")
    header_line = decode_header_text(header_scan.lines[0].text)
    records: list[JsonValue] = []
    line_number = 0
    for frame in frames[1:]:
        scan = split_jsonl(frame.plaintext)
        if scan.torn_offset is not None:
            raise reject(
                Code.CORRUPT_LOG,
                f"corrupt Zstandard session log: complete frame at byte {frame.offset} contains a torn JSONL record",
            )
        for line in scan.lines:
            line_number += 1
            records.append(decode_record_text(line.text, f"line {line_number} (frame at byte {frame.offset})"))
    if torn is None:
        return StoredLog(header_line=header_line, records=tuple(records))
    recovered: list[JsonValue] = []
    for line in split_jsonl(torn.plaintext).lines:
        line_number += 1
        recovered.append(decode_record_text(line.text, f"line {line_number} (torn frame at byte {torn.offset})"))
    return StoredLog(header_line=header_line, records=tuple(records), recovered=tuple(recovered), truncate_to=torn.offset)
