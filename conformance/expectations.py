"""Expectation files: the known deviations of one implementation at one version, the way
web-platform-tests keeps them (SPEC-DECISIONS D11).

A file ``conformance/expectations/<implementation>-<version>.json`` reads::

    {
      "implementation": "dsh",
      "version": "0.1.0-rc.8",
      "expectations": [
        {"case": "session/an-empty-event-type-is-rejected", "status": "failed",
         "reason": "append never checks its type", "source": "dsh-session/lib/index.js:1444-1463"},
        {"case": "checker/*", "status": "unsupported", "reason": "DSH ships no log checker",
         "source": "SPEC-DECISIONS D9"}
      ]
    }

``case`` is a case key (``family/slug``, the same keys the JUnit report and the table use) or a
shell-style pattern of keys; the first entry that matches a case decides its expected status, and
a case no entry matches is expected to pass. ``status`` is ``passed``, ``failed``, ``error`` (a
setup step failed), ``unsupported`` or ``not run``; ``reason`` and ``source`` (a file and line of the implementation, or the decision it
differs from) are required, because a deviation nobody can explain is not known.

Certifying against a file (``python -m conformance --expect FILE``) succeeds only when every case
ended as expected: an unexpected failure fails the run, and so does an unexpected pass (a fixed
bug is noticed and the file updated), and so does an entry that matched no case (a stale file).
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from conformance.report import OUTCOMES

STATUSES: Final = OUTCOMES
ENTRY_KEYS: Final = frozenset({"case", "status", "reason", "source"})


class ExpectationError(ValueError):
    """An expectation file that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Expectation:
    """One known deviation: the cases it covers, the status they end with, and why."""

    case: str
    status: str
    reason: str
    source: str

    def matches(self, key: str) -> bool:
        return fnmatch.fnmatchcase(key, self.case)


@dataclass(frozen=True)
class ExpectationFile:
    implementation: str
    version: str
    expectations: tuple[Expectation, ...]
    path: str = ""

    def expected(self, key: str) -> tuple[str, Expectation | None]:
        """The status ``key`` should end with, and the entry that says so (``None``: passed)."""
        for entry in self.expectations:
            if entry.matches(key):
                return entry.status, entry
        return "passed", None


@dataclass(frozen=True)
class Surprise:
    """A case that did not end as expected (``entry`` is ``None`` for an unlisted case)."""

    key: str
    expected: str
    actual: str
    entry: Expectation | None

    def describe(self) -> str:
        why = f" ({self.entry.reason})" if self.entry is not None else ""
        kind = "unexpected pass" if self.actual == "passed" else f"unexpected {self.actual}"
        return f"{kind}: {self.key} ended {self.actual}, expected {self.expected}{why}"


@dataclass(frozen=True)
class Verdict:
    """The run against the file: what surprised, which entries matched nothing, how many matched."""

    surprises: tuple[Surprise, ...]
    unused: tuple[Expectation, ...]
    as_expected: int

    @property
    def ok(self) -> bool:
        return not self.surprises and not self.unused


def load_expectations(path: Path) -> ExpectationFile:
    """Read and check an expectation file; every problem is an :class:`ExpectationError`."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ExpectationError(
            f"cannot read the expectation file {path}: {error.strerror or error}"
        ) from None
    except ValueError as error:
        raise ExpectationError(f"the expectation file {path} is not JSON: {error}") from None
    return decode_expectations(raw, str(path))


def decode_expectations(raw: object, where: str = "expectations") -> ExpectationFile:
    if not isinstance(raw, dict):
        raise ExpectationError(f"{where}: the file must hold one JSON object")
    implementation, version, entries = raw.get("implementation"), raw.get("version"), raw.get("expectations")
    if not isinstance(implementation, str) or not isinstance(version, str) or not isinstance(entries, list):
        raise ExpectationError(
            f"{where}: needs 'implementation' and 'version' strings and an 'expectations' array"
        )
    decoded = tuple(
        _decode_entry(entry, f"{where}: expectation {index}") for index, entry in enumerate(entries)
    )
    return ExpectationFile(implementation, version, decoded, where)


def _decode_entry(entry: object, where: str) -> Expectation:
    if not isinstance(entry, dict) or set(entry) != ENTRY_KEYS:
        raise ExpectationError(f"{where} must have exactly the keys {sorted(ENTRY_KEYS)}")
    values = {key: entry[key] for key in ENTRY_KEYS}
    if not all(isinstance(value, str) and value.strip() for value in values.values()):
        raise ExpectationError(f"{where}: every key needs a non-empty string")
    if values["status"] not in STATUSES:
        raise ExpectationError(f"{where}: status {values['status']!r} is not one of {', '.join(STATUSES)}")
    return Expectation(
        str(values["case"]), str(values["status"]), str(values["reason"]), str(values["source"])
    )


def judge(expectations: ExpectationFile, outcomes: Iterable[tuple[str, str]]) -> Verdict:
    """Compare each case's ``(key, status)`` with what the file expects."""
    surprises: list[Surprise] = []
    used: set[int] = set()
    as_expected = 0
    for key, actual in outcomes:
        expected, entry = expectations.expected(key)
        if entry is not None:
            used.add(id(entry))
        if actual == expected:
            as_expected += 1
        else:
            surprises.append(Surprise(key, expected, actual, entry))
    unused = tuple(entry for entry in expectations.expectations if id(entry) not in used)
    return Verdict(tuple(surprises), unused, as_expected)


def format_verdict(expectations: ExpectationFile, verdict: Verdict) -> str:
    """The verdict as lines for the terminal."""
    title = f"expectations {expectations.implementation} {expectations.version}"
    lines = [
        f"{title}: {verdict.as_expected} cases as expected, {len(verdict.surprises)} not, {len(verdict.unused)} stale entries"
    ]
    lines += [f"- {surprise.describe()}" for surprise in verdict.surprises]
    lines += [
        f"- stale entry (matched no case): {entry.case} ({entry.status}: {entry.reason})"
        for entry in verdict.unused
    ]
    lines.append("expectations: met" if verdict.ok else "expectations: NOT met")
    return "\n".join(lines)


def encode_expectations(implementation: str, version: str, entries: Sequence[Mapping[str, str]]) -> str:
    """An expectation file's text (entries as given, one per line), for tools that write one."""
    body = ",\n".join("    " + json.dumps(dict(entry), ensure_ascii=False) for entry in entries)
    header = json.dumps({"implementation": implementation, "version": version}, ensure_ascii=False)[1:-1]
    return "{\n  " + header.replace(", ", ",\n  ") + ',\n  "expectations": [\n' + body + "\n  ]\n}\n"
