"""How far this machine's MPI speed drifts within one job: MPI_Allreduce in consecutive windows.

    mpirun -np 2 --bind-to none python -m benchmarks.mpi_drift --json docs/results/mpi-drift-np2.json

Every speed figure in docs/ is a ratio against a reference measured in the
same job, because the machine's speed moves between jobs. This shows that it
also moves within one: mpi4py's ``MPI_Allreduce`` of the same buffer (no
TensorFlow, no tfdist), timed in consecutive windows of a fixed number of
calls. Halfway through, the buffers are allocated afresh, which shows
whether a change of speed follows the memory or the moment. Reported per
window: the slowest rank's mean µs per call; and the ratio of the slowest
window to the fastest.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results


def _buffers(nbytes: int):
    send = np.ones(nbytes // 4, np.float32)
    return send, np.empty_like(send)


def measure(comm, nbytes: int, windows: int, calls: int) -> Dict[str, Any]:
    """Times ``windows`` windows of ``calls`` allreduces each; the same on every rank."""
    from mpi4py import MPI
    send, receive = _buffers(nbytes)
    for _ in range(max(1, calls // 10)):
        comm.Allreduce(send, receive)
    microseconds: List[float] = []
    for window in range(windows):
        if window == windows // 2:
            send, receive = _buffers(nbytes)
            comm.Allreduce(send, receive)
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(calls):
            comm.Allreduce(send, receive)
        mine = (time.perf_counter() - start) / calls * 1e6
        microseconds.append(comm.allreduce(mine, op=MPI.MAX))
    np.testing.assert_allclose(receive, np.full_like(receive, comm.size))  # it did the work
    return {"ranks": comm.size, "bytes": nbytes, "calls_per_window": calls,
            "fresh_buffers_at_window": windows // 2, "window_microseconds": microseconds,
            "slowest_over_fastest": max(microseconds) / min(microseconds)}


def summary(document: Dict[str, Any]) -> str:
    """One row per window, and the spread."""
    fresh = document["fresh_buffers_at_window"]
    lines = [f"np = {document['ranks']}, MPI_Allreduce of {document['bytes']} bytes, "
             f"{document['calls_per_window']} calls a window; fresh buffers from window {fresh}",
             "", "| window | µs per call |", "|---|---|"]
    lines += [f"| {i}{' (fresh buffers)' if i == fresh else ''} | {us:.0f} |"
              for i, us in enumerate(document["window_microseconds"])]
    lines += ["", f"Slowest window over fastest: {document['slowest_over_fastest']:.2f}x."]
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mpi_drift",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=1638400,
                        help="the default is benchmarks.runtime's step: 100 x 16 KiB")
    parser.add_argument("--windows", type=int, default=16)
    parser.add_argument("--calls", type=int, default=300, help="allreduces per window")
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    result = measure(comm, args.bytes, args.windows, args.calls)
    if comm.rank == 0:
        _results.publish(args, "mpi_drift", result, argv, comm.size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
