"""Elastic commit cost: KerasState.commit() against the training step it follows, per model size.

    mpirun -np 2 --bind-to none python -m benchmarks.elastic_commit \\
        --json docs/results/elastic-commit-np2.json

For each model size (MiB of float32 weights: an MLP of equal square Dense
layers with Adam, as benchmarks.checkpoint builds, so that the committed
state, weights and Adam's two moments, is about 3x that) it measures, as
medians over ``--repeats`` rounds that alternate between the measures (so
that other load on the machine hits them alike):

- ``step_s``: one training step (``train_on_batch`` of ``--batch`` samples
  per rank: forward, backward, the gradients' allreduce, the update);
- ``commit_s``: ``state.commit()`` right after a step (the host copy of the
  variables, attributes and compressor state); ``memcpy_s``: one
  ``np.copyto`` of the same bytes into memory already mapped, its floor;
- ``restore_s`` and ``sync_s``: what a reset adds (sync is a collective of
  rank 0's state; restore a local copy back);
- ``overhead``: commit_s / step_s, the cost of a commit every step, and
  ``interval_for_3pct``: the fewest steps between commits that keep it at
  3% or less (``batches_per_commit``).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

from benchmarks import _results

LAYERS = 4
TARGET_OVERHEAD = 0.03


def build(size_mib: float, hvd: Any):
    """An MLP of LAYERS square Dense layers holding ``size_mib`` MiB of float32 weights, with
    Adam (built), compiled with tfdist's DistributedOptimizer."""
    import keras
    width = int(((size_mib * (1 << 20) / 4) / LAYERS) ** 0.5)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((width,))] +
                             [keras.layers.Dense(width, activation="relu") for _ in range(LAYERS)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-4)), loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model, width


def timed(function: Callable[[], Any]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def measure(size_mib: float, batch: int, repeats: int, hvd: Any) -> Dict[str, Any]:
    import numpy as np
    model, width = build(size_mib, hvd)
    state = hvd.elastic.KerasState(model, epoch=0, batch=0)
    state.sync()
    rng = np.random.default_rng(hvd.rank())
    x = rng.standard_normal((batch, width)).astype(np.float32)
    y = rng.standard_normal((batch, width)).astype(np.float32)
    for _ in range(2):  # warm-up: tracing, first allocations
        model.train_on_batch(x, y)
        state.commit()
    committed = sum(int(np.prod(v.shape)) * v.dtype.itemsize
                    for v in (np.asarray(v.numpy()) for v in state.variables()))
    sources = [np.asarray(v.numpy()) for v in state.variables()]
    targets = [np.empty_like(s) for s in sources]
    times: Dict[str, List[float]] = {k: [] for k in ("step_s", "commit_s", "memcpy_s",
                                                     "restore_s", "sync_s")}
    for _ in range(repeats):
        times["step_s"].append(timed(lambda: model.train_on_batch(x, y)))
        times["commit_s"].append(timed(state.commit))
        times["memcpy_s"].append(timed(lambda: [np.copyto(t, s)
                                                for t, s in zip(targets, sources)]))
        times["restore_s"].append(timed(state.restore))
        hvd.barrier()
        times["sync_s"].append(timed(state.sync))
    result: Dict[str, Any] = {"size_mib": size_mib, "width": width,
                              "committed_mib": committed / (1 << 20)}
    result.update({key: statistics.median(values) for key, values in times.items()})
    result["overhead"] = result["commit_s"] / result["step_s"]
    result["interval_for_3pct"] = max(1, math.ceil(result["overhead"] / TARGET_OVERHEAD))
    return result


def summary(document: Dict[str, Any]) -> str:
    lines = [f"Ranks: {document['ranks']}, batch {document['batch']} per rank, "
             f"medians of {document['repeats']} rounds.", "",
             "| model MiB | committed MiB | step s | commit s | memcpy s | restore s | sync s "
             "| commit/step | steps per commit for 3% |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in document["results"]:
        lines.append(f"| {row['size_mib']:g} | {row['committed_mib']:.0f} | "
                     f"{row['step_s']:.4f} | {row['commit_s']:.4f} | {row['memcpy_s']:.4f} | "
                     f"{row['restore_s']:.4f} | {row['sync_s']:.4f} | "
                     f"{100 * row['overhead']:.1f}% | {row['interval_for_3pct']} |")
    return "\n".join(lines) + "\n"


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[10.0, 200.0],
                        help="model sizes in MiB of float32 weights")
    parser.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    parser.add_argument("--repeats", type=int, default=7)
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)

    import tfdist.keras as hvd
    hvd.init()
    results = [measure(size, args.batch, args.repeats, hvd) for size in args.sizes]
    if hvd.rank() == 0:
        document = {"ranks": hvd.size(), "batch": args.batch, "repeats": args.repeats,
                    "results": results}
        _results.publish(args, "elastic_commit", document, argv, hvd.size())
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
