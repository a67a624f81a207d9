"""conformance/vectors/vector.schema.json: every vector file is a vector of that schema, the schema
refuses what a vector must not be, and every file lists its fields in reading order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from conformance import generate_vectors as gen
from conformance.spec_index import VECTORS_DIR
from spec.wire import WIRE_FUNCTIONS

VECTORS = VECTORS_DIR
SCHEMA = json.loads((VECTORS / "vector.schema.json").read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
PROTOCOL_ORDER = ("name", "family", "why", "comment", "rule", "specification", "capabilities", "steps")
PURE_ORDER = (
    "name",
    "family",
    "why",
    "comment",
    "rule",
    "specification",
    "capabilities",
    "function",
    "input",
    "expect",
)


def vector_files() -> list[Path]:
    return sorted(VECTORS.glob("*/*.json"))


def problems(vector: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in VALIDATOR.iter_errors(vector)
    ]


def protocol_vector() -> dict[str, Any]:
    return json.loads(
        (VECTORS / "surface" / "a-replace-whose-start-comes-after-its-end-is-rejected.json").read_text()
    )


def pure_vector() -> dict[str, Any]:
    return json.loads(
        (VECTORS / "pairing" / "a-tool-result-before-any-open-call-is-an-orphan.json").read_text()
    )


def test_the_schema_is_a_json_schema_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_every_vector_file_is_a_vector_of_the_schema() -> None:
    files = vector_files()
    assert len(files) > 300
    found = {
        str(path.relative_to(VECTORS)): problems(json.loads(path.read_text(encoding="utf-8")))
        for path in files
    }
    assert {path: errors for path, errors in found.items() if errors} == {}


def test_the_schema_names_exactly_the_generators_families() -> None:
    assert set(SCHEMA["$defs"]["family"]["enum"]) == set(gen.FAMILIES)


def test_the_schema_names_exactly_the_pure_functions_of_the_protocol() -> None:
    assert set(SCHEMA["$defs"]["pureVector"]["properties"]["function"]["enum"]) == set(WIRE_FUNCTIONS)


def test_every_vector_lists_its_fields_in_reading_order() -> None:
    for path in vector_files():
        vector = json.loads(path.read_text(encoding="utf-8"))
        order = PURE_ORDER if "function" in vector else PROTOCOL_ORDER
        assert list(vector) == [key for key in order if key in vector], path
        for step in vector.get("steps", []):
            assert list(step) == ["request", "expect"], path


def test_the_two_sample_vectors_pass_before_they_are_broken() -> None:
    assert problems(protocol_vector()) == [] and problems(pure_vector()) == []


@pytest.mark.parametrize(
    "why, breaking",
    [
        ("a pure vector repeats its function as rule", lambda v: v.update(rule=v["function"])),
        ("a pure vector without why", lambda v: v.pop("why")),
        ("an unknown field", lambda v: v.update(description="x")),
        ("an empty comment", lambda v: v.update(comment="")),
        ("a function the protocol does not name", lambda v: v.update(function="spec.pairing.nope")),
        ("an expect with a code and a result", lambda v: v["expect"].update(result=None)),
        ("a capability other than pure", lambda v: v.update(capabilities=["core"])),
    ],
)
def test_the_schema_refuses_a_broken_pure_vector(why: str, breaking: Any) -> None:
    vector = pure_vector()
    breaking(vector)
    assert problems(vector) != [], why


@pytest.mark.parametrize(
    "why, breaking",
    [
        ("a protocol vector without its rule", lambda v: v.pop("rule")),
        ("a first step that is not a reset", lambda v: v["steps"].pop(0)),
        ("a request that carries its rid", lambda v: v["steps"][2]["request"].update(rid=1)),
        ("an op the protocol does not have", lambda v: v["steps"][2]["request"].update(op="rewind")),
        ("a step with a third field", lambda v: v["steps"][2].update(comment="x")),
        ("a rejection without its code", lambda v: v["steps"][-2]["expect"].pop("code")),
        ("a family that is not a folder", lambda v: v.update(family="surfaces")),
        ("a name with a trailing space", lambda v: v.update(name=v["name"] + " ")),
        ("capabilities without core", lambda v: v.update(capabilities=["storage"])),
    ],
)
def test_the_schema_refuses_a_broken_protocol_vector(why: str, breaking: Any) -> None:
    vector = protocol_vector()
    breaking(vector)
    assert problems(vector) != [], why
