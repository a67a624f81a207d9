"""The dsh-session command: check logs (exit 0/1/2), explain a log, list the rules."""

from __future__ import annotations

import io
import json
from pathlib import Path

from shared_material import shared_dir

from reference.cli import main
from reference.persistence.filestore import FileStore
from reference.store import SessionStore

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


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(list(argv), out)
    return code, out.getvalue()


def test_check_of_a_well_formed_log_exits_zero_and_says_ok(tmp_path: Path) -> None:
    code, text = run("check", str(write_session(tmp_path)))
    assert code == 0
    assert "10 events, format v4, ok" in text


def test_check_of_a_log_that_breaks_a_relational_rule_exits_one_and_names_the_rule(tmp_path: Path) -> None:
    log = tmp_path / "session.v4.jsonl"
    lines = [
        {"type": "session", "version": 4, "id": "s", "createdAt": 1, "delegationDepth": 0, "isSeeded": False},
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {"type": "turn/start", "seq": 1, "time": 1, "data": {"turn": 2}},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, text = run("check", str(log))
    assert code == 1
    assert "seq 1" in text and "[turn-" in text


def test_check_of_a_corrupt_log_exits_two_with_the_corrupt_log_code(tmp_path: Path) -> None:
    log = write_session(tmp_path, compressed=False)
    data = log.read_bytes().split(b"\n")
    data[2] = b"{not json"
    log.write_bytes(b"\n".join(data))
    code, text = run("check", str(log))
    assert code == 2
    assert "CORRUPT_LOG" in text


def test_check_json_output_is_one_object_per_log(tmp_path: Path) -> None:
    code, text = run("check", "--json", str(write_session(tmp_path)))
    row = json.loads(text)
    assert code == 0 and row["events"] == 10 and row["violations"] == []


def test_explain_shows_the_shadowed_event_and_its_replacement(tmp_path: Path) -> None:
    code, text = run("explain", str(write_session(tmp_path)))
    assert code == 0
    assert "shadowed by seq 7" in text
    assert "(replaces 5..5)" in text
    assert "seq 7: user: <tool-result short>" in text


def test_rules_lists_every_rule_with_its_meaning() -> None:
    from spec.checks.log import RULES

    code, text = run("rules")
    assert code == 0
    for rule in RULES:
        assert rule in text


def test_check_reads_every_real_dsh_log_of_the_corpus_without_a_traceback() -> None:
    corpus = shared_dir("corpus", "dsh-0.1.0-rc.8")
    code, text = run("check", "--core-only", str(corpus))
    assert code in (0, 1, 2)
    assert text.count("\n") >= 110
