"""header: the session header (SPEC-DECISIONS D1; notes/dsh-session-core §1.5, §4.6).

Covers the header a create builds from its ``meta`` (the lineage fields in order, unknown keys
dropped, ``createdAt`` from the clock), each field's rule and the order the rules are checked in,
and the pure header rule a stored header is judged by (``validate_header``).
"""

from __future__ import annotations

from typing import Final

from conformance.cases.build import Cases, case, chained, fails, gone, ok, pure
from spec.codes import MEANING, Code
from spec.log.json import JsonObject, JsonValue

BUILD = "build_header"
VALIDATE = "spec.header.validate_header"


VALID: Final[JsonObject] = {"version": 4, "id": "s", "createdAt": 0, "delegationDepth": 0, "isSeeded": False}


def meta_cases() -> Cases:
    full_meta: JsonObject = {
        "createdAt": 5,
        "cwd": "/work/project",
        "parentSession": "p0",
        "seedLength": 3,
        "origin": "subagent",
        "delegationDepth": 2,
        "agentPreset": "coder",
        "unknown": "dropped",
    }
    why = (
        "a new header is version 4, the id, createdAt from meta or now, the lineage fields meta gives "
        "and isSeeded; other meta keys are dropped (notes/dsh-session-core §4.6)"
    )
    yield case(
        "a header takes its lineage fields from meta, in order, and drops unknown keys",
        BUILD,
        [ok("create", id="s", meta=full_meta)],
        why=why,
    )
    null_why = (
        "a lineage field given as null is kept and judged by the header rules; createdAt null means now "
        "(SPEC-DECISIONS D1)"
    )
    judged_nulls = (
        ("a meta field that is null is kept and judged: cwd null is rejected", Code.HEADER_CWD, "cwd", None),
        (
            "a delegationDepth of null is judged, not defaulted",
            Code.HEADER_DELEGATION_DEPTH,
            "delegationDepth",
            "a store that drops null fields would give depth 0 here, and pass a vector that used 0",
        ),
        ("an agentPreset of null is judged too", Code.HEADER_AGENT_PRESET, "agentPreset", None),
    )
    for name, code, field, comment in judged_nulls:
        yield case(
            name,
            BUILD,
            [fails(code, "create", id="s", meta={field: None}), gone()],
            why=null_why,
            comment=comment,
        )
    yield case(
        "a createdAt of null means now",
        BUILD,
        [ok("create", id="s", meta={"createdAt": None, "origin": "subagent"})],
        why=null_why,
        comment="the clock is pinned, so now is the vector's clock",
    )
    yield case(
        "a createdAt of 0 is kept: only an absent or null createdAt means now",
        BUILD,
        [ok("create", id="s", meta={"createdAt": 0}), ok("close", id="s"), ok("read", id="s")],
        why=null_why,
        comment="0 is falsy in many languages; a store that tests createdAt's truth stamps now here",
        storage="memory",
    )
    yield case("meta null is no meta", BUILD, [ok("create", id="s", meta=None)], why=why)
    yield case(
        "header fields are checked in order: createdAt before cwd",
        BUILD,
        [fails(Code.HEADER_CREATED_AT, "create", id="s", meta={"cwd": "rel", "createdAt": -1})],
        why="the header rules are checked in a fixed order and the first failure is the error",
        comment="both fields are wrong; the expected code says which rule a subject must check first",
    )


