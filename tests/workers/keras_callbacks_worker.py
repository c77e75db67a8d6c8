"""tfdist.keras.callbacks checks, run on N ranks by test_keras_training.py.

Each check is registered by name in CHECKS and is a test of its own there.
"""
import keras
import numpy as np

import tfdist.keras as hvd
from keras_common import (BATCH, assert_same_on_all_ranks, assert_weights, gather_all,
                          initial_weights, make_model, rank_data)
from mpi_harness import Checks, worker_main


class Recorder(keras.callbacks.Callback):
    """Records the learning rate at every batch and a copy of the epoch logs it sees."""

    def __init__(self):
        super().__init__()
        self.rates, self.logs = [], []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append(dict(logs))


def compiled(learning_rate=0.05, momentum=0.0, weights=None):
    model = make_model()
    if weights is not None:
        model.set_weights(weights)
    model.compile(optimizer=hvd.DistributedOptimizer(
        keras.optimizers.SGD(learning_rate, momentum=momentum)), loss="mse", metrics=["mae"])
    return model


def check_broadcast_from_nonzero_root():
    size, rank = hvd.size(), hvd.rank()
    root = size - 1
    rng = np.random.RandomState(rank)  # different weights on every rank
    mine = [w + rng.normal(0, 1, w.shape).astype("float32") for w in initial_weights()]
    roots = [gather_all(w, f"root.{i}")[root] for i, w in enumerate(mine)]
    # Learning rate 0: after fit, the weights are exactly what training started from.
    model = compiled(learning_rate=0.0, weights=mine)
    x, y = rank_data(rank, 2)
    model.fit(x, y, batch_size=BATCH, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank=root)])
    assert_weights(model.get_weights(), roots, "broadcast from root", 0)

    # No batch-end hooks: Keras would fetch the logs after every step.
    for callback_class in (hvd.callbacks.BroadcastGlobalVariablesCallback,
                           hvd.callbacks.MetricAverageCallback,
                           hvd.callbacks.LearningRateScheduleCallback,
                           hvd.callbacks.LearningRateWarmupCallback):
        for hook in ("on_batch_end", "on_train_batch_end"):
            assert getattr(callback_class, hook) is getattr(keras.callbacks.Callback, hook), (
                callback_class, hook)

    # A model without an Input may be built only in its first step: the
    # broadcast then precedes the second batch, and the ranks agree from there on.
    unbuilt = keras.Sequential([keras.layers.Dense(3)])
    unbuilt.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-2)), loss="mse")
    unbuilt.fit(x, y, batch_size=BATCH, verbose=0,
                callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(root_rank=root)])
    assert_same_on_all_ranks(unbuilt.get_weights(), "unbuilt")
    assert_same_on_all_ranks([v.numpy() for v in unbuilt.optimizer.variables], "adam state")


def check_metric_average():
    rank = hvd.rank()
    recorder = Recorder()
    model = compiled()
    x, y = rank_data(rank, 4)
    history = model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, validation_data=(x, y),
                        callbacks=[recorder, hvd.callbacks.MetricAverageCallback()])
    for key in ("loss", "mae", "val_loss", "val_mae"):
        local = np.array([logs[key] for logs in recorder.logs])
        every_rank = gather_all(local, f"metric.{key}")
        assert not np.allclose(every_rank[0], every_rank[-1]), f"{key} same on all ranks anyway"
        np.testing.assert_allclose(history.history[key], every_rank.mean(axis=0), rtol=1e-6,
                                   err_msg=f"History's {key} is not the rank average")


def check_learning_rate_callbacks():
    size, rank = hvd.size(), hvd.rank()
    x, y = rank_data(rank, 4)
    steps, initial = 4, 0.08

    recorder = Recorder()
    model = compiled(learning_rate=initial)
    warmup = hvd.callbacks.LearningRateWarmupCallback(initial, warmup_epochs=2)
    model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, callbacks=[warmup, recorder])
    epochs = np.array([e + b / steps for e in range(3) for b in range(steps)])
    expected = np.where(epochs < 2, initial / size * (1 + epochs * (size - 1) / 2), initial)
    np.testing.assert_allclose(recorder.rates, expected, rtol=1e-6, err_msg="warmup rates")
    assert recorder.rates[0] == np.float32(initial / size)
    assert np.all(np.diff(recorder.rates) >= 0), "warmup decreased the rate"

    recorder = Recorder()
    model = compiled(learning_rate=initial)
    schedule = hvd.callbacks.LearningRateScheduleCallback(initial, multiplier=0.1,
                                                          start_epoch=1, end_epoch=2)
    later = hvd.callbacks.LearningRateScheduleCallback(initial, lambda epoch: 0.01,
                                                       start_epoch=2)
    model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, callbacks=[schedule, later, recorder])
    expected = np.repeat([initial, initial * 0.1, initial * 0.01], steps)
    np.testing.assert_allclose(recorder.rates, expected, rtol=1e-6, err_msg="schedule rates")

    # Momentum correction: a rate change scales SGD's velocity by new/old.
    model = compiled(learning_rate=initial, momentum=0.9)
    model.fit(x, y, batch_size=BATCH, verbose=0)
    before = [v.numpy() for v in model.optimizer.momentums]
    corrected = hvd.callbacks.LearningRateScheduleCallback(initial, 0.25)
    corrected.set_model(model)
    corrected.on_epoch_begin(0)
    for old, new in zip(before, model.optimizer.momentums):
        np.testing.assert_allclose(new.numpy(), old * 0.25, rtol=1e-6)


CHECKS = Checks()
CHECKS.setup(lambda: hvd.init())
CHECKS.check("broadcast_from_nonzero_root")(check_broadcast_from_nonzero_root)
CHECKS.check("metric_average")(check_metric_average)
CHECKS.check("learning_rate_callbacks")(check_learning_rate_callbacks)
CHECKS.setup(lambda: hvd.barrier())


def main():
    CHECKS.run()
    print(f"rank {hvd.rank()}: keras callback checks passed", flush=True)


if __name__ == "__main__":
    worker_main(main)
