"""The crash ops (conformance/PROTOCOL.md, "Crash ops", capability ``crash-seam``): ``unsynced``,
``crash``, ``arm_crash``, ``fail_next``, ``ops`` and ``damage``, all on the simulated power-loss
filesystem (:mod:`reference.persistence.powerloss`, :mod:`reference.persistence.faulty`)."""

from __future__ import annotations

import errno
from typing import Final

from reference.persistence.faulty import FaultyFileSystem
from reference.persistence.filestore import FileStore
from reference.persistence.powerloss import DROP_ALL, KEEP_ALL, CrashPlan
from reference.subject.base import DiskSpillStore, SubjectBase
from reference.subject.requests import Args, BadRequest
from spec.format.framing import scan_zstd_frames, split_jsonl
from spec.log.json import JsonValue, is_safe_integer
from spec.log.session import ABSENT
from spec.protocol import DAMAGE_SPOTS

ERRNOS: Final = {"EIO": errno.EIO, "ENOSPC": errno.ENOSPC}
# each answered by its op_<name> method
CRASH_OPS: Final = ("unsynced", "crash", "arm_crash", "fail_next", "ops", "damage")


class CrashOps(SubjectBase):
    """The ops of capability ``crash-seam``."""

    def op_unsynced(self, args: Args) -> JsonValue:
        return [{"path": f.path, "bytes": f.pending} for f in self._crash_fs().inner.unsynced_files()]

    def op_crash(self, args: Args) -> JsonValue:
        fs = self._crash_fs()
        keep = args.get("keep", "none")
        if keep == "none":
            plan = DROP_ALL
        elif keep == "all":
            plan = KEEP_ALL
        elif (
            isinstance(keep, dict)
            and isinstance(path := keep.get("path"), str)
            and is_safe_integer(size := keep.get("bytes"))
        ):
            plan = CrashPlan(cuts={path: int(size)})
        else:
            raise BadRequest("keep must be 'none', 'all' or {path, bytes}")
        try:
            survivor = fs.inner.crash(plan)
        except ValueError as error:
            raise BadRequest(str(error)) from None
        self.fs = FaultyFileSystem(survivor)
        if isinstance(self.spill_store, DiskSpillStore):
            self.spill_store.crash()
        self._open_store()
        return None

    def op_arm_crash(self, args: Args) -> JsonValue:
        self._crash_fs().inner.crash_at_op(args.count("after") + 1)
        return None

    def op_fail_next(self, args: Args) -> JsonValue:
        fs = self._crash_fs()
        kind, code = args.get("fsOp"), args.get("errno")
        if kind not in ("write", "fsync") or code not in ERRNOS:
            raise BadRequest("fsOp must be 'write' or 'fsync' and errno 'EIO' or 'ENOSPC'")
        fs.fail_next(str(kind), ERRNOS[str(code)], args.count("after", 0))
        return None

    def op_ops(self, args: Args) -> JsonValue:
        return self._crash_fs().inner.mutation_count

    def op_damage(self, args: Args) -> JsonValue:
        fs = self._crash_fs()
        session_id = args.session_id()
        path = self.persistence.locate(session_id) if isinstance(self.persistence, FileStore) else None
        if path is None:
            raise BadRequest(f'session "{session_id}" has no stored log to damage')
        spot = args.get("at", "middle")
        if spot not in DAMAGE_SPOTS:
            raise BadRequest(f"at must be one of {', '.join(DAMAGE_SPOTS)}")
        if args.optional("offset") is ABSENT:
            offset = plan_damage_offset(fs.inner.read_bytes(path), path.endswith(".zstd"), str(spot))
            if offset is None:
                raise BadRequest(
                    f'the log of "{session_id}" has no middle: it needs two event units after its header'
                )
        else:
            offset = args.count("offset")
        try:
            fs.inner.rot_byte(path, offset)
        except ValueError as error:
            raise BadRequest(str(error)) from None
        return {"path": path, "offset": offset}


def plan_damage_offset(data: bytes, compressed: bool, spot: str = "middle") -> int | None:
    """The byte ``damage`` flips when no offset is given (conformance/PROTOCOL.md): in the log's
    second unit (its second line, newline counted, or its second zstd frame), provided a third
    complete unit follows it, the ``"middle"`` byte ``start + length // 2``, the ``"start"`` byte or
    the ``"end"`` byte ``start + length - 1``; ``None`` when there is no such unit."""
    if compressed:
        units = [(frame.offset, frame.length) for frame in scan_zstd_frames(data).frames]
    else:
        units = [(line.offset, line.end - line.offset) for line in split_jsonl(data).lines]
    if len(units) < 3:
        return None
    start, length = units[1]
    return {"middle": start + length // 2, "start": start, "end": start + length - 1}[spot]
