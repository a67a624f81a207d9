"""The reference's stdio server, traced (the coverage map of :mod:`scripts.mutation`'s fast lane).

    python -m scripts.mutation_trace OUT SCOPE...

serves the protocol exactly as ``python -m reference.server`` does, while recording every line of
the files under the ``SCOPE`` paths (relative to the root) that it executes, imports included; when
stdin closes it writes them to ``OUT`` as JSON (``{"spec/x.py": [lines]}``). Kept apart from
:mod:`scripts.mutation` so that the traced process imports nothing but the subject.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
Tracer = Callable[[FrameType, str, Any], Any]


class LineRecorder:
    """A ``sys.settrace`` hook recording the lines executed in the files under ``scope``."""

    def __init__(self, root: Path, scope: Sequence[str]) -> None:
        self.root = root.resolve()
        self.scope = tuple(scope)
        self.hits: dict[str, set[int]] = {}
        self._tracers: dict[str, Tracer | None] = {}  # by code file name: its local tracer, or None

    def _relative(self, filename: str) -> str | None:
        try:
            relative = Path(filename).resolve().relative_to(self.root).as_posix()
        except ValueError:
            return None
        in_scope = any(relative == s or relative.startswith(f"{s.rstrip('/')}/") for s in self.scope)
        return relative if in_scope and relative.endswith(".py") else None

    def _local(self, hits: set[int]) -> Tracer:
        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                hits.add(frame.f_lineno)
            return local

        return local

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        filename = frame.f_code.co_filename
        if filename not in self._tracers:
            relative = self._relative(filename)
            self._tracers[filename] = (
                None if relative is None else self._local(self.hits.setdefault(relative, set()))
            )
        local = self._tracers[filename]
        if local is None:
            return None
        local(frame, "line", arg)  # the call's own line
        return local

    def lines(self) -> dict[str, list[int]]:
        return {name: sorted(lines) for name, lines in sorted(self.hits.items())}


def main(argv: Sequence[str]) -> None:
    out, *scope = argv
    recorder = LineRecorder(ROOT, scope)
    sys.settrace(recorder)
    threading.settrace(recorder)
    try:
        from reference.server import main as serve

        serve([])
    finally:
        sys.settrace(None)
        threading.settrace(None)
        Path(out).write_text(json.dumps(recorder.lines()), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
