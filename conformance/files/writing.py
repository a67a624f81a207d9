"""The ``files`` family's writing checks: what a storage subject wrote, read byte for byte.

A workload (:func:`writing_workload`: sessions with and without a cwd, an id that needs escaping,
a fork, a session made from an empty seed, one with no events, values from every edge of D5)
runs on the subject beside the spec model, in each form (zstd-compressed and plain), with no
batch policy, so that only a ``flush`` (or ``close``) writes. Then the suite takes the files: the
``export`` op (capability ``export``), or, for a stdio subject without it, the directory the kill
check's convention names (``CONFORMANCE_STORE_ROOT``: PROTOCOL.md). Each check is one case:

- **layout** — every stored session's log is where SPEC-DECISIONS D1 puts it, under the name of
  the subject's target (``session.v4.jsonl[.zstd]``; v0 names for format 0), and no log file lies
  anywhere else;
- **header line** — the first line (the first frame's one line) is the session's header line,
  and, for a format 4 target, byte for byte the spec's encoding of it (``type`` first, then D1's
  order, compact, ``\n`` ended: :func:`spec.format.framing.encode_lines`);
- **framing** — a compressed log is standard zstd frames back to back, each with its content
  checksum, frame 0 exactly the header line, then one frame per write: a flush (or close) that
  had events to write adds exactly one frame holding exactly those events (D2); a plain log is
  complete lines;
- **zstd -dc** — the standard ``zstd`` binary reads the compressed log whole, to the same text;
- **lines** — every line is UTF-8 JSON text under D5, the log the spec's reader reads is the
  model's, event for event, and, for a format 4 target, every byte written is the spec's canonical
  encoding of that log (:func:`byte_problems`: each frame's plaintext, or the plain file whole);
- **checker** — the whole-log checker (``spec.checks.log.check_log``) finds in it exactly what it
  finds in the model's log (nothing, for this workload).

For a format 4 target that also takes files (capability ``import``), the ``lines`` check reads a
second workload's logs too (:func:`rewriting_workload`): logs the subject writes again from what it
read, a DSH v0 log's migration and the forks of resumed logs, whose stored lines hold JSON text's
number edges (integers past 2**53-1, ``-0``, fractions below 1e-4, doubles past 2**64, deep
nesting). Each is the spec's encoding of the model's log token for token, a number in any form of
the same decimal value (D5: ``2.0`` or ``2``, ``1e-07`` or ``1e-7``) but never ``-0``
(:func:`rewritten_problems`).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Final

from conformance import builders as build
from conformance import strategies as values
from conformance.builders import append_request as append
from conformance.cases.files.logs import RAW, raw_line, raw_log, v4_files, v4_header
from conformance.cases.files.v0 import v0_files, v0_header_line
from conformance.cases.files.v4 import STORED_TEXTS
from conformance.crash import with_fixed_replay
from conformance.driver import Driver, Mismatch, Unsupported
from conformance.files.reader import FilesError, decode_files, encode_files, log_files
from conformance.model import DurableLog, ModelStore
from conformance.report import CaseResult, Options, Outcome
from conformance.subject import StdioSubject, Subject
from conformance.targets import DEFAULT_TARGET, V0_NAMES, Target
from conformance.trace.specread import read_log_file
from conformance.zstd_frames import inflate_zstd
from spec.checks.log import check_log
from spec.codes import SpecError
from spec.format.framing import encode_lines, scan_zstd_frames, split_jsonl
from spec.format.json_text import decode_json_text, encode_json_text
from spec.format.naming import decode_header_line, derive_session_relpath, encode_header_line
from spec.log.events import (
    ASSISTANT_MESSAGE,
    STEP_START,
    TOOL_CALL,
    TOOL_RESULT,
    TURN_START,
    Event,
)
from spec.log.header import HEADER_FORMAT_VERSION, LEGACY_FORMAT_VERSION
from spec.log.json import JsonObject, JsonValue, is_deep_equal_json
from spec.protocol import STORE_ROOT_ENV, Request

FAMILY: Final = "files"
ZSTD_BINARY: Final = "/usr/bin/zstd"  # the standard zstd command-line tool
CHECKSUM_FLAG: Final = 0x04  # Content_Checksum_flag of a frame header descriptor

CHECKS: Final = {
    "layout": "every log lies where SPEC-DECISIONS D1 puts it, under its target's file name, and no log elsewhere "
    "(a v0 log it was handed stays as it was: read, never written)",
    "header-line": "a log's first line is its session's header line, byte for byte (format 4)",
    "framing": "a compressed log is standard zstd frames: the header line's, then one per write holding its events (D2)",
    "zstd-dc": "the standard zstd -dc reads a compressed log whole, to the same text",
    "lines": "every line is UTF-8 JSON text under D5, the log reads back as the one appended, and "
    "(format 4) every byte is the spec's canonical encoding",
    "checker": "the whole-log checker finds in the stored log what it finds in the appended one",
}


def writing_workload() -> tuple[Request, ...]:
    """Sessions with a cwd and without, an id that needs escaping, several flushes (one with
    nothing new to write), a fork, a session from an empty seed, one with no events, and values
    from every edge of the domain (an astral character, U+2028, U+0085, a lone surrogate, the
    safe-integer bounds, several blocks of types no rule knows, an ``isError`` left out)."""
    w, odd = "w", f"a/b ~{values.NON_BMP}"
    text = f"read {values.NON_BMP}\u2028\u2029\x85\r {values.LONE_SURROGATES[0]} it"
    result: JsonObject = {
        **build.tool_result("c1", text, build.ABSENT_FLAG, more=(values.IMAGE_BLOCK, values.UNKNOWN_BLOCK)),
        "bounds": [values.SAFE_BOUND, -values.SAFE_BOUND, 1.5],
    }
    message = build.assistant_message("a1", "reading", ("c1",), more=(values.UNKNOWN_BLOCK,))
    return (
        ("create", {"id": w, "meta": {"cwd": "/work/project", "agentPreset": "explore"}}),
        *build.open_turn(w, 0, build.user_message("u1", text)),
        ("flush", {"id": w}),
        append(w, STEP_START, build.step_start(1, 1)),
        append(w, ASSISTANT_MESSAGE, message, surfaceOp="append"),
        append(w, TOOL_CALL, build.tool_call("c1")),
        append(w, TOOL_RESULT, result, surfaceOp="append", sourceEventSeqs=[3]),
        build.close_step(w, 1, 1),
        ("flush", {"id": w}),
        build.close_turn(w, 1),
        ("flush", {"id": w}),
        ("flush", {"id": w}),
        ("create", {"id": odd}),
        append(odd, TURN_START, build.turn_start(1)),
        build.close_turn(odd, 1),
        ("close", {"id": odd}),
        ("fork", {"source": w, "child": "f"}),
        ("flush", {"id": "f"}),
        ("create", {"id": "e", "seed": []}),
        ("close", {"id": "e"}),
        ("create", {"id": "z", "meta": {"cwd": "/"}}),
        ("flush", {"id": "z"}),
        append(w, TURN_START, build.turn_start(2)),
        ("close", {"id": w}),
    )


ONLY_PAST_THE_BOUND: Final = (
    '{"pos":[9007199254740993],"neg":[-9007199254740993],"obj":{"n":18446744073709551615},'
    '"deep":[[{"m":-9223372036854775807}]]}'
)
"""Containers each holding one integer past the safe bound and nothing else to settle: a reader
must look at every integer of every container, not only at a container something else sent it to."""


def rewriting_logs() -> list[tuple[str, str, bool, bool]]:
    """Each raw JSON text of the files cases' stored lines
    (:data:`conformance.cases.files.v4.STORED_TEXTS`: integers past 2**53-1, -0, fractions below
    1e-4, doubles past 2**64, deep nesting...) and :data:`ONLY_PAST_THE_BOUND` in a v4 log and in a
    DSH v0 log of its own, so that a text a reader sends to a slower path takes no other with it;
    :data:`ONLY_PAST_THE_BOUND` also as a tool call's arguments in a turn left open (events of known
    types, with no ``true``, ``null`` or float beside the text). Each log's session id, its text,
    whether it is a v0 log and whether the text is a tool call's arguments."""
    texts = [text for group in STORED_TEXTS.values() for text in group] + [ONLY_PAST_THE_BOUND]
    plain = [
        (f"{'o' if legacy else 'r'}{index}", text, legacy, False)
        for index, text in enumerate(texts)
        for legacy in (False, True)
    ]
    return plain + [
        (f"{'o' if legacy else 'r'}call", ONLY_PAST_THE_BOUND, legacy, True) for legacy in (False, True)
    ]


