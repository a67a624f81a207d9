#!/usr/bin/env bash
# mypy --strict over the three packages, then CrossHair on the spec's contracts within a budget.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m mypy --strict spec reference conformance
.venv/bin/python scripts/crosshair_budget.py
