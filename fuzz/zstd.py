"""The zstd log reader: :func:`reference.logfile.frame_log_bytes`, which bounds the plaintext
(``check_decompressed_size``) and the lines, cuts the frames with
:func:`spec.format.framing.decode_zstd_frames` and
:func:`conformance.zstd_frames.inflate_zstd`, and reads them with
:func:`spec.format.framing.decode_compressed_log`; then the events
(:func:`reference.persistence.filestore.load_framed_log`).

Oracle, for any bytes ``data`` (given the zstd magic number when they lack one, so that every
input reaches the frame reader): reading raises nothing but :class:`spec.codes.SpecError` and the
reader's typed :class:`reference.logfile.InputError`; with a 1 MiB limit on the plaintext, no
frame's plaintext read is larger than the limit (bounded memory); ``decode_zstd_frames`` gives
each complete frame at increasing offsets inside the data.
"""

from __future__ import annotations

from conformance.zstd_frames import inflate_zstd
from fuzz import Finding
from fuzz.oracles import typed_refusal
from reference.logfile import InputError, ReadLimits, frame_log_bytes, is_zstd_data
from reference.persistence.filestore import load_framed_log
from spec.codes import SpecError
from spec.format.framing import ZSTD_MAGIC, decode_zstd_frames

LIMITS = ReadLimits(max_line_bytes=256 * 1024, max_decompressed_bytes=1024 * 1024)


def one_input(data: bytes) -> None:
    if not is_zstd_data(data):
        data = ZSTD_MAGIC.to_bytes(4, "little") + data
    try:
        _, framed = frame_log_bytes(data, LIMITS, "fuzz")
    except InputError:
        return
    except SpecError as error:
        typed_refusal(error)
        return
    frames, torn = decode_zstd_frames(data, inflate_zstd)  # the limit passed: this read is bounded
    offsets = [frame.offset for frame in frames] + ([torn.offset] if torn is not None else [])
    if offsets != sorted(set(offsets)) or any(not 0 <= offset < len(data) for offset in offsets):
        raise Finding(f"frame offsets out of order or outside the data: {offsets}")
    if sum(len(frame.plaintext) for frame in frames) > LIMITS.max_decompressed_bytes:
        raise Finding("the frames' plaintext passed the limit that was checked")
    try:
        load_framed_log(None, framed, "session.jsonl.zstd")
    except SpecError as error:
        typed_refusal(error)
