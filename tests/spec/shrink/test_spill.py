"""Spill: an oversized tool result is saved whole before it enters the log, the log holds a preview
and how to fetch the rest, and the saved text reads back byte for byte (SPEC-DECISIONS D8; seed
002; notes/dsh-compaction-projection §10, §12.1 I14)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from shrink_builders import Conversation, assert_log_clean, data_of, new_session

from reference.shrink.spill import DirectorySpillStore, MemorySpillStore, SpillPolicy, encode_spill_text
from spec.codes import Code, SpecError
from spec.log.json import JsonValue
from spec.log.session import ABSENT
from spec.shrink.spill import (
    BASE_MAX_INLINE_TOKENS,
    SPILL_RETRIEVAL_HINT,
    derive_spill_file_name,
    derive_spill_session_dir,
    is_spill_candidate,
    plan_max_inline_tokens,
)
from spec.shrink.tokens import BLOCK_OVERHEAD, estimate_content
from tests.powerloss_harness import ProbedFileSystem


def text_content(text: str) -> list[JsonValue]:
    return [{"type": "text", "text": text}]


def big_text(units: int = 40_000) -> str:
    return "".join(f"line {n:05d}: {'abcdefgh' * 3}\n" for n in range(units // 36 + 1))


def policy(limit: int | None = 1_000, store: Any = None) -> SpillPolicy:
    return SpillPolicy(limit, store if store is not None else MemorySpillStore())


def only_text(outcome_content: Any) -> str:
    (block,) = outcome_content
    return str(block["text"])


# --- the policy -------------------------------------------------------------------------------------


def test_spill_is_on_by_default_at_the_seed_s_12500_tokens_where_a_store_is_configured() -> None:
    assert SpillPolicy(store=MemorySpillStore()).max_inline_tokens == BASE_MAX_INLINE_TOKENS == 12_500
    assert SpillPolicy().max_inline_tokens is None, "no store: nowhere to spill to"
    assert plan_max_inline_tokens(ABSENT, True) == 12_500 and plan_max_inline_tokens(ABSENT, False) is None
    assert plan_max_inline_tokens(None, True) is None and plan_max_inline_tokens(300, False) == 300


def test_by_default_a_result_just_over_12500_tokens_spills_and_one_at_12500_does_not() -> None:
    policy_ = SpillPolicy(store=MemorySpillStore())
    at_limit = "a" * (4 * (12_500 - BLOCK_OVERHEAD))  # 4 UTF-16 units a token
    assert estimate_content(text_content(at_limit)) == 12_500
    assert policy_.apply("s1", "grep", "c1", text_content(at_limit)).spilled is None
    assert policy_.apply("s1", "grep", "c1", text_content(at_limit + "aaaa")).spilled is not None


def test_max_inline_tokens_none_turns_the_default_off() -> None:
    store = MemorySpillStore()
    outcome = SpillPolicy(max_inline_tokens=None, store=store).apply(
        "s1", "grep", "c1", text_content(big_text(60_000))
    )
    assert outcome.spilled is None


def test_without_a_limit_nothing_spills() -> None:
    store = MemorySpillStore()
    outcome = SpillPolicy(None, store).apply("s1", "grep", "c1", text_content(big_text()))
    assert outcome.spilled is None and only_text(outcome.content) == big_text()


def test_a_result_over_the_limit_is_saved_whole_and_logged_as_a_preview_with_its_locator() -> None:
    store = MemorySpillStore()
    text = big_text()
    outcome = policy(1_000, store).apply("s1", "grep", "c1", text_content(text))
    assert outcome.spilled is not None
    logged = only_text(outcome.content)
    assert estimate_content(outcome.content) <= 1_000
    assert outcome.spilled.locator in logged and SPILL_RETRIEVAL_HINT in logged
    assert logged.startswith(text[:100]) and "Omitted" in logged
    assert store.read_text(outcome.spilled.locator) == text


def test_the_preview_keeps_a_head_and_a_tail_of_the_original() -> None:
    text = big_text()
    logged = only_text(policy(1_000).apply("s1", "grep", "c1", text_content(text)).content)
    preview = logged.split("\n\n(")[0]
    assert text.startswith(preview[:1_000]) and text.endswith(preview[-500:])


def test_a_result_exactly_at_the_limit_stays_inline() -> None:
    content = text_content("z" * 3_984)
    assert estimate_content(content) == 1_000
    assert policy(1_000).apply("s1", "grep", "c1", content).spilled is None


class WatchedStore(MemorySpillStore):
    def __init__(self) -> None:
        super().__init__()
        self.saved: list[object] = []

    def save_text(
        self, session_id: str, tool_name: str, call_id: str, label: str, suggested_name: str, content: str
    ) -> Any:
        self.saved.append(content)
        return super().save_text(session_id, tool_name, call_id, label, suggested_name, content)


def test_a_result_with_a_non_text_block_stays_inline_and_nothing_is_saved() -> None:
    store = WatchedStore()
    content: list[JsonValue] = [*text_content(big_text()), {"type": "image", "data": "x"}]
    assert policy(store=store).apply("s1", "grep", "c1", content).spilled is None
    assert store.saved == []


def test_the_read_tool_and_nested_calls_never_spill() -> None:
    content = text_content(big_text())
    assert policy().apply("s1", "read", "c1", content).spilled is None
    assert policy().apply("s1", "grep", "c1", content, nested=True).spilled is None
    assert is_spill_candidate("grep", False) and not is_spill_candidate("read", False)


def test_a_failing_store_keeps_the_result_inline() -> None:
    fs = ProbedFileSystem()
    fs.fail_next("write_new", errno.ENOSPC)
    text = big_text()
    outcome = policy(store=DirectorySpillStore("/spill", fs=fs)).apply("s1", "grep", "c1", text_content(text))
    assert outcome.spilled is None and only_text(outcome.content) == text


def test_no_store_or_no_owner_keeps_the_result_inline() -> None:
    content = text_content(big_text())
    assert SpillPolicy(100, None).apply("s1", "grep", "c1", content).spilled is None
    assert policy(100).apply(None, "grep", "c1", content).spilled is None


def test_a_limit_too_small_for_the_notice_keeps_the_result_inline() -> None:
    text = big_text()
    outcome = policy(10).apply("s1", "grep", "c1", text_content(text))
    assert outcome.spilled is None and only_text(outcome.content) == text


def test_a_negative_or_fractional_limit_is_refused() -> None:
    for bad in (-1, 1.5):
        with pytest.raises(SpecError) as caught:
            SpillPolicy(bad, MemorySpillStore())
        assert caught.value.code == Code.SPILL_CONFIG_INVALID


@settings(max_examples=25)
@given(text=st.text(min_size=1, max_size=3_000), limit=st.integers(min_value=60, max_value=400))
def test_a_spilled_result_is_bounded_and_smaller_and_its_text_reads_back_unchanged(
    text: str, limit: int
) -> None:
    store = MemorySpillStore()
    content = text_content(text)
    outcome = SpillPolicy(limit, store).apply("s1", "grep", "c1", content)
    if outcome.spilled is None:
        assert outcome.content == content
        return
    assert estimate_content(outcome.content) <= limit < estimate_content(content)
    assert store.read_text(outcome.spilled.locator) == text


def test_the_spilled_result_enters_the_log_already_bounded() -> None:
    session = new_session()
    talk = Conversation(session)
    talk.prompt("search")
    store = MemorySpillStore()
    outcome = policy(1_000, store).apply(session.id, "grep", "call-2", text_content(big_text()))
    talk.tool_step(only_text(outcome.content))
    talk.end_turn()
    logged = [event for event in session.events if event["type"] == "tool/result"]
    assert outcome.spilled is not None
    assert outcome.spilled.locator in data_of(logged[0])["message"]["content"][0]["content"][0]["text"]
    assert_log_clean(session)


# --- the stores -------------------------------------------------------------------------------------


def test_the_directory_store_writes_the_exact_utf8_bytes_under_a_per_session_directory(
    tmp_path: Path,
) -> None:
    text = "naïve — 数据 🚀\n" * 100
    ref = DirectorySpillStore(str(tmp_path), token=lambda: "0123456789ab").save_text(
        "s1", "grep", "c1", "result", "grep.txt", text
    )
    path = Path(ref.locator)
    assert path.parent.name == derive_spill_session_dir("s1") and path.name == "0123456789ab-grep.txt"
    assert path.read_bytes() == text.encode("utf-8")
    assert ref.bytes == len(text.encode("utf-8"))


def test_the_directory_store_keeps_its_files_private(tmp_path: Path) -> None:
    ref = DirectorySpillStore(str(tmp_path / "spill")).save_text(
        "s1", "grep", "c1", "result", "grep.txt", "x"
    )
    assert stat.S_IMODE(os.stat(ref.locator).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(Path(ref.locator).parent).st_mode) == 0o700


def test_two_spills_with_the_same_name_never_collide(tmp_path: Path) -> None:
    store = DirectorySpillStore(str(tmp_path))
    first = store.save_text("s1", "grep", "c1", "result", "grep.txt", "one")
    second = store.save_text("s1", "grep", "c2", "result", "grep.txt", "two")
    assert first.locator != second.locator
    assert (store.read_text(first.locator), store.read_text(second.locator)) == ("one", "two")


def test_a_lone_surrogate_survives_a_spill_and_its_readback(tmp_path: Path) -> None:
    text = "before \ud800 after"
    for store in (DirectorySpillStore(str(tmp_path)), MemorySpillStore()):
        ref = store.save_text("s1", "grep", "c1", "result", "grep.txt", text)
        assert store.read_text(ref.locator) == text
    assert encode_spill_text(text) == b"before \xed\xa0\x80 after"


def test_a_saved_spill_survives_a_power_cut() -> None:
    fs = ProbedFileSystem()
    store = DirectorySpillStore("/var/spill", fs=fs)
    ref = store.save_text("s1", "grep", "c1", "result", "grep.txt", "kept whole")
    after = fs.crash()
    assert DirectorySpillStore("/var/spill", fs=after).read_text(ref.locator) == "kept whole"


def test_reading_an_unknown_locator_is_refused(tmp_path: Path) -> None:
    for store in (DirectorySpillStore(str(tmp_path)), MemorySpillStore()):
        with pytest.raises(SpecError) as caught:
            store.read_text(str(tmp_path / "nope"))
        assert caught.value.code == Code.SPILL_NOT_FOUND
    with pytest.raises(SpecError):
        DirectorySpillStore(str(tmp_path)).read_text("/etc/passwd")


def test_a_spill_directory_name_is_stable_and_hides_the_session_id() -> None:
    name = derive_spill_session_dir("my/session")
    assert name == derive_spill_session_dir("my/session") and name != derive_spill_session_dir("other")
    assert name.startswith("session-") and len(name) == len("session-") + 12 and "/" not in name


def test_a_spill_file_name_escapes_the_suggested_name() -> None:
    assert derive_spill_file_name("abc", "../etc.txt") == "abc-..~002Fetc.txt"
    assert derive_spill_file_name("abc", "..") == "abc-~002E~002E"
