"""v4 logs, whole, torn at several cuts, and damaged in the middle (SPEC-DECISIONS D3 items 4-5)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from conformance import builders as payloads
from conformance.cases.build import OK, SEED_TIME
from conformance.cases.files.logs import (
    CHECKSUM_BYTES,
    PLAIN_RULE,
    SCAN_RULE,
    SEQ_RULE,
    SESSION,
    ZSTD_RULE,
    FileSet,
    Frame,
    form,
    line,
    plain_log,
    raw_frame,
    raw_line,
    raw_log,
    v4_files,
    v4_header,
    v4_log,
    v4_writes,
    zstd_log,
)
from conformance.zstd_frames import (
    BLOCK_HEADER_BYTES,
    COMPRESSED_BLOCK,
    HEADER_BYTES,
    RAW_BLOCK,
    RLE_BLOCK,
    ZSTD_MAGIC,
    FrameHeader,
    encode_frame,
    encode_raw_frame,
    encode_skippable_frame,
)
from spec.codes import Code
from spec.format.json_text import encode_json_text
from spec.format.naming import derive_session_relpath, encode_header_line
from spec.log.header import build_header

# --- v4 logs, whole and torn ---------------------------------------------------------------------


def whole_sets() -> Iterator[FileSet]:
    for compressed in (False, True):
        rule = ZSTD_RULE if compressed else PLAIN_RULE
        yield FileSet(
            f"a {form(compressed)} v4 log of a closed turn reads whole and resumes with only the end-seed marker",
            rule,
            v4_files(v4_log(compressed), compressed),
            compressed,
        )
        open_turn = v4_writes()[:2]
        open_turn[1] = open_turn[1][:3]  # the tool call was announced, its result never written
        yield FileSet(
            f"a {form(compressed)} v4 log that ends inside a turn is resumed with the closers",
            rule,
            v4_files(v4_log(compressed, open_turn), compressed),
            compressed,
        )


def line_end_sets() -> Iterator[FileSet]:
    data = v4_log(False)
    yield FileSet(
        "a plain v4 log whose lines end in a carriage return and a newline reads whole",
        PLAIN_RULE,
        v4_files(data.replace(b"\n", b"\r\n"), False),
        False,
        comment="a line ends only at \\n; the \\r before it is JSON whitespace, so no empty line is left behind",
    )


def plain_torn_sets() -> Iterator[FileSet]:
    data = v4_log(False)
    last = data.rstrip(b"\n").rfind(b"\n") + 1  # where the last line (turn/end) starts
    cuts = {
        "after its first byte": last + 1,
        "halfway": (last + len(data)) // 2,
        "just before its newline": len(data) - 1,
    }
    for where, cut in cuts.items():
        yield FileSet(
            f"a plain v4 log whose last line is cut {where} is read without it and resumed",
            PLAIN_RULE,
            v4_files(data[:cut], False),
            False,
            comment=f"the file is cut at byte {cut} of {len(data)}; the turn/end is lost, so the turn is open",
        )


def zstd_torn_sets() -> Iterator[FileSet]:
    data = v4_log(True)
    writes = v4_writes()
    last = len(v4_log(True, writes[:2]))  # where the last frame starts
    first_block = last + HEADER_BYTES + BLOCK_HEADER_BYTES + len(line(writes[2][0]))
    cuts = {
        "in its magic number": (last + 2, "nothing of it is read"),
        "in its frame header": (last + HEADER_BYTES - 1, "nothing of it is read"),
        "inside its first block": (last + HEADER_BYTES + 5, "nothing of it is read"),
        "after its first block": (first_block, "its first line is kept"),
        "in its checksum": (len(data) - 2, "both its lines are kept, its checksum unchecked"),
        "before its checksum": (len(data) - CHECKSUM_BYTES, "both its lines are kept"),
    }
    for where, (cut, kept) in cuts.items():
        yield FileSet(
            f"a compressed v4 log whose last frame is cut {where} is read and resumed: {kept}",
            ZSTD_RULE,
            v4_files(data[:cut], True),
            True,
            comment=f"the file is cut at byte {cut} of {len(data)}; the last frame starts at byte {last}, "
            "one raw block per line",
        )
    after_block = data[:first_block]  # the last frame, cut after its first block
    following = encode_raw_frame(line(writes[2][1]))  # a whole frame of the last write's second line
    for what, tail, detail in (
        (
            "the magic of a frame that does not complete",
            ZSTD_MAGIC + b"\x00",
            "a frame starting after a torn one that does not reach the end proves nothing: still torn",
        ),
        (
            "a whole frame and then bytes that start no frame",
            following + b"\x00\x01\x02\x03",
            "the run of frames after the torn one stops at bad magic, so it does not reach the end: still torn",
        ),
        (
            "two frame magics, neither starting frames that reach the end",
            ZSTD_MAGIC + b"\x00" + ZSTD_MAGIC + b"\x00\x00",
            "every later magic is tried, and none starts a run of whole frames to the end",
        ),
    ):
        yield FileSet(
            f"a compressed v4 log whose torn last frame is followed by {what} is read and resumed",
            "validate_nothing_complete_after",
            v4_files(after_block + tail, True),
            True,
            comment=detail,
        )
    yield FileSet(
        "up to three stray bytes after the last frame are a torn tail",
        SCAN_RULE,
        v4_files(data + b"\x28\xb5\x2f", True),
        True,
    )


# --- the frame forms a reader meets (RFC 8878 §3.1; notes/dsh-persistence §4.3) -----------------

FRAME_RULE = "measure_zstd_frame"


def framed(header: Callable[[int, int], FrameHeader]) -> Frame:
    """Frames of one raw block per line whose header ``header`` picks from the frame's index and
    its content's length."""

    def frame(index: int, texts: Sequence[bytes]) -> bytes:
        content = b"".join(texts)
        ends = [sum(len(text) for text in texts[: count + 1]) for count in range(len(texts))]
        return encode_raw_frame(content, ends, header(index, len(content)))

    return frame


