"""``dsh-session check`` without the command line: check log files and say what was found, as
text for people, JSON lines for scripts, or SARIF 2.1.0 for CI annotations.

Each path given is a log file, read whatever its name (:mod:`reference.logfile`), or a directory
searched for log files; a directory that holds none is reported, never passed over in silence.
Every violation carries its rule id, its seq and the file line of its event (the header, line 1,
for a violation of the log as a whole); repeated violations of one rule are grouped
("5× step-scoped at seqs 1–5"). When only relational rules fail, the report says that
``--core-only`` would pass and what the relational rules add.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO, Final, TextIO

from reference.exits import (
    CHECK_FORMATS,
    EXIT_FINDINGS,
    EXIT_NO_LOGS,
    EXIT_OK,
    EXIT_PRECEDENCE,
    EXIT_UNREADABLE,
    LOG_FILE_SUFFIXES,
)
from reference.logfile import InputError, LogFile, LogForm, find_logs, open_log, read_log_file
from reference.persistence.fastjson import collector_paused
from spec.checks.log import CORE_RULES, LEGACY_RULES, check_log
from spec.checks.violation import Violation
from spec.codes import SpecError
from spec.format.framing import LinePlace

NO_LOGS_FOUND: Final = "NO_LOGS_FOUND"  # the code of a directory that holds no log file
READ_RULE: Final = "log-readable"  # the SARIF rule of a file that could not be read as a log
TORN_RULE: Final = "torn-tail"  # the SARIF rule (a note) of a torn tail the reader dropped
RELATIONAL_HINT: Final = (
    "only relational rules are broken: --core-only (what a DSH session itself checks when it loads "
    "a log) would pass. The relational rules add how turns, steps, tool calls and compaction "
    "brackets nest, shadow prices, repair closers and the header's lineage; a fragment cut from a "
    "longer session breaks them without being damaged. dsh-session rules lists them all."
)
TORN_NOTE: Final = (
    "a crash cut the last write short; the events before it are read, and the next resume cuts the "
    "file back to where the tail starts (SPEC-DECISIONS D3 item 4)"
)
SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass(frozen=True)
class CheckedLog:
    """One log file checked: the file read (or why it could not be), and its violations."""

    path: str
    file: LogFile | None
    error: InputError | SpecError | None
    violations: tuple[Violation, ...]
    core_only: bool
    legacy: tuple[
        Violation, ...
    ] = ()  # findings a DSH v0 log already held (LEGACY_RULES): reported, not failed
    event_count: int = 0  # the events read (committed and recovered)

    @property
    def relational_only(self) -> bool:
        """The default check failed on relational rules alone: ``--core-only`` would pass."""
        return (
            not self.core_only
            and bool(self.violations)
            and all(violation.rule not in CORE_RULES for violation in self.violations)
        )

    def place_of(self, violation: Violation) -> LinePlace | None:
        """The line of the violation's event, or of the header (line 1) for the log as a whole."""
        if self.file is None:
            return None
        if violation.seq is None:
            return LinePlace(1, 0, 0 if self.file.form is not LogForm.JSONL else None)
        if 0 <= violation.seq < len(self.file.places):
            return self.file.places[violation.seq]
        return None

    @property
    def torn(self) -> str | None:
        """Where the torn tail the reader dropped starts (``torn tail from line 11, byte 1496``),
        or ``None`` when the log ends clean."""
        if self.file is None or (self.file.torn_place is None and self.file.log.truncate_to is None):
            return None
        place = self.file.torn_place
        if place is None:
            return f"torn tail from byte {self.file.log.truncate_to}"
        return f"torn tail from line {place.line}, byte {place.byte}"


@dataclass(frozen=True)
class NoLogs:
    """A directory given that holds no log file."""

    path: str

    @property
    def message(self) -> str:
        names = ", ".join(f"*{suffix}" for suffix in LOG_FILE_SUFFIXES)
        return f"no log files found under {self.path} (a directory is searched for files named {names})"


Outcome = CheckedLog | NoLogs


