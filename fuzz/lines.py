"""The plain (JSON lines) log reader: :func:`spec.format.framing.decode_jsonl_log`, then the
reference's :func:`reference.persistence.filestore.load_framed_log`, which reads a v4 log's events
or upgrades a v0 log's records through :mod:`spec.format.legacy`.

Oracle, for any bytes ``data``:

- reading raises nothing but :class:`spec.codes.SpecError` (its code one of :class:`spec.codes.Code`);
- decode∘encode is the identity on the framing: the header line and records read, each written
  back by ``encode_json_text`` as one line, read back to the same header line and records, with
  no torn tail.
"""

from __future__ import annotations

from fuzz import Finding
from fuzz.oracles import same_json, typed_refusal
from reference.persistence.filestore import load_framed_log
from spec.codes import SpecError
from spec.format.framing import FramedLog, decode_jsonl_log
from spec.format.json_text import encode_json_text


def read(data: bytes) -> FramedLog | None:
    """The framed log, or ``None`` when the reader refuses it with a typed code."""
    try:
        framed = decode_jsonl_log(data)
    except SpecError as error:
        typed_refusal(error)
        return None
    try:
        load_framed_log(None, framed, "session.jsonl")
    except SpecError as error:
        typed_refusal(error)
    return framed


def one_input(data: bytes) -> None:
    framed = read(data)
    if framed is None:
        return
    text = "".join(encode_json_text(value) + "\n" for value in (framed.header_line, *framed.records))
    again = decode_jsonl_log(text.encode("utf-8"))
    if not same_json([again.header_line, *again.records], [framed.header_line, *framed.records]):
        raise Finding(f"decode∘encode changed the log read from {data!r}")
    if again.truncate_to is not None:
        raise Finding(f"the log written back from {data!r} has a torn tail")
