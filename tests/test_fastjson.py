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
from spec.log.json import FrozenDict, FrozenList, freeze_parsed_json, thaw_json

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
    b'{"a":' + b"9" * 400 + b"}",  # past a float's range: float() overflows
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


def write_small_log(tmp_path: Any, compressed: bool) -> None:
    """Session ``s``: a turn with a message, a float and a deep value, written and closed."""
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


@pytest.mark.parametrize("compressed", [True, False])
def test_a_clean_log_loads_the_same_by_the_fast_path_and_by_the_spec_path(
    tmp_path: Any, compressed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_small_log(tmp_path, compressed)
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


@pytest.mark.parametrize("declared", [False, True])
def test_frames_inflated_within_a_hold_are_the_frames_or_nothing_past_it(declared: bool) -> None:
    """``clean_zstd_frames(data, hold)``: the same frames while the plaintext is within ``hold``,
    ``None`` once it would pass it (a frame with or without its content size in its header)."""
    import zstandard

    from spec.format.framing import encode_lines

    if declared:
        compressor = zstandard.ZstdCompressor(write_checksum=True)
        data = b"".join(compressor.compress(encode_lines(part)) for part in ([V0_HEADER], V0_RECORDS))
    else:
        data = v0_bytes(V0_RECORDS, True)
    whole = filestore.clean_zstd_frames(data)
    assert whole is not None and len(whole) == 2
    size = sum(len(plaintext) for _, plaintext in whole)
    assert filestore.clean_zstd_frames(data, size) == whole
    assert filestore.clean_zstd_frames(data, size - 1) is None
    assert filestore.clean_zstd_frames(data, len(whole[0][1]) - 1) is None


def whole_frame_lines(data: bytes) -> filestore.ZstdLines | None:
    """What clean_records cuts from clean_zstd_frames: the header's plaintext and every line."""
    frames = filestore.clean_zstd_frames(data)
    if frames is None or any(not plaintext.endswith(b"\n") for _, plaintext in frames[1:]):
        return None
    return filestore.ZstdLines(frames[0][1], b"".join(text for _, text in frames[1:]).split(b"\n")[:-1])


def test_a_zstd_log_cut_as_it_is_inflated_gives_the_lines_of_its_whole_frames() -> None:
    """``clean_zstd_lines`` inflates a frame a piece at a time and cuts it as it comes (issue 24):
    the same lines as its whole text cut at once, across pieces and frames, with or without a
    declared size, past a skippable frame; ``None`` for an empty frame, a frame whose text does
    not end with a line break, a torn one, or no frame."""
    import random

    import zstandard

    chooser = random.Random(24)
    lines = [
        b'{"seq":%d,"t":"%s"}'
        % (n, chooser.randbytes(chooser.choice([0, 5, 300, 40_000, 100_000])).hex().encode())
        for n in range(60)
    ]
    header = b'{"type":"session"}\n'
    declared = zstandard.ZstdCompressor(level=1, write_checksum=True)
    undeclared = zstandard.ZstdCompressor(level=1, write_content_size=False)
    big = b"".join(line + b"\n" for line in lines[:40])  # a frame of many pieces (compressed: 64 KiB)
    skippable = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"skip"
    data = b"".join(
        [
            declared.compress(header),
            declared.compress(big),
            skippable,
            undeclared.compress(b"".join(line + b"\n" for line in lines[40:])),
        ]
    )
    cut = filestore.clean_zstd_lines(data)
    assert cut is not None and len(declared.compress(big)) > 8 * (1 << 16)
    assert cut == whole_frame_lines(data) == (header, lines)
    assert filestore.clean_zstd_lines(declared.compress(header)) == (header, [])
    for broken in (
        data + declared.compress(b""),  # an empty frame
        data + declared.compress(b'{"seq":60}'),  # no line break at the end
        data + declared.compress(big + b"{"),  # a line begun and never ended, after many pieces
        data[:-3],  # torn
        b"",
    ):
        assert filestore.clean_zstd_lines(broken) is None and whole_frame_lines(broken) is None


def test_a_zstd_log_past_the_one_pass_is_counted_then_still_read_in_bulk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log whose plaintext passes what one pass holds is counted first (the size limit) and
    then read in bulk all the same; past the limit it is refused as before."""
    from reference import logfile

    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(v0_bytes(V0_RECORDS, True))
    monkeypatch.setattr(logfile, "ONE_PASS_BYTES", 10)
    counted: list[int] = []
    count = logfile.check_decompressed_size

    def counting(data: bytes, limit: int, where: str) -> None:
        counted.append(limit)
        count(data, limit, where)

    monkeypatch.setattr(logfile, "check_decompressed_size", counting)
    read = logfile.read_clean_zstd_log(str(path), path.read_bytes(), logfile.ReadLimits())
    assert (
        read is not None
        and len(read.events) == 7
        and counted == [logfile.ReadLimits().max_decompressed_bytes]
    )
    with pytest.raises(logfile.InputError) as refused:
        logfile.read_clean_zstd_log(
            str(path), path.read_bytes(), logfile.ReadLimits(max_decompressed_bytes=100)
        )
    assert refused.value.code is logfile.InputCode.DECOMPRESSED_TOO_LARGE


def test_a_v0_log_read_only_to_be_checked_gives_the_same_events_unfrozen(tmp_path: Path) -> None:
    """``dsh-session check`` reads a v0 log's events unfrozen (it hands none out, issue 24): the
    same events as the frozen reading, those the bulk parser gave left plain, and the same findings."""
    from reference import logfile
    from reference.checking import check_log_file
    from spec.checks.log import check_log

    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(v0_bytes(V0_RECORDS, True))
    frozen = logfile.read_log_file(str(path))
    checked = logfile.read_log_file(str(path), checked_only=True)
    assert same_json(thaw_json(list(checked.events)), thaw_json(list(frozen.events)))
    assert len(checked.events) == 7
    assert all(type(event) is FrozenDict for event in frozen.events)
    assert type(checked.events[2]) is dict and type(checked.events[1]["data"]) is dict
    found = check_log_file(str(path))
    assert found.error is None
    assert found.violations + found.legacy == check_log(frozen.events, frozen.log.header, format_version=0)


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


def test_the_fast_writer_writes_a_float_by_orjson_only_where_both_write_it_alike() -> None:
    from spec.format.framing import encode_lines

    alike: list[Any] = [{"a": 0.5, "b": [1.25, {"c": -3.75}]}, 123456.789]
    unlike: list[Any] = [{"a": 0.5, "b": [2.5e-5]}, {"small": 3.5e-6}, 1e-7]
    for record in alike + unlike:
        assert fastjson.encode_lines([record]) == encode_lines([record])
    batch: list[Any] = [{"k": "v"}, *alike, *unlike, {"s": "\ud800", "f": 1e-7}, {"k": "e-"}]
    assert fastjson.encode_lines(batch) == encode_lines(batch)  # one batch: only its unlike lines differ
    spec_lines = [encode_json_text(record).encode() for record in unlike]
    orjson_lines = [fastjson._orjson.dumps(record) for record in unlike] if fastjson._orjson else []
    assert all(mine != theirs for mine, theirs in zip(spec_lines, orjson_lines))  # each case tells


@given(number=st.floats(allow_nan=False, allow_infinity=False) | st.floats(min_value=-1e-3, max_value=1e-3))
def test_orjson_writes_a_float_otherwise_only_below_1e_4_as_0_0000_or_a_negative_exponent(
    number: float,
) -> None:
    """The rule the fast writer's float filter rests on: where orjson's text of a float differs
    from the spec encoder's, it holds ``e-`` or ``0.0000``."""
    if fastjson._orjson is None:
        pytest.skip("orjson is not installed")
    text = fastjson._orjson.dumps(number)
    assert text == encode_json_text(number).encode() or b"e-" in text or b"0.0000" in text


def test_a_record_whose_text_only_looks_like_a_small_float_is_still_written_by_orjson() -> None:
    from spec.format.framing import encode_lines

    records: list[Any] = [{"text": "re-use 0.00001 1e-7", "n": 1.5}, {"n": 1e-5, "s": "e-"}]
    assert fastjson.encode_lines(records) == encode_lines(records)


def thawed_alike(plain: Any, frozen: Any) -> bool:
    """``plain`` holds ``frozen``'s very values in plain containers (types of numbers alike)."""
    if isinstance(frozen, dict):
        return (
            type(plain) is dict
            and list(plain) == list(frozen)
            and all(thawed_alike(plain[key], frozen[key]) for key in frozen)
        )
    if isinstance(frozen, list):
        return (
            type(plain) is list
            and len(plain) == len(frozen)
            and all(thawed_alike(x, y) for x, y in zip(plain, frozen))
        )
    return same_json(plain, frozen)


@pytest.mark.parametrize("use_orjson", PARSERS)
@pytest.mark.parametrize("line", EDGE_LINES)
def test_an_edge_line_read_unfrozen_has_the_frozen_readings_values(line: bytes, use_orjson: bool) -> None:
    frozen = fastjson.decode_lines([line], use_orjson=use_orjson)
    plain = fastjson.decode_lines([line], use_orjson=use_orjson, frozen=False)
    assert (frozen is None) == (plain is None)
    assert frozen is None or plain is None or thawed_alike(plain[0], frozen[0])


@pytest.mark.parametrize("use_orjson", PARSERS)
@given(value=json_values)
def test_any_line_read_unfrozen_has_the_frozen_readings_values(use_orjson: bool, value: Any) -> None:
    line = encode_json_text(value).encode("utf-8")
    frozen = fastjson.decode_lines([line], use_orjson=use_orjson)
    plain = fastjson.decode_lines([line], use_orjson=use_orjson, frozen=False)
    assert (frozen is None) == (plain is None)
    assert frozen is None or plain is None or thawed_alike(plain[0], frozen[0])


def test_the_numbers_changed_in_a_frozen_reading_are_changed_unfrozen_too() -> None:
    plain = fastjson.decode_lines([b'{"a":[9007199254740993,-0.0,{"z":-0.0}],"b":1}'], frozen=False)
    assert plain is not None
    value: Any = plain[0]
    assert type(value["a"][0]) is float and str(value["a"][1]) == "0.0" and str(value["a"][2]["z"]) == "0.0"
    assert type(value["b"]) is int


@pytest.mark.parametrize("use_orjson", PARSERS)
@pytest.mark.parametrize("depth", [1, 63, 64, 65, 66, 200])
def test_numbers_nested_either_side_of_the_recursion_bound_are_changed_unfrozen_too(
    depth: int, use_orjson: bool
) -> None:
    """settle_numbers recurses up to _RECURSIVE_DEPTH levels and walks deeper containers by a
    stack: a big integer and a -0.0 in a dict and in a list at each depth read as in a frozen
    reading."""
    inner = b'{"n":[9007199254740993,-0.0],"z":-0.0,"k":1}'
    line = b'{"a":' * depth + inner + b"}" * depth
    listed = b"[" * depth + inner + b"]" * depth
    for text in (line, listed):
        frozen = fastjson.decode_lines([text], use_orjson=use_orjson)
        plain = fastjson.decode_lines([text], use_orjson=use_orjson, frozen=False)
        assert frozen is not None and plain is not None
        assert thawed_alike(plain[0], frozen[0])
        value: Any = plain[0]
        for _ in range(depth):
            value = value["a"] if isinstance(value, dict) else value[0]
        assert type(value["n"][0]) is float and str(value["n"][1]) == "0.0" and str(value["z"]) == "0.0"
        assert type(value["k"]) is int


INVALID_UTF8 = [
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xff",
    b"\xf4\x90\x80\x80",
    b"\xe2\x82",
    b"a\x80",
    b"\xf8\x88\x80\x80\x80",
]


@pytest.mark.parametrize("use_orjson", PARSERS)
@pytest.mark.parametrize("bad", INVALID_UTF8)
def test_a_line_of_invalid_utf8_is_left_to_the_spec(bad: bytes, use_orjson: bool) -> None:
    """clean_records leaves the UTF-8 check to the parser: either refuses a line that is not
    UTF-8 (in a string, a key, or outside both), so the spec's reader names the damage."""
    for line in (b'{"a":"' + bad + b'"}', b'{"' + bad + b'":1}', b'{"a":1}' + bad):
        assert fastjson.decode_lines([line], use_orjson=use_orjson) is None
        assert fastjson.decode_lines([line], use_orjson=use_orjson, frozen=False) is None


@pytest.mark.parametrize("use_orjson", PARSERS)
@given(raw=st.binary(min_size=1, max_size=12))
def test_any_string_of_invalid_utf8_is_left_to_the_spec(use_orjson: bool, raw: bytes) -> None:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        assert fastjson.decode_lines([b'{"a":"' + raw + b'"}'], use_orjson=use_orjson) is None


def resumed_v4_session(tmp_path: Any) -> tuple[SessionStore, Any, tuple[Any, ...]]:
    """:func:`write_small_log`'s v4 log, resumed by a new store; with the events the spec's path
    reads from it."""
    write_small_log(tmp_path, compressed=True)
    stored = FileStore(str(tmp_path)).read("s").events
    resumer = SessionStore(FileStore(str(tmp_path)))
    return resumer, resumer.resume("s"), stored


def frozen_all_the_way_down(value: Any) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(frozen_all_the_way_down(child) for child in value.values())
    if isinstance(value, list):
        return type(value) is FrozenList and all(frozen_all_the_way_down(child) for child in value)
    return True


def test_a_resumed_v4_log_is_kept_as_its_lines_and_every_read_is_a_fresh_frozen_event(tmp_path: Any) -> None:
    _, session, stored = resumed_v4_session(tmp_path)
    events = session.events
    assert isinstance(events, fastjson.StoredEvents) and len(events.lines) == len(stored)
    assert events[: len(stored)] == stored and same_json(list(events[: len(stored)]), list(stored))
    assert events[-1]["type"] == "session/end-seed" and events[-1] == events[len(events) - 1]
    first, again = events[2], events[2]
    assert first == again and first is not again  # decoded on each read, never a held object
    assert all(frozen_all_the_way_down(event) for event in events)
    with pytest.raises(TypeError):
        first["data"]["n"].append(3)  # type: ignore[union-attr]
    assert thaw_json(events[2]["data"]) == {"n": [1.5, -2, {"deep": [[]]}], "big": 2**52}
    assert events == tuple(events) and events != tuple(events)[:-1] and events == list(events)


def v0_session(tmp_path: Any, records: list[Any]) -> Path:
    """A store under ``tmp_path`` holding session ``old`` as DSH's v0 log of ``records`` only."""
    store = SessionStore(FileStore(str(tmp_path)))
    store.create("old", meta={"cwd": test_filestore.CWD})
    store.close("old")
    located = FileStore(str(tmp_path)).locate("old")
    assert located is not None
    Path(located).unlink()
    v0_path = Path(located).parent / "session.jsonl.zstd"
    v0_path.write_bytes(v0_bytes(records, True))
    return v0_path


def test_a_v0_log_resumed_on_first_sight_is_kept_as_the_lines_of_its_v4_file(tmp_path: Any) -> None:
    """A v0 log read in bulk is converted unfrozen and kept as the lines the migration writes
    (issue 24): every read is a fresh frozen event, the events are the spec path's reading of the
    v0 log with their closers and end-seed, and the lines are the v4 file's records."""
    v0_path = v0_session(tmp_path, V0_RECORDS)
    slow = load_log("old", v0_path.read_bytes(), True, v0_path.name)
    session = SessionStore(FileStore(str(tmp_path))).resume("old")
    events = session.events
    assert isinstance(events, fastjson.StoredEvents) and len(events.lines) > len(slow.events)
    assert len(events) == len(events.lines) + 1  # the closers are written too, the end-seed after
    assert same_json(list(events[: len(slow.events)]), list(slow.events))
    assert events[-1]["type"] == "session/end-seed"
    first, again = events[6], events[6]
    assert first == again and first is not again and frozen_all_the_way_down(first)
    assert all(frozen_all_the_way_down(event) for event in events)
    written = FileStore(str(tmp_path)).read("old")
    lines = len(events.lines)
    assert written.format_version == 4 and same_json(list(written.events)[:lines], list(events)[:lines])


SMALL = [1e-5, -3e-7, 9.9e-5, 0.5, 1e-4, 0.0]  # the first three are written otherwise by orjson


def test_a_v0_log_holding_small_floats_migrates_to_the_spec_encoders_lines(tmp_path: Any) -> None:
    """The migration's encoding skips the search for floats orjson writes otherwise only when
    the read met none (issue 24); with some, every line is still the spec encoder's."""
    records = [
        *V0_RECORDS[:-1],
        {"type": "x/y", "seq": 6, "time": 16, "data": {"n": SMALL}, "ignorable": True},
    ]
    v0_session(tmp_path, records)
    store = SessionStore(FileStore(str(tmp_path)))
    store.resume("old")
    store.close("old")
    located = FileStore(str(tmp_path)).locate("old")
    assert located is not None and located.endswith(".v4.jsonl.zstd")
    frames = filestore.clean_zstd_frames(Path(located).read_bytes())
    assert frames is not None
    lines = b"".join(plaintext for _, plaintext in frames[1:]).split(b"\n")[:-1]
    assert any(b"1e-05" in line for line in lines)
    assert all(line == encode_json_text(decode_json_text(line)).encode() for line in lines)


@pytest.mark.parametrize("use_orjson", PARSERS)
@pytest.mark.parametrize("frozen", [True, False])
def test_the_floats_orjson_may_write_otherwise_are_met_by_the_read(use_orjson: bool, frozen: bool) -> None:
    met: list[float] = []
    lines = [b'{"a":[' + b",".join(encode_json_text(x).encode() for x in SMALL) + b'],"b":-2e-6}', b"7e-6"]
    assert fastjson.decode_lines(lines, use_orjson, frozen, met) is not None
    assert sorted(met) == sorted([*SMALL[:3], -2e-6, 7e-6])
    assert fastjson.encode_lines([{"a": 1.5}], ()) == b'{"a":1.5}\n'


def test_a_snapshot_of_a_resumed_log_never_grows_and_appends_go_on_after_the_lines(tmp_path: Any) -> None:
    store, session, stored = resumed_v4_session(tmp_path)
    before = session.events
    appended = session.append("turn/start", {"turn": 2})
    assert len(before) == len(stored) + 1 and len(session.events) == len(before) + 1
    assert session.events[-1] is appended and session.events[:-1] == before
    with pytest.raises(IndexError):
        before[len(before)]
    store.close("s")
    again = SessionStore(FileStore(str(tmp_path))).resume("s")
    assert again.events[: len(session.events)] == session.events


def test_a_handle_opened_on_a_v4_log_hands_out_frozen_events_only(tmp_path: Any) -> None:
    resumed_v4_session(tmp_path)[0].close("s")
    handle = FileStore(str(tmp_path)).open("s")
    try:
        assert all(frozen_all_the_way_down(event) for event in handle.read())
    finally:
        handle.close()


def test_every_run_of_a_resumed_log_reads_as_its_events_one_by_one(tmp_path: Any) -> None:
    store, session, _ = resumed_v4_session(tmp_path)
    for turn in range(2, 4):
        session.append("turn/start", {"turn": turn})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    events = session.events
    one_by_one = [events[index] for index in range(len(events))]
    lines = len(events.lines)  # type: ignore[attr-defined]
    for start in range(len(events) + 1):
        for stop in (*range(start, len(events) + 2), lines - 1, -1):
            assert list(events[start:stop]) == one_by_one[start:stop]
    assert list(events) == one_by_one and events[::2] == tuple(one_by_one[::2])
    child = store.fork(session, child_id="child")
    assert child.events[: len(events)] == tuple(one_by_one)


@pytest.mark.parametrize(
    "batch", [pytest.param(filestore.DEFAULT_BATCH_POLICY, id="batched"), pytest.param(None, id="unbatched")]
)
@pytest.mark.parametrize("boundary", [None, 3])
def test_a_fork_of_a_session_kept_as_lines_keeps_its_parents_lines_in_child_and_handle(
    tmp_path: Any, batch: Any, boundary: int | None
) -> None:
    """Issue 24 (fork memory): the child of a resumed session keeps the parent's very line objects
    for its seed, not the events decoded from them; it hands out fresh frozen events equal to the
    parent's, its file reads back the same events whether the first flush came at the append (a
    byte bound) or later (the pending events decoded again), and it goes on growing and forking."""
    write_small_log(tmp_path, compressed=True)
    store = SessionStore(FileStore(str(tmp_path), batch=batch))
    parent = store.resume("s")
    lines = parent.events.lines  # type: ignore[attr-defined]
    child = (
        store.fork(parent, child_id="child") if boundary is None else store.fork(parent, boundary, "child")
    )
    seed = len(parent.events) if boundary is None else boundary + 1
    events = child.events
    assert isinstance(events, fastjson.StoredEvents) and len(events.lines) == min(seed, len(lines))
    assert all(mine is theirs for mine, theirs in zip(events.lines, lines))
    assert events[:seed] == parent.events[:seed] and all(frozen_all_the_way_down(event) for event in events)
    handle = store._handles["child"]
    assert isinstance(handle._events, fastjson.StoredEvents) and handle._events.lines is events.lines  # type: ignore[attr-defined]
    child.append("turn/start", {"turn": 9})
    child.append("turn/end", {"turn": 9, "reason": {"kind": "completed"}})
    grandchild = store.fork(child, child_id="grandchild")
    expected = child.events
    store.close_all()
    for session_id, want in (("child", expected), ("grandchild", expected)):
        again = SessionStore(FileStore(str(tmp_path))).resume(session_id)
        assert again.events[: len(want)] == want
    assert grandchild.events[: len(expected)] == expected


def test_released_values_are_freed_first_to_last() -> None:
    """``release_in_order``: each item is let go in list order, freed then when nothing else
    holds it (a resume's judged events, issue 24); one held elsewhere lives on."""
    freed: list[int] = []

    class Noted:
        def __init__(self, number: int) -> None:
            self.number = number

        def __del__(self) -> None:
            freed.append(self.number)

    values: list[Any] = [Noted(number) for number in range(5)]
    kept = values[3]
    fastjson.release_in_order(values)
    assert values == [] and freed == [0, 1, 2, 4] and kept.number == 3


@pytest.mark.parametrize("use_orjson", PARSERS)
@pytest.mark.parametrize("frozen", [True, False])
def test_numbered_lines_are_objects_whose_seq_is_their_place(use_orjson: bool, frozen: bool) -> None:
    """``decode_lines(..., numbered=True)`` (a v4 log's records, issue 24): every parser path
    refuses a record that is not an object whose seq is the int of its place."""
    good = [b'{"seq":0}', b'{"seq":1,"data":[1.5]}']
    assert fastjson.decode_lines(good, use_orjson, frozen, numbered=True) is not None
    for bad in (b'{"seq":2}', b'{"seq":1.0}', b'{"seq":true}', b"[1]", b"1", b'{"n":1}'):
        assert fastjson.decode_lines([good[0], bad], use_orjson, frozen, numbered=True) is None
        assert fastjson.decode_lines([good[0], bad], use_orjson, frozen) is not None


def _hard_literals() -> list[str]:
    """Number literals at and past the magnitude guard's bound (2**64) that are hardest to round:
    each integer halfway between two adjacent doubles (a tie, rounded to the even one), one
    either side of it, the halfway point followed by a fraction that decides it upward 40 digits
    on, the same digits in exponent form, and every integer within 300 of +-2**64 and 2**63."""
    literals = []
    for bits in (63, 64, 65, 70, 100, 200, 400, 700, 1000, 1023):
        for mantissa in (2**52, 2**52 + 1, 2**53 - 1, 3 * 2**51 + 12345):
            ulp = 1 << (bits - 52)
            half = (mantissa << (bits - 52)) + ulp // 2
            text = str(half)
            for literal in (
                text,
                str(half - 1),
                str(half + 1),
                f"{text}.{'0' * 40}1",
                f"{text[0]}.{text[1:]}e{len(text) - 1}",
            ):
                literals += [literal, f"-{literal}"]
    for base in (2**63, 2**64):
        for near in range(base - 300, base + 301):
            literals += [str(near), f"-{near}"]
    return literals


def test_orjson_reads_every_literal_past_the_magnitude_guard_as_the_spec_reads_it() -> None:
    """The guard that sends a float of magnitude 2**64 or more to the spec's reader
    (``_UNSURE_MAGNITUDE``) only chooses between two readers of the same literal: orjson, whose
    reader rounds an integer that fits no 64-bit integer to the nearest double as it rounds every
    other literal (yyjson's documented default), and the spec's ``float()``. Here they agree on the
    ties and near-ties past the bound, so the guard's mutants are equivalent (docs/choices.md,
    mutpl9); an orjson that rounded otherwise fails this test, and the guard is then needed."""
    import orjson

    refused = 0
    for literal in _hard_literals():
        try:
            spec = decode_json_text(literal)
        except ValueError:  # past the largest double: both readers refuse it
            refused += 1
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(literal)
            continue
        assert type(spec) is float and float(orjson.loads(literal)) == spec, literal
    assert refused == 8  # the tie above the largest double and the three literals past it, either sign
