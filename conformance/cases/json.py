"""json: the lossless JSON domain event data lives in (SPEC-DECISIONS D5; notes/dsh-session-core §5.2).

Covers what ``data`` an append accepts (any JSON value, ``null`` included; an absent value is not
JSON) and that what is committed is exactly what was sent: text, safe integers, fractions,
nesting and the empty key survive the round trip. Then the edges of JSON *text*, as a stored line
holds them (:mod:`spec.format.json_text`; docs/choices.md "JSON text's edges"): a number past the
largest double is damage, never Infinity; one below the smallest reads as 0 and one with more
digits than a double holds as the nearest double; a byte order mark and a digit outside ASCII
make a line unparsable. Escaped lone and inverted surrogates are kept, as JSON.parse keeps them:
a vector file cannot hold a lone surrogate, so pure-drt's edges try them
(:func:`conformance.drt_edges.jsonl_edges`). Bytes that are not UTF-8 (overlong, UTF-16) cannot
be said in a vector's text: the files family places them.
"""

from __future__ import annotations

import json
from typing import Final

from conformance.cases.build import Cases, append, case, fails, ok, pure, state
from conformance.cases.storage.naming import V4_LINE
from spec.codes import Code

RULE = "snapshot_event_data"
JSONL = "spec.framing.decode_jsonl_log"
TEXT_RULE = (
    "a stored line is read as a JavaScript peer reads it, or refused: every number a finite double, "
    "every string the UTF-16 code units its escapes name (SPEC-DECISIONS D5)"
)


def cases() -> Cases:
    yield from value_cases()
    yield from text_cases()


def value_cases() -> Cases:
    yield case(
        "an append without data is rejected: an absent value is not JSON",
        RULE,
        [ok("create", id="s"), fails(Code.DATA_NOT_JSON, "append", id="s", type="turn/start"), state()],
        comment="an absent key is JavaScript's undefined; the protocol passes the absence to the rule",
    )
    yield case(
        "data null is JSON and is kept",
        RULE,
        [ok("create", id="s"), append(None, type="custom/null"), state()],
    )
    yield case(
        "data may be a string, a number or an array",
        RULE,
        [
            ok("create", id="s"),
            append("text", type="custom/a"),
            append(42, type="custom/b"),
            append([1, "two", None], type="custom/c"),
        ],
    )
    yield case(
        "event data keeps text, safe integers, fractions and nesting exactly",
        RULE,
        [
            ok("create", id="s"),
            append(
                {
                    "text": 'h\u00e9llo \u2713 \U0001d11e "quoted" \\ \n tab\t',
                    "max": 9007199254740991,
                    "min": -9007199254740991,
                    "fraction": 1.5,
                    "zero": 0,
                    "flags": [True, False, None],
                    "nested": {"a": [[], {}, [1, [2, [3, {"deep": "yes"}]]]]},
                    "": "empty key",
                },
                type="custom/values",
            ),
            state(),
        ],
        comment="the largest and smallest safe integers, an astral character and escapes: "
        "the values where JSON libraries differ most",
    )

    yield case(
        "data nested 100 levels deep is kept exactly",
        RULE,
        [
            ok("create", id="s"),
            append(
                nested(100, {"k": [True, None, "s", 1.5, -(2**53 - 1), [], {}], "": {}}), type="custom/deep"
            ),
            append(nested(99, [[{"a": {"b": [None]}}], "y"]), type="custom/deep"),
            state(),
        ],
        why="D6: deep JSON never meets a recursion limit; what is committed is exactly what was sent (D5)",
        comment="alternately an object and an array at each level, as an agent's nested tool arguments are",
    )

    yield case(
        "data may hold a zero and negative fractions written as floats",
        RULE,
        [
            ok("create", id="s"),
            append({"zero": 0.0, "half": -0.5, "list": [-1.5, 0.0]}, type="custom/floats"),
        ],
    )


def nested(depth: int, bottom: object) -> object:
    """``bottom`` inside ``depth`` containers, an object and an array by turns, each with a sibling."""
    value = bottom
    for level in range(depth):
        value = {"level": level, "inner": value} if level % 2 else [level, value, "x"]
    return value


