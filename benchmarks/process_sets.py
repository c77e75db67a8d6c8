"""Allreduce in a 2-rank process set of a 4-rank job against a 2-rank job, in the same job.

    mpirun -np 4 --bind-to none python -m benchmarks.process_sets \\
        --json docs/results/process-sets-np4.json

Block A: tfdist runs on all 4 ranks and ranks 0 and 1 allreduce in the set
[0, 1] while ranks 2 and 3 stay idle. Block B: tfdist is started again as a
separate 2-rank world of ranks 0 and 1 only (``tfdist.init(comm=pair)``), and
they run the same allreduces on it. The blocks alternate; each size's time is
the median over blocks of the mean per call, and the ratio set / 2-rank job
should be about 1 (the set is a runtime of its own over its two ranks).
Results are checked against numpy in every block. Waiting ranks sleep
rather than spin, so that they take no core from the measuring ones.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results

SIZES = (4, 64 * 1024, 4 * 1024 * 1024)  # bytes of float32
WARM_UP_CALLS = 64


def _wait_for_all(comm) -> None:
    """A barrier that sleeps while it waits (mpi4py's spins, taking a core)."""
    request = comm.Ibarrier()
    while not request.Test():
        time.sleep(0.002)


def _time_allreduces(process_set, calls: Dict[int, int], label: str) -> Dict[int, float]:
    """Seconds per allreduce of each size on ranks 0 and 1, checked against numpy."""
    import tensorflow as tf

    import tfdist
    from mpi4py import MPI
    me = MPI.COMM_WORLD.rank
    seconds = {}
    for nbytes in SIZES:
        x = tf.fill([nbytes // 4], float(me + 1))
        name = f"bench.process_sets.{label}.{nbytes}"
        # Warm-up past auto's trials (up to 5 candidates, 12 calls each), so that
        # both sides time the algorithm they keep, not the trials.
        for _ in range(WARM_UP_CALLS):
            out = tfdist.allreduce(x, op=tfdist.Sum, name=name, process_set=process_set)
        start = time.perf_counter()
        for _ in range(calls[nbytes]):
            out = tfdist.allreduce(x, op=tfdist.Sum, name=name, process_set=process_set)
        seconds[nbytes] = (time.perf_counter() - start) / calls[nbytes]
        got = out.numpy()
        np.testing.assert_array_equal(got, np.full(got.shape, 3.0))  # ranks 0 and 1: 1 + 2
    return seconds


def measure(blocks: int, calls: Dict[int, int]) -> Dict[str, Any]:
    import tfdist
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    rank = world.rank
    pair = world.Split(0 if rank < 2 else MPI.UNDEFINED, rank)
    samples: Dict[str, Dict[int, List[float]]] = {"set_of_4": {}, "job_of_2": {}}
    for _ in range(blocks):
        tfdist.init()
        low = tfdist.add_process_set([0, 1])
        if rank < 2:
            for size, s in _time_allreduces(low, calls, "set").items():
                samples["set_of_4"].setdefault(size, []).append(s)
        _wait_for_all(world)
        tfdist.shutdown()
        if rank < 2:
            tfdist.init(comm=pair)
            for size, s in _time_allreduces(None, calls, "job").items():
                samples["job_of_2"].setdefault(size, []).append(s)
            tfdist.shutdown()
        _wait_for_all(world)
    if pair != MPI.COMM_NULL:
        pair.Free()
    if rank != 0:
        return {}
    micro = {kind: {str(size): statistics.median(s) * 1e6 for size, s in by_size.items()}
             for kind, by_size in samples.items()}
    return {"ranks": world.size, "blocks": blocks,
            "microseconds": micro,
            "ratio_set_vs_job": {size: micro["set_of_4"][size] / micro["job_of_2"][size]
                                 for size in micro["set_of_4"]}}


def summary(document: Dict[str, Any]) -> str:
    """Time per allreduce on ranks 0 and 1, in the set and in the 2-rank job."""
    us = document["microseconds"]
    lines = [f"{document['blocks']} blocks of each; median over blocks of the mean per call", ""]
    if document.get("note"):  # how the machine was when measured, added by hand
        lines += [f"Note: {document['note']}", ""]
    lines += ["| bytes | set [0, 1] of a 4-rank job (µs) | 2-rank job (µs) | set / job |",
              "|---|---|---|---|"]
    for size in us["set_of_4"]:
        lines.append(f"| {int(size):,} | {us['set_of_4'][size]:.1f} | {us['job_of_2'][size]:.1f} "
                     f"| {document['ratio_set_vs_job'][size]:.2f} |")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.process_sets",
                                     description=__doc__.split("\n\n")[0])
    _results.add_arguments(parser, plot=False)
    parser.add_argument("--blocks", type=int, default=9, help="A/B block pairs")
    parser.add_argument("--calls", type=int, default=200,
                        help="allreduces per size and block (a tenth for 4 MiB)")
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    from mpi4py import MPI
    if MPI.COMM_WORLD.size != 4:
        raise SystemExit("the process_sets benchmark runs on exactly 4 ranks (mpirun -np 4)")
    calls = {size: max(1, args.calls // (10 if size >= 1 << 20 else 1)) for size in SIZES}
    results = measure(args.blocks, calls)
    if MPI.COMM_WORLD.rank == 0:
        _results.publish(args, "process_sets", results, argv, 4)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
