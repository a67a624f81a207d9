"""projection: the seed's session digest folded over a log, the identity rule, and the projection
ops (SPEC-DECISIONS D7; seed 002 "会话账本"; notes/dsh-compaction-projection §11).

A subject folds the seed's example unit, ``sessionDigest``, from its ``init`` over a log and says
for each event whether the state changed, by identity, as a change feed tells it. The digest cares
about successful ``compaction/end`` events and ``compaction/prune``; for every other event it must
hand back the very same state ("不关心的事件必须返回同一个引用，下游才不会白算"), so those read as
unchanged. A subject whose unit returns a new equal object for them fails these vectors.
"""

from __future__ import annotations

from typing import Final

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
    log,
    ok,
    pure,
    turn,
    turn_end,
)
from conformance.cases.engine_build import (
    LONG,
    answered_step,
    attempt,
    closed_turn,
    compact,
    history,
    step_open,
    tool_steps,
)
from conformance.cases.files.logs import CWD, SESSION, line, plain_log, v4_files, v4_header, v4_writes
from conformance.files.reader import encode_files
from spec.codes import Code
from spec.format.naming import encode_header_line
from spec.log.json import JsonObject, JsonValue
from spec.projections.units import encode_cache_record

CHANGES = "spec.projection.derive_projection_changes"
START: Final = ("compaction/start", {"compactionId": "k1", "turn": None})
PRUNE: Final = (
    "compaction/prune",
    {"shadowedRange": {"start": 1, "end": 1}, "shadowedSeqs": [1], "shadowedTokenCount": 42},
)


def pure_cases() -> Cases:
    yield pure("the digest of an empty log is its init", CHANGES, unit="sessionDigest", events=[])
    yield pure(
        "events the digest does not care about leave the very same state",
        CHANGES,
        unit="sessionDigest",
        events=log(("turn/start", {"turn": 1}), msg.user(), msg.assistant(), START),
        comment="every flag is false: a new object equal to the old one would read as a change",
    )
    yield pure(
        "a successful compaction/end and a prune change the digest, a failed compaction does not",
        CHANGES,
        unit="sessionDigest",
        events=log(
            msg.user(),
            START,
            ("compaction/end", {"compactionId": "k1", "turn": None, "error": "gave up"}),
            ("compaction/start", {"compactionId": "k2", "turn": None}),
            ("compaction/end", {"compactionId": "k2", "turn": None}),
            PRUNE,
            ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ),
        comment="only the successful end (seq 4) and the prune (seq 5) are changes",
    )
    ended = {"compactionId": "k1", "turn": None}
    yield pure(
        "an event at or below the cursor was folded already and changes nothing",
        CHANGES,
        unit="sessionDigest",
        events=[
            event(3, "compaction/end", ended),
            event(3, "compaction/end", ended),
            event(2, "compaction/end", ended),
        ],
        comment="the cursor moves to seq 3 with the first event; the same seq again and an earlier one are not counted",
    )
    prune_2 = ("compaction/prune", {**PRUNE[1], "shadowedTokenCount": 7})
    yield pure(
        "each successful compaction/end and each prune adds one to its count",
        CHANGES,
        unit="sessionDigest",
        events=log(
            msg.user(),
            START,
            ("compaction/end", {"compactionId": "k1", "turn": None}),
            ("compaction/start", {"compactionId": "k2", "turn": None}),
            ("compaction/end", {"compactionId": "k2", "turn": None}),
            PRUNE,
            prune_2,
        ),
        comment="two of each: the counts reach 2 (one more than the last each time), and the last prune's price is 7",
    )


# --- the projection ops: units from the catalogue, their states, their cache ---------------------

REGISTER = "plan_registration"
FOLD = "fold_projection"
ROW = "decode_cache_row"
DIGEST = {"unit": "sessionDigest"}
LEDGER = {"unit": "turnLedger"}


def _ledger(session: str = "s") -> list[Step]:
    return [ok("state_of", id=session, **LEDGER)]


