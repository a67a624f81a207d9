"""Live progress while a run goes: per family, cases done out of its total, failures so far and
the time spent, so a long run is never silent.

On a terminal it is a live display drawn with ``rich``; elsewhere (a CI log, a pipe) it is one
plain line when a family starts and one when it ends, and a heartbeat line at most every
:data:`HEARTBEAT_SECONDS` inside a long family. It writes to stderr: stdout carries the report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TextIO

if TYPE_CHECKING:
    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID

    from conformance.report import CaseResult

HEARTBEAT_SECONDS: Final = 15.0


@dataclass
class _Family:
    total: int | None
    started: float
    done: int = 0
    failed: int = 0


@dataclass
class Progress:
    """The hooks a run calls: :meth:`start` a family (its case count, if known), :meth:`case`
    for every finished case, :meth:`note` for something worth saying inside a long family."""

    stream: TextIO | None = None
    live: RichProgress | None = None
    _families: dict[str, _Family] = field(default_factory=dict)
    _tasks: dict[str, TaskID] = field(default_factory=dict)
    _last_line: float = 0.0

    @classmethod
    def for_terminal(cls, stream: TextIO) -> Progress:
        """A live display when ``stream`` is a terminal and rich is installed, plain lines else."""
        if stream.isatty():
            try:
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
                from rich.progress import Progress as RichProgress
            except ImportError:
                return cls(stream)
            live = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[failed]} failed"),
                TimeElapsedColumn(),
                console=Console(file=stream),
                transient=False,
            )
            live.start()
            return cls(stream, live)
        return cls(stream)

    @classmethod
    def silent(cls) -> Progress:
        return cls(None)

    def start(self, family: str, total: int | None = None) -> None:
        self._families[family] = _Family(total, time.monotonic())
        if self.live is not None:
            self._tasks[family] = self.live.add_task(family, total=total, failed=0)
        else:
            self._say(f"{family}: running{f' {total} cases' if total is not None else ''}")

    def case(self, result: CaseResult) -> None:
        state = self._families.get(result.family)
        if state is None:
            self.start(result.family)
            state = self._families[result.family]
        state.done += 1
        state.failed += result.outcome in ("failed", "error")
        if self.live is not None:
            self.live.update(self._tasks[result.family], completed=state.done, failed=state.failed)
        elif time.monotonic() - self._last_line >= HEARTBEAT_SECONDS:
            self._say(self._line(result.family, state))

    def note(self, family: str, text: str) -> None:
        """Something a long family wants said (a stateful family's current figures)."""
        if self.live is not None and family in self._tasks:
            self.live.update(self._tasks[family], description=f"{family}: {text}")
        elif time.monotonic() - self._last_line >= HEARTBEAT_SECONDS:
            self._say(f"{family}: {text}")

    def end(self, family: str) -> None:
        state = self._families.get(family)
        if state is None:
            return
        if self.live is not None:
            self.live.update(self._tasks[family], total=state.done, completed=state.done)
        else:
            self._say(self._line(family, state) + " (done)")

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()

    def _line(self, family: str, state: _Family) -> str:
        total = f"/{state.total}" if state.total is not None else ""
        elapsed = time.monotonic() - state.started
        return f"{family}: {state.done}{total} cases, {state.failed} failed, {elapsed:.0f}s"

    def _say(self, line: str) -> None:
        self._last_line = time.monotonic()
        if self.stream is not None:
            print(line, file=self.stream, flush=True)
