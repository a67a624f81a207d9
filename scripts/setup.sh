#!/usr/bin/env bash
# Sets up everything: a virtual environment in .venv with the project and its dev tools.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
