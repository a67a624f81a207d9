#!/usr/bin/env bash
# Runs every test (Hypothesis profile: $HYPOTHESIS_PROFILE, default "ci") on parallel workers
# (pytest-xdist): one per core, at most 4, or $DSH_TEST_WORKERS (0 runs them in this process).
# --dist worksteal hands out tests one by one and lets an idle worker take queued ones from a busy
# one, so the long tests spread: each broken subject of tests/test_mutation_score.py is a test of
# its own (they used to share one module fixture, the CI's long pole on one worker under
# --dist loadfile). A module-scoped fixture is then built once per worker that runs a test of its
# module (tests/test_copy.py's corpus store, tests/test_vectors_fresh.py's generation,
# tests/test_explain_html.py's page): a few seconds each. (--dist loadgroup would keep a module on
# one worker, but with pytest 9.2 pytest-xdist 3.8 cannot tag node ids with their group, so it
# silently acts as "load".)
# Every worker starts its own throwaway PostgreSQL cluster (tests/conftest.py) on its own socket.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${DSH_TEST_WORKERS:-$(nproc 2>/dev/null || echo 2)}
if [ "$workers" -gt 4 ]; then workers=4; fi
exec .venv/bin/python -m pytest -n "$workers" --dist worksteal "$@"
