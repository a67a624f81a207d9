"""The bulk reader gives exactly what the spec's reader gives, or steps aside (issue 14, D5, D6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import test_filestore
from hypothesis import given
from hypothesis import strategies as st

from reference.persistence import fastjson, filestore
from reference.persistence.filestore import FileStore, load_clean_log, load_log
from reference.store import SessionStore
from spec.format.json_text import decode_json_text, encode_json_text
from spec.log.json import FrozenDict, FrozenList, freeze_parsed_json

PARSERS = [pytest.param(True, id="orjson"), pytest.param(False, id="stdlib")]


def same_json(a: Any, b: Any) -> bool:
    """Equal values of equal types all the way down (``1`` and ``1.0`` differ), frozen alike."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_json(a[key], b[key]) for key in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    return bool(a == b)


def exact(line: bytes) -> Any:
    return freeze_parsed_json(decode_json_text(line.decode("utf-8")))


EDGE_LINES = [
    b'{"a":-0}',
    b'{"a":-0.0,"b":[-0.0,0e5,-0E1]}',
    b'{"a":1e400}',
    b'{"a":-1e400}',
    b'{"a":9007199254740991,"b":9007199254740992,"c":-9007199254740993}',
    b'{"a":12345678901234567890123}',
    b'{"a":18446744073709551616}',
    b'{"a":NaN}',
    b'{"a":Infinity}',
    b'{"a":"\\ud800"}',
    b'{"a":"x\\ty","b":"\\u00e9\\ud83d\\ude00"}',
    b'{"a":1,"a":2}',
    b' {"a":[[1,[2.5,[]]],{}]} ',
    b'[1,2,{"x":[3]}]',
    b'"text"',
    b"17",
    b"-0.0",
    b"null",
    b'{"a":5e-324,"b":1.7976931348623157e308,"c":0.1}',
    b'{"a":1}x',
    b"[" * 2000 + b"]" * 2000,
]


@pytest.mark.parametrize("use_orjson", PARSERS)
@pytest.mark.parametrize("line", EDGE_LINES)
def test_an_edge_case_line_reads_as_the_spec_reads_it_or_is_left_to_the_spec(
    line: bytes, use_orjson: bool
) -> None:
    fast = fastjson.decode_lines([line], use_orjson=use_orjson)
    try:
        expected = exact(line)
    except ValueError:
        assert fast is None  # refused by the spec, so never accepted here
        return
    assert fast is None or same_json(fast[0], expected)


def test_the_numbers_a_javascript_reader_changes_are_changed_here_too() -> None:
    fast = fastjson.decode_lines([b'{"big":9007199254740993,"zero":-0.0,"n":[-0.0]}'], use_orjson=False)
    assert fast is not None
    value = fast[0]
    assert isinstance(value, dict)
    assert type(value["big"]) is float and value["big"] == 9007199254740992.0
    assert isinstance(value["n"], list)
    assert str(value["zero"]) == "0.0" and str(value["n"][0]) == "0.0"


@pytest.mark.parametrize("use_orjson", PARSERS)
def test_what_the_bulk_reader_hands_out_is_frozen_all_the_way_down(use_orjson: bool) -> None:
    fast = fastjson.decode_lines([b'{"a":[{"b":[1,[2]]}],"c":{"d":{}}}'], use_orjson=use_orjson)
    assert fast is not None
    value: Any = fast[0]
    for container in (
        value,
        value["a"],
        value["a"][0],
        value["a"][0]["b"],
        value["a"][0]["b"][1],
        value["c"],
    ):
        assert type(container) in (FrozenDict, FrozenList)
    with pytest.raises(TypeError):
        value["a"][0]["b"].append(3)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize("use_orjson", PARSERS)
@given(value=json_values)
def test_any_line_the_writer_writes_reads_back_as_the_spec_reads_it(use_orjson: bool, value: Any) -> None:
    line = encode_json_text(value).encode("utf-8")
    fast = fastjson.decode_lines([line], use_orjson=use_orjson)
    assert fast is None or same_json(fast[0], exact(line))


@pytest.mark.parametrize("compressed", [True, False])
def test_a_clean_log_loads_the_same_by_the_fast_path_and_by_the_spec_path(
    tmp_path: Any, compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = SessionStore(FileStore(str(tmp_path), compressed=compressed))
    session = store.create("s", meta={"cwd": "/w"})
    session.append("turn/start", {"turn": 1})
    message = {
        "id": "u1",
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": "é"}],
    }
    session.append("user/message", message, "append")
    session.append("x/y", {"n": [1.5, -2, {"deep": [[]]}], "big": 2**52})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close("s")
    path = FileStore(str(tmp_path), compressed=compressed).locate("s")
    assert path is not None
    data = Path(path).read_bytes()
    fast = load_clean_log("s", data, compressed)
    assert fast is not None
    monkeypatch.setattr(filestore, "load_clean_log", lambda *_: None)
    slow = load_log("s", data, compressed)
    assert same_json(list(fast.events), list(slow.events)) and same_json(fast.header, slow.header)
    assert (fast.format_version, fast.recovered, fast.truncate_to) == (
        slow.format_version,
        slow.recovered,
        slow.truncate_to,
    )


def test_a_torn_log_is_left_to_the_spec_path(tmp_path: Any) -> None:
    store = SessionStore(FileStore(str(tmp_path), compressed=False))
    session = store.create("s", meta={"cwd": "/w"})
    session.append("turn/start", {"turn": 1})
    store.close("s")
    path = FileStore(str(tmp_path), compressed=False).locate("s")
    assert path is not None
    data = Path(path).read_bytes()
    assert load_clean_log("s", data + b'{"type":"x"', False) is None
    assert load_clean_log("s", data + b"\xff\n", False) is None
    assert load_clean_log("s", data, False) is not None


# DSH v0 records test_filestore also reads, and a record with non-ASCII text, a -0 and a big int
V0_RECORDS: list[Any] = [
    *test_filestore.V0_RECORDS,
    {"type": "x/y", "seq": 6, "time": 16, "data": {"n": [1.5, -0.0, 2**60], "t": "hé"}, "ignorable": True},
]
V0_HEADER = test_filestore.V0_HEADER


def v0_bytes(records: list[Any], compressed: bool) -> bytes:
    """A v0 log as DSH writes it: compressed, a frame for the header and one per batch, each
    frame's header without its content size (DSH's node:zlib stream leaves it out)."""
    import zstandard

    from spec.format.framing import encode_lines

    if compressed:
        compressor = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False)
        frames = [compressor.compressobj() for _ in range(2)]
        texts = [encode_lines([V0_HEADER]), encode_lines(records)]
        return b"".join(frame.compress(text) + frame.flush() for frame, text in zip(frames, texts))
    return encode_lines([V0_HEADER, *records])


