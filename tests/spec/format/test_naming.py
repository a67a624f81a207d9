"""Where a log lives: projectKey, encodeSegment and the session path (notes/dsh-persistence §2.2-§2.4;
SPEC-DECISIONS D1)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from refusals import refusal

from spec.codes import Code
from spec.format.naming import (
    NO_CWD_DIR,
    V4_PLAIN_NAME,
    V4_ZSTD_NAME,
    derive_session_relpath,
    encode_project_key,
    encode_segment,
)
from spec.log.json import JsonObject, JsonValue

# Any JavaScript string: code points plus lone surrogates, which Python keeps as surrogate code points.
js_strings = st.lists(st.integers(0, 0x10FFFF), min_size=1, max_size=12).map(
    lambda points: "".join(map(chr, points))
) | st.lists(
    st.sampled_from(["a", "~", ".", "-", "/", "\ud800", "\udc00", "\U0001f600", "开", "\x00", "~D800"]),
    min_size=1,
).map("".join)


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/Users/qyj/work/deepseek-harness", "--Users-qyj-work-deepseek-harness--"),
        ("C:\\work\\agent", "--C-work-agent--"),
        ("/开发/~agent", "--~5F00~53D1-~007Eagent--"),
        ("/", "--root--"),
        ("/a/", "--a---"),
    ],
)
def test_project_key_matches_the_dsh_examples(cwd: str, expected: str) -> None:
    assert encode_project_key(cwd) == expected


def test_project_key_is_lossy_for_separators_and_hyphens() -> None:
    assert encode_project_key("/a/b-c") == encode_project_key("/a-b/c") == "--a-b-c--"


def test_project_key_collapses_a_run_of_mixed_separators_into_one_hyphen() -> None:
    assert encode_project_key("/a//\\:b") == "--a-b--"


def test_project_key_strips_leading_literal_hyphens_too() -> None:
    assert encode_project_key("--x") == "--x--"
    assert encode_project_key("/-/") == "--root--"


def test_project_key_escapes_a_lone_surrogate_and_an_astral_character_per_code_unit() -> None:
    assert encode_project_key("/\ud800") == "--~D800--"
    assert encode_project_key("/\U0001f600") == "--~D83D~DE00--"


def test_project_key_caps_the_slug_at_251_characters_even_inside_an_escape() -> None:
    assert encode_project_key("/" + "a" * 300) == "--" + "a" * 251 + "--"
    cut = encode_project_key("/" + "a" * 249 + "开")
    assert cut == "--" + "a" * 249 + "~5" + "--"
    assert len(cut) == 255


def test_project_key_refuses_an_empty_cwd() -> None:
    caught = refusal(lambda: encode_project_key(""))
    assert caught.code is Code.EMPTY_PROJECT_PATH
    assert caught.message == "cannot encode an empty project path"


@pytest.mark.parametrize(
    ("session_id", "expected"),
    [
        ("a/b", "a~002Fb"),
        ("/etc/passwd", "~002Fetc~002Fpasswd"),
        ("a\u0000b", "a~0000b"),
        ("a~b", "a~007Eb"),
        ("\ud800", "~D800"),
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("...", "..."),
        ("session-1.a_b", "session-1.a_b"),
        ("a\\b", "a~005Cb"),
    ],
)
def test_encode_segment_matches_the_dsh_examples(session_id: str, expected: str) -> None:
    assert encode_segment(session_id) == expected


def test_encode_segment_refuses_an_empty_id() -> None:
    caught = refusal(lambda: encode_segment(""))
    assert caught.code is Code.EMPTY_PATH_SEGMENT
    assert caught.message == "cannot encode an empty path segment"


@given(js_strings)
def test_encode_segment_uses_only_unreserved_path_characters(session_id: str) -> None:
    assert re.fullmatch(r"[A-Za-z0-9._~-]+", encode_segment(session_id))


@given(js_strings)
def test_encode_segment_never_names_the_current_or_parent_directory(session_id: str) -> None:
    assert encode_segment(session_id) not in (".", "..")


def code_units(text: str) -> bytes:
    """A JavaScript string's identity: its UTF-16 code units. A Python string holding a surrogate
    pair's halves as two code points is the same JavaScript string as the one character they
    encode (JSON text cannot tell them apart either)."""
    return text.encode("utf-16-le", "surrogatepass")


@given(js_strings, js_strings)
def test_encode_segment_is_injective(a: str, b: str) -> None:
    if code_units(a) != code_units(b):
        assert encode_segment(a) != encode_segment(b)


def test_a_surrogate_pair_given_as_two_halves_is_the_character_it_encodes() -> None:
    assert encode_segment("\ud800\udc00") == encode_segment("\U00010000") == "~D800~DC00"


@given(js_strings)
def test_encode_segment_is_decodable_back_to_the_same_code_units(session_id: str) -> None:
    encoded = encode_segment(session_id)
    units = bytearray()
    position = 0
    while position < len(encoded):
        if encoded[position] == "~":
            unit, position = int(encoded[position + 1 : position + 5], 16), position + 5
        else:
            unit, position = ord(encoded[position]), position + 1
        units += unit.to_bytes(2, "little")
    assert bytes(units) == code_units(session_id)


@given(js_strings)
def test_project_key_is_a_bounded_safe_directory_name(cwd: str) -> None:
    key = encode_project_key(cwd)
    assert re.fullmatch(r"--[A-Za-z0-9._~-]+--", key)
    assert len(key) <= 255


def v4_header(session_id: str, **more: JsonValue) -> JsonObject:
    return {"version": 4, "id": session_id, "createdAt": 1, **more, "delegationDepth": 0, "isSeeded": False}


def test_session_relpath_places_a_compressed_v4_log_under_its_project_and_session_dirs() -> None:
    header = v4_header("a/b", cwd="/work")
    assert derive_session_relpath(header, compressed=True) == ("--work--", "a~002Fb", V4_ZSTD_NAME)


def test_session_relpath_without_a_cwd_uses_the_no_cwd_dir_and_the_plain_name() -> None:
    assert derive_session_relpath(v4_header("s1"), compressed=False) == (NO_CWD_DIR, "s1", V4_PLAIN_NAME)
    assert (NO_CWD_DIR, V4_ZSTD_NAME, V4_PLAIN_NAME) == (
        "_no-cwd",
        "session.v4.jsonl.zstd",
        "session.v4.jsonl",
    )


def test_session_relpath_refuses_a_header_whose_id_cannot_name_a_path() -> None:
    assert refusal(lambda: derive_session_relpath(v4_header(""), True)).code is Code.EMPTY_PATH_SEGMENT