def _crashed_then_read(unit: dict[str, str] | None = None) -> list[Step]:
    """A flush and a crash, then ``unit``'s state of the stored session "s" (none: just the crash)."""
    read = [ok("state_of_stored", id="s", **unit)] if unit is not None else []
    return [ok("flush", id="s"), ok("crash"), *read]


def engine_cases() -> Cases:
    yield case(
        "a unit registered after the events still reads the state of the whole log",
        FOLD,
        [
            *history(2),
            turn(3),
            append(msg.user("u3", LONG)),
            *tool_steps(3, "c3"),
            ok("prune", id="s", config={"thresholdChars": 400, "headChars": 100, "tailChars": 100}),
            ok("compact_region", id="s", start=1, end=9, attempt=attempt("k1")),
            ok("project", **DIGEST),
            ok("state_of", id="s", **DIGEST),
        ],
        why="state_of first folds the unit up to the session's current seq, so a unit registered late reads the right value",
    )
    yield case(
        "a unit registered after the log's first event reads it",
        FOLD,
        [ok("create", id="s"), turn(1), ok("project", **LEDGER), *_ledger()],
        comment="the unit's cell starts at init, one event behind the log: that event is folded before the read",
    )
    yield case(
        "a unit registered after the log's first event folds it before the next event",
        FOLD,
        [ok("create", id="s"), turn(1), ok("project", **LEDGER), append(msg.user("u1")), *_ledger()],
        comment="the first event the unit is pushed is seq 1: the turn/start at seq 0 is folded first",
    )
    yield case(
        "a unit registered again folds on from its cached row over the events after it",
        FOLD,
        [
            ok("project", **DIGEST),
            ok("project", **LEDGER),
            ok("create", id="s"),
            *closed_turn(1),
            ok("unproject", **LEDGER),
            turn(2),
            ok("project", **LEDGER),
            append(msg.user("u2")),
            *_ledger(),
        ],
        storage="memory",
        comment="the row written at turn 1's turn/end (seq 5) is the new registrant's start; turn 2's start (seq 6) "
        "came while nobody held the key and is folded before seq 7",
    )
    yield case(
        "a key let go by its last registrant reads null while another unit stays registered",
        REGISTER,
        [
            ok("project", **DIGEST),
            ok("project", **LEDGER),
            *history(1),
            ok("unproject", **LEDGER),
            *_ledger(),
            ok("snapshot", id="s"),
        ],
        comment="the registry lives on for sessionDigest; turnLedger's key is gone from it",
    )
    yield case(
        "the digest counts each compaction and prune as it lands",
        FOLD,
        [
            ok("project", **DIGEST),
            *history(2),
            ok("state_of", id="s", **DIGEST),
            fails(Code.COMPACTION_SUMMARY_FAILED, "compact", id="s", attempt=attempt("k1", fail="down")),
            ok("state_of", id="s", **DIGEST),
            ok("compact", id="s", attempt=attempt("k2")),
            ok("state_of", id="s", **DIGEST),
        ],
        comment="a failed compaction counts nothing",
    )
    yield case(
        "state_of a unit nobody registered is null",
        FOLD,
        [*history(1), ok("state_of", id="s", **DIGEST)],
    )
    yield case(
        "snapshot serves the wire units only",
        "derive_wire_keys",
        [
            ok("project", **DIGEST),
            ok("project", **LEDGER),
            *history(1),
            ok("snapshot", id="s"),
            ok("state_of", id="s", **DIGEST),
        ],
    )
    yield case(
        "registrants of one key share it until the last lets go",
        REGISTER,
        [
            ok("project", **LEDGER),
            ok("project", **LEDGER),
            *history(1),
            ok("unproject", **LEDGER),
            ok("snapshot", id="s"),
            ok("unproject", **LEDGER),
            ok("snapshot", id="s"),
        ],
    )
    yield case(
        "a key is refused to a registrant at another stateVersion",
        REGISTER,
        [
            ok("project", **LEDGER),
            fails(Code.PROJECTION_VERSION_CONFLICT, "project", stateVersion=2, **LEDGER),
            *history(1),
            *_ledger(),
        ],
        comment="the refused registrant changes nothing: the key still folds at stateVersion 1",
    )
    yield case(
        "a key registered at stateVersion 2 is refused to a registrant at stateVersion 1",
        REGISTER,
        [
            ok("project", stateVersion=2, **LEDGER),
            fails(Code.PROJECTION_VERSION_CONFLICT, "project", stateVersion=1, **LEDGER),
            *history(1),
            *_ledger(),
        ],
        comment="the refusal does not depend on which stateVersion came first",
    )
    yield case(
        "a unit named at the stateVersion the catalogue defines first is that unit",
        REGISTER,
        [
            ok("project", stateVersion=1, **DIGEST),
            ok("project", stateVersion=1, **LEDGER),
            *history(1),
            *_ledger(),
            ok("state_of", id="s", **DIGEST),
        ],
        comment="sessionDigest is defined at stateVersion 1 and turnLedger at 1 and 2: naming 1 is naming none",
    )
    yield case(
        "a stateVersion that is not a non-negative integer is refused",
        "validate_projection_unit",
        [fails(Code.PROJECTION_UNIT_INVALID, "project", stateVersion=-1, **DIGEST)],
    )
    yield case(
        "a key let go can be registered again at a new stateVersion, which folds with its new meaning",
        REGISTER,
        [
            ok("project", **LEDGER),
            *history(1),
            *_ledger(),
            ok("unproject", **LEDGER),
            ok("project", stateVersion=2, **LEDGER),
            *_ledger(),
        ],
    )
    crash_setup = [ok("project", **LEDGER), ok("create", id="s"), *closed_turn(1)]
    crashed_inside_turn_2 = [*crash_setup, turn(2), step_open(2), *_crashed_then_read()]
    yield case(
        "after a crash a state read from a stale cache row equals a full replay",
        ROW,
        [
            *crash_setup,
            turn(2),
            *answered_step(2),
            *_crashed_then_read(LEDGER),
        ],
        comment="the cache row was written at the turn/end of turn 1; turn 2 reached the log after it",
        storage="file",
    )
    yield case(
        "a stored state folds on from its cache row's cursor, counting nothing twice",
        FOLD,
        [
            ok("project", **DIGEST),
            *history(2),
            compact("k1"),
            *closed_turn(3),
            turn(4),
            *_crashed_then_read(DIGEST),
        ],
        comment="the row written at turn 3's turn/end counts the compaction; a fold of the log from its start on top of it would count it again",
        storage="file",
    )
    yield case(
        "after a crash a state read with no cache row equals a full replay",
        ROW,
        [
            ok("project", **LEDGER),
            ok("create", id="s"),
            turn(1),
            step_open(1),
            *_crashed_then_read(LEDGER),
        ],
        comment="no turn ended, so no cache row was written: the cache is cold",
        storage="file",
    )
    yield case(
        "a cache row written at another stateVersion is dropped and the log refolded",
        ROW,
        [
            *crashed_inside_turn_2,
            ok("unproject", **LEDGER),
            ok("project", stateVersion=2, **LEDGER),
            ok("state_of_stored", id="s", **LEDGER),
        ],
        comment="the row holds {turns} at stateVersion 1; trusting it would answer a state of the wrong shape",
        storage="file",
    )
    yield case(
        "a resumed session's state equals a full replay of its repaired log",
        ROW,
        [*crashed_inside_turn_2, ok("resume", id="s"), *_ledger()],
        storage="file",
    )
    yield case(
        "a closed session's state is read from its stored log",
        ROW,
        [*crash_setup, turn(2), ok("close", id="s"), ok("state_of_stored", id="s", **LEDGER)],
        storage="memory",
    )
    yield case(
        "a session never stored has no stored state",
        ROW,
        [ok("project", **LEDGER), fails(Code.SESSION_NOT_FOUND, "state_of_stored", id="ghost", **LEDGER)],
        storage="memory",
    )


