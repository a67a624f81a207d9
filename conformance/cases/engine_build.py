"""The words the engine families write their cases in: histories an agent loop would leave (closed
turns, tool steps), the scripted summarizer's attempts, and the engine ops as steps
(conformance/PROTOCOL.md, "Engine ops").

A history's texts are long enough that a summary of two turns is clearly cheaper than the turns
(:data:`LONG` costs about 160 tokens a message; a framed checkpoint with a one-line summary about
110), so the shrink check passes where a case means it to and fails where it is meant to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from conformance.builders import step_end, step_start, tool_call
from conformance.cases import msg
from conformance.cases.build import Step, append, ok, turn, turn_end
from spec.log.json import JsonObject, JsonValue

LONG: Final = (
    "The earlier work read the parser, ran the failing tests and wrote down what each one showed. " * 7
)
TOOL_OUTPUT: Final = "test_parser.py:12: assert parse(text) == expected\n" * 40  # a long grep result
SUMMARY: Final = "The parser tests were read and run; two failures were traced to the tokenizer."


def step_open(n: int, step: int = 1, session: str = "s") -> Step:
    return append(step_start(n, step), session, type="step/start")


def step_close(n: int, step: int = 1, session: str = "s") -> Step:
    return append(step_end(n, step), session, type="step/end")


def answer(
    n: int, step: int = 1, session: str = "s", text: str | None = None, calls: Sequence[str] = ()
) -> Step:
    """An assistant/message in turn ``n``'s ``step``."""
    data = msg.assistant(f"a{n}-{step}", text if text is not None or calls else f"answer {n}", calls, n, step)
    return append(data, session)


def call_started(call: str, n: int, step: int = 1, session: str = "s") -> Step:
    return append(tool_call(call, n, step), session, type="tool/call")


def call_answered(
    call: str,
    n: int,
    step: int = 1,
    session: str = "s",
    text: str = TOOL_OUTPUT,
    is_error: bool = False,
    after: Sequence[JsonValue] = (),
) -> Step:
    """The tool/result answering ``call``; ``after`` are message blocks after its tool-result block."""
    data = msg.result(call, text, n, step, is_error, after=after)
    return append(data, session)


def answered_step(n: int, step: int = 1, session: str = "s") -> list[Step]:
    """Inside turn ``n``: a ``step`` whose assistant message answers in text, calling no tool."""
    return [step_open(n, step, session), answer(n, step, session), step_close(n, step, session)]


def closed_turn(n: int, session: str = "s", text: str = LONG) -> list[Step]:
    """Turn ``n``: a long question and one step that answers it."""
    return [
        turn(n, session),
        append(msg.user(f"u{n}", text), session),
        *answered_step(n, 1, session),
        turn_end(n, session),
    ]


def history(turns: int, session: str = "s") -> list[Step]:
    """``turns`` closed turns in a new session: ``turns * 2`` surface nodes, seqs ``6k + 1`` (the
    question) and ``6k + 3`` (the answer) for the k-th turn from 0."""
    steps = [ok("create", id=session)]
    for n in range(1, turns + 1):
        steps += closed_turn(n, session)
    return steps


def first_question(text: str = LONG) -> list[Step]:
    """A new session "s" whose turn 1 is open on the question ``text`` (seqs 0 and 1)."""
    return [ok("create", id="s"), turn(1), append(msg.user("u1", text))]


def tool_steps(n: int, call: str, step: int = 1, session: str = "s", **result: Any) -> list[Step]:
    """Inside turn ``n``: a ``step`` whose assistant message calls ``call`` and whose result answers it
    (``result`` is :func:`call_answered`'s ``text``, ``is_error`` and ``after``)."""
    return [
        step_open(n, step, session),
        answer(n, step, session, text=None, calls=(call,)),
        call_started(call, n, step, session),
        call_answered(call, n, step, session, **result),
        step_close(n, step, session),
    ]


def attempt(compaction_id: str, **behaviour: Any) -> JsonObject:
    """A scripted attempt: by default the summarizer answers :data:`SUMMARY`."""
    return {"compactionId": compaction_id, **(behaviour or {"text": SUMMARY})}


def compact(compaction_id: str = "k1", session: str = "s", **behaviour: Any) -> Step:
    return ok("compact", id=session, attempt=attempt(compaction_id, **behaviour))
