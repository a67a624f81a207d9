"""spill: which limit a spill policy runs with (SPEC-DECISIONS D8; seed 002 "排水").

Covers the default — the seed's base configuration, 12500 tokens, wherever a spill store is
configured, and no spilling without a store — how a configuration turns spill off or sets another
limit, and the limits that are refused.
"""

from __future__ import annotations

from conformance.cases.build import Cases, pure
from spec.codes import Code

LIMIT = "spec.spill.plan_max_inline_tokens"


def cases() -> Cases:
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
