"""A stdio subject that stores on a real directory and has no crash seam: the reference store on
the real filesystem, for the suite's kill-at-random-points check (conformance/crash/kill.py).

``python -m tests.stdio_file_subject`` serves the protocol on stdin/stdout. The file store lives
in the directory named by ``CONFORMANCE_STORE_ROOT``; ``reset`` with ``storage: "file"`` empties
it, and a restarted process finds what the killed one made durable there. With
``--lazy-flush`` the subject is broken on purpose: it acknowledges ``flush`` without writing
anything, and only ``close`` writes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import ClassVar

from conformance.crash import STORE_ROOT_ENV
from reference.persistence.filestore import FileStore
from reference.persistence.fs import RealFileSystem
from reference.server import Args, ReferenceSubject, serve_stdio
from reference.store import SessionStore
from spec.log.json import JsonValue


class RealDirectorySubject(ReferenceSubject):
    """The reference with its file store on ``$CONFORMANCE_STORE_ROOT`` (opened at start-up, so a
    restarted process resumes what its predecessor stored)."""

    name: ClassVar[str] = "reference on a real directory"
    capabilities: ClassVar[tuple[str, ...]] = ("core", "storage")

    def __init__(self) -> None:
        super().__init__()
        root = os.environ.get(STORE_ROOT_ENV)
        self.root = Path(root) if root else None
        if self.root is not None:
            self._open_directory()

    def op_reset(self, args: Args) -> JsonValue:
        if args.get("storage", "none") != "file" or self.root is None:
            return super().op_reset(args)
        self.now = 0
        self._compressed = args.get("compressed", True) is not False
        for child in self.root.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        self._open_directory()
        return None

    def _open_directory(self) -> None:
        assert self.root is not None
        self.fs = None
        self.persistence = FileStore(str(self.root), fs=RealFileSystem(), compressed=self._compressed)
        self.store = SessionStore(self.persistence, clock=self._clock)


class LazyFlushSubject(RealDirectorySubject):
    """Acknowledges ``flush`` without writing: broken on purpose (SPEC-DECISIONS D2, D3 item 3)."""

    def op_flush(self, args: Args) -> JsonValue:
        self.live(args.session_id())
        return None


def main() -> None:
    serve_stdio(LazyFlushSubject() if "--lazy-flush" in sys.argv[1:] else RealDirectorySubject())


if __name__ == "__main__":
    main()
