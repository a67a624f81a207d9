"""The benchmark script keeps working: a tiny run builds its log through the reference, runs every
group of measurements and writes its JSON. Nothing here is timed (speed lives in the script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def bench(*arguments: str, size: str = "200") -> subprocess.CompletedProcess[str]:
    """``python -m scripts.bench --sizes SIZE ARGUMENTS``, which must succeed."""
    command = [sys.executable, "-m", "scripts.bench", "--sizes", size, *arguments]
    completed = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert completed.returncode == 0, completed.stderr
    return completed


def test_the_benchmark_runs_every_measurement_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    completed = bench("--runs", "1", "--json", str(out))
    result = json.loads(out.read_text())["results"][0]
    assert result["events"] == 200
    for key in (
        "resume",
        "floor_json",
        "append_flush",
        "floor_sqlite",
        "append_per_event",
        "fork",
        "publish",
    ):
        assert result[key]["cpu"] >= 0 and result[key]["wall"] > 0, key
    for key in ("floor_compress_fsync", "check_cli", "floor_cli", "check_log", "floor_parse"):
        assert result[key]["wall"] > 0, key
    # A tiny resume may shrink the process (it hands freed pages back): only the figure's presence
    assert isinstance(result["resident_bytes"], int) and result["plain_bytes"] > 0
    assert "resume (zstd)" in completed.stdout and "load average" in completed.stdout


def test_the_profiles_name_where_the_time_and_the_memory_go(tmp_path: Path) -> None:
    for operation, expected in (("fork", "fold_seed"), ("append", "fsync"), ("memory", "FrozenDict")):
        completed = bench("--profile", operation, "--logs", str(tmp_path))
        assert f"--- {operation} at 200 events" in completed.stdout
        assert expected in completed.stdout, completed.stdout


def test_the_peer_benchmark_runs_dsh_and_the_reference_on_the_same_tiny_log(tmp_path: Path) -> None:
    """``--peer dsh`` at 300 events, one run: DSH writes the log, both sides read the same events
    (the script refuses to print a table otherwise) and every row has both sides' figures."""
    from scripts.bench_peer import missing_peer

    why = missing_peer()
    if why is not None:
        pytest.skip(f"the peer benchmark needs DSH: {why}")
    out = tmp_path / "peer.json"
    completed = bench("--peer", "dsh", "--runs", "1", "--appends", "500", "--json", str(out), size="300")
    result = json.loads(out.read_text())["results"][0]
    assert 250 <= result["events"] <= 300
    for row in ("first", "again", "warm", "check", "startup", "append"):
        for side in ("reference", "dsh"):
            assert result[row][side]["cpu"] > 0, (row, side)
    assert isinstance(result["memory"]["reference"], int) and isinstance(result["memory"]["dsh"], int)
    assert result["append"]["events"] == 500
    assert "resume, DSH's v0 file (first sight)" in completed.stdout
    assert "both sides' events hash to" in completed.stdout


def test_the_peer_events_hash_tells_event_lists_apart_whatever_the_key_order() -> None:
    """The hash both sides print: a side that drops an event hashes otherwise; key order is not
    part of it (DSH and the reference order an event's keys differently)."""
    from scripts import bench_peer

    events = [{"seq": 0, "type": "turn/start", "data": {"turn": 1}}, {"seq": 1, "type": "turn/end"}]
    assert bench_peer.events_hash(events) != bench_peer.events_hash(events[:1])
    assert bench_peer.events_hash(events) == bench_peer.events_hash(
        [dict(reversed(e.items())) for e in events]
    )
