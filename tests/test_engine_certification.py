"""docs/engine-certification.md, the closing table of issue 11: fresh, every engine vector's rule
belongs to a rule of docs/compaction.md, every rule has a vector, and every broken engine is named."""

from __future__ import annotations

from broken_engines import BROKEN_ENGINES

from scripts import engine_certification as certification


def test_the_page_is_fresh() -> None:
    assert certification.main(["--check"]) == 0, "run python -m scripts.engine_certification"


def test_every_engine_vector_certifies_a_rule_and_every_rule_has_a_vector() -> None:
    vectors = certification.vectors_by_function()
    named = {function for rule in certification.RULES for function in rule.functions}
    assert set(vectors) - named == set(), "an engine vector's rule is in no row"
    assert [rule.says for rule in certification.RULES if not set(rule.functions) & set(vectors)] == []


def test_every_broken_engine_is_named_by_the_rule_it_breaks() -> None:
    named = {name.strip() for rule in certification.RULES for name in rule.broken.split(",") if name}
    assert named == {broken.__name__ for broken in BROKEN_ENGINES}
