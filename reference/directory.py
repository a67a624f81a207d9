"""The reference subject on a real directory: what ``python -m reference.server`` serves when
``CONFORMANCE_STORE_ROOT`` is set (conformance/PROTOCOL.md, "A storage subject without a crash
seam").

Without the variable the server keeps its file store on the simulated power-loss filesystem and
offers the ``crash-seam`` capability. With it, the server follows the kill check's rules instead:

1. storage ``"file"`` lives inside that directory, on the operating system's filesystem;
2. a process starts as if it had just answered ``reset {"storage": "file"}`` over what is already
   there, so a restarted process finds what its predecessor made durable;
3. ``reset`` with storage ``"file"`` empties the directory (keeping the directory itself);
4. ``reset`` with storage ``"none"`` or ``"memory"`` leaves the directory alone.

The crash ops need the seam, so this subject does not offer ``crash-seam``; the kill check and the
trace family (``python -m conformance --trace-crashes``) test its durability from outside.

A subclass that changes one durability step overrides :meth:`DirectorySubject.make_store` (the
project's durability-broken test subjects do exactly that).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import ClassVar

from reference.persistence.filestore import FileStore
from reference.persistence.fs import RealFileSystem
from reference.store import SessionStore
from reference.subject import ReferenceSubject
from reference.subject.requests import Args
from reference.subject.storage import decode_placed_files, place_files
from spec.log.json import JsonValue
from spec.projections.durability import decode_batch_policy
from spec.protocol import STORE_ROOT_ENV


class DirectorySubject(ReferenceSubject):
    """The reference with its file store in ``root`` on the real filesystem (see the module
    docstring for the rules it follows)."""

    name: ClassVar[str] = "dsh-session-spec reference (real directory)"
    capabilities: ClassVar[tuple[str, ...]] = ("core", "storage", "pure", "export", "import", "list", "check")

    def __init__(self, root: str) -> None:
        super().__init__()
        self.root = Path(root)
        if not self.root.is_dir():
            raise NotADirectoryError(
                f"{STORE_ROOT_ENV}={root!r} is not an existing directory: create it, or unset the variable to store on the simulated filesystem"
            )
        self._open_directory()

    def make_store(self, root: str, compressed: bool) -> FileStore:
        """The file store over ``root``: the override point for a subject that stores differently."""
        return FileStore(root, fs=RealFileSystem(), compressed=compressed, batch=self._batch)

    def op_reset(self, args: Args) -> JsonValue:
        if args.get("storage", "none") != "file":
            return super().op_reset(args)
        compressed = args.get("compressed", True)
        if not isinstance(compressed, bool):
            return super().op_reset(args)  # answers BAD_REQUEST, as the seam's reset does
        files = decode_placed_files(args.optional("files"), "file")
        self._batch = decode_batch_policy(args.get("batchMaxDelayMs"), args.get("batchMaxBytes"))
        self.now = 0
        self._compressed = compressed
        for child in self.root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        place_files(RealFileSystem(), str(self.root), files)
        self._open_directory()
        return None

    def _open_directory(self) -> None:
        self.fs = None
        self.persistence = self.make_store(str(self.root), self._compressed)
        self.store = SessionStore(self.persistence, clock=self._clock)


def subject_from_environment() -> ReferenceSubject:
    """The subject ``python -m reference.server`` serves: on ``$CONFORMANCE_STORE_ROOT`` when it is
    set, else on the simulated power-loss filesystem."""
    root = os.environ.get(STORE_ROOT_ENV)
    return DirectorySubject(root) if root else ReferenceSubject()
