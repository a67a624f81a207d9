"""Provenance: which earlier events a surface event was derived from (notes/dsh-session-core §3.6).

``sourceEventSeqs`` is optional on an append and effectively mandatory on a replace, because it
must cite every node the replace shadows. A tool call is never cut from its result and a summary
never forgets what it summarises: provenance is how the log proves it.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.codes import Code, reject
from spec.events import ASSISTANT_MESSAGE, Event
from spec.json import is_event_seq, js_text


def validate_provenance(event: Event, shadowed: Sequence[int]) -> None:
    """When present, ``sourceEventSeqs`` is an array, non-empty (except on assistant/message, where
    ``[]`` means a known-empty provider stream), of distinct event seqs, each earlier than the event
    itself. Present or not, it must include every seq in ``shadowed``. Checked in that order."""
    seq = event.get("seq")
    kind = event.get("type")
    raw = event.get("sourceEventSeqs")
    cited: set[object] = set()
    if "sourceEventSeqs" in event:
        if not isinstance(raw, list):
            raise reject(Code.PROVENANCE_NOT_ARRAY, f"sourceEventSeqs on event at seq {seq} must be an array when present")
        if len(raw) == 0 and kind != ASSISTANT_MESSAGE:
            raise reject(Code.PROVENANCE_EMPTY, "sourceEventSeqs must not be empty except on assistant/message")
        for item in raw:
            if not is_event_seq(item):
                raise reject(
                    Code.PROVENANCE_NOT_SEQ,
                    f'session event "{kind}" sourceEventSeqs must densely contain non-negative safe integers',
                )
        cited = set(raw)
        if len(cited) != len(raw):
            raise reject(Code.PROVENANCE_DUPLICATE, "sourceEventSeqs must not contain duplicates")
        for item in raw:
            if item >= seq:  # type: ignore[operator]
                raise reject(
                    Code.PROVENANCE_NOT_EARLIER,
                    f"sourceEventSeqs must reference earlier events: {js_text(item)} >= current seq {js_text(seq)}",
                )
    missing = [node for node in shadowed if node not in cited]
    if missing:
        raise reject(
            Code.PROVENANCE_MISSING_SHADOWED,
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing "
            + ", ".join(str(node) for node in missing),
        )

