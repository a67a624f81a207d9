"""spill: which limit a spill policy runs with, and what a tool result that passes it leaves in the
log (SPEC-DECISIONS D8; seed 002 "排水"; notes/dsh-compaction-projection §10.2).

Covers the default — the seed's base configuration, 12500 tokens, wherever a spill store is
configured, and no spilling without a store — how a configuration turns spill off or sets another
limit, and the limits that are refused (pure vectors); then, through the engine op ``spill``, which
results spill (a top-level, all-text result above the limit; never the ``read`` tool's, never a
nested call's), what the log keeps (a head, a tail and the notice naming where the rest is), that
the saved text reads back byte for byte, and that spill is best effort.
"""

from __future__ import annotations

from typing import Any, Final

from conformance.cases import msg
from conformance.cases.build import Cases, Step, append, case, chained, fails, ok, pure, turn
from spec.codes import Code
from spec.log.json import JsonValue
from spec.shrink.spill import (
    BASE_MAX_INLINE_TOKENS,
    SPILL_SEPARATOR,
    derive_memory_spill_locator,
    derive_spill_notice,
    derive_spill_preview,
)
from spec.shrink.tokens import BLOCK_OVERHEAD, CHARS_PER_TOKEN, estimate_content, utf16_length
from spec.wire_engine import with_tool_result_content

LIMIT = "spec.spill.plan_max_inline_tokens"


def pure_cases() -> Cases:
    yield pure(
        "spill is on by default at 12500 tokens where a spill store is configured", LIMIT, hasStore=True
    )
    yield pure(
        "without a spill store nothing spills by default",
        LIMIT,
        hasStore=False,
        comment="there is nowhere to put the whole text, so the default is no limit at all",
    )
    yield pure("maxInlineTokens null turns spill off", LIMIT, maxInlineTokens=None, hasStore=True)
    yield pure("a configured limit replaces the default", LIMIT, maxInlineTokens=300, hasStore=True)
    yield pure("a limit of 0 spills every result that can spill", LIMIT, maxInlineTokens=0, hasStore=True)
    for name, value in (("a negative limit is refused", -1), ("a fractional limit is refused", 1.5)):
        yield pure(name, LIMIT, Code.SPILL_CONFIG_INVALID, maxInlineTokens=value, hasStore=True)
    yield pure(
        "a limit that is a string is refused",
        LIMIT,
        Code.SPILL_CONFIG_INVALID,
        maxInlineTokens="12500",
        hasStore=True,
    )


# --- the spill op: a tool result entering the log through the policy (conformance/PROTOCOL.md) ---

PREVIEW = "derive_spill_preview"
CANDIDATE = "is_spill_candidate"
ASTRAL = "naïve 😀 中文 " * 300  # 2-, 4- and 3-byte UTF-8, a surrogate pair in UTF-16
LOCATOR_1 = "memory://spill/session-043a718774c5/000000000001-grep.txt"  # the first text saved for session s


def open_call(call: str = "c1", session: str = "s") -> list[Step]:
    return [
        ok("create", id=session),
        turn(session=session),
        append({"turn": 1, "step": 1}, session, type="step/start"),
        append(msg.assistant("a1", None, (call,)), session, surfaceOp="append"),
        append({"turn": 1, "step": 1, "callId": call, "name": "grep"}, session, type="tool/call"),
    ]


def _spill(text: str, tool: str = "grep", session: str = "s", **settings: Any) -> Step:
    return ok("spill", id=session, toolName=tool, data=msg.result("c1", text), **settings)


def next_call(call: str, step: int, session: str = "s") -> list[Step]:
    """The step before ends and step ``step`` of turn 1 calls grep as ``call``."""
    return [
        append({"turn": 1, "step": step - 1}, session, type="step/end"),
        append({"turn": 1, "step": step}, session, type="step/start"),
        append(msg.assistant(f"a{step}", None, (call,)), session, surfaceOp="append"),
        append({"turn": 1, "step": step, "callId": call, "name": "grep"}, session, type="tool/call"),
    ]


