"""The explain page's worked example: a forked and compacted log, drawn by
``dsh-session explain --html`` and photographed by headless Chromium.

``python -m scripts.explain_example`` rewrites ``docs/explain-example.png`` (and prints where the
log and the page were written); ``tests/test_explain_html.py`` builds the same log and takes the
same screenshot in its own temporary folder. Chromium is Debian's ``chromium`` package
(``bash scripts/setup.sh`` installs it), run headless with the flags this machine needs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from conformance.builders import user_message
from reference.persistence.filestore import FileStore
from reference.session import Session
from reference.shrink.compaction import CompactionEngine
from reference.store import SessionStore
from reference.summarizers import DeterministicSummarizer

ROOT: Final = Path(__file__).resolve().parent.parent

EXAMPLE_PNG: Final = ROOT / "docs" / "explain-example.png"
CHROMIUM_FLAGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
MODEL: Final = {"kind": "model", "provider": "demo", "model": "demo-1"}


def _answer(turn: int, step: int, content: list[dict[str, object]]) -> dict[str, object]:
    message = {"id": f"a{turn}.{step}", "role": "assistant", "source": MODEL, "content": content}
    return {"turn": turn, "step": step, "message": message}


def _result(turn: int, step: int, call: str, text: str, message_id: str) -> dict[str, object]:
    block = {"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}]}
    message = {
        "id": message_id,
        "role": "user",
        "source": {"kind": "tool", "callId": call},
        "content": [block],
    }
    return {"turn": turn, "step": step, "message": message}


def _plain_turn(session: Session, turn: int, question: str, reply: str) -> None:
    """One completed turn: the user asks, the model answers in one step."""
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user_message(f"u{turn}", question), "append")
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("assistant/message", _answer(turn, 1, [{"type": "text", "text": reply}]), "append")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def build_forked_compacted_log(root: Path) -> Path:
    """A parent session of two turns, forked after them; the child reads a long file (a tool
    result, later pruned), asks again, is compacted between turns, then starts a turn that the
    log leaves open — with one tool result that answers no call, so that a violation shows.
    Returns the child's log file (plain JSONL)."""
    clock = iter(range(1_700_000_000_000, 1_700_000_100_000, 250))
    store = SessionStore(FileStore(str(root), compressed=False), clock=lambda: next(clock))
    parent = store.create("parent", meta={"cwd": "/work/demo"})
    for turn, question, reply in (
        (1, "What does the session log hold?", "Events numbered 0, 1, 2... that are never changed."),
        (2, "And the surface?", "What the model sees: a projection of the log."),
    ):
        _plain_turn(parent, turn, question, reply)
    child = store.fork("parent", child_id="child")
    base = len(child.events)
    call = {
        "type": "tool-call",
        "id": "c1",
        "name": "read_file",
        "arguments": '{"path": "spec/log/surface.py"}',
    }
    child.append("turn/start", {"turn": 3})
    child.append("user/message", user_message("u3", "Read spec/log/surface.py and summarise it."), "append")
    child.append("step/start", {"turn": 3, "step": 1})
    child.append("assistant/message", _answer(3, 1, [call]), "append")
    child.append(
        "tool/call",
        {"turn": 3, "step": 1, "callId": "c1", "name": "read_file", "arguments": call["arguments"]},
    )
    long_text = "def plan_replace(nodes, op): ... " * 120
    child.append("tool/result", _result(3, 1, "c1", long_text, "r1"), "append")
    child.append("step/end", {"turn": 3, "step": 1})
    child.append("step/start", {"turn": 3, "step": 2})
    pruned_seq = base + 5
    price = {
        "shadowedRange": {"start": pruned_seq, "end": pruned_seq},
        "shadowedSeqs": [pruned_seq],
        "shadowedTokenCount": 1200,
    }
    child.append("compaction/prune", price)
    child.append(
        "tool/result",
        _result(3, 1, "c1", "[pruned: 3,960 characters; read it again if needed]", "r1"),
        {"op": "replace", "start": pruned_seq, "end": pruned_seq},
        [pruned_seq],
    )
    child.append(
        "assistant/message",
        _answer(3, 2, [{"type": "text", "text": "It plans and applies surface ops."}]),
        "append",
    )
    child.append("step/end", {"turn": 3, "step": 2})
    child.append("turn/end", {"turn": 3, "reason": {"kind": "completed"}})
    _plain_turn(
        child,
        4,
        "Which rule stops a replace from hiding a node?",
        "Provenance: a replace cites every node it shadows.",
    )
    CompactionEngine(DeterministicSummarizer()).compact_now(child)
    child.append("turn/start", {"turn": 5})
    child.append("user/message", user_message("u5", "Now fork me again."), "append")
    child.append("step/start", {"turn": 5, "step": 1})
    child.append(
        "tool/result", _result(5, 1, "c9", "an answer to a call that was never made", "r9"), "append"
    )
    store.close("child")
    store.close("parent")
    return next(path for path in root.rglob("session.v4.jsonl") if path.parent.name == "child")


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    return None


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2000, scale: float = 1.0) -> None:
    """Photograph ``page`` with headless Chromium into ``png`` (a fresh profile each time); the
    image is ``width`` x ``height`` CSS pixels times ``scale``."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium is not installed (bash scripts/setup.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="dsh-chromium-") as profile:
        command = [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={png}",
            f"--window-size={width},{height}",
            f"--force-device-scale-factor={scale}",
            page.resolve().as_uri(),
        ]
        subprocess.run(command, check=True, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.explain_example", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", default=str(EXAMPLE_PNG), help=f"the screenshot to write (default {EXAMPLE_PNG})"
    )
    args = parser.parse_args(argv)
    from reference.cli import main as dsh_session

    out = Path(args.out).resolve()
    work = Path(tempfile.mkdtemp(prefix="dsh-explain-example-"))
    log = build_forked_compacted_log(work / "sessions")
    page = work / "explain.html"
    os.chdir(work)  # the page names the log as given: a short relative path reads better
    status = dsh_session(["explain", "--html", str(page), str(log.relative_to(work))])
    if status != 0:
        return status
    screenshot(page, out, height=2420, scale=0.75)  # three quarters: the same page, a smaller file
    print(f"log {log}\npage {page}\nscreenshot {out} ({os.path.getsize(out)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
