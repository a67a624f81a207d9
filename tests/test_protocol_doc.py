"""conformance/PROTOCOL.md's examples are real: every ``protocol-example`` block, replayed on a
fresh reference subject, gets exactly the responses the document shows (error messages aside)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from reference.server import ReferenceSubject

PROTOCOL = Path(__file__).resolve().parent.parent / "conformance" / "PROTOCOL.md"
BLOCK = re.compile(r"```jsonl protocol-example\n(.*?)```", re.DOTALL)


def example_blocks() -> list[list[Any]]:
    blocks = [
        [json.loads(line) for line in body.splitlines() if line.strip()]
        for body in BLOCK.findall(PROTOCOL.read_text(encoding="utf-8"))
    ]
    return blocks


def without_message(response: Any) -> Any:
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        return {**response, "error": {**response["error"], "message": "…"}}
    return response


def test_the_document_has_examples_for_hello_the_core_ops_storage_and_every_pure_function() -> None:
    ops = {line.get("op") for block in example_blocks() for line in block if "op" in line}
    functions = {line["function"] for block in example_blocks() for line in block if line.get("op") == "call"}
    from spec.wire import WIRE_FUNCTIONS

    assert {"hello", "create", "append", "state", "fork", "flush", "read", "close", "resume"} - ops <= {
        "fork"
    }
    assert functions == set(WIRE_FUNCTIONS)


def test_the_document_has_an_example_of_every_engine_op() -> None:
    from reference.server import ENGINE_OPS

    ops = {line.get("op") for block in example_blocks() for line in block if "op" in line}
    assert set(ENGINE_OPS) - ops == set()


@pytest.mark.parametrize("block", example_blocks(), ids=lambda block: str(block[0].get("op")))
def test_each_example_is_what_the_reference_answers(block: list[Any]) -> None:
    subject = ReferenceSubject()
    requests, shown = block[0::2], block[1::2]
    assert len(requests) == len(shown), "every request line is followed by its response line"
    for request, response in zip(requests, shown):
        assert "op" in request and "ok" in response
        assert without_message(subject.handle(request)) == response, f"request {request}"


def test_the_document_shows_export_and_a_reset_that_places_files() -> None:
    requests = [line for block in example_blocks() for line in block if "op" in line]
    assert any(line["op"] == "export" for line in requests)
    assert any(
        line["op"] == "reset" and line.get("storage") == "file" and line.get("files") for line in requests
    )