def _spill_blocks(blocks: list[JsonValue]) -> Step:
    """A grep result of ``blocks`` against a limit of 200 tokens."""
    data = with_tool_result_content(msg.result("c1"), blocks)
    return ok("spill", id="s", toolName="grep", maxInlineTokens=200, data=data)


def engine_cases() -> Cases:
    yield case(
        "a result above the limit is saved whole; the log keeps a head, a tail and where the rest is",
        PREVIEW,
        [
            *open_call(),
            _spill("x" * 4000, maxInlineTokens=200),
            ok("spill_read", locator=LOCATOR_1),
            ok("state", id="s"),
        ],
        comment="the surface sees the bounded text from the start: nothing is rewritten later",
    )
    yield case(
        "a spilled text reads back byte for byte, multi-byte and astral characters included",
        "derive_memory_spill_locator",
        [*open_call(), _spill(ASTRAL, maxInlineTokens=200), ok("spill_read", locator=LOCATOR_1)],
    )
    yield case(
        "a preview that costs exactly the limit replaces the result",
        PREVIEW,
        [*open_call(), _spill("x" * 4000, maxInlineTokens=150), ok("spill_read", locator=LOCATOR_1)],
        comment="the head, the tail and the notice estimate at 150 tokens, the limit itself: at most the limit fits",
    )
    yield case(
        "a result within the limit enters the log as it came",
        "should_spill",
        [*open_call(), _spill("3 passed", maxInlineTokens=200)],
    )
    for tool, nested, name in (
        ("read", None, "the read tool's result never spills, so a spilled file reads back whole"),
        ("grep", True, "a nested call's result never spills: it belongs to its parent"),
    ):
        settings: dict[str, Any] = {} if nested is None else {"nested": nested}
        yield case(name, CANDIDATE, [*open_call(), _spill("x" * 4000, tool, maxInlineTokens=200, **settings)])
    yield case(
        "a result with a block that is not text never spills",
        "derive_spill_text",
        [
            *open_call(),
            _spill_blocks([{"type": "text", "text": "x" * 4000}, {"type": "image", "data": "AA=="}]),
        ],
    )
    for name, blocks in (
        ("two text blocks", ["x" * 2000, "y" * 2000]),
        ("text blocks of multi-byte and astral text", [ASTRAL[:900], ASTRAL[900:1800], "tail " * 10]),
    ):
        yield case(
            f"a result of {name} is saved as their texts joined with no separator",
            "derive_spill_text",
            [
                *open_call(),
                _spill_blocks([{"type": "text", "text": text} for text in blocks]),
                ok("spill_read", locator=LOCATOR_1),
            ],
            comment="the saved text and the notice's count of omitted characters are those of the joined text",
        )
    yield case(
        "a store that fails keeps the result inline",
        "should_spill",
        [
            *open_call(),
            _spill("x" * 4000, maxInlineTokens=200, storeFails=True),
            fails(Code.SPILL_NOT_FOUND, "spill_read", locator=LOCATOR_1),
        ],
        why="spill is best effort: a result that cannot be saved stays whole in the log",
    )
    yield case(
        "a limit too small for the notice keeps the result inline, its saved text an orphan",
        PREVIEW,
        [*open_call(), _spill("x" * 4000, maxInlineTokens=20), ok("spill_read", locator=LOCATOR_1)],
    )
    yield case(
        "maxInlineTokens null turns the policy off",
        "plan_max_inline_tokens",
        [*open_call(), _spill("x" * 4000, maxInlineTokens=None)],
    )
    yield case(
        "a negative limit is refused before the result enters the log",
        "plan_max_inline_tokens",
        [
            *open_call(),
            fails(
                Code.SPILL_CONFIG_INVALID,
                "spill",
                id="s",
                toolName="grep",
                data=msg.result("c1"),
                maxInlineTokens=-1,
            ),
            ok("state", id="s"),
        ],
    )
    yield case(
        "nothing is stored at a locator no spill named",
        "derive_memory_spill_locator",
        [ok("create", id="s"), fails(Code.SPILL_NOT_FOUND, "spill_read", locator=LOCATOR_1)],
    )
    yield case(
        "each text spilled in a session is saved under its own locator and reads back as its own",
        "derive_memory_spill_locator",
        [
            *open_call(),
            _spill("x" * 4000, maxInlineTokens=200),
            *next_call("c2", 2),
            ok("spill", id="s", toolName="grep", data=msg.result("c2", "y" * 4000), maxInlineTokens=200),
            ok("spill_read", locator=LOCATOR_1),
            ok("spill_read", locator=LOCATOR_1.replace("000000000001", "000000000002")),
        ],
        comment="the second text is the store's second (counted from 1): it neither replaces the first nor takes another's name",
    )
    above_base = _text_of(BASE_MAX_INLINE_TOKENS + 1, "x")
    yield case(
        "with maxInlineTokens left out a store spills above the base limit of 12500 tokens",
        "plan_max_inline_tokens",
        [*open_call(), _spill(above_base)],
        comment=f"{len(above_base)} characters, estimated at 12501 tokens: above the limit the policy runs with",
    )
    yield case(
        "a spilled text survives a crash",
        "derive_memory_spill_locator",
        [
            *open_call(),
            _spill("x" * 4000, maxInlineTokens=200),
            ok("crash"),
            ok("spill_read", locator=LOCATOR_1),
        ],
        storage="file",
        comment="a spill store makes the text durable before it names it",
    )
    second, third = (
        derive_memory_spill_locator(session, n, "grep.txt") for session, n in (("t", 2), ("s", 3))
    )
    yield case(
        "texts spilled by two sessions, and twice by one, all survive a crash",
        "derive_memory_spill_locator",
        [
            *open_call(),
            _spill("x" * 4000, maxInlineTokens=200),
            *open_call(session="t"),
            _spill("y" * 4000, session="t", maxInlineTokens=200),
            *next_call("c2", 2),
            ok("spill", id="s", toolName="grep", data=msg.result("c2", "z" * 4000), maxInlineTokens=200),
            ok("crash"),
            ok("spill_read", locator=LOCATOR_1),
            ok("spill_read", locator=second),
            ok("spill_read", locator=third),
        ],
        storage="file",
        comment="each session's texts are kept apart, the first of a session and every later one made durable "
        "with every name that leads to it",
    )
    for storage in ("none", "file"):
        yield case(
            f"a locator that climbs out of its directory and back in names nothing stored (storage {storage})",
            "derive_memory_spill_locator",
            [
                *open_call(),
                _spill("x" * 4000, maxInlineTokens=200),
                fails(
                    Code.SPILL_NOT_FOUND,
                    "spill_read",
                    locator=LOCATOR_1.replace("/000000000001", "/../session-043a718774c5/000000000001"),
                ),
                fails(
                    Code.SPILL_NOT_FOUND,
                    "spill_read",
                    locator=LOCATOR_1.replace("000000000001", "000000000002"),
                ),
                ok("spill_read", locator=LOCATOR_1),
            ],
            storage=storage,
            comment="a spill_read gives back only a text under the very locator a spill named",
        )


