"""A custom TensorFlow 2 training loop on scikit-learn's digits, data-parallel with tfdist.

    mpirun -np 2 python examples/tf2_custom_loop.py

The loop is the ordinary GradientTape loop; the tfdist lines are
``DistributedGradientTape`` (averages the gradients across ranks), the
broadcast of the initial variables from rank 0, and ``tfdist.join()`` at the
end of each epoch: every rank trains on all of its shard, and shards need
not give the same number of batches (at 3 ranks, rank 0 has one more). A
rank that runs out joins and stands in for the others' allreduces until
they have joined too.
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

import tfdist  # noqa: E402
from digits_data import load_shards  # noqa: E402
from keras_digits import build_model  # noqa: E402
from tfdist.keras import broadcast_variables  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--lr", type=float, default=1e-3, help="for one rank; scaled by size")
    parser.add_argument("--min-accuracy", type=float, default=0.0)
    args = parser.parse_args()

    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    x_train, y_train, x_val, y_val = load_shards(rank, size)
    model = build_model()
    optimizer = keras.optimizers.Adam(args.lr * size)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    # Every rank starts from rank 0's weights and optimizer state.
    optimizer.build(model.trainable_variables)
    broadcast_variables(model.variables, root_rank=0)
    broadcast_variables(optimizer.variables, root_rank=0)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = tfdist.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Shards may differ by one example, and so by one batch.
    steps = len(x_train) // args.batch_size
    shuffle = np.random.RandomState(rank)
    for epoch in range(args.epochs):
        order = shuffle.permutation(len(x_train))
        losses = [train_step(x_train[order[i * args.batch_size:(i + 1) * args.batch_size]],
                             y_train[order[i * args.batch_size:(i + 1) * args.batch_size]])
                  for i in range(steps)]
        # Out of batches: wait for the others, standing in for their allreduces.
        tfdist.join()
        logits = model(x_val, training=False)
        accuracy = float(np.mean(np.argmax(logits, axis=1) == y_val))
        mean_loss = float(tfdist.allreduce(tf.reduce_mean(losses), name="epoch_loss"))
        if rank == 0:
            print(f"epoch {epoch + 1}/{args.epochs}: loss {mean_loss:.4f} "
                  f"validation accuracy {accuracy:.4f}", flush=True)
    if rank == 0:
        print(f"ranks={size} final validation accuracy {accuracy:.4f}", flush=True)
    return 0 if accuracy >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
