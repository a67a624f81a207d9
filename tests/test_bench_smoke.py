"""The benchmark script keeps working: a tiny run builds its log through the reference, runs every
group of measurements and writes its JSON. Nothing here is timed (speed lives in the script)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bench(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``python -m scripts.bench --sizes 200 ARGUMENTS``, which must succeed."""
    command = [sys.executable, "-m", "scripts.bench", "--sizes", "200", *arguments]
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
    assert result["resident_bytes"] > 0 and result["plain_bytes"] > 0
    assert "resume (zstd)" in completed.stdout and "load average" in completed.stdout


def test_the_profiles_name_where_the_time_and_the_memory_go(tmp_path: Path) -> None:
    for operation, expected in (("fork", "fold_seed"), ("append", "fsync"), ("memory", "FrozenDict")):
        completed = bench("--profile", operation, "--logs", str(tmp_path))
        assert f"--- {operation} at 200 events" in completed.stdout
        assert expected in completed.stdout, completed.stdout
