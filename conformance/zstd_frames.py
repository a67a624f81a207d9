"""Standard zstd frames built byte by byte, so that the suite's reference files are determined by
this code alone, whatever zstd library is installed (RFC 8878).

A frame here holds its content in *raw* blocks (stored, not compressed): every zstd decoder reads
them, ``zstd -dc`` included, and the bytes never change with a library's version. Each frame
carries its content size and its content checksum (the low 32 bits of XXH64, seed 0), as DSH's
frames do (notes/dsh-persistence §4.2). :func:`xxh64` is the hash, written out from its
specification. :func:`inflate_zstd` reads a frame back with the zstd library, for the suite and
the reference alike (spec/ imports no zstd).

:func:`encode_frame` writes the other forms a reader meets, for the files vectors that pin how a
frame is measured: a window descriptor, content sizes of 0-8 bytes, a zero dictionary id, no
checksum, RLE blocks and compressed blocks (raw literals, no sequences); and
:func:`encode_skippable_frame` a skippable frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import zstandard

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
MAX_BLOCK: Final = 128 * 1024  # bytes: Block_Maximum_Size
RAW_BLOCK: Final = 0
RLE_BLOCK: Final = 1
COMPRESSED_BLOCK: Final = 2
SKIPPABLE_MAGIC: Final = b"\x50\x2a\x4d\x18"  # 0x184D2A50, the first of the 16 skippable magics

_MASK: Final = (1 << 64) - 1
_P1: Final = 0x9E3779B185EBCA87
_P2: Final = 0xC2B2AE3D27D4EB4F
_P3: Final = 0x165667B19E3779F9
_P4: Final = 0x85EBCA77C2B2AE63
_P5: Final = 0x27D4EB2F165667C5


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _round(accumulator: int, lane: int) -> int:
    accumulator = (accumulator + lane * _P2) & _MASK
    return (_rotl(accumulator, 31) * _P1) & _MASK


def _merge(accumulator: int, value: int) -> int:
    accumulator ^= _round(0, value)
    return (accumulator * _P1 + _P4) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (the xxHash specification, 64-bit variant)."""
    size, at = len(data), 0
    if size >= 32:
        lanes = [(seed + _P1 + _P2) & _MASK, (seed + _P2) & _MASK, seed & _MASK, (seed - _P1) & _MASK]
        while at + 32 <= size:
            for index in range(4):
                lane = int.from_bytes(data[at + 8 * index : at + 8 * index + 8], "little")
                lanes[index] = _round(lanes[index], lane)
            at += 32
        digest = (_rotl(lanes[0], 1) + _rotl(lanes[1], 7) + _rotl(lanes[2], 12) + _rotl(lanes[3], 18)) & _MASK
        for lane in lanes:
            digest = _merge(digest, lane)
    else:
        digest = (seed + _P5) & _MASK
    digest = (digest + size) & _MASK
    while at + 8 <= size:
        digest ^= _round(0, int.from_bytes(data[at : at + 8], "little"))
        digest = (_rotl(digest, 27) * _P1 + _P4) & _MASK
        at += 8
    if at + 4 <= size:
        digest ^= (int.from_bytes(data[at : at + 4], "little") * _P1) & _MASK
        digest = (_rotl(digest, 23) * _P2 + _P3) & _MASK
        at += 4
    while at < size:
        digest ^= (data[at] * _P5) & _MASK
        digest = (_rotl(digest, 11) * _P1) & _MASK
        at += 1
    digest ^= digest >> 33
    digest = (digest * _P2) & _MASK
    digest ^= digest >> 29
    digest = (digest * _P3) & _MASK
    return digest ^ (digest >> 32)


@dataclass(frozen=True)
class FrameHeader:
    """How a frame's header is written (RFC 8878 §3.1.1.1): ``window`` a Window_Descriptor byte
    (1 KiB) instead of Single_Segment; ``size_bytes`` the Frame_Content_Size field's width (0 only
    with a window, 1 only without; 2 holds the size less 256); ``dictionary_bytes`` a zero
    Dictionary_ID in 0, 1, 2 or 4 bytes (no dictionary); ``checksum`` the Content_Checksum."""

    checksum: bool = True
    window: bool = False
    size_bytes: int = 4
    dictionary_bytes: int = 0

    def encode(self, size: int) -> bytes:
        size_flag = {0: 0, 1: 0, 2: 1, 4: 2, 8: 3}[self.size_bytes]
        if (self.size_bytes == 0) != self.window and self.size_bytes in (0, 1):
            raise ValueError("a 0-byte content size needs a window; a 1-byte one needs a single segment")
        descriptor = (
            size_flag << 6
            | (0 if self.window else 1 << 5)
            | int(self.checksum) << 2
            | {0: 0, 1: 1, 2: 2, 4: 3}[self.dictionary_bytes]
        )
        field = 0 if self.size_bytes == 0 else size - 256 if self.size_bytes == 2 else size
        return (
            ZSTD_MAGIC
            + bytes([descriptor])
            + (b"\x00" if self.window else b"")
            + bytes(self.dictionary_bytes)
            + field.to_bytes(self.size_bytes, "little")
        )


