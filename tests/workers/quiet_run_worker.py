"""A short Keras job under tfdistrun that uses BackupAndRestore.dataset(), as
tests/e2e/test_quiet_run.py runs it: its output must hold no known noise line."""
import sys

import numpy as np

from mpi_harness import worker_main


def body() -> None:
    import keras
    import tensorflow as tf
    import tfdist.keras as hvd

    hvd.init()
    rng = np.random.default_rng(hvd.rank())
    x = rng.normal(size=(48, 4)).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.int32)

    def make_epoch(epoch: tf.Tensor) -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((x, y)).shuffle(48, seed=epoch).batch(8)

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    backup = hvd.callbacks.BackupAndRestore(sys.argv[1], save_freq=3)
    model.fit(backup.dataset(make_epoch, 6), epochs=2, steps_per_epoch=6, shuffle=False,
              verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), backup])
    weights = model.get_weights()[0]
    gathered = hvd.allgather_object(weights)
    np.testing.assert_array_equal(gathered[0], gathered[-1])  # the ranks agree
    print(f"quiet run done rank {hvd.rank()}", flush=True)


if __name__ == "__main__":
    worker_main(body)
