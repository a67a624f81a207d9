"""The pytest plugin (reference/pytest_plugin.py), run by pytester on real logs: the corpus of DSH's
own logs (skipped without ../shared) and logs generated here. A team's suite fails on any broken
invariant, with the rule id in the report (issue 13)."""

from __future__ import annotations

import json
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from event_builders import V4_HEADER_LINE
from shared_material import shared_dir

pytest_plugins = ["pytester"]

CORPUS_FRAGMENTS = {
    "examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl": {
        "compaction-checkpoint",
        "shadow-price",
    },
    "examples__headless-agent__tests__snapshots__ralph-loop__session.2.jsonl": {"step-scoped"},
    "examples__headless-agent__tests__snapshots__subagent-settlement__child.replay.jsonl": {"step-scoped"},
}
SEQ_GAP_FIXTURE = "apps__web__tests__snapshots__cordis-tool-round__session.jsonl"

# A test module that writes a real session with the reference store, well-formed or broken.
WRITER = """
import json, pytest
from reference.persistence.filestore import FileStore
from reference.store import SessionStore

USER = {"id": "u1", "role": "user", "source": {"kind": "user"}, "content": [{"type": "text", "text": "hi"}]}

def write(root, broken):
    store = SessionStore(FileStore(str(root)), clock=lambda: 1000)
    session = store.create("s1", meta={"cwd": "/work"})
    session.append("turn/start", {"turn": 1})
    session.append("user/message", USER, "append")
    if broken:
        session.append("turn/start", {"turn": 2})  # a turn inside a turn
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close("s1")
    return root
"""


def log_lines(path: Path, *values: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(value) + "\n" for value in values))
    return path


def fragment(path: Path) -> Path:
    chunk = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}
    return log_lines(
        path,
        V4_HEADER_LINE,
        *({"type": "assistant/chunk", "seq": seq, "time": seq, "data": chunk} for seq in range(3)),
    )


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    assert "reference.pytest_plugin" in {point.value for point in entry_points(group="pytest11")}


def test_the_fixture_passes_a_clean_log_and_fails_a_broken_one_with_the_rule_id(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        WRITER
        + textwrap.dedent(
            """
            def test_clean(tmp_path, dsh_check):
                checked = dsh_check(write(tmp_path, broken=False))
                assert [log.violations for log in checked] == [()]

            def test_broken(tmp_path, dsh_check):
                dsh_check(write(tmp_path, broken=True))
            """
        )
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*dsh-session: broken invariants [[]turn-end, turn-open[]]*"])
    result.stdout.fnmatch_lines(["*turn-open at seq 2 (line 4): turn/start 2 while turn 1 is still open"])
    result.stdout.no_fnmatch_line("*Traceback*")


def test_the_fixture_fails_on_a_directory_without_logs_and_on_an_unreadable_log(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_empty(tmp_path, dsh_check):
            dsh_check(tmp_path)

        def test_corrupt(tmp_path, dsh_check):
            log = tmp_path / "session.v4.jsonl"
            log.write_text("{not a header\\n")
            dsh_check(log)
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*NO_LOGS_FOUND*", "*HEADER_LINE_INVALID*"], consecutive=False)


def test_the_marker_checks_the_logs_a_passing_test_wrote_under_its_tmp_path(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        WRITER
        + textwrap.dedent(
            """
            @pytest.mark.dsh_check
            def test_writes_a_clean_log(tmp_path):
                write(tmp_path, broken=False)

            @pytest.mark.dsh_check
            def test_writes_a_broken_log(tmp_path):
                write(tmp_path, broken=True)

            @pytest.mark.dsh_check
            def test_fails_for_its_own_reason(tmp_path):
                write(tmp_path, broken=True)
                assert False, "its own assertion"
            """
        )
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        ["*_ test_writes_a_broken_log _*", "dsh-session: broken invariants [[]turn-end, turn-open[]]"]
    )
    result.stdout.fnmatch_lines(["*_ test_fails_for_its_own_reason _*", "*AssertionError: its own assertion"])
    assert "test_fails_for_its_own_reason _*\ndsh-session" not in result.stdout.str()


def test_the_marker_with_paths_and_core_only_checks_those_paths(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    fragment(logs / "fragment.jsonl")
    pytester.makepyfile(
        f"""
        import pytest

        @pytest.mark.dsh_check({str(logs)!r}, core_only=True)
        def test_core_only():
            pass

        @pytest.mark.dsh_check({str(logs)!r})
        def test_every_rule():
            pass
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*3× step-scoped at seqs 0–2 (lines 2–4)*", "*--core-only*would pass*"])


def test_dsh_logs_makes_one_item_per_generated_log_with_the_rule_id_in_the_report(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    log_lines(
        logs / "a" / "clean.jsonl",
        V4_HEADER_LINE,
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
    )
    fragment(logs / "b" / "fragment.jsonl")
    (logs / "c").mkdir()
    (logs / "c" / "broken.jsonl").write_text(json.dumps(V4_HEADER_LINE) + "\n{oops\n")
    result = pytester.runpytest(
        "--dsh-logs", str(logs), "-m", "dsh_log", "-v", "--junitxml", str(tmp_path / "junit.xml")
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*dsh-logs[[]logs[]]::a/clean.jsonl PASSED*",
            "*dsh-logs[[]logs[]]::b/fragment.jsonl FAILED*",
            "*dsh-logs[[]logs[]]::c/broken.jsonl FAILED*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*broken invariants step-scoped*", "*CORRUPT_LOG*line 2 (byte*"], consecutive=False
    )
    junit = (tmp_path / "junit.xml").read_text()
    assert 'name="dsh_rules" value="step-scoped"' in junit and 'name="dsh_rules" value="CORRUPT_LOG"' in junit


def test_dsh_logs_on_a_folder_without_logs_is_a_failing_item_not_a_pass(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    result = pytester.runpytest("--dsh-logs", str(tmp_path), "-m", "dsh_log")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*NO_LOGS_FOUND*"])


def test_dsh_logs_on_a_missing_folder_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    result = pytester.runpytest("--dsh-logs", str(tmp_path / "missing"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dsh-logs*missing: no such file or directory*"])


def test_dsh_logs_checks_every_real_dsh_log_of_the_corpus_as_one_item_each(pytester: pytest.Pytester) -> None:
    corpus = shared_dir("corpus", "dsh-0.1.0-rc.8")
    result = pytester.runpytest_subprocess(
        "--dsh-logs", str(corpus), "-m", "dsh_log", "-p", "no:cacheprovider"
    )
    result.assert_outcomes(passed=106, failed=4)
    failed = {
        line.split("::", 1)[1].split(" ", 1)[0] for line in result.stdout.lines if line.startswith("FAILED ")
    }
    assert failed == {*CORPUS_FRAGMENTS, SEQ_GAP_FIXTURE}
    for name, rules in CORPUS_FRAGMENTS.items():
        result.stdout.fnmatch_lines([f"*/{name}: broken invariants {', '.join(sorted(rules))}"])
    result.stdout.fnmatch_lines([f"*/{SEQ_GAP_FIXTURE}: unreadable [[]CORRUPT_LOG[]]*at line 8 (byte 1781)*"])
    core_only = pytester.runpytest_subprocess(
        "--dsh-logs", str(corpus), "--dsh-core-only", "-m", "dsh_log", "-p", "no:cacheprovider"
    )
    core_only.assert_outcomes(passed=109, failed=1)