def mixed_blocks(index: int, texts: Sequence[bytes]) -> bytes:
    """A write's frame whose first line holds an RLE block (its first run of one byte), whose
    last line is a compressed block (raw literals, no sequences), and whose blocks end with an
    empty raw one; the header line's frame stays one raw block."""
    if index == 0:
        return raw_frame(index, texts)
    first, *rest = texts
    run = re.search(rb"(.)\1+", first)
    assert run is not None, "every event line has a run of one byte (its time's zeros)"
    blocks = [
        (RAW_BLOCK, first[: run.start()]),
        (RLE_BLOCK, run.group()),
        (RAW_BLOCK, first[run.end() :]),
        *((RAW_BLOCK, text) for text in rest[:-1]),
        *((COMPRESSED_BLOCK, text) for text in rest[-1:]),
        (RAW_BLOCK, b""),
    ]
    return encode_frame(blocks)


def frame_form_sets() -> Iterator[FileSet]:
    """Every frame header and block form zstd allows reads whole: the scan measures each frame
    from its header (notes/dsh-persistence §4.3), whatever its writer chose."""
    forms: dict[str, Frame] = {
        "without content checksums": framed(lambda _, __: FrameHeader(checksum=False)),
        "with a window descriptor and no content size": framed(
            lambda _, __: FrameHeader(window=True, size_bytes=0)
        ),
        "with a window descriptor and an eight-byte content size": framed(
            lambda _, __: FrameHeader(window=True, size_bytes=8)
        ),
        "with one-byte content sizes below 256 bytes and two-byte ones above": framed(
            lambda _, size: FrameHeader(size_bytes=1 if size < 256 else 2)
        ),
        "with zero dictionary ids of one, two and four bytes": framed(
            lambda index, _: FrameHeader(dictionary_bytes=(1, 2, 4)[index % 3])
        ),
        "with RLE, compressed and empty blocks": mixed_blocks,
        "with a window descriptor, a one-byte zero dictionary id and no checksum": framed(
            lambda _, __: FrameHeader(window=True, size_bytes=0, dictionary_bytes=1, checksum=False)
        ),
        "with a window descriptor, an eight-byte content size and a one-byte zero dictionary id": framed(
            lambda _, __: FrameHeader(window=True, size_bytes=8, dictionary_bytes=1)
        ),
        "without checksums whose last block is empty": lambda _, texts: encode_frame(
            [*((RAW_BLOCK, text) for text in texts), (RAW_BLOCK, b"")], FrameHeader(checksum=False)
        ),
    }
    for what, frame in forms.items():
        yield FileSet(
            f"a compressed v4 log of frames {what} reads whole",
            FRAME_RULE,
            v4_files(zstd_log(encode_header_line(v4_header()), v4_writes(), frame), True),
            True,
        )
    header_line = encode_header_line(v4_header())
    frames = [raw_frame(0, [line(header_line)])]
    frames += [
        raw_frame(index, [line(record) for record in batch]) for index, batch in enumerate(v4_writes(), 1)
    ]
    yield FileSet(
        "skippable frames before the header frame, between frames and after the last one are skipped",
        FRAME_RULE,
        v4_files(
            encode_skippable_frame(b"first")
            + frames[0]
            + encode_skippable_frame(b"")
            + frames[1]
            + encode_skippable_frame(b"between", magic=15)
            + b"".join(frames[2:])
            + encode_skippable_frame(b"after"),
            True,
        ),
        True,
        why="RFC 8878 §3.1.2: a skippable frame is its magic (0x184D2A50 to 0x184D2A5F), a 4-byte size and "
        "that many bytes, and readers skip it; DSH refuses one, this project's reader skips it",
        comment="the skippable frames use the first and the last of the 16 magics; one holds nothing",
    )
    for name, payload in (
        ("a skippable frame between two frames of events, after the header frame, is skipped", b"between"),
        ("a skippable frame of eight bytes between two frames of events is skipped", b"8 bytes!"),
    ):
        yield FileSet(
            name,
            FRAME_RULE,
            v4_files(b"".join(frames[:2]) + encode_skippable_frame(payload) + b"".join(frames[2:]), True),
            True,
            comment="no skippable frame comes before the header frame: a reader that stops at the first "
            "skippable frame after it would show the first write's events alone, whose seqs still run 0, 1",
        )
    data = v4_log(True)
    skippable = encode_skippable_frame(b"after")
    for where, cut in {"in its size": 6, "in its content": len(skippable) - 2}.items():
        yield FileSet(
            f"a skippable frame cut {where} after the last frame is a torn tail",
            FRAME_RULE,
            v4_files(data + skippable[:cut], True),
            True,
        )
    yield FileSet(
        "the magic number alone after the last frame is a torn tail",
        FRAME_RULE,
        v4_files(data + ZSTD_MAGIC, True),
        True,
    )
    writes = v4_writes()
    base = len(v4_log(True, writes[:2]))  # where the last write's frame starts
    descriptor = base + 4
    first_block = base + HEADER_BYTES
    refused = {
        "a last frame cut short after a reserved descriptor bit (bit 3)": data[:descriptor]
        + bytes([data[descriptor] | 0x08])
        + data[descriptor + 1 : descriptor + 6],
        "a last frame cut short after the unused descriptor bit (bit 4)": data[:descriptor]
        + bytes([data[descriptor] | 0x10])
        + data[descriptor + 1 : descriptor + 6],
        "a last frame cut short after a block of the reserved type": data[:first_block]
        + bytes([data[first_block] | 0b110])
        + data[first_block + 1 : first_block + 10],
    }
    yield from corrupt_sets(
        True,
        FRAME_RULE,
        refused,
        why="a frame is refused at the first header field a reader cannot accept, before it asks whether "
        "the data holds the rest of the frame (notes/dsh-persistence §4.3)",
    )
    yield FileSet(
        "four bytes after the last frame that are the zstd magic with its last byte raised are bad magic",
        SCAN_RULE,
        v4_files(data + ZSTD_MAGIC[:3] + b"\xfe", True),
        True,
        Code.CORRUPT_LOG,
    )
    second = len(v4_log(True, writes[:1]))
    block = second + HEADER_BYTES
    overlong = (
        data[:block]
        + (int.from_bytes(data[block : block + 3], "little") | 0xFFFF << 8).to_bytes(3, "little")
        + data[block + 3 :]
    )
    yield FileSet(
        "a compressed v4 log whose middle frame's block runs past the end of the data is corrupt, not torn",
        "validate_nothing_complete_after",
        v4_files(overlong, True),
        True,
        Code.CORRUPT_LOG,
        comment="the second write's frame says its first block holds about 2 MiB; the last write's frame still "
        "follows it whole",
    )


