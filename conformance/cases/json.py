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
DECODE = "spec.json_text.decode_json_text"
ENCODE = "spec.json_text.encode_json_text"
TEXT_RULE = (
    "a stored line is read as a JavaScript peer reads it, or refused: every number a finite double, "
    "every string the UTF-16 code units its escapes name (SPEC-DECISIONS D5)"
)


def cases() -> Cases:
    yield from value_cases()
    yield from text_cases()
    yield from reader_cases()
    yield from deep_reader_cases()
    yield from writer_cases()


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
                nested(100, {"k": [True, None, "s", 1.5, -(2**53 - 1), 2**53 - 1, [], {}], "": {}}),
                type="custom/deep",
            ),
            append(nested(99, [[{"a": {"b": [None]}}], "y"]), type="custom/deep"),
            state(),
        ],
        why="D6: deep JSON never meets a recursion limit; what is committed is exactly what was sent (D5)",
        comment="alternately an object and an array at each level, as an agent's nested tool arguments are",
    )

    yield case(
        "file storage under a byte bound: data may be a string, null or a fraction, each written as its line",
        RULE,
        [
            ok("create", id="s"),
            append("text", type="custom/a"),
            append(None, type="custom/b"),
            append(0.25, type="custom/c"),
            ok("crash"),
            ok("read", id="s"),
        ],
        storage="file",
        batch={"batchMaxBytes": 150},
        comment="a value that is not a container is copied as it is; each line is counted against the "
        "bound as it is appended (the third brings the buffer past 150 bytes and writes all three)",
    )
    deep_seed = [{"type": "custom/deep", "seq": 0, "time": 0, "data": nested(100, [0.5])}]
    yield case(
        "a seeded event's data nested 100 levels deep, a fraction at its bottom, is kept exactly",
        RULE,
        [ok("create", id="s", seed=deep_seed), state()],
        why="D6: a seed's deep JSON never meets a recursion limit either; what is committed is what was sent (D5)",
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
    odd and even offsets alike. Each level's number follows its inner value: a reader that
    recurses meets no number before it gives up (a number it reads near its limit calls a hook
    there, which a line tracer's own call can then not follow: the mutation lane's coverage map
    would lose the iterative reader's lines)."""
    text = bottom
    for level in range(depth):
        pad = " " * (level % 3)
        text = f'{{"inner":{text} ,"level" :{pad}{level}}}' if level % 5 == 0 else f"[{pad}{text},{level}]"
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


def utf8(text: str) -> list[int]:
    """``text`` as the byte values of its UTF-8 form (the ``bytes`` input of ``decode_json_text``)."""
    return list(text.encode("utf-8"))


def reader_cases() -> Cases:
    """The reader itself, called on one text (``decode_json_text``): each edge of
    docs/choices.md "JSON text's edges", as a string and as bytes."""
    yield pure(
        "a JSON text reads as its value, every kind of token and whitespace between them",
        DECODE,
        why=TEXT_RULE,
        text=' {"a" : [1, -2.5, 3e2, true, false, null, "s\\u00e9\\n", {}, []] ,\t"": {"b":"é"}}\r\n',
    )
    yield pure(
        "the same text given as UTF-8 bytes reads as the same value",
        DECODE,
        why=TEXT_RULE,
        bytes=utf8('{"é":["𝄞", "✓"], "n": -0.5}'),
    )
    for what, raw in (
        ("a lone high surrogate", "\\ud800"),
        ("a lone low surrogate", "\\udfff"),
        ("an inverted pair", "\\udc00\\ud800"),
    ):
        yield pure(
            f"an escaped lone surrogate is kept as the code unit it names: {what}",
            DECODE,
            why=TEXT_RULE,
            comment="JSON.parse keeps it: a JavaScript string is UTF-16 code units",
            text=f'["{raw}", "é{raw}"]',
        )
    yield pure(
        "a string holding a raw surrogate code point is not UTF-8 text",
        DECODE,
        Code.JSON_NOT_UTF8,
        why=TEXT_RULE,
        comment="what a lenient decode makes of bytes that are not UTF-8; no UTF-8 text decodes to it",
        text='["é", "\ud800"]',
    )
    for what, data in (
        ("a byte that never starts a character", [0x5B, 0xFF, 0x5D]),
        ("an overlong encoding", [0x22, 0xC0, 0xAF, 0x22]),
        ("an encoded surrogate", [0x22, 0xED, 0xA0, 0x80, 0x22]),
        ("a character cut short", [0x22, 0xC3, 0x22]),
        ("UTF-16 with its byte order mark", [0xFF, 0xFE, 0x5B, 0x00, 0x5D, 0x00]),
    ):
        yield pure(
            f"bytes that are not UTF-8 are refused: {what}",
            DECODE,
            Code.JSON_NOT_UTF8,
            why=TEXT_RULE,
            bytes=data,
        )
    yield pure(
        "UTF-16 bytes without a byte order mark are not JSON",
        DECODE,
        Code.JSON_TEXT_INVALID,
        why=TEXT_RULE,
        comment="valid UTF-8 (NUL bytes and ASCII), which is not one JSON value",
        bytes=[0x5B, 0x00, 0x5D, 0x00],
    )
    yield pure(
        "a text that begins with a byte order mark is refused",
        DECODE,
        Code.JSON_BYTE_ORDER_MARK,
        why=TEXT_RULE,
        text="﻿{}",
    )
    yield pure(
        "bytes that begin with a byte order mark are refused",
        DECODE,
        Code.JSON_BYTE_ORDER_MARK,
        why=TEXT_RULE,
        comment="a Python reader given bytes would skip EF BB BF; JSON.parse refuses U+FEFF",
        bytes=[0xEF, 0xBB, 0xBF, 0x7B, 0x7D],
    )
    for what, number in (
        ("an exponent", "1e309"),
        ("a negative number", "-1e309"),
        ("an integer literal of 400 digits", "1" + "0" * 400),
        ("an integer literal of 5,000 digits", "9" * 5_000),
        ("a negative integer literal of 5,000 digits", "-" + "9" * 5_000),
    ):
        yield pure(
            f"a number past the largest double is refused, never Infinity: {what}",
            DECODE,
            Code.JSON_NUMBER_OUT_OF_RANGE,
            why=TEXT_RULE,
            comment="a literal longer than Python's int() reads (4,300 digits) is still a number: out of range",
            text=f"[{number}]",
        )
    yield pure(
        "numbers below the smallest double, and -0, read as 0",
        DECODE,
        why=TEXT_RULE,
        text="[1e-400, -1e-400, -0, -0.0, 0e5]",
    )
    yield pure(
        "integers at the safe bound stay integers; past it they read as the nearest double",
        DECODE,
        why=TEXT_RULE,
        comment="16 digits either side of the bound, and literals of 17 and 30 digits",
        text="[9007199254740991, -9007199254740991, 9007199254740993, -9007199254740993, "
        "1000000000000001, 12345678901234567, 123456789012345678901234567890]",
    )
    for what, text in (
        ("NaN", "[NaN]"),
        ("Infinity", "[Infinity]"),
        ("minus Infinity", "[-Infinity]"),
        ("data after the value", "{} x"),
        ("a second value", "1 2"),
        ("nothing", ""),
        ("only whitespace", " \n"),
        ("a trailing comma", "[1,]"),
        ("a single-quoted string", "['a']"),
        ("a leading zero", "[01]"),
        ("a digit outside ASCII", "[١]"),
    ):
        yield pure(
            f"a text that is not one JSON value is refused: {what}",
            DECODE,
            Code.JSON_TEXT_INVALID,
            why=TEXT_RULE,
            text=text,
        )


DEEP_RULE: Final = (
    "nesting has no limit but the text's length: a text nested past the recursion limit is read "
    "whole, every token at its depth, and refused where it stops being JSON (SPEC-DECISIONS D6)"
)


def containers(bottom: str, depth: int = DEEP) -> str:
    """``bottom`` inside ``depth`` containers: arrays, with an object of one key at every third
    level, and nothing before the inner value but its opening (no number a recursing reader would
    read near its limit: see :func:`deep_text`)."""
    text = bottom
    for level in range(depth):
        text = f'{{"k{level % 4}" : {text}}}' if level % 3 == 0 else f"[ {text} ]"
    return text


# every kind of token the iterative reader reads, each followed by more (keys of one character,
# none and an escaped quote among them): the number past the largest double at the very end is
# reached only by a reader that read all the rest right
DEEP_TOKENS: Final = (
    '[{}, { }, [ ], null ,true, false,1.5, -2, 3e1, -0.25E-1, 0, "s\\u00e9\\"", "", '
    '{"a":[null], "b" : {"c":{}} , "d":"e", "": 1, "\\"": 2}, [[true],[false],[null]], 10, 1e999]'
)


def deep_reader_cases() -> Cases:
    yield pure(
        "a text nested past the recursion limit is read to its end: every kind of token at its depth",
        DECODE,
        Code.JSON_NUMBER_OUT_OF_RANGE,
        why=DEEP_RULE,
        comment="a vector cannot hold a value this deep, so the text ends in a number past the largest "
        "double, which only a reader that read all before it right reaches",
        text=containers(DEEP_TOKENS),
    )
    yield pure(
        "a text nested past the recursion limit whose last value closes it reads to its end",
        DECODE,
        Code.JSON_NUMBER_OUT_OF_RANGE,
        why=DEEP_RULE,
        text="[" + containers('[true, null, false, "x", {}]') + ' , {"z" : [1e999]}]',
    )
    for what, bottom in (
        ("data after the value", None),
        ("a missing closer", "]"),
        ("a trailing comma in an array", "[1,]"),
        ("a trailing comma in an object", '{"a":1,}'),
        ("a key that is not a string", "{1:2}"),
        ("a missing colon", '{"a" 1}'),
        ("a missing comma", "[1 2]"),
        ("a closer of the wrong kind", '{"a":1]'),
        ("an array closed as an object", "[1}"),
        ("a literal cut short", "[nul]"),
        ("a misspelt literal", "[tru]"),
        ("false cut short", "[fals]"),
        ("a lone minus", "[-]"),
        ("a fraction without digits", "[1.]"),
        ("an exponent without digits", "[1e]"),
        ("a leading zero", "[01]"),
        ("NaN", "[NaN]"),
        ("a bad escape", '["\\x"]'),
        ("a string left open", '["abc'),
        ("a key left open", '{"abc'),
        ("nothing where a value belongs", "[,]"),
    ):
        if bottom is None:
            text = containers("[]") + " x"
        elif bottom == "]":
            text = containers("[]")[:-1]
        else:
            text = containers(bottom)
        yield pure(
            f"a text nested deep is refused where it stops being JSON: {what}",
            DECODE,
            Code.JSON_TEXT_INVALID,
            why=DEEP_RULE,
            text=text,
        )


WRITE_RULE: Final = (
    "a value is written as one compact line: keys in the value's order, no spaces, non-ASCII raw, "
    "a lone surrogate as a lowercase escape, as JSON.stringify writes it (SPEC-DECISIONS D5)"
)


def writer_cases() -> Cases:
    yield pure(
        "a value is written as one compact line, its keys in the value's own order",
        ENCODE,
        why=WRITE_RULE,
        value={"b": 1, "a": [True, False, None, -2, 0.5], "": {}, "c": [], "d": "x"},
    )
    yield pure(
        "non-ASCII text is written raw and only what JSON must escape is escaped",
        ENCODE,
        why=WRITE_RULE,
        value={"é": "héllo ✓ 𝄞", "q": '"\\ \n\t\u0001/\u007f'},
    )
    yield pure(
        "a lone surrogate is written as a lowercase escape, in keys and values, beside raw non-ASCII",
        ENCODE,
        why=WRITE_RULE,
        comment="an escape is the only way UTF-8 text can hold one; JSON.stringify writes it so",
        value={"s": "a\ud800b\udfff é", "\udc00\ud800": ["\udbff"]},
    )
    yield pure("a string alone is written as a string", ENCODE, why=WRITE_RULE, value="é\ud83d")