CACHE_FILE: Final = "projections.json"  # where the reference keeps a session's cache record


LYING_ROW: Final[JsonObject] = {
    "ver": 1,
    "seq": 8,
    "val": {"turns": 5},
}  # a full replay of the log counts 1 turn


def _planted(
    record: JsonValue, state_version: int = 1, raw: bytes | None = None, empty: bool = False
) -> list[Step]:
    """A stored log of session ``r`` (one turn, seqs 0-8; ``empty``: its header alone) beside
    ``record`` (or the bytes ``raw``) as its cache record, and the turn ledger registered at
    ``state_version``: a reader that takes a row the rules refuse answers what the row says, a full
    replay 1 turn (0 for the empty log)."""
    files = v4_files(plain_log(encode_header_line(v4_header()), [] if empty else v4_writes()), False)
    (log_path,) = files
    files[f"{log_path.rsplit('/', 1)[0]}/{CACHE_FILE}"] = line(record) if raw is None else raw
    return [
        ok("reset", storage="file", compressed=False, files=encode_files(files)),
        ok("clock", now=NOW),
        ok("project", **LEDGER)
        if state_version == 1
        else ok("project", stateVersion=state_version, **LEDGER),
    ]


def _another_lifecycle(**moved: JsonValue) -> list[Step]:
    """A record written for another lifecycle of the same id (the header's ``moved`` fields
    differ) whose ledger row, at seq 8, counts 5 turns."""
    return _planted(encode_cache_record({**v4_header(), **moved}, {"turnLedger": LYING_ROW}))