# --- damaged middles ---------------------------------------------------------------------------------


def flip(data: bytes, offset: int) -> bytes:
    """The byte at ``offset`` complemented, as the ``damage`` op does."""
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


def corrupt_sets(
    compressed: bool, rule: str, damaged: dict[str, bytes], why: str | None = None
) -> Iterator[FileSet]:
    """Each log of ``damaged`` (keyed by what is wrong with it): corrupt, not torn."""
    form = "compressed" if compressed else "plain"
    for what, broken in damaged.items():
        yield FileSet(
            f"a {form} v4 log with {what} is corrupt, not torn",
            rule,
            v4_files(broken, compressed),
            compressed,
            Code.CORRUPT_LOG,
            why=why,
        )


def plain_damaged_sets() -> Iterator[FileSet]:
    data = v4_log(False)
    header_end = data.index(b"\n") + 1
    second = data.index(b"\n", header_end) + 1  # the second event line starts here
    middle = data.index(b"hello")
    end = data.index(b"\n", second)  # where the second event line ends
    damaged = {
        "a complemented byte in a middle line": flip(data, middle),
        "invalid UTF-8 in a middle line": data[:middle] + b"\xff" + data[middle + 1 :],
        "an overlong UTF-8 sequence in a middle line": data[:middle] + b"\xc0\xaf" + data[middle + 1 :],
        "a middle line in UTF-16": data[:second] + data[second:end].decode().encode("utf-16") + data[end:],
        "an empty line in the middle": data[:second] + b"\n" + data[second:],
        "a middle line that lost its closing brace": data[: second - 2] + data[second - 1 :],
    }
    yield from corrupt_sets(False, PLAIN_RULE, damaged)
    records = [record for batch in v4_writes() for record in batch]
    gap = [records[:3], records[4:]]
    yield FileSet(
        "a plain v4 log with a seq gap is corrupt",
        SEQ_RULE,
        v4_files(v4_log(False, gap), False),
        False,
        Code.CORRUPT_LOG,
        why="a stored log's events sit at their own seqs, 0, 1, 2, and a gap between complete lines is damage",
        comment="the event at seq 3 is missing; every line is complete",
    )


