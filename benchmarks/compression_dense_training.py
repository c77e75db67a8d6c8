"""fp16/bf16 against none on a real model: validation accuracy, wire bytes and step time.

    tfdistrun -np 2 python -m benchmarks.compression_dense_training --json docs/results/compression-dense-training-np2.json

Trains the digits MLP (scikit-learn's 8x8 digits, examples/digits_data.py,
each rank its shard; 64-64-10 ReLU network, Adam 1e-3, batch 32 per rank)
with ``DistributedOptimizer`` and each compression, from the same initial
weights, for several seeds; the compressions alternate within each seed so
that load on the machine affects them alike. Reports final validation
accuracy (mean over seeds and each seed's), wire bytes per step from
``tfdist.stats()`` and the median step time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))



def summary(document: Dict[str, Any]) -> str:
    """Each compression's accuracy, wire bytes and step time against none's."""
    lines = [f"np = {document['ranks']}, {document['model']}, {document['epochs']} epochs, "
             f"{document['seeds']} seeds", "",
             "| compression | val acc (mean) | Δ pts | per seed | bytes sent per step "
             "| wire / none | median step ms | step / none |", "|---|---|---|---|---|---|---|---|"]
    for name, c in document["compressions"].items():
        seeds = ", ".join(f"{a:.4f}" for a in c["val_accuracy_per_seed"])
        lines.append(f"| {name} | {c['val_accuracy_mean']:.4f} "
                     f"| {c['accuracy_minus_none_points']:+.2f} | {seeds} "
                     f"| {c['bytes_sent_per_step']:.0f} | {c['wire_ratio_to_none']:.2f} "
                     f"| {c['median_step_s'] * 1e3:.2f} | {c['step_time_ratio_to_none']:.2f} |")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compression_dense_training",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3)
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)

    import keras
    import tfdist
    import tfdist.keras as hvd
    from digits_data import load_shards

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x, y, x_val, y_val = load_shards(rank, size)
    compressions = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16,
                    "bf16": hvd.Compression.bf16}
    accuracy: Dict[str, List[float]] = {name: [] for name in compressions}
    bytes_per_step: Dict[str, float] = {}
    uncompressed_per_step: Dict[str, float] = {}
    step_times: Dict[str, List[float]] = {name: [] for name in compressions}

    class StepClock(keras.callbacks.Callback):
        def __init__(self, times: List[float]) -> None:
            super().__init__()
            self.times, self.start = times, 0.0

        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self.times.append(time.perf_counter() - self.start)

    for seed in range(args.seeds):
        for name, compression in compressions.items():
            keras.utils.set_random_seed(seed)  # the same weights on every rank and run
            model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                      keras.layers.Dense(64, activation="relu"),
                                      keras.layers.Dense(64, activation="relu"),
                                      keras.layers.Dense(10)])
            model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3),
                                                             compression=compression),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"])
            before = tfdist.stats()
            model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0, shuffle=True,
                      callbacks=[StepClock(step_times[name])])
            after = tfdist.stats()
            steps = args.epochs * int(np.ceil(len(x) / 32))
            bytes_per_step[name] = (after["bytes_sent"] - before["bytes_sent"]) / steps
            uncompressed_per_step[name] = (after["bytes_uncompressed"]
                                           - before["bytes_uncompressed"]) / steps
            _, acc = model.evaluate(x_val, y_val, verbose=0)
            accuracy[name].append(float(acc))
    results = {
        "ranks": size, "epochs": args.epochs, "seeds": args.seeds,
        "model": "digits MLP 64-64-10, Adam 1e-3, batch 32 per rank",
        "note": "shared, loaded 2-core machine: step times are only comparable as ratios",
        "compressions": {
            name: {"val_accuracy_mean": statistics.mean(accuracy[name]),
                   "val_accuracy_per_seed": accuracy[name],
                   "accuracy_minus_none_points":
                       100 * (statistics.mean(accuracy[name]) - statistics.mean(accuracy["none"])),
                   "bytes_sent_per_step": bytes_per_step[name],
                   "bytes_uncompressed_per_step": uncompressed_per_step[name],
                   "wire_ratio_to_none": bytes_per_step[name] / bytes_per_step["none"],
                   "median_step_s": statistics.median(step_times[name]),
                   "step_time_ratio_to_none": statistics.median(step_times[name])
                   / statistics.median(step_times["none"])}
            for name in compressions},
    }
    if rank == 0:
        _results.publish(args, "compression_dense_training", results, argv, size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
