"""Line and frame framing over bytes: split_jsonl, decode_jsonl_log, scan_zstd_frames and
decode_zstd_log (notes/dsh-persistence §3.3, §4, §6; its jsonl.spec.ts, zstd.spec.ts and
zstd.compat.spec.ts checklists §9.6-§9.8; SPEC-DECISIONS D3 items 4-5).

Real frames come from the ``zstandard`` package (decompressed by the reference's adapter); the spec
itself only reads their structure."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from refusals import refusal

from conformance.zstd_frames import inflate_zstd
from spec.codes import Code, SpecError
from spec.format.framing import (
    DecodedFrame,
    FramedLog,
    JsonlLine,
    ZstdFrame,
    decode_jsonl_log,
    decode_zstd_frames,
    decode_zstd_log,
    encode_lines,
    scan_zstd_frames,
    split_jsonl,
)
from spec.log.json import JsonValue

MAGIC = bytes.fromhex("28b52ffd")
HEADER = b'{"type":"session","version":4,"id":"s1","createdAt":1000,"delegationDepth":0,"isSeeded":false}'
TURN_START = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'
STEP_START = b'{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}'


def frame(content: bytes, write_content_size: bool = True) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True, write_content_size=write_content_size)
    return compressor.compress(content)


def streamed_frame(content: bytes) -> bytes:
    """A frame with no content size in its header (a window descriptor instead)."""
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    return compressor.compress(content) + compressor.flush()


def noise(size: int) -> bytes:
    """Hard-to-compress printable bytes (DSH's deterministicNoise LCG), so blocks stay raw."""
    state, out = 0x12345678, bytearray()
    for _ in range(size):
        state = (state * 1664525 + 1013904223) % 2**32
        out.append(33 + state % 90)
    return bytes(out)


def decompress(data: bytes) -> bytes:
    return zstandard.ZstdDecompressor().decompressobj().decompress(data)


def boundaries(frames: tuple[ZstdFrame, ...]) -> list[tuple[int, int]]:
    return [(f.offset, f.length) for f in frames]


CONTENTS = {
    "empty": b"",
    "one byte": b"x",
    "a header line": HEADER + b"\n",
    "rle-friendly (300 KB of one byte)": b"a" * 300_000,
    "noise (200 KB, raw blocks)": noise(200_000),
    "compressible lines (> 128 KiB)": (TURN_START + b"\n") * 4_000,
}


# --- encode_lines: the canonical bytes -------------------------------------------------------


def test_records_are_compact_utf8_json_each_ended_by_a_lone_newline_keys_in_their_order() -> None:
    records: list[JsonValue] = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"z": "\u20ac\U0001f600 a\nb\r", "a": ["\ud800", 1.5]},
    ]
    assert encode_lines(records) == TURN_START + b"\n" + (
        '{"z":"\u20ac\U0001f600 a\\nb\\r","a":["\\ud800",1.5]}\n'.encode()
    )
    assert encode_lines([]) == b""


def test_encoded_lines_split_back_into_one_line_per_record() -> None:
    records: list[JsonValue] = [{"text": "a\nb\r\n\u2028"}, "x", 0]
    data = encode_lines(records)
    assert b"\r" not in data and data.count(b"\n") == len(records)
    assert len(split_jsonl(data).lines) == len(records) and split_jsonl(data).torn_offset is None


# --- split_jsonl -----------------------------------------------------------------------------


def test_empty_data_has_no_lines_and_no_torn_tail() -> None:
    assert split_jsonl(b"") == split_jsonl(b"")
    assert split_jsonl(b"").lines == () and split_jsonl(b"").torn_offset is None


def test_complete_lines_carry_their_offsets_and_bytes_without_the_newline() -> None:
    scan = split_jsonl(b"ab\n\ncd\n")
    assert scan.lines == (JsonlLine(0, b"ab"), JsonlLine(3, b""), JsonlLine(4, b"cd"))
    assert [line.end for line in scan.lines] == [3, 4, 7]
    assert scan.torn_offset is None


def test_a_last_line_without_its_newline_is_a_torn_tail_not_a_line() -> None:
    scan = split_jsonl(b'{"a":1}\n{"b"')
    assert scan.lines == (JsonlLine(0, b'{"a":1}'),)
    assert scan.torn_offset == 8


