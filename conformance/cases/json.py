"""json: the lossless JSON domain event data lives in (SPEC-DECISIONS D5; notes/dsh-session-core §5.2).

Covers what ``data`` an append accepts (any JSON value, ``null`` included; an absent value is not
JSON) and that what is committed is exactly what was sent: text, safe integers, fractions,
nesting and the empty key survive the round trip.
"""

from __future__ import annotations

from conformance.cases.build import Cases, append_step, case, fails, ok, state
from spec.codes import Code

RULE = "snapshot_event_data"


def cases() -> Cases:
    yield case(
        "an append without data is rejected: an absent value is not JSON",
        RULE,
        [ok("create", id="s"), fails(Code.DATA_NOT_JSON, "append", id="s", type="turn/start"), state()],
        comment="an absent key is JavaScript's undefined; the protocol passes the absence to the rule",
    )
    yield case(
        "data null is JSON and is kept",
        RULE,
        [ok("create", id="s"), append_step("custom/null", None), state()],
    )
    yield case(
        "data may be a string, a number or an array",
        RULE,
        [
            ok("create", id="s"),
            append_step("custom/a", "text"),
            append_step("custom/b", 42),
            append_step("custom/c", [1, "two", None]),
        ],
    )
    yield case(
        "event data keeps text, safe integers, fractions and nesting exactly",
        RULE,
        [
            ok("create", id="s"),
            append_step(
                "custom/values",
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
            ),
            state(),
        ],
        comment="the largest and smallest safe integers, an astral character and escapes: "
        "the values where JSON libraries differ most",
    )