def _own_record(row: JsonValue, state_version: int = 1, **fields: JsonValue) -> list[Step]:
    """A record of this very lifecycle holding ``row`` as the ledger's, its own ``fields`` changed."""
    record = {**encode_cache_record(v4_header(), {"turnLedger": row}), **fields}
    return _planted(record, state_version)


def refused_cache_cases() -> Cases:
    """A cache is never trusted over the log (``decode_cache_rows``, ``decode_cache_row``): a record
    of this lifecycle that is malformed, of another format or version, or a row of another
    stateVersion, with a cursor outside the log or a state its unit's schema refuses, is dropped
    and the unit refolds, whatever the row says (5 turns, against the log's 1). A subject that
    keeps no such file reads the log alone: the state is a full replay either way."""
    lying = line(encode_cache_record(v4_header(), {"turnLedger": LYING_ROW}))
    records: list[tuple[str, str, list[Step]]] = [
        ("a cache record that is not an object", "decode_cache_rows", _planted([LYING_ROW])),
        (
            "a cache record cut short, no longer JSON text",
            "decode_cache_rows",
            _planted(None, raw=lying[:-9]),
        ),
        (
            "a cache record whose bytes are not UTF-8",
            "decode_cache_rows",
            _planted(None, raw=lying.replace(b'{"format"', b'{"note":"\xff","format"', 1)),
        ),
        ("a cache record of another format", "decode_cache_rows", _own_record(LYING_ROW, format="dsh-cache")),
        (
            "a cache record of a format named after this one in sort order",
            "decode_cache_rows",
            _own_record(LYING_ROW, format="dsh-session-cache"),
        ),
        ("a cache record of an older version", "decode_cache_rows", _own_record(LYING_ROW, version=0)),
        ("a cache record of a newer version", "decode_cache_rows", _own_record(LYING_ROW, version=2)),
        (
            "a cache record whose version is true, not 1",
            "decode_cache_rows",
            _own_record(LYING_ROW, version=True),
        ),
        (
            "a cache record whose rows are not an object",
            "decode_cache_rows",
            _own_record(LYING_ROW, rows=[LYING_ROW]),
        ),
        ("a cache row without its state", "decode_cache_row", _own_record({"ver": 1, "seq": 8})),
        ("a cache row of an older stateVersion", "decode_cache_row", _own_record({**LYING_ROW, "ver": 0})),
        ("a cache row of a newer stateVersion", "decode_cache_row", _own_record({**LYING_ROW, "ver": 2})),
        (
            "a cache row whose stateVersion is not an integer",
            "decode_cache_row",
            _own_record({**LYING_ROW, "ver": "1"}),
        ),
        (
            "a cache row whose cursor is past the log's last event",
            "decode_cache_row",
            _own_record({**LYING_ROW, "seq": 9}),
        ),
        (
            "a cache row whose cursor is before the first event",
            "decode_cache_row",
            _own_record({**LYING_ROW, "seq": -2}),
        ),
        (
            "a cache row whose cursor is not an integer",
            "decode_cache_row",
            _own_record({**LYING_ROW, "seq": "8"}),
        ),
        (
            "a cache row whose state has a key its schema lacks",
            "is_ledger_v1_state",
            _own_record({**LYING_ROW, "val": {"turns": 5, "steps": 0}}),
        ),
        (
            "a cache row whose state has a count that is not an integer",
            "is_ledger_v1_state",
            _own_record({**LYING_ROW, "val": {"turns": "5"}}),
        ),
        ("a cache row whose state is empty", "is_ledger_v1_state", _own_record({**LYING_ROW, "val": {}})),
        (
            "a stateVersion 2 cache row whose state lacks its step count",
            "is_ledger_v2_state",
            _own_record({"ver": 2, "seq": 8, "val": {"turns": 5}}, 2),
        ),
        (
            "a stateVersion 2 cache row whose state has a key its schema lacks",
            "is_ledger_v2_state",
            _own_record({"ver": 2, "seq": 8, "val": {"turns": 5, "steps": 1, "tools": 0}}, 2),
        ),
        (
            "a stateVersion 2 cache row whose turn count is not an integer",
            "is_ledger_v2_state",
            _own_record({"ver": 2, "seq": 8, "val": {"turns": "5", "steps": 1}}, 2),
        ),
        (
            "a stateVersion 2 cache row whose step count is not an integer",
            "is_ledger_v2_state",
            _own_record({"ver": 2, "seq": 8, "val": {"turns": 5, "steps": -1}}, 2),
        ),
    ]
    for what, rule, steps in records:
        yield case(
            f"a stored state ignores {what}",
            rule,
            [*steps, ok("state_of_stored", id=SESSION, **LEDGER)],
            storage="file",
        )


