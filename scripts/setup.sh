#!/usr/bin/env bash
# Sets up everything: a virtual environment in .venv with the project and its dev tools, and the
# system tools some tests drive for real (PostgreSQL's server binaries, strace, zstd, Chromium).
# Quiet when all is well; pip's own errors, and anything it says that is not known noise, still show.
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1

# pip, with what is noise on a healthy install filtered out: setuptools' notice that an editable
# install exists, and pip's note about index locations in a machine-wide config that do not exist.
# On a failure everything pip said is shown.
quiet_pip() {
    local log status=0
    log=$(mktemp)
    .venv/bin/python -m pip "$@" >"$log" 2>&1 || status=$?
    if [ "$status" -ne 0 ]; then
        cat "$log" >&2
    else
        awk '
            /BuildBackendWarning: Editable installation/ { skip = 1; bangs = 0; next }
            skip == 1 && /^ *!!$/ { if (++bangs == 2) skip = 2; next }
            skip == 2 { skip = 0; next }    # the source line Python prints after the warning
            skip == 1 { next }
            /^WARNING: Location .* is ignored: it is neither a file nor a directory\.$/ { next }
            { print }
        ' "$log" >&2
    fi
    rm -f "$log"
    return "$status"
}

python3 -m venv .venv
quiet_pip install --quiet --upgrade pip
quiet_pip install --quiet -e '.[dev]'

# System packages, installed with apt-get only when missing and only as root; each says what is
# skipped when it cannot be installed.
apt_install() {  # apt_install PACKAGE... ; true when they are installed
    if ! command -v apt-get >/dev/null 2>&1 || [ "$(id -u)" -ne 0 ]; then
        return 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; }
}

# strace, for the conformance suite's trace family (conformance/CRASH-STATES.md). Without it, or
# where ptrace is denied, that family says it did not run; nothing else needs it.
if ! command -v strace >/dev/null 2>&1; then
    apt_install strace \
        || echo "setup: strace is missing (apt-get install strace); the trace family will report that it did not run" >&2
fi

# PostgreSQL: only the binaries (initdb, pg_ctl, postgres) are needed; scripts/pg_cluster.py runs
# its own cluster in a temporary directory.
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    apt_install postgresql \
        || echo "setup: the PostgreSQL server (initdb) is missing and cannot be installed from here;" \
                "install the 'postgresql' package, or the PostgreSQL tests are skipped" >&2
fi

# zstd, the standard command: the CLI tests read logs compressed whole by it.
if ! command -v zstd >/dev/null 2>&1; then
    apt_install zstd || echo "setup: zstd is missing (apt-get install zstd); its CLI tests are skipped" >&2
fi

# Chromium (Debian's package): the explain page is rendered and photographed by it in the tests.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    apt_install chromium chromium-driver fonts-dejavu-core \
        || echo "setup: Chromium is missing (apt-get install chromium); the explain page's browser tests are skipped" >&2
fi

# Node 22 and DSH 0.1.0-rc.8's published packages from the npm registry, for the DSH subject and
# its certification (tests/test_dsh_subject.py, tests/test_certify_dsh.py). Without the registry
# those tests say why they are skipped; nothing else needs them.
if ! bash scripts/install-dsh.sh; then
  echo "setup: DSH was not installed (see above); the DSH subject's tests will be skipped" >&2
fi
