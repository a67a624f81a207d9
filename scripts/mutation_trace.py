"""The reference's stdio server, traced (the coverage maps of :mod:`scripts.mutation`'s lanes).

    python -m scripts.mutation_trace [--append] [--backend NAME] OUT SCOPE...

serves the protocol exactly as ``python -m reference.server [--backend NAME]`` does, while recording every line of
the files under the ``SCOPE`` paths (relative to the root) that it executes, imports included; when
stdin closes it writes them to ``OUT`` as JSON (``{"spec/x.py": [lines]}``). With ``--append``
each line is appended to ``OUT`` (``path<TAB>line``) the first time it runs instead: a stateful
family ends subjects with SIGKILL and restarts the same command, and every process's lines must be
kept (:func:`read_appended` reads them). Kept apart from :mod:`scripts.mutation` so that the traced
process imports nothing but the subject.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Tracer = Callable[[FrameType, str, Any], Any]


class LineRecorder:
    """A ``sys.settrace`` hook recording the lines executed in the files under ``scope`` (and, given
    a ``sink`` descriptor opened for appending, writing each new one to it at once)."""

    def __init__(self, root: Path, scope: Sequence[str], sink: int | None = None) -> None:
        self.root = root.resolve()
        self.scope = tuple(scope)
        self.sink = sink
        self.hits: dict[str, set[int]] = {}
        self._tracers: dict[str, Tracer | None] = {}  # by code file name: its local tracer, or None

    def _relative(self, filename: str) -> str | None:
        try:
            relative = Path(filename).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return None
        in_scope = any(relative == s or relative.startswith(f"{s.rstrip('/')}/") for s in self.scope)
        return relative if in_scope and relative.endswith(".py") else None

    def _local(self, relative: str, hits: set[int]) -> Tracer:
        sink = self.sink

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line" and frame.f_lineno not in hits:
                hits.add(frame.f_lineno)
                if sink is not None:  # one small O_APPEND write: whole, even if the process is killed next
                    os.write(sink, f"{relative}\t{frame.f_lineno}\n".encode())
            return local

        return local

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        filename = frame.f_code.co_filename
        if filename not in self._tracers:
            relative = self._relative(filename)
            self._tracers[filename] = (
                None if relative is None else self._local(relative, self.hits.setdefault(relative, set()))
            )
        local = self._tracers[filename]
        if local is None:
            return None
        local(frame, "line", arg)  # the call's own line
        return local

    def lines(self) -> dict[str, list[int]]:
        return {name: sorted(lines) for name, lines in sorted(self.hits.items())}


def read_appended(path: Path) -> dict[str, list[int]]:
    """The lines an ``--append`` trace wrote to ``path`` (every process's), as ``{"spec/x.py": [lines]}``."""
    found: dict[str, set[int]] = {}
    if path.exists():
        for row in path.read_text(encoding="utf-8").splitlines():
            module, _, line = row.partition("\t")
            if line.isdigit():
                found.setdefault(module, set()).add(int(line))
    return {name: sorted(lines) for name, lines in sorted(found.items())}


def main(argv: Sequence[str]) -> None:
    rest = list(argv)
    append = rest[:1] == ["--append"]
    del rest[: int(append)]
    backend = rest[1] if rest[:1] == ["--backend"] else None
    del rest[: 2 * (backend is not None)]
    out, *scope = rest
    sink = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if append else None
    recorder = LineRecorder(ROOT, scope, sink)
    sys.settrace(recorder)
    threading.settrace(recorder)
    try:
        from reference.server import main as serve

        serve([] if backend is None else ["--backend", backend])
    finally:
        sys.settrace(None)
        threading.settrace(None)
        if sink is None:
            Path(out).write_text(json.dumps(recorder.lines()), encoding="utf-8")
        else:
            os.close(sink)


if __name__ == "__main__":
    main(sys.argv[1:])