def stored(data_text: str, prefix: str = "") -> str:
    """A plain log: the header line and one event whose ``data`` is the raw JSON text given."""
    head = json.dumps(V4_LINE, separators=(",", ":"))
    return f'{head}\n{prefix}{{"type":"custom/x","seq":0,"time":0,"data":{data_text}}}\n'


DEEP: Final = (
    1_500  # levels: past CPython's default recursion limit (1,000), where the reader turns iterative
)


def deep_text(bottom: str, depth: int = DEEP) -> str:
    """Raw JSON text: ``bottom`` (itself raw text) inside ``depth`` containers, an array at most
    levels and an object of two keys at every fifth, spaced unevenly so that its tokens start at
    odd and even offsets alike."""
    text = bottom
    for level in range(depth):
        pad = " " * (level % 3)
        text = f'{{"level" :{pad}{level},"inner":{text} }}' if level % 5 == 0 else f"[{pad}{text},{level}]"
    return text


# every kind of token the iterative reader reads, at eight offsets in turn (a token's end is
# computed from its start: a mistake there shows only at some offsets)
DEEP_BOTTOM: Final = (
    "["
    + ",".join(
        " " * pad + '{}, { },null,true,false,1.5,2e1,-0,"s\\u00e9",{"a":[ ],"b" :null, "c":{"d":[]}}'
        for pad in range(8)
    )
    + "]"
)


def text_cases() -> Cases:
    for what, number in (
        ("an exponent", "1e999999"),
        ("a negative exponent form", "-1.8e308"),
        ("an integer literal of 400 digits", "1" + "0" * 400),
    ):
        yield pure(
            f"a stored number past the largest double, {what}, is damage, never Infinity",
            JSONL,
            Code.CORRUPT_LOG,
            why=TEXT_RULE,
            comment="JSON.parse reads Infinity here, which no JSON text can write back (D5): refused",
            text=stored(f"[{number}]"),
        )
    yield pure(
        "a stored number below the smallest double reads as 0, as JavaScript reads it",
        JSONL,
        why=TEXT_RULE,
        text=stored("[1e-400,-1e-400]"),
    )
    yield pure(
        "a stored negative zero reads as 0, and only it: -1.0 stays -1",
        JSONL,
        why=TEXT_RULE,
        comment="-0 has no place in the domain (D5); the other negative numbers keep their sign",
        text=stored("[-0.0,-0,-1.0,-1e0,-0.5]"),
    )
    yield pure(
        "a stored number with more digits than a double holds reads as the nearest double",
        JSONL,
        why=TEXT_RULE,
        comment="0.1 with 34 digits and 2**53 + 1 both round, as JSON.parse rounds them",
        text=stored("[0.1000000000000000055511151231257827,9007199254740993]"),
    )
    yield pure(
        "a stored line that begins with a byte order mark is damage",
        JSONL,
        Code.CORRUPT_LOG,
        why=TEXT_RULE,
        comment="JSON.parse refuses U+FEFF before a value; a Python reader given bytes would skip it",
        text=stored("{}", prefix="\ufeff"),
    )
    yield pure(
        "a header line that begins with a byte order mark is not a header",
        JSONL,
        Code.HEADER_LINE_INVALID,
        why=TEXT_RULE,
        text="\ufeff" + stored("{}"),
    )
    # A vector cannot hold a value nested this deep (its own JSON tools recurse), so the deep text
    # is a header line and the answer a code: the header must read whole for the reader to reach
    # the damaged record after it (CORRUPT_LOG); a header read wrong is HEADER_LINE_INVALID.
    yield pure(
        "a header line nested past the recursion limit reads whole, every kind of token at its depth",
        JSONL,
        Code.CORRUPT_LOG,
        why=TEXT_RULE,
        comment="D6: nesting has no limit but the text's length; empty containers, literals, fractions, "
        "exponents, escapes and whitespace 1,500 levels deep; the record after it is damaged",
        text=f"{deep_text(DEEP_BOTTOM)}\nnot json\n",
    )
    yield pure(
        "a header line nested past the recursion limit with data after its value is not a header",
        JSONL,
        Code.HEADER_LINE_INVALID,
        why=TEXT_RULE,
        text=f"{deep_text('[]')} x\nnot json\n",
    )
    yield pure(
        "a digit outside ASCII is not a JSON digit",
        JSONL,
        Code.CORRUPT_LOG,
        why=TEXT_RULE,
        text=stored("[\u0661]"),
    )
