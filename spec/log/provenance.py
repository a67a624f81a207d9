"""Provenance: which earlier events a surface event was derived from (notes/dsh-session-core §3.6).

``sourceEventSeqs`` is optional on an append and effectively mandatory on a replace, because it
must cite every node the replace shadows. A tool call is never cut from its result and a summary
never forgets what it summarises: provenance is how the log proves it.
"""

from __future__ import annotations

from collections.abc import Sequence

from spec.codes import Code, SpecError, reject  # noqa: F401 - SpecError is named by the contracts
from spec.log.events import ASSISTANT_MESSAGE, Event
from spec.log.json import is_event_seq, js_text


def validate_provenance(event: Event, shadowed: Sequence[int]) -> None:
    """``sourceEventSeqs``, when present, reads by :func:`decode_cited_seqs`; then the cited seqs
    obey :func:`validate_cited_seqs`, present or not. The event's seq is an event seq already
    (notes/dsh-session-core §3.6)."""
    seq = event.get("seq")
    validate_cited_seqs(seq, decode_cited_seqs(event), shadowed)  # type: ignore[arg-type]


def decode_cited_seqs(event: Event) -> tuple[int, ...] | None:
    """``sourceEventSeqs`` when present (``None`` when not) is an array, non-empty except on
    assistant/message (where ``[]`` means a known-empty provider stream), whose items are event
    seqs, the first offender in array order being reported (notes/dsh-session-core §3.6 steps 1-3)."""
    if "sourceEventSeqs" not in event:
        return None
    raw = event["sourceEventSeqs"]
    kind = event.get("type")
    if not isinstance(raw, list):
        raise reject(
            Code.PROVENANCE_NOT_ARRAY,
            f"sourceEventSeqs on event at seq {event.get('seq')} must be an array when present",
        )
    if len(raw) == 0 and kind != ASSISTANT_MESSAGE:
        raise reject(Code.PROVENANCE_EMPTY, "sourceEventSeqs must not be empty except on assistant/message")
    cited: list[int] = []
    for item in raw:
        if not is_event_seq(item):
            raise reject(
                Code.PROVENANCE_NOT_SEQ,
                f'session event "{kind}" sourceEventSeqs must densely contain non-negative safe integers',
            )
        cited.append(int(item))
    return tuple(cited)


def validate_cited_seqs(seq: int, cited: Sequence[int] | None, shadowed: Sequence[int]) -> None:
    """The cited seqs (``None`` when the event has none) are distinct and each earlier than the
    event's ``seq``, the first offender in array order being reported; and, cited or not, every
    seq in ``shadowed`` must be among them, the missing ones listed in surface order
    (notes/dsh-session-core §3.6 steps 4-5 and the shadowed-node rule).

    raises: SpecError
    post: all(node in (cited or ()) for node in shadowed)
    post: cited is None or len(set(cited)) == len(cited)
    post: cited is None or all(item < seq for item in cited)
    """
    cited_set: set[int] = set()
    if cited is not None:
        cited_set = set(cited)
        if len(cited_set) != len(cited):
            raise reject(Code.PROVENANCE_DUPLICATE, "sourceEventSeqs must not contain duplicates")
        for item in cited:
            if item >= seq:
                raise reject(
                    Code.PROVENANCE_NOT_EARLIER,
                    f"sourceEventSeqs must reference earlier events: {js_text(item)} >= current seq {js_text(seq)}",
                )
    missing = [node for node in shadowed if node not in cited_set]
    if missing:
        raise reject(
            Code.PROVENANCE_MISSING_SHADOWED,
            "surface replace: sourceEventSeqs must include every shadowed surface node; missing "
            + ", ".join(str(node) for node in missing),
        )