def test_a_carriage_return_stays_part_of_the_line() -> None:
    assert split_jsonl(b"x\r\n").lines == (JsonlLine(0, b"x\r"),)


@given(st.binary(max_size=200))
def test_the_lines_and_the_torn_tail_rebuild_the_data(data: bytes) -> None:
    scan = split_jsonl(data)
    rebuilt = b"".join(line.text + b"\n" for line in scan.lines)
    assert all(b"\n" not in line.text for line in scan.lines)
    assert all(data[line.offset : line.end] == line.text + b"\n" for line in scan.lines)
    if scan.torn_offset is None:
        assert rebuilt == data
    else:
        assert scan.torn_offset == len(rebuilt) < len(data) and b"\n" not in data[scan.torn_offset :]


# --- decode_jsonl_log ------------------------------------------------------------------------


def fields(records: Sequence[JsonValue], key: str) -> list[JsonValue]:
    """The ``key`` of each record, all of them objects."""
    assert all(isinstance(record, dict) for record in records)
    return [record[key] for record in records if isinstance(record, dict)]


def test_a_clean_plain_log_gives_its_header_line_and_records() -> None:
    log = decode_jsonl_log(HEADER + b"\n" + TURN_START + b"\n" + STEP_START + b"\n")
    assert isinstance(log.header_line, dict) and log.header_line["id"] == "s1"
    assert fields(log.records, "seq") == [0, 1]
    assert log.truncate_to is None and log.recovered == ()


def test_a_torn_last_line_is_dropped_and_the_file_cut_back_to_its_start() -> None:
    committed = HEADER + b"\n" + TURN_START + b"\n"
    log = decode_jsonl_log(committed + b'{"type":"assistant/chunk","seq":8,"ti')
    assert len(log.records) == 1
    assert log.truncate_to == len(committed)


def test_a_torn_tail_of_one_stray_byte_is_cut_too() -> None:
    committed = HEADER + b"\n"
    assert decode_jsonl_log(committed + b"x").truncate_to == len(committed)


def test_a_bad_line_followed_by_more_data_is_a_corrupt_log_naming_its_file_line_and_byte() -> None:
    data = HEADER + b"\n" + TURN_START + b"\n" + b"{not json\n" + STEP_START + b"\n"
    caught = refusal(lambda: decode_jsonl_log(data))
    assert caught.code is Code.CORRUPT_LOG
    offset = len(HEADER) + len(TURN_START) + 2
    assert data.split(b"\n")[2] == b"{not json" and data[offset:].startswith(b"{not json")
    # the header is line 1, so the third line of the file is line 3 (sed -n 3p shows it)
    assert caught.message == f"corrupt session log: unparsable committed event at line 3 (byte {offset})"


def test_a_bad_last_complete_line_is_a_corrupt_log_because_a_crash_cannot_produce_it() -> None:
    assert (
        refusal(lambda: decode_jsonl_log(HEADER + b"\n" + TURN_START + b"\n" + b'{"partial\n')).code
        is Code.CORRUPT_LOG
    )


def test_an_empty_line_is_an_unparsable_record() -> None:
    caught = refusal(lambda: decode_jsonl_log(HEADER + b"\n\n" + TURN_START + b"\n"))
    assert caught.code is Code.CORRUPT_LOG
    assert f"line 2 (byte {len(HEADER) + 1})" in caught.message


def test_invalid_utf8_in_a_complete_line_is_a_corrupt_log() -> None:
    assert refusal(lambda: decode_jsonl_log(HEADER + b'\n{"type":"x\xff"}\n')).code is Code.CORRUPT_LOG


def test_a_record_nested_twenty_thousand_levels_deep_is_read() -> None:
    log = decode_jsonl_log(HEADER + b"\n" + b"[" * 20_000 + b"]" * 20_000 + b"\n")
    assert len(log.records) == 1


def test_utf8_text_in_a_record_is_decoded() -> None:
    log = decode_jsonl_log(HEADER + b"\n" + '{"text":"开发 😀"}\n'.encode())
    assert log.records == ({"text": "开发 😀"},)


@pytest.mark.parametrize("data", [b"", HEADER, b"\x28\xb5"])
def test_a_log_without_a_complete_header_line_is_corrupt(data: bytes) -> None:
    caught = refusal(lambda: decode_jsonl_log(data))
    assert caught.code is Code.CORRUPT_LOG
    assert caught.message == "empty or header-less session log"


