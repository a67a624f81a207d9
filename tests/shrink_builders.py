"""A conversation driver for the context-shrinking tests: it appends well-formed turns, steps, tool
calls and results to a reference Session, so that every log it makes passes spec.checks.log."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from reference.session import Session
from reference.shrink.compaction import AbortSignal, SummaryRequest
from reference.store import SessionStore
from spec.checks.log import check_log
from spec.log.events import Event
from spec.log.header import plan_header_record
from spec.log.json import FrozenList, snapshot_json
from spec.log.session import create_session_state
from spec.shrink.summary import SummarizerOutput


class Conversation:
    """Drives one session: ``prompt`` opens a turn, ``tool_step``/``answer`` add closed steps,
    ``end_turn`` closes the turn. Message ids and call ids count up from 1."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.turn = 0
        self.step = 0
        self.counter = 0
        self.in_turn = False

    def _id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def prompt(self, text: str) -> Event:
        self.turn += 1
        self.step = 0
        self.in_turn = True
        self.session.append("turn/start", {"turn": self.turn})
        return self.user(text)

    def user(self, text: str, kind: str = "user") -> Event:
        message = {
            "id": self._id("u"),
            "role": "user",
            "source": {"kind": kind},
            "content": [{"type": "text", "text": text}],
        }
        return self.session.append("user/message", message, "append")

    def request_header(
        self, system: str = "You are a helpful assistant.", tools: Sequence[Any] = ()
    ) -> Event:
        header: dict[str, Any] = {"config": {"provider": "p", "model": "m"}, "system": system}
        if tools:
            header["tools"] = list(tools)
        return self.session.append("request/header", {"header": header, "reason": "initial"})

    def tool_step(self, output: str, tool: str = "grep", text: str = "Let me look.") -> str:
        """One closed step: the assistant calls ``tool``, the call runs, its result is ``output``."""
        self.step += 1
        call_id = self._id("call-")
        turn, step = self.turn, self.step
        self.session.append("step/start", {"turn": turn, "step": step})
        content = [
            {"type": "text", "text": text},
            {"type": "tool-call", "id": call_id, "name": tool, "arguments": "{}"},
        ]
        message = {
            "id": self._id("a"),
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        self.session.append("assistant/message", {"turn": turn, "step": step, "message": message}, "append")
        self.session.append(
            "tool/call", {"turn": turn, "step": step, "callId": call_id, "name": tool, "arguments": "{}"}
        )
        self.tool_result(call_id, output)
        self.session.append("step/end", {"turn": turn, "step": step})
        return call_id

    def tool_result(self, call_id: str, output: str) -> Event:
        block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": output}]}
        message = {
            "id": self._id("r"),
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [block],
        }
        return self.session.append(
            "tool/result", {"turn": self.turn, "step": self.step, "message": message}, "append"
        )

    def answer(self, text: str) -> Event:
        self.step += 1
        turn, step = self.turn, self.step
        self.session.append("step/start", {"turn": turn, "step": step})
        message = {
            "id": self._id("a"),
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "model", "provider": "p", "model": "m"},
        }
        event = self.session.append(
            "assistant/message", {"turn": turn, "step": step, "message": message}, "append"
        )
        self.session.append("step/end", {"turn": turn, "step": step})
        return event

    def end_turn(self) -> Event:
        self.in_turn = False
        return self.session.append("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})


def new_session(session_id: str = "s1", store: SessionStore | None = None) -> Session:
    clock = iter(range(1_000, 10_000_000))
    store = store if store is not None else SessionStore(clock=lambda: next(clock))
    return store.create(session_id, meta={"createdAt": 1})


class RecordingSink:
    """An event sink that records appends and flushes, and fails on demand: ``fail_append``
    decides per event, ``on_flush`` runs before each flush (raise in it to fail the flush)."""

    def __init__(self) -> None:
        self.appended: list[Event] = []
        self.flushes = 0
        self.flushed_upto = 0
        self.fail_append: Callable[[Event], bool] = lambda event: False
        self.on_flush: Callable[[], None] = lambda: None

    def append(self, events: Sequence[Event], floats: Collection[float] | None = None) -> None:
        for event in events:
            if self.fail_append(event):
                raise OSError(f"injected append failure on {event.get('type')}")
        self.appended.extend(events)

    def flush(self) -> None:
        self.on_flush()
        self.flushes += 1
        self.flushed_upto = len(self.appended)

    def fail_appends_of(self, event_type: str) -> None:
        """Every append of an ``event_type`` event from now on raises."""
        self.fail_append = lambda event: event.get("type") == event_type

    def fail_flushes(self, message: str) -> None:
        """Every flush from now on raises ``OSError(message)``."""

        def fail() -> None:
            raise OSError(message)

        self.on_flush = fail


def sink_session(
    sink: RecordingSink, session_id: str = "s1", seed: Sequence[object] | None = None
) -> Session:
    """A session writing to ``sink``, with a deterministic clock."""
    clock = iter(range(1_000, 10_000_000))
    header = plan_header_record(session_id, {"createdAt": 1}, 1, is_seeded=seed is not None)
    state = create_session_state(session_id, seed, header, 1)
    sink.append(state.events)
    return Session(state, sink=sink, clock=lambda: next(clock))


def sink_conversation(turns: int) -> tuple[RecordingSink, Session]:
    """A session of ``turns`` long turns (:func:`long_conversation`) writing to a fresh sink."""
    sink = RecordingSink()
    session = sink_session(sink)
    long_conversation(session, turns=turns)
    return sink, session


def long_conversation(
    session: Session, turns: int = 6, output_chars: int = 600, close_last: bool = True
) -> Conversation:
    """``turns`` complete turns of prompt, one tool step, an answer; the last one left open when
    ``close_last`` is false."""
    talk = Conversation(session)
    for number in range(1, turns + 1):
        talk.prompt(f"Question {number}: where is the bug in module {number}?")
        talk.tool_step(f"match {number}: " + "x" * output_chars)
        talk.answer(f"In module {number} the loop bound is off by one; I fixed it.")
        if number < turns or close_last:
            talk.end_turn()
    return talk


def assert_log_clean(session: Session) -> None:
    """The whole-log checker finds nothing, and the model-visible history keeps every tool call
    with its result (notes/dsh-compaction-projection §12.1 I4)."""
    assert check_log(list(session.events), dict(session.header)) == ()
    assert_calls_precede_results(session.derive_messages())


def assert_calls_precede_results(messages: Sequence[Any]) -> None:
    """Every tool-result block answers a tool-call block shown earlier in the same history, and
    the surface is balanced at both ends of every checkpoint (no call left hanging mid-history)."""
    seen: set[Any] = set()
    for message in messages:
        for block in message["content"]:
            if block.get("type") == "tool-call":
                seen.add(block["id"])
            if block.get("type") == "tool-result":
                assert block["toolCallId"] in seen, f"result for {block['toolCallId']} shows no earlier call"


def text_output(text: str, provider: str = "test", model: str = "stub") -> SummarizerOutput:
    summary = snapshot_json([{"type": "text", "text": text}])
    assert isinstance(summary, FrozenList)
    return SummarizerOutput(summary=summary, provider=provider, model=model)


Behaviour = Callable[[SummaryRequest, AbortSignal], SummarizerOutput | None]
"""What a scripted summarizer does with a request: an output, ``None`` for the default one, or raise."""


class ScriptedSummarizer:
    """A summarizer whose behaviour is a function: records every request it got."""

    def __init__(self, behaviour: Behaviour | None = None, text: str = "Short summary.") -> None:
        self.behaviour = behaviour
        self.text = text
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest, signal: AbortSignal) -> SummarizerOutput:
        self.requests.append(request)
        if self.behaviour is not None:
            answer = self.behaviour(request, signal)
            if answer is not None:
                return answer
        return text_output(self.text)


def data_of(event: Event) -> Any:
    """An event's data, loosely typed for assertions."""
    return event["data"]
