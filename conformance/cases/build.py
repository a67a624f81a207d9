"""The words the case modules write their cases in.

A case is a name that says the rule, the spec function whose rule it exercises (by its stable
name, the function's own: :mod:`conformance.spec_index`), and either the requests to send (:class:`Case`, a protocol vector) or one pure-function call (:class:`PureCase`).
Each request carries what its author means it to do: :data:`OK` or a code. The author never
writes an outcome; the generator computes it with the spec oracle and refuses a case whose
outcome is not the one its author meant.

The messages' data comes from :mod:`conformance.cases.msg`; times are pinned to :data:`NOW`
(protocol vectors) or :data:`SEED_TIME` (hand-written events).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from conformance import builders as payloads
from spec.codes import Code
from spec.lineage.repair import derive_closers
from spec.log.json import JsonObject, JsonValue

NOW: Final = 1_700_000_000_000  # ms: the pinned clock of every protocol vector
SEED_TIME: Final = 1_000  # ms: the time of hand-written seed and log events
OK: Final = "ok"  # the intent of a request meant to succeed


class GenerationError(Exception):
    """A case whose computed outcome is not the one its author meant, or a malformed case."""


# --- cases -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One request and what its author means it to do: ``OK`` or a code."""

    request: JsonObject
    intent: str


@dataclass(frozen=True)
class Case:
    """A protocol vector: requests in order, run on a fresh subject (the first is a ``reset``).
    ``rule`` is the stable name of the spec function it exercises; ``why`` is the rule it pins (default: the first sentence of ``rule``'s docstring);
    ``comment`` says why the case exists when its name does not."""

    name: str
    rule: str
    steps: tuple[Step, ...]
    why: str | None = None
    comment: str | None = None


@dataclass(frozen=True)
class PureCase:
    """A pure-function vector: one ``call`` of ``function`` (a frozen protocol name of
    :data:`spec.wire.WIRE_TABLE`) with ``input``; its rule is the function that name calls."""

    name: str
    function: str
    input: JsonObject
    intent: str
    why: str | None = None
    comment: str | None = None


Cases: TypeAlias = Iterator[Case | PureCase]


def chained(*groups: Callable[[], Cases]) -> Callable[[], Cases]:
    """A family's ``cases()``: the cases of each group, in the order given."""

    def cases() -> Cases:
        for group in groups:
            yield from group()

    return cases


def ok(op: str, **args: Any) -> Step:
    """A request meant to succeed."""
    return Step({"op": op, **args}, OK)


def fails(code: Code, op: str, **args: Any) -> Step:
    """A request meant to be rejected with ``code``."""
    return Step({"op": op, **args}, str(code))


def refused(code: Code, step: Step) -> Step:
    """``step``'s request, meant to be rejected with ``code`` instead."""
    return Step(step.request, str(code))


def start(
    storage: str = "none", compressed: bool | None = None, batch: JsonObject | None = None
) -> list[Step]:
    """The opening of every protocol vector: a fresh store (with ``batch``, the reset's batch
    policy arguments), and the clock pinned."""
    reset: JsonObject = {} if storage == "none" else {"storage": storage}
    if compressed is not None:
        reset["compressed"] = compressed
    reset.update(batch or {})
    return [ok("reset", **reset), ok("clock", now=NOW)]


def case(
    name: str,
    rule: str,
    steps: Sequence[Step],
    *,
    storage: str = "none",
    compressed: bool | None = None,
    batch: JsonObject | None = None,
    why: str | None = None,
    comment: str | None = None,
) -> Case:
    """A protocol vector: :func:`start`, then ``steps``."""
    return Case(name, rule, (*start(storage, compressed, batch), *steps), why, comment)


def pure(
    name: str,
    function: str,
    intent: Code | str = OK,
    *,
    why: str | None = None,
    comment: str | None = None,
    **inputs: Any,
) -> PureCase:
    """A pure vector: ``function`` called with ``inputs``."""
    return PureCase(name, function, dict(inputs), str(intent), why, comment)


