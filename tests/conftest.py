"""Makes the MPI harness importable from every tier of the tests (tests/unit, tests/mpi,
tests/differential, tests/e2e)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mpi_harness  # noqa: E402,F401  (fixes TFDIST_PACKAGE before any test module loads)