@pytest.mark.parametrize("compressed", [True, False])
def test_a_clean_v0_log_read_in_bulk_gives_what_the_spec_path_gives(
    compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DSH's v0 log through the bulk path: rows expanded, conversions made, values as the spec's."""
    data = v0_bytes(V0_RECORDS, compressed)
    name = "session.jsonl.zstd" if compressed else "session.jsonl"
    fast = load_clean_log("old", data, compressed, name)
    assert fast is not None and fast.format_version == 0
    monkeypatch.setattr(filestore, "load_clean_log", lambda *_: None)
    slow = load_log("old", data, compressed, name)
    assert same_json(list(fast.events), list(slow.events)) and same_json(fast.header, slow.header)
    assert len(fast.events) == 7 and fast.events[1]["data"]["id"] == "legacy-message:old:1"


@pytest.mark.parametrize(
    ("records", "code"),
    [
        ([{"type": "mode/set", "seq": 0, "time": 1, "data": {}}], "LEGACY_MODE_SET"),
        ([{"type": "plugin/thing", "seq": 0, "time": 1, "data": None}], "UNKNOWN_EVENT_TYPE"),
        ([{"type": "turn/start", "seq": 1, "time": 1, "data": {"turn": 1}}], "CORRUPT_LOG"),
    ],
)
def test_a_v0_log_the_spec_refuses_is_left_to_the_spec_path_which_names_its_line(
    records: list[Any], code: str
) -> None:
    """The bulk path steps aside, so the refusal (its code and the record's line) is the spec's."""
    data = v0_bytes(records, False)
    assert load_clean_log("old", data, False, "session.jsonl") is None
    with pytest.raises(Exception) as refused:
        load_log("old", data, False, "session.jsonl")
    assert getattr(refused.value, "code", None) == code and "line 2" in str(refused.value)


def test_a_v0_log_under_a_v4_name_is_refused_as_the_spec_path_refuses_it() -> None:
    data = v0_bytes(V0_RECORDS, False)
    assert load_clean_log("old", data, False, "session.v4.jsonl") is None


@pytest.mark.parametrize("version", [0, 4])
def test_a_clean_zstd_log_file_read_in_bulk_is_the_file_the_spec_reader_gives(
    version: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dsh-session's reader (check, explain): the same form, events and places of every event
    (a packed v0 row gives each of its events its line), so a violation is placed as before."""
    from reference import logfile

    if version == 0:
        path = tmp_path / "session.jsonl.zstd"
        path.write_bytes(v0_bytes(V0_RECORDS, True))
    else:
        store = SessionStore(FileStore(str(tmp_path)))
        session = store.create("s", meta={"cwd": "/w"})
        session.append("turn/start", {"turn": 1})
        session.flush()
        session.append("x/y", {"n": [1.5, -2, "é"]})
        store.close("s")
        located = FileStore(str(tmp_path)).locate("s")
        assert located is not None
        path = Path(located)
    fast = logfile.read_log_file(str(path))
    assert logfile.read_clean_zstd_log(str(path), path.read_bytes(), logfile.ReadLimits()) is not None
    monkeypatch.setattr(logfile, "read_clean_zstd_log", lambda *_: None)
    slow = logfile.read_log_file(str(path))
    assert (fast.form, fast.places, fast.torn_place) == (slow.form, slow.places, slow.torn_place)
    assert same_json(list(fast.events), list(slow.events)) and same_json(fast.log.header, slow.log.header)
    assert fast.log.format_version == slow.log.format_version == version


encoded_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),  # control characters, non-ASCII, lone surrogates
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=24,
)


@given(records=st.lists(encoded_values, max_size=5), frozen=st.booleans())
def test_the_fast_writer_writes_the_spec_encoders_very_bytes(records: list[Any], frozen: bool) -> None:
    """orjson where a record holds no float, the spec's encoder elsewhere: byte for byte the same."""
    from spec.format.framing import encode_lines

    if frozen:
        records = [freeze_parsed_json(record) for record in records]
    assert fastjson.encode_lines(records) == encode_lines(records)


def test_the_fast_writer_leaves_floats_and_deep_values_to_the_spec_encoder() -> None:
    from spec.format.framing import encode_lines

    deep: Any = 1
    for _ in range(400):
        deep = [deep]
    records: list[Any] = [{"a": 1e16, "b": [1.5e-7]}, deep, {"s": "\ud800"}, 2**65, -0.0]
    assert fastjson.encode_lines(records) == encode_lines(records)
