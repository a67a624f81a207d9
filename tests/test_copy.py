"""``dsh-session copy`` between backends: the corpus survives files -> PostgreSQL -> files byte
for byte, an existing different session is never overwritten, and a copy killed halfway is
completed by running it again."""

from __future__ import annotations

import io
import random
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shared_material import shared_dir

from reference.cli import main
from reference.logfile import find_logs, read_log_file
from reference.persistence.filestore import FileStore
from reference.persistence.fs import RealFileSystem
from reference.persistence.postgres import PostgresStore
from reference.persistence.sqlite import SqliteStore
from reference.store import SessionStore
from spec.codes import SpecError
from spec.format.json_text import encode_json_text

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ("corpus", "dsh-0.1.0-rc.8")
UNREADABLE_IN_CORPUS = {
    "apps__web__tests__snapshots__cordis-tool-round__session.jsonl"
}  # a seq gap (docs/choices.md)


def copy(source: str, destination: str, *sessions: str) -> tuple[int, str, str]:
    out, progress = io.StringIO(), io.StringIO()
    from reference.transfer import command_copy

    status = command_copy(source, destination, sessions, out, progress)
    return status, out.getvalue(), progress.getvalue()


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every log file under ``root`` by its relative path (temp files of a publication excluded)."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("session.*"))
        if not path.name.endswith((".tmp", ".lock"))
    }


def first_of_each_id(corpus: Path) -> dict[str, Any]:
    """The log the copy keeps for each id: the first readable corpus file that has it (later files
    with the same id and another log are refused)."""
    kept: dict[str, Any] = {}
    for path in find_logs([str(corpus)]):
        try:
            log = read_log_file(path).log
        except SpecError:
            continue
        kept.setdefault(str(log.header["id"]), log)
    return kept