def lifecycle_cases() -> Cases:
    """A cache record belongs to one lifecycle of a log (``derive_cache_identity``: the header's
    createdAt and cwd). A subject that keeps its record as the reference does is handed one of
    another lifecycle; any other subject reads the log alone. Either way the state is a full replay."""
    for name, moved in (
        ("a session recreated under the same id", {"createdAt": 1}),
        ("a session moved to another cwd", {"cwd": CWD + "-moved"}),
    ):
        yield case(
            f"a stored state ignores the cache record of {name}",
            "derive_cache_identity",
            [*_another_lifecycle(**moved), ok("state_of_stored", id=SESSION, **LEDGER)],
            storage="file",
        )
    no_cwd = {key: value for key, value in v4_header().items() if key != "cwd"}
    yield case(
        "a stored state ignores the cache record of the same session before it had a cwd",
        "derive_cache_identity",
        [
            *_planted(encode_cache_record(no_cwd, {"turnLedger": LYING_ROW})),
            ok("state_of_stored", id=SESSION, **LEDGER),
        ],
        storage="file",
        comment="the record's identity is {createdAt} alone; the log's header has a cwd, so the identities differ",
    )
    yield case(
        "a resumed session's state ignores the cache record of another lifecycle",
        "derive_cache_identity",
        [*_another_lifecycle(createdAt=1), ok("resume", id=SESSION), ok("state_of", id=SESSION, **LEDGER)],
        storage="file",
    )