def _locator(tool: str) -> str:
    """Where the memory store puts the first text saved for session s by a ``tool`` call."""
    return LOCATOR_1.replace("-grep.txt", f"-{tool}.txt")


def _reserve(tool: str, total: int) -> int:
    """The UTF-16 units a preview of a ``total``-unit text spilled by ``tool`` leaves for the
    notice and the blank line before it."""
    return utf16_length(derive_spill_notice(total, _locator(tool))) + len(SPILL_SEPARATOR)


def preview_cases() -> Cases:
    """What a spilled result's preview holds, at its edges: a tool named after ``read`` in the
    alphabet spills like any other; a limit that leaves room for the notice and not one unit more
    logs the notice alone; a notice whose length is odd in its twos place still reserves the blank
    line; U+FFFF is one unit of the budget and U+10000 two; a block that is not a text block keeps the
    result whole even when it carries a ``text``."""
    text = "x" * 4000
    tool = next(
        name for name in ("search", "shell", "write", "websearch") if _reserve(name, len(text)) % 4 == 0
    )
    limit = _reserve(tool, len(text)) // CHARS_PER_TOKEN + BLOCK_OVERHEAD
    assert derive_spill_preview(text, limit, _locator(tool)) == derive_spill_notice(len(text), _locator(tool))
    yield case(
        "a limit with room for the notice and not one unit more logs the notice alone",
        PREVIEW,
        [*open_call(), _spill(text, tool, maxInlineTokens=limit), ok("spill_read", locator=_locator(tool))],
        comment=f"at {limit} tokens the text block holds {CHARS_PER_TOKEN * (limit - BLOCK_OVERHEAD)} units: "
        f"exactly the notice and the blank line before a preview; a one-unit preview would break the limit",
    )
    odd = next(
        name for name in ("search", "shell", "write", "websearch") if _reserve(name, len(text)) & 2 == 0
    )
    assert (_reserve(odd, len(text)) - len(SPILL_SEPARATOR)) & 2
    yield case(
        "a tool named after read in the alphabet spills too, its preview sized around the notice",
        CANDIDATE,
        [*open_call(), _spill(text, odd, maxInlineTokens=200), ok("spill_read", locator=_locator(odd))],
        comment="only the read tool itself is exempt; the notice here is "
        f"{_reserve(odd, len(text)) - len(SPILL_SEPARATOR)} units long, the blank line 2 more",
    )
    yield case(
        "a spill's preview counts U+FFFF as one unit and U+10000 as two",
        PREVIEW,
        [*open_call(), _spill("\uffff\U00010000" * 1000, maxInlineTokens=200)],
        comment="the head and the tail are cut by UTF-16 units, and only a code point above U+FFFF takes two",
    )
    for kind in ("reasoning", "thinking"):
        yield case(
            f"a result with a {kind} block that carries a text never spills",
            "derive_spill_text",
            [
                *open_call(),
                _spill_blocks([{"type": "text", "text": "x" * 4000}, {"type": kind, "text": "y" * 100}]),
            ],
            comment="only text blocks are joined: any other block keeps the result whole, a text field or not",
        )


