"""Does an answer meet an expectation? One comparison for the vectors and for the model-driven
families (conformance/PROTOCOL.md, "Timing"; SPEC-DECISIONS D3, D11).

An expectation is JSON: ``{"ok": true, "result": …}`` or ``{"ok": false, "code": …}``, with two
tolerances where the rules leave a store room:

- ``"eventsAtLeast": n`` on a ``read``: the subject may show any prefix of the expected events
  that holds at least ``n`` of them (it must show everything flushed, and may show more of what was
  appended, never anything that was not);
- ``"or": [expectation, …]``: any one of these is as good (a session not yet published may be
  shown or not).

Results are compared as JSON (object key order never matters; ``1`` and ``1.0`` are one number,
``true`` is not ``1``), after the subject's target has adjusted what it expects
(:mod:`conformance.targets`); error codes are compared, never messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from conformance.subject import Response
from conformance.targets import DEFAULT_TARGET, Target
from spec.log.json import JsonValue, is_deep_equal_json


def why_not(
    expect: Mapping[str, Any],
    ok: bool,
    result: JsonValue,
    code: str | None,
    message: str | None = None,
    *,
    op: str = "",
    function: str | None = None,
    target: Target = DEFAULT_TARGET,
) -> str | None:
    """``None`` when the answer meets ``expect`` or one of its alternatives, else what differs
    (from the first expectation)."""
    first = _why_not_one(expect, ok, result, code, message, op, function, target)
    if first is None:
        return None
    for alternative in expect.get("or", ()):
        if _why_not_one(alternative, ok, result, code, message, op, function, target) is None:
            return None
    return first


def answer_fingerprint(
    expect: Mapping[str, Any], ok: bool, code: str | None, difference: str, *, generated: bool = False
) -> str:
    """How an answer missed ``expect`` (its first expectation), with the data left out: ``expected
    ok, got CODE``, ``expected CODE, got ok`` or ``expected CODE, got OTHER``, or for a result
    ``result differs at PATH`` (the path of the first differing value, as ``difference`` names it;
    for a ``generated`` workload, whose positions vary, with its array indexes dropped). Stable from
    run to run, so an expectation file can pin how a case fails."""
    if bool(expect["ok"]) != ok or not ok:
        want = "ok" if expect["ok"] else expect["code"]
        return f"expected {want}, got {'ok' if ok else code}"
    where = re.search(r"(?:^|\(|at )(\$[^:\s]*)", difference)
    path = where.group(1) if where else "$"
    return "result differs at " + (re.sub(r"\[\d+\]", "[]", path) if generated else path)


def compare(
    expect: Mapping[str, Any],
    response: Response,
    op: str = "",
    target: Target = DEFAULT_TARGET,
    function: str | None = None,
) -> str | None:
    """:func:`why_not` for a subject's response: ``None`` when it is what ``expect`` says (the same
    result as JSON, or the same error code; messages are never compared), otherwise what differs."""
    return why_not(
        expect,
        response.ok,
        response.result,
        response.error_code,
        response.error_message,
        op=op,
        function=function,
        target=target,
    )


def _why_not_one(
    expect: Mapping[str, Any],
    ok: bool,
    result: JsonValue,
    code: str | None,
    message: str | None,
    op: str,
    function: str | None,
    target: Target,
) -> str | None:
    if expect["ok"]:
        if not ok:
            return f"expected success, got {code}: {message}"
        wanted = target.answer(op, expect["result"], result, function)
        at_least = expect.get("eventsAtLeast")
        if isinstance(at_least, int) and isinstance(wanted, dict) and isinstance(result, dict):
            return _prefix_difference(wanted, result, at_least)
        difference = first_difference(wanted, result)
        return None if difference is None else f"result differs at {difference}"
    if ok:
        return f"expected {expect['code']}, got success with {short(result)}"
    if code != expect["code"]:
        return f"expected {expect['code']}, got {code}: {message}"
    return None


def _prefix_difference(
    wanted: Mapping[str, JsonValue], got: Mapping[str, JsonValue], at_least: int
) -> str | None:
    """``got`` is ``wanted`` with its ``events`` cut to a prefix at least ``at_least`` long."""
    rest = first_difference(
        {k: v for k, v in wanted.items() if k != "events"}, {k: v for k, v in got.items() if k != "events"}
    )
    if rest is not None:
        return f"result differs at {rest}"
    events, shown = wanted.get("events"), got.get("events")
    if not isinstance(events, list) or not isinstance(shown, list):
        return "result differs at $.events: expected an array of events"
    if not at_least <= len(shown) <= len(events):
        return (
            f"$.events holds {len(shown)} events; it must show at least the {at_least} made durable and at most "
            f"the {len(events)} appended"
        )
    difference = first_difference(events[: len(shown)], shown)
    return None if difference is None else f"result differs at $.events{difference[1:]}"


def first_difference(expected: JsonValue, actual: JsonValue) -> str | None:
    """Where two JSON values first differ (a path and both values), or ``None`` when they are
    equal as JSON."""
    if is_deep_equal_json(expected, actual):
        return None
    stack: list[tuple[str, JsonValue, JsonValue]] = [("$", expected, actual)]
    while stack:
        path, want, got = stack.pop()
        if is_deep_equal_json(want, got):
            continue
        if isinstance(want, dict) and isinstance(got, dict):
            for key in sorted(set(want) | set(got)):
                if key not in got:
                    return f"{path}.{key}: expected {short(want[key])}, missing"
                if key not in want:
                    return f"{path}.{key}: unexpected {short(got[key])}"
            stack.extend((f"{path}.{key}", want[key], got[key]) for key in sorted(want, reverse=True))
            continue
        if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
            stack.extend(
                (f"{path}[{index}]", w, g) for index, (w, g) in reversed(list(enumerate(zip(want, got))))
            )
            continue
        return f"{path}: expected {short(want)}, got {short(got)}"
    return "$"


def short(value: object, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "…"
