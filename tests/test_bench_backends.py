"""The backend benchmark (scripts/bench_backends.py) runs at a tiny size and reports every backend
beside its floor; its figures are never asserted (speed targets live in the script, not in tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def test_the_backend_benchmark_reports_each_backend_and_its_floor(
    tmp_path: Path, postgres_cluster: Any
) -> None:
    report = tmp_path / "bench.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "scripts.bench_backends",
            "--writers",
            "2",
            "--readers",
            "1",
            "--flushes",
            "3",
            "--events-per-flush",
            "2",
            "--resume-events",
            "40",
            "--reader-sessions",
            "1",
            "--postgres-dsn",
            postgres_cluster.dsn,
            "--json",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    rows = json.loads(report.read_text())["rows"]
    assert [(row["backend"], row["mode"]) for row in rows] == [
        (backend, mode) for backend in ("file", "sqlite", "postgres") for mode in ("store", "floor")
    ]
    assert all(row["events_per_s"] > 0 and row["flush_p99_ms"] > 0 for row in rows)
    assert all(row["resume_ms"] > 0 for row in rows if row["mode"] == "store")
    assert "events/s" in completed.stdout
