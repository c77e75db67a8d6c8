"""Sum, Average and Adasum with a learning rate not scaled by the number of ranks.

    tfdistrun -np 4 python -m benchmarks.adasum_training --json docs/results/adasum-training-np4.json

Trains the digits MLP (scikit-learn's 8x8 digits, examples/digits_data.py,
each rank its shard; 64-64-10 ReLU network, plain SGD, batch 32 per rank)
with ``DistributedOptimizer(op=...)`` for each op and each learning rate,
from the same initial weights, for a fixed number of epochs, and reports
the final validation accuracy. The learning rates are the ones a single
rank would use: Sum then takes steps P times larger, Average the steps of
one rank's learning rate on a P times larger batch, and Adasum lies
between, by how much the ranks' gradients agree (docs/adasum.md).
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List

from benchmarks import _results

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "examples"))

OPS = ("Sum", "Average", "Adasum")


def summary(document: Dict[str, Any]) -> str:
    """Final validation accuracy per op and learning rate."""
    lines = [f"np = {document['ranks']}, {document['model']}, {document['epochs']} epochs "
             f"({document['steps']} steps), seed {document['seed']}", "",
             "| learning rate | " + " | ".join(OPS) + " |", "|---|" + "---|" * len(OPS)]
    for lr, accuracy in document["val_accuracy"].items():
        lines.append(f"| {lr} | " + " | ".join(f"{accuracy[op]:.4f}" for op in OPS) + " |")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.adasum_training",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning-rates", type=float, nargs="+", default=[0.1, 0.5])
    parser.add_argument("--seed", type=int, default=0)
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)

    import keras
    import numpy as np
    import tfdist.keras as hvd
    from digits_data import load_shards

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    x, y, x_val, y_val = load_shards(rank, size)
    accuracy: Dict[str, Dict[str, float]] = {}
    for lr in args.learning_rates:
        accuracy[str(lr)] = {}
        for op in OPS:
            keras.utils.set_random_seed(args.seed)  # the same weights on every rank and run
            model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                                      keras.layers.Dense(64, activation="relu"),
                                      keras.layers.Dense(64, activation="relu"),
                                      keras.layers.Dense(10)])
            model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr),
                                                             op=getattr(hvd, op)),
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["accuracy"])
            model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0, shuffle=False)
            _, acc = model.evaluate(x_val, y_val, verbose=0)
            accuracy[str(lr)][op] = float(acc)
    results = {
        "ranks": size, "epochs": args.epochs, "seed": args.seed,
        "steps": args.epochs * int(np.ceil(len(x) / 32)),
        "model": "digits MLP 64-64-10, SGD, batch 32 per rank",
        "val_accuracy": accuracy,
    }
    if rank == 0:
        _results.publish(args, "adasum_training", results, argv, size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