def refused_message_sets() -> Iterator[FileSet]:
    """A v4 log's events are taken as they are, but a message event's message must be well formed,
    as a restore requires (notes/dsh-persistence §3.6): a stored message the rules refuse refuses
    the log, with the message rule's code."""
    for compressed in (False, True):
        writes = v4_writes()
        message = writes[0][1]
        assert isinstance(message, dict) and isinstance(message["data"], dict)
        writes[0][1] = {**message, "data": {**message["data"], "role": "system"}}
        yield FileSet(
            f"a {form(compressed)} v4 log holding a message the rules refuse is refused with the message's code",
            "validate_stored_events",
            v4_files(v4_log(compressed, writes), compressed),
            compressed,
            Code.MESSAGE_ROLE,
            comment="the user/message at seq 1 says role system; the turn/start before it is not a message",
        )


def zstd_damaged_sets() -> Iterator[FileSet]:
    data = v4_log(True)
    writes = v4_writes()
    second = len(v4_log(True, writes[:1]))  # where the second write's frame starts
    third = len(v4_log(True, writes[:2]))
    header_frame = len(v4_log(True, []))
    cut_line = line(writes[1][0])[:-5]
    damaged = {
        "a wrong checksum on a middle frame": flip(data, third - 1),
        "a complemented byte inside a middle frame's block": flip(data, second + HEADER_BYTES + 8),
        "bad magic where its second frame should start": flip(data, header_frame),
        "a wrong checksum on its last complete frame": flip(data, len(data) - 1),
        "a middle frame that ends inside a line": data[:header_frame]
        + encode_raw_frame(cut_line)
        + data[header_frame:],
    }
    yield from corrupt_sets(True, ZSTD_RULE, damaged)
    yield FileSet(
        "four stray bytes after the last frame are bad magic, not a torn tail",
        SCAN_RULE,
        v4_files(data + b"\x28\xb5\x2f\x00", True),
        True,
        Code.CORRUPT_LOG,
    )


