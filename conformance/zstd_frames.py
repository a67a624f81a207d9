"""Standard zstd frames built byte by byte, so that the suite's reference files are determined by
this code alone, whatever zstd library is installed (RFC 8878).

A frame here holds its content in *raw* blocks (stored, not compressed): every zstd decoder reads
them, ``zstd -dc`` included, and the bytes never change with a library's version. Each frame
carries its content size and its content checksum (the low 32 bits of XXH64, seed 0), as DSH's
frames do (notes/dsh-persistence §4.2). :func:`xxh64` is the hash, written out from its
specification. :func:`inflate_zstd` reads a frame back with the zstd library, for the suite and
the reference alike (spec/ imports no zstd).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import zstandard

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
# Frame header descriptor: a 4-byte Frame_Content_Size (flag 2), Single_Segment, Content_Checksum.
DESCRIPTOR: Final = (2 << 6) | (1 << 5) | (1 << 2)
MAX_BLOCK: Final = 128 * 1024  # bytes: Block_Maximum_Size
RAW_BLOCK: Final = 0

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


def encode_raw_frame(content: bytes, block_ends: Sequence[int] = ()) -> bytes:
    """One zstd frame holding ``content`` in raw blocks, with its size and checksum. The blocks end
    at ``block_ends`` (offsets into ``content``) and wherever a block would pass 128 KiB; an empty
    content is one empty block."""
    if len(content) >= 1 << 32:
        raise ValueError("a frame with a 4-byte content size holds less than 4 GiB")
    ends = sorted({end for end in block_ends if 0 < end < len(content)} | {len(content)})
    blocks: list[bytes] = []
    start = 0
    for end in ends:
        while end - start > MAX_BLOCK:
            blocks.append(content[start : start + MAX_BLOCK])
            start += MAX_BLOCK
        blocks.append(content[start:end])
        start = end
    body = b"".join(
        _block_header(len(block), last=index == len(blocks) - 1) + block for index, block in enumerate(blocks)
    )
    checksum = (xxh64(content) & 0xFFFFFFFF).to_bytes(4, "little")
    return ZSTD_MAGIC + bytes([DESCRIPTOR]) + len(content).to_bytes(4, "little") + body + checksum


def _block_header(size: int, last: bool) -> bytes:
    return (int(last) | RAW_BLOCK << 1 | size << 3).to_bytes(3, "little")


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


__all__ = ["BLOCK_HEADER_BYTES", "HEADER_BYTES", "encode_raw_frame", "inflate_zstd", "xxh64"]
