"""The store's listing (capability ``list``; SPEC-DECISIONS D2's ``list``): which sessions a store
holds, each shown by its log's header line alone, in order of id.

Sessions the store wrote (memory and file storage, plain and compressed; created, forked, resumed,
not yet flushed) and stores placed over files (capability ``import``): every small file set of the
``files`` family listed, so each torn, damaged, v0 and misplaced log is listed exactly when its header
line reads, and the sets written here for the header line itself (torn, not JSON, under the other
version's file name, a first frame holding more than it, after a skippable frame) and for what is
not a session directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from conformance.cases import msg
from conformance.cases.build import NOW, Case, Cases, append, case, ok, turn, turn_end
from conformance.cases.files import file_sets
from conformance.cases.files.logs import (
    SESSION,
    line,
    plain_log,
    raw_frame,
    v4_files,
    v4_header,
    v4_log,
    v4_writes,
    zstd_log,
)
from conformance.files.reader import encode_files
from conformance.zstd_frames import encode_skippable_frame
from spec.format.naming import V0_PLAIN_NAME, V0_ZSTD_NAME, encode_header_line
from spec.log.json import JsonObject

LISTING: Final = "derive_session_listing"
HEADER: Final = "decode_listed_header"
SMALL_SET: Final = 4096  # bytes: a files set this small is listed in a vector of its own


def written_cases() -> Cases:
    for storage, compressed in (("file", True), ("file", False), ("memory", None)):
        where = "memory" if storage == "memory" else "compressed" if compressed else "plain"
        yield case(
            f"a {where} store lists every stored session's header in order of id, whatever its cwd",
            LISTING,
            [
                ok("list"),
                ok("create", id="b", meta={"cwd": "/w/p"}),
                ok("create", id="a"),
                ok("create", id="B", meta={"cwd": "/a", "agentPreset": "x"}),
                ok("create", id="a b\u00e9\U0001f600"),
                turn(1, "a"),
                append(msg.user(), "a"),
                turn_end(1, "a"),
                *(ok("close", id=session) for session in ("b", "a", "B", "a b\u00e9\U0001f600")),
                ok("list"),
                ok("resume", id="a"),
                ok("fork", source="a", child="a/1"),
                ok("flush", id="a/1"),
                ok("list"),
            ],
            storage=storage,
            compressed=compressed,
        )
    yield case(
        "a session is listed from its first flush on; before it, a store may list it or not",
        LISTING,
        [ok("create", id="s"), ok("list"), ok("flush", id="s"), ok("list")],
        storage="file",
        comment="a store that publishes a new session early (PROTOCOL.md, Timing) lists it at once",
    )
    yield case("a store without storage lists nothing", LISTING, [ok("create", id="s"), ok("list")])


def placed(name: str, files: dict[str, bytes], compressed: bool = False, comment: str | None = None) -> Case:
    return Case(
        name,
        HEADER,
        (
            ok("reset", storage="file", compressed=compressed, files=encode_files(files)),
            ok("clock", now=NOW),
            ok("list"),
        ),
        comment=comment,
    )


def file_set_cases() -> Cases:
    for file_set in file_sets():
        if sum(len(data) for data in file_set.files.values()) <= SMALL_SET:
            yield placed(
                f"listed: {file_set.name}",
                dict(file_set.files),
                file_set.compressed,
            )


def header_line_sets() -> Iterator[tuple[str, dict[str, bytes], bool]]:
    """Stores of a readable log (session ``r``) beside one whose header line is or is not read."""
    readable = v4_files(v4_log(False), False)
    header = encode_header_line(v4_header("q"))
    plain = plain_log(header, v4_writes())
    packed = zstd_log(header, v4_writes())

    def beside(data: bytes, compressed: bool, name: str | None = None) -> dict[str, bytes]:
        (path,) = v4_files(data, compressed, "q")
        if name is not None:
            path = path.rsplit("/", 1)[0] + "/" + name
        return {**readable, path: data}

    yield (
        "a plain log whose header line has no line break is not listed",
        beside(plain[: plain.index(b"\n")], False),
        False,
    )
    yield (
        "a plain log of a whole header line and a space without a line break is not listed",
        beside(plain[: plain.index(b"\n")] + b" ", False),
        False,
    )
    yield "a plain log whose header line is not JSON is not listed", beside(b"{" + plain, False), False
    yield "an empty plain log is not listed", beside(b"", False), False
    yield "a compressed log whose header frame is torn is not listed", beside(packed[:20], True), True
    yield "an empty compressed log is not listed", beside(b"", True), True
    first = raw_frame(0, [line(header)])
    yield (
        "a compressed log whose header frame is damaged is not listed",
        beside(first[:-1] + bytes([first[-1] ^ 0xFF]) + packed[len(first) :], True),
        True,
    )
    whole = raw_frame(0, [line(header), *(line(record) for batch in v4_writes() for record in batch)])
    yield (
        "a compressed log whose first frame holds more than the header line is not listed",
        beside(whole, True),
        True,
    )
    yield (
        "a compressed log whose header frame follows a skippable frame is listed",
        beside(encode_skippable_frame(b"pad") + packed, True),
        True,
    )
    yield "a v4 log under a v0 file name is not listed", beside(plain, False, V0_PLAIN_NAME), False
    yield "a compressed v4 log under a v0 file name is not listed", beside(packed, True, V0_ZSTD_NAME), True
    (path,) = readable
    project, session, _ = path.split("/")
    v0_line: JsonObject = {
        "type": "session",
        "version": 0,
        "id": SESSION,
        "createdAt": 5,
        "cwd": "/elsewhere",
    }
    yield (
        "a file beside the project directories and one beside the session directories are not sessions",
        {
            **readable,
            "+stray": plain,
            "stray": plain,
            f"{project}/+stray": plain,
            f"{project}/{session}/notes.txt": b"x",
        },
        False,
    )
    yield (
        "a session directory holding a v4 and a v0 log is listed once, by the v4 log's header",
        {**readable, f"{project}/{session}/{V0_PLAIN_NAME}": line(v0_line)},
        False,
    )


def cases() -> Cases:
    yield from written_cases()
    for name, files, compressed in header_line_sets():
        yield placed(name, files, compressed)
    yield from file_set_cases()


__all__ = ["cases"]