SINGLE_SEGMENT: Final = FrameHeader()  # a 4-byte Frame_Content_Size, Single_Segment, Content_Checksum


def encode_frame(blocks: Sequence[tuple[int, bytes]], header: FrameHeader = SINGLE_SEGMENT) -> bytes:
    """One zstd frame of ``blocks``, each a block type and the content it gives: ``RAW_BLOCK``
    stored, ``RLE_BLOCK`` a run of one byte (stored once), ``COMPRESSED_BLOCK`` raw literals and no
    sequences (the simplest compressed block every decoder reads)."""
    body = []
    for index, (kind, content) in enumerate(blocks):
        if kind == RLE_BLOCK:
            if not content or content != content[:1] * len(content):
                raise ValueError("an RLE block is a run of one byte")
            payload, size = content[:1], len(content)
        elif kind == COMPRESSED_BLOCK:
            if len(content) >= 1 << 12:
                raise ValueError("a 2-byte raw literals header holds less than 4 KiB")
            literals = bytes([(len(content) & 15) << 4 | 0b0100, len(content) >> 4])
            payload = literals + content + b"\x00"  # Number_of_Sequences 0
            size = len(payload)
        else:
            payload, size = content, len(content)
        body.append(_block_header(size, kind, last=index == len(blocks) - 1) + payload)
    content = b"".join(content for _, content in blocks)
    checksum = (xxh64(content) & 0xFFFFFFFF).to_bytes(4, "little") if header.checksum else b""
    return header.encode(len(content)) + b"".join(body) + checksum


def encode_raw_frame(
    content: bytes, block_ends: Sequence[int] = (), header: FrameHeader = SINGLE_SEGMENT
) -> bytes:
    """One zstd frame holding ``content`` in raw blocks, with its size and checksum (by default:
    ``header`` says). The blocks end at ``block_ends`` (offsets into ``content``) and wherever a
    block would pass 128 KiB; an empty content is one empty block."""
    if len(content) >= 1 << 32:
        raise ValueError("a frame with a 4-byte content size holds less than 4 GiB")
    ends = sorted({end for end in block_ends if 0 < end < len(content)} | {len(content)})
    blocks: list[tuple[int, bytes]] = []
    start = 0
    for end in ends:
        while end - start > MAX_BLOCK:
            blocks.append((RAW_BLOCK, content[start : start + MAX_BLOCK]))
            start += MAX_BLOCK
        blocks.append((RAW_BLOCK, content[start:end]))
        start = end
    return encode_frame(blocks, header)


def encode_skippable_frame(payload: bytes, magic: int = 0) -> bytes:
    """A skippable frame: its magic (0x184D2A50 plus ``magic``, 0 to 15), its payload's size in 4
    bytes, the payload (RFC 8878 §3.1.2)."""
    return (
        bytes([SKIPPABLE_MAGIC[0] | magic])
        + SKIPPABLE_MAGIC[1:]
        + len(payload).to_bytes(4, "little")
        + payload
    )


def _block_header(size: int, kind: int, last: bool) -> bytes:
    return (int(last) | kind << 1 | size << 3).to_bytes(3, "little")


def inflate_zstd(data: bytes) -> tuple[bytes, bool]:
    """zstd's decompression of one frame's bytes, as :data:`spec.format.framing.Inflate` asks."""
    try:
        reader = zstandard.ZstdDecompressor().decompressobj()
        plaintext = reader.decompress(data)
    except zstandard.ZstdError as error:
        raise ValueError(str(error)) from None
    return bytes(plaintext), reader.eof and not reader.unused_data


HEADER_BYTES: Final = 4 + 1 + 4  # magic, descriptor, content size: where a frame's first block starts
BLOCK_HEADER_BYTES: Final = 3


__all__ = [
    "BLOCK_HEADER_BYTES",
    "COMPRESSED_BLOCK",
    "HEADER_BYTES",
    "RAW_BLOCK",
    "RLE_BLOCK",
    "SINGLE_SEGMENT",
    "FrameHeader",
    "encode_frame",
    "encode_raw_frame",
    "encode_skippable_frame",
    "inflate_zstd",
    "xxh64",
]