def test_a_header_line_that_is_not_json_is_not_a_header() -> None:
    caught = refusal(lambda: decode_jsonl_log(b"{oops\n" + TURN_START + b"\n"))
    assert caught.code is Code.HEADER_LINE_INVALID
    assert caught.message == "corrupt session log: header line is not valid JSON"


def test_a_header_only_log_has_no_records() -> None:
    assert decode_jsonl_log(HEADER + b"\n") == FramedLog(
        header_line=decode_jsonl_log(HEADER + b"\n").header_line, records=()
    )


# --- scan_zstd_frames: boundaries ------------------------------------------------------------


def test_an_empty_buffer_has_no_frames() -> None:
    scan = scan_zstd_frames(b"")
    assert scan.frames == () and scan.torn_offset is None


@pytest.mark.parametrize("name", list(CONTENTS))
def test_one_checksummed_frame_is_found_whole(name: str) -> None:
    data = frame(CONTENTS[name])
    assert data[4] & 0x04
    assert boundaries(scan_zstd_frames(data).frames) == [(0, len(data))]
    assert scan_zstd_frames(data).torn_offset is None


def test_concatenated_frames_of_every_size_are_found_at_exactly_their_boundaries() -> None:
    frames = [frame(content) for content in CONTENTS.values()] + [
        streamed_frame(b"hello " * 1000),
        frame(b"z", write_content_size=False),
    ]
    data = b"".join(frames)
    offsets = [sum(len(f) for f in frames[:i]) for i in range(len(frames))]
    scan = scan_zstd_frames(data)
    assert boundaries(scan.frames) == [(offset, len(f)) for offset, f in zip(offsets, frames)]
    assert scan.torn_offset is None
    assert [decompress(data[f.offset : f.offset + f.length]) for f in scan.frames[: len(CONTENTS)]] == list(
        CONTENTS.values()
    )


def test_the_rle_friendly_frame_really_holds_rle_blocks_and_the_large_ones_several_blocks() -> None:
    # 300,000 bytes exceed the 128 KiB block maximum, so these frames must have several blocks.
    assert len(CONTENTS["rle-friendly (300 KB of one byte)"]) > 128 * 1024
    assert (
        len(frame(CONTENTS["rle-friendly (300 KB of one byte)"])) < 100
    )  # only RLE blocks can be this small
    assert len(frame(CONTENTS["noise (200 KB, raw blocks)"])) > 128 * 1024


@settings(max_examples=25)
@given(
    st.lists(
        st.binary(max_size=3000)
        | st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=3), st.integers(1, 5000)),
        max_size=6,
    )
)
def test_frames_of_any_content_are_found_at_their_boundaries(contents: list[bytes]) -> None:
    frames = [frame(content) for content in contents]
    scan = scan_zstd_frames(b"".join(frames))
    assert [f.length for f in scan.frames] == [len(f) for f in frames]
    assert scan.torn_offset is None


# --- scan_zstd_frames: torn final frames -----------------------------------------------------


def cut_points(length: int) -> list[int]:
    if length <= 4096:
        return list(range(1, length))
    return sorted({*range(1, 200), *range(length - 200, length), *range(1, length, 1009)})


@pytest.mark.parametrize("name", list(CONTENTS))
def test_every_truncation_of_the_last_frame_is_reported_as_torn_at_its_start(name: str) -> None:
    prefix = frame(HEADER + b"\n") + frame(TURN_START + b"\n")
    last = frame(CONTENTS[name])
    for cut in cut_points(len(last)):
        scan = scan_zstd_frames(prefix + last[:cut])
        assert scan.torn_offset == len(prefix), cut
        assert [f.length for f in scan.frames] == [
            len(prefix) - len(frame(TURN_START + b"\n")),
            len(frame(TURN_START + b"\n")),
        ]


def test_every_truncation_of_a_streamed_frame_is_torn() -> None:
    last = streamed_frame(noise(5000))
    assert all(scan_zstd_frames(last[:cut]) == scan_zstd_frames(last[:1]) for cut in range(1, len(last)))
    assert scan_zstd_frames(last[:1]).torn_offset == 0


