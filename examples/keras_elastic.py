"""Elastic Keras training: ranks may die or join while it trains, and it carries on.

    tfdistrun --elastic -np 4 --min-np 2 python examples/keras_elastic.py

Kill a rank (kill -9) while it trains: the others raise inside ``train``,
the job rebuilds itself over the survivors (and replacements up to
--max-np), every rank goes back to the last commit, rank 0's state is
synced to all, ``on_reset`` runs, and ``train`` is called again. Without
--elastic, ``train`` runs once.

What makes the resume right:
- ``KerasState`` holds the model, its optimizer and the counters ``epoch``,
  ``batch`` (batches done in this epoch) and ``position`` (samples of this
  epoch done by all ranks together); ``CommitStateCallback`` commits them
  every batch (a copy in host memory, cheap);
- each rank reads ``tfdist.elastic.data.rank_indices(...)`` of the epoch
  from ``position``: a seeded epoch order dealt round-robin, so after any
  change of the number of ranks every sample is trained on exactly once
  per epoch (the last, fewer than ranks x batch samples are left out);
- ``on_reset`` scales the learning rate to the new number of ranks and
  re-counts ``state.batch`` at the new size, so that ``fit`` ends the
  resumed epoch after the steps left.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfdist.keras as hvd  # noqa: E402
from digits_data import load_shards  # noqa: E402
from tfdist.elastic import data  # noqa: E402

BASE_LR = 1e-3
SEED = 1234


def build_model() -> keras.Model:
    keras.utils.set_random_seed(7)
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(BASE_LR * hvd.size())),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


class TrackPosition(keras.callbacks.Callback):
    """``state.position``: samples of the epoch trained by all ranks, for the data helper.

    Listed after UpdateBatchStateCallback (which counts ``state.batch``) and
    before CommitStateCallback (which commits both).
    """

    def __init__(self, state: hvd.elastic.KerasState, batch_size: int) -> None:
        super().__init__()
        self.state, self.batch_size = state, batch_size
        self.start = (0, 0)

    def on_train_begin(self, logs=None) -> None:
        self.start = (self.state.position, self.state.batch)

    def on_train_batch_end(self, batch, logs=None) -> None:
        position, batches = self.start
        self.state.position = position + (self.state.batch - batches) * hvd.size() * self.batch_size

    def on_epoch_end(self, epoch, logs=None) -> None:
        self.state.position = 0
        self.start = (0, 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit with status 1 if the final validation accuracy is lower")
    args = parser.parse_args()

    hvd.init()
    # The whole training set on every rank: the data helper picks each rank's samples.
    x_train, y_train, x_val, y_val = load_shards(0, 1)
    samples, batch_size = len(x_train), args.batch_size

    def steps_per_epoch() -> int:
        return samples // (hvd.size() * batch_size)

    def dataset(state: hvd.elastic.KerasState) -> tf.data.Dataset:
        """This rank's batches from where the state stands to the end of training."""
        parts = []
        for epoch in range(state.epoch, args.epochs):
            position = state.position if epoch == state.epoch else 0
            steps = data.steps_remaining(samples, position, hvd.size(), batch_size,
                                         drop_remainder=True)
            indices = data.rank_indices(samples, epoch, position, hvd.rank(), hvd.size(),
                                        seed=SEED)
            parts.append(indices[:steps * batch_size])
        indices = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return (tf.data.Dataset.from_tensor_slices(indices)
                .batch(batch_size)
                .map(lambda i: (tf.gather(x_train, i), tf.gather(y_train, i)))
                .repeat())  # never "out of data": fit's steps decide where an epoch ends

    model = build_model()
    state = hvd.elastic.KerasState(model, epoch=0, batch=0, position=0)

    def on_reset() -> None:
        model.optimizer.learning_rate.assign(BASE_LR * hvd.size())
        # The batches left at the new size decide where fit ends the resumed epoch.
        left = data.steps_remaining(samples, state.position, hvd.size(), batch_size,
                                    drop_remainder=True)
        state.batch = max(0, steps_per_epoch() - left)

    state.register_reset_callbacks([on_reset])
    callbacks = [
        hvd.callbacks.MetricAverageCallback(),
        hvd.elastic.UpdateEpochStateCallback(state),
        hvd.elastic.UpdateBatchStateCallback(state),
        TrackPosition(state, batch_size),
        hvd.elastic.CommitStateCallback(state),  # last: it commits what the others updated
    ]

    @hvd.elastic.run
    def train(state: hvd.elastic.KerasState) -> None:
        state.model.fit(dataset(state), steps_per_epoch=steps_per_epoch(), shuffle=False,
                        epochs=args.epochs - state.epoch, callbacks=callbacks,
                        verbose=2 if hvd.rank() == 0 else 0)

    train(state)
    _, accuracy = model.evaluate(x_val, y_val, verbose=0)
    if hvd.rank() == 0:
        print(f"ranks={hvd.size()} epochs={state.epoch} "
              f"final validation accuracy {accuracy:.4f}", flush=True)
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