def check_log_file(
    path: str, core_only: bool = False, opener: Callable[[str], BinaryIO] = open_log
) -> CheckedLog:
    """Read one log file (opened by ``opener``) and check it against every rule (the core rules
    alone with ``core_only``)."""
    try:
        file = read_log_file(
            path, checked_only=True, opener=opener
        )  # the events are checked, never handed out
    except (InputError, SpecError) as error:
        return CheckedLog(path, None, error, (), core_only)
    events = file.events
    found = check_log(
        events,
        file.log.header,
        relational=not core_only,
        format_version=file.log.format_version,
        messages_checked=len(events),  # read_log_file's read path checked every message (load_log)
    )
    violations = tuple(violation for violation in found if violation.rule not in LEGACY_RULES)
    legacy = tuple(violation for violation in found if violation.rule in LEGACY_RULES)
    return CheckedLog(path, file, None, violations, core_only, legacy, len(events))


def check_log_file_to_send(path: str, core_only: bool = False) -> CheckedLog:
    """:func:`check_log_file`'s outcome without the events it read, to be sent to another process:
    what a report shows of the file (its form, format, torn tail and, when something is reported,
    the places of its lines) stays. Pickling the events themselves is slow, and a value nested
    deeper than the interpreter's recursion limit cannot be pickled at all (a log may hold one)."""
    outcome = check_log_file(path, core_only)
    file = outcome.file
    if file is None:
        return outcome
    located = file.places if outcome.violations or outcome.legacy else ()
    log = replace(file.log, events=(), recovered=())
    return replace(outcome, file=replace(file, log=log, located=located))


def check_paths(paths: Sequence[str], core_only: bool = False) -> Iterator[Outcome]:
    """Every log under the paths given, checked, in order; a directory with no log is a :class:`NoLogs`."""
    for path in paths:
        found = False
        for log_path in find_logs([path]):
            found = True
            # A log read to be checked holds no reference cycles. What is alive when the pause ends
            # (the outcome the caller still holds) is moved out of the collector's sight (keep):
            # otherwise the first collection after it traverses every object of the log for
            # nothing (0.1-0.2 s at 100k events); the log is still freed when the outcome is dropped.
            with collector_paused(keep=True):
                yield check_log_file(log_path, core_only)
        if not found:
            yield NoLogs(path)


def exit_status(outcomes: Iterable[Outcome]) -> int:
    """The exit status of a check: the first of :data:`EXIT_PRECEDENCE` that applies."""
    seen = {EXIT_OK}
    for outcome in outcomes:
        if isinstance(outcome, NoLogs):
            seen.add(EXIT_NO_LOGS)
        elif outcome.error is not None:
            seen.add(EXIT_UNREADABLE)
        elif outcome.violations:
            seen.add(EXIT_FINDINGS)
    return next(status for status in EXIT_PRECEDENCE if status in seen)


# --- grouping ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViolationGroup:
    """The violations of one rule in one log, in seq order."""

    rule: str
    violations: tuple[Violation, ...]


def group_violations(violations: Sequence[Violation]) -> list[ViolationGroup]:
    """Violations grouped by rule, the groups in the order their first violation comes."""
    groups: dict[str, list[Violation]] = {}
    for violation in violations:
        groups.setdefault(violation.rule, []).append(violation)
    return [ViolationGroup(rule, tuple(members)) for rule, members in groups.items()]


def format_ranges(numbers: Sequence[int]) -> str:
    """Numbers as runs: ``1–5, 9, 12–13``."""
    runs: list[list[int]] = []
    for number in sorted(set(numbers)):
        if runs and number == runs[-1][1] + 1:
            runs[-1][1] = number
        else:
            runs.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)


def describe_group(log: CheckedLog, group: ViolationGroup) -> str:
    """``5× step-scoped at seqs 1–5 (lines 2–6): <the first message>``."""
    seqs = [v.seq for v in group.violations if v.seq is not None]
    lines = [place.line for v in group.violations if (place := log.place_of(v)) is not None]
    first = group.violations[0].message
    same = all(v.message == first for v in group.violations)
    if len(group.violations) == 1:
        where = "the log" if not seqs else f"seq {seqs[0]}"
        line = f" (line {lines[0]})" if lines else ""
        return f"{group.rule} at {where}{line}: {first}"
    where = f"seqs {format_ranges(seqs)}" if seqs else "the log"
    line = f" (lines {format_ranges(lines)})" if lines else ""
    detail = first if same else f"{first} (the first of {len(group.violations)})"
    return f"{len(group.violations)}× {group.rule} at {where}{line}: {detail}"


# --- text --------------------------------------------------------------------------------------


