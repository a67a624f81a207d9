"""Durability through the protocol (SPEC-DECISIONS D2, D3): ``flush`` is the barrier, ``close``
flushes and releases, ``resume`` takes a stored log over, ``read`` shows what is durable; a crash
keeps what was flushed; a failed write or fsync answers STORAGE_IO and loses nothing flushed.
"""

from __future__ import annotations

from typing import Any, Final

from conformance import builders as payloads
from conformance.cases import msg
from conformance.cases.build import (
    NOW,
    Cases,
    Step,
    append,
    case,
    chained,
    event,
    fails,
    gone,
    ok,
    state,
    turn,
    turn_end,
)
from spec.codes import Code
from spec.projections.durability import derive_event_bytes

APPEND = "append_event"  # what a flush makes durable is what append committed
NEW_ID = "validate_new_session_id"

FLUSH_RULE: Final = (
    "flush is the durability barrier: when it returns, everything appended before it is durable, "
    "and read shows only what is durable (SPEC-DECISIONS D2)"
)
CRASH_RULE: Final = (
    "after a crash, every event of a completed flush survives and nothing that was not appended "
    "appears (SPEC-DECISIONS D3 items 2-3)"
)
IO_RULE: Final = (
    "a failed write or fsync answers STORAGE_IO, loses nothing flushed before it, and leaves the "
    "session able to retry (SPEC-DECISIONS D3)"
)


def flushed_then_pending(**create: Any) -> list[Step]:
    """Session ``s`` (``create`` adds to its create request) with a flushed user message and an
    assistant message appended after it."""
    return [ok("create", id="s", **create), append(msg.user()), ok("flush", id="s"), append(msg.assistant())]


def flush_read(*appended: Step) -> list[Step]:
    """``appended``, then a flush of session ``s`` and a read that shows it durable."""
    return [*appended, ok("flush", id="s"), ok("read", id="s")]


def storage_fails(op: str, fault: str = "fail_commit", **arm: Any) -> list[Step]:
    """The ``fault`` armed (``fail_commit`` or ``fail_next``, with ``arm``), then ``op`` of session
    ``s`` answering STORAGE_IO."""
    return [ok(fault, **arm), fails(Code.STORAGE_IO, op, id="s")]