def resumed_cache_cases() -> Cases:
    """A resumed session's state is folded from a cache row only up to the log's last event. Its
    first read checks the row against the resumed log (the row's cursor may be the last event, not
    one past it); its first appended event checks it against the log before that event; either way
    the events past a usable row's cursor are folded on, none twice and none skipped."""
    past = _own_record({**LYING_ROW, "seq": 9})  # one past the stored log's last event (seq 8)
    yield case(
        "a resumed session's state ignores a cache row whose cursor is one past the log's last event",
        ROW,
        [*past, ok("resume", id=SESSION), ok("state_of", id=SESSION, **LEDGER)],
        storage="file",
        comment="the row claims 5 turns at seq 9; the stored log's last event is seq 8 (the resume appends seq 9 after it), and a replay counts 1",
    )
    yield case(
        "an event appended to a resumed session folds onto a replay of the log, not onto a row past it",
        ROW,
        [*past, ok("resume", id=SESSION), turn(2, SESSION), ok("state_of", id=SESSION, **LEDGER)],
        storage="file",
        comment="turn 2 starts at seq 9: the row at seq 9 was written for another log; the ledger counts 2 turns",
    )
    at_0 = _planted(encode_cache_record(v4_header(), {"turnLedger": {**LYING_ROW, "seq": 0}}), empty=True)
    yield case(
        "a stored state of a log with no events ignores a cache row at seq 0",
        ROW,
        [*at_0, ok("state_of_stored", id=SESSION, **LEDGER)],
        storage="file",
        comment="the log's last seq is -1: a row at 0 is past it, and the replay is init",
    )
    yield case(
        "a resumed log with no events ignores a cache row at seq 0, the seq its resume takes",
        ROW,
        [*at_0, ok("resume", id=SESSION), ok("state_of", id=SESSION, **LEDGER)],
        storage="file",
        comment="the resume appends session/end-seed at seq 0; the row was written for another log's seq 0",
    )
    before_first = _own_record({"ver": 1, "seq": -1, "val": {"turns": 0}})
    yield case(
        "an event appended to a resumed session folds the whole log after a row from before its first event",
        FOLD,
        [*before_first, ok("resume", id=SESSION), turn(2, SESSION), ok("state_of", id=SESSION, **LEDGER)],
        storage="file",
        comment="the row is honest (no event folded, 0 turns): seqs 0-8 are folded before turn 2's start, 2 turns",
    )
    yield case(
        "a state read after a crash folds the one event its cache row is behind",
        FOLD,
        [
            ok("project", **LEDGER),
            ok("create", id="s"),
            *closed_turn(1),
            turn(2),
            ok("flush", id="s"),
            ok("crash"),
            ok("resume", id="s"),
            *_ledger(),
        ],
        storage="file",
        comment="the row was written at turn 1's turn/end; turn 2's start is the one durable event after it",
    )


def cache_write_cases() -> Cases:
    """With no unit registered a subject keeps no cache, so nothing writes early: a fault armed for
    the next write is met by the next flush, as the model says. (With a unit registered a cache may
    be written, and the log flushed for it, whenever the subject likes: PROTOCOL.md, "Engine ops".)"""
    yield case(
        "a key let go by its last registrant leaves nothing writing a cache at the next turn/end",
        REGISTER,
        [
            ok("project", **LEDGER),
            ok("unproject", **LEDGER),
            ok("create", id="s"),
            ok("flush", id="s"),
            turn(1),
            ok("fail_next", fsOp="write", errno="EIO"),
            turn_end(1),
            fails(Code.STORAGE_IO, "flush", id="s"),
            ok("flush", id="s"),
            *_ledger(),
        ],
        storage="file",
        comment="no unit is registered, so no cache is kept: the turn/end writes nothing and the fault is the flush's",
    )


