"""A stored log as the checker reads it (capability ``check``; ``dsh-session check`` over a store's
log): what ``read`` refuses is refused alike, and a log that reads answers its format, its event
count and :func:`spec.checks.log.check_log`'s violations, the legacy rules' apart.

Logs the store wrote (compressed and plain, over several flushes, a frame past 1 KiB of
compressed bytes, resumed, forked) and every small file set of the ``files`` family placed and
checked: the checker's reader (which reads a clean compressed log in bulk, frame by frame) must
find the events the spec's reader finds.
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import (
    NOW,
    OK,
    Case,
    Cases,
    Step,
    append,
    case,
    fails,
    ok,
    turn,
    turn_end,
)
from conformance.cases.files import file_sets
from conformance.files.reader import encode_files
from spec.codes import Code

RULE: Final = "check_log"
SMALL_SET: Final = 4096  # bytes: a files set this small is checked in a vector of its own


def noise(length: int, seed: int = 7) -> str:
    """Text zstd cannot shrink much: letters from a fixed linear congruential sequence."""
    letters, state = [], seed
    for _ in range(length):
        state = (state * 1103515245 + 12345) % (1 << 31)
        letters.append(chr(ord("a") + state % 26))
    return "".join(letters)


def written(session: str = "s") -> list[Step]:
    """Two turns over three flushes, the second turn's user message past 1 KiB of compressed bytes,
    the second turn left open."""
    return [
        ok("create", id=session, meta={"cwd": "/w"}),
        turn(1, session),
        append(msg.user(), session),
        ok("flush", id=session),
        append(msg.assistant(), session),
        turn_end(1, session),
        ok("flush", id=session),
        turn(2, session),
        append(msg.user("u2", noise(3000)), session),
        ok("close", id=session),
    ]


def written_cases() -> Cases:
    for compressed in (True, False):
        where = "compressed" if compressed else "plain"
        yield case(
            f"a {where} log the store wrote over three flushes is checked whole, its open turn reported",
            RULE,
            [*written(), ok("check", id="s"), ok("resume", id="s"), ok("close", id="s"), ok("check", id="s")],
            storage="file",
            compressed=compressed,
        )
        yield case(
            f"a {where} fork's log is checked with its seed and end-seed marker",
            RULE,
            [
                *written(),
                ok("resume", id="s"),
                ok("fork", source="s", child="c"),
                ok("close", id="c"),
                ok("check", id="c"),
            ],
            storage="file",
            compressed=compressed,
        )
    yield case(
        "a session not stored has no log to check",
        RULE,
        [
            fails(Code.SESSION_NOT_FOUND, "check", id="s"),
            ok("create", id="s"),
            ok("close", id="s"),
            ok("check", id="s"),
        ],
        storage="file",
    )


def file_set_cases() -> Cases:
    for file_set in file_sets():
        if sum(len(data) for data in file_set.files.values()) > SMALL_SET:
            continue
        step = (
            ok("check", id=file_set.session)
            if file_set.intent == OK or file_set.read  # refused by resume only: read, and check, answer
            else fails(Code(file_set.intent), "check", id=file_set.session)
        )
        yield Case(
            f"checked: {file_set.name}",
            RULE,
            (
                ok(
                    "reset",
                    storage="file",
                    compressed=file_set.compressed,
                    files=encode_files(dict(file_set.files)),
                ),
                ok("clock", now=NOW),
                step,
            ),
        )


def cases() -> Cases:
    yield from written_cases()
    yield from file_set_cases()


__all__ = ["cases"]
