"""Expectation files: the known deviations of one implementation at one version, the way
web-platform-tests keeps them (SPEC-DECISIONS D11), each with how it fails, why, and what kind
of deviation it is.

A file ``conformance/expectations/<implementation>-<version>.json`` reads::

    {
      "implementation": "dsh",
      "version": "0.1.0-rc.8",
      "expectations": [
        {"case": "session/an-empty-event-type-is-rejected", "status": "failed",
         "fingerprint": "step 1 (append): expected EVENT_TYPE_INVALID, got ok", "kind": "subject-bug",
         "cause": "append never checks its type", "source": "dsh-session/lib/index.js:1444-1463"},
        {"case": "checker/*", "status": "unsupported", "kind": "spec-version",
         "cause": "DSH ships no log checker", "source": "SPEC-DECISIONS D9"}
      ]
    }

``case`` is a case key (``family/slug``, the same keys the JUnit report and the table use) or a
shell-style pattern of keys; the first entry that matches a case decides its expected status, and
a case no entry matches is expected to pass. ``status`` is one of :data:`STATUSES`; a ``failed`` or
``error`` entry names the case's ``fingerprint`` (:class:`conformance.report.CaseResult`), so a
case that fails for another reason than the known one is a surprise ("failed differently").
``cause`` (what the implementation does), ``source`` (where: a file and line of the
implementation, or the decision it differs from) and ``kind`` (one of :data:`KINDS`) are required.
A cause or kind of ``TODO`` is an entry nobody has explained yet: ``--write-expectations`` and
``--update-expectations`` write new entries so, and ``--expect`` fails until a person fills them in.

Certifying against a file (``python -m conformance --expect FILE``) succeeds only when every case
ended as expected and every entry is explained: an unexpected failure fails the run, and so does a
failure with another fingerprint, an unexpected pass (a fixed bug is noticed and the file updated),
an entry that matched no case of a family the run ran (a stale file) and an entry whose cause is
``TODO``.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from conformance.report import KINDS, OUTCOMES, Deviation

STATUSES: Final = OUTCOMES
FAILING: Final = ("failed", "error")
TODO: Final = "TODO"
REQUIRED_KEYS: Final = frozenset({"case", "status", "cause", "kind", "source"})
OPTIONAL_KEYS: Final = frozenset({"fingerprint"})

Record = Mapping[str, Any]
"""One case of a run as ``--json`` writes it: ``key``, ``outcome``, ``fingerprint`` (and ``detail``,
``rule``, which an explainer may read)."""

Explainer = Callable[[Record], "tuple[str, str, str] | None"]
"""What a writer asks about a case that did not pass: its ``(cause, kind, source)``, or ``None``
(written as ``TODO``)."""


class ExpectationError(ValueError):
    """An expectation file that cannot be read: the message names the file and what is wrong."""


@dataclass(frozen=True)
class Expectation:
    """One known deviation: the cases it covers, the status (and for a failure the fingerprint)
    they end with, why, and what kind of deviation it is."""

    case: str
    status: str
    cause: str
    kind: str
    fingerprint: str = ""
    source: str = ""

    def matches(self, key: str) -> bool:
        return fnmatch.fnmatchcase(key, self.case)

    @property
    def is_pattern(self) -> bool:
        return any(char in self.case for char in "*?[")

    @property
    def todo(self) -> bool:
        """Not yet explained: its cause or its kind is still ``TODO``."""
        return self.cause.startswith(TODO) or self.kind == TODO

    def as_json(self) -> dict[str, str]:
        entry = {"case": self.case, "status": self.status}
        entry |= {"fingerprint": self.fingerprint} if self.fingerprint else {}
        return entry | {"kind": self.kind, "cause": self.cause, "source": self.source}

    def describe(self) -> str:
        shown = f" [{self.fingerprint}]" if self.fingerprint else ""
        return f"{self.case}: {self.status}{shown} ({self.kind}: {self.cause})"


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
    """A case that did not end as expected (``entry`` is ``None`` for an unlisted case); a failure
    with the expected status and another fingerprint failed differently."""

    key: str
    expected: str
    actual: str
    entry: Expectation | None
    fingerprint: str = ""

    def describe(self) -> str:
        why = f" ({self.entry.cause})" if self.entry is not None else ""
        if self.entry is not None and self.actual == self.expected:
            return (
                f"failed differently: {self.key} ended {self.actual} [{self.fingerprint}], "
                f"expected [{self.entry.fingerprint}]{why}"
            )
        kind = "unexpected pass" if self.actual == "passed" else f"unexpected {self.actual}"
        shown = f" [{self.fingerprint}]" if self.fingerprint else ""
        return f"{kind}: {self.key} ended {self.actual}{shown}, expected {self.expected}{why}"


@dataclass(frozen=True)
class Verdict:
    """The run against the file: what surprised, which entries matched nothing, which are not yet
    explained (``TODO``), how many cases matched, and the deviations met (each cause once)."""

    surprises: tuple[Surprise, ...]
    unused: tuple[Expectation, ...]
    as_expected: int
    todo: tuple[Expectation, ...] = ()
    deviations: tuple[Deviation, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.surprises and not self.unused and not self.todo


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
    if not isinstance(entry, dict) or not REQUIRED_KEYS <= set(entry) <= REQUIRED_KEYS | OPTIONAL_KEYS:
        raise ExpectationError(
            f"{where} must have the keys {sorted(REQUIRED_KEYS)} and may have {sorted(OPTIONAL_KEYS)}"
        )
    if not all(isinstance(value, str) and value.strip() for value in entry.values()):
        raise ExpectationError(f"{where}: every key needs a non-empty string")
    values: dict[str, str] = dict(entry)
    if values["status"] not in STATUSES:
        raise ExpectationError(f"{where}: status {values['status']!r} is not one of {', '.join(STATUSES)}")
    if values["kind"] not in (*KINDS, TODO):
        raise ExpectationError(f"{where}: kind {values['kind']!r} is not one of {', '.join(KINDS)} (or TODO)")
    if (values["status"] in FAILING) != ("fingerprint" in values):
        raise ExpectationError(f"{where}: a failed or error entry, and only one, names its fingerprint")
    return Expectation(**values)


def judge(expectations: ExpectationFile, records: Iterable[Record]) -> Verdict:
    """Compare each case (``key``, ``outcome``, ``fingerprint``) with what the file expects, and
    group the cases that ended as a deviation by their entry's cause."""
    surprises: list[Surprise] = []
    used: set[int] = set()
    as_expected = 0
    met: list[tuple[Expectation, str, str]] = []
    ran: set[str] = set()  # the families the run ran
    for record in records:
        key, actual, fingerprint = (
            str(record["key"]),
            str(record["outcome"]),
            str(record.get("fingerprint", "")),
        )
        ran.add(key.split("/", 1)[0])
        expected, entry = expectations.expected(key)
        if entry is not None:
            used.add(id(entry))
        if actual != expected or (
            entry is not None and actual in FAILING and fingerprint != entry.fingerprint
        ):
            surprises.append(Surprise(key, expected, actual, entry, fingerprint))
            continue
        as_expected += 1
        if entry is not None:
            met.append((entry, key, actual))
    unused = tuple(
        entry for entry in expectations.expectations if id(entry) not in used and _family_ran(entry, ran)
    )
    todo = tuple(entry for entry in expectations.expectations if entry.todo)
    return Verdict(tuple(surprises), unused, as_expected, todo, group_deviations(met))