# --- where a log lies ------------------------------------------------------------------------------


def layout_sets() -> Iterator[FileSet]:
    data = v4_log(False)
    (path,) = v4_files(data, False)
    yield FileSet(
        "a log under the session directory of another id is refused: its header names its own session",
        "decode_header_line",
        {path.replace("/r/", "/q/"): data},
        False,
        Code.HEADER_ID_MISMATCH,
        session="q",
    )
    loose = dict(build_header(SESSION, {}, SEED_TIME, False))  # no cwd: the _no-cwd directory
    project, session, name = derive_session_relpath(loose, False)
    yield FileSet(
        "a session under the last project directory is found past one that does not hold it",
        "derive_session_relpath",
        {
            path.replace("/r/", "/q/"): v4_log(False).replace(b'"id":"r"', b'"id":"q"'),
            f"{project}/{session}/{name}": plain_log(encode_header_line(loose), v4_writes()),
        },
        False,
        comment=f"{path.split('/')[0]} sorts before {project} and holds session q alone",
    )
    yield FileSet(
        "a session directory under two project directories is corrupt",
        "derive_session_relpath",
        {path: data, path.replace("--workspace-project--", "_no-cwd"): data},
        False,
        Code.CORRUPT_LOG,
        why="a session's log lies under one project directory: the same session directory under two is "
        "a store no reader can trust to hold one log (notes/dsh-persistence §2.5)",
        comment="a create of the id is refused too, as SESSION_ALREADY_EXISTS or CORRUPT_LOG, so the vector "
        "does not ask it",
        taken=False,
    )


# --- JSON text's edges in a stored log (D5, D6) ------------------------------------------------------

TEXT_RULE: Final = "decode_json_text"
NESTED_BOTTOM: Final = '[-0,-0.0,9007199254740993,-9007199254740993,1e-7,-5e-5,1e20,-1e300,"s\\u00e9"]'


def nested_text(depth: int, bottom: str = NESTED_BOTTOM) -> str:
    """Raw JSON text: ``bottom`` inside ``depth`` containers, an object and an array by turns."""
    text = bottom
    for level in range(depth):
        text = f'{{"level":{level},"inner":{text}}}' if level % 2 else f'[{level},{text},"x"]'
    return text


# Raw JSON texts a stored event's data may hold, each read as a JavaScript peer reads it (D5): the
# spec's reader gives every value; a reader with a faster parser must give the same ones.
STORED_TEXTS: Final[dict[str, tuple[str, ...]]] = {
    "integers at the safe bound and past it read as JavaScript reads them": (
        '{"max":9007199254740991,"min":-9007199254740991,"pastMax":9007199254740992,'
        '"pastMin":-9007199254740992,"odd":9007199254740993,"oddNeg":-9007199254740993}',
        "[9007199254740993,-9007199254740993,9007199254740991,-9007199254740991,0,-1]",
        '{"u64":18446744073709551615,"past64":18446744073709551616,"i64":-9223372036854775809,'
        '"digits":123456789012345678901234567890,"list":[18446744073709551617,-18446744073709551617]}',
        "9007199254740993",
    ),
    "zeros and numbers below the smallest double read as 0": (
        '{"negZero":-0,"negZeroFloat":-0.0,"zero":0.0,"under":1e-400,"underNeg":-1e-400}',
        "[-0,-0.0,0.0,-1e-400,1e-400,0e10,-0E-5]",
        '{"zero":-0.0,"one":1.0,"minusOne":-1.0,"half":-0.5,"tiny":1e-7,"safe":9007199254740991}',
        "[-0.0,1.0,-1.0,2.5,-1e-7,9007199254740993,0]",
        "-0.0",
    ),
    "fractions below 1e-4 and around it read as written": (
        '{"tiny":[1e-7,-5e-5,0.0001,-0.0001,9.99e-5,1.5e-10,0.00001234],"one":1e-4,"neg":-0.00009}',
        "[0.1000000000000000055511151231257827,2.5e-323,5e-324,2.2250738585072014e-308]",
        "1e-7",
    ),
    "doubles from 2**64 up to the largest read as written": (
        "[1e20,-1e20,1.5e300,1.7976931348623157e308,-1.7976931348623157e308,18446744073709551616.0,"
        "18446744073709549568,1e19,1.8446744073709552e19,4e18]",
        '{"big":1E+300,"exact":18446744073709551616.5}',
        "1e300",
    ),
    "data nested past 64 levels reads every number at its depth": (
        nested_text(70),
        nested_text(65, '{"a":-0,"b":9007199254740993,"c":1e-9,"d":1e300}'),
    ),
    "data nested 300 levels deep reads and is written back exactly": (nested_text(300),),
    "escapes, astral text and spaces between tokens read as written": (
        '{"escapes":"\\u0000\\u001f\\"\\\\\\/\\b\\f\\n\\r\\t","latin":"\\u00e9 \u00e9",'
        '"astral":"\\ud83d\\ude00 \U0001f600","high":"\\u00ff\\uffff"}',
        ' \t{ "spaced" : [ 1 , 2.5 , true , null ] ,\r "empty":{ },"list":[ ] } ',
        '{"k":1,"k":2,"other":{"k":[1],"k":{"deep":-0}}}',
    ),
}

