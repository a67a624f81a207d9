"""projection: the seed's session digest folded over a log, and the identity rule
(SPEC-DECISIONS D7; seed 002 "会话账本").

A subject folds the seed's example unit, ``sessionDigest``, from its ``init`` over a log and says
for each event whether the state changed, by identity, as a change feed tells it. The digest cares
about successful ``compaction/end`` events and ``compaction/prune``; for every other event it must
hand back the very same state ("不关心的事件必须返回同一个引用，下游才不会白算"), so those read as
unchanged. A subject whose unit returns a new equal object for them fails these vectors.
"""

from __future__ import annotations

from typing import Final

from conformance.cases.build import Cases, assistant_ev, log, pure, user_ev

CHANGES = "spec.projection.derive_projection_changes"
START: Final = ("compaction/start", {"compactionId": "k1", "turn": None})
PRUNE: Final = (
    "compaction/prune",
    {"shadowedRange": {"start": 1, "end": 1}, "shadowedSeqs": [1], "shadowedTokenCount": 42},
)


def cases() -> Cases:
    yield pure("the digest of an empty log is its init", CHANGES, unit="sessionDigest", events=[])
    yield pure(
        "events the digest does not care about leave the very same state",
        CHANGES,
        unit="sessionDigest",
        events=log(("turn/start", {"turn": 1}), user_ev(), assistant_ev(), START),
        comment="every flag is false: a new object equal to the old one would read as a change",
    )
    yield pure(
        "a successful compaction/end and a prune change the digest, a failed compaction does not",
        CHANGES,
        unit="sessionDigest",
        events=log(
            user_ev(),
            START,
            ("compaction/end", {"compactionId": "k1", "turn": None, "error": "gave up"}),
            ("compaction/start", {"compactionId": "k2", "turn": None}),
            ("compaction/end", {"compactionId": "k2", "turn": None}),
            PRUNE,
            ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
        ),
        comment="only the successful end (seq 4) and the prune (seq 5) are changes",
    )