def _family_ran(entry: Expectation, ran: set[str]) -> bool:
    """Whether the run ran a family ``entry`` may name (an entry of a family the run did not
    select is neither stale nor dropped)."""
    family = entry.case.split("/", 1)[0]
    return any(fnmatch.fnmatchcase(name, family) for name in ran)


def group_deviations(met: Iterable[tuple[Expectation, str, str]]) -> tuple[Deviation, ...]:
    """The deviations each once: the cases (key and outcome) behind each (kind, cause), in the
    order of :data:`conformance.report.KINDS`, then of first appearance."""
    grouped: dict[tuple[str, str], tuple[str, list[tuple[str, str]]]] = {}
    for entry, key, outcome in met:
        grouped.setdefault((entry.kind, entry.cause), (entry.source, []))[1].append((key, outcome))
    ordered = sorted(grouped.items(), key=lambda item: _kind_order(item[0][0]))
    return tuple(Deviation(kind, cause, source, tuple(cases)) for (kind, cause), (source, cases) in ordered)


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def format_verdict(expectations: ExpectationFile, verdict: Verdict) -> str:
    """The verdict as lines for the terminal."""
    title = f"expectations {expectations.implementation} {expectations.version}"
    lines = [
        f"{title}: {verdict.as_expected} cases as expected, {len(verdict.surprises)} not, "
        f"{len(verdict.unused)} stale entries, {len(verdict.todo)} without a cause"
    ]
    lines += [f"- {surprise.describe()}" for surprise in verdict.surprises]
    lines += [f"- stale entry (matched no case): {entry.describe()}" for entry in verdict.unused]
    lines += [f"- cause TODO (fill in cause and kind): {entry.describe()}" for entry in verdict.todo[:20]]
    if len(verdict.todo) > 20:
        lines.append(f"- ... and {len(verdict.todo) - 20} more entries with cause TODO")
    lines.append("expectations: met" if verdict.ok else "expectations: NOT met")
    return "\n".join(lines)