# Stored lines that no JavaScript peer reads as JSON, or reads as a value outside the domain (D5).
DAMAGED_TEXTS: Final[dict[str, str]] = {
    "a number past the largest double": "[1e400]",
    "a negative number past the largest double": '{"n":-1.8e308}',
    "an integer literal of 400 digits": "1" + "0" * 400,
    "a number past the largest double nested 70 levels deep": nested_text(70, "[1e400]"),
    "NaN": "[NaN]",
    "Infinity": '{"n":-Infinity}',
    "a raw control character in a string": '"a\u0001b"'.replace("\\u0001", "\x01"),
    "a digit outside ASCII": "[\u0661]",
    "a leading zero": "[01]",
    "a lone minus sign": "[-]",
    "a trailing comma": "[1,]",
    "a single-quoted string": "['a']",
}


def stored_text_sets() -> Iterator[FileSet]:
    """A v4 log whose events hold each of :data:`STORED_TEXTS` (read, resumed, its state shown from
    the lines the resumed session keeps, closed and read again), and one that holds each of
    :data:`DAMAGED_TEXTS` in a middle line (corrupt)."""
    header = encode_header_line(v4_header())
    for what, texts in STORED_TEXTS.items():
        lines = [raw_line(seq, text) for seq, text in enumerate(texts)]
        for compressed in (False, True):
            yield FileSet(
                f"a {form(compressed)} v4 log whose data holds {what}",
                TEXT_RULE,
                v4_files(raw_log(header, lines, compressed), compressed),
                compressed,
                why=TEXT_RULE_WHY,
                shown=True,
            )
    # seqs are refused by read and resume alike; an envelope by resume only (read answers it)
    for forms, rule, read in (
        (seq_forms(), SEQ_RULE, False),
        (envelope_forms(), ENVELOPE_RULE, True),
        (legacy_looking_forms(), STORED_LOG_RULE, False),
    ):
        for what, lines, intent in forms:
            yield FileSet(
                f"a plain v4 log {what}",
                rule,
                v4_files(raw_log(header, lines, False), False),
                False,
                intent,
                shown=intent == OK,
                read=read,
            )
    yield FileSet(
        "a compressed v4 log whose event is one raw block of more than 8 KiB reads whole",
        FRAME_RULE,
        v4_files(raw_log(header, [raw_line(0, '"' + "x" * 9_000 + '"')], True), True),
        True,
        comment="a block's size is the high 21 bits of its 3-byte header: this one needs more than 13",
    )
    wide = [raw_line(seq, f'"{seq:03d}{"x" * 1_200}"') for seq in range(WIDE_FRAME // 1_200 + 1)]
    yield FileSet(
        f"a compressed v4 log whose frame of events holds more than {WIDE_FRAME:,} bytes reads whole",
        FRAME_RULE,
        v4_files(raw_log(header, wide, True), True),
        True,
        comment=f"{len(wide)} lines of about 1,250 bytes in one frame of raw blocks: a reader that inflates "
        "a frame 64 KiB of it at a time meets a line cut between two pieces",
    )
    for what, text in DAMAGED_TEXTS.items():
        lines = [raw_line(0, "{}"), raw_line(1, text), raw_line(2, "{}")]
        yield FileSet(
            f"a plain v4 log whose middle line holds {what} is corrupt",
            TEXT_RULE,
            v4_files(raw_log(header, lines, False), False),
            False,
            Code.CORRUPT_LOG,
            why=TEXT_RULE_WHY,
        )


TEXT_RULE_WHY: Final = (
    "a stored line is read as a JavaScript peer reads it, or refused: every number a finite double, "
    "every string the UTF-16 code units its escapes name (SPEC-DECISIONS D5)"
)


LONG_LOG: Final = 1_100  # events: past the 1,024 lines a reader may decode at a time
WIDE_FRAME: Final = 70_000  # bytes: a frame past 64 KiB, which a reader may inflate a piece at a time


ENVELOPE_RULE: Final = "validate_seed_envelope"
STORED_LOG_RULE: Final = "decode_stored_log"


def legacy_looking_forms() -> Iterator[tuple[str, list[bytes], str]]:
    """v4 logs holding events in the forms DSH's v0 logs wrote, which the legacy conversions
    rewrite (notes/dsh-persistence §3.6: a ``turn/start`` trigger dropped, an ``aborted`` end
    given the cause ``legacy``, a ``disposed`` end made ``aborted``): a v4 log's records are taken
    as they are (D1), so each reads as stored; a reader that sent a v4 log down the v0 path would
    show them converted."""
    start = raw_line(0, '{"turn":1,"trigger":{"kind":"user"}}', "turn/start")
    yield (
        "whose turn/start has a trigger and whose turn/end was aborted without a cause reads them as stored",
        [start, raw_line(1, '{"turn":1,"reason":{"kind":"aborted"}}', "turn/end")],
        OK,
    )
    yield (
        "whose turn/end reason is disposed reads it as stored",
        [
            raw_line(0, '{"turn":1}', "turn/start"),
            raw_line(1, '{"turn":1,"reason":{"kind":"disposed"}}', "turn/end"),
        ],
        OK,
    )


def envelope_forms() -> Iterator[tuple[str, list[bytes], str]]:
    """Logs whose stored events' envelopes a resume judges by the per-event rules of a seed
    (notes/dsh-session-core §1.3): a time that is not a safe integer, ``ignorable`` other than
    ``true``, a log-only event with a ``surfaceOp`` or a key no envelope has. A resume folds most
    stored events in runs that skip those rules for what they already know (issue 24); each of
    these must end the run and be judged, never taken as it is."""
    first = raw_line(0, "{}")

    def timed(time: str) -> bytes:
        return raw_line(1, "{}").replace(f'"time":{SEED_TIME}'.encode(), f'"time":{time}'.encode())

    yield "whose time is a fraction is refused", [first, timed("1.5")], Code.SEED_ENVELOPE_INVALID
    yield (
        "whose time is past the largest safe integer is refused",
        [first, timed("9007199254740992")],
        Code.SEED_ENVELOPE_INVALID,
    )
    yield (
        "whose time is below the smallest safe integer is refused",
        [first, timed("-9007199254740992")],
        Code.SEED_ENVELOPE_INVALID,
    )
    yield "whose time is the smallest safe integer reads", [first, timed("-9007199254740991")], OK
    yield "whose time is written 2.0 reads it as 2", [first, timed("2.0")], OK
    yield (
        "whose event is ignorable false is refused",
        [first, raw_line(1, "{}", ignorable=False)],
        Code.SEED_ENVELOPE_INVALID,
    )
    yield "whose event is ignorable true reads", [first, raw_line(1, "{}", ignorable=True)], OK
    for what, flag in (("1", 1), ('"yes"', "yes")):
        yield (
            f"whose event is ignorable {what} is refused",
            [first, raw_line(1, "{}", ignorable=flag)],
            Code.SEED_ENVELOPE_INVALID,
        )
    message = encode_json_text(payloads.user_message("u1"))
    for what, kind in (("an array", b"[]"), ("an object", b"{}")):
        yield (
            f"whose event's type is {what} is refused",
            [first, b'{"type":' + kind + b',"seq":1,"time":0,"data":{}}\n'],
            Code.SEED_ENVELOPE_INVALID,
        )
    header_data = encode_json_text({"header": {"config": {"provider": "p", "model": "m"}}, "reason": "user"})
    yield (
        "whose request header is followed by appended messages puts each on the surface once",
        [
            first,
            raw_line(1, header_data, "request/header"),
            *(
                raw_line(
                    seq,
                    encode_json_text(payloads.user_message(f"u{seq}")),
                    "user/message",
                    surfaceOp="append",
                )
                for seq in (2, 3, 4)
            ),
        ],
        OK,
    )
    yield (
        "whose appended message cites its own seq is refused",
        [first, raw_line(1, message, "user/message", surfaceOp="append", sourceEventSeqs=[1])],
        Code.PROVENANCE_NOT_EARLIER,
    )
    yield (
        "whose event has no data is refused",
        [first, b'{"type":"custom/value","seq":1,"time":0}\n'],
        Code.SEED_ENVELOPE_INVALID,
    )
    yield (
        "whose event's type is not a string is refused",
        [first, b'{"type":5,"seq":1,"time":0,"data":{}}\n'],
        Code.SEED_ENVELOPE_INVALID,
    )
    yield (
        "whose request header has no reason is refused",
        [first, raw_line(1, "{}", "request/header")],
        Code.REQUEST_HEADER_PROVIDER_MODEL,
    )
    yield (
        "whose log-only event appends to the surface is refused",
        [first, raw_line(1, "{}", surfaceOp="append")],
        Code.SURFACE_OP_ON_LOG_ONLY,
    )
    yield (
        "whose log-only event has a key no envelope has is refused",
        [first, raw_line(1, "{}", extra=1)],
        Code.SEED_ENVELOPE_INVALID,
    )


def seq_forms() -> Iterator[tuple[str, list[bytes], str]]:
    """Logs whose stored seqs are written otherwise than 0, 1, 2 as integers: what each line's
    ``seq`` reads as decides (D5: ``1.0`` is the number 1), and a log as long as
    :data:`LONG_LOG` reads whole; one that already ends with the end-seed marker gets no other at resume,
    and a fork of it at its end keeps every stored line (no marker is added to the child's seed)."""
    first = raw_line(0, "{}")
    yield "whose seq repeats is corrupt", [first, raw_line(1, "{}"), raw_line(1, "{}")], Code.CORRUPT_LOG
    yield "whose seq goes back is corrupt", [first, raw_line(1, "{}"), raw_line(0, "{}")], Code.CORRUPT_LOG
    yield "whose seqs start at 1 is corrupt", [raw_line(1, "{}"), raw_line(2, "{}")], Code.CORRUPT_LOG
    yield "whose seqs start below 0 is corrupt", [raw_line(seq, "{}") for seq in (-1, 0, 1)], Code.CORRUPT_LOG
    yield "whose first record is an array is corrupt", [b'[{"seq":0}]\n', raw_line(1, "{}")], Code.CORRUPT_LOG
    written = raw_line(1, "{}").replace(b'"seq":1', b'"seq":1.0')
    yield "whose seq is written 1.0 reads it as 1", [first, written, raw_line(2, "{}")], OK
    written = raw_line(1, "{}").replace(b'"seq":1', b'"seq":"1"')
    yield "whose seq is a string is corrupt", [first, written], Code.CORRUPT_LOG
    yield "holding a record that is an array is corrupt", [first, b'[1,{"seq":1}]\n'], Code.CORRUPT_LOG
    yield "holding a record that is a number is corrupt", [first, b"1\n"], Code.CORRUPT_LOG
    yield "holding a record without a seq is corrupt", [first, b'{"type":"custom/value"}\n'], Code.CORRUPT_LOG
    ended = [first, raw_line(1, "{}", "session/end-seed")]
    yield "that ends with the end-seed marker is resumed without another", ended, OK
    yield (
        f"of {LONG_LOG} events reads whole",
        [raw_line(seq, str(seq % 7)) for seq in range(LONG_LOG)],
        OK,
    )
