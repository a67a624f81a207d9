#!/usr/bin/env bash
# The formatter and the linter (ruff), mypy --strict over the three packages, then CrossHair on the
# spec's contracts within a budget.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff format --check --quiet spec reference conformance tests scripts fuzz
.venv/bin/ruff check --quiet spec reference conformance tests scripts fuzz
.venv/bin/python -m mypy --strict spec reference conformance
.venv/bin/python -m scripts.crosshair_budget