def rewriting_files(compressed: bool) -> dict[str, bytes]:
    """The :func:`rewriting_logs`, each with one event holding its text (in a v0 log marked
    ``ignorable``, as a v0 log may hold an unknown type), or a turn and a step started and a tool
    call whose arguments are the text."""
    files: dict[str, bytes] = {}
    for session_id, text, legacy, as_arguments in rewriting_logs():
        if as_arguments:
            call = {**build.tool_call("c1"), "arguments": RAW}
            lines = [
                raw_line(0, encode_json_text(build.turn_start(1)), TURN_START),
                raw_line(1, encode_json_text(build.step_start(1, 1)), STEP_START),
                raw_line(2, text, TOOL_CALL, data=call),
            ]
        else:
            lines = [raw_line(0, text, ignorable=True) if legacy else raw_line(0, text)]
        if legacy:
            files |= v0_files(raw_log(v0_header_line(session_id), lines, compressed), compressed, session_id)
        else:
            header = encode_header_line(v4_header(session_id))
            files |= v4_files(raw_log(header, lines, compressed), compressed, session_id)
    return files


def rewriting_workload(compressed: bool) -> tuple[Request, ...]:
    """Logs written again from what was read: the :func:`rewriting_files` placed, each resumed (a
    v0 log's resume writes all of it again as a v4 log), forked at its end (the child's log written
    from the events read) and closed, child and parent."""
    return (
        (
            "reset",
            {"storage": "file", "compressed": compressed, "files": encode_files(rewriting_files(compressed))},
        ),
        ("clock", {"now": build.START_TIME}),
        *(
            step
            for session_id, *_ in rewriting_logs()
            for step in (
                ("resume", {"id": session_id}),
                ("fork", {"source": session_id, "child": f"{session_id}f"}),
                ("close", {"id": f"{session_id}f"}),
                ("close", {"id": session_id}),
            )
        ),
    )


