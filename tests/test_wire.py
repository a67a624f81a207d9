"""spec/wire.py: the JSON form of the pure functions behind the protocol's ``call`` op — one table
the oracle and the reference both answer with, matching PROTOCOL.md's table, and an input of the
wrong shape is the protocol's BAD_REQUEST, never an internal failure."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from conformance.oracle import SpecOracle
from conformance.spec_index import spec_function
from reference.server import ReferenceSubject
from spec.log.json import JsonValue
from spec.wire import WIRE_FUNCTIONS, WIRE_TABLE, WireInputError

PROTOCOL = Path(__file__).resolve().parent.parent / "conformance" / "PROTOCOL.md"
EVENT: Any = {
    "type": "user/message",
    "seq": 0,
    "time": 0,
    "data": {"message": {"role": "user", "content": "hi"}},
    "surfaceOp": "append",
}


def protocol_function_names() -> set[str]:
    section = PROTOCOL.read_text(encoding="utf-8").split("## Pure functions", 1)[1]
    return set(re.findall(r"^\| `(spec\.[a-z0-9_.]+)` \|", section, flags=re.MULTILINE))


def test_the_table_names_exactly_the_functions_the_protocol_document_lists() -> None:
    assert set(WIRE_FUNCTIONS) == protocol_function_names()


def test_every_row_calls_the_spec_function_its_frozen_name_ends_with() -> None:
    for row in WIRE_TABLE:
        assert spec_function(row.function.__name__) is row.function, row.name
        assert row.name.startswith("spec.") and row.name.rsplit(".", 1)[1] == row.function.__name__
    assert len({row.name for row in WIRE_TABLE}) == len(WIRE_TABLE) == len(WIRE_FUNCTIONS)


MALFORMED: list[tuple[str, dict[str, JsonValue]]] = [
    ("spec.surface.fold_surface", {"events": {"not": "an array"}}),
    ("spec.surface.fold_surface", {"events": ["not an object"]}),
    ("spec.pairing.is_balanced_before", {"nodes": [0], "events": [EVENT], "seq": 0.5}),
    ("spec.pairing.derive_cut_balance", {"nodes": ["0"], "events": [EVENT]}),
    ("spec.pairing.is_balanced_after", {"nodes": [0], "events": [EVENT]}),
    ("spec.prune.plan_pruned_content", {"blocks": [], "config": {"thresholdChars": 1, "headChars": 1}}),
    ("spec.tokens.fold_shadow_price", {"claim": {"start": 0, "end": 1}, "event": EVENT}),
    ("spec.tokens.fold_shadow_price", {"claim": None}),
    ("spec.storage.encode_segment", {}),
    ("spec.storage.derive_session_relpath", {"header": [], "compressed": True}),
    ("spec.framing.decode_jsonl_log", {"text": "\ud800"}),
    ("spec.framing.decode_compressed_log", {"frames": [{"offset": 0}], "torn": None}),
    ("spec.framing.place_compressed_log", {"frames": [], "torn": {"offset": "0", "text": ""}}),
    ("spec.legacy.upgrade_v0_records", {"sessionId": "s", "records": None}),
    ("spec.header.validate_header", {"header": {}}),
]


@pytest.mark.parametrize(
    ("function", "inputs"), MALFORMED, ids=[f"{f}-{n}" for n, (f, _) in enumerate(MALFORMED)]
)
def test_an_input_of_the_wrong_shape_is_a_wire_input_error(
    function: str, inputs: dict[str, JsonValue]
) -> None:
    with pytest.raises(WireInputError):
        WIRE_FUNCTIONS[function](inputs)


@pytest.mark.parametrize("subject", [SpecOracle, ReferenceSubject], ids=["oracle", "reference"])
@pytest.mark.parametrize(
    ("function", "inputs"), MALFORMED[:4], ids=[f"{f}-{n}" for n, (f, _) in enumerate(MALFORMED[:4])]
)
def test_both_subjects_answer_a_wrong_shaped_input_bad_request(
    subject: Any, function: str, inputs: dict[str, JsonValue]
) -> None:
    answer = subject().handle({"rid": 1, "op": "call", "function": function, "input": inputs})
    assert answer["ok"] is False and answer["error"]["code"] == "BAD_REQUEST"


def test_a_rule_that_rejects_the_input_answers_its_code_not_bad_request() -> None:
    answer = ReferenceSubject().handle(
        {"rid": 1, "op": "call", "function": "spec.storage.encode_segment", "input": {"id": ""}}
    )
    assert answer["ok"] is False and answer["error"]["code"] not in ("BAD_REQUEST", "INTERNAL")


def test_a_well_formed_call_answers_the_functions_result_as_json() -> None:
    fold = WIRE_FUNCTIONS["spec.surface.fold_surface"]({"events": [EVENT]})
    assert fold == {"nodes": [0], "replaceGeneration": 0, "replacements": []}
