#!/usr/bin/env bash
# Sets up everything: a virtual environment in .venv with the project and its dev tools, and the
# PostgreSQL server binaries the database backend's tests start a throwaway cluster with.
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

# PostgreSQL: only the binaries (initdb, pg_ctl, postgres) are needed; tests/pg_cluster.py runs
# its own cluster in a temporary directory. Installed only when missing, and only as root.
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    else
        echo "setup: the PostgreSQL server (initdb) is missing and cannot be installed from here;" \
             "install the 'postgresql' package, or the PostgreSQL tests are skipped" >&2
    fi
fi

# Node 22 and DSH 0.1.0-rc.8's published packages from the npm registry, for the DSH subject and
# its certification (tests/test_dsh_subject.py, tests/test_certify_dsh.py). Without the registry
# those tests say why they are skipped; nothing else needs them.
if ! bash scripts/install-dsh.sh; then
  echo "setup: DSH was not installed (see above); the DSH subject's tests will be skipped" >&2
fi
