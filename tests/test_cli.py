"""The dsh-session command: check logs (exit 0 clean, 1 findings, 2 usage, 3 unreadable, 4 no logs),
explain a log, list the rules; every path ends in a typed error, never a traceback (issue 13)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from event_builders import V4_HEADER_LINE
from refusals import refusal
from shared_material import shared_dir

from reference import checking, cli, logfile
from reference.cli import main
from reference.exits import EXIT_CODES
from reference.persistence.filestore import FileStore
from reference.store import SessionStore
from spec.checks.log import RULES

ROOT = Path(__file__).resolve().parent.parent
USER = {
    "id": "u1",
    "role": "user",
    "source": {"kind": "user"},
    "content": [{"type": "text", "text": "hello"}],
}
CALL = {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}
ASSISTANT = {
    "id": "a1",
    "role": "assistant",
    "source": {"kind": "model", "provider": "p", "model": "m"},
    "content": [CALL],
}


def tool_result(text: str) -> dict[str, object]:
    block = {"type": "tool-result", "toolCallId": "c1", "content": [{"type": "text", "text": text}]}
    message = {"id": "r1", "role": "user", "source": {"kind": "tool", "callId": "c1"}, "content": [block]}
    return {"turn": 1, "step": 1, "message": message}


def write_session(root: Path, compressed: bool = True) -> Path:
    store = SessionStore(FileStore(str(root), compressed=compressed), clock=lambda: 1000)
    session = store.create("s1", meta={"cwd": "/work"})
    session.append("turn/start", {"turn": 1})
    session.append("user/message", USER, "append")
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("assistant/message", {"turn": 1, "step": 1, "message": ASSISTANT}, "append")
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read", "arguments": "{}"})
    session.append("tool/result", tool_result("a long result"), "append")
    prune = {"shadowedRange": {"start": 5, "end": 5}, "shadowedSeqs": [5], "shadowedTokenCount": 12}
    session.append("compaction/prune", prune)
    session.append("tool/result", tool_result("short"), {"op": "replace", "start": 5, "end": 5}, [5])
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close("s1")
    return next(root.rglob("session.v4.jsonl*"))


def write_lines(path: Path, *values: object) -> Path:
    path.write_text("".join(json.dumps(value) + "\n" for value in values))
    return path


def chunk(seq: int) -> dict[str, object]:
    data = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}}
    return {"type": "assistant/chunk", "seq": seq, "time": seq, "data": data}


def fragment(path: Path) -> Path:
    """A log cut from a longer session: five chunks of a step whose start it does not hold."""
    return write_lines(path, V4_HEADER_LINE, *(chunk(seq) for seq in range(5)))


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out, out)
    return code, out.getvalue()


def run_process(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reference", *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


# --- check: verdicts and exit statuses ------------------------------------------------------------


def test_check_of_a_well_formed_log_exits_zero_and_says_ok(tmp_path: Path) -> None:
    code, text = run("check", str(write_session(tmp_path)))
    assert code == 0
    assert "10 events, format v4 (zstd, one frame per flush), ok" in text
    assert "checked 1 log: 1 ok, 0 with findings, 0 unreadable" in text


def test_check_of_a_log_that_breaks_a_relational_rule_exits_one_and_names_the_rule(tmp_path: Path) -> None:
    log = write_lines(
        tmp_path / "session.v4.jsonl",
        V4_HEADER_LINE,
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "turn/start", "seq": 1, "time": 1, "data": {"turn": 2}},
    )
    code, text = run("check", str(log))
    assert code == 1
    assert "turn-open at seq 1 (line 3): " in text


def test_check_of_a_corrupt_log_exits_three_with_the_corrupt_log_code_and_the_line(tmp_path: Path) -> None:
    log = write_session(tmp_path, compressed=False)
    data = log.read_bytes().split(b"\n")
    data[2] = b"{not json"
    log.write_bytes(b"\n".join(data))
    code, text = run("check", str(log))
    assert code == 3
    assert "unreadable [CORRUPT_LOG] corrupt session log: unparsable committed event at line 3 (byte" in text


def test_check_of_a_directory_that_holds_no_logs_says_so_and_exits_four(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a log")
    code, text = run("check", str(tmp_path))
    assert code == 4
    assert f"{tmp_path}: [NO_LOGS_FOUND] no log files found under {tmp_path}" in text
    assert "checked 0 logs" in text and "1 path held no log" in text


def test_an_empty_directory_beside_a_clean_log_still_fails_the_check(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _ = run("check", str(write_session(tmp_path / "store")), str(empty))
    assert code == 4


def test_check_of_a_missing_path_is_unreadable_input_not_a_usage_error(tmp_path: Path) -> None:
    code, text = run("check", str(tmp_path / "nope.jsonl"))
    assert code == 3
    assert "unreadable [PATH_NOT_FOUND]" in text and "no such file or directory" in text


def test_unreadable_input_outranks_findings(tmp_path: Path) -> None:
    code, _ = run("check", str(fragment(tmp_path / "a.jsonl")), str(tmp_path / "missing.jsonl"))
    assert code == 3


def test_a_usage_error_exits_two_and_points_to_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["check"])
    assert exited.value.code == 2
    assert "see dsh-session check --help" in capsys.readouterr().err


# --- check: grouping, the core-only hint, the formats -----------------------------------------------


def test_repeated_findings_are_grouped_into_one_line(tmp_path: Path) -> None:
    code, text = run("check", str(fragment(tmp_path / "session.v4.jsonl")))
    assert code == 1
    lines = [line for line in text.splitlines() if "step-scoped" in line]
    assert len(lines) == 1
    assert lines[0].startswith("  5× step-scoped at seqs 0–4 (lines 2–6): ")


def test_a_log_that_fails_only_relational_rules_says_that_core_only_would_pass(tmp_path: Path) -> None:
    log = fragment(tmp_path / "session.v4.jsonl")
    code, text = run("check", str(log))
    assert code == 1
    assert "--core-only (what a DSH session itself checks when it loads a log) would pass" in text
    assert "The relational rules add how turns, steps, tool calls and compaction brackets nest" in text
    assert "(1 of them only relational: --core-only would pass)" in text
    assert run("check", "--core-only", str(log))[0] == 0


def test_a_log_that_breaks_a_core_rule_gets_no_core_only_hint(tmp_path: Path) -> None:
    bad = {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}, "surfaceOp": "append"}
    code, text = run("check", str(write_lines(tmp_path / "session.v4.jsonl", V4_HEADER_LINE, bad)))
    assert code == 1 and "surface-op at seq 0" in text
    assert "--core-only" not in text


def test_check_json_output_is_one_object_per_log(tmp_path: Path) -> None:
    log = write_session(tmp_path)
    code, text = run("check", "--format", "json", str(log))
    row = json.loads(text)
    assert (
        code == 0
        and row["events"] == 10
        and row["violations"] == []
        and row["form"] == "zstd, one frame per flush"
    )
    assert run("check", "--json", str(log))[1] == text


def test_check_json_rows_carry_rule_line_and_the_core_only_verdict(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, text = run(
        "check",
        "--format",
        "json",
        str(fragment(tmp_path / "f.jsonl")),
        str(tmp_path / "empty"),
        str(tmp_path / "x"),
    )
    rows = [json.loads(line) for line in text.splitlines()]
    assert code == 3
    assert rows[0]["groups"] == [{"rule": "step-scoped", "count": 5, "seqs": [0, 1, 2, 3, 4]}]
    assert [v["line"] for v in rows[0]["violations"]] == [2, 3, 4, 5, 6]
    assert rows[0]["coreOnlyWouldPass"] is True
    assert rows[1]["error"]["code"] == "NO_LOGS_FOUND" and rows[2]["error"]["code"] == "PATH_NOT_FOUND"


# SARIF 2.1.0 (OASIS), the parts a CI annotator reads: the required properties of sarifLog, run,
# tool.driver, result, message, location, physicalLocation, artifactLocation and region, with
# their types, as the standard's JSON schema states them (sarif-schema-2.1.0.json).
SARIF_SHAPE: dict[str, Any] = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string", "format": "uri"},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "rules": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "required": ["id"],
                                            "properties": {
                                                "id": {"type": "string"},
                                                "shortDescription": {"$ref": "#/$defs/message"},
                                                "fullDescription": {"$ref": "#/$defs/message"},
                                                "defaultConfiguration": {
                                                    "type": "object",
                                                    "properties": {"level": {"$ref": "#/$defs/level"}},
                                                },
                                            },
                                        },
                                    },
                                },
                            }
                        },
                    },
                    "columnKind": {"enum": ["utf16CodeUnits", "unicodeCodePoints"]},
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": -1},
                                "level": {"$ref": "#/$defs/level"},
                                "message": {"$ref": "#/$defs/message"},
                                "locations": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "physicalLocation": {
                                                "type": "object",
                                                "properties": {
                                                    "artifactLocation": {
                                                        "type": "object",
                                                        "properties": {
                                                            "uri": {
                                                                "type": "string",
                                                                "format": "uri-reference",
                                                            }
                                                        },
                                                    },
                                                    "region": {
                                                        "type": "object",
                                                        "properties": {
                                                            "startLine": {"type": "integer", "minimum": 1},
                                                            "byteOffset": {"type": "integer", "minimum": 0},
                                                        },
                                                    },
                                                },
                                            }
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
    "$defs": {
        "message": {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]},
        "level": {"enum": ["none", "note", "warning", "error"]},
    },
}


def test_sarif_output_is_sarif_2_1_0_with_one_result_per_violation_at_its_file_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jsonschema

    monkeypatch.chdir(tmp_path)
    fragment(tmp_path / "fragment.jsonl")
    code, text = run("check", "--format", "sarif", "fragment.jsonl", "missing.jsonl")
    sarif = json.loads(text)
    jsonschema.validate(sarif, SARIF_SHAPE)
    assert code == 3
    (run_,) = sarif["runs"]
    rules = run_["tool"]["driver"]["rules"]
    assert {rule["id"] for rule in rules} == {*RULES, "log-readable", "torn-tail"}
    results = run_["results"]
    assert [r["ruleId"] for r in results] == ["step-scoped"] * 5 + ["log-readable"]
    lines = (tmp_path / "fragment.jsonl").read_bytes().splitlines(keepends=True)
    for result in results[:5]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "fragment.jsonl"
        region = location["region"]
        line = lines[region["startLine"] - 1]
        assert json.loads(line)["seq"] == result["properties"]["seq"]
        assert region["byteOffset"] == len(b"".join(lines[: region["startLine"] - 1]))
    assert "[PATH_NOT_FOUND]" in results[5]["message"]["text"]


def test_sarif_of_a_clean_log_has_no_results_and_exits_zero(tmp_path: Path) -> None:
    code, text = run("check", "--format", "sarif", str(write_session(tmp_path)))
    assert code == 0 and json.loads(text)["runs"][0]["results"] == []


@pytest.mark.parametrize("compressed", [False, True])
def test_a_torn_tail_is_a_sarif_note_and_a_json_record_with_its_file_and_byte(
    tmp_path: Path, compressed: bool
) -> None:
    import jsonschema

    log = write_session(tmp_path, compressed=compressed)
    clean = log.stat().st_size
    with log.open("ab") as file:
        file.write(b"\x28\xb5\x2f\xfd\x00" if compressed else b'{"type":"tu')
    code, text = run("check", "--format", "sarif", str(log))
    sarif = json.loads(text)
    jsonschema.validate(sarif, SARIF_SHAPE)
    (run_,) = sarif["runs"]
    (note,) = run_["results"]
    assert code == 0 and note["ruleId"] == "torn-tail" and note["level"] == "note"
    assert run_["tool"]["driver"]["rules"][note["ruleIndex"]]["defaultConfiguration"] == {"level": "note"}
    location = note["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].endswith(log.name)
    assert location["region"]["byteOffset"] == clean and f"byte {clean}" in note["message"]["text"]
    code, text = run("check", "--format", "json", str(log))
    row = json.loads(text)
    assert code == 0 and row["tornAt"] == clean and f"byte {clean}, ignored" in row["torn"]


# --- real files as users have them ---------------------------------------------------------------


def zstd_tool() -> str:
    found = shutil.which("zstd")
    if found is None:
        pytest.skip("the zstd command is missing (bash scripts/setup.sh installs it)")
    return found


def test_a_log_compressed_whole_by_the_zstd_tool_is_read_like_its_plain_text(tmp_path: Path) -> None:
    plain = write_session(tmp_path / "plain", compressed=False)
    subprocess.run([zstd_tool(), "-q", str(plain)], check=True)
    whole = Path(str(plain) + ".zst")
    assert whole.read_bytes()[:4] == bytes.fromhex("28b52ffd")
    read_whole, read_plain = logfile.read_log_file(str(whole)), logfile.read_log_file(str(plain))
    assert read_whole.form is logfile.LogForm.ZSTD_WHOLE
    assert read_whole.events == read_plain.events and read_whole.log.header == read_plain.log.header
    code, text = run("check", str(whole))
    assert code == 0 and "10 events, format v4 (zstd, compressed whole), ok" in text


def test_a_directory_search_finds_zst_files_and_reads_them_as_zstd(tmp_path: Path) -> None:
    plain = write_session(tmp_path, compressed=False)
    subprocess.run([zstd_tool(), "-q", "--rm", str(plain)], check=True)
    code, text = run("check", str(tmp_path))
    assert code == 0 and "session.v4.jsonl.zst: 10 events" in text


def test_a_log_cut_into_many_frames_anywhere_is_read(tmp_path: Path) -> None:
    plain = write_session(tmp_path, compressed=False)
    data = plain.read_bytes()
    import zstandard

    pieces = [data[i : i + 37] for i in range(0, len(data), 37)]  # frames cut inside lines
    cut = tmp_path / "cut.jsonl.zst"
    cut.write_bytes(b"".join(zstandard.ZstdCompressor().compress(piece) for piece in pieces))
    assert logfile.read_log_file(str(cut)).events == logfile.read_log_file(str(plain)).events


def test_the_form_is_told_by_content_not_by_the_name(tmp_path: Path) -> None:
    plain = write_session(tmp_path / "a", compressed=False)
    zstd = write_session(tmp_path / "b", compressed=True)
    misnamed_plain = tmp_path / "plain.jsonl.zstd"
    misnamed_zstd = tmp_path / "zstd.jsonl"
    shutil.copy(plain, misnamed_plain)
    shutil.copy(zstd, misnamed_zstd)
    assert logfile.read_log_file(str(misnamed_plain)).form is logfile.LogForm.JSONL
    assert logfile.read_log_file(str(misnamed_zstd)).form is logfile.LogForm.ZSTD_FRAMES
    assert run("check", str(misnamed_plain), str(misnamed_zstd))[0] == 0


def test_a_zst_file_is_never_read_as_plain_text(tmp_path: Path) -> None:
    plain = write_session(tmp_path, compressed=False)
    subprocess.run([zstd_tool(), "-q", str(plain), "-o", str(tmp_path / "log.zst")], check=True)
    code, text = run("check", str(tmp_path / "log.zst"))
    assert code == 0 and "(zstd, compressed whole)" in text and "header line" not in text


def test_the_store_keeps_the_writer_form_and_refuses_to_append_to_a_log_compressed_whole(
    tmp_path: Path,
) -> None:
    from spec.codes import Code

    plain = write_session(tmp_path, compressed=False)
    subprocess.run([zstd_tool(), "-q", "--rm", str(plain), "-o", str(plain) + ".zstd"], check=True)
    caught = refusal(lambda: SessionStore(FileStore(str(tmp_path))).resume("s1"))
    assert caught.code is Code.CORRUPT_LOG
    assert "a store opens only the one-frame-per-flush form it writes" in caught.message


# --- explain -------------------------------------------------------------------------------------


def test_explain_shows_the_shadowed_event_and_its_replacement(tmp_path: Path) -> None:
    code, text = run("explain", str(write_session(tmp_path)))
    assert code == 0
    assert "shadowed by seq 7" in text
    assert "(replaces 5..5)" in text
    assert "seq 7: user: <tool-result short>" in text


@pytest.mark.parametrize("case", ["missing", "directory", "unreadable", "empty", "not a log"])
def test_explain_of_a_path_it_cannot_read_is_a_typed_error_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    path = tmp_path / "session.v4.jsonl"
    expected = {
        "missing": "PATH_NOT_FOUND",
        "directory": "PATH_IS_A_DIRECTORY",
        "unreadable": "PERMISSION_DENIED",
        "empty": "CORRUPT_LOG",
        "not a log": "HEADER_LINE_INVALID",
    }[case]
    if case == "directory":
        path.mkdir()
    elif case == "empty":
        path.write_bytes(b"")
    elif case == "not a log":
        path.write_text("hello\n")
    elif case == "unreadable":
        path.write_text("{}\n")
        path.chmod(0)
        if os.geteuid() == 0:  # root reads anything: have the file system refuse as it would anyone else

            def refuse(name: str, *args: object, **kwargs: object) -> object:
                raise PermissionError(13, "Permission denied", name)

            monkeypatch.setattr(logfile, "open", refuse, raising=False)
    code, text = run("explain", str(path))
    assert code == 3
    assert f"dsh-session explain: cannot read {path} [{expected}]" in text
    assert "Traceback" not in text


def test_explain_html_into_a_missing_folder_is_a_usage_error_before_any_reading(tmp_path: Path) -> None:
    code, text = run("explain", "--html", str(tmp_path / "no" / "page.html"), str(tmp_path / "missing"))
    assert code == 2
    assert "error [OUTPUT_NOT_WRITABLE]" in text and "does not exist" in text


def test_explain_of_a_log_breaking_a_core_rule_marks_the_refused_event_and_exits_one(tmp_path: Path) -> None:
    replace = {
        **{"type": "user/message", "seq": 1, "time": 1, "data": USER},
        "surfaceOp": {"op": "replace", "start": 7, "end": 7},
    }
    log = write_lines(
        tmp_path / "s.jsonl",
        V4_HEADER_LINE,
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        replace,
    )
    code, text = run("explain", str(log))
    assert code == 1
    assert "refused [REPLACE_START_NOT_FOUND]" in text and "[surface-replace]" in text


# --- rules ---------------------------------------------------------------------------------------


def test_rules_lists_every_rule_with_its_sentence_codes_and_spec_functions() -> None:
    code, text = run("rules")
    assert code == 0
    blocks = {block.split(" ", 1)[0]: block for block in text.strip().split("\n\n")}
    for rule, sentence in RULES.items():
        block = blocks[rule]
        assert " ".join(sentence.split()) in " ".join(block.split())
        assert "    spec: spec." in block and "    checked by: spec.checks." in block
    assert "      REPLACE_START_NOT_FOUND: " in blocks["surface-replace"]
    assert "      SEQ_NOT_CONTIGUOUS: " in blocks["seq-contiguous"]


def test_every_spec_function_the_rules_name_exists_and_every_core_rule_has_codes() -> None:
    import importlib

    code, text = run("rules", "--format", "json")
    rows = json.loads(text)
    assert code == 0 and [row["id"] for row in rows] == list(RULES)
    for row in rows:
        assert row["functions"] and row["checkedBy"]
        for path in row["functions"] + row["checkedBy"]:
            module, _, name = path.rpartition(".")
            assert callable(getattr(importlib.import_module(module), name)), path
        assert bool(row["codes"]) is (row["level"] == "core"), row["id"]


# --- help and the exit-code table ----------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["check"], ["explain"], ["rules"], ["copy"]])
def test_help_is_plain_text_with_help_for_every_argument(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0
    text = capsys.readouterr().out
    assert "`" not in text
    assert "exit status" in text or command == ["rules"]
    if command == ["check"]:
        assert "PATH" in text and "log files (read whatever their name" in text
        for status, meaning in EXIT_CODES:
            assert f"{status:>3}  {meaning}" in text


def test_the_readme_lists_the_exit_codes_of_check() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for status, meaning in EXIT_CODES:
        assert re.search(rf"^\| {status} \| {re.escape(meaning)} \|$", readme, re.MULTILINE), (
            status,
            meaning,
        )


# --- no tracebacks on any path -------------------------------------------------------------------


def test_an_unexpected_failure_is_reported_as_an_internal_error_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> int:
        raise RuntimeError("something unforeseen")

    monkeypatch.setattr(cli, "command_check", broken)
    monkeypatch.delenv("DSH_SESSION_TRACEBACK", raising=False)
    code, text = run("check", str(tmp_path))
    assert code == 70
    assert "internal error [INTERNAL] RuntimeError: something unforeseen" in text and "Traceback" not in text


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        ([], 2),
        (["nonsense"], 2),
        (["check"], 2),
        (["check", "--format", "xml", "x"], 2),
        (["check", "{tmp}/missing"], 3),
        (["check", "/dev/null"], 3),
        (["check", "{tmp}"], 4),
        (["explain", "{tmp}/missing"], 3),
        (["explain", "{tmp}"], 3),
        (["explain", "--html", "{tmp}/missing/out.html", "README.md"], 2),
        (["explain", "--html", "{tmp}", "README.md"], 2),
        (["rules", "--format", "yaml"], 2),
        (["copy", "--from", "memory:", "--to", "file:{tmp}/x"], 2),
        (["copy", "--from", "logs:{tmp}/missing", "--to", "sqlite:{tmp}/db.sqlite3"], 3),
    ],
)
def test_no_command_line_path_ends_in_a_traceback(tmp_path: Path, argv: list[str], status: int) -> None:
    result = run_process(*(arg.replace("{tmp}", str(tmp_path)) for arg in argv))
    assert result.returncode == status, result.stderr + result.stdout
    assert "Traceback" not in result.stderr + result.stdout


def test_a_reader_that_leaves_early_ends_the_check_quietly(tmp_path: Path) -> None:
    for index in range(40):
        fragment(tmp_path / f"{index:02}.jsonl")
    command = f"{sys.executable} -m reference check {tmp_path} | head -n 1"
    result = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )
    assert result.stdout.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr


# --- the corpus ----------------------------------------------------------------------------------


def test_check_reads_every_real_dsh_log_of_the_corpus_without_a_traceback() -> None:
    corpus = shared_dir("corpus", "dsh-0.1.0-rc.8")
    code, text = run("check", "--core-only", str(corpus))
    assert code == 3  # the seq-gap fixture is unreadable (tests/test_corpus.py)
    assert text.count("\n") >= 110
    assert "checked 110 logs: 109 ok, 0 with findings, 1 unreadable" in text


def test_the_corpus_fragments_are_grouped_and_told_that_core_only_would_pass() -> None:
    corpus = shared_dir("corpus", "dsh-0.1.0-rc.8")
    fragments = [
        corpus / "examples__headless-agent__tests__snapshots__ralph-loop__session.2.jsonl",
        corpus / "examples__headless-agent__tests__snapshots__subagent-settlement__child.replay.jsonl",
    ]
    code, text = run("check", *map(str, fragments))
    assert code == 1
    assert len(re.findall(r"^  \d+× step-scoped at seqs ", text, re.MULTILINE)) == 2
    assert text.count("--core-only (what a DSH session itself checks when it loads a log) would pass") == 2
    assert checking.check_log_file(str(fragments[0]), core_only=True).violations == ()


# --- bounded reading: hostile files are refused in bounded memory ---------------------------------

MEMORY_BOUND_KB = 200_000  # peak resident set of the checking process (ru_maxrss is in KiB on Linux)


def check_in_child(path: Path, env: dict[str, str] | None = None) -> tuple[str, int]:
    """``dsh-session check`` in a grandchild, and the peak memory of that process alone
    (RUSAGE_CHILDREN of a fresh child that ran nothing else)."""
    measure = (
        "import resource, subprocess, sys\n"
        "run = subprocess.run([sys.executable, '-m', 'reference', 'check', sys.argv[1]], capture_output=True, text=True)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "print(run.stdout)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", measure, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, **(env or {})},
        check=True,
    )
    peak, report = done.stdout.split("\n", 1)
    return report, int(peak)


def test_a_zstd_bomb_is_refused_as_decompressed_too_large_in_bounded_memory(tmp_path: Path) -> None:
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    newlines = b"\n" * (1 << 20)
    bomb = b"".join([*(compressor.compress(newlines) for _ in range(1024)), compressor.flush()])
    assert len(bomb) < 40_000  # 33 KB that decompress to 1 GiB of newlines
    path = tmp_path / "session.v4.jsonl.zstd"
    path.write_bytes(bomb)
    report, peak = check_in_child(path)
    assert "[DECOMPRESSED_TOO_LARGE]" in report and "DSH_SESSION_MAX_DECOMPRESSED_BYTES" in report
    assert peak < MEMORY_BOUND_KB, f"peak {peak} KiB"


@pytest.mark.parametrize("filler", [b"{}\n", b"\n"])
def test_megabytes_of_lines_that_are_no_events_are_refused_at_the_first_in_bounded_memory(
    tmp_path: Path, filler: bytes
) -> None:
    header = write_session(tmp_path / "store", compressed=False).read_bytes().split(b"\n", 1)[0] + b"\n"
    path = tmp_path / "session.v4.jsonl"
    path.write_bytes(header + filler * (15 * (1 << 20) // len(filler)))
    report, peak = check_in_child(path)
    assert "unreadable [CORRUPT_LOG]" in report and "at line 2 " in report
    assert peak < MEMORY_BOUND_KB, f"peak {peak} KiB"


def plugin_events(first_seq: int, count: int, text: str) -> bytes:
    """``count`` valid plugin events from ``first_seq``, each carrying ``text``."""
    return b"".join(
        json.dumps({"type": "plugin/blob", "seq": seq, "time": 1000, "data": {"text": text}}).encode() + b"\n"
        for seq in range(first_seq, first_seq + count)
    )


def test_lines_that_are_no_events_past_a_valid_head_are_refused_past_the_settable_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the first 64 KiB (the probe) the reader streams: 15 MB of ``{}`` lines after 200 KB of
    valid events are refused TOO_MANY_NON_EVENT_LINES in bounded memory, not parsed whole."""
    header = write_session(tmp_path / "store", compressed=False).read_bytes().split(b"\n", 1)[0] + b"\n"
    path = tmp_path / "session.v4.jsonl"
    head = plugin_events(0, 200, "x" * 1_000)
    path.write_bytes(header + head + b"{}\n" * (5 * (1 << 20)))
    report, peak = check_in_child(path)
    assert "unreadable [TOO_MANY_NON_EVENT_LINES]" in report and "the last at line 1202 " in report
    assert "DSH_SESSION_MAX_NON_EVENT_LINES" in report
    assert peak < MEMORY_BOUND_KB, f"peak {peak} KiB"
    path.write_bytes(header + head + b"{}\n" * 3)
    monkeypatch.setenv("DSH_SESSION_MAX_NON_EVENT_LINES", "2")
    code, text = run("check", str(path))
    assert code == 3 and "more than 2 lines are no event (the last at line 204 " in text
    monkeypatch.setenv("DSH_SESSION_MAX_NON_EVENT_LINES", "3")
    code, text = run("check", str(path))
    assert code == 3 and "[CORRUPT_LOG]" in text  # within the limit, the spec's reader names the damage