def _text_of(tokens: int, char: str) -> str:
    """The longest run of ``char`` whose result content the spec estimates at ``tokens``."""
    low, high = 0, 1
    while estimate_content([{"type": "text", "text": char * high}]) <= tokens:
        low, high = high, high * 2
    while high - low > 1:  # char * low is within tokens, char * high is not
        middle = (low + high) // 2
        low, high = (
            (middle, high)
            if estimate_content([{"type": "text", "text": char * middle}]) <= tokens
            else (low, middle)
        )
    return char * low


def boundary_cases() -> Cases:
    """The limit is inclusive (``should_spill``: estimated tokens > maxInlineTokens): a result
    estimated at exactly the limit stays inline, one token above it spills, whether the text is
    ASCII or astral (2 UTF-16 units a character)."""
    for name, char in (("ASCII", "x"), ("astral", "\U0001f600")):
        at_limit = _text_of(200, char)
        yield case(
            f"a result of {name} text estimated at exactly the limit stays inline",
            "should_spill",
            [*open_call(), _spill(at_limit, maxInlineTokens=200)],
            comment=f"{len(at_limit)} characters, estimated at 200 tokens: not above the limit of 200",
        )
        above = _text_of(201, char)
        yield case(
            f"a result of {name} text estimated one token above the limit spills",
            "should_spill",
            [*open_call(), _spill(above, maxInlineTokens=200), ok("spill_read", locator=LOCATOR_1)],
            comment=f"{len(above)} characters, estimated at 201 tokens: above the limit of 200",
        )


def shape_cases() -> Cases:
    """What the spill op reads of the result it is given: the first block of its message's content
    is the tool-result block whose inner content the policy works on, and the blocks after it
    stay as they are."""
    yield case(
        "a result whose tool-result block is followed by another entry keeps it after the block",
        "should_spill",
        [
            *open_call(),
            ok("spill", id="s", toolName="grep", maxInlineTokens=200, data=msg.result("c1", after=["x"])),
        ],
        comment="the policy reads the first block's content; a live append checks no message shape, so the "
        "entry after the block enters the log as it came",
    )


cases: Final = chained(pure_cases, engine_cases, preview_cases, boundary_cases, shape_cases)
