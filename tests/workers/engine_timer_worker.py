"""The benchmarks' engine timer (benchmarks/_engine.py), built from the source tree on first
use, runs every engine algorithm and MPI_Allreduce correctly, checked against numpy."""
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks/, after tfdist

from mpi_harness import worker_main  # noqa: E402


def main() -> None:
    from mpi4py import MPI

    from benchmarks._engine import engine_timer
    comm = MPI.COMM_WORLD
    timed = engine_timer(comm)
    for algorithm in ("tree", "butterfly", "ring", "rabenseifner", "mpi"):
        for count in (1, 1000, 300_001):
            buffer = np.arange(count, dtype=np.float32) % 97 + comm.rank
            want = (np.arange(count, dtype=np.float64) % 97) * comm.size + sum(range(comm.size))
            seconds = timed(algorithm, buffer, 1)
            np.testing.assert_array_equal(buffer, want.astype(np.float32), err_msg=algorithm)
            assert seconds > 0, (algorithm, seconds)
    try:
        timed("ring", np.zeros(4, np.float64), 1)
    except TypeError:
        pass
    else:
        raise AssertionError("a float64 buffer was accepted")
    print(f"engine timer OK (rank {comm.rank})", flush=True)


if __name__ == "__main__":
    worker_main(main)
