"""Data-parallel Keras training on scikit-learn's digits, with tfdist.

    mpirun -np 2 python examples/keras_digits.py

Each rank trains on its own shard of the training set; gradients are
averaged across ranks by DistributedOptimizer, so the model sees the whole
set every epoch. The learning rate is scaled by the number of ranks (the
global batch grows with it) and warmed up over the first epochs.
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


def build_model() -> keras.Model:
    """A small CNN for 8x8 grey images."""
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3, help="for one rank; scaled by size")
    parser.add_argument("--warmup-epochs", type=int, default=2)
    parser.add_argument("--verbose", type=int, default=None,
                        help="Keras verbosity (default: 2 on rank 0, 0 elsewhere)")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit with status 1 if the final validation accuracy is lower")
    args = parser.parse_args()

    hvd.init()
    keras.utils.set_random_seed(1234 + hvd.rank())  # different dropout/shuffle per rank
    x_train, y_train, x_val, y_val = load_shards(hvd.rank(), hvd.size())

    scaled_lr = args.lr * hvd.size()
    model = build_model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    callbacks = [
        # Same initial weights everywhere, then averaged logs (so every rank's
        # History agrees), then the warmup from scaled_lr / size to scaled_lr.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(scaled_lr, warmup_epochs=args.warmup_epochs),
    ]
    verbose = args.verbose if args.verbose is not None else (2 if hvd.rank() == 0 else 0)
    history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                        validation_data=(x_val, y_val), callbacks=callbacks, verbose=verbose)
    accuracy = history.history["val_accuracy"][-1]
    if hvd.rank() == 0:
        print(f"ranks={hvd.size()} final validation accuracy {accuracy:.4f}", flush=True)
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