@dataclass
class Written:
    """One form's run: the model after it, each stored session's writes (the events each write
    added, in order), the files taken from the subject, and the compression it ran with; for a
    format 4 target with ``import``, the run of :func:`rewriting_workload` after it."""

    compressed: bool
    model: ModelStore
    writes: dict[str, list[tuple[Event, ...]]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    rewritten: Written | None = None
    unanswered: str | None = None  # how the rewriting workload's run went otherwise than the model says


# --- running the workload ---------------------------------------------------------------------------


def run_workload(driver: Driver, compressed: bool, workload: Sequence[Request] | None = None) -> Written:
    """The workload (by default :func:`writing_workload`) in one form, beside the model; each
    request that made events durable is a write."""
    if workload is None:
        driver.step("reset", storage="file", compressed=compressed)
        driver.step("clock", now=build.START_TIME)
    written = Written(compressed, driver.model)
    for op, args in writing_workload() if workload is None else workload:
        before = driver.model.stored
        driver.step(op, **args)
        for session_id, log in driver.model.stored.items():
            already = before.get(session_id)
            count = len(already.events) if already is not None else 0
            written.writes.setdefault(session_id, [])
            if len(log.events) > count:
                written.writes[session_id].append(tuple(log.events[count:]))
    written.model = driver.model
    return written


def take_exported(driver: Driver) -> dict[str, bytes]:
    answer = driver.raw("export")
    if not answer.ok:
        raise Mismatch(f"export answered {answer.error_code}: {answer.error_message}")
    try:
        return decode_files(answer.result)
    except FilesError as error:
        raise Mismatch(f"export's answer is not a set of files: {error}") from None


def read_directory(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            files[path.relative_to(root).as_posix()] = path.read_bytes()
    return files


def run_both_forms(
    subject: Subject, target: Target, take: Callable[[Driver], dict[str, bytes]], rewrite: bool = False
) -> list[Written]:
    """Each form's workload and its files; with ``rewrite``, then :func:`rewriting_workload`'s."""
    runs: list[Written] = []
    driver = Driver(subject, target=target)
    for compressed in (True, False):
        written = run_workload(driver, compressed)
        written.files = take(driver)
        if rewrite:
            try:
                written.rewritten = run_workload(driver, compressed, rewriting_workload(compressed))
                written.rewritten.files = take(driver)
            except (Mismatch, Unsupported) as failure:  # a finding of the lines check, not the replay's
                written.unanswered = f"the workload of logs written again did not run to its end: {failure}"
        runs.append(written)
    return runs


# --- the checks -----------------------------------------------------------------------------------------


def expected_path(header: Mapping[str, JsonValue], compressed: bool, target: Target) -> str:
    project, session, name = derive_session_relpath(dict(header), compressed)
    if target.format == LEGACY_FORMAT_VERSION:
        name = V0_NAMES.get(name, name)
    return f"{project}/{session}/{name}"


def written_logs(run: Written, target: Target) -> Iterator[tuple[str, DurableLog, str]]:
    """Each stored log of the model whose file is where D1 puts it: its id, the log and the path
    (a missing file is the layout check's finding)."""
    for session_id, log in sorted(run.model.stored.items()):
        path = expected_path(log.header, run.compressed, target)
        if path in run.files:
            yield session_id, log, path


def check_layout(run: Written, target: Target) -> list[str]:
    """D1's layout after the writing workload, and after :func:`rewriting_workload` (when it ran):
    there, a log the suite placed may stay where it was, and a v0 log, which is never written (D1),
    must stay byte for byte as placed, its resumed log written anew under the v4 name."""
    problems = layout_problems(run, target)
    again = run.rewritten
    if again is not None:
        placed = rewriting_files(again.compressed)
        problems += [f"written again: {problem}" for problem in layout_problems(again, target, placed)]
        problems += [
            f"written again: the v0 log {path} was written (D1: v0 logs are read, never written)"
            for path, data in sorted(placed.items())
            if path.rsplit("/", 1)[-1] in V0_NAMES.values() and again.files.get(path) != data
        ]
    return problems


def layout_problems(run: Written, target: Target, placed: Mapping[str, bytes] | None = None) -> list[str]:
    """Each stored log of the model where D1 puts it, and no other log file (but the ``placed``)."""
    expected = {
        expected_path(log.header, run.compressed, target): sid for sid, log in run.model.stored.items()
    }
    problems = [
        f"session {sid!r}: no log at {path} (D1: <projectKey(cwd)>/<encodeSegment(id)>/<file name>)"
        for path, sid in sorted(expected.items())
        if path not in run.files
    ]
    problems += [
        f"a log file where D1 puts none: {path}"
        for path in log_files(run.files)
        if path not in expected and path not in (placed or {})
    ]
    return problems


def frames_of(data: bytes) -> tuple[list[bytes], list[str]]:
    """The plaintext of each complete frame, and what is wrong with the framing."""
    problems: list[str] = []
    try:
        scan = scan_zstd_frames(data)
    except SpecError as error:
        return [], [f"the frames do not scan: {error.message}"]
    if scan.torn_offset is not None:
        problems.append(f"an incomplete frame from byte {scan.torn_offset} on")
    plaintexts: list[bytes] = []
    for frame in scan.frames:
        raw = data[frame.offset : frame.offset + frame.length]
        if frame.skippable:
            problems.append(f"a skippable frame at byte {frame.offset} (DSH writes none)")
            continue
        if not raw[4] & CHECKSUM_FLAG:
            problems.append(f"the frame at byte {frame.offset} has no content checksum")
        try:
            plaintexts.append(inflate_zstd(raw)[0])
        except ValueError as error:
            problems.append(f"the frame at byte {frame.offset} does not decompress ({error})")
    return plaintexts, problems


def units_of(data: bytes, compressed: bool) -> tuple[list[bytes], list[str]]:
    """The log's units of text: its frames' plaintexts, or (plain) the whole file as one."""
    if compressed:
        return frames_of(data)
    return [data], []


def lines_of(text: bytes) -> tuple[list[bytes], list[str]]:
    scan = split_jsonl(text)
    problems = (
        [] if scan.torn_offset is None else [f"bytes after the last newline, from byte {scan.torn_offset}"]
    )
    return [line.text for line in scan.lines], problems


def check_header_line(run: Written, target: Target) -> list[str]:
    problems: list[str] = []
    for session_id, log, path in written_logs(run, target):
        units, _ = units_of(run.files[path], run.compressed)
        lines, _ = lines_of(units[0]) if units else ([], [])
        if run.compressed and len(lines) != 1:
            problems.append(f"{path}: frame 0 holds {len(lines)} lines, not exactly the header line")
        if not lines:
            problems.append(f"{path}: no header line")
            continue
        try:
            line = decode_json_text(lines[0].decode("utf-8"))
        except ValueError as error:
            problems.append(f"{path}: the header line is not UTF-8 JSON ({error})")
            continue
        want: JsonValue = dict(encode_header_line(log.header))
        if target.format == LEGACY_FORMAT_VERSION and isinstance(line, dict):
            shown = {key: value for key, value in line.items() if key != "type"}
            header = target.header(dict(log.header), shown)
            assert isinstance(header, dict)  # a format 0 target's view of a header object
            want = {"type": "session", **header}
        if not is_deep_equal_json(want, line):
            problems.append(f"{path}: the header line is {line!r}, expected {want!r}")
            continue
        try:
            decode_header_line(line, session_id, path.rsplit("/", 1)[-1])
        except SpecError as error:
            problems.append(f"{path}: the header line does not read: {error.code}: {error.message}")
    return problems + byte_problems(run, target, header_only=True)


def check_framing(run: Written, target: Target) -> list[str]:
    problems: list[str] = []
    for session_id, _log, path in written_logs(run, target):
        data = run.files[path]
        if not run.compressed:
            _, torn = lines_of(data)
            problems += [f"{path}: {problem}" for problem in torn]
            continue
        plaintexts, found = frames_of(data)
        problems += [f"{path}: {problem}" for problem in found]
        writes = run.writes.get(session_id, [])
        if len(plaintexts) != 1 + len(writes):
            problems.append(
                f"{path}: {len(plaintexts)} frames, expected {1 + len(writes)}: the header line's, then one for "
                f"each of the {len(writes)} flushes that had events to write"
            )
            continue
        for number, (plaintext, events) in enumerate(zip(plaintexts[1:], writes), start=1):
            lines, torn = lines_of(plaintext)
            problems += [f"{path}: frame {number}: {problem}" for problem in torn]
            if len(lines) != len(events):
                problems.append(
                    f"{path}: frame {number} holds {len(lines)} lines, its flush wrote {len(events)} events"
                )
    return problems


def check_zstd_dc(run: Written, target: Target, binary: str) -> list[str]:
    problems: list[str] = []
    for log in run.model.stored.values():
        path = expected_path(log.header, True, target)
        if path not in run.files:
            continue
        data = run.files[path]
        shown = subprocess.run([binary, "-dc"], input=data, capture_output=True, timeout=60)
        plaintexts, _ = frames_of(data)
        if shown.returncode != 0:
            problems.append(
                f"{path}: zstd -dc failed: {shown.stderr.decode('utf-8', 'replace').strip()[:300]}"
            )
        elif shown.stdout != b"".join(plaintexts):
            problems.append(f"{path}: zstd -dc reads {len(shown.stdout)} bytes, not the frames' text")
    return problems


def check_lines(run: Written, target: Target) -> list[str]:
    problems: list[str] = []
    for session_id, log, path in written_logs(run, target):
        units, _ = units_of(run.files[path], run.compressed)
        for unit in units:
            lines, _ = lines_of(unit)
            for line in lines:
                try:
                    decode_json_text(line.decode("utf-8"))
                except ValueError as error:
                    problems.append(
                        f"{path}: a line that is not UTF-8 JSON text under D5 ({error}): {line[:120]!r}"
                    )
        view = read_log_file(session_id, path, run.files[path])
        if view.code is not None:
            problems.append(f"{path}: the spec's reader refuses it: {view.code}: {view.message}")
        elif not is_deep_equal_json(list(view.events), list(log.events)):
            problems.append(
                f"{path}: the spec's reader reads {len(view.events)} events, not the {len(log.events)} appended"
            )
    return problems + byte_problems(run, target, header_only=False) + rewritten_problems(run, target)


# --- byte-exact writing (format 4; docs/choices.md, "Byte-exact writing") --------------------------


def canonical_units(log: DurableLog, writes: Sequence[tuple[Event, ...]]) -> list[bytes]:
    """What the spec says each write of a log holds, byte for byte: the header line
    (:func:`spec.format.naming.encode_header_line`), then the events each write made durable, all
    as :func:`spec.format.framing.encode_lines` writes them. Each is one frame's plaintext in a
    compressed log (D2: one frame per write); a plain log is their concatenation."""
    return [encode_lines([encode_header_line(log.header)]), *(encode_lines(events) for events in writes)]


def first_difference(got: bytes, want: bytes) -> str:
    """Where two byte strings part, with a few bytes of each from there on."""
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    start = max(0, at - 16)
    return (
        f"{len(got)} bytes where the spec's encoding has {len(want)}, parting at byte {at}: "
        f"wrote {got[start : at + 24]!r}, the spec writes {want[start : at + 24]!r}"
    )


def byte_problems(run: Written, target: Target, header_only: bool) -> list[str]:
    """For a format 4 target, every stored log's bytes against :func:`canonical_units` of the
    model's log: each frame's plaintext (compressed; the compressed bytes themselves are the zstd
    build's, notes/dsh-persistence §11), or the whole file (plain); with ``header_only``, only the
    first line, its newline included. A format 0 target writes DSH's bytes, which the spec does
    not pin (D11: judged only by what it claimed)."""
    if target.format != HEADER_FORMAT_VERSION:
        return []
    problems: list[str] = []
    for session_id, log, path in written_logs(run, target):
        want = canonical_units(log, run.writes.get(session_id, []))
        data = run.files[path]
        got, _ = frames_of(data) if run.compressed else ([data], [])
        if header_only:
            first = got[0][: got[0].find(b"\n") + 1 or None] if got else b""
            if first != want[0]:
                problems.append(f"{path}: the header line: {first_difference(first, want[0])}")
            continue
        if not run.compressed:
            want = [b"".join(want)]
        elif len(got) != len(want):
            problems.append(f"{path}: {len(got)} frames, the spec's writes make {len(want)} (see framing)")
            continue
        for number, (unit, canonical) in enumerate(zip(got, want)):
            if unit != canonical:
                where = f"frame {number}" if run.compressed else "the file"
                problems.append(f"{path}: {where}: {first_difference(unit, canonical)}")
    return problems


_STRING_OR_NUMBER: Final = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)')


def number_literals(text: bytes) -> tuple[bytes, list[bytes]]:
    """JSON text with each number literal (outside strings) replaced by ``0``, and the literals."""
    numbers: list[bytes] = []

    def take(match: re.Match[bytes]) -> bytes:
        if match.group(1) is None:
            return match.group(0)
        numbers.append(match.group(1))
        return b"0"

    return _STRING_OR_NUMBER.sub(take, text), numbers


def same_but_number_forms(got: bytes, want: bytes) -> str | None:
    """``None`` when ``got`` is ``want``, the spec's encoding, token for token but for the form of
    its numbers: each may be written in any form of the same decimal value (D5 leaves the form to
    the language: ``2.0`` or ``2``, ``1e-07`` or ``1e-7``), never as -0 (not JSON, D5); else the
    first difference."""
    got_text, got_numbers = number_literals(got)
    want_text, want_numbers = number_literals(want)
    if got_text != want_text or len(got_numbers) != len(want_numbers):
        return first_difference(got, want)
    for number, (mine, spec) in enumerate(zip(got_numbers, want_numbers)):
        if Decimal(mine.decode()) != Decimal(spec.decode()) or mine.startswith(b"-") != spec.startswith(b"-"):
            return f"number {number} is written {mine.decode()!r}, the spec's value is {spec.decode()!r}"
    return None


def rewritten_problems(run: Written, target: Target) -> list[str]:
    """For :func:`rewriting_workload`'s run (format 4), every log the subject wrote whole (not one
    it was handed): its text (frames joined) against the spec's encoding of the model's log, by
    :func:`same_but_number_forms`."""
    if run.unanswered is not None:
        return [run.unanswered]
    again = run.rewritten
    if again is None or target.format != HEADER_FORMAT_VERSION:
        return []
    placed = set(rewriting_files(again.compressed))
    problems: list[str] = []
    for _session_id, log, path in written_logs(again, target):
        if path in placed:
            continue
        units, _ = units_of(again.files[path], again.compressed)
        found = same_but_number_forms(
            b"".join(units), encode_lines([encode_header_line(log.header), *log.events])
        )
        if found is not None:
            problems.append(f"{path} (written again from what was read): {found}")
    return problems


def check_checker(run: Written, target: Target) -> list[str]:
    problems: list[str] = []
    for session_id, log in sorted(run.model.stored.items()):
        path = expected_path(log.header, run.compressed, target)
        view = read_log_file(session_id, path, run.files[path]) if path in run.files else None
        if view is None or view.header is None:
            continue
        version = LEGACY_FORMAT_VERSION if target.format == LEGACY_FORMAT_VERSION else 4
        found = [(v.rule, v.seq) for v in check_log(view.events, dict(view.header), format_version=version)]
        wanted = [(v.rule, v.seq) for v in check_log(log.events, dict(log.header), format_version=version)]
        if found != wanted:
            problems.append(f"{path}: the checker finds {found}, in the appended log {wanted}")
    return problems


# --- the family --------------------------------------------------------------------------------------


def _cases(runs: Sequence[Written], target: Target, seconds: float, how: str) -> list[CaseResult]:
    binary = ZSTD_BINARY if os.path.exists(ZSTD_BINARY) else shutil.which("zstd")
    results: list[CaseResult] = []
    share = seconds / len(CHECKS)
    for key, sentence in CHECKS.items():
        name = f"{key}: {sentence} ({how})"
        if key == "zstd-dc" and binary is None:
            results.append(
                CaseResult(FAMILY, name, "not run", f"no zstd binary ({ZSTD_BINARY})", case_id=key)
            )
            continue
        if key != "layout" and not _found_logs(runs, target, compressed_only=key == "zstd-dc"):
            nothing = "no log lies where D1 puts one (see layout), so there was nothing to check"
            results.append(CaseResult(FAMILY, name, "not run", nothing, case_id=key))
            continue
        problems: list[str] = []
        for run in runs:
            form = "zstd" if run.compressed else "plain"
            if key == "zstd-dc":
                found = check_zstd_dc(run, target, str(binary)) if run.compressed else []
            else:
                found = CHECKERS[key](run, target)
            problems += [f"{form}: {problem}" for problem in found]
        if problems:
            shown = "\n".join(problems[:12]) + (
                f"\n... and {len(problems) - 12} more" if len(problems) > 12 else ""
            )
            results.append(CaseResult(FAMILY, name, "failed", shown, share, case_id=key))
        else:
            results.append(CaseResult(FAMILY, name, "passed", seconds=share, case_id=key))
    return results


def _found_logs(runs: Sequence[Written], target: Target, compressed_only: bool = False) -> int:
    """How many of the stored sessions' logs lie where D1 puts them: the logs a check can read."""
    return sum(
        expected_path(log.header, run.compressed, target) in run.files
        for run in runs
        if run.compressed or not compressed_only
        for log in run.model.stored.values()
    )


CHECKERS: Final[Mapping[str, Callable[[Written, Target], list[str]]]] = {
    "layout": check_layout,
    "header-line": check_header_line,
    "framing": check_framing,
    "lines": check_lines,
    "checker": check_checker,
}


def _not_run(reason: str, outcome: Outcome = "not run") -> list[CaseResult]:
    return [
        CaseResult(FAMILY, f"{key}: {sentence}", outcome, reason, case_id=key)
        for key, sentence in CHECKS.items()
    ]


def check_files(subject: Subject, options: Options) -> list[CaseResult]:
    """The runner's entry point: the workload through ``export``, or over stdio through the store
    root; unsupported for a subject with neither."""
    target = options.target or DEFAULT_TARGET
    if "storage" not in options.capabilities:
        return _not_run("needs capability storage", "unsupported")
    began = time.perf_counter()
    try:
        rewrite = "import" in options.capabilities and target.format == HEADER_FORMAT_VERSION
        if "export" in options.capabilities:
            runs = run_both_forms(subject, target, take_exported, rewrite)
            how = "read through export"
        elif isinstance(subject, StdioSubject) and "crash-seam" not in options.capabilities:
            runs = _run_on_store_root(subject, target, rewrite)  # the kill check's convention: no crash seam
            how = f"read from {STORE_ROOT_ENV}"
        else:
            return _not_run(
                "needs capability export, or over stdio a storage subject without a crash seam, which "
                "stores in CONFORMANCE_STORE_ROOT",
                "unsupported",
            )
    except Unsupported as refused:  # the workload never ran to its end: nothing to certify
        return _not_run(
            f"the subject answered UNSUPPORTED_OP for {refused} in the writing workload", "unsupported"
        )
    except Mismatch as mismatch:
        failed = CaseResult(
            FAMILY,
            "the writing workload answers as the spec model says",
            "failed",
            str(mismatch),
            case_id="replay",
            fingerprint=mismatch.signature,
        )
        return with_fixed_replay([failed, *_not_run("the writing workload did not run to its end")], options)
    seconds = time.perf_counter() - began
    replay = CaseResult(
        FAMILY, "the writing workload answers as the spec model says", "passed", case_id="replay"
    )
    return with_fixed_replay([replay, *_cases(runs, target, seconds, how)], options)


def _run_on_store_root(subject: StdioSubject, target: Target, rewrite: bool = False) -> list[Written]:
    """A fresh process of the subject's command on a fresh store root; the files are read from the
    directory once each form's workload has run."""
    with tempfile.TemporaryDirectory(prefix="conformance-files-") as root:
        fresh = StdioSubject(subject.command, timeout=subject.timeout, env={STORE_ROOT_ENV: root})
        try:
            return run_both_forms(fresh, target, lambda driver: read_directory(Path(root)), rewrite)
        finally:
            fresh.close()


__all__ = ["CHECKS", "Written", "check_files", "run_workload", "writing_workload"]
