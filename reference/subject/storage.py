"""The storage ops (conformance/PROTOCOL.md, "Storage ops"): ``reset`` (which picks the backend and
places the suite's files), ``flush``, ``close``, ``resume``, ``read`` and ``export``."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Final

from conformance.files.reader import FilesError, decode_files, encode_files
from reference.checking import check_log_file
from reference.persistence.faulty import FaultyFileSystem
from reference.persistence.filestore import FileStore
from reference.persistence.fs import FileSystem
from reference.persistence.memory import MemoryPersistence
from reference.persistence.powerloss import PowerLossFileSystem
from reference.subject.base import STORE_ROOT, SubjectBase
from reference.subject.requests import Args, BadRequest
from spec.codes import Code, reject
from spec.format.legacy import derive_session_listing
from spec.log.json import JsonValue
from spec.log.session import ABSENT
from spec.projections.durability import decode_batch_policy

# each answered by its op_<name> method
STORAGE_OPS: Final = ("reset", "flush", "close", "resume", "read", "export", "list", "check")


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

    def op_list(self, args: Args) -> JsonValue:
        """The store's listing (capability ``list``): the header of every stored session whose
        header line reads, in :func:`derive_session_listing`'s order; none without storage."""
        if self.persistence is None:
            return []
        return list(derive_session_listing(self.persistence.list()))

    def op_check(self, args: Args) -> JsonValue:
        """A stored log as ``dsh-session check`` reads and checks it (capability ``check``): what
        ``read`` refuses is refused alike; else the log's format, its event count and the checker's
        violations, the legacy rules' apart, each by rule and seq."""
        session_id = args.session_id()
        store = self.persistence
        if not isinstance(store, FileStore):
            raise BadRequest("check needs reset with storage 'file'")
        store.read(session_id)
        path = store.locate(session_id)
        assert path is not None
        outcome = check_log_file(path, opener=lambda name: io.BytesIO(store.fs.read_bytes(name)))
        if outcome.error is not None:
            raise outcome.error
        assert outcome.file is not None
        return {
            "format": outcome.file.log.format_version,
            "events": outcome.event_count,
            "violations": [{"rule": found.rule, "seq": found.seq} for found in outcome.violations],
            "legacy": [{"rule": found.rule, "seq": found.seq} for found in outcome.legacy],
        }

    def op_export(self, args: Args) -> JsonValue:
        """Every file under the file store's root: its path relative to the root and its bytes."""
        if not isinstance(self.persistence, FileStore):
            raise BadRequest("export needs reset with storage 'file'")
        fs, root = self.persistence.fs, self.persistence.root
        files: dict[str, bytes] = {}
        pending = [""]
        while pending:
            relative = pending.pop()
            for name in fs.listdir(f"{root}/{relative}".rstrip("/")):
                child = f"{relative}/{name}" if relative else name
                if fs.is_dir(f"{root}/{child}"):
                    pending.append(child)
                else:
                    files[child] = fs.read_bytes(f"{root}/{child}")
        return encode_files(files)


def decode_placed_files(value: object, storage: object) -> dict[str, bytes]:
    """``reset``'s ``files`` (PROTOCOL.md, "Placing files"): absent, or with storage ``"file"`` the
    protocol's set of files (:func:`conformance.files.reader.decode_files`)."""
    if value is ABSENT or value is None:
        return {}
    if storage != "file":
        raise BadRequest("files need reset with storage 'file'")
    try:
        return decode_files(value)
    except FilesError as error:
        raise BadRequest(str(error)) from None


def place_files(fs: FileSystem, root: str, files: Mapping[str, bytes]) -> None:
    """Write ``files`` under ``root``, durably, before any store opens there."""
    for path, data in files.items():
        full = f"{root}/{path}"
        parent = full.rsplit("/", 1)[0]
        fs.makedirs(parent)
        fs.write_new(full, data)
        fs.fsync(full)
        fs.fsync_dir(parent)