def test_a_frame_missing_its_last_checksum_byte_is_torn_while_its_blocks_still_decode() -> None:
    content = TURN_START + b"\n"
    data = frame(HEADER + b"\n") + frame(content)
    scan = scan_zstd_frames(data[:-1])
    assert len(scan.frames) == 1 and scan.torn_offset == len(frame(HEADER + b"\n"))
    assert decompress(data[scan.torn_offset : -1]) == content


@pytest.mark.parametrize("tail", [b"\x00", b"\x28\xb5", b"\xff\xff\xff", MAGIC[:3]])
def test_one_to_three_trailing_bytes_are_a_torn_frame_whatever_they_are(tail: bytes) -> None:
    head = frame(HEADER + b"\n")
    scan = scan_zstd_frames(head + tail)
    assert len(scan.frames) == 1 and scan.torn_offset == len(head)


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("magic only", MAGIC),
        ("bare descriptor", MAGIC + b"\x20"),
        ("short window byte", MAGIC + b"\x00"),
        ("short block header", MAGIC + b"\x20\x00" + b"\x01\x00"),
        ("short block header whose two bytes read as the reserved type", MAGIC + b"\x20\x00" + b"\x07\x00"),
        (
            "short payload of a block that is not the last",
            MAGIC + b"\x20\x05" + (5 << 3).to_bytes(3, "little") + b"ab",
        ),
        ("short block payload", MAGIC + b"\x20\x05" + (5 << 3 | 1).to_bytes(3, "little") + b"ab"),
        ("missing rle byte", MAGIC + b"\x20\x05" + (5 << 3 | 2 | 1).to_bytes(3, "little")),
        ("missing checksum", MAGIC + b"\x24\x00" + (0 << 3 | 1).to_bytes(3, "little") + b"\x00\x00"),
    ],
)
def test_an_incomplete_structural_frame_is_torn(name: str, data: bytes) -> None:
    assert scan_zstd_frames(data).torn_offset == 0 and scan_zstd_frames(data).frames == ()


# --- scan_zstd_frames: damage that is not a tail ---------------------------------------------


def test_four_trailing_bytes_that_start_no_frame_are_an_invalid_magic() -> None:
    head = frame(HEADER + b"\n")
    caught = refusal(lambda: scan_zstd_frames(head + b"\x00\x00\x00\x00"))
    assert caught.code is Code.CORRUPT_LOG
    assert caught.message == f"corrupt Zstandard session log: invalid frame magic at byte {len(head)}"


@pytest.mark.parametrize("bit", [0x08, 0x10])
def test_a_reserved_or_unused_descriptor_bit_is_refused(bit: int) -> None:
    head = frame(b"x")
    caught = refusal(lambda: scan_zstd_frames(head + MAGIC + bytes([0x20 | bit]) + b"\x00" + b"\x01\x00\x00"))
    assert caught.code is Code.CORRUPT_LOG
    assert (
        caught.message == f"corrupt Zstandard session log: reserved frame-header bit at byte {len(head) + 4}"
    )


def test_the_reserved_block_type_is_refused() -> None:
    caught = refusal(lambda: scan_zstd_frames(MAGIC + b"\x20\x00" + (3 << 1 | 1).to_bytes(3, "little")))
    assert caught.code is Code.CORRUPT_LOG
    assert caught.message == "corrupt Zstandard session log: reserved block type at byte 6"


# --- scan_zstd_frames: every legal header variant -------------------------------------------


def structural_frame(descriptor: int, blocks: list[tuple[int, bytes]]) -> bytes:
    """A frame built by hand: the header fields the descriptor asks for, then the given blocks."""
    single = descriptor & 0x20
    fcs_flag = descriptor >> 6
    header = bytes([descriptor]) + (b"" if single else b"\x00") + b"\x07" * (0, 1, 2, 4)[descriptor & 3]
    header += b"\x00" * ((1 if single else 0) if fcs_flag == 0 else 1 << fcs_flag)
    body = b""
    for index, (block_type, payload) in enumerate(blocks):
        size = payload[0] if block_type == 1 else len(payload)
        body += ((size << 3) | (block_type << 1) | (index == len(blocks) - 1)).to_bytes(3, "little")
        body += payload[1:] if block_type == 1 else payload
    return MAGIC + header + body + (b"\x00" * 4 if descriptor & 0x04 else b"")