def encode_expectations(expectations: ExpectationFile) -> str:
    """An expectation file's text, one entry per line (so a change is a one-line diff)."""
    body = ",\n".join(
        "    " + json.dumps(entry.as_json(), ensure_ascii=False) for entry in expectations.expectations
    )
    header = json.dumps(
        {"implementation": expectations.implementation, "version": expectations.version}, ensure_ascii=False
    )[1:-1]
    return "{\n  " + header.replace(", ", ",\n  ") + ',\n  "expectations": [\n' + body + "\n  ]\n}\n"


# --- writing and updating a file from a run (wptrunner's update-metadata is the model) -------------


def entry_for(record: Record, explain: Explainer | None = None) -> Expectation:
    """The entry that expects ``record`` as it ended: its cause, kind and source from ``explain``,
    else ``TODO``."""
    outcome = str(record["outcome"])
    fingerprint = str(record.get("fingerprint") or "") if outcome in FAILING else ""
    cause, kind, source = (explain(record) if explain is not None else None) or (TODO, TODO, TODO)
    return Expectation(str(record["key"]), outcome, cause, kind, fingerprint, source)


def write_expectations(
    implementation: str, version: str, records: Sequence[Record], explain: Explainer | None = None
) -> ExpectationFile:
    """A file that expects every case of the run as it ended: an entry per case that did not pass."""
    entries = sorted(
        (entry_for(record, explain) for record in records if record["outcome"] != "passed"),
        key=lambda entry: entry.case,
    )
    return ExpectationFile(implementation, version, tuple(entries))


def update_expectations(
    old: ExpectationFile, records: Sequence[Record], explain: Explainer | None = None
) -> tuple[ExpectationFile, list[str]]:
    """``old`` rewritten to expect the run, and the diff (``+`` added, ``-`` dropped, ``~``
    changed). An entry whose cases ended as it says is kept as it is (cause and kind with it); a case
    that ended otherwise gets an entry of its own, its cause ``TODO`` (``TODO (was: …)`` where it had
    one); an entry of a case that now passes, or one that matched no case of a family the run ran,
    is dropped. Entries of families the run did not run are kept. Entries naming one case come
    first, sorted; patterns after them, in their order."""
    ran = {str(record["key"]).split("/", 1)[0] for record in records}
    exact: dict[str, Expectation] = {}
    used: set[int] = set()
    diff: list[str] = []
    for record in records:
        key, outcome = str(record["key"]), str(record["outcome"])
        fingerprint = str(record.get("fingerprint") or "") if outcome in FAILING else ""
        expected, entry = old.expected(key)
        if entry is not None:
            used.add(id(entry))
        if expected == outcome and (entry is None or entry.fingerprint == fingerprint):
            if entry is not None and not entry.is_pattern:
                exact[key] = entry
            continue
        if outcome == "passed":
            if entry is not None and entry.is_pattern:
                exact[key] = Expectation(
                    key, "passed", "TODO: now passes, narrow the pattern", TODO, "", TODO
                )
            diff.append(f"- {key}: now passes (was {entry.describe() if entry else expected})")
            continue
        new = entry_for(record, explain)
        if entry is not None and new.todo and entry.cause != TODO:
            new = replace(new, cause=f"{TODO} (was: {entry.cause})", kind=entry.kind, source=entry.source)
        exact[key] = new
        if entry is None:
            diff.append(f"+ {new.describe()}")
        else:
            was = f"{entry.status}" + (f" [{entry.fingerprint}]" if entry.fingerprint else "")
            diff.append(f"~ {key}: was {was}, now {new.describe().split(': ', 1)[1]}")
    patterns: list[Expectation] = []
    for entry in old.expectations:
        if id(entry) in used and entry.is_pattern:
            patterns.append(entry)
        elif id(entry) not in used and not _family_ran(entry, ran):
            if entry.is_pattern:
                patterns.append(entry)
            else:
                exact.setdefault(entry.case, entry)
        elif id(entry) not in used:
            diff.append(f"- {entry.describe()}: matched no case (stale)")
    entries = (*sorted(exact.values(), key=lambda entry: entry.case), *patterns)
    return ExpectationFile(old.implementation, old.version, entries, old.path), diff
