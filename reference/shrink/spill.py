"""Spill: a tool result too large to inline is saved whole, and the log records a preview plus how
to fetch the rest (SPEC-DECISIONS D8; seed 002 "排水"; notes/dsh-compaction-projection §10).

Spill is the cheapest shrinking step and the only lossless one: it happens *before* the result
enters the log, so the model sees the bounded text from its first request on and nothing is
rewritten later. The decisions are ``spec.shrink.spill`` (which results, how large, what the log keeps,
and where the text goes); this module adds the stores and applies the policy.

A store keeps the text byte for byte: it is written as UTF-8 (a lone surrogate, which UTF-8
cannot hold, is kept with Python's ``surrogatepass`` so that nothing is lost) and reads back
equal to what was saved.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reference.persistence.fs import FileSystem, RealFileSystem
from spec.codes import Code, reject
from spec.log.json import FrozenList, JsonValue, snapshot_json
from spec.log.session import ABSENT
from spec.shrink.engine import run_plan
from spec.shrink.spill import (
    SPILL_LABEL,
    SPILL_RETRIEVAL_HINT,
    SaveSpill,
    derive_memory_spill_locator,
    derive_spill_file_name,
    derive_spill_session_dir,
    plan_max_inline_tokens,
    plan_spill,
)

log = logging.getLogger(__name__)


def encode_spill_text(text: str) -> bytes:
    """The bytes a spilled text is stored as: UTF-8, lone surrogates kept (``surrogatepass``)."""
    return text.encode("utf-8", "surrogatepass")


def decode_spill_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class SpillRef:
    """Where a spilled text went: ``locator`` (a path for the directory store), its size in bytes,
    and the sentence that tells the model how to read it."""

    locator: str
    bytes: int
    retrieval_hint: str


class SpillStore(Protocol):
    """``saveText``: persist the whole text or raise; ``read_text`` gives it back unchanged."""

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> SpillRef: ...

    def read_text(self, locator: str) -> str: ...


class DirectorySpillStore:
    """Spilled texts as files: ``<root>/session-<sha256(id)[:12]>/<random>-<name>``, created
    exclusively (never overwriting), fsynced, then the directory entry fsynced, so a returned
    locator survives a crash. Reading goes through the same filesystem seam."""

    def __init__(
        self,
        root: str,
        fs: FileSystem | None = None,
        token: Callable[[], str] = lambda: secrets.token_hex(6),
        retrieval_hint: str = SPILL_RETRIEVAL_HINT,
    ) -> None:
        self.root = root.rstrip("/") or "/"
        self.fs: FileSystem = fs if fs is not None else RealFileSystem()
        self._token = token
        self.retrieval_hint = retrieval_hint

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> SpillRef:
        directory = f"{self.root}/{derive_spill_session_dir(session_id)}"
        data = encode_spill_text(content)
        try:
            self._ensure_dir(directory)
            path = f"{directory}/{derive_spill_file_name(self._token(), suggested_name)}"
            self.fs.write_new(path, data)
            self.fs.fsync(path)
            self.fs.fsync_dir(directory)
        except OSError as error:
            raise reject(
                Code.STORAGE_IO, f"spill: could not save the {tool_name} {label} of call {call_id}: {error}"
            ) from error
        return SpillRef(locator=path, bytes=len(data), retrieval_hint=self.retrieval_hint)

    def read_text(self, locator: str) -> str:
        if not locator.startswith(self.root + "/") or "/../" in locator or not self.fs.exists(locator):
            raise reject(Code.SPILL_NOT_FOUND, f"spill: nothing is stored at {locator}")
        return decode_spill_text(self.fs.read_bytes(locator))

    def _ensure_dir(self, directory: str) -> None:
        """Create ``directory`` and any missing parent, making each new entry durable."""
        missing: list[str] = []
        path = directory
        while not self.fs.is_dir(path):
            missing.append(path)
            parent = path.rsplit("/", 1)[0] or "/"
            if parent == path:
                break
            path = parent
        if not missing:
            return
        self.fs.makedirs(directory)
        for created in reversed(missing):
            self.fs.fsync_dir(created.rsplit("/", 1)[0] or "/")


class MemorySpillStore:
    """Spilled texts kept in a dict (tests, and hosts with nowhere to write)."""

    def __init__(self, retrieval_hint: str = SPILL_RETRIEVAL_HINT) -> None:
        self._saved: dict[str, bytes] = {}
        self.retrieval_hint = retrieval_hint

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> SpillRef:
        data = encode_spill_text(content)
        locator = derive_memory_spill_locator(session_id, len(self._saved) + 1, suggested_name)
        self._saved[locator] = data
        return SpillRef(locator=locator, bytes=len(data), retrieval_hint=self.retrieval_hint)

    def read_text(self, locator: str) -> str:
        if locator not in self._saved:
            raise reject(Code.SPILL_NOT_FOUND, f"spill: nothing is stored at {locator}")
        return decode_spill_text(self._saved[locator])


@dataclass(frozen=True)
class SpillOutcome:
    """The content the ``tool/result`` will carry, and where the whole text went (``None``: the
    result is logged as it came)."""

    content: FrozenList
    spilled: SpillRef | None


class SpillPolicy:
    """The spill policy: ``max_inline_tokens`` and the store. Apply it to a tool result's content
    before building the ``tool/result`` that logs it. Left out, the limit is the seed's base
    configuration, 12500 tokens, wherever a store is given (``spec.shrink.spill.plan_max_inline_tokens``):
    ``SpillPolicy(store=DirectorySpillStore(root))`` spills. ``max_inline_tokens=None`` turns spill
    off; a number sets another limit."""

    def __init__(self, max_inline_tokens: object = ABSENT, store: SpillStore | None = None) -> None:
        self.max_inline_tokens = plan_max_inline_tokens(max_inline_tokens, store is not None)
        self.store = store

    def apply(
        self,
        session_id: str | None,
        tool_name: str,
        call_id: str,
        content: Sequence[JsonValue],
        nested: bool = False,
    ) -> SpillOutcome:
        """Spill a top-level, all-text result whose estimated tokens exceed the limit: save it
        whole, then log a head-and-tail preview and the notice naming where it is. Spilling is
        best effort: with no owner, no store, a failing store, or a notice that alone would break
        the limit, the result is kept inline as it came (a saved file is then a harmless orphan)."""
        frozen = snapshot_json(list(content))
        if not isinstance(frozen, FrozenList):
            raise reject(Code.DATA_NOT_JSON, "a tool result's content is outside the lossless JSON domain")

        def save(effect: SaveSpill) -> SpillRef:
            if session_id is None:
                log.warning(
                    "spill-policy: no session owner for %s %s; keeping the inline content",
                    tool_name,
                    SPILL_LABEL,
                )
                raise _NotSaved
            if self.store is None:
                log.warning("spill-policy: no spill store; keeping the inline content")
                raise _NotSaved
            try:
                return self.store.save_text(
                    session_id, tool_name, call_id, effect.label, effect.suggested_name, effect.text
                )
            except Exception as error:
                log.warning(
                    "spill-policy: saveText failed for %s: %s; keeping the inline content", tool_name, error
                )
                raise

        decision = run_plan(plan_spill(tool_name, frozen, self.max_inline_tokens, nested), save)
        if decision.notice_too_large:
            log.warning(
                "spill-policy: spill notice for %s exceeds maxInlineTokens; keeping the inline content",
                tool_name,
            )
        spilled = decision.saved if isinstance(decision.saved, SpillRef) else None
        return SpillOutcome(decision.content, spilled)


class _NotSaved(Exception):
    """A spill with no owner or no store: the result stays inline (already logged)."""