@pytest.mark.parametrize("descriptor", [0x00, 0x21, 0x42, 0x83, 0xE3, 0x24, 0x04, 0x62])
def test_every_standard_header_variant_is_measured_exactly(descriptor: int) -> None:
    built = structural_frame(descriptor, [(0, b"raw"), (1, bytes([200, ord("a")])), (2, b"\x00" * 7)])
    scan = scan_zstd_frames(built + built)
    assert boundaries(scan.frames) == [(0, len(built)), (len(built), len(built))]
    for cut in range(1, len(built)):
        assert scan_zstd_frames(built + built[:cut]).torn_offset == len(built)


def test_a_hand_built_rle_frame_is_a_real_zstd_frame() -> None:
    # descriptor 0x20: single segment, 1-byte content size; one last RLE block of 5 x "a".
    built = MAGIC + b"\x20\x05" + (5 << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"a"
    assert decompress(built) == b"aaaaa"
    assert boundaries(scan_zstd_frames(built).frames) == [(0, len(built))]


def test_a_skippable_frame_is_found_and_marked_skippable() -> None:
    skippable = (0x184D2A53).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    data = frame(b"x") + skippable + frame(b"y")
    scan = scan_zstd_frames(data)
    assert [f.skippable for f in scan.frames] == [False, True, False]
    assert scan.frames[1] == ZstdFrame(offset=len(frame(b"x")), length=11, skippable=True)


def test_a_truncated_skippable_frame_is_torn() -> None:
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    for cut in range(1, len(skippable)):
        assert scan_zstd_frames(skippable[:cut]).torn_offset == 0


# --- decode_zstd_log -------------------------------------------------------------------------


def test_a_zstd_log_is_its_header_frame_then_whole_lines_per_frame() -> None:
    frames = [
        DecodedFrame(0, HEADER + b"\n"),
        DecodedFrame(40, TURN_START + b"\n" + STEP_START + b"\n"),
        DecodedFrame(90, b""),
    ]
    log = decode_zstd_log(frames, None)
    assert isinstance(log.header_line, dict) and log.header_line["id"] == "s1"
    assert len(log.records) == 2 and log.recovered == () and log.truncate_to is None


def test_a_zstd_log_without_a_complete_frame_is_header_less() -> None:
    caught = refusal(lambda: decode_zstd_log([], DecodedFrame(0, b"")))
    assert caught.code is Code.CORRUPT_LOG
    assert caught.message == "empty or header-less Zstandard session log"


@pytest.mark.parametrize("plaintext", [b"", HEADER, HEADER + b"\n" + TURN_START + b"\n", HEADER + b"\n{"])
def test_a_first_frame_that_is_not_exactly_one_line_is_corrupt(plaintext: bytes) -> None:
    caught = refusal(lambda: decode_zstd_log([DecodedFrame(0, plaintext)], None))
    assert caught.code is Code.CORRUPT_LOG
    assert caught.message.startswith(
        "corrupt Zstandard session log: first frame is not exactly one header line (a log compressed whole"
    )


def test_a_complete_frame_ending_inside_a_line_is_corrupt_naming_the_frame() -> None:
    caught = refusal(
        lambda: decode_zstd_log(
            [DecodedFrame(0, HEADER + b"\n"), DecodedFrame(57, b'{"type":"turn/start"')], None
        )
    )
    assert caught.code is Code.CORRUPT_LOG
    assert "frame at byte 57" in caught.message


def test_an_unparsable_line_in_a_complete_frame_is_corrupt_even_as_the_last_line() -> None:
    caught = refusal(
        lambda: decode_zstd_log(
            [DecodedFrame(0, HEADER + b"\n"), DecodedFrame(57, TURN_START + b"\n{oops\n")], None
        )
    )
    assert caught.code is Code.CORRUPT_LOG
    offset = len(HEADER) + 1 + len(TURN_START) + 1
    assert caught.message == (
        f"corrupt session log: unparsable committed event at line 3 (byte {offset} of the decompressed text, "
        "zstd frame at byte 57)"
    )


def test_the_complete_lines_of_a_torn_frame_are_recovered_and_its_fragment_dropped() -> None:
    torn = DecodedFrame(120, TURN_START + b"\n" + STEP_START + b"\n" + b'{"type":"assistant/ch')
    log = decode_zstd_log([DecodedFrame(0, HEADER + b"\n")], torn)
    assert log.records == ()
    assert fields(log.recovered, "seq") == [0, 1]
    assert log.truncate_to == 120


def test_a_bad_complete_line_inside_a_torn_frame_is_still_corrupt() -> None:
    torn = DecodedFrame(120, b"{oops\n" + TURN_START + b"\n")
    assert refusal(lambda: decode_zstd_log([DecodedFrame(0, HEADER + b"\n")], torn)).code is Code.CORRUPT_LOG


def test_a_real_log_with_a_torn_final_frame_recovers_its_complete_lines() -> None:
    header, batch = frame(HEADER + b"\n"), frame(TURN_START + b"\n")
    torn_plain = STEP_START + b"\n" + b'{"type":"assistant/chunk","data":"' + noise(300_000) + b'"}\n'
    torn = frame(torn_plain)
    data = header + batch + torn[: len(torn) - 20]
    scan = scan_zstd_frames(data)
    assert scan.torn_offset == len(header) + len(batch)
    complete = [DecodedFrame(f.offset, decompress(data[f.offset : f.offset + f.length])) for f in scan.frames]
    partial = DecodedFrame(scan.torn_offset, decompress(data[scan.torn_offset :]))
    assert partial.plaintext and not partial.plaintext.endswith(b"\n")
    log = decode_zstd_log(complete, partial)
    assert fields(log.records, "type") == ["turn/start"]
    assert fields(log.recovered, "type") == ["step/start"]
    assert log.truncate_to == len(header) + len(batch)


def test_a_frame_that_reaches_past_the_end_but_is_followed_by_complete_frames_is_damaged_not_torn() -> None:
    import zstandard

    from spec.codes import Code

    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    frames = [compressor.compress(b'{"n":%d}\n' % n * 50) for n in range(3)]
    data = bytearray(b"".join(frames))
    data[len(frames[0]) + 9] |= (
        0x80  # the high byte of frame 1's first block header (descriptor 0x64): a huge size
    )
    raised = refusal(lambda: scan_zstd_frames(bytes(data)))
    assert raised.code == Code.CORRUPT_LOG
    assert f"frame at byte {len(frames[0])} is damaged" in raised.message


def test_every_cut_of_a_last_frame_is_still_a_torn_tail_when_nothing_complete_follows() -> None:
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    frames = [compressor.compress(b'{"n":%d}\n' % n * 50) for n in range(3)]
    whole = b"".join(frames)
    last_start = len(whole) - len(frames[-1])
    for cut in range(last_start + 1, len(whole)):
        assert scan_zstd_frames(whole[:cut]).torn_offset == last_start


# --- decode_zstd_frames ------------------------------------------------------------------------


def test_the_frames_are_inflated_the_skippable_left_out_and_a_torn_one_gives_its_whole_blocks() -> None:
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"abc"
    first, second = frame(HEADER + b"\n"), frame(TURN_START + b"\n")
    torn = frame(STEP_START + b"\n")[:-1]  # the checksum's last byte lost: the block is whole
    data = first + skippable + second + torn
    frames, torn_frame = decode_zstd_frames(data, inflate_zstd)
    assert frames == [
        DecodedFrame(0, HEADER + b"\n"),
        DecodedFrame(len(first) + len(skippable), TURN_START + b"\n"),
    ]
    assert torn_frame == DecodedFrame(len(data) - len(torn), STEP_START + b"\n")


def test_a_complete_frame_that_does_not_inflate_whole_is_corrupt_at_its_offset() -> None:
    first, second = frame(HEADER + b"\n"), bytearray(frame(TURN_START + b"\n"))
    second[-1] ^= 0xFF  # its checksum
    raised = refusal(lambda: decode_zstd_frames(first + bytes(second), inflate_zstd))
    assert raised.code == Code.CORRUPT_LOG
    assert f"frame at byte {len(first)} failed validation" in raised.message
    with pytest.raises(SpecError, match=r"frame at byte 0 failed validation \(frame did not end"):
        decode_zstd_frames(first, lambda data: (inflate_zstd(data)[0], False))


def test_a_torn_frame_that_does_not_decode_gives_nothing() -> None:
    first, torn = frame(HEADER + b"\n"), frame(TURN_START + b"\n")[:-1]

    def refuse_torn(data: bytes) -> tuple[bytes, bool]:
        if data == torn:
            raise ValueError("not a frame")
        return inflate_zstd(data)

    assert decode_zstd_frames(first + torn, refuse_torn)[1] == DecodedFrame(len(first), b"")
