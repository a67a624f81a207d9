"""Reading strace's output: lines into calls, calls under the store root into the models' calls,
and the moments the subject answered."""

from __future__ import annotations

import pytest

from conformance.trace.calls import TraceLog, derive_trace_log
from conformance.trace.persistence import (
    ROOT,
    Create,
    Entry,
    Inert,
    Rename,
    Sync,
    Tree,
    Truncate,
    Unlink,
    Write,
)
from conformance.trace.strace import TraceUnreadable, decode_iovec, parse_strace, split_call_text

ROOT_DIR = "/store"
PIPE = 4711


def hx(data: bytes | str) -> str:
    """What strace -xx prints for these bytes."""
    raw = data.encode() if isinstance(data, str) else data
    return "".join(f"\\x{byte:02x}" for byte in raw)


def fd(number: int, path: str) -> str:
    return f"{number}<{hx(path)}>"


def pipe(number: int = 1) -> str:
    return f"{number}<pipe:[{PIPE}]>"


def log_of(lines: list[str], initial: Tree | None = None) -> TraceLog:
    return derive_trace_log(parse_strace(lines), ROOT_DIR, "/work", PIPE, initial or Tree(()))


def test_a_call_interrupted_by_another_thread_is_joined_and_keeps_its_entry_and_exit_lines() -> None:
    calls = parse_strace(
        [
            f'10 write({pipe()}, "{hx("ok")}", 2 <unfinished ...>\n',
            f"11 fsync({fd(3, '/store/a')}) = 0\n",
            "10 <... write resumed>) = 2\n",
        ]
    )
    assert [(call.name, call.entry, call.exit) for call in calls] == [("fsync", 1, 1), ("write", 0, 2)]
    assert calls[1].args == (pipe(), f'"{hx("ok")}"', "2") and calls[1].value == 2


def test_arguments_split_at_top_level_commas_only() -> None:
    args, result = split_call_text(
        f'3<UNIX-STREAM:[1->2]>, [{{iov_base="{hx("a,b")}", iov_len=3}}], 1) = 3', 0
    )
    assert args == ("3<UNIX-STREAM:[1->2]>", f'[{{iov_base="{hx("a,b")}", iov_len=3}}]', "1")
    assert result == "3"
    assert decode_iovec(args[1]) == b"a,b"
    with pytest.raises(TraceUnreadable):
        split_call_text('3, "\\x61"', 5)


def test_an_append_lands_at_the_size_and_a_plain_write_at_the_offset() -> None:
    log = log_of(
        [
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/store/a")}", O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC, 0600) = {fd(3, "/store/a")}\n',
            f'1 write({fd(3, "/store/a")}, "{hx("hello")}", 5) = 5\n',
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("a")}", O_RDWR|O_CLOEXEC) = {fd(4, "/store/a")}\n',
            "1 read(0x4, 0x7f00, 0x2) = 0x2\n",
            f'1 write({fd(4, "/store/a")}, "{hx("XY")}", 2) = 2\n',
            f"1 lseek({fd(4, '/store/a')}, 0, SEEK_SET) = 0\n",
            f'1 pwrite64({fd(4, "/store/a")}, "{hx("Z")}", 1, 9) = 1\n',
            f'1 write({fd(4, "/store/a")}, "{hx("Q")}", 1) = 1\n',
        ]
    )
    assert [call.op for call in log.calls] == [
        Create(ROOT, "a", 1),
        Write(1, 0, b"hello"),
        Write(1, 2, b"XY"),
        Write(1, 9, b"Z"),
        Write(1, 0, b"Q"),
    ]
    assert log.unmodelled == ()


def test_a_descriptor_keeps_its_file_across_a_rename_and_an_unlink_is_an_entry_change() -> None:
    initial = Tree((Entry("d", True, b"", 1), Entry("d/t", False, b"", 2)))
    log = log_of(
        [
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/store/d/t")}", O_WRONLY|O_TRUNC) = {fd(3, "/store/d/t")}\n',
            f'1 rename("{hx("/store/d/t")}", "{hx("/store/d/log")}") = 0\n',
            f'1 write({fd(3, "/store/d/log")}, "{hx("x")}", 1) = 1\n',
            f"1 fdatasync({fd(3, '/store/d/log')}) = 0\n",
            f"1 close({fd(3, '/store/d/log')}) = 0\n",
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/store/d")}", O_RDONLY|O_DIRECTORY) = {fd(5, "/store/d")}\n',
            f'1 unlinkat({fd(5, "/store/d")}, "{hx("log")}", 0) = 0\n',
            f"1 fsync({fd(5, '/store/d')}) = 0\n",
            f'1 unlink("{hx("/elsewhere/x")}") = 0\n',
        ],
        initial,
    )
    assert [call.op for call in log.calls] == [
        Rename(1, "t", 1, "log"),
        Write(2, 0, b"x"),
        Sync(2),
        Inert("close"),
        Unlink(1, "log"),
        Sync(1),
    ]


def test_an_open_with_o_trunc_of_a_file_holding_bytes_is_a_truncate() -> None:
    initial = Tree((Entry("a", False, b"abc", 1),))
    log = log_of(
        [f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/store/a")}", O_WRONLY|O_TRUNC) = {fd(3, "/store/a")}\n'],
        initial,
    )
    assert [call.op for call in log.calls] == [Truncate(1, 0)]


def test_a_response_counts_from_the_start_of_its_write_so_a_call_ending_later_does_not_cover_it() -> None:
    log = log_of(
        [
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/store/a")}", O_WRONLY|O_CREAT, 0600) = {fd(3, "/store/a")}\n',
            f'1 write({pipe()}, "{hx("{}" + chr(10))}", 3 <unfinished ...>\n',
            f"2 fsync({fd(3, '/store/a')}) = 0\n",
            "1 <... write resumed>) = 3\n",
            f'1 writev({pipe()}, [{{iov_base="{hx("{}")}", iov_len=2}}, {{iov_base="{hx(chr(10) + "{}" + chr(10))}", iov_len=4}}], 2) = 6\n',
        ]
    )
    assert [call.op for call in log.calls] == [Create(ROOT, "a", 1), Sync(1)]
    assert log.acks == (1, 2, 2)


def test_calls_outside_the_root_and_failed_calls_are_left_out() -> None:
    log = log_of(
        [
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/etc/passwd")}", O_RDONLY) = {fd(3, "/etc/passwd")}\n',
            f'1 write({fd(3, "/etc/passwd")}, "{hx("x")}", 1) = 1\n',
            f'1 mkdir("{hx("/store/d")}", 0700) = -1 EEXIST (File exists)\n',
            f'1 write(2<{hx("/dev/pts/0")}>, "{hx("log")}", 3) = 3\n',
        ]
    )
    assert log.calls == () and log.acks == ()


def test_a_call_no_model_covers_under_the_root_is_reported_not_guessed() -> None:
    log = log_of(
        [
            f'1 openat(AT_FDCWD<{hx("/work")}>, "{hx("/store/a")}", O_WRONLY|O_CREAT, 0600) = {fd(3, "/store/a")}\n',
            f"1 fallocate({fd(3, '/store/a')}, 0, 0, 4096) = 0\n",
            f'1 write({fd(3, "/store/a")}, "{hx("abc")}"..., 300) = 300\n',
        ]
    )
    assert len(log.unmodelled) == 2
    assert "fallocate" in log.unmodelled[0] and "not printed whole" in log.unmodelled[1]
