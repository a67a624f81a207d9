"""files: reference files every implementation must read (SPEC-DECISIONS D1, D2, D3; issue 10).

Each case is a *file set*: the bytes of a store's files, made here from the specification's own
encoders (:func:`spec.format.naming.encode_header_line`, :func:`spec.format.json_text.encode_json_text`,
the D1 path of :func:`spec.format.naming.derive_session_relpath`) and, compressed, from
:func:`conformance.zstd_frames.encode_raw_frame` (standard zstd frames in raw blocks, so that the
bytes depend on this code alone). A vector places the set with ``reset``'s ``files`` argument
(capability ``import``) and says what ``read`` and ``resume`` must answer; the generator also
writes each set under ``conformance/reference-files/<the vector's file name>/`` as a store root,
for an implementer's own tests.

- **v4 logs**, plain and compressed (one frame per write, a frame in several blocks), closed or
  ending inside a turn: ``read`` shows the log, ``resume`` adds the closers and the end-seed, and a
  ``read`` after ``close`` shows what ``resume`` wrote.
- **torn tails** at several cuts (a plain last line cut short or without its newline; a last
  frame cut in its magic, its header, a block, after some blocks, in its checksum; 1-3 stray
  bytes): dropped, the complete lines of a torn frame kept, and the file cut back so that what
  ``resume`` appends reads back (D3 item 4).
- **frame forms** every zstd decoder reads (no checksum, a window descriptor, content sizes of
  0 to 8 bytes, zero dictionary ids, RLE, compressed and empty blocks, skippable frames anywhere):
  each read whole; a last frame cut short after a reserved bit or block type is corrupt, not torn.
- **damaged middles** (a complemented byte, invalid UTF-8, an empty line, a wrong checksum, bad
  magic, a frame that ends inside a line, a seq gap): ``CORRUPT_LOG`` for ``read`` and
  ``resume``, the id still taken, nothing cut (D3 item 5).
- **v0 logs of DSH's shapes** (``session.jsonl[.zstd]``, packed text, reasoning and tool-call
  chunk rows, messages from before message identity, a steering message, a trigger, a disposed
  turn), read through the legacy conversions and resumed (D1); a torn v0 tail; the refusals a
  v0 log can meet.
- **where a log lies**: a log under another id's session directory, and one session directory
  under two project directories.
- **JSON text's edges in a stored line** (D5, D6): data holding integers at and past the safe bound,
  -0 and numbers below the smallest double, fractions below 1e-4, doubles from 2**64 up, nesting
  past 64 and 300 levels, escapes, spaces between tokens and duplicate keys, in v4 logs (plain and
  compressed; their state and a fork's asked after the resume) and in v0 logs (written again as v4
  by the resume); a middle line holding a number past the largest double, NaN, a raw control
  character and other text JavaScript refuses is corrupt; seqs written otherwise than 0, 1, 2 and a
  log longer than 1,024 lines.
"""

from __future__ import annotations

from collections.abc import Iterator

from conformance.cases.build import NOW, OK, Case, Cases, Step, fails, ok
from conformance.cases.files.logs import FileSet
from conformance.cases.files.v0 import v0_sets
from conformance.cases.files.v4 import (
    frame_form_sets,
    layout_sets,
    line_end_sets,
    plain_damaged_sets,
    plain_torn_sets,
    refused_message_sets,
    stored_text_sets,
    whole_sets,
    zstd_damaged_sets,
    zstd_torn_sets,
)
from conformance.files.reader import encode_files
from spec.codes import Code

# --- the cases ---------------------------------------------------------------------------------------


def file_sets() -> Iterator[FileSet]:
    yield from whole_sets()
    yield from line_end_sets()
    yield from plain_torn_sets()
    yield from zstd_torn_sets()
    yield from frame_form_sets()
    yield from plain_damaged_sets()
    yield from refused_message_sets()
    yield from stored_text_sets()
    yield from zstd_damaged_sets()
    yield from v0_sets()
    yield from layout_sets()


def steps_of(file_set: FileSet) -> tuple[Step, ...]:
    """Place the files; then a readable log is read, resumed, closed and read again (what resume
    wrote reads back: a torn tail was cut back, not appended after), and for a ``shown`` set the
    resumed session's state and a fork's are asked before the close (their events decoded from the
    stored lines the resumed session keeps); a refused one answers its
    code to read and resume alike, keeps its id, and still answers it after the failed resume (one
    refused by resume only reads alike before and after it)."""
    session = file_set.session
    opening = (
        ok("reset", storage="file", compressed=file_set.compressed, files=encode_files(file_set.files)),
        ok("clock", now=NOW),
    )
    if file_set.intent == OK:
        return (
            *opening,
            ok("read", id=session),
            ok("resume", id=session),
            *(
                (ok("state", id=session), ok("fork", source=session, child="child"), ok("state", id="child"))
                if file_set.shown
                else ()
            ),
            ok("close", id=session),
            ok("read", id=session),
        )
    code = Code(file_set.intent)
    if file_set.read:
        return (*opening, ok("read", id=session), fails(code, "resume", id=session), ok("read", id=session))
    create = (fails(Code.SESSION_ALREADY_EXISTS, "create", id=session),) if file_set.taken else ()
    return (
        *opening,
        fails(code, "read", id=session),
        fails(code, "resume", id=session),
        *create,
        fails(code, "read", id=session),
    )


def locks_out_of_order() -> Case:
    """Each session has its own writer lock: resuming the first of two stored sessions while the later
    one is live takes the first's lock, whatever order their lock files were made in."""
    return Case(
        "a session resumed while a session stored after it is live takes its own writer lock",
        "validate_resume_request",
        (
            ok("reset", storage="file", files=[]),
            ok("clock", now=NOW),
            ok("create", id="a"),
            ok("flush", id="a"),
            ok("create", id="b"),
            ok("flush", id="b"),
            ok("close", id="a"),
            ok("resume", id="a"),
            ok("close", id="a"),
            ok("close", id="b"),
        ),
        comment="a's lock file was made before b's (on a real directory, most often with the lower inode): "
        "a lock held on b must not refuse a's, nor a lock refused by comparing the two files' identities",
    )


def cases() -> Cases:
    for file_set in file_sets():
        yield Case(file_set.name, file_set.rule, steps_of(file_set), file_set.why, file_set.comment)
    yield locks_out_of_order()


def reference_files() -> dict[str, dict[str, bytes]]:
    """Every case's files, by the case's name."""
    return {file_set.name: dict(file_set.files) for file_set in file_sets()}
