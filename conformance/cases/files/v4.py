"""v4 logs, whole, torn at several cuts, and damaged in the middle (SPEC-DECISIONS D3 items 4-5)."""

from __future__ import annotations

from collections.abc import Iterator

from conformance.cases.files.logs import (
    CHECKSUM_BYTES,
    PLAIN_RULE,
    SCAN_RULE,
    SEQ_RULE,
    ZSTD_RULE,
    FileSet,
    form,
    line,
    v4_files,
    v4_log,
    v4_writes,
)
from conformance.zstd_frames import BLOCK_HEADER_BYTES, HEADER_BYTES, encode_raw_frame
from spec.codes import Code

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
    yield FileSet(
        "up to three stray bytes after the last frame are a torn tail",
        SCAN_RULE,
        v4_files(data + b"\x28\xb5\x2f", True),
        True,
    )


# --- damaged middles ---------------------------------------------------------------------------------


def flip(data: bytes, offset: int) -> bytes:
    """The byte at ``offset`` complemented, as the ``damage`` op does."""
    return data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1 :]


def corrupt_sets(compressed: bool, rule: str, damaged: dict[str, bytes]) -> Iterator[FileSet]:
    """Each log of ``damaged`` (keyed by what is wrong with it): corrupt, not torn."""
    form = "compressed" if compressed else "plain"
    for what, broken in damaged.items():
        yield FileSet(
            f"a {form} v4 log with {what} is corrupt, not torn",
            rule,
            v4_files(broken, compressed),
            compressed,
            Code.CORRUPT_LOG,
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
