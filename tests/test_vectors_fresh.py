"""The checked-in conformance vectors are exactly what the generator writes from the spec today,
they cover every code and every checker rule, and the spec itself passes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance import generate_vectors as gen
from conformance.cases import build, coverage, msg
from conformance.oracle import SpecOracle
from conformance.report import Options
from conformance.runner import load_vectors, rule_of, run_vectors
from conformance.spec_index import VECTORS_DIR, spec_function
from conformance.subject import InProcessSubject
from spec.checks.log import RULES
from spec.codes import Code
from spec.log.json import JsonObject
from tests.test_vectors_schema import PURE_ORDER

VECTORS = VECTORS_DIR


@pytest.fixture(scope="module")
def fresh() -> dict[str, str]:
    return gen.generate()


def checked_in() -> dict[str, str]:
    return {
        str(path.relative_to(VECTORS)): path.read_text(encoding="utf-8")
        for path in sorted(VECTORS.glob("*/*.json"))
    }


def test_checked_in_vectors_equal_a_fresh_generation(fresh: dict[str, str]) -> None:
    on_disk = checked_in()
    missing = sorted(set(fresh) - set(on_disk))
    extra = sorted(set(on_disk) - set(fresh))
    changed = sorted(path for path in set(fresh) & set(on_disk) if fresh[path] != on_disk[path])
    assert (missing, extra, changed) == ([], [], []), "run: python -m conformance.generate_vectors"


def test_generating_twice_writes_the_same_bytes(fresh: dict[str, str], tmp_path: Path) -> None:
    gen.write(fresh, tmp_path)
    again = gen.generate()
    assert again == fresh
    assert {str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*.json")} == set(fresh)


def test_every_code_is_expected_by_a_vector_or_excused_with_a_reason() -> None:
    covered = coverage.covered_codes(checked_in())
    excused = coverage.excused_codes()
    unaccounted = sorted(str(code) for code in Code if str(code) not in covered and str(code) not in excused)
    assert unaccounted == []
    assert all(reason.strip() for reason in excused.values())


def test_no_excused_code_is_in_fact_covered() -> None:
    covered = coverage.covered_codes(checked_in())
    assert sorted(covered & set(coverage.excused_codes())) == []


def test_every_vector_expects_only_known_codes() -> None:
    known = {str(code) for code in Code}
    assert sorted(coverage.covered_codes(checked_in()) - known) == []


def test_every_checker_rule_is_reported_by_some_vector() -> None:
    assert sorted(set(RULES) - coverage.checker_rules_covered(checked_in())) == []


def test_every_family_has_vectors_and_every_vector_sits_in_its_family_folder() -> None:
    vectors = load_vectors(VECTORS)
    families = {vector["family"] for vector in vectors}
    assert families == set(gen.FAMILIES)
    for path in VECTORS.glob("*/*.json"):
        assert json.loads(path.read_text(encoding="utf-8"))["family"] == path.parent.name


def test_every_vector_names_a_function_of_the_specification() -> None:
    for vector in load_vectors(VECTORS):
        assert callable(spec_function(rule_of(vector))), vector["name"]


def test_the_specification_passes_every_vector_it_can_run() -> None:
    oracle = InProcessSubject(SpecOracle())
    results = run_vectors(oracle, Options(capabilities=frozenset(SpecOracle.capabilities)))
    assert [r.name for r in results if r.outcome in ("failed", "error")] == []
    assert sum(r.outcome == "passed" for r in results) > 300


def test_a_case_whose_outcome_is_not_the_one_its_author_meant_is_refused() -> None:
    meant_to_fail = build.case("x", "append_event", [build.fails(Code.EVENT_TYPE_INVALID, "create", id="s")])
    with pytest.raises(build.GenerationError, match="meant to fail with EVENT_TYPE_INVALID"):
        gen.build_vector("session", meant_to_fail)


def test_a_case_meant_to_succeed_that_the_spec_rejects_is_refused() -> None:
    rejected = build.pure("x", "spec.storage.encode_segment", id="")
    with pytest.raises(build.GenerationError, match="meant to succeed"):
        gen.build_vector("storage", rejected)


def test_a_rule_that_is_not_a_spec_function_is_refused() -> None:
    with pytest.raises(build.GenerationError, match="no_such_rule"):
        gen.build_vector("session", build.case("x", "no_such_rule", []))


def test_a_log_entry_of_another_length_is_refused_not_cut_short() -> None:
    with pytest.raises(build.GenerationError, match="a log entry is"):
        build.log(("user/message", msg.user(), {"surfaceOp": "append"}, {"time": 1}))


@pytest.mark.parametrize(
    ("data", "kind"),
    [(msg.user(), "user/message"), (msg.assistant(), "assistant/message"), (msg.result(), "tool/result")],
)
def test_a_message_builders_data_goes_on_the_surface_as_its_kind(data: JsonObject, kind: str) -> None:
    assert build.log(data) == [build.event(0, kind, data, **build.APPEND)]
    assert build.append(data) == build.ok("append", id="s", type=kind, data=data, **build.APPEND)


def test_data_no_message_builder_makes_has_no_kind() -> None:
    shapeless: tuple[JsonObject, ...] = ({"turn": 1}, {"turn": 1, "message": msg.user()}, {"message": "text"})
    for data in shapeless:
        with pytest.raises(build.GenerationError, match="not a message builder's data"):
            build.log(data)


def test_a_case_without_a_why_pins_the_first_sentence_of_its_rules_docstring() -> None:
    vector = gen.build_vector("session", build.case("x", "validate_event_type", []))
    assert (
        vector["why"]
        == "an appended event's type is a non-empty string; any string is accepted, known or not (§2.4)"
    )


def test_a_case_authors_why_and_comment_are_written_as_they_gave_them() -> None:
    given = build.pure("x", "spec.storage.encode_segment", why="the rule", comment="the reason", id="a")
    vector = gen.build_vector("storage", given)
    assert (vector["why"], vector["comment"]) == ("the rule", "the reason")


def test_a_pure_vector_calls_the_protocol_name_and_names_its_rule_by_the_stable_name() -> None:
    vector = gen.build_vector("storage", build.pure("x", "spec.storage.encode_segment", id="a"))
    assert (vector["rule"], vector["function"]) == ("encode_segment", "spec.storage.encode_segment")
    assert list(vector) == [key for key in PURE_ORDER if key != "comment"]


def test_every_request_sits_on_one_line_and_every_expect_but_a_large_final_one_too() -> None:
    for path in VECTORS.glob("*/*.json"):
        text = path.read_text(encoding="utf-8")
        lines = [line.strip() for line in text.splitlines()]
        steps = json.loads(text).get("steps", [])
        for number, step in enumerate(steps):
            request, expect = (gen.one_line(step[key]) for key in ("request", "expect"))
            one_line = gen.one_line(step) in lines or gen.one_line(step) + "," in lines
            assert one_line or any(request in line for line in lines), (path, number)
            large_final = number == len(steps) - 1 and len(expect) > gen.LARGE
            assert one_line or large_final or any(expect in line for line in lines), (path, number)


def test_the_rendering_reads_back_as_the_vector_key_order_included() -> None:
    vector = json.loads(
        (VECTORS / "surface" / "a-replace-whose-start-comes-after-its-end-is-rejected.json").read_text()
    )
    assert gen.one_line(json.loads(gen.render(vector))) == gen.one_line(vector)


def test_checked_in_reference_files_equal_a_fresh_generation() -> None:
    """The files vectors' file sets under conformance/reference-files are byte for byte what the
    generator writes, and each is the one its vector places with reset's files argument."""
    import base64

    on_disk = {
        path.relative_to(gen.REFERENCE_FILES_DIR).as_posix(): path.read_bytes()
        for path in sorted(gen.REFERENCE_FILES_DIR.rglob("*"))
        if path.is_file() and path.name != "README.md"
    }
    fresh = gen.generate_reference_files()
    missing, extra = sorted(set(fresh) - set(on_disk)), sorted(set(on_disk) - set(fresh))
    changed = sorted(path for path in set(fresh) & set(on_disk) if fresh[path] != on_disk[path])
    assert (missing, extra, changed) == ([], [], []), "run: python -m conformance.generate_vectors"
    for vector_path in sorted((VECTORS / "files").glob("*.json")):
        reset = json.loads(vector_path.read_text(encoding="utf-8"))["steps"][0]["request"]
        placed = {
            f"{vector_path.stem}/{entry['path']}": base64.b64decode(entry["bytes"])
            for entry in reset["files"]
        }
        assert placed == {
            path: data for path, data in on_disk.items() if path.startswith(f"{vector_path.stem}/")
        }
