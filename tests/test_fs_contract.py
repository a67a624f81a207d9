"""The FileSystem contract outside of crashes: RealFileSystem and PowerLossFileSystem behave alike."""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

import pytest

from reference.persistence.fs import FileSystem, RealFileSystem
from reference.persistence.powerloss import PowerLossFileSystem


@pytest.fixture(params=["real", "powerloss"])
def fs_root(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[FileSystem, str]]:
    if request.param == "real":
        yield RealFileSystem(), str(tmp_path)
    else:
        fs = PowerLossFileSystem()
        fs.makedirs("/data")
        yield fs, "/data"


@pytest.fixture
def fs(fs_root: tuple[FileSystem, str]) -> FileSystem:
    return fs_root[0]


@pytest.fixture
def root(fs_root: tuple[FileSystem, str]) -> str:
    return fs_root[1]


# --- reading and creating ---
def test_write_new_creates_a_file_that_reads_back(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/a", b"hello")
    assert fs.read_bytes(f"{root}/a") == b"hello"


def test_write_new_of_an_existing_name_raises_file_exists(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/a", b"first")
    with pytest.raises(FileExistsError):
        fs.write_new(f"{root}/a", b"second")
    assert fs.read_bytes(f"{root}/a") == b"first"


def test_errors_carry_errno_and_filename(fs: FileSystem, root: str) -> None:
    with pytest.raises(FileNotFoundError) as caught:
        fs.read_bytes(f"{root}/nothing")
    assert caught.value.errno == errno.ENOENT
    assert caught.value.filename == f"{root}/nothing"


def test_size_is_the_number_of_bytes_in_the_file(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/a", b"12345")
    assert fs.size(f"{root}/a") == 5


def test_exists_and_is_dir_tell_files_directories_and_missing_names_apart(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/file", b"")
    fs.makedirs(f"{root}/dir")
    assert (fs.exists(f"{root}/file"), fs.is_dir(f"{root}/file")) == (True, False)
    assert (fs.exists(f"{root}/dir"), fs.is_dir(f"{root}/dir")) == (True, True)
    assert (fs.exists(f"{root}/none"), fs.is_dir(f"{root}/none")) == (False, False)


def test_a_path_through_a_file_does_not_exist(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/file", b"")
    assert not fs.exists(f"{root}/file/inner")


def test_listdir_returns_the_names_sorted(fs: FileSystem, root: str) -> None:
    for name in ["b", "a", "c"]:
        fs.write_new(f"{root}/{name}", b"")
    fs.makedirs(f"{root}/d")
    assert fs.listdir(root) == ["a", "b", "c", "d"]


# --- directories ---
def test_makedirs_creates_every_missing_level(fs: FileSystem, root: str) -> None:
    fs.makedirs(f"{root}/a/b/c")
    assert fs.is_dir(f"{root}/a/b/c")


def test_makedirs_of_an_existing_directory_is_fine(fs: FileSystem, root: str) -> None:
    fs.makedirs(f"{root}/a")
    fs.write_new(f"{root}/a/f", b"kept")
    fs.makedirs(f"{root}/a")
    assert fs.read_bytes(f"{root}/a/f") == b"kept"


# --- appending and truncating ---
def test_append_adds_bytes_at_the_end(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/log", b"one\n")
    fs.append(f"{root}/log", b"two\n")
    assert fs.read_bytes(f"{root}/log") == b"one\ntwo\n"


def test_append_to_a_missing_file_raises_file_not_found_and_creates_nothing(
    fs: FileSystem, root: str
) -> None:
    with pytest.raises(FileNotFoundError):
        fs.append(f"{root}/log", b"x")
    assert not fs.exists(f"{root}/log")


def test_truncate_cuts_the_file(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/log", b"complete\ntorn")
    fs.truncate(f"{root}/log", 9)
    assert fs.read_bytes(f"{root}/log") == b"complete\n"


def test_truncate_past_the_end_extends_with_zero_bytes(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/log", b"ab")
    fs.truncate(f"{root}/log", 4)
    assert fs.read_bytes(f"{root}/log") == b"ab\0\0"


def test_append_after_truncate_continues_at_the_new_end(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/log", b"abcdef")
    fs.truncate(f"{root}/log", 2)
    fs.append(f"{root}/log", b"XY")
    assert fs.read_bytes(f"{root}/log") == b"abXY"


# --- durability barriers ---
def test_fsync_of_a_file_leaves_its_content_as_it_was(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/a", b"data")
    fs.fsync(f"{root}/a")
    fs.fsync_dir(root)
    assert fs.read_bytes(f"{root}/a") == b"data"


# --- names ---
def test_rename_moves_the_file(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/tmp", b"data")
    fs.rename(f"{root}/tmp", f"{root}/final")
    assert fs.listdir(root) == ["final"]
    assert fs.read_bytes(f"{root}/final") == b"data"


def test_rename_replaces_an_existing_file(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/final", b"old")
    fs.write_new(f"{root}/tmp", b"new")
    fs.rename(f"{root}/tmp", f"{root}/final")
    assert fs.read_bytes(f"{root}/final") == b"new"
    assert fs.listdir(root) == ["final"]


def test_rename_onto_another_name_of_the_same_file_keeps_both_names(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/tmp", b"data")
    fs.link(f"{root}/tmp", f"{root}/final")
    fs.rename(f"{root}/tmp", f"{root}/final")
    assert fs.listdir(root) == ["final", "tmp"]


def test_link_gives_the_same_file_a_second_name(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/tmp", b"one\n")
    fs.link(f"{root}/tmp", f"{root}/final")
    fs.append(f"{root}/final", b"two\n")
    assert fs.read_bytes(f"{root}/tmp") == b"one\ntwo\n"


def test_link_onto_an_existing_name_raises_file_exists(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/tmp", b"new")
    fs.write_new(f"{root}/final", b"old")
    with pytest.raises(FileExistsError):
        fs.link(f"{root}/tmp", f"{root}/final")
    assert fs.read_bytes(f"{root}/final") == b"old"


def test_remove_deletes_one_name_and_the_other_link_remains(fs: FileSystem, root: str) -> None:
    fs.write_new(f"{root}/tmp", b"data")
    fs.link(f"{root}/tmp", f"{root}/final")
    fs.remove(f"{root}/tmp")
    assert fs.listdir(root) == ["final"]
    assert fs.read_bytes(f"{root}/final") == b"data"


# --- one writer ---
def test_try_lock_creates_an_empty_lock_file(fs: FileSystem, root: str) -> None:
    lock = fs.try_lock(f"{root}/session.lock")
    assert lock is not None
    assert fs.read_bytes(f"{root}/session.lock") == b""
    fs.unlock(lock)


def test_a_second_try_lock_on_a_held_lock_returns_none(fs: FileSystem, root: str) -> None:
    lock = fs.try_lock(f"{root}/session.lock")
    assert lock is not None
    assert fs.try_lock(f"{root}/session.lock") is None
    fs.unlock(lock)


def test_locks_on_two_paths_are_independent(fs: FileSystem, root: str) -> None:
    one, two = fs.try_lock(f"{root}/one.lock"), fs.try_lock(f"{root}/two.lock")
    assert one is not None and two is not None
    fs.unlock(one)
    fs.unlock(two)


def test_unlock_of_a_released_handle_raises_value_error(fs: FileSystem, root: str) -> None:
    lock = fs.try_lock(f"{root}/session.lock")
    assert lock is not None
    fs.unlock(lock)
    with pytest.raises(ValueError):
        fs.unlock(lock)


def test_a_lock_is_taken_again_after_unlock_and_a_stale_handle_cannot_release_it(
    fs: FileSystem, root: str
) -> None:
    stale = fs.try_lock(f"{root}/session.lock")
    assert stale is not None
    fs.unlock(stale)
    later = fs.try_lock(f"{root}/session.lock")
    assert later is not None
    with pytest.raises(ValueError):
        fs.unlock(stale)
    assert fs.try_lock(f"{root}/session.lock") is None
    fs.unlock(later)


# --- the store's write patterns ---
def test_publishing_a_file_whole_leaves_only_the_final_name(fs: FileSystem, root: str) -> None:
    fs.makedirs(f"{root}/s")
    fs.write_new(f"{root}/s/log.tmp", b"header\nfirst batch\n")
    fs.fsync(f"{root}/s/log.tmp")
    fs.link(f"{root}/s/log.tmp", f"{root}/s/log")
    fs.fsync_dir(f"{root}/s")
    fs.remove(f"{root}/s/log.tmp")
    assert fs.listdir(f"{root}/s") == ["log"]
    assert fs.read_bytes(f"{root}/s/log") == b"header\nfirst batch\n"


# --- misuse: each call, in a root holding a file ``a`` and an empty directory ``d``, and its error ---
MISUSES: Final[list[tuple[str, Callable[[FileSystem, str], object], type[Exception]]]] = [
    ("write_new_in_a_missing_dir", lambda fs, r: fs.write_new(f"{r}/missing/a", b"x"), FileNotFoundError),
    ("read_bytes_of_a_directory", lambda fs, r: fs.read_bytes(r), IsADirectoryError),
    ("size_of_a_directory", lambda fs, r: fs.size(r), IsADirectoryError),
    ("listdir_of_a_file", lambda fs, r: fs.listdir(f"{r}/a"), NotADirectoryError),
    ("listdir_of_a_missing_directory", lambda fs, r: fs.listdir(f"{r}/none"), FileNotFoundError),
    ("makedirs_over_a_file", lambda fs, r: fs.makedirs(f"{r}/a"), FileExistsError),
    ("makedirs_through_a_file", lambda fs, r: fs.makedirs(f"{r}/a/b"), NotADirectoryError),
    ("fsync_of_a_directory", lambda fs, r: fs.fsync(r), IsADirectoryError),
    ("fsync_of_a_missing_file", lambda fs, r: fs.fsync(f"{r}/none"), FileNotFoundError),
    ("fsync_dir_of_a_file", lambda fs, r: fs.fsync_dir(f"{r}/a"), NotADirectoryError),
    ("rename_of_a_missing_file", lambda fs, r: fs.rename(f"{r}/none", f"{r}/final"), FileNotFoundError),
    ("rename_onto_a_directory", lambda fs, r: fs.rename(f"{r}/a", f"{r}/d"), IsADirectoryError),
    ("link_of_a_missing_file", lambda fs, r: fs.link(f"{r}/none", f"{r}/final"), FileNotFoundError),
    ("link_of_a_directory", lambda fs, r: fs.link(f"{r}/d", f"{r}/e"), PermissionError),
    ("remove_of_a_missing_file", lambda fs, r: fs.remove(f"{r}/none"), FileNotFoundError),
    ("remove_of_a_directory", lambda fs, r: fs.remove(f"{r}/d"), IsADirectoryError),
    ("try_lock_in_a_missing_dir", lambda fs, r: fs.try_lock(f"{r}/missing/session.lock"), FileNotFoundError),
]


@pytest.mark.parametrize(
    ("call", "error"), [pytest.param(call, error, id=name) for name, call, error in MISUSES]
)
def test_a_misuse_raises_its_posix_error(
    fs: FileSystem, root: str, call: Callable[[FileSystem, str], object], error: type[Exception]
) -> None:
    fs.write_new(f"{root}/a", b"")
    fs.makedirs(f"{root}/d")
    with pytest.raises(error):
        call(fs, root)
