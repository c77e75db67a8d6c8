"""Training throughput on synthetic data, samples/s per rank with a 95% interval.

    mpirun -np 2 python examples/synthetic_benchmark.py
    mpirun -np 2 python examples/synthetic_benchmark.py --model mlp --fp16-allreduce

Like Horovod's tensorflow2_synthetic_benchmark: a tf.function step with
DistributedGradientTape, timed over several iterations of a few batches
each, after warm-up. The default model is a small CNN that runs on a CPU.
"""
from __future__ import annotations

import argparse
import os
import sys
import timeit

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfdist  # noqa: E402
from tfdist.keras import broadcast_variables  # noqa: E402


def build_model(kind: str) -> keras.Model:
    """A small CNN on 32x32x3 images (default), or a 784-512-512-10 MLP."""
    if kind == "cnn":
        return keras.Sequential([
            keras.Input((32, 32, 3)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dense(10),
        ])
    return keras.Sequential([keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                             keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=("cnn", "mlp"), default="cnn")
    parser.add_argument("--batch-size", type=int, default=32, help="per rank")
    parser.add_argument("--num-warmup-batches", type=int, default=5)
    parser.add_argument("--num-batches-per-iter", type=int, default=10)
    parser.add_argument("--num-iters", type=int, default=10)
    parser.add_argument("--fp16-allreduce", action="store_true")
    args = parser.parse_args()

    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    model = build_model(args.model)
    optimizer = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    compression = tfdist.Compression.fp16 if args.fp16_allreduce else tfdist.Compression.none
    shape = model.inputs[0].shape[1:]
    data = tf.random.uniform((args.batch_size, *shape))
    target = tf.random.uniform((args.batch_size,), maxval=10, dtype=tf.int64)

    optimizer.build(model.trainable_variables)
    broadcast_variables(model.variables, root_rank=0)

    @tf.function
    def train_step():
        with tf.GradientTape() as tape:
            loss = loss_fn(target, model(data, training=True))
        tape = tfdist.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    def log(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    def run_batches(count: int) -> None:
        for _ in range(count):
            train_step()
        model.trainable_variables[0].numpy()  # wait for the last step to finish

    log(f"Model: {args.model} ({model.count_params()} parameters), batch size {args.batch_size}"
        f" per rank, {size} ranks, fp16 allreduce: {args.fp16_allreduce}")
    run_batches(args.num_warmup_batches)
    rates = []
    for iteration in range(args.num_iters):
        seconds = timeit.timeit(lambda: run_batches(args.num_batches_per_iter), number=1)
        rate = args.batch_size * args.num_batches_per_iter / seconds
        log(f"Iter #{iteration}: {rate:.1f} samples/sec per rank")
        rates.append(rate)
    mean, interval = np.mean(rates), 1.96 * np.std(rates)
    log(f"Samples/sec per rank: {mean:.1f} +-{interval:.1f}")
    log(f"Total samples/sec on {size} rank(s): {size * mean:.1f} +-{size * interval:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
