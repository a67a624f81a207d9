#!/usr/bin/env bash
# Runs every test (Hypothesis profile: $HYPOTHESIS_PROFILE, default "ci").
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python -m pytest "$@"
