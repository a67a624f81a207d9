"""A pytest plugin: the session-log checker as a regression oracle in a team's own test suite.

Installed with this package and registered through the ``pytest11`` entry point, so any pytest run
in the environment has it (``-p no:dsh_session`` turns it off). Three ways to use it:

- the ``dsh_check`` fixture — ``dsh_check(path)`` checks a log file, or every log under a
  directory, and fails the test with the rule ids of any broken invariant (``core_only=True``
  checks only what a DSH session itself refuses to load);
- the ``dsh_check`` marker — ``@pytest.mark.dsh_check`` checks every log the test wrote under its
  ``tmp_path`` once the test has passed; ``@pytest.mark.dsh_check("logs/", core_only=True)`` checks
  the paths named instead;
- ``pytest --dsh-logs DIR`` — one test item per log found under DIR (repeatable; ``-m dsh_log``
  runs those items alone), each failing with its rule ids; a DIR holding no log is a failing item,
  never a silent pass. ``--dsh-core-only`` applies the core rules alone.

A failure reads like ``dsh-session check``: one line per broken rule with its count, seqs and file
lines, the hint when ``--core-only`` would pass, and the rule ids recorded as the item's
``dsh_rules`` user property (a JUnit XML report shows them).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from reference.checking import CheckedLog, Outcome

_MARKER_PATHS = pytest.StashKey[tuple[list[str], bool]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh-session", "DSH session logs (the dsh-session spec's checker)")
    group.addoption(
        "--dsh-logs",
        action="append",
        default=[],
        metavar="DIR",
        help="check every session log under DIR as one test item per log (repeatable)",
    )
    group.addoption(
        "--dsh-core-only",
        action="store_true",
        help="check only the core rules (what a DSH session itself refuses to load)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dsh_check(*paths, core_only=False): once the test passes, check the session logs under the paths "
        "(default: the test's tmp_path) and fail with the rule ids of any broken invariant",
    )
    config.addinivalue_line("markers", "dsh_log: a session log collected by --dsh-logs")
    for folder in config.getoption("dsh_logs"):
        if not os.path.exists(folder):
            raise pytest.UsageError(f"--dsh-logs {folder}: no such file or directory")


# --- the report ------------------------------------------------------------------------------------


def failing_rules(outcome: Outcome) -> list[str]:
    """The rule ids (or the reading error's code) that make an outcome fail."""
    from reference.checking import NO_LOGS_FOUND, NoLogs

    if isinstance(outcome, NoLogs):
        return [NO_LOGS_FOUND]
    if outcome.error is not None:
        return [str(outcome.error.code)]
    return list(dict.fromkeys(violation.rule for violation in outcome.violations))


def describe(outcome: Outcome) -> str:
    """What is wrong with one log, as ``dsh-session check`` says it."""
    from reference.checking import NO_LOGS_FOUND, RELATIONAL_HINT, NoLogs, describe_group, group_violations

    if isinstance(outcome, NoLogs):
        return f"{outcome.path}: [{NO_LOGS_FOUND}] {outcome.message}"
    if outcome.error is not None:
        return f"{outcome.path}: unreadable [{outcome.error.code}] {outcome.error.message}"
    lines = [f"{outcome.path}: broken invariants {', '.join(failing_rules(outcome))}"]
    lines += [f"  {describe_group(outcome, group)}" for group in group_violations(outcome.violations)]
    if outcome.relational_only:
        lines.append(f"  {RELATIONAL_HINT}")
    return "\n".join(lines)


def check_outcomes(paths: Sequence[str | os.PathLike[str]], core_only: bool) -> list[Outcome]:
    from reference.checking import check_paths

    return list(check_paths([os.fspath(path) for path in paths], core_only))


def fail_on(outcomes: Sequence[Outcome]) -> None:
    """Fail the running test when any outcome is not clean, naming every broken rule."""
    bad = [outcome for outcome in outcomes if failing_rules(outcome)]
    if bad:
        rules = sorted({rule for outcome in bad for rule in failing_rules(outcome)})
        report = "\n".join(describe(outcome) for outcome in bad)
        pytest.fail(f"dsh-session: broken invariants [{', '.join(rules)}]\n{report}", pytrace=False)


# --- the fixture -----------------------------------------------------------------------------------


@pytest.fixture
def dsh_check() -> Callable[..., list[CheckedLog]]:
    """``dsh_check(path, core_only=False)``: check a log file, or every log under a directory; the
    test fails with the rule ids of any broken invariant (a directory with no log fails too).
    Returns what was checked."""

    def check(
        path: str | os.PathLike[str], *more: str | os.PathLike[str], core_only: bool = False
    ) -> list[CheckedLog]:
        from reference.checking import CheckedLog

        outcomes = check_outcomes([path, *more], core_only)
        fail_on(outcomes)
        return [outcome for outcome in outcomes if isinstance(outcome, CheckedLog)]

    return check


# --- the marker ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _dsh_check_marker(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("dsh_check")
    if marker is None:
        return
    unknown = set(marker.kwargs) - {"core_only"}
    if unknown:
        raise pytest.UsageError(f"dsh_check marker: unknown argument(s) {', '.join(sorted(unknown))}")
    paths = [os.fspath(path) for path in marker.args] or [str(request.getfixturevalue("tmp_path"))]
    request.node.stash[_MARKER_PATHS] = (paths, bool(marker.kwargs.get("core_only", False)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    result = yield  # a test that failed stays failed for its own reason: the check runs only after a pass
    marked = item.stash.get(_MARKER_PATHS, None)
    if marked is not None:
        paths, core_only = marked
        outcomes = check_outcomes(paths, core_only)
        item.user_properties.append(
            ("dsh_rules", ",".join(sorted({r for o in outcomes for r in failing_rules(o)})))
        )
        fail_on(outcomes)
    return result


# --- --dsh-logs ------------------------------------------------------------------------------------


class DshLogFailure(Exception):
    """A collected log that is not clean."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(describe(outcome))
        self.outcome = outcome


class DshLogItem(pytest.Item):
    """One session log found under a ``--dsh-logs`` directory (or the directory itself, when it
    holds none)."""

    def __init__(self, *, log_path: str, core_only: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log_path = log_path
        self.core_only = core_only
        self.add_marker("dsh_log")

    def runtest(self) -> None:
        from reference.checking import NoLogs, check_log_file

        outcome: Outcome = (
            NoLogs(self.log_path)
            if os.path.isdir(self.log_path)
            else check_log_file(self.log_path, self.core_only)
        )
        rules = failing_rules(outcome)
        self.user_properties.append(("dsh_rules", ",".join(rules)))
        if rules:
            raise DshLogFailure(outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, DshLogFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return Path(self.log_path), None, f"dsh log {self.name}"


class DshLogFolder(pytest.Collector):
    """A ``--dsh-logs`` folder: one item per log under it, or one failing item when it holds none."""

    def __init__(self, *, core_only: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.core_only = core_only

    def collect(self) -> list[pytest.Item | pytest.Collector]:
        from reference.logfile import find_logs

        folder = str(self.path)
        found = list(find_logs([folder]))
        if not found:
            return [DshLogItem.from_parent(self, name="(no logs)", log_path=folder, core_only=self.core_only)]
        items: list[pytest.Item | pytest.Collector] = []
        for log in found:
            name = str(Path(log).relative_to(self.path)) if self.path.is_dir() else self.path.name
            items.append(DshLogItem.from_parent(self, name=name, log_path=log, core_only=self.core_only))
        return items


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect, so that -m dsh_log selects these items
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    core_only = bool(config.getoption("dsh_core_only"))
    names: set[str] = set()
    for folder in config.getoption("dsh_logs"):
        path = Path(folder).resolve()
        # the folder's own name: a node id with a slash before its "::" would be read as a file path
        name = path.name or "root"
        while name in names:
            name += "+"
        names.add(name)
        collector = DshLogFolder.from_parent(
            session, name=name, nodeid=f"dsh-logs[{name}]", path=path, core_only=core_only
        )
        items.extend(node for node in collector.collect() if isinstance(node, pytest.Item))
