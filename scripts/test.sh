#!/usr/bin/env bash
# Runs every test (Hypothesis profile: $HYPOTHESIS_PROFILE, default "ci") on parallel workers
# (pytest-xdist): one per core, at most 4, or $DSH_TEST_WORKERS (0 runs them in this process).
# --dist loadfile keeps the tests of a file on one worker (module fixtures built once). The broken
# subjects of tests/test_mutation_score.py are each a test of their own and meet the vectors first,
# so that file is no longer one long fixture. (--dist worksteal spread them further, but a run under
# it turned tests/test_broken_engines.py's stale-cache catch red twice in three runs: see
# docs/choices.md, "Replay, the kill check's deadline…". --dist loadgroup would keep a module on one
# worker, but with pytest 9.2 pytest-xdist 3.8 cannot tag node ids with their group, so it silently
# acts as "load".)
# Every worker starts its own throwaway PostgreSQL cluster (tests/conftest.py) on its own socket.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${DSH_TEST_WORKERS:-$(nproc 2>/dev/null || echo 2)}
if [ "$workers" -gt 4 ]; then workers=4; fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadfile "$@"
