"""provenance: what ``sourceEventSeqs`` may cite (notes/dsh-session-core §3.6).

Covers the shape of the list (an array of distinct event seqs, empty only on an assistant/message),
that an event cites only earlier events, that a replace cites every node it shadows, and the order
in which those checks decide the code.
"""

from __future__ import annotations

from typing import Final

from conformance.cases import msg
from conformance.cases.build import OK, Cases, Step, append, case, chained, event, ok, refused, replace, state
from spec.codes import MEANING, Code
from spec.log.json import JsonObject, JsonValue

RULE = "validate_provenance"


def two_nodes() -> list[Step]:
    """A session "s" whose surface is [0, 1]: user, assistant."""
    return [ok("create", id="s"), append(msg.user("u1")), append(msg.assistant("a1"))]


def cite(kind: str, sources: JsonValue, op: JsonValue = "append") -> JsonObject:
    """An append of a ``kind`` message with surface op ``op``, citing ``sources``."""
    data = {
        "user/message": msg.user("u9"),
        "assistant/message": msg.assistant("a9"),
        "tool/result": msg.result("c9"),
    }[kind]
    return {
        "op": "append",
        "id": "s",
        "type": kind,
        "data": data,
        "surfaceOp": op,
        "sourceEventSeqs": sources,
    }


def citing_cases() -> Cases:
    yield case(
        "an append may cite earlier events",
        RULE,
        [*two_nodes(), Step(cite("user/message", [0, 1]), OK), state()],
        why="sourceEventSeqs, when present, lists distinct events logged earlier "
        "(notes/dsh-session-core §3.6)",
    )
    yield case(
        "an assistant/message may cite nothing (a known-empty provider stream)",
        RULE,
        [*two_nodes(), Step(cite("assistant/message", []), OK)],
        why=MEANING[Code.PROVENANCE_EMPTY],
    )


# name, code, the citing type, sourceEventSeqs, comment
REFUSED: Final[list[tuple[str, Code, str, JsonValue, str | None]]] = [
    (
        "sourceEventSeqs that is a number is not an array",
        Code.PROVENANCE_NOT_ARRAY,
        "user/message",
        0,
        None,
    ),
    (
        "sourceEventSeqs that is an object is not an array",
        Code.PROVENANCE_NOT_ARRAY,
        "user/message",
        {"0": 0},
        None,
    ),
    (
        "sourceEventSeqs null is present and not an array",
        Code.PROVENANCE_NOT_ARRAY,
        "user/message",
        None,
        "null is not 'not passed': only an absent key is",
    ),
    ("a user/message may not cite an empty list", Code.PROVENANCE_EMPTY, "user/message", [], None),
    ("a tool/result may not cite an empty list", Code.PROVENANCE_EMPTY, "tool/result", [], None),
    ("a negative seq is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [-1], None),
    ("a fractional seq is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [0.5], None),
    ("a string is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", ["0"], None),
    ("null is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [None], None),
    ("a boolean is not a seq", Code.PROVENANCE_NOT_SEQ, "user/message", [True], None),
    (
        "every entry is checked to be a seq before any other check",
        Code.PROVENANCE_NOT_SEQ,
        "user/message",
        [9, 9, "x"],
        "9 is a later event and cited twice, yet the string at the end decides the code",
    ),
    ("a seq may be cited only once", Code.PROVENANCE_DUPLICATE, "user/message", [0, 0], None),
    (
        "duplicates are found before citations of later events",
        Code.PROVENANCE_DUPLICATE,
        "user/message",
        [9, 0, 0],
        "9 is a later event and comes first, yet the duplicate 0 decides the code",
    ),
    (
        "an event may not cite itself",
        Code.PROVENANCE_NOT_EARLIER,
        "user/message",
        [2],
        "the append gets seq 2",
    ),
    ("an event may not cite a later event", Code.PROVENANCE_NOT_EARLIER, "user/message", [0, 5], None),
]


def refused_cases() -> Cases:
    for name, code, kind, sources, comment in REFUSED:
        yield case(
            name,
            RULE,
            [*two_nodes(), Step(cite(kind, sources), str(code)), state()],
            why=MEANING[code],
            comment=comment,
        )


def replace_cases() -> Cases:
    shadowed = MEANING[Code.PROVENANCE_MISSING_SHADOWED]
    yield case(
        "a replace without sourceEventSeqs does not cite what it shadows",
        RULE,
        [
            *two_nodes(),
            refused(Code.PROVENANCE_MISSING_SHADOWED, append(msg.user("x"), surfaceOp=replace(0, 1))),
        ],
        why=shadowed,
    )
    yield case(
        "a replace must cite every node it shadows",
        RULE,
        [*two_nodes(), Step(cite("user/message", [0], replace(0, 1)), str(Code.PROVENANCE_MISSING_SHADOWED))],
        why=shadowed,
    )
    yield case(
        "a replace may cite more than it shadows",
        RULE,
        [*two_nodes(), Step(cite("user/message", [0, 1], replace(1, 1)), OK), state()],
        why=shadowed,
    )
    yield case(
        "a replace citing an empty list is refused for the empty list first",
        RULE,
        [*two_nodes(), Step(cite("user/message", [], replace(0, 1)), str(Code.PROVENANCE_EMPTY))],
        why=MEANING[Code.PROVENANCE_EMPTY],
        comment="the empty list also misses both shadowed nodes; the expected code says which check "
        "comes first",
    )


MANY: Final = 300  # cited seqs: lengths past 256, the integers CPython keeps one object of each


def many_cases() -> Cases:
    yield case(
        f"an append may cite {MANY} distinct earlier events",
        RULE,
        [
            ok("create", id="s", seed=[event(seq, "custom/x", {}) for seq in range(MANY)]),
            Step(cite("user/message", list(range(MANY))), OK),
        ],
        comment="the seed's events are log-only; the distinct test compares two lengths of 300",
    )


cases: Final = chained(citing_cases, refused_cases, replace_cases, many_cases)
