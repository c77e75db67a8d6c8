"""Keras training that survives crashes and preemption, resuming at the exact batch.

    tfdistrun -np 2 --restarts 3 python examples/keras_resume.py --checkpoint-dir ckpt

Kill any rank (kill -9) or send SIGTERM to tfdistrun while it trains:
tfdistrun starts the job again (after a crash) or every rank saves and the
job exits with 75 (after SIGTERM; run the same command again to go on).
Either way the script picks up from the newest checkpoint in
--checkpoint-dir, at the batch where it stopped, and ends with the same
weights as a run that was never interrupted (op determinism is on and the
data order is seeded per epoch).

What makes the resume exact:
- ``BackupAndRestore`` saves the model, the optimizer (its iteration count
  and moments), the dropout layer's seed state and the batch reached;
- the input comes from ``backup.dataset(make_epoch, steps_per_epoch)``:
  ``make_epoch(epoch)`` builds one epoch's batches, shuffled with a seed
  derived from the epoch, so any epoch can be rebuilt, and the helper starts
  the stream at the restored batch;
- ``fit`` gets the same ``steps_per_epoch``.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfdist.keras as hvd  # noqa: E402
from digits_data import load_shards  # noqa: E402


def build_model() -> keras.Model:
    keras.utils.set_random_seed(7)  # the same initial weights in every run (and on every rank)
    return keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(16, 3, padding="same", activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.2, seed=3),
        keras.layers.Dense(10),
    ])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint-dir", default="ckpt")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--save-freq", type=int, default=10, help="batches between checkpoints")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit with status 1 if the final validation accuracy is lower")
    args = parser.parse_args()

    tf.config.experimental.enable_op_determinism()
    hvd.init()
    x_train, y_train, x_val, y_val = load_shards(hvd.rank(), hvd.size())
    steps_per_epoch = len(x_train) // args.batch_size

    def make_epoch(epoch: tf.Tensor) -> tf.data.Dataset:
        # One epoch of this rank's shard, in an order fixed by the epoch number.
        return (tf.data.Dataset.from_tensor_slices((x_train, y_train))
                .shuffle(len(x_train), seed=epoch + 1000 * hvd.rank())
                .batch(args.batch_size, drop_remainder=True))

    model = build_model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-3 * hvd.size())),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    backup = hvd.callbacks.BackupAndRestore(args.checkpoint_dir, save_freq=args.save_freq)
    model.fit(backup.dataset(make_epoch, steps_per_epoch), epochs=args.epochs,
              steps_per_epoch=steps_per_epoch, shuffle=False,  # make_epoch shuffles
              verbose=2 if hvd.rank() == 0 else 0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), backup])
    # A Dataset, not the arrays: for arrays Keras batches with a parallel map, which
    # TensorFlow under op determinism turns into a sequential one, logging an error
    # ("E0000 ... use_unbounded_threadpool") about an attribute it carries over.
    validation = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(256)
    _, accuracy = model.evaluate(validation, verbose=0)
    if hvd.rank() == 0:
        print(f"ranks={hvd.size()} restart={os.environ.get('TFDIST_RESTART', '0')} "
              f"final validation accuracy {accuracy:.4f}", flush=True)
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
