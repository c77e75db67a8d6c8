"""Started by tfdistrun --restarts (tests/e2e/test_checkpoint_restart.py): training that gets killed.

Two phases, each resumed from its own checkpoint directory after a restart:
``fit`` (Keras fit with BackupAndRestore saving mid-epoch, Adam, dropout)
and ``loop`` (a custom loop with DistributedGradientTape, SGD with momentum,
tfdist.checkpoint.save every 4 steps). The plan in RESUME_PLAN (JSON) says,
per attempt (TFDIST_RESTART), which rank kills itself with SIGKILL in which
phase after how many batches of that attempt. After both phases finish,
the final attempt trains both again from scratch without any checkpoint
(the uninterrupted reference) and writes both results as .npz files; the
test compares them bit for bit.
"""
import json
import os
import signal
import sys
import time

import numpy as np

from mpi_harness import worker_main

FIT_EPOCHS, FIT_STEPS, FIT_BATCH, FIT_SAVE_EVERY = 3, 8, 4, 5
LOOP_STEPS, LOOP_SAVE_EVERY = 30, 4
INPUTS, OUTPUTS = 6, 3


def plan_for(attempt: int):
    plan = json.loads(os.environ.get("RESUME_PLAN", "[]"))
    return plan[attempt] if attempt < len(plan) else None


def rank_pool(rank: int):
    rng = np.random.RandomState(10 + rank)
    x = rng.normal(0, 1, (64, INPUTS)).astype("float32")
    y = (x[:, :OUTPUTS] * (rank + 1) + rng.normal(0, 0.1, (64, OUTPUTS))).astype("float32")
    return x, y


def make_model():
    import keras
    keras.utils.set_random_seed(5)  # the same initial weights on every rank and every run
    return keras.Sequential([keras.Input((INPUTS,)), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dropout(0.3, seed=7), keras.layers.Dense(OUTPUTS)])


def epoch_data(rank: int):
    import tensorflow as tf
    x, y = rank_pool(rank)
    x, y = x[:FIT_STEPS * FIT_BATCH], y[:FIT_STEPS * FIT_BATCH]  # exactly one epoch

    def make_epoch(epoch):
        # The epoch seeds the shuffle: the same order for the same epoch in every run.
        return (tf.data.Dataset.from_tensor_slices((x, y))
                .shuffle(len(x), seed=tf.cast(epoch, tf.int64) + 1000)
                .batch(FIT_BATCH, drop_remainder=True))
    return make_epoch


class KillAfter:
    """SIGKILLs this process at the start of its ``after``-th batch of this attempt."""

    def __init__(self, after: int):
        self.after, self.seen = after, 0

    def tick(self):
        self.seen += 1
        if self.seen > self.after:
            print(f"KILL rank {os.environ.get('OMPI_COMM_WORLD_RANK')} after {self.after} "
                  f"batches at {time.time():.3f}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


def compiled(model, hvd):
    import keras
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    return model


def fit_phase(hvd, directory, killer, slow):
    import keras

    class Hooks(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if slow:
                time.sleep(slow)
            if killer:
                killer.tick()

    model = compiled(make_model(), hvd)
    backup = hvd.callbacks.BackupAndRestore(directory, save_freq=FIT_SAVE_EVERY, keep=2,
                                            preemption_check_every=2)
    data = backup.dataset(epoch_data(hvd.rank()), steps_per_epoch=FIT_STEPS)
    model.fit(data, epochs=FIT_EPOCHS, steps_per_epoch=FIT_STEPS, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), backup, Hooks()])
    return model


def fit_reference(hvd):
    import tensorflow as tf
    model = compiled(make_model(), hvd)
    make_epoch = epoch_data(hvd.rank())
    data = tf.data.Dataset.range(FIT_EPOCHS).flat_map(make_epoch)
    model.fit(data, epochs=FIT_EPOCHS, steps_per_epoch=FIT_STEPS, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    return model


def loop_batch(rank: int, step: int):
    x, y = rank_pool(rank)
    rows = np.random.RandomState(step).permutation(64)[:FIT_BATCH]
    return x[rows], y[rows]


def loop_phase(hvd, directory, killer):
    import keras
    import tensorflow as tf
    import tfdist.checkpoint as ckpt
    model = make_model()
    optimizer = keras.optimizers.SGD(0.05, momentum=0.9)
    optimizer.build(model.trainable_variables)
    start = 0
    if directory is not None:
        restored = ckpt.restore(directory, model=model, optimizer=optimizer)
        start = restored.step if restored else 0
    for step in range(start, LOOP_STEPS):
        if killer:
            killer.tick()
        x, y = loop_batch(hvd.rank(), step)
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        if directory is not None and (step + 1) % LOOP_SAVE_EVERY == 0:
            ckpt.save(directory, step + 1, model=model, optimizer=optimizer,
                      extra={"phase": "loop"}, keep=2)
    if directory is not None:
        ckpt.save(directory, LOOP_STEPS, model=model, optimizer=optimizer, keep=2,
                  blocking=True)
    return model, optimizer


def state_of(model, optimizer):
    values = {f"model/{i}": np.asarray(v.numpy()) for i, v in enumerate(model.variables)}
    values.update({f"optimizer/{i}": np.asarray(v.numpy())
                   for i, v in enumerate(optimizer.variables)})
    return values


def body() -> None:
    import tensorflow as tf
    tf.config.experimental.enable_op_determinism()
    import tfdist.keras as hvd
    hvd.init()
    rank = hvd.rank()
    root, out = sys.argv[1], sys.argv[2]
    phases = sys.argv[3].split(",")
    slow = float(os.environ.get("RESUME_SLOW", "0"))
    attempt = int(os.environ.get("TFDIST_RESTART", "0"))
    plan = plan_for(attempt)
    killer = {}
    if plan and plan["rank"] == rank:
        killer[plan["phase"]] = KillAfter(plan["after"])
    print(f"rank {rank}: attempt {attempt} starts at {time.time():.3f}", flush=True)
    results = {}
    if "fit" in phases:
        model = fit_phase(hvd, os.path.join(root, "fit"), killer.get("fit"), slow)
        results["fit"] = state_of(model, model.optimizer)
    if "loop" in phases:
        results["loop"] = state_of(*loop_phase(hvd, os.path.join(root, "loop"),
                                               killer.get("loop")))
    references = {}
    if "fit" in phases:
        model = fit_reference(hvd)
        references["fit"] = state_of(model, model.optimizer)
    if "loop" in phases:
        references["loop"] = state_of(*loop_phase(hvd, None, None))
    os.makedirs(out, exist_ok=True)
    for phase in results:
        np.savez(os.path.join(out, f"{phase}.resumed.{rank}.npz"), **results[phase])
        np.savez(os.path.join(out, f"{phase}.reference.{rank}.npz"), **references[phase])
    print(f"rank {rank}: finished", flush=True)


if __name__ == "__main__":
    worker_main(body)
