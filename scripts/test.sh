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
echo "== C++ layers (scripts/check_layers.py)"
python scripts/check_layers.py
echo "== C++ unit tests"
make --no-print-directory -C cc test
if [[ "${1:-}" == "unit" || "${1:-}" == "fast" ]]; then
    shift
    echo "== Python unit tests (tests/unit)"
    pytest -q tests/unit "$@"
    exit
fi
echo "== C++ unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
make --no-print-directory -C cc -j2 sanitize
echo "== C++ unit tests under ThreadSanitizer (any report fails the run)"
make --no-print-directory -C cc -j2 tsan
echo "== Python tests"
pytest -q --durations=20 tests "$@"