def render_text(outcomes: Iterable[Outcome], out: TextIO) -> int:
    """One paragraph per log and a closing summary; returns the exit status."""
    seen: list[Outcome] = []
    for outcome in outcomes:
        seen.append(outcome)
        if isinstance(outcome, NoLogs):
            print(f"{outcome.path}: [{NO_LOGS_FOUND}] {outcome.message}", file=out)
            continue
        if outcome.error is not None:
            print(f"{outcome.path}: unreadable [{outcome.error.code}] {outcome.error.message}", file=out)
            continue
        file = outcome.file
        assert file is not None
        count = len(outcome.violations)
        verdict = "ok" if not count else f"{count} violation{'s' if count > 1 else ''}"
        torn = "" if outcome.torn is None else f" ({outcome.torn}, ignored)"
        print(
            f"{outcome.path}: {outcome.event_count} events, format v{file.log.format_version} ({file.form}), "
            f"{verdict}{torn}",
            file=out,
        )
        for group in group_violations(outcome.violations):
            print(f"  {describe_group(outcome, group)}", file=out)
        for group in group_violations(outcome.legacy):
            print(
                f"  legacy (already in the DSH v0 log, not a new violation): {describe_group(outcome, group)}",
                file=out,
            )
        if outcome.relational_only:
            print(f"  {RELATIONAL_HINT}", file=out)
    print(summary(seen), file=out)
    return exit_status(seen)


def summary(outcomes: Sequence[Outcome]) -> str:
    logs = [outcome for outcome in outcomes if isinstance(outcome, CheckedLog)]
    unreadable = sum(1 for log in logs if log.error is not None)
    failing = [log for log in logs if log.error is None and log.violations]
    clean = len(logs) - unreadable - len(failing)
    empty = sum(1 for outcome in outcomes if isinstance(outcome, NoLogs))
    text = f"checked {len(logs)} log{'' if len(logs) == 1 else 's'}: {clean} ok, {len(failing)} with findings"
    relational = sum(1 for log in failing if log.relational_only)
    if relational:
        text += f" ({relational} of them only relational: --core-only would pass)"
    text += f", {unreadable} unreadable"
    if empty:
        text += f"; {empty} path{'' if empty == 1 else 's'} held no log"
    return text


# --- JSON lines --------------------------------------------------------------------------------


def render_json(outcomes: Iterable[Outcome], out: TextIO) -> int:
    """One JSON object per log (and per path without logs); returns the exit status."""
    seen: list[Outcome] = []
    for outcome in outcomes:
        seen.append(outcome)
        print(json.dumps(json_row(outcome), ensure_ascii=False), file=out)
    return exit_status(seen)


def json_row(outcome: Outcome) -> dict[str, object]:
    if isinstance(outcome, NoLogs):
        return {"path": outcome.path, "error": {"code": NO_LOGS_FOUND, "message": outcome.message}}
    if outcome.error is not None:
        return {
            "path": outcome.path,
            "error": {"code": str(outcome.error.code), "message": outcome.error.message},
        }
    file = outcome.file
    assert file is not None
    violations = []
    for violation in outcome.violations:
        place = outcome.place_of(violation)
        violations.append(
            {
                "rule": violation.rule,
                "level": "core" if violation.rule in CORE_RULES else "relational",
                "seq": violation.seq,
                "line": None if place is None else place.line,
                "message": violation.message,
            }
        )
    return {
        "path": outcome.path,
        "form": str(file.form),
        "format": file.log.format_version,
        "events": outcome.event_count,
        "tornAt": file.log.truncate_to,
        "tornLine": None if file.torn_place is None else file.torn_place.line,
        "torn": None if outcome.torn is None else f"{outcome.torn}, ignored: {TORN_NOTE}",
        "violations": violations,
        "groups": [
            {"rule": group.rule, "count": len(group.violations), "seqs": [v.seq for v in group.violations]}
            for group in group_violations(outcome.violations)
        ],
        "coreOnlyWouldPass": outcome.relational_only,
        "legacy": [{"rule": v.rule, "seq": v.seq, "message": v.message} for v in outcome.legacy],
    }


# --- SARIF 2.1.0 -------------------------------------------------------------------------------


def render_sarif(outcomes: Iterable[Outcome], out: TextIO) -> int:
    """One SARIF 2.1.0 log: one result per violation (ruleId = the rule id, located at the file
    and line of its event), one per unreadable file or empty directory; returns the exit status."""
    seen = list(outcomes)
    json.dump(sarif_log(seen), out, indent=2, ensure_ascii=False)
    print(file=out)
    return exit_status(seen)


