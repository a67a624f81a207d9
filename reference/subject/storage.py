"""The storage ops (conformance/PROTOCOL.md, "Storage ops"): ``reset`` (which picks the backend and
places the suite's files), ``flush``, ``close``, ``resume``, ``read`` and ``export``."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Final

from reference.persistence.faulty import FaultyFileSystem
from reference.persistence.filestore import FileStore
from reference.persistence.fs import FileSystem
from reference.persistence.memory import MemoryPersistence
from reference.persistence.powerloss import PowerLossFileSystem
from reference.subject.base import STORE_ROOT, SubjectBase
from reference.subject.requests import Args, BadRequest
from spec.codes import Code, reject
from spec.log.json import JsonValue
from spec.log.session import ABSENT
from spec.projections.durability import decode_batch_policy

STORAGE_OPS: Final = {
    "reset": "op_reset",
    "flush": "op_flush",
    "close": "op_close",
    "resume": "op_resume",
    "read": "op_read",
    "export": "op_export",
}


class StorageOps(SubjectBase):
    """``reset`` and the ops of capability ``storage`` (and ``export``)."""

    def op_reset(self, args: Args) -> JsonValue:
        storage = args.get("storage", "none")
        compressed = args.get("compressed", True)
        if storage not in ("none", "memory", "file") or not isinstance(compressed, bool):
            raise BadRequest("storage must be 'none', 'memory' or 'file' and compressed a boolean")
        files = decode_placed_files(args.optional("files"), storage)
        self._batch = decode_batch_policy(args.get("batchMaxDelayMs"), args.get("batchMaxBytes"))
        self.now = 0
        self._compressed = compressed
        self.fs = FaultyFileSystem(PowerLossFileSystem()) if storage == "file" else None
        self.persistence = MemoryPersistence(batch=self._batch) if storage == "memory" else None
        self._forget_engine()
        if self.fs is not None:
            place_files(self.fs, STORE_ROOT, files)
        self._open_store()
        return None

    def op_flush(self, args: Args) -> JsonValue:
        self.live(args.session_id()).flush()
        return None

    def op_close(self, args: Args) -> JsonValue:
        session_id = args.session_id()
        self.live(session_id)
        self.store.close(session_id)
        return None

    def op_resume(self, args: Args) -> JsonValue:
        return self.state_json(self.store.resume(args.session_id()))

    def op_read(self, args: Args) -> JsonValue:
        session_id = args.session_id()
        if self.persistence is None:
            raise reject(
                Code.SESSION_NOT_FOUND, f'session "{session_id}" not found (this store has no persistence)'
            )
        stored = self.persistence.read(session_id)
        return {"header": stored.header, "events": list(stored.events)}

    def op_export(self, args: Args) -> JsonValue:
        """Every file under the file store's root: its path relative to the root and its bytes."""
        if not isinstance(self.persistence, FileStore):
            raise BadRequest("export needs reset with storage 'file'")
        fs, root = self.persistence.fs, self.persistence.root
        files: list[tuple[str, str]] = []
        pending = [""]
        while pending:
            relative = pending.pop()
            for name in fs.listdir(f"{root}/{relative}".rstrip("/")):
                child = f"{relative}/{name}" if relative else name
                if fs.is_dir(f"{root}/{child}"):
                    pending.append(child)
                else:
                    files.append((child, base64.b64encode(fs.read_bytes(f"{root}/{child}")).decode("ascii")))
        return [{"path": path, "bytes": data} for path, data in sorted(files)]


def decode_placed_files(value: object, storage: object) -> list[tuple[str, bytes]]:
    """``reset``'s ``files`` (PROTOCOL.md, "Placing files"): absent, or with storage ``"file"`` an
    array of ``{path, bytes}``, each path relative (``/``-separated names, none ``.`` or ``..``)
    and given once, its bytes base64."""
    if value is ABSENT or value is None:
        return []
    if storage != "file" or not isinstance(value, list):
        raise BadRequest("files need reset with storage 'file' and are an array of {path, bytes}")
    placed: list[tuple[str, bytes]] = []
    for entry in value:
        path = entry.get("path") if isinstance(entry, dict) else None
        text = entry.get("bytes") if isinstance(entry, dict) else None
        if not isinstance(path, str) or not isinstance(text, str):
            raise BadRequest("every file is {path: string, bytes: base64 string}")
        if path.startswith("/") or any(part in ("", ".", "..") for part in path.split("/")):
            raise BadRequest(f"file path {path!r} must be relative, each part a name")
        if any(path == seen for seen, _ in placed):
            raise BadRequest(f"file path {path!r} is given twice")
        try:
            placed.append((path, base64.b64decode(text, validate=True)))
        except binascii.Error:
            raise BadRequest(f"the bytes of {path!r} are not base64") from None
    return placed


def place_files(fs: FileSystem, root: str, files: Sequence[tuple[str, bytes]]) -> None:
    """Write ``files`` under ``root``, durably, before any store opens there."""
    for path, data in files:
        full = f"{root}/{path}"
        parent = full.rsplit("/", 1)[0]
        fs.makedirs(parent)
        fs.write_new(full, data)
        fs.fsync(full)
        fs.fsync_dir(parent)
