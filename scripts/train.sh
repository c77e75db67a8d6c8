#!/usr/bin/env bash
# Sets everything up, then trains the Keras digits example on 2 processes.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source scripts/env.sh
NP="${NP:-2}"
tfdistrun -np "$NP" --timeout 900 python examples/keras_digits.py "$@"
