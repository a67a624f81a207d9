"""The ``files`` family (issue 10): the reference passes it in process, over stdio and on a real
directory; a subject that writes its files in the wrong layout or with unreadable frames fails
it (tests/broken_storage_files.py), as does one that reads a rotted frame as data; a subject
that cannot hand its files over gets the writing checks reported unsupported, never passed."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import ClassVar, Final

import pytest

from conformance.files.writing import (
    CHECKS,
    check_files,
    check_layout,
    rewritten_problems,
    run_both_forms,
    same_but_number_forms,
    take_exported,
)
from conformance.report import CaseResult, Options
from conformance.runner import run_suite
from conformance.subject import InProcessSubject, StdioSubject
from conformance.targets import DEFAULT_TARGET
from reference.persistence import fastjson
from reference.server import ReferenceSubject
from tests.broken_storage_files import WRITING_BREAKS, ChecksumIgnored, ExportsNothing
from tests.broken_subjects import WritesCrlfLineEnds, WritesHeaderTypeLast

FILES: Final = frozenset({"files"})
WRITING: Final = {"replay", *CHECKS}


def run_files(subject: object) -> list[CaseResult]:
    return run_suite(InProcessSubject(subject), Options(families=FILES))


def writing(results: Sequence[CaseResult]) -> dict[str, str]:
    """The outcome of each writing check, by its key."""
    return {result.case_id: result.outcome for result in results if result.case_id in WRITING}


def reading(results: Sequence[CaseResult]) -> list[CaseResult]:
    return [result for result in results if result.case_id not in WRITING]


def failed(results: Sequence[CaseResult]) -> list[str]:
    return [
        f"{result.name}: {result.detail[:300]}" for result in results if result.outcome in ("failed", "error")
    ]


def test_the_reference_passes_every_files_case_in_process() -> None:
    results = run_files(ReferenceSubject())
    assert failed(results) == []
    assert writing(results) == dict.fromkeys(WRITING, "passed")
    assert len(reading(results)) >= 30
    assert {result.outcome for result in reading(results)} == {"passed"}


def test_the_reference_passes_every_files_case_over_stdio() -> None:
    subject = StdioSubject(f"{sys.executable} -m reference.server", timeout=60)
    try:
        results = run_suite(subject, Options(families=FILES))
    finally:
        subject.close()
    assert failed(results) == []
    assert writing(results) == dict.fromkeys(WRITING, "passed")
    assert {result.outcome for result in reading(results)} == {"passed"}


def test_the_real_directory_reference_passes_over_stdio_without_a_crash_seam(tmp_path: object) -> None:
    """reference.directory has import and export but no crash seam: the reading vectors need
    only storage and import."""
    env = {**os.environ, "CONFORMANCE_STORE_ROOT": str(tmp_path)}
    subject = StdioSubject(f"{sys.executable} -m reference.server", timeout=60, env=env)
    try:
        results = run_suite(subject, Options(families=FILES))
    finally:
        subject.close()
    assert failed(results) == []
    assert {result.outcome for result in results} == {"passed"}
    assert len(reading(results)) >= 30


@pytest.mark.parametrize("broken", list(WRITING_BREAKS), ids=lambda cls: cls.__name__)
def test_a_subject_whose_files_are_wrong_fails_the_files_family(broken: type[ReferenceSubject]) -> None:
    results = run_files(broken())
    outcomes = writing(results)
    assert outcomes.get(WRITING_BREAKS[broken]) == "failed", outcomes
    assert outcomes["replay"] == "passed", "the break is in the bytes only: every answer is the reference's"


@pytest.mark.parametrize("broken", [WritesCrlfLineEnds, WritesHeaderTypeLast], ids=lambda cls: cls.__name__)
def test_a_log_that_reads_back_right_but_is_not_the_canonical_bytes_fails_two_cases(
    broken: type[ReferenceSubject],
) -> None:
    """``\\r\\n`` line ends, or the header's ``type`` last, read back as the same values: only the byte
    comparison with the spec's encoding (docs/choices.md, "Byte-exact writing") sees them, in the
    header line and in the whole log."""
    results = run_files(broken())
    outcomes = writing(results)
    assert (outcomes["header-line"], outcomes["lines"]) == ("failed", "failed"), outcomes
    assert {key for key, outcome in outcomes.items() if outcome != "passed"} == {"header-line", "lines"}
    shown = next(result.detail for result in results if result.case_id == "header-line")
    assert "parting at byte" in shown and "plain:" in shown and "zstd:" in shown


def test_a_reader_that_ignores_frame_checksums_fails_the_reading_vectors() -> None:
    results = run_files(ChecksumIgnored())
    missed = {result.name for result in reading(results) if result.outcome == "failed"}
    assert "a compressed v4 log with a wrong checksum on a middle frame is corrupt, not torn" in missed
    assert writing(results) == dict.fromkeys(WRITING, "passed")


class NoExport(ReferenceSubject):
    """The reference, without the export and import capabilities (and their ops)."""

    capabilities: ClassVar[tuple[str, ...]] = tuple(
        name for name in ReferenceSubject.capabilities if name not in ("export", "import")
    )
    ops: ClassVar = {op: method for op, method in ReferenceSubject.ops.items() if op != "export"}


def test_without_export_the_writing_checks_are_unsupported_never_passed() -> None:
    results = run_files(NoExport())
    assert set(writing(results).values()) == {"unsupported"}
    assert {result.outcome for result in reading(results)} == {"unsupported"}
    assert all("import" in result.detail for result in reading(results))


def test_without_storage_nothing_of_the_family_passes() -> None:
    class CoreOnly(ReferenceSubject):
        capabilities: ClassVar[tuple[str, ...]] = ("core", "pure")

    results = run_files(CoreOnly())
    assert results and {result.outcome for result in results} == {"unsupported"}


def test_a_subject_that_exports_no_log_fails_layout_and_the_rest_is_not_run_never_passed() -> None:
    outcomes = writing(run_files(ExportsNothing()))
    assert outcomes.pop("replay") == "passed"
    assert outcomes.pop("layout") == "failed"
    assert set(outcomes.values()) == {"not run"}


def test_a_stdio_subject_with_a_crash_seam_and_no_export_gets_the_writing_checks_unsupported() -> None:
    """Only a subject without a crash seam promises to store in CONFORMANCE_STORE_ROOT (PROTOCOL.md,
    the kill check); one with a seam keeps its files on its simulated disk, out of the suite's reach."""
    subject = StdioSubject("never-started-subject")  # check_files decides before any request
    options = Options(capabilities=frozenset({"core", "storage", "crash-seam"}))
    results = check_files(subject, options)
    assert results and {result.outcome for result in results} == {"unsupported"}