def sarif_log(outcomes: Sequence[Outcome]) -> dict[str, object]:
    from reference.rule_catalog import rule_catalog  # read from the spec's text: only SARIF needs it

    rules: list[dict[str, object]] = [
        {
            "id": entry.rule_id,
            "name": entry.rule_id,
            "shortDescription": {"text": _first_sentence(entry.sentence)},
            "fullDescription": {"text": entry.sentence},
            "defaultConfiguration": {"level": "error"},
            "properties": {"level": entry.level, "codes": [str(code) for code in entry.codes]},
        }
        for entry in rule_catalog()
    ]
    rules.append(
        {
            "id": READ_RULE,
            "name": READ_RULE,
            "shortDescription": {"text": "The file is a session log the reader accepts."},
            "fullDescription": {
                "text": "The path can be read and its bytes are a session log: a header line, then records "
                "the framing and the read path accept (the message names the code and the place)."
            },
            "defaultConfiguration": {"level": "error"},
        }
    )
    rules.append(
        {
            "id": TORN_RULE,
            "name": TORN_RULE,
            "shortDescription": {"text": "The log ends in a torn tail, which the reader drops."},
            "fullDescription": {"text": f"A write was cut short at the end of the log: {TORN_NOTE}."},
            "defaultConfiguration": {"level": "note"},
        }
    )
    index = {str(rule["id"]): position for position, rule in enumerate(rules)}
    results: list[dict[str, object]] = []
    for outcome in outcomes:
        if isinstance(outcome, NoLogs):
            results.append(
                _sarif_result(READ_RULE, index, f"[{NO_LOGS_FOUND}] {outcome.message}", outcome.path)
            )
        elif outcome.error is not None:
            message = f"[{outcome.error.code}] {outcome.error.message}"
            results.append(_sarif_result(READ_RULE, index, message, outcome.path))
        else:
            if outcome.torn is not None and outcome.file is not None:
                # in the file's own bytes: a plain log's line and byte, a zstd log's cut offset
                torn = outcome.file.torn_place
                if torn is None or torn.frame is not None:
                    torn = LinePlace(0, outcome.file.log.truncate_to or 0)
                message = f"{outcome.torn}, ignored: {TORN_NOTE}"
                results.append(_sarif_result(TORN_RULE, index, message, outcome.path, torn, level="note"))
            for violation in outcome.violations:
                place = outcome.place_of(violation)
                where = "the log" if violation.seq is None else f"seq {violation.seq}"
                results.append(
                    _sarif_result(
                        violation.rule,
                        index,
                        f"{where}: {violation.message}",
                        outcome.path,
                        place,
                        {"seq": violation.seq},
                    )
                )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dsh-session",
                        "semanticVersion": _version(),
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }


def _sarif_result(
    rule: str,
    index: dict[str, int],
    message: str,
    path: str,
    place: LinePlace | None = None,
    properties: dict[str, object] | None = None,
    level: str = "error",
) -> dict[str, object]:
    location: dict[str, object] = {"artifactLocation": {"uri": artifact_uri(path)}}
    if place is not None:
        region: dict[str, object] = {"startLine": place.line} if place.line else {}
        if place.frame is None:
            region["byteOffset"] = place.byte
        location["region"] = region
    result: dict[str, object] = {
        "ruleId": rule,
        "ruleIndex": index[rule],
        "level": level,
        "message": {"text": message},
        "locations": [{"physicalLocation": location}],
    }
    if properties:
        result["properties"] = properties
    return result


def artifact_uri(path: str) -> str:
    """A path as a SARIF artifact URI: relative paths stay relative (CI tools resolve them from
    the checkout), absolute ones become ``file://`` URIs."""
    if os.path.isabs(path):
        return "file://" + urllib.parse.quote(os.path.normpath(path))
    return urllib.parse.quote(os.path.normpath(path).replace(os.sep, "/"))


def _first_sentence(text: str) -> str:
    head, dot, _ = text.partition(". ")
    return head + "." if dot else text


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dsh-session-spec")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout that is not installed
        return "0.0.0"


RENDERERS: Final = {"text": render_text, "json": render_json, "sarif": render_sarif}
assert tuple(RENDERERS) == CHECK_FORMATS  # the command line offers exactly these
