#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: the C++ unit tests of
# the collectives and the runtime (threads as ranks; also under ASan/UBSan and
# ThreadSanitizer) and the Python tests, which
# run tfdist under mpirun at several process counts.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source scripts/env.sh
echo "== C++ layers (scripts/check_layers.py)"
python scripts/check_layers.py
echo "== C++ unit tests"
make --no-print-directory -C cc test
echo "== C++ unit tests under AddressSanitizer and UndefinedBehaviorSanitizer"
make --no-print-directory -C cc -j2 sanitize
echo "== C++ unit tests under ThreadSanitizer (any report fails the run)"
make --no-print-directory -C cc -j2 tsan
echo "== Python tests"
pytest -q tests "$@"
