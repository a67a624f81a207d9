"""The mutation tool (scripts/mutation.py, cosmic-ray) on one small spec rule: a mutant the vectors
kill is reported killed, an equivalent one survives, and the reviewed file turns it equivalent."""

from __future__ import annotations

import json
from pathlib import Path

from scripts import mutation

MODULE = "spec/log/provenance.py"
RULE = "decode_cited_seqs"
LINE = 38  # if len(raw) == 0 and kind != ASSISTANT_MESSAGE:
KILLED = "core/ReplaceComparisonOperator_Eq_NotEq"  # len(raw) != 0: every non-empty citation rejected
EQUIVALENT = "core/ReplaceComparisonOperator_Eq_LtE"  # len(raw) <= 0: a length is never negative


def test_a_killed_and_a_surviving_mutant_are_reported_as_such(tmp_path: Path) -> None:
    assert "len(raw) == 0" in (mutation.ROOT / MODULE).read_text(encoding="utf-8").splitlines()[LINE - 1]
    session = tmp_path / "session.sqlite"
    mutation.open_session(session, [MODULE], fresh=True)

    def wanted(spec: mutation.MutationSpec) -> bool:
        # the first comparison of the line (len(raw) == 0), not the second (kind != ...)
        return spec.definition_name == RULE and spec.start_pos[0] == LINE and spec.start_pos[1] < 20

    mutation.keep(session, lambda spec: wanted(spec) and spec.operator_name in {KILLED, EQUIVALENT})
    mutation.run_lane(session, "fast", (), jobs=2, timeout=120, cases=["provenance/*"], limit=None)

    mutants = {m.operator: m for m in mutation.read_mutants(session)}
    assert set(mutants) == {KILLED.removeprefix("core/"), EQUIVALENT.removeprefix("core/")}
    killed, equivalent = mutants[KILLED.removeprefix("core/")], mutants[EQUIVALENT.removeprefix("core/")]
    assert killed.lanes["fast"][0] == "killed"
    assert equivalent.lanes["fast"][0] == "survived"
    assert (equivalent.before, equivalent.after) == (
        "if len(raw) == 0 and kind != ASSISTANT_MESSAGE:",
        "if len(raw) <= 0 and kind != ASSISTANT_MESSAGE:",
    )

    untriaged = mutation.render(list(mutants.values()), {})
    assert "| 2 | 1 | 0 | 1 | 0 |" in untriaged  # mutants, killed, timeout, survived, equivalent
    assert "untriaged" in untriaged

    reviewed = tmp_path / "equivalents.json"
    entry = {"module": MODULE, "rule": RULE, "before": equivalent.before, "after": equivalent.after}
    entry |= {"verdict": "equivalent", "reason": "a length is never negative"}
    reviewed.write_text(json.dumps({"mutants": [entry]}), encoding="utf-8")
    triaged = mutation.render(list(mutants.values()), mutation.read_triage(reviewed))
    assert "| 2 | 1 | 0 | 0 | 1 |" in triaged
    assert "a length is never negative" in triaged
