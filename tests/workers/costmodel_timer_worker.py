"""The cost-model benchmark's timer (benchmarks/native/costmodel_timer.cc, built by
benchmarks/_engine.py): every algorithm, hierarchical included, on the job's virtual
hosts over emulated links, checked against numpy; ping-pong delivers the bytes."""
import sys
from pathlib import Path

import numpy as np

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks/, after tfdist

from mpi_harness import worker_main  # noqa: E402


def main() -> None:
    from mpi4py import MPI

    import tfdist
    from benchmarks.costmodel import HostTimer
    tfdist.init()
    comm = MPI.COMM_WORLD.Dup()
    rank = comm.rank
    timer = HostTimer(comm)
    per_host = comm.size // 2
    assert list(timer.host_of_rank) == [r // per_host for r in range(comm.size)], \
        list(timer.host_of_rank)
    assert timer.bandwidth == 1.25e9, timer.bandwidth
    for algorithm in ("tree", "butterfly", "ring", "rabenseifner", "hierarchical"):
        for count in (1, 1000, 300_001):
            buffer = np.arange(count, dtype=np.float32) % 97 + comm.rank
            want = (np.arange(count, dtype=np.float64) % 97) * comm.size + sum(range(comm.size))
            seconds = timer.allreduce(algorithm, buffer, 1)
            np.testing.assert_array_equal(buffer, want.astype(np.float32), err_msg=algorithm)
            assert len(seconds) == 1 and seconds[0] > 0, (algorithm, seconds)
    # Ranks of host 0 ping-pong with the same place on host 1.
    peer = (comm.rank + per_host) % comm.size
    first = min(comm.rank, peer)
    buffer = np.full(1 << 16, comm.rank, np.uint8)
    timer.ping_pong(peer, buffer, 1)
    np.testing.assert_array_equal(buffer, np.full(1 << 16, first, np.uint8))
    comm.Free()
    tfdist.shutdown()
    print(f"costmodel timer OK (rank {rank})", flush=True)


if __name__ == "__main__":
    worker_main(main)