@pytest.fixture
def postgres_endpoint(postgres_cluster: Any) -> Iterator[str]:
    schema = f"copy_{secrets.token_hex(6)}"
    yield f"postgres:{postgres_cluster.dsn}#{schema}"
    store = PostgresStore(postgres_cluster.dsn, schema)
    store.drop_schema()
    store.close()


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The corpus copied once into a file store (``logs:`` -> ``file:``), checked against the
    corpus read directly: every id once, as its first readable log has it."""
    corpus = shared_dir(*CORPUS)
    kept = first_of_each_id(corpus)
    root = tmp_path_factory.mktemp("corpus-store")
    status, summary, progress = copy(f"logs:{corpus}", f"file:{root}")
    assert status == 3  # the one unreadable corpus log
    assert [line for line in progress.splitlines() if "unreadable" in line] == [
        line for line in progress.splitlines() if any(name in line for name in UNREADABLE_IN_CORPUS)
    ]
    assert summary.startswith(f"{len(kept)} copied, 0 already there")
    for session_id, log in kept.items():
        stored = FileStore(str(root)).read(session_id)
        assert stored.header == log.header
        assert [encode_json_text(e) for e in stored.events] == [
            encode_json_text(e) for e in log.events + log.recovered
        ]
    return root, kept


def test_the_corpus_copies_files_to_postgres_and_back_byte_for_byte(
    corpus_store: tuple[Path, dict[str, Any]], tmp_path: Path, postgres_endpoint: str
) -> None:
    source, kept = corpus_store
    assert copy(f"file:{source}", postgres_endpoint)[:2] == (
        0,
        f"{len(kept)} copied, 0 already there, 0 refused, 0 unreadable, 0 failed\n",
    )
    assert copy(postgres_endpoint, f"file:{tmp_path / 'back'}")[0] == 0
    first, second = tree_bytes(source), tree_bytes(tmp_path / "back")
    assert len(first) == len(kept) and first == second


def test_a_copy_refuses_to_overwrite_a_different_session_and_skips_an_identical_one(tmp_path: Path) -> None:
    files = FileStore(str(tmp_path / "files"), fs=RealFileSystem())
    for session_id in ("same", "different"):
        session = SessionStore(files, clock=lambda: 5).create(session_id)
        session.append("turn/start", {"turn": 1})
        session.flush()
    database = SqliteStore(str(tmp_path / "s.sqlite3"))
    sessions = SessionStore(database, clock=lambda: 5)
    sessions.create("same").append("turn/start", {"turn": 1})
    sessions.close("same")
    sessions.create("different").append("turn/start", {"turn": 2})
    sessions.close("different")
    before = database.read("different")
    database.close()
    status, summary, progress = copy(f"file:{tmp_path / 'files'}", f"sqlite:{tmp_path / 's.sqlite3'}")
    assert status == 1 and summary.startswith("0 copied, 1 already there, 1 refused")
    assert "different: refused [SESSION_ALREADY_EXISTS]" in progress
    assert SqliteStore(str(tmp_path / "s.sqlite3")).read("different") == before


def test_a_copy_of_named_sessions_copies_those_and_reports_a_missing_one(tmp_path: Path) -> None:
    files = FileStore(str(tmp_path / "files"), fs=RealFileSystem())
    for session_id in ("one", "two"):
        SessionStore(files, clock=lambda: 5).create(session_id).flush()
    status, summary, progress = copy(
        f"file:{tmp_path / 'files'}", f"sqlite:{tmp_path / 's.sqlite3'}", "two", "three"
    )
    assert status == 3 and summary.startswith("1 copied")
    assert "three: unreadable, not copied [SESSION_NOT_FOUND]" in progress
    assert [header["id"] for header in SqliteStore(str(tmp_path / "s.sqlite3")).list()] == ["two"]


def test_an_unreadable_stored_session_is_reported_and_the_others_copied(tmp_path: Path) -> None:
    files = FileStore(str(tmp_path / "files"), fs=RealFileSystem(), compressed=False)
    for session_id in ("good", "bad"):
        SessionStore(files, clock=lambda: 5).create(session_id).flush()
    bad = Path(files.locate("bad") or "")
    bad.write_bytes(b"not a header\n")
    status, summary, progress = copy(f"file:{tmp_path / 'files'}", f"sqlite:{tmp_path / 's.sqlite3'}")
    assert status == 3 and summary.startswith("1 copied, 0 already there, 0 refused, 1 unreadable")
    assert f"{bad}: unreadable" in progress


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--from", "memory:", "--to", "file:/x"], "memory: is no endpoint"),
        (["--from", "file:/x", "--to", "logs:/y"], "logs: can only be a source"),
        (["--from", "ftp:/x", "--to", "file:/y"], "is not an endpoint"),
        (["--from", "file:", "--to", "file:/y"], "names no path"),
    ],
)
def test_an_unusable_endpoint_is_a_usage_error_with_a_sentence(argv: list[str], message: str) -> None:
    out = io.StringIO()
    assert main(["copy", *argv], out=out) == 2
    assert message in out.getvalue() and "Traceback" not in out.getvalue()


@pytest.mark.parametrize("kind", ["file", "file+plain", "logs", "sqlite"])
def test_a_source_that_does_not_exist_is_unreadable_and_nothing_is_created(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "typo" / "db.sqlite3"
    out = io.StringIO()
    status = main(
        ["copy", "--from", f"{kind}:{source}", "--to", f"sqlite:{tmp_path / 'to.sqlite3'}"], out=out
    )
    assert status == 3
    assert "[PATH_NOT_FOUND]" in out.getvalue() and "does not exist" in out.getvalue()
    assert list(tmp_path.iterdir()) == []  # neither the source nor the destination was made


def test_an_sqlite_source_is_opened_read_only_neither_upgraded_nor_given_a_lock_folder(
    tmp_path: Path,
) -> None:
    source = tmp_path / "s.sqlite3"
    database = SqliteStore(str(source))
    SessionStore(database, clock=lambda: 5).create("one").flush()
    database.close()
    shutil.rmtree(f"{source}.locks")
    status, summary, _ = copy(f"sqlite:{source}", f"file:{tmp_path / 'files'}")
    assert status == 0 and summary.startswith("1 copied")
    assert not Path(f"{source}.locks").exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["files", "s.sqlite3"]  # no -wal, no -shm
    empty = tmp_path / "empty.sqlite3"
    empty.touch()
    status, summary, _ = copy(f"sqlite:{empty}", f"file:{tmp_path / 'files'}")
    assert status == 3 and "[UNSUPPORTED_FORMAT]" in summary and "read-only" in summary
    assert empty.stat().st_size == 0  # no tables were made in it


def test_an_sqlite_source_with_a_live_writer_is_read_through_its_wal(tmp_path: Path) -> None:
    """A source whose writer is open has its -wal and -shm already: it is read under SQLite's
    locks, commits still in the WAL included (an immutable open would miss them)."""
    source = tmp_path / "s.sqlite3"
    database = SqliteStore(str(source))
    try:
        SessionStore(database, clock=lambda: 5).create("one").flush()
        assert Path(f"{source}-wal").stat().st_size > 0  # the commit is in the WAL, not yet in the file
        status, summary, _ = copy(f"sqlite:{source}", f"file:{tmp_path / 'files'}")
        assert status == 0 and summary.startswith("1 copied")
    finally:
        database.close()
    assert not Path(f"{source}-wal").exists() and not Path(f"{source}-shm").exists()


def test_a_copy_killed_halfway_is_completed_by_running_it_again(
    corpus_store: tuple[Path, dict[str, Any]], postgres_endpoint: str
) -> None:
    source, kept = corpus_store
    generator = random.Random(15)
    lines_before_kill = generator.randrange(5, len(kept) - 5)
    child = subprocess.Popen(
        [sys.executable, "-m", "reference", "copy", "--from", f"file:{source}", "--to", postgres_endpoint],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stderr is not None
    for _ in range(lines_before_kill):
        assert child.stderr.readline().strip(), "the copy ended before it was killed"
    time.sleep(
        generator.random() * 0.03
    )  # when the kill lands inside the next session's copy: fault timing, not synchronisation
    child.send_signal(signal.SIGKILL)
    child.wait()
    status, summary, progress = copy(f"file:{source}", postgres_endpoint)
    assert status == 0, progress
    copied, already = (int(part.split()[0]) for part in summary.split(", ")[:2])
    # Each session was verified again by the re-run, whether it copied it or found it there.
    assert copied + already == len(kept) and already >= lines_before_kill and copied > 0


class Died(BaseException):
    """The copying process died here (not an error it could handle)."""


class DyingStore(SqliteStore):
    """An SQLite destination whose process dies at its ``die_at``-th commit, before committing."""

    commits = 0
    die_at = 0

    def _db_insert(self, key: str, header: str | None, first_seq: int, events: Any) -> None:
        DyingStore.commits += 1
        if DyingStore.commits >= DyingStore.die_at:  # once dead, nothing more happens
            raise Died()
        super()._db_insert(key, header, first_seq, events)


def test_a_copy_that_dies_at_any_commit_leaves_no_half_session_and_a_re_run_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = FileStore(str(tmp_path / "files"), fs=RealFileSystem())
    for number in range(4):
        session = SessionStore(files, clock=lambda: 5).create(f"s{number}")
        for turn in range(1, number + 3):
            session.append("turn/start", {"turn": turn})
            session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        session.flush()
    import reference.persistence.sqlite

    for die_at in range(1, 5):
        destination = tmp_path / f"copy-{die_at}.sqlite3"
        DyingStore.commits, DyingStore.die_at = 0, die_at
        monkeypatch.setattr(reference.persistence.sqlite, "SqliteStore", DyingStore)
        with pytest.raises(Died):
            copy(f"file:{tmp_path / 'files'}", f"sqlite:{destination}")
        monkeypatch.undo()
        stored = SqliteStore(str(destination))
        assert [header["id"] for header in stored.list()] == [f"s{number}" for number in range(die_at - 1)]
        stored.close()
        status, summary, _ = copy(f"file:{tmp_path / 'files'}", f"sqlite:{destination}")
        assert status == 0 and summary.startswith(f"{5 - die_at} copied, {die_at - 1} already there")