def flush_cases() -> Cases:
    yield case(
        "flush makes appended events durable for readers, and only flush does",
        APPEND,
        [
            ok("create", id="s"),
            append(msg.user()),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            *flush_read(),
            append(msg.assistant()),
            ok("read", id="s"),
            *flush_read(),
        ],
        storage="memory",
        why=FLUSH_RULE,
        comment="a session is published by its first flush, so read finds nothing before it",
    )
    yield case(
        "close flushes and releases the session",
        APPEND,
        [
            ok("create", id="s"),
            append(msg.user()),
            ok("close", id="s"),
            gone(),
            fails(Code.SESSION_NOT_FOUND, "append", id="s", type="x", data={}),
            ok("read", id="s"),
        ],
        storage="memory",
        why="close flushes, then releases the session: its id is no longer live, its log stays stored",
    )
    yield case(
        "flush and close of a session that is not live are rejected",
        APPEND,
        [
            fails(Code.SESSION_NOT_FOUND, "flush", id="nope"),
            fails(Code.SESSION_NOT_FOUND, "close", id="nope"),
        ],
        storage="memory",
        why="flush and close name a live session",
    )
    yield case(
        "without storage, flush and close work and nothing can be read or resumed",
        APPEND,
        [
            ok("create", id="s"),
            append(msg.user()),
            ok("flush", id="s"),
            ok("close", id="s"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            fails(Code.SESSION_NOT_FOUND, "resume", id="s"),
        ],
        why="with no storage there is nothing to make durable: flush and close succeed, "
        "and read and resume find no session (conformance/PROTOCOL.md)",
    )


def resume_cases() -> Cases:
    yield case(
        "a closed session can be resumed and appended to",
        "create_session_state",
        [
            ok("create", id="s"),
            append(msg.user()),
            ok("close", id="s"),
            ok("resume", id="s"),
            append(msg.assistant()),
            ok("close", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
        why="a resume makes a stored session live again, and its appends are stored after the resumed log",
    )
    yield case(
        "resuming a live session is rejected",
        NEW_ID,
        [ok("create", id="s"), ok("flush", id="s"), fails(Code.SESSION_ALREADY_EXISTS, "resume", id="s")],
        storage="memory",
    )
    yield case(
        "resuming a session that was never stored is rejected",
        APPEND,
        [fails(Code.SESSION_NOT_FOUND, "resume", id="nope")],
        storage="memory",
        why="only a stored session can be resumed",
    )
    yield case(
        "the empty id names no stored session: read and resume find none",
        "encode_session_key",
        [
            ok("create", id="s"),
            ok("close", id="s"),
            fails(Code.SESSION_NOT_FOUND, "read", id=""),
            fails(Code.SESSION_NOT_FOUND, "resume", id=""),
        ],
        storage="memory",
        why="a stored session is filed under its id's path segment and the empty id has none, so no "
        "stored session has it: read and resume answer SESSION_NOT_FOUND, not a path error",
    )
    yield case(
        "creating a session whose id is stored is rejected",
        NEW_ID,
        [
            ok("create", id="s"),
            ok("close", id="s"),
            fails(Code.SESSION_ALREADY_EXISTS, "create", id="s"),
            gone(),
        ],
        storage="memory",
        why="a create may not take an id the store holds, live or stored",
    )
    yield case(
        "a reset forgets every session, live and stored, and frees their ids",
        NEW_ID,
        [
            ok("create", id="s"),
            append(msg.user("u1")),
            ok("flush", id="s"),
            ok("create", id="t"),
            ok("reset", storage="memory"),
            ok("clock", now=NOW),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            fails(Code.SESSION_NOT_FOUND, "resume", id="s"),
            ok("create", id="s"),
            ok("create", id="t"),
            append(msg.user("u2")),
            ok("flush", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
        why="reset starts from an empty store with no session live (PROTOCOL.md, reset): a session "
        "that was live before it, stored (s) or not yet (t), holds nothing afterwards, not even its "
        "writer, so its id can be created again",
        comment="a store that keeps the writers of the sessions live before the reset refuses the "
        "second creates as LOCKED",
    )
    yield case(
        "a minted id skips ids that are stored",
        "plan_session_id",
        [ok("create", id="session-1"), ok("close", id="session-1"), ok("create")],
        storage="memory",
        why="a minted id skips every id the store holds, live or stored",
    )
    yield case(
        "a fork's child is stored with its lineage header",
        "derive_child_meta",
        [
            ok(
                "create",
                id="p",
                meta={"cwd": "/w", "createdAt": 7, "delegationDepth": 2, "origin": "subagent"},
            ),
            append(msg.user("u1"), "p"),
            ok("clock", now=NOW + 1_000),
            ok("fork", source="p", child="c"),
            ok("close", id="c"),
            ok("read", id="c"),
        ],
        storage="memory",
        comment="the stored child header has its own createdAt (now), the parent's cwd, and neither the "
        "parent's depth nor its origin",
    )


def crashed_inside_a_turn() -> list[Step]:
    """Session ``s`` stored inside turn 1 (call c1 announced), then a crash: a resume writes closers."""
    return [
        ok("create", id="s"),
        turn(),
        append(msg.assistant(calls=["c1"])),
        ok("flush", id="s"),
        ok("crash"),
    ]


PAGE_RULE: Final = (
    "read and resume give the whole stored log, each event once and in order, however long it is "
    "(SPEC-DECISIONS D2): a store that reads a session in pages joins them exactly"
)


def flushed_turns(turns: int) -> list[Step]:
    """Session ``s`` grown by ``turns`` completed turns of four events, each turn flushed."""
    steps = [ok("create", id="s")]
    for n in range(1, turns + 1):
        steps += [
            turn(n),
            append(msg.user(f"u{n}")),
            append(msg.assistant(f"a{n}")),
            turn_end(n),
            ok("flush", id="s"),
        ]
    return steps


def long_session_cases() -> Cases:
    yield case(
        "a session read back after each flush, one event longer each time, is read whole",
        APPEND,
        [
            ok("create", id="s"),
            *(step for n in range(1, 10) for step in flush_read(append(msg.user(f"u{n}", f"m{n}")))),
        ],
        storage="memory",
        why=PAGE_RULE,
        comment="every length from 1 to 9 events is read, so a boundary at any small page size is crossed and met exactly",
    )
    yield case(
        "a long closed session reads back whole",
        APPEND,
        [*flushed_turns(8), ok("close", id="s"), ok("read", id="s")],
        storage="memory",
        why=PAGE_RULE,
        comment="32 events, stored in eight flushes",
    )
    yield case(
        "a session of 300 events reads back whole",
        APPEND,
        [
            ok("create", id="s"),
            turn(),
            *(append({"todos": []}, type="todo/write") for _ in range(298)),
            turn_end(),
            ok("close", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
        why=PAGE_RULE,
        comment="seqs past 256 are read back by value, whatever numbers a runtime shares between reads",
    )
    yield case(
        "a long session resumed inside an open turn is closed after its last event and grows from there",
        "create_session_state",
        [
            *flushed_turns(6),
            turn(7),
            append(msg.user("u7")),
            ok("close", id="s"),
            ok("resume", id="s"),
            state(),
            append(msg.user("u8")),
            ok("close", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
        why=PAGE_RULE,
        comment="26 stored events: the closers follow the last of them, and the append after them takes the next seq",
    )


def crash_cases() -> Cases:
    for compressed in (True, False):
        label = "compressed" if compressed else "uncompressed"
        yield case(
            f"file storage ({label}): what was flushed survives a crash, the rest is lost",
            APPEND,
            [
                *flushed_then_pending(meta={"cwd": "/work/p"}),
                ok("crash"),
                gone(),
                ok("read", id="s"),
                ok("resume", id="s"),
                state(),
            ],
            storage="file",
            compressed=compressed,
            why=CRASH_RULE,
            comment="the crash op drops every unsynced byte, so the unflushed assistant message is gone",
        )
    yield case(
        "file storage: a session never flushed does not survive a crash",
        APPEND,
        [
            ok("create", id="s"),
            append(msg.user()),
            ok("crash"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            ok("create", id="s"),
        ],
        storage="file",
        why="a new session becomes visible only whole, at its first flush (SPEC-DECISIONS D2)",
        comment="its id is free again after the crash",
    )
    yield case(
        "file storage: resuming after a crash inside a turn appends the closers",
        "derive_closers",
        [
            *crashed_inside_a_turn(),
            ok("resume", id="s"),
            ok("read", id="s"),
        ],
        storage="file",
    )


BATCH_DUE = "is_batch_due"
BATCH_RULE: Final = (
    "under a batch policy an append writes and fsyncs the buffered appends, without a flush, once "
    "the oldest is batchMaxDelayMs or more older than the newest or they reach batchMaxBytes, so a "
    "crash loses less than that bound (seed 002: append is fsynced in batches, flush is the barrier)"
)


def batch_cases() -> Cases:
    for storage in ("memory", "file"):
        crash = [ok("crash")] if storage == "file" else []
        yield case(
            f"{storage} storage: with batchMaxDelayMs 0 every append is durable without a flush",
            BATCH_DUE,
            [ok("create", id="s"), turn(), append(msg.user()), *crash, ok("read", id="s")],
            storage=storage,
            batch={"batchMaxDelayMs": 0},
            why=BATCH_RULE,
            comment="a delay bound of 0 writes each append as it comes: the session is published by it",
        )
    yield case(
        "with a delay bound, appends older than the bound are durable once a later append comes",
        BATCH_DUE,
        [
            ok("create", id="s"),
            turn(),
            ok("clock", now=NOW + 50),
            append(msg.user()),
            ok("clock", now=NOW + 99),
            append(msg.assistant()),
            ok("clock", now=NOW + 100),
            append({"turn": 1, "reason": {"kind": "completed"}}, type="turn/end"),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
        batch={"batchMaxDelayMs": 100},
        why=BATCH_RULE,
        comment="the turn/start at NOW is 100 ms older than the turn/end: that append writes all four "
        "events, so the crash keeps them (nothing was due before it; a subject may write earlier)",
    )
    yield case(
        "with a byte bound, appends are durable once their JSONL text reaches it",
        BATCH_DUE,
        [
            ok("create", id="s"),
            append(msg.user("u1")),
            append(msg.user("u2")),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
        batch={"batchMaxBytes": 300},
        why=BATCH_RULE,
        comment="each user/message line is 175 bytes: the first stays below 300, the second brings the buffer past it",
    )
    yield case(
        "a resume's end-seed marker is written by the batch policy too",
        BATCH_DUE,
        [
            ok("create", id="s"),
            turn(),
            ok("close", id="s"),
            ok("resume", id="s"),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
        batch={"batchMaxDelayMs": 0},
        why=BATCH_RULE,
    )
    aged = {
        "a batch that began at time 0 is due once an append comes the bound later": (
            (0, 150),
            "the age is the newest time minus the earliest (150 - 0 = 150 >= 100), whatever the earliest is: "
            "0 is a time like any other, and a batch 50 ms past its bound is due as much as one exactly at it",
        ),
        "a delay bound measures the age of a batch whose events have negative times": (
            (-199, 0),
            "the session is created at 0 (a header's createdAt is never negative), then the clock goes back: "
            "the turn/start at -199 is 199 ms older than the user/message at 0, so that append writes both",
        ),
        "a delay bound measures from the earliest time in the batch, which may come after its first event": (
            (100, 0, 100),
            "the clock goes back after the turn/start at 100: the user/message at 0 is the batch's earliest "
            "event, not the first; the assistant/message at 100 is 100 ms after it, so that append writes all "
            "three, which the crash keeps",
        ),
    }
    # The events of a batch, appended in turn, each at its time (the clock moved only when it changes).
    events = (turn(), append(msg.user()), append(msg.assistant()))
    for name, (times, comment) in aged.items():
        steps, now = [ok("clock", now=0), ok("create", id="s")], 0
        for time, step in zip(times, events):
            steps += [*([ok("clock", now=time)] if time != now else []), step]
            now = time
        yield case(
            name,
            BATCH_DUE,
            [*steps, ok("crash"), ok("read", id="s")],
            storage="file",
            batch={"batchMaxDelayMs": 100},
            why=BATCH_RULE,
            comment=comment,
        )
    for storage in ("file", "memory"):
        crash = [ok("crash")] if storage == "file" else []
        yield case(
            f"{storage} storage: a line longer than the byte bound is durable without a flush",
            BATCH_DUE,
            [ok("create", id="s"), append(msg.user("u1")), *crash, ok("read", id="s")],
            storage=storage,
            batch={"batchMaxBytes": 100},
            why=BATCH_RULE,
            comment="the user/message line is 175 bytes: one append alone passes the bound of 100, so it "
            "is written and publishes the session",
        )
    yield from batch_unit_cases()
    yield from batch_age_cases()
    yield case(
        "a batch bound must be a non-negative integer",
        "decode_batch_policy",
        [
            fails(Code.BATCH_POLICY_INVALID, "reset", storage="memory", batchMaxDelayMs=-1),
            fails(Code.BATCH_POLICY_INVALID, "reset", storage="memory", batchMaxBytes="1k"),
        ],
    )


MULTI_BYTE_TEXT: Final = "\u20ac" * 40  # "€": 1 character, 1 UTF-16 unit, 3 bytes of UTF-8
ASTRAL_TEXT: Final = "\U0001f600" * 20  # an emoji: 1 code point, 2 UTF-16 units, 4 bytes of UTF-8


def batch_unit_cases() -> Cases:
    """The byte bound's unit is a UTF-8 byte of the line as written (newline included), never a
    character: a bound set to exactly one line's bytes is reached by that one append, where its
    characters (code points or UTF-16 units) fall short of it. Only the side a crash can show is
    asked (D3: a store may make something durable earlier than it must)."""
    for name, text in (("multi-byte", MULTI_BYTE_TEXT), ("astral", ASTRAL_TEXT)):
        line = derive_event_bytes(
            {
                "type": "user/message",
                "seq": 0,
                "time": NOW,
                "data": msg.user("u1", text),
                "surfaceOp": "append",
            }
        )
        yield case(
            f"a byte bound counts UTF-8 bytes: one line of {name} text exactly at the bound is durable without a flush",
            BATCH_DUE,
            [ok("create", id="s"), append(msg.user("u1", text)), ok("crash"), ok("read", id="s")],
            storage="file",
            batch={"batchMaxBytes": line},
            why=BATCH_RULE,
            comment=f"the line is {line} bytes of UTF-8 and {line - len(text.encode()) + len(text)} code points "
            f"({line - len(text.encode()) + len(text.encode('utf-16-le')) // 2} UTF-16 units): a batch of "
            "bytes >= the bound is due, so the append publishes the session; a store counting characters "
            "waits, and the crash loses it",
        )


SEEDED_EVENTS: Final = 300  # a batch of more lines than CPython keeps one int object for (256)


def seeded_batch_cases() -> Cases:
    """A session created from a seed under a byte bound: the seed is appended as one batch of many
    events, each encoded once as it is appended to be counted, and those lines are what the close
    writes (PROTOCOL.md, "The batch policy"); read back, the log is the seed and its end-seed."""
    seed = [
        event(seq, kind, payload)
        for turn_number in range(1, SEEDED_EVENTS // 2 + 1)
        for seq, kind, payload in (
            (2 * turn_number - 2, "turn/start", payloads.turn_start(turn_number)),
            (2 * turn_number - 1, "turn/end", payloads.turn_end(turn_number)),
        )
    ]
    yield case(
        f"a session created from a seed of {SEEDED_EVENTS} events under a byte bound writes every line of it",
        BATCH_DUE,
        [ok("create", id="s", seed=seed), ok("close", id="s"), ok("read", id="s")],
        storage="file",
        compressed=False,
        batch={"batchMaxBytes": 1 << 20},
        why=BATCH_RULE,
        comment="the bound (1 MiB) is never reached: the 301 events are written by the close, as the lines "
        "encoded when the seed was appended",
    )
    yield case(
        "a session created from a seed older than the delay bound is durable at its create",
        BATCH_DUE,
        [ok("create", id="s", seed=seed[:2]), ok("read", id="s")],
        storage="memory",
        batch={"batchMaxDelayMs": 1000},
        why=BATCH_RULE,
        comment="the seed's events carry their own time, long before the end-seed marker's (now): the batch "
        "of the seed and the marker is due by the age of its oldest event against its newest",
    )


def batch_age_cases() -> Cases:
    """A write the batch policy starts that fails keeps the batch buffered with its age: its oldest
    event is still the oldest, so the next append is due at once and writes it (it is not aged
    afresh from the failure, nor from the append that met it)."""
    yield case(
        "a batch whose first write failed keeps its age: the next append writes it",
        BATCH_DUE,
        [
            ok("create", id="s"),
            turn(),
            ok("clock", now=NOW + 100),
            ok("fail_next", fsOp="write", errno="EIO"),
            append(msg.user()),
            ok("clock", now=NOW + 110),
            append(msg.assistant()),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
        batch={"batchMaxDelayMs": 100},
        why=BATCH_RULE,
        comment="the user/message at NOW+100 makes the batch due and its publication fails (the append "
        "still answers ok); the batch still begins at NOW, so the append at NOW+110 is due too and "
        "publishes all three events, which the crash keeps",
    )
    yield case(
        "a batch whose fsync failed keeps its age: the next append writes it",
        BATCH_DUE,
        [
            ok("create", id="s"),
            turn(),
            ok("flush", id="s"),
            ok("clock", now=NOW + 50),
            append(msg.user()),
            ok("clock", now=NOW + 150),
            ok("fail_next", fsOp="fsync", errno="EIO"),
            append(msg.assistant()),
            ok("clock", now=NOW + 160),
            turn_end(),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
        batch={"batchMaxDelayMs": 100},
        why=BATCH_RULE,
        comment="the batch begins with the user/message at NOW+50; the append at NOW+150 makes it due "
        "and its fsync fails; the turn/end at NOW+160 is still 110 ms after the batch began, so it "
        "writes the three buffered events and the crash keeps all four",
    )


def fault_cases() -> Cases:
    retried: tuple[tuple[str, str, str, list[Step], str | None], ...] = (
        (
            "a failed fsync answers STORAGE_IO, loses nothing flushed before, and a retried flush succeeds",
            "fsync",
            "EIO",
            [],
            None,
        ),
        (
            "a failed write on a full disk answers STORAGE_IO and a retried flush succeeds",
            "write",
            "ENOSPC",
            [ok("crash")],
            "the crash after the retried flush shows the retry really made the events durable",
        ),
    )
    for name, fs_op, errno, after_retry, comment in retried:
        yield case(
            name,
            APPEND,
            [
                *flushed_then_pending(),
                *storage_fails("flush", "fail_next", fsOp=fs_op, errno=errno),
                ok("read", id="s"),
                ok("flush", id="s"),
                *after_retry,
                ok("read", id="s"),
            ],
            storage="file",
            why=IO_RULE,
            comment=comment,
        )
    yield from publication_fault_cases()
    yield from resume_fault_cases()


def resume_fault_cases() -> Cases:
    for fs_op, errno in (("write", "ENOSPC"), ("fsync", "EIO")):
        yield case(
            f"a resume whose closers' {fs_op} fails answers STORAGE_IO, and a retried resume takes the session over",
            "derive_closers",
            [
                *crashed_inside_a_turn(),
                *storage_fails("resume", "fail_next", fsOp=fs_op, errno=errno),
                gone(),
                ok("resume", id="s"),
                ok("close", id="s"),
                ok("read", id="s"),
            ],
            storage="file",
            why=IO_RULE,
            comment="the refused resume leaves no writer behind: a store that kept its writer lock "
            "would refuse the retry as LOCKED",
        )


def publication_fault_cases() -> Cases:
    yield case(
        "a failed first publication leaves no session to read",
        APPEND,
        [
            ok("create", id="s"),
            append(msg.user()),
            *storage_fails("flush", "fail_next", fsOp="write", errno="EIO"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            *flush_read(),
        ],
        storage="file",
        why="a new session file becomes visible only whole, so a failed first flush publishes nothing "
        "(SPEC-DECISIONS D2)",
    )
    yield case(
        "a close that hits a storage failure answers STORAGE_IO and keeps the session live; a retried close writes it",
        APPEND,
        [
            *flushed_then_pending(),
            *storage_fails("close", "fail_next", fsOp="fsync", errno="EIO"),
            ok("state", id="s"),
            ok("close", id="s"),
            gone(),
            ok("resume", id="s"),
        ],
        storage="file",
        why="a close whose flush fails answers that failure and leaves the session live "
        "(conformance/PROTOCOL.md)",
    )
    yield case(
        "a fault armed before a flush with nothing to write stays armed",
        APPEND,
        [
            ok("create", id="s"),
            ok("flush", id="s"),
            ok("fail_next", fsOp="write", errno="EIO"),
            ok("flush", id="s"),
            append(msg.user()),
            fails(Code.STORAGE_IO, "flush", id="s"),
        ],
        storage="file",
        why="fail_next fails the next write of file bytes, whichever request makes it "
        "(conformance/PROTOCOL.md)",
        comment="the second flush writes nothing, so the fault waits for the flush after the append",
    )


COMMIT_RULE: Final = (
    "a failed commit answers STORAGE_IO and stores nothing of its batch, loses nothing committed "
    "before it, keeps the session live and able to retry, and the retry writes each event once "
    "(SPEC-DECISIONS D3)"
)


def commit_fault_cases() -> Cases:
    """The storage's own commit failing (``fail_commit``, capability ``commit-fault``): a database,
    which has no simulated disk for ``fail_next`` to fail. Each row: name, steps, comment."""
    created = [ok("create", id="s"), append(msg.user())]
    rows: tuple[tuple[str, list[Step], str | None], ...] = (
        (
            "a failed commit answers STORAGE_IO, loses nothing committed before, and a retried flush commits the batch once",
            [
                *flushed_then_pending(),
                *storage_fails("flush"),
                ok("read", id="s"),
                *flush_read(append(msg.user("u2", "after the failure"))),
                *flush_read(append(msg.user("u3", "after the retry"))),
            ],
            "the retry writes the failed batch and what was appended after it, once, at the seqs they "
            "hold; the flush after it goes on from there",
        ),
        (
            "a commit that fails twice in a row, then succeeds, writes each event once",
            [
                *flushed_then_pending(),
                *storage_fails("flush"),
                *storage_fails("flush"),
                ok("read", id="s"),
                *flush_read(),
            ],
            None,
        ),
        (
            "a close whose commit fails keeps the session live; a retried close writes it",
            [
                *flushed_then_pending(),
                *storage_fails("close"),
                ok("state", id="s"),
                ok("close", id="s"),
                gone(),
                ok("read", id="s"),
            ],
            None,
        ),
        (
            "a commit whose answer is lost is not written twice by the retried flush",
            [
                *flushed_then_pending(),
                append(msg.user("u2", "in the same batch")),
                *storage_fails("flush", stored=True),
                *flush_read(append(msg.user("u3", "after the failure"))),
                *flush_read(append(msg.user("u4", "after the retry"))),
            ],
            "the failed commit was made: the retry finds its two events stored, writes neither again, "
            "and writes the one appended after the failure at the seq it holds",
        ),
        (
            "a first commit whose answer is lost is published once, and the retried flush writes nothing twice",
            [
                *created,
                *storage_fails("flush", stored=True),
                *flush_read(append(msg.assistant())),
                *flush_read(append(msg.user("u2", "after the retry"))),
            ],
            "the header and the first batch commit together, so the retry finds both stored and writes "
            "only the event appended after the failure",
        ),
        (
            "a first commit of two events whose answer is lost: the retried flush finds it whole and writes nothing",
            [
                *created,
                append(msg.user("u2", "second")),
                *storage_fails("flush", stored=True),
                *flush_read(),
                *flush_read(append(msg.assistant())),
            ],
            "the retry has nothing left to write, and the session it found is published: the next flush "
            "writes events only, not the header again",
        ),
        (
            "a close whose commit's answer is lost keeps the session live, and the retried close writes nothing twice",
            [
                *flushed_then_pending(),
                *storage_fails("close", stored=True),
                ok("state", id="s"),
                append(msg.user("u2", "after the failure")),
                ok("close", id="s"),
                gone(),
                ok("resume", id="s"),
                ok("close", id="s"),
                ok("read", id="s"),
            ],
            None,
        ),
    )
    yield case(
        "a failed first commit publishes nothing, and a retried flush publishes the session whole",
        APPEND,
        [
            *created,
            *storage_fails("flush"),
            fails(Code.SESSION_NOT_FOUND, "read", id="s"),
            *flush_read(),
            *flush_read(append(msg.assistant())),
        ],
        storage="memory",
        why="a new session is published by its first commit, header and first batch together, so a "
        "failed one publishes nothing and its retry publishes them once (SPEC-DECISIONS D2)",
    )
    for name, steps, comment in rows:
        yield case(name, APPEND, steps, storage="memory", why=COMMIT_RULE, comment=comment)
    yield case(
        "a resume whose closers' commit fails answers STORAGE_IO, and a retried resume takes the session over",
        "derive_closers",
        [
            ok("create", id="s"),
            turn(),
            append(msg.user()),
            ok("close", id="s"),
            *storage_fails("resume"),
            gone(),
            ok("read", id="s"),
            ok("resume", id="s"),
            ok("close", id="s"),
            ok("read", id="s"),
        ],
        storage="memory",
        why=COMMIT_RULE,
        comment="the refused resume stores no closer and leaves no writer behind: a store that kept its "
        "writer lock would refuse the retry as LOCKED",
    )


cases: Final = chained(
    flush_cases,
    resume_cases,
    long_session_cases,
    crash_cases,
    batch_cases,
    seeded_batch_cases,
    fault_cases,
    commit_fault_cases,
)
