"""Local variables (per-rank heads), run on N ranks by test_local_variables.py.

A shared body Dense(4 -> 5, tanh) and a local head Dense(5 -> 3), the same
initial weights on every rank, different data on every rank (rank r's
targets are centred on r). The numpy reference simulates every rank: the
body takes the mean of the ranks' gradients (each computed with that
rank's own head); rank r's head takes its own gradient, divided by the
number of ranks when scale_local_gradients (Horovod's default).

``argv[1]`` is a directory for the checkpoints. Each check is registered by
name in CHECKS and is a test of its own in tests/mpi/test_local_variables.py.
"""
import sys

import keras
import numpy as np
import tensorflow as tf

import tfdist
import tfdist.keras as hvd
from mpi_harness import Checks, worker_main

INPUTS, HIDDEN, OUTPUTS, BATCH, STEPS, LR, MOMENTUM = 4, 5, 3, 6, 3, 0.1, 0.9
TOLERANCE = 5e-5


def initial_weights():
    rng = np.random.RandomState(0)
    return [rng.normal(0, 0.5, (INPUTS, HIDDEN)), rng.normal(0, 0.1, HIDDEN),
            rng.normal(0, 0.5, (HIDDEN, OUTPUTS)), rng.normal(0, 0.1, OUTPUTS)]


def rank_data(rank):
    rng = np.random.RandomState(100 + rank)
    return (rng.normal(0, 1, (STEPS * BATCH, INPUTS)).astype("float32"),
            rng.normal(rank, 1, (STEPS * BATCH, OUTPUTS)).astype("float32"))


def numpy_gradients(w, x, y):
    """Gradients of mean((tanh(x W1 + b1) W2 + b2 - y)^2) in float64."""
    w1, b1, w2, b2 = w
    x, y = x.astype("float64"), y.astype("float64")
    h = np.tanh(x @ w1 + b1)
    d_out = 2.0 * (h @ w2 + b2 - y) / y.size
    dz = (d_out @ w2.T) * (1.0 - h * h)
    return [x.T @ dz, dz.sum(0), h.T @ d_out, d_out.sum(0)]


def reference(size, momentum, scale_local):
    """Every rank's weights after STEPS steps: [rank][w1, b1, w2, b2]."""
    weights = [[w.copy() for w in initial_weights()] for _ in range(size)]
    velocity = [[np.zeros_like(w) for w in initial_weights()] for _ in range(size)]
    data = [rank_data(r) for r in range(size)]
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        grads = [numpy_gradients(weights[r], data[r][0][rows], data[r][1][rows])
                 for r in range(size)]
        for r in range(size):
            for i in range(4):
                if i < 2:  # the body: averaged over the ranks
                    g = np.mean([grads[q][i] for q in range(size)], axis=0)
                else:  # the head: this rank's own
                    g = grads[r][i] / (size if scale_local else 1)
                velocity[r][i] = momentum * velocity[r][i] - LR * g
                weights[r][i] = weights[r][i] + velocity[r][i]
    return weights


def make_model():
    model = keras.Sequential([keras.Input((INPUTS,)),
                              keras.layers.Dense(HIDDEN, activation="tanh"),
                              keras.layers.Dense(OUTPUTS)])
    model.set_weights([w.astype("float32") for w in initial_weights()])
    return model


def gather(array):
    return np.stack(hvd.allgather_object(np.asarray(array)))


def check_weights(weights, expected, what):
    rank = hvd.rank()
    for i, (actual, want) in enumerate(zip(weights, expected[rank])):
        np.testing.assert_allclose(actual, want, rtol=TOLERANCE, atol=TOLERANCE,
                                   err_msg=f"rank {rank}, {what}: weight {i} vs the reference")
    for i in (0, 1):  # the body: the same on every rank
        every = gather(weights[i])
        for r in range(1, len(every)):
            np.testing.assert_array_equal(every[r], every[0],
                                          err_msg=f"{what}: body weight {i} differs on rank {r}")
    every = gather(weights[2])
    assert not np.allclose(every[0], every[1], rtol=1e-3, atol=1e-3), \
        f"{what}: the local heads of ranks 0 and 1 are equal"


def check_fit_partial_optimizer(directory):
    """model.fit with PartialDistributedOptimizer(local_layers=head); then a checkpoint."""
    model = make_model()
    head = model.layers[1]
    optimizer = hvd.PartialDistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM),
                                                local_layers=[head])
    model.compile(optimizer=optimizer, loss="mse")
    x, y = rank_data(hvd.rank())
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    check_weights(model.get_weights(), reference(hvd.size(), MOMENTUM, True),
                  "fit, PartialDistributedOptimizer")
    assert all(tfdist.is_local_variable(v) for v in head.trainable_weights)
    assert not any(tfdist.is_local_variable(v) for v in model.layers[0].trainable_weights)
    check_checkpoint(model, directory)
    return model


