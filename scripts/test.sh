#!/usr/bin/env bash
# Runs every test (Hypothesis profile: $HYPOTHESIS_PROFILE, default "ci") on parallel workers
# (pytest-xdist): one per core, at most 4, or $DSH_TEST_WORKERS (0 runs them in this process).
# --dist loadgroup keeps the tests of an xdist_group on one worker, so that an expensive module
# fixture (tests/test_mutation_score.py) is computed once; every worker starts its own throwaway
# PostgreSQL cluster (tests/conftest.py), each on its own unix socket.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${DSH_TEST_WORKERS:-$(nproc 2>/dev/null || echo 2)}
if [ "$workers" -gt 4 ]; then workers=4; fi
exec .venv/bin/python -m pytest -n "$workers" --dist loadgroup "$@"
