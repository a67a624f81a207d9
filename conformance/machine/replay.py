"""Replaying one failing stateful case, shrunk to a minimal sequence (issue 21, item 6).

A stateful family that meets a disagreement records the steps that reached it: the machine its
requests (each as the subject was sent it) and its power cuts, the exhaustive checker its letters.
Before the case is reported the steps are replayed on a fresh subject (reset, then the steps, each
live session's ``state`` compared after every one) and shrunk: runs of steps are dropped for as
long as the replay still meets the same disagreement (its signature), so a step that stays is one
the disagreement needs. Every step is judged by the spec model, whatever came before it, so any
subsequence is a program with a known right answer.

The case's detail then shows the shrunk steps and a command that replays exactly them,
``python -m conformance --subject X --families machine --replay TOKEN``, where ``TOKEN`` is the
recording itself (:func:`encode_recording`: the family, the storage and the steps as JSON text,
compressed, base64url), so that the command needs no file beside it.
"""

from __future__ import annotations

import base64
import binascii
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from conformance.builders import START_TIME
from conformance.crash.family import FAIL_FAST, subject_argument
from conformance.driver import Driver, Mismatch, Unsupported, describe_request
from conformance.report import CaseResult, Options, case_slug
from conformance.subject import Subject
from conformance.targets import DEFAULT_TARGET, Target
from spec.format.json_text import JsonTextError, decode_json_text, encode_json_text
from spec.log.json import JsonValue

Step = tuple[str, dict[str, JsonValue]]  # an op (or a letter) and its arguments, as sent
Replayer = Callable[[Subject, Sequence[Step], str, Target], str | None]
"""Replays steps on a subject reset to a storage: the signature of the first disagreement, or
``None`` when every step agreed."""

SHRINK_SECONDS: Final = 20.0  # for every disagreement of a run: past it, each is shown as shrunk so far
SHRUNK_AT_MOST: Final = (
    5  # disagreements per run given a replay (the rest show only the program that met them)
)


@dataclass(frozen=True)
class Recording:
    """What a replay needs: the family whose replayer runs it, the storage the subject is reset
    to, and the steps."""

    family: str
    storage: str
    steps: tuple[Step, ...]


class ReplayTokenError(ValueError):
    """A ``--replay`` token that is not a recording."""


def encode_recording(recording: Recording) -> str:
    steps: list[JsonValue] = [[op, args] for op, args in recording.steps]
    text = encode_json_text({"family": recording.family, "storage": recording.storage, "steps": steps})
    return base64.urlsafe_b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii").rstrip("=")


def decode_recording(token: str) -> Recording:
    try:
        text = zlib.decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        value = decode_json_text(text)
    except (binascii.Error, zlib.error, ValueError, JsonTextError) as error:
        raise ReplayTokenError(f"--replay: not a recording ({error})") from None
    if not isinstance(value, dict):
        raise ReplayTokenError("--replay: not a recording (expected a JSON object)")
    family, storage, steps = value.get("family"), value.get("storage"), value.get("steps")
    if not isinstance(family, str) or not isinstance(storage, str) or not isinstance(steps, list):
        raise ReplayTokenError("--replay: not a recording (expected its family, storage and steps)")
    parsed: list[Step] = []
    for step in steps:
        if not isinstance(step, list) or len(step) != 2:
            raise ReplayTokenError(f"--replay: a step is not [op, args]: {encode_json_text(step)[:80]}")
        op, args = step
        if not isinstance(op, str) or not isinstance(args, dict):
            raise ReplayTokenError(f"--replay: a step is not [op, args]: {encode_json_text(step)[:80]}")
        parsed.append((op, dict(args)))
    return Recording(family, storage, tuple(parsed))


def replay_program(subject: Subject, steps: Sequence[Step], storage: str, target: Target) -> str | None:
    """The machine's replayer: reset and clock as every example starts, then each request (a
    ``crash`` step cuts the power as the machine does), each live session's ``state`` compared
    after every step; a refused step changes nothing and the replay goes on."""
    driver = Driver(subject, target=target)
    try:
        driver.step("reset", storage=storage)
        driver.step("clock", now=START_TIME)
        for op, args in steps:
            try:
                if op == "crash":
                    driver.crash(args.get("keep", "none"))
                else:
                    driver.step(op, **args)
            except Unsupported:
                continue
            driver.check_all_live()
    except Mismatch as mismatch:
        return mismatch.signature
    return None


def shrink(
    steps: Sequence[Step], still_fails: Callable[[Sequence[Step]], bool], seconds: float
) -> list[Step]:
    """The shortest subsequence found that still fails: runs of steps, halving in length, dropped
    while ``still_fails`` holds; within ``seconds`` (then the shortest found so far)."""
    kept, chunk = list(steps), max(len(steps) // 2, 1)
    stop = time.monotonic() + seconds
    while chunk >= 1 and time.monotonic() < stop:
        start = 0
        while start < len(kept) and time.monotonic() < stop:
            candidate = kept[:start] + kept[start + chunk :]
            if candidate and still_fails(candidate):
                kept = candidate
            else:
                start += chunk
        chunk //= 2
    return kept


def describe_replay(
    subject: Subject, recording: Recording, replayer: Replayer, target: Target, command: str, seconds: float
) -> str:
    """The replay of a recorded disagreement: replayed once as recorded, shrunk while it fails the
    same way, the shrunk steps listed and the command that replays them; or why there is none."""
    signature = replayer(subject, recording.steps, recording.storage, target)
    if signature is None:
        return "replay: the recorded steps agree when replayed alone (the disagreement needs more state)"

    def still_fails(steps: Sequence[Step]) -> bool:
        return replayer(subject, steps, recording.storage, target) == signature

    steps = tuple(shrink(recording.steps, still_fails, seconds))
    shrunk = replace(recording, steps=steps)
    shown = [f"  {index}. {describe_request(op, dict(args))}" for index, (op, args) in enumerate(steps, 1)]
    return "\n".join(
        [
            f"shrunk to {len(steps)} of {len(recording.steps)} steps, failing with: {signature}",
            *shown,
            f"replay: python -m conformance {command} --families {recording.family} "
            f"--replay {encode_recording(shrunk)}",
        ]
    )


def with_replays(
    cases: Sequence[CaseResult],
    recordings: Mapping[str, Recording],
    subject: Subject,
    replayer: Replayer,
    options: Options,
) -> list[CaseResult]:
    """``cases`` (a family's ``diverges-<signature>`` cases among them), each of the first
    :data:`SHRUNK_AT_MOST` disagreements with its replay appended to its detail, all of them shrunk
    within :data:`SHRINK_SECONDS`; none under ``fail-fast`` (mutation testing wants the verdict)."""
    if options.extra.get(FAIL_FAST) == "1":
        return list(cases)
    by_case = {f"diverges-{case_slug(signature)}": recording for signature, recording in recordings.items()}
    chosen = [case for case in cases if case.case_id in by_case][:SHRUNK_AT_MOST]
    stop = time.monotonic() + SHRINK_SECONDS
    command = subject_argument(options)
    shown = []
    for case in cases:
        if case in chosen:
            share = (stop - time.monotonic()) / (len(chosen) - chosen.index(case))
            target = options.target or DEFAULT_TARGET
            note = describe_replay(subject, by_case[case.case_id], replayer, target, command, share)
            case = replace(case, detail=f"{case.detail}\n{note}")
        shown.append(case)
    return shown
