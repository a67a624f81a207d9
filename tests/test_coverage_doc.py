"""conformance/coverage.md is what ``python -m conformance.coverage`` writes, and it says what it
claims: every rule is listed, and a rule a vector names is counted with that vector."""

from __future__ import annotations

import json
from pathlib import Path

from conformance import coverage

ROOT = Path(__file__).resolve().parent.parent


def test_the_traceability_document_is_fresh() -> None:
    assert coverage.DOCUMENT.read_text(encoding="utf-8") == coverage.render(), (
        "conformance/coverage.md is stale: run python -m conformance.coverage"
    )
    assert coverage.main(["--check"]) == 0


def test_every_code_and_every_public_spec_function_has_a_row() -> None:
    functions, codes = coverage.gather()
    from spec.codes import Code

    assert set(codes) == {code.value for code in Code}
    assert "spec.log.surface.plan_replace" in functions
    assert "spec.format.naming.encode_segment" in functions


def test_a_vector_counts_for_the_rule_it_names_and_the_code_it_expects() -> None:
    functions, codes = coverage.gather()
    path = ROOT / "conformance" / "vectors" / "surface"
    named = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(path.glob("*.json"))]
    inverted = [v for v in named if "REPLACE_INVERTED" in json.dumps(v)]
    assert inverted and len(codes["REPLACE_INVERTED"].vectors) >= len(inverted)
    assert functions["spec.log.surface.plan_replace"].vectors


def test_rules_reached_by_one_check_are_flagged() -> None:
    functions, _ = coverage.gather()
    single = [rule for rule, evidence in functions.items() if evidence.count == 1]
    text = coverage.render()
    assert single and all(f"`{rule}`" in text for rule in single)
    for rule in single:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{rule}` |"))
        assert row.endswith("**one check only** |"), row
