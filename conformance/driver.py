"""Driving a subject and the spec model side by side.

:class:`Driver` sends one protocol request to the subject, asks :mod:`conformance.model` what the
answer must be, and raises :class:`Mismatch` (naming the request, the expected answer and the
actual one) when they differ. The machine, the exhaustive checker and the crash checks all drive
subjects through it, so every request it sends first checks the run's deadline
(:func:`conformance.report.check_deadline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conformance.crash_rules import (
    check_d3_1_header,
    check_d3_2_prefix,
    check_d3_3_flushed_kept,
    check_d3_5_no_false_corruption,
)
from conformance.engine_model import model_request
from conformance.matching import answer_fingerprint, compare
from conformance.model import (
    DurableLog,
    Expected,
    ModelStore,
    canonical_text,
    model_adopt_durable,
    model_crash,
    model_state,
)
from conformance.report import check_deadline
from conformance.subject import Response, Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.session import ABSENT
from spec.protocol import UNSUPPORTED_OP


class Unsupported(Exception):
    """The subject answered ``UNSUPPORTED_OP``: it lacks the op, which is no disagreement; the
    model is left as it was."""


class Mismatch(AssertionError):
    """The subject answered differently from the spec model. ``signature`` says how, without the
    data (``read: expected ok, got SESSION_NOT_FOUND``; ``create: result differs at
    $.header.isSeeded``), so that the same difference met twice is recognised as one."""

    def __init__(self, text: str, signature: str = "") -> None:
        super().__init__(text)
        self.signature = signature or text.splitlines()[0][:120]


def derive_signature(op: str, expected: Expected, answer: Response, difference: str) -> str:
    """How ``answer`` differs from ``expected``, with the data left out
    (:func:`conformance.matching.answer_fingerprint` of a generated workload)."""
    found = answer_fingerprint(
        expected.as_json(), bool(answer.ok), answer.error_code, difference, generated=True
    )
    return f"{op}: {found}"


def describe_answer(answer: Response) -> str:
    if answer.ok:
        return f"ok {canonical_text(answer.result)[:400]}"
    return f"error {answer.error_code}"


def describe_request(op: str, args: dict[str, Any]) -> str:
    shown = canonical_text({key: value for key, value in args.items() if value is not ABSENT})
    return f"{op} {shown[:400]}"


def find_mismatch(
    expected: Expected, answer: Response, op: str = "", target: Target = DEFAULT_TARGET
) -> str | None:
    """Why ``answer`` is not ``expected`` (:func:`conformance.matching.why_not`: codes compared,
    never messages; the target's adjustments and the timing rules' tolerances applied), or
    ``None``."""
    difference = compare(expected.as_json(), answer, op, target)
    if difference is None:
        return None
    return f"expected {expected.describe()}\n     got {describe_answer(answer)}\n     ({difference})"


def send(subject: Subject, op: str, **args: Any) -> Any:
    """One request, with ``ABSENT`` arguments left out (absent is not ``null``)."""
    return subject.request(op, **{key: value for key, value in args.items() if value is not ABSENT})


def as_sent(args: dict[str, Any]) -> dict[str, Any]:
    """The arguments as a subject receives them: the absent ones left out, the rest after the JSON
    text round trip (so the model judges what the subject is sent: the integer 2**53 arrives as a
    double, a surrogate pair's two halves as the one character they encode)."""
    present = {key: value for key, value in args.items() if value is not ABSENT}
    decoded = decode_json_text(encode_json_text(present))
    assert isinstance(decoded, dict)
    return decoded


@dataclass
class Driver:
    """A subject, the model it must match, and how many requests went by."""

    subject: Subject
    model: ModelStore = field(default_factory=ModelStore)
    requests: int = 0
    target: Target = DEFAULT_TARGET
    pending: list[tuple[str, dict[str, Any], ModelStore, Expected]] = field(default_factory=list)

    def raw(self, op: str, **args: Any) -> Any:
        """A request the model does not predict (the caller checks the answer). Past the run's
        deadline nothing is sent: :class:`conformance.report.DeadlineReached` is raised."""
        check_deadline()
        self.requests += 1
        return send(self.subject, op, **args)

    def step(self, op: str, **args: Any) -> Any:
        """Send ``op`` to the subject and to the model; the answers must agree."""
        args = as_sent(args)
        model, expected = self.predict(self.model, op, args)
        answer = self.raw(op, **args)
        self._agree(op, args, expected, answer)
        self.model = model
        return answer

    @property
    def ahead(self) -> ModelStore:
        """The model after every queued request (:meth:`queue`), as if each were answered as expected."""
        return self.pending[-1][2] if self.pending else self.model

    def queue(self, op: str, **args: Any) -> None:
        """Plan ``op`` for the next :meth:`settle`, predicted from the model after the requests
        queued before it (:attr:`ahead`)."""
        args = as_sent(args)
        model, expected = self.predict(self.ahead, op, args)
        self.pending.append((op, args, model, expected))

    def settle(self) -> None:
        """Send every queued request without waiting for each answer (``Subject.pipeline``), then
        check every answer in order as :meth:`step` does: the first that disagrees raises
        :class:`Unsupported` or :class:`Mismatch`, the model left after the last that agreed (the
        requests after it were sent too, so the caller must not trust the subject's state)."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        check_deadline()
        self.requests += len(pending)
        answers = self.subject.pipeline([(op, args) for op, args, _, _ in pending])
        for (op, args, model, expected), answer in zip(pending, answers, strict=True):
            self._agree(op, args, expected, answer)
            self.model = model

    def _agree(self, op: str, args: dict[str, Any], expected: Expected, answer: Response) -> None:
        if not answer.ok and answer.error_code == UNSUPPORTED_OP:
            raise Unsupported(op)
        problem = find_mismatch(expected, answer, op, self.target)
        if problem is not None:
            raise Mismatch(
                f"{describe_request(op, args)}\n  {problem}", derive_signature(op, expected, answer, problem)
            )

    def predict(self, model: ModelStore, op: str, args: dict[str, Any]) -> tuple[ModelStore, Expected]:
        """The model after ``op`` from ``model`` and the answer it expects (a subclass may remember them)."""
        return model_request(model, op, **args)

    def check_state(self, session_id: str) -> None:
        """The subject's view of ``session_id`` equals the model's (or both say it is not live)."""
        _, expected = model_state(self.model, session_id)
        answer = self.raw("state", id=session_id)
        problem = find_mismatch(expected, answer, "state", self.target)
        if problem is not None:
            raise Mismatch(
                f"state {session_id} after the last step\n  {problem}",
                derive_signature("state", expected, answer, problem),
            )

    def check_all_live(self) -> None:
        for session_id in sorted(self.model.live):
            self.check_state(session_id)

    def crash(self, keep: Any = "none") -> None:
        """Power loss, then every session the model knew is read back: what survived must be
        admissible under SPEC-DECISIONS D3 items 1-3 (and a torn tail is never corruption), and
        the model adopts it."""
        before = self.model
        answer = self.raw("crash", keep=keep)
        if not answer.ok:
            raise Mismatch(f"crash keep={canonical_text(keep)}: expected ok, got error {answer.error_code}")
        model, _ = model_crash(before)
        for session_id in sorted(set(before.live) | set(before.stored)):
            model = self._adopt_survivor(model, before, session_id)
        self.model = model

    def _adopt_survivor(self, model: ModelStore, before: ModelStore, session_id: str) -> ModelStore:
        entry, log = before.live.get(session_id), before.stored.get(session_id)
        header = entry.state.header if entry is not None else log.header if log is not None else None
        appended = entry.state.events if entry is not None else log.events if log is not None else ()
        flushed = len(log.events) if log is not None else 0
        answer = self.raw("read", id=session_id)
        found = bool(answer.ok)
        if not found and answer.error_code != "SESSION_NOT_FOUND":
            problems = check_d3_5_no_false_corruption(answer.error_code) or (
                f"read after a crash answered error {answer.error_code}",
            )
            raise _after_crash(session_id, problems)
        result = answer.result if found and isinstance(answer.result, dict) else {}
        events = result.get("events") if isinstance(result.get("events"), list) else []
        assert isinstance(events, list)
        problems = check_d3_1_header(found, result.get("header"), header, log is not None, self.target)
        if found:
            problems += check_d3_2_prefix(events, appended) + check_d3_3_flushed_kept(events, flushed)
        if problems:
            raise _after_crash(session_id, problems)
        if not found or header is None:
            return model_adopt_durable(model, session_id, None)
        return model_adopt_durable(model, session_id, DurableLog(header, tuple(appended[: len(events)])))


def _after_crash(session_id: str, problems: Sequence[str]) -> Mismatch:
    """What a read after a crash broke, signed by the D3 item (not the session's name)."""
    item = problems[0].split(":", 1)[0]
    return Mismatch(
        f"read {session_id} after a crash:\n  " + "\n  ".join(problems), f"read after a crash: {item}"
    )
