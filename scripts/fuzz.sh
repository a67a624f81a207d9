#!/usr/bin/env bash
# Fuzz one harness (or `all`, one after the other) for SECONDS each with atheris/libFuzzer:
#     scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]
# Each run works on a copy of the seed corpus (fuzz/corpus/TARGET) in a temporary folder, so the
# repository's corpus never grows (the regression inputs, fuzz/regressions/TARGET, are replayed by
# tests/test_fuzz.py: one whose finding is still open would stop every run at once); with
# FUZZ_MERGE=1 the inputs that add coverage are merged back into fuzz/corpus/TARGET afterwards.
# Limits: -max_total_time=SECONDS, -rss_limit_mb=2048, -timeout=10 (seconds per input).
# Exit status: 0 when every run ends without a finding; 1 on a finding, after printing where its
# input was saved (replay it with `python -m fuzz TARGET FILE`; keep it as a regression input by
# copying it into fuzz/regressions/TARGET/); 2 on a usage error.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if [[ $# -lt 2 || ! $2 =~ ^[0-9]+$ ]]; then
    echo "usage: scripts/fuzz.sh TARGET|all SECONDS [libFuzzer flags...]" >&2
    exit 2
fi
target=$1 seconds=$2
shift 2
known=$("$PYTHON" -c 'from fuzz import TARGETS; print(" ".join(TARGETS))') || exit 2
if [[ $target == all ]]; then
    targets=$known
elif [[ " $known " == *" $target "* ]]; then
    targets=$target
else
    echo "unknown target $target; one of: all $known" >&2
    exit 2
fi

status=0
for name in $targets; do
    work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-$name.XXXXXX")
    mkdir -p "$work/corpus" "$work/findings"
    cp -R "fuzz/corpus/$name/." "$work/corpus/"
    "$PYTHON" -m fuzz "$name" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$work/findings/" "$@" "$work/corpus" >"$work/log" 2>&1
    code=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
    echo "$name: ${runs:-?} inputs in ${seconds} s, libFuzzer exit $code"
    findings=$(find "$work/findings" -type f)
    if [[ $code -ne 0 || -n $findings ]]; then
        status=1
        grep -E -A25 '^=== Uncaught Python exception|^==[0-9]+== ERROR|Finding' "$work/log" | head -40
        for file in $findings; do echo "$name: finding saved at $file"; done
        echo "$name: log at $work/log"
        continue
    fi
    if [[ ${FUZZ_MERGE:-0} == 1 ]]; then
        "$PYTHON" -m fuzz "$name" -merge=1 "fuzz/corpus/$name" "$work/corpus" >>"$work/log" 2>&1
    fi
    rm -rf "$work"
done
exit $status
