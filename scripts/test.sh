#!/usr/bin/env bash
# Sets everything up, then runs the test suite (docs/testing.md, "Tiers").
#
#   ./scripts/test.sh             everything: the C++ unit tests (also under
#                                 ASan/UBSan and ThreadSanitizer), then the Python
#                                 tests of every tier (tests/unit, tests/mpi,
#                                 tests/differential, tests/e2e), which run tfdist
#                                 under mpirun at several process counts
#   ./scripts/test.sh unit        (or fast) the fast loop: the C++ unit tests and tests/unit
#                                 (no mpirun, under a minute)
#   ./scripts/test.sh ARGS...     any other arguments go to pytest, after tests/
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source scripts/env.sh
# Each phase prints the time it starts, so a CI log shows where its minutes went.
phase() { echo "== $* ($(date -u +%H:%M:%S) UTC)"; }
phase "C++ layers (scripts/check_layers.py)"
python scripts/check_layers.py
phase "C++ unit tests"
make --no-print-directory -C cc -j2 test
if [[ "${1:-}" == "unit" || "${1:-}" == "fast" ]]; then
    shift
    phase "Python unit tests (tests/unit)"
    pytest -q tests/unit "$@"
    exit
fi
phase "C++ unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
make --no-print-directory -C cc -j2 sanitize
phase "C++ unit tests under ThreadSanitizer (any report fails the run)"
make --no-print-directory -C cc -j2 tsan
phase "Python tests"
pytest -q --durations=20 tests "$@"
phase "done"