def test_checking_a_long_valid_log_holds_its_events_not_its_bytes_too(tmp_path: Path) -> None:
    """A valid 40 MB log of 1 MB lines: the checker's peak memory grows by about the events it
    holds (the decoded text), not by the file's bytes and its lines held beside them (the whole
    file read at once took over three times the file's size)."""
    header = write_session(tmp_path / "store", compressed=False).read_bytes().split(b"\n", 1)[0] + b"\n"
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    small.write_bytes(header + plugin_events(0, 1, "x"))
    large.write_bytes(header + plugin_events(0, 40, "x" * (1 << 20)))
    small_report, small_peak = check_in_child(small)
    large_report, large_peak = check_in_child(large)
    assert "1 events, format v4 (jsonl), ok" in small_report
    assert "40 events, format v4 (jsonl), ok" in large_report
    grown = (large_peak - small_peak) * 1024
    assert grown < 1.6 * large.stat().st_size, f"grew {grown} bytes for a {large.stat().st_size}-byte file"


def test_a_line_past_the_settable_limit_is_line_too_long_and_a_bad_limit_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = write_session(tmp_path / "store", compressed=False)
    longest = max(len(line) for line in log.read_bytes().split(b"\n"))
    monkeypatch.setenv("DSH_SESSION_MAX_LINE_BYTES", str(longest))
    assert run("check", str(log))[0] == 0
    monkeypatch.setenv("DSH_SESSION_MAX_LINE_BYTES", str(longest - 1))
    code, text = run("check", str(log))
    assert code == 3 and "[LINE_TOO_LONG]" in text
    monkeypatch.setenv("DSH_SESSION_MAX_LINE_BYTES", "lots")
    code, text = run("check", str(log))
    assert code == 3 and "[LIMIT_INVALID]" in text


def test_the_line_length_check_measures_every_line_exactly() -> None:
    import random

    draw = random.Random(23)
    for _ in range(2000):
        text = bytes(draw.choice(b"ab\n") for _ in range(draw.randint(0, 60)))
        limit = draw.randint(1, 20)
        too_long = max(len(line) for line in text.split(b"\n")) > limit
        try:
            logfile.check_line_lengths(text, limit, "t")
        except logfile.InputError as error:
            assert too_long and error.code == "LINE_TOO_LONG"
        else:
            assert not too_long
