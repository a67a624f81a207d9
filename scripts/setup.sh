#!/usr/bin/env bash
# Sets up everything: a virtual environment in .venv with the project and its dev tools.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'
# strace, for the conformance suite's trace family (conformance/CRASH-STATES.md). Without it, or
# where ptrace is denied, that family says it did not run; nothing else needs it.
if ! command -v strace >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq strace >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq strace >/dev/null 2>&1; } \
      || echo "setup: could not install strace; the trace family will report that it did not run" >&2
  else
    echo "setup: strace is missing (apt-get install strace); the trace family will report that it did not run" >&2
  fi
fi