def cache_place_cases() -> Cases:
    """Whose record a session's reads may take: its own, or none yet. A live session on file storage
    that was never flushed has no stored log for a record to lie beside, and reads its state from
    its events; two sessions of one cwd created at the same instant (the same lifecycle identity,
    ``derive_cache_identity``) never read each other's rows."""
    yield case(
        "a live session never flushed reads its state from its events, a unit registered on file storage",
        FOLD,
        [ok("project", **LEDGER), ok("create", id="s"), turn(1), *_ledger()],
        storage="file",
        comment="nothing of the session is stored yet: there is no cache record to look for",
    )
    users = [append(msg.user(f"b{n}"), "b") for n in range(12)]
    yield case(
        "a stored state never folds from the cache rows of another session of the same cwd and instant",
        "derive_cache_identity",
        [
            ok("project", **LEDGER),
            ok("create", id="a"),
            ok("create", id="b"),
            *closed_turn(1, "b"),
            turn(2, "b"),
            *users,
            ok("close", id="b"),
            *closed_turn(1, "a"),
            *closed_turn(2, "a"),
            *closed_turn(3, "a"),
            ok("state_of_stored", id="b", **LEDGER),
        ],
        storage="file",
        comment="a's row after its third turn (seq 17, 3 turns) has b's identity, createdAt and cwd, and a "
        "cursor inside b's log (19 events); b's own replay counts 2 turns",
    )


def resumed_lines_cases() -> Cases:
    """A resumed log may be kept as its stored lines with the appended events after them; a unit
    registered on it late folds the events before a pushed one across both, each once."""
    files = v4_files(plain_log(encode_header_line(v4_header()), v4_writes()), False)
    yield case(
        "a unit registered on a resumed session after an event was appended counts the next turn once",
        FOLD,
        [
            ok("reset", storage="file", compressed=False, files=encode_files(files)),
            ok("clock", now=NOW),
            ok("resume", id=SESSION),
            append(msg.user("u9"), SESSION),
            ok("project", **LEDGER),
            turn(2, SESSION),
            ok("state_of", id=SESSION, **LEDGER),
        ],
        storage="file",
        comment="the stored log (seqs 0-8) holds turn 1; the end-seed (9) and a user message (10) follow it; "
        "the unit's first push, turn 2's start at seq 11, folds seqs 0-10 first: 2 turns",
    )


def refused_digest_row_cases() -> Cases:
    """The session digest's rows are held to its schema as the ledger's are (``is_digest_state``):
    exactly its three keys, two counts and a price that is null or a count. A row the schema
    refuses is dropped and the digest refolds (0 compactions for this log, against the row's 5)."""
    good: JsonObject = {"compactions": 5, "prunes": 0, "lastShadowedTokens": None}
    states: list[tuple[str, JsonValue]] = [
        ("has a key its schema lacks", {**good, "turns": 1}),
        ("lacks its price", {"compactions": 5, "prunes": 0}),
        ("has a negative compaction count", {**good, "compactions": -1}),
        ("has a negative prune count", {**good, "prunes": -1}),
        ("has a price that is a string", {**good, "lastShadowedTokens": "7"}),
    ]
    for what, state in states:
        record = encode_cache_record(v4_header(), {"sessionDigest": {"ver": 1, "seq": 8, "val": state}})
        steps = _planted(record)
        yield case(
            f"a stored state ignores a digest cache row whose state {what}",
            "decode_cache_row",
            [*steps[:-1], ok("project", **DIGEST), ok("state_of_stored", id=SESSION, **DIGEST)],
            storage="file",
            why="a cache row whose val fails its unit's stateSchema is dropped and the unit refolds from "
            "the log (SPEC-DECISIONS D7)",
        )


cases: Final = chained(
    pure_cases,
    engine_cases,
    lifecycle_cases,
    resumed_cache_cases,
    refused_cache_cases,
    cache_write_cases,
    cache_place_cases,
    resumed_lines_cases,
    refused_digest_row_cases,
)