def test_number_forms_are_compared_by_decimal_value_never_as_minus_zero() -> None:
    """The rewritten logs' comparison (docs/choices.md, "Logs written again from what was read"):
    D5 leaves a number's form to the language, so ``1e-7``/``1e-07`` and ``2``/``2.0`` are the
    same text; a different value, ``-0`` or any other token is not; digits inside a string are
    text, not numbers."""
    spec = b'{"a":1e-07,"b":2.0,"c":9007199254740992.0,"d":0.0,"e":"x1.0"}\n'
    assert same_but_number_forms(spec, spec) is None
    assert same_but_number_forms(b'{"a":1e-7,"b":2,"c":9007199254740992,"d":0,"e":"x1.0"}\n', spec) is None
    for wrong in (
        b'{"a":1e-07,"b":2.0,"c":9007199254740993,"d":0.0,"e":"x1.0"}\n',
        b'{"a":1e-07,"b":2.0,"c":9007199254740992.0,"d":-0.0,"e":"x1.0"}\n',
        b'{"a":1e-07,"b":2.0,"c":9007199254740992.0,"d":0.0,"e":"x1"}\n',
        b'{"a":1e-07, "b":2.0,"c":9007199254740992.0,"d":0.0,"e":"x1.0"}\n',
    ):
        assert same_but_number_forms(wrong, spec) is not None, wrong


def writing_checks(subject: object) -> dict[str, CaseResult]:
    options = Options(families=FILES, capabilities=frozenset(ReferenceSubject.capabilities))
    return {result.case_id: result for result in check_files(InProcessSubject(subject), options)}


def test_a_reader_that_keeps_integers_past_the_safe_bound_writes_them_again_and_fails_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader that keeps an integer literal exact up to 64 bits (as a Python int), where D5's
    reader makes it the double a JavaScript peer reads: every answer reads the same (the suite's
    reader makes the same double of it), but a v0 log's migration and a fork of a resumed log
    write ``9007199254740993`` where the spec writes the double 2**53 (its mutants in
    reference/persistence/fastjson.py, issue 26)."""
    assert all(result.outcome == "passed" for result in writing_checks(ReferenceSubject()).values())
    monkeypatch.setattr(fastjson, "MAX_SAFE_INTEGER", 2**64 - 1)
    results = writing_checks(ReferenceSubject())
    assert {key for key, result in results.items() if result.outcome != "passed"} == {"lines"}
    shown = results["lines"].detail
    assert "written again from what was read" in shown and "9007199254740993" in shown and "/o0/" in shown
    runs = run_both_forms(InProcessSubject(ReferenceSubject()), DEFAULT_TARGET, take_exported, rewrite=True)
    found = "\n".join(problem for run in runs for problem in rewritten_problems(run, DEFAULT_TARGET))
    assert "/o0/" in found and "/r0f/" in found  # the migration and the fork of a resumed v4 log


def test_a_v0_log_migrated_in_place_or_under_the_other_v4_name_fails_layout() -> None:
    """A resumed v0 log is written anew as a v4 log beside it, under the store's v4 name, and the
    v0 file is never written (D1): a store that appends to the v0 file, or publishes the migrated
    log as session.v4.jsonl in a compressed store, answers every request alike (reading either
    file gives the same events), so only the layout after the rewriting workload shows it (its
    mutants in reference/persistence/filestore.py's _open_locked, issue 26)."""
    runs = run_both_forms(InProcessSubject(ReferenceSubject()), DEFAULT_TARGET, take_exported, rewrite=True)
    assert all(check_layout(run, DEFAULT_TARGET) == [] for run in runs)
    zstd = next(run for run in runs if run.compressed)
    again = zstd.rewritten
    assert again is not None
    v0 = next(path for path in again.files if path.endswith("/o0/session.jsonl.zstd"))
    v4 = v0.replace("session.jsonl.zstd", "session.v4.jsonl.zstd")
    files = dict(again.files)
    files[v0] += b"x"
    again.files = files
    assert check_layout(zstd, DEFAULT_TARGET) == [
        f"written again: the v0 log {v0} was written (D1: v0 logs are read, never written)"
    ]
    files = {**dict(files), v0: dict(files)[v0][:-1]}
    files[v4.replace(".zstd", "")] = files.pop(v4)
    again.files = files
    assert check_layout(zstd, DEFAULT_TARGET) == [
        f"written again: session 'o0': no log at {v4} (D1: <projectKey(cwd)>/<encodeSegment(id)>/<file name>)",
        f"written again: a log file where D1 puts none: {v4.replace('.zstd', '')}",
    ]
