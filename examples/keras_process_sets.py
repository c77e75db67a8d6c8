"""Two Keras models trained side by side in one job, each on its own process set.

    mpirun -np 4 python examples/keras_process_sets.py

The first half of the ranks trains the CNN of keras_digits.py, the second half
a small MLP, both on scikit-learn's digits: a comparison of two models (or of
two hyperparameter settings) that shares one allocation. Each half is a
``tfdist.ProcessSet``: its DistributedOptimizer averages gradients over its own
ranks only, its callbacks broadcast and average among them, and the two sets'
collectives run concurrently without waiting on each other
(docs/process_sets.md).
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402

import tfdist.keras as hvd  # noqa: E402
from digits_data import load_shards  # noqa: E402
from keras_digits import build_model as build_cnn  # noqa: E402


def build_mlp() -> keras.Model:
    """A small MLP for 8x8 grey images."""
    return keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(),
                             keras.layers.Dense(128, activation="relu"),
                             keras.layers.Dense(10)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3, help="for one rank; scaled by size")
    parser.add_argument("--min-accuracy", type=float, default=0.0)
    args = parser.parse_args()

    hvd.init()
    if hvd.size() < 2:
        raise SystemExit("run it on at least 2 ranks: one process set per model")
    half = hvd.size() // 2
    # Collective over all ranks: every rank registers both sets, in the same order.
    sets = [hvd.add_process_set(list(range(half))),
            hvd.add_process_set(list(range(half, hvd.size())))]
    which = 0 if sets[0].included() else 1
    mine = sets[which]
    name, build = [("cnn", build_cnn), ("mlp", build_mlp)][which]

    keras.utils.set_random_seed(1234 + hvd.rank())
    # The set's ranks shard the data among themselves.
    x_train, y_train, x_val, y_val = load_shards(mine.rank(), mine.size())
    scaled_lr = args.lr * mine.size()
    model = build()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr),
                                                     process_set=mine),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(mine.ranks[0], mine),
                 hvd.callbacks.MetricAverageCallback(mine)]
    history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                        validation_data=(x_val, y_val), callbacks=callbacks, verbose=0)
    accuracy = history.history["val_accuracy"][-1]
    if mine.rank() == 0:
        print(f"set {which} ({name}, ranks {mine.ranks}) final validation accuracy "
              f"{accuracy:.4f}", flush=True)
    hvd.shutdown()
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
