"""The --json report is UTF-8 text that reads back to the run, even when a failure's detail
quotes a lone surrogate (the rich values of the stateful workloads hold some)."""

from __future__ import annotations

import json

from conformance.report import CaseResult, encode_results


def test_a_lone_surrogate_in_a_detail_is_escaped_and_reads_back() -> None:
    detail = "expected 'a\ud800b', got 'a\udfffb' and 'é😀'"
    text = encode_results([CaseResult("machine", "it agrees", "failed", detail)], {"name": "x"})
    text.encode("utf-8")  # no lone surrogate left to refuse
    assert "é😀" in text  # everything else stays as it is
    assert json.loads(text)["cases"][0]["detail"] == detail