def as_why(text: str) -> str:
    """A docstring's or a rule explanation's first sentence, written as a vector's ``why``: plain
    text (reStructuredText roles and literals lose their markup, line breaks become spaces), a
    lowercase start and no closing period, like the whys case authors write."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?[.?!])(?=\s|$)", paragraph)
    sentence = match.group(1) if match else paragraph
    sentence = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", sentence).replace("``", "").removesuffix(".")
    first_word = sentence.split(" ", 1)[0]
    if first_word[:1].isupper() and (len(first_word) == 1 or first_word[1:].islower()):
        sentence = sentence[0].lower() + sentence[1:]
    return sentence


# --- payloads --------------------------------------------------------------------------------------


def replace(start: int, end: int) -> JsonObject:
    """The surface op that replaces the nodes ``start`` to ``end``."""
    return payloads.replace_op(start, end)


def event(seq: int, kind: str, data: Any, **envelope: Any) -> JsonObject:
    """A stored/seed event ``{type, seq, time, data, ...}``."""
    return {"type": kind, "seq": seq, "time": SEED_TIME, "data": data, **envelope}


def log(*entries: tuple[Any, ...] | JsonObject) -> list[JsonValue]:
    """Events numbered from 0: each entry is ``(type, data)``, ``(type, data, extra envelope)``, or a
    message builder's data alone, appended to the surface as the kind :func:`message_kind` tells."""
    events: list[JsonValue] = []
    for seq, entry in enumerate(entries):
        if isinstance(entry, dict):
            entry = (message_kind(entry), entry, APPEND)
        if len(entry) not in (2, 3):
            raise GenerationError(f"a log entry is (type, data) or (type, data, envelope), not {entry!r}")
        extra: JsonObject = entry[2] if len(entry) == 3 else {}
        events.append(event(seq, entry[0], entry[1], **extra))
    return events


def with_seq(events: list[JsonValue], index: int, seq: JsonValue) -> list[JsonValue]:
    """``events`` with the one at ``index`` renumbered ``seq`` (to break contiguity on purpose)."""
    entry = events[index]
    assert isinstance(entry, dict)
    return [*events[:index], {**entry, "seq": seq}, *events[index + 1 :]]


def with_closers(events: list[JsonValue]) -> list[JsonValue]:
    """``events`` followed by the closers crash repair derives for them: a repaired log."""
    objects = [entry for entry in events if isinstance(entry, dict)]
    assert len(objects) == len(events)
    return [*events, *derive_closers(objects)]


APPEND: Final[JsonObject] = {"surfaceOp": "append"}
# turn 1 and its first step, opening and closing, and call c1 started in it: log() entries
T1: Final = ("turn/start", {"turn": 1})
S1: Final = ("step/start", {"turn": 1, "step": 1})
S1_END: Final = ("step/end", {"turn": 1, "step": 1})
T1_END: Final = ("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
CALL: Final = ("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read"})


def message_kind(data: JsonObject) -> str:
    """The event kind of a message builder's data, told by its shape: a user message is its own
    data, an assistant message and a tool result sit under ``message`` (the result's source is its
    tool)."""
    message = data.get("message", data)
    if not isinstance(message, dict):
        raise GenerationError(f"not a message builder's data: {data!r}")
    source = message.get("source")
    if message.get("role") == "assistant":
        return "assistant/message"
    if isinstance(source, dict) and source.get("kind") == "tool" and message is not data:
        return "tool/result"
    if message is data and message.get("role") == "user":
        return "user/message"
    raise GenerationError(f"not a message builder's data: {data!r}")


# --- steps -----------------------------------------------------------------------------------------


def append(data: Any, session: str = "s", **fields: Any) -> Step:
    """An append to ``session`` meant to succeed: of a message builder's ``data`` to the surface, as
    the kind :func:`message_kind` tells, or, given its ``type``, of any event with the request's
    other ``fields`` as given."""
    if "type" not in fields:
        fields = {"type": message_kind(data), "surfaceOp": "append", **fields}
    kind = fields.pop("type")
    return ok("append", id=session, type=kind, data=data, **fields)


def turn(n: int = 1, session: str = "s") -> Step:
    return append(payloads.turn_start(n), session, type="turn/start")


def turn_end(n: int = 1, session: str = "s", kind: str = "completed") -> Step:
    return append(payloads.turn_end(n, kind), session, type="turn/end")


def state(session: str = "s") -> Step:
    return ok("state", id=session)


def gone(session: str = "s") -> Step:
    """``session`` is not live: its state answers SESSION_NOT_FOUND."""
    return fails(Code.SESSION_NOT_FOUND, "state", id=session)