def bad_meta_cases() -> Cases:
    bad_meta: list[tuple[str, Code, JsonValue]] = [
        ("a relative cwd is rejected", Code.HEADER_CWD, {"cwd": "relative/path"}),
        ("a cwd that is not a string is rejected", Code.HEADER_CWD, {"cwd": 5}),
        ("a negative createdAt is rejected", Code.HEADER_CREATED_AT, {"createdAt": -1}),
        ("a fractional createdAt is rejected", Code.HEADER_CREATED_AT, {"createdAt": 1.5}),
        ("a createdAt that is not a number is rejected", Code.HEADER_CREATED_AT, {"createdAt": "now"}),
        (
            "a createdAt of false is rejected, not taken for an absent one",
            Code.HEADER_CREATED_AT,
            {"createdAt": False},
        ),
        (
            "an empty createdAt string is rejected, not taken for an absent one",
            Code.HEADER_CREATED_AT,
            {"createdAt": ""},
        ),
        (
            "a parentSession that is not a string is rejected",
            Code.HEADER_PARENT_SESSION,
            {"parentSession": 7},
        ),
        ("a negative seedLength is rejected", Code.HEADER_SEED_LENGTH, {"seedLength": -1}),
        ("an origin other than subagent is rejected", Code.HEADER_ORIGIN, {"origin": "user"}),
        ("a negative delegationDepth is rejected", Code.HEADER_DELEGATION_DEPTH, {"delegationDepth": -1}),
        (
            "a delegationDepth that is not a number is rejected",
            Code.HEADER_DELEGATION_DEPTH,
            {"delegationDepth": "1"},
        ),
        ("a delegationDepth of true is rejected", Code.HEADER_DELEGATION_DEPTH, {"delegationDepth": True}),
        ("an agentPreset that is not a string is rejected", Code.HEADER_AGENT_PRESET, {"agentPreset": False}),
        ("meta that is an array is not a header record", Code.HEADER_NOT_RECORD, []),
        ("meta that is a string is not a header record", Code.HEADER_NOT_RECORD, "meta"),
    ]
    for name, code, meta in bad_meta:
        yield case(
            f"{name}, and no session is created",
            BUILD,
            [fails(code, "create", id="s", meta=meta), gone()],
            why=MEANING[code],
        )


def valid_header_cases() -> Cases:
    yield pure("a complete version 4 header is valid", VALIDATE, sessionId="s", header=VALID)
    yield pure(
        "a header created at the largest safe integer is valid",
        VALIDATE,
        why=MEANING[Code.HEADER_CREATED_AT],
        sessionId="s",
        header={**VALID, "createdAt": 2**53 - 1},
    )
    yield pure(
        "a header whose createdAt and delegationDepth are 0 written as floats is valid",
        VALIDATE,
        why="an integral float counts as that integer, as it does in JavaScript (SPEC-DECISIONS D5)",
        sessionId="s",
        header={**VALID, "createdAt": 0.0, "delegationDepth": 0.0},
    )
    yield pure(
        "a header whose version is 4 written as 4.0 is valid",
        VALIDATE,
        why="an integral float counts as that integer, as it does in JavaScript (SPEC-DECISIONS D5)",
        sessionId="s",
        header={**VALID, "version": 4.0},
    )
    yield pure(
        "a header keeps unknown extra keys and stays valid",
        VALIDATE,
        sessionId="s",
        header={**VALID, "extra": {"k": 1}},
    )


def bad_header_cases() -> Cases:
    no_seeded = {key: value for key, value in VALID.items() if key != "isSeeded"}
    no_depth = {key: value for key, value in VALID.items() if key != "delegationDepth"}
    refused: list[tuple[str, Code, str, JsonValue]] = [
        ("a header of another version is rejected", Code.HEADER_VERSION, "s", {**VALID, "version": 3}),
        (
            "a header whose version is a string is rejected",
            Code.HEADER_VERSION,
            "s",
            {**VALID, "version": "4"},
        ),
        ("a header naming another session is rejected", Code.HEADER_ID_MISMATCH, "t", VALID),
        ("a header without isSeeded is rejected", Code.HEADER_IS_SEEDED, "s", no_seeded),
        (
            "a header whose isSeeded is not a boolean is rejected",
            Code.HEADER_IS_SEEDED,
            "s",
            {**VALID, "isSeeded": 1},
        ),
        ("a header without delegationDepth is rejected", Code.HEADER_DELEGATION_DEPTH, "s", no_depth),
        (
            "a header whose delegationDepth is true is rejected",
            Code.HEADER_DELEGATION_DEPTH,
            "s",
            {**VALID, "delegationDepth": True},
        ),
        ("a header that is an array is not a record", Code.HEADER_NOT_RECORD, "s", []),
        (
            "a header whose origin sorts before subagent is rejected",
            Code.HEADER_ORIGIN,
            "s",
            {**VALID, "origin": "agent"},
        ),
        (
            "a header created just past the largest safe integer is rejected",
            Code.HEADER_CREATED_AT,
            "s",
            {**VALID, "createdAt": 2**53},
        ),
        (
            "a header created at -1 written as a float is rejected",
            Code.HEADER_CREATED_AT,
            "s",
            {**VALID, "createdAt": -1.0},
        ),
    ]
    for name, code, session_id, header in refused:
        yield pure(name, VALIDATE, code, why=MEANING[code], sessionId=session_id, header=header)


cases: Final = chained(meta_cases, bad_meta_cases, valid_header_cases, bad_header_cases)
