#!/usr/bin/env bash
# Mutation testing with cosmic-ray over spec/ and the named parts of reference/ (scripts/mutation.py):
#     scripts/mutation.sh [MODULE ...] [--lanes fast,drt,stateful] [--jobs N] [--timeout S] [--fresh]
#     scripts/mutation.sh --changed BASE          the fast lane on the mutants of the lines changed since BASE
#                                                 (BASE "ledger": since the commit that last saved the ledger; CI runs it)
#     scripts/mutation.sh MODULE ... --again      judge those modules' survivors again (after new vectors)
#     scripts/mutation.sh report [--markdown docs/mutation.md]   (from the ledger, docs/mutation-ledger.json)
#     scripts/mutation.sh save SESSION ...       save session databases (another tree's) into the ledger
# MODULE: a file, folder or dotted module inside the scope (default: all of it). The session
# database (.scratch/mutation/session.sqlite) keeps every result as it comes: run the same command
# again after an interruption and it resumes; each run saves its results into docs/mutation-ledger.json
# (in the repository: a session made anew, on any machine, starts from it) and writes the report per
# module and rule from it to docs/mutation.md.
# The fast lane runs for each mutant only the vector cases that execute its statement (a coverage map
# in .scratch/mutation/coverage.json, traced once per tree); the drt and stateful lanes likewise run
# only the units of their families (a split family's part, a whole family) that execute it
# (.scratch/mutation/coverage-LANE.json); --all-cases runs them all.
# Exit status: 0 no untriaged survivor; 1 a survivor; 2 a usage error.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
if [[ ${1:-} == report ]]; then
    exec "$PYTHON" -m scripts.mutation "$@"
fi
exec nice -n "${MUTATION_NICE:-5}" "$PYTHON" -m scripts.mutation run "$@"
