"""storage: the stored log, through the protocol and as pure functions.

Covers durability through the protocol (``flush`` as the barrier, ``close``, ``resume``, ``read``,
what a crash keeps and loses, storage I/O failures: :mod:`.durability`), where a log lives and its
header line (:mod:`.naming`), how the stored lines and packed chunk rows decode
(:mod:`.records`), and the read path of DSH's v0 logs (:mod:`.legacy`).
"""

from __future__ import annotations

from conformance.cases.build import Cases
from conformance.cases.storage import durability, legacy, naming, records


def cases() -> Cases:
    yield from durability.cases()
    yield from naming.cases()
    yield from records.cases()
    yield from legacy.cases()
