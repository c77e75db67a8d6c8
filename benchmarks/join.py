"""What a joined rank costs the ranks still training: the same work with and without it.

    mpirun -np 2 --bind-to none python -m benchmarks.join --json docs/results/join-np2.json

The last rank alternates between taking part (block A) and having called
``tfdist.join()`` (block B: it stands in for the others' collectives while
it waits). In both blocks the other ranks measure (1) back-to-back eager
allreduces of 4 bytes and (2) a training-like step: 5 ms of computation,
then a ``tf.function`` of 100 allreduces of 16 KiB. Each method's time is
the median of its blocks on the measuring ranks. Results are checked against
numpy in every block.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results
from benchmarks.runtime import STEP_TENSOR_BYTES, STEP_TENSORS

STEP_ELEMENTS = STEP_TENSOR_BYTES // 4  # float32
COMPUTE_SECONDS = 0.005


def _compute(seconds: float) -> None:
    """Stands in for a model's forward and backward pass: keeps this core busy."""
    end = time.perf_counter() + seconds
    x = np.ones(4096, np.float32)
    while time.perf_counter() < end:
        x = x * 1.0000001


def measure(blocks: int, eager_calls: int, steps: int) -> Dict[str, object]:
    """Runs the blocks; returns the results on the measuring ranks (None on the last)."""
    import tensorflow as tf

    import tfdist
    from mpi4py import MPI
    rank, size = tfdist.rank(), tfdist.size()
    joiner = size - 1
    measuring = MPI.COMM_WORLD.Split(0 if rank != joiner else MPI.UNDEFINED, rank)
    gradients = [tf.Variable(tf.fill([STEP_ELEMENTS], float(rank + i)))
                 for i in range(STEP_TENSORS)]
    small = tf.constant([float(rank)])

    @tf.function
    def step():
        return [tfdist.allreduce(g, op=tfdist.Sum, name=f"bench.join.step.{i}")
                for i, g in enumerate(gradients)]

    samples: Dict[str, List[float]] = {}
    for block in range(blocks + 1):  # block 0 warms up
        for joined in (False, True):
            label = "joined" if joined else "all_active"
            if rank == joiner:
                if not joined:
                    _run(step, small, eager_calls, steps, None)
                else:
                    tfdist.join()
                continue
            active = [r for r in range(size) if not (joined and r == joiner)]
            measuring.Barrier()
            eager, paced = _run(step, small, eager_calls, steps, active)
            if block:
                samples.setdefault(f"eager_4B_{label}", []).append(eager)
                samples.setdefault(f"paced_step_{label}", []).append(paced)
            if joined:
                tfdist.join()
    if rank == joiner:
        return None
    seconds = {name: measuring.allreduce(statistics.median(s)) / measuring.size
               for name, s in samples.items()}
    return {
        "ranks": size,
        "microseconds": {k: v * 1e6 for k, v in seconds.items()},
        "ratio_eager_joined_vs_active": (seconds["eager_4B_joined"]
                                         / seconds["eager_4B_all_active"]),
        "ratio_paced_step_joined_vs_active": (seconds["paced_step_joined"]
                                              / seconds["paced_step_all_active"]),
        "compute_ms_per_step": COMPUTE_SECONDS * 1e3,
    }


def _run(step, small, eager_calls: int, steps: int, active):
    """Seconds per eager call and per paced step (the computation excluded)."""
    import tfdist
    start = time.perf_counter()
    for _ in range(eager_calls):
        out = tfdist.allreduce(small, op=tfdist.Sum, name="bench.join.4B")
    eager = (time.perf_counter() - start) / eager_calls
    paced = 0.0
    for _ in range(steps):
        _compute(COMPUTE_SECONDS)
        start = time.perf_counter()
        outs = step()
        paced += time.perf_counter() - start
    if active is not None:  # every block's results are right, or it does not count
        np.testing.assert_allclose(out.numpy(), [float(sum(active))])
        np.testing.assert_allclose(outs[-1].numpy()[:3],
                                   np.full(3, sum(r + STEP_TENSORS - 1 for r in active)))
    return eager, paced / steps


def summary(document: Dict[str, Any]) -> str:
    """The other ranks' times with every rank active and with the last one joined."""
    us = document["microseconds"]
    return "\n".join([
        f"ranks = {document['ranks']}; rank {document['ranks'] - 1} joined in block B; "
        f"each step after {document['compute_ms_per_step']:g} ms of computation", "",
        "| measured on the other ranks | all active | last rank joined | joined / active |",
        "|---|---|---|---|",
        f"| eager allreduce of 4 B (µs) | {us['eager_4B_all_active']:.1f} "
        f"| {us['eager_4B_joined']:.1f} | {document['ratio_eager_joined_vs_active']:.2f} |",
        f"| tf.function step of 100 x 16 KiB (ms) | {us['paced_step_all_active'] / 1e3:.2f} "
        f"| {us['paced_step_joined'] / 1e3:.2f} "
        f"| {document['ratio_paced_step_joined_vs_active']:.2f} |"])


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.join",
                                     description=__doc__.split("\n\n")[0])
    _results.add_arguments(parser, plot=False)
    parser.add_argument("--blocks", type=int, default=5, help="A/B block pairs")
    parser.add_argument("--eager-calls", type=int, default=300)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    import tfdist
    tfdist.init()
    if tfdist.size() < 2:
        raise SystemExit("the join benchmark needs at least 2 ranks")
    results = measure(args.blocks, args.eager_calls, args.steps)
    if tfdist.rank() == 0:
        _results.publish(args, "join", results, argv, tfdist.size())
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
