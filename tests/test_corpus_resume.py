"""Every real DSH 0.1.0-rc.8 log in ../shared/corpus resumes through the file store.

Each log is copied into a fresh root at the place DSH keeps it (the v0 layout:
``<root>/<projectKey(cwd)>/<encodeSegment(id)>/session.jsonl``), resumed with
``SessionStore.resume`` on a ``FileStore``, and compared with what the spec predicts: the header
line decoded, the records upgraded (``spec.format.legacy.upgrade_v0_records``), the closers of
``spec.lineage.repair.derive_closers`` appended, then the session built from that log
(``spec.log.session.create_session_state`` in restore mode, which adds the end-seed when the log does
not end with one); its surface is ``spec.log.surface.fold_surface`` of those events. Resuming migrates:
the converted log is published as a new v4 file beside the v0 one, which stays byte-identical,
and the next resume reads the v4 file (SPEC-DECISIONS D1, D3).

The one log that is not a valid DSH log (its seqs jump; see tests/test_corpus.py) is refused with
the same corrupt-log error, and nothing is written beside it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from refusals import refusal
from shared_material import SHARED, shared_dir

from reference.persistence.filestore import FileStore
from reference.store import SessionStore
from spec.codes import Code
from spec.format.framing import decode_jsonl_log
from spec.format.legacy import upgrade_v0_records
from spec.format.naming import (
    NO_CWD_DIR,
    V0_PLAIN_NAME,
    V4_PLAIN_NAME,
    V4_ZSTD_NAME,
    decode_header_line,
    encode_project_key,
    encode_segment,
)
from spec.lineage.repair import derive_closers
from spec.log.header import LEGACY_FORMAT_VERSION
from spec.log.session import SessionState, create_session_state
from spec.log.surface import fold_surface

CORPUS = ("corpus", "dsh-0.1.0-rc.8")
SEQ_GAP_FIXTURE = "apps__web__tests__snapshots__cordis-tool-round__session.jsonl"
RESUMED_AT = 1_900_000_000_000  # the resuming store's clock (ms): the time of the end-seed it adds


def corpus_names() -> list[str]:
    corpus = SHARED.joinpath(*CORPUS)
    return sorted(path.name for path in corpus.iterdir()) if corpus.is_dir() else []


def place_as_v0(source: Path, root: Path) -> tuple[str, Path]:
    """Copy a corpus log to where DSH keeps it under ``root``; returns its session id and path."""
    version, header = decode_header_line(decode_jsonl_log(source.read_bytes()).header_line)
    assert version == LEGACY_FORMAT_VERSION
    session_id = str(header["id"])
    cwd = header.get("cwd")
    project = NO_CWD_DIR if cwd is None else encode_project_key(str(cwd))
    session_dir = root / project / encode_segment(session_id)
    session_dir.mkdir(parents=True)
    target = session_dir / V0_PLAIN_NAME
    shutil.copyfile(source, target)
    return session_id, target


def predicted_session(source: Path) -> SessionState:
    """What the spec says resuming this log gives: upgraded events, closers, then the end-seed."""
    log = decode_jsonl_log(source.read_bytes())
    _, header = decode_header_line(log.header_line)
    session_id = str(header["id"])
    events = upgrade_v0_records(session_id, log.records)
    stored = events + derive_closers(events)
    return create_session_state(session_id, stored, header, RESUMED_AT, mode="restore")


def store_at(root: Path, compressed: bool) -> SessionStore:
    return SessionStore(FileStore(str(root), compressed=compressed), clock=lambda: RESUMED_AT)


@pytest.mark.parametrize("compressed", [True, False], ids=["zstd", "plain"])
@pytest.mark.parametrize("name", [name for name in corpus_names() if name != SEQ_GAP_FIXTURE])
def test_a_corpus_log_resumes_to_the_predicted_session_and_migrates_to_v4(
    name: str, compressed: bool, tmp_path: Path
) -> None:
    source = shared_dir(*CORPUS) / name
    session_id, v0_path = place_as_v0(source, tmp_path)
    predicted = predicted_session(source)

    store = store_at(tmp_path, compressed)
    session = store.resume(session_id)
    assert session.header == predicted.header
    assert session.events == predicted.events
    assert session.first_live_seq == predicted.first_live_seq
    assert session.surface.nodes == predicted.surface.nodes == fold_surface(predicted.events).nodes
    assert session.surface.replace_generation == predicted.surface.replace_generation

    v4_path = v0_path.parent / (V4_ZSTD_NAME if compressed else V4_PLAIN_NAME)
    assert v4_path.is_file(), "resuming a v0 log publishes a v4 file beside it"
    assert v0_path.read_bytes() == source.read_bytes(), "the v0 file must stay untouched"
    store.close(session_id)  # flushes the end-seed into the v4 file

    files = FileStore(str(tmp_path), compressed=compressed)
    assert files.locate(session_id) == str(v4_path)
    assert files.read(session_id).format_version == 4
    again = store_at(tmp_path, compressed).resume(session_id)
    assert again.events == session.events, "the second resume reads the v4 file and adds nothing"
    assert again.header == session.header
    assert v0_path.read_bytes() == source.read_bytes()


def test_the_corpus_log_with_a_seq_gap_is_refused_and_nothing_is_written_beside_it(tmp_path: Path) -> None:
    source = shared_dir(*CORPUS) / SEQ_GAP_FIXTURE
    session_id, v0_path = place_as_v0(source, tmp_path)
    caught = refusal(lambda: store_at(tmp_path, True).resume(session_id))
    assert caught.code == Code.CORRUPT_LOG
    assert "seq gap in committed region" in caught.message
    assert sorted(path.name for path in v0_path.parent.iterdir() if path.name != "session.lock") == [
        V0_PLAIN_NAME
    ]
    assert v0_path.read_bytes() == source.read_bytes()
    assert refusal(lambda: store_at(tmp_path, True).resume(session_id)).code == Code.CORRUPT_LOG, (
        "the failed resume left its writer lock behind"
    )


def test_every_corpus_log_is_resumed_by_the_tests_above() -> None:
    assert len(list(shared_dir(*CORPUS).iterdir())) == len(corpus_names()) == 110