def check_checkpoint(model, directory):
    """Local variables (and their momenta) come back per rank; the rest from rank 0's file."""
    optimizer = model.optimizer
    local_slots = [v for v in optimizer.variables if tfdist.is_local_variable(v)]
    assert len(local_slots) == 2, [v.path for v in optimizer.variables]
    saved = [v.numpy().copy() for v in model.variables + optimizer.variables]
    tfdist.checkpoint.save(directory, 1, model=model, blocking=True)
    for variable in model.variables + optimizer.variables:
        variable.assign(tf.zeros_like(variable))
    restored = tfdist.checkpoint.restore(directory, model=model)
    assert restored is not None and restored.step == 1
    for variable, value in zip(model.variables + optimizer.variables, saved):
        np.testing.assert_array_equal(variable.numpy(), value,
                                      err_msg=f"rank {hvd.rank()}: {variable.path} restored")


def check_tape(partial):
    """A custom loop: DistributedGradientTape + register_local_var, or the Partial tape."""
    model = make_model()
    head = model.layers[1]
    optimizer = keras.optimizers.SGD(LR)
    x, y = rank_data(hvd.rank())
    loss_fn = keras.losses.MeanSquaredError()
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        with tf.GradientTape() as tape:
            loss = loss_fn(y[rows], model(x[rows]))
        if partial:
            tape = hvd.PartialDistributedGradientTape(tape, local_layers=head,
                                                      scale_local_gradients=False)
        else:
            tape = hvd.DistributedGradientTape(tape, scale_local_gradients=False)
            for variable in head.trainable_weights:
                tape.register_local_var(variable)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    check_weights(model.get_weights(), reference(hvd.size(), 0.0, False),
                  f"tape (partial={partial})")


def check_optimizer_register_local_var():
    """DistributedOptimizer.register_local_var, eager apply_gradients, Horovod's scaling."""
    model = make_model()
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM))
    for variable in model.layers[1].trainable_weights:
        optimizer.register_local_var(variable)
    x, y = rank_data(hvd.rank())
    loss_fn = keras.losses.MeanSquaredError()
    for step in range(STEPS):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        with tf.GradientTape() as tape:
            loss = loss_fn(y[rows], model(x[rows]))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
    check_weights(model.get_weights(), reference(hvd.size(), MOMENTUM, True),
                  "DistributedOptimizer.register_local_var")
    assert sum(tfdist.is_local_variable(v) for v in optimizer.variables) == 2


def expect_broadcast_error(action, what):
    try:
        action()
    except ValueError as error:
        assert "local variable" in str(error) and "kernel" in str(error), error
    else:
        raise AssertionError(f"{what} broadcast a local variable")


def check_broadcast_refuses_local(model):
    expect_broadcast_error(lambda: hvd.broadcast_variables(model.variables, 0),
                           "broadcast_variables")
    # The callback broadcasts the global (non-local) variables only: each head stays its
    # rank's own, and the shared body is rank 0's.
    assert any(hvd.is_local_variable(v) for v in model.variables), "no local variables"
    shared = next(v for v in model.variables if not hvd.is_local_variable(v))
    if hvd.rank() != 0:  # the broadcast must undo this
        shared.assign_add(tf.ones_like(shared))
    x, y = rank_data(hvd.rank())
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, steps_per_epoch=1,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0),
                         _AfterBroadcast(model)])
    # The documented way by hand: everything but the local variables.
    hvd.broadcast_variables([v for v in model.variables if not hvd.is_local_variable(v)], 0)


class _AfterBroadcast(keras.callbacks.Callback):
    """Right after the broadcast: global variables equal rank 0's, local ones this rank's."""

    def __init__(self, model):
        super().__init__()
        self.before = [(hvd.is_local_variable(v), v.numpy().copy()) for v in model.variables]

    def on_train_batch_begin(self, batch, logs=None):
        if batch != 0:
            return
        for (local, before), variable in zip(self.before, self.model.variables):
            now = variable.numpy()
            if local:
                np.testing.assert_array_equal(now, before)
            gathered = hvd.allgather(tf.constant(now[None])).numpy()
            same = all(np.array_equal(gathered[0], g) for g in gathered[1:])
            if local:
                assert not same, f"local {variable.path} was made equal on every rank"
            else:
                assert same, f"global {variable.path} differs between ranks after the broadcast"


# The model check "fit" trained, which check "broadcast_refuses_local" reuses.
FITTED = {}


def fit_and_keep(directory):
    FITTED["model"] = check_fit_partial_optimizer(directory)


def broadcast_refuses_fitted(directory):
    assert "model" in FITTED, "needs the model of check 'fit', which failed"
    check_broadcast_refuses_local(FITTED["model"])


CHECKS = Checks()
CHECKS.setup(lambda directory: hvd.init())
CHECKS.check("fit")(fit_and_keep)
CHECKS.check("tape")(lambda directory: check_tape(partial=False))
CHECKS.check("partial_tape")(lambda directory: check_tape(partial=True))
CHECKS.check("optimizer_register_local_var")(
    lambda directory: check_optimizer_register_local_var())
CHECKS.check("broadcast_refuses_local")(broadcast_refuses_fitted)


def main():
    CHECKS.run(sys.argv[1])
    print(f"rank {hvd.rank()}: local variable checks passed", flush=True)


if __name__ == "__main__":
    worker_main(main)
