"""The pure rules of the database backends (spec/format/tables.py) and of copying (spec/lineage/transfer.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.checks.log import check_session_copy
from spec.codes import Code, SpecError
from spec.format.naming import encode_header_line
from spec.format.tables import (
    TABLE_LAYOUT_VERSION,
    decode_event_row,
    decode_header_row,
    encode_event_row,
    encode_header_row,
    encode_session_key,
    plan_layout_migration,
    plan_unknown_commit,
)
from spec.lineage.transfer import ALREADY_COPIED, WRITE, plan_session_copy
from spec.log.header import build_header
from spec.log.json import FrozenDict, freeze_parsed_json


def event(seq: int, **data: object) -> FrozenDict:
    frozen = freeze_parsed_json({"type": "todo/write", "seq": seq, "time": 1, "data": dict(data)})
    assert isinstance(frozen, FrozenDict)
    return frozen


HEADER = build_header("s", {"createdAt": 1, "cwd": "/w"}, 1, is_seeded=False)


@given(st.text(min_size=1))
def test_every_session_id_has_one_ascii_key_and_no_two_ids_share_one(session_id: str) -> None:
    key = encode_session_key(session_id)
    assert key.isascii()
    assert encode_session_key(session_id + "x") != key


def test_the_empty_session_id_has_no_key() -> None:
    assert refusal(lambda: encode_session_key("")).code == Code.EMPTY_PATH_SEGMENT


@given(st.text())
def test_an_event_row_reads_back_as_the_event_it_holds(text: str) -> None:
    stored = event(3, text=text)
    assert decode_event_row("s", 3, 3, encode_event_row(stored)) == stored


def test_a_header_row_is_the_header_line_and_reads_back_under_its_own_key() -> None:
    text = encode_header_row(HEADER)
    assert text.startswith('{"type":"session","version":4,"id":"s"')
    assert decode_header_row("s", text) == HEADER
    assert encode_header_line(HEADER)["type"] == "session"


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("s", "{not json"),
        ("t", encode_header_row(HEADER)),  # filed under another session's key
        ("s", encode_header_row(HEADER).replace('"version":4', '"version":0')),  # a database holds only v4
    ],
)
def test_a_damaged_header_row_is_a_corrupt_log(key: str, text: str) -> None:
    assert refusal(lambda: decode_header_row(key, text)).code == Code.CORRUPT_LOG


def test_a_header_row_of_a_newer_format_is_an_unsupported_format() -> None:
    assert (
        refusal(
            lambda: decode_header_row("s", encode_header_row(HEADER).replace('"version":4', '"version":5'))
        ).code
        == Code.UNSUPPORTED_FORMAT
    )


@pytest.mark.parametrize(
    ("position", "seq", "text"),
    [
        (2, 3, encode_event_row(event(3))),  # a gap before this row
        (3, 3, encode_event_row(event(4))),  # the row holds another event
        (3, True, encode_event_row(event(3))),  # a key that is no seq
        (3, 3, "[1, 2]"),  # not an event
        (3, 3, '{"type":'),  # not JSON
    ],
)
def test_a_damaged_event_row_is_a_corrupt_log(position: int, seq: object, text: str) -> None:
    assert refusal(lambda: decode_event_row("s", position, seq, text)).code == Code.CORRUPT_LOG


def test_an_event_row_with_a_malformed_message_is_refused_as_a_restore_would() -> None:
    bad = '{"type":"user/message","seq":0,"time":1,"data":{"role":"user"},"surfaceOp":"append"}'
    with pytest.raises(SpecError):
        decode_event_row("s", 0, 0, bad)


def test_the_layout_is_created_from_nothing_kept_when_current_and_refused_when_newer() -> None:
    assert plan_layout_migration(None) == tuple(range(1, TABLE_LAYOUT_VERSION + 1))
    assert plan_layout_migration(TABLE_LAYOUT_VERSION) == ()
    assert refusal(lambda: plan_layout_migration(TABLE_LAYOUT_VERSION + 1)).code == Code.UNSUPPORTED_FORMAT
    assert refusal(lambda: plan_layout_migration(0)).code == Code.CORRUPT_LOG


def test_rows_found_after_an_unknown_commit_that_start_the_batch_are_that_commit() -> None:
    assert plan_unknown_commit("s", [], ["a", "b"]) == 0
    assert plan_unknown_commit("s", ["a"], ["a", "b"]) == 1
    assert plan_unknown_commit("s", ["a", "b"], ["a", "b"]) == 2


@pytest.mark.parametrize("found", [["x"], ["a", "x"], ["a", "b", "c"]])
def test_any_other_rows_after_an_unknown_commit_mean_another_writer_took_over(found: list[str]) -> None:
    assert refusal(lambda: plan_unknown_commit("s", found, ["a", "b"])).code == Code.LOCKED


def test_a_copy_is_written_when_absent_skipped_when_identical_and_refused_when_different() -> None:
    events = (event(0, n=1), event(1, n=2))
    assert plan_session_copy(HEADER, events, None) == WRITE
    assert plan_session_copy(HEADER, events, (HEADER, events)) == ALREADY_COPIED
    for different in (
        (HEADER, events[:1]),
        (HEADER, (events[0], event(1, n=3))),
        (dict(HEADER, cwd="/x"), events),
    ):
        with pytest.raises(SpecError) as refused:
            plan_session_copy(HEADER, events, different)
        assert refused.value.code == Code.SESSION_ALREADY_EXISTS


def test_a_copy_that_reads_back_differently_is_reported() -> None:
    events = (event(0, n=1), event(1, n=2))
    assert check_session_copy(HEADER, events, HEADER, events) == ()
    assert check_session_copy(HEADER, events, HEADER, events[:1])
    assert check_session_copy(HEADER, events, HEADER, (events[0], event(1, n=2.5)))
    assert check_session_copy(HEADER, events, dict(HEADER, cwd="/x"), events)
