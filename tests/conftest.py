"""Makes the MPI harness importable from every tier of the tests (tests/unit, tests/mpi,
tests/differential, tests/e2e)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mpi_harness  # noqa: E402,F401  (fixes TFDIST_PACKAGE before any test module loads)


def pytest_terminal_summary(terminalreporter) -> None:
    """Prints what the mpirun launches cost: CI's time is mostly theirs."""
    lines = mpi_harness.launch_summary()
    if lines:
        terminalreporter.section("mpirun launches")
        for line in lines:
            terminalreporter.write_line(line)
