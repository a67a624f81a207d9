"""storage: the stored log, through the protocol and as pure functions.

Covers durability through the protocol (``flush`` as the barrier, ``close``, ``resume``, ``read``,
what a crash keeps and loses, storage I/O failures: :mod:`.durability`), where a log lives and its
header line (:mod:`.naming`), how the stored lines and packed chunk rows decode
(:mod:`.records`), the read path of DSH's v0 logs (:mod:`.legacy`), when a copy to another
store is written, skipped or refused (:mod:`.copy`), the store's listing (:mod:`.listing`), a
stored log checked (:mod:`.check`) and a database backend's rows (:mod:`.tables`).
"""

from __future__ import annotations

from typing import Final

from conformance.cases.build import chained
from conformance.cases.storage import check, copy, durability, legacy, listing, naming, records, tables

cases: Final = chained(
    durability.cases,
    naming.cases,
    records.cases,
    legacy.cases,
    copy.cases,
    listing.cases,
    check.cases,
    tables.cases,
)
