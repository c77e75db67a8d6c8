"""SyncBatchNormalization checks, run on N ranks by test_sync_batch_norm.py.

The reference is one process running keras.layers.BatchNormalization on the
concatenation of every rank's batch (every rank builds it from the same
seeds). Rank r's batch has 2 + r rows (uneven) unless a check says
otherwise; at np=2 also a mask, even batches, model.fit and saving. The
loss is sum(output * W) for a fixed W over the global batch,
so that its gradient is the sum over ranks of each rank's part: the input
gradients of rank r must equal rows r of the reference's, and the sum over
ranks of gamma's and beta's gradients the reference's.

``argv[1]`` is a directory for the saved model, ``argv[2:]`` the checks to run
(each registered by name in CHECKS; tests/mpi/test_sync_batch_norm.py says
which run at which size and makes a test of each).
"""
import os
import sys

import keras
import numpy as np
import tensorflow as tf

import tfdist.keras as hvd
from mpi_harness import Checks, worker_main

RTOL, ATOL = 1e-5, 2e-5


def sizes(even=None):
    return [even] * hvd.size() if even else [2 + r for r in range(hvd.size())]


def my_rows(counts):
    start = sum(counts[:hvd.rank()])
    return slice(start, start + counts[hvd.rank()])


def close(actual, expected, what):
    np.testing.assert_allclose(np.asarray(actual), np.asarray(expected), rtol=RTOL, atol=ATOL,
                               err_msg=f"rank {hvd.rank()}: {what}")


def make_pair(axis, channels, input_shape):
    """A SyncBatchNormalization and a keras BatchNormalization with the same random gamma/beta."""
    rng = np.random.RandomState(7)
    gamma = rng.uniform(0.5, 1.5, channels).astype("float32")
    beta = rng.normal(0, 0.5, channels).astype("float32")
    layers = []
    for cls in (hvd.SyncBatchNormalization, keras.layers.BatchNormalization):
        layer = cls(axis=axis, momentum=0.9)
        layer.build(input_shape)
        layer.gamma.assign(gamma)
        layer.beta.assign(beta)
        layers.append(layer)
    return layers


def forward_backward(layer, x, weights, mask=None):
    x = tf.convert_to_tensor(x)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True, mask=mask)
        loss = tf.reduce_sum(y * weights)
    dx, dgamma, dbeta = tape.gradient(loss, [x, layer.gamma, layer.beta])
    return y, dx, dgamma, dbeta


def check_layer(axis, shape, graph, counts, mask=False):
    """Forward, gradients and moving statistics against the reference, eagerly or traced."""
    rng = np.random.RandomState(11)
    total = sum(counts)
    full_shape = (total,) + shape
    x_all = rng.normal(1.5, 2.0, full_shape).astype("float32")
    w_all = rng.normal(0, 1, full_shape).astype("float32")
    m_all = rng.uniform(size=full_shape[:-1]) > 0.3 if mask else None
    channels = full_shape[axis]
    sync, plain = make_pair(axis, channels, (None,) + shape)
    rows = my_rows(counts)
    step = forward_backward
    if graph:
        step = tf.function(forward_backward)  # one trace per layer (fresh functions)
        step_plain = tf.function(forward_backward)
    else:
        step_plain = forward_backward
    y, dx, dgamma, dbeta = step(sync, x_all[rows], w_all[rows],
                                None if m_all is None else tf.constant(m_all[rows]))
    ry, rdx, rdgamma, rdbeta = step_plain(plain, x_all, w_all,
                                          None if m_all is None else tf.constant(m_all))
    label = f"axis={axis} shape={shape} graph={graph} counts={counts} mask={mask}"
    close(y, ry.numpy()[rows], f"{label}: output")
    close(dx, rdx.numpy()[rows], f"{label}: input gradient")
    gathered = hvd.allgather_object((dgamma.numpy(), dbeta.numpy()))
    close(sum(g for g, _ in gathered), rdgamma, f"{label}: gamma gradient (sum over ranks)")
    close(sum(b for _, b in gathered), rdbeta, f"{label}: beta gradient (sum over ranks)")
    close(sync.moving_mean.numpy(), plain.moving_mean.numpy(), f"{label}: moving mean")
    close(sync.moving_variance.numpy(), plain.moving_variance.numpy(), f"{label}: moving var")
    # Inference uses the moving statistics, as the Keras layer does.
    close(sync(x_all[rows], training=False), plain(x_all[rows], training=False),
          f"{label}: inference")
    # The check can fail: the local batch's own statistics differ from the global ones.
    local = keras.layers.BatchNormalization(axis=axis, momentum=0.9)
    local.build((None,) + shape)
    local.set_weights(make_pair(axis, channels, (None,) + shape)[1].get_weights())
    local_y = local(x_all[rows], training=True)
    assert not np.allclose(local_y.numpy(), ry.numpy()[rows], rtol=RTOL, atol=ATOL), label


def fit_model(layer_class):
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6),
                              layer_class(momentum=0.8), keras.layers.Dense(2)])
    return model


def check_fit(directory):
    """model.fit (graph mode) with a DistributedOptimizer against one process, whole batch."""
    batch, steps, lr = 3, 3, 0.1
    size, rank = hvd.size(), hvd.rank()
    rng = np.random.RandomState(5)
    x_all = rng.normal(2.0, 1.5, (steps, size, batch, 4)).astype("float32")
    y_all = rng.normal(0, 1, (steps, size, batch, 2)).astype("float32")
    model = fit_model(hvd.SyncBatchNormalization)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr)), loss="mse")
    model.fit(x_all[:, rank].reshape(-1, 4), y_all[:, rank].reshape(-1, 2), batch_size=batch,
              epochs=1, shuffle=False, verbose=0)
    reference = fit_model(keras.layers.BatchNormalization)
    reference.compile(optimizer=keras.optimizers.SGD(lr), loss="mse")
    reference.fit(x_all.reshape(-1, 4), y_all.reshape(-1, 2), batch_size=batch * size,
                  epochs=1, shuffle=False, verbose=0)
    for actual, expected in zip(model.get_weights(), reference.get_weights()):
        close(actual, expected, "model.fit weights (moving statistics included)")

    # Saves and loads like the Keras layer.
    layer = model.layers[1]
    config = layer.get_config()
    assert hvd.SyncBatchNormalization.from_config(config).get_config() == config
    path = os.path.join(directory, f"syncbn-{rank}.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    assert type(loaded.layers[1]) is hvd.SyncBatchNormalization, type(loaded.layers[1])
    assert loaded.layers[1].get_config() == config
    for actual, expected in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(actual, expected)
    probe = x_all[0, rank]
    np.testing.assert_array_equal(loaded(probe, training=False), model(probe, training=False))


def check_single_rank():
    """At one rank the layer is keras.layers.BatchNormalization, bit for bit."""
    for axis, shape in ((-1, (3, 4)), (1, (4, 3))):
        rng = np.random.RandomState(2)
        x = rng.normal(1.0, 2.0, (5,) + shape).astype("float32")
        w = rng.normal(0, 1, (5,) + shape).astype("float32")
        sync, plain = make_pair(axis, ((5,) + shape)[axis], (None,) + shape)
        for got, want in zip(forward_backward(sync, x, w), forward_backward(plain, x, w)):
            np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(sync.moving_mean.numpy(), plain.moving_mean.numpy())
        np.testing.assert_array_equal(sync.moving_variance.numpy(),
                                      plain.moving_variance.numpy())


def check_refusals():
    for kwargs in ({"synchronized": True}, {"renorm": True}):
        try:
            hvd.SyncBatchNormalization(**kwargs)
        except ValueError as error:
            assert next(iter(kwargs)) in str(error), error
        else:
            raise AssertionError(f"{kwargs} was accepted")


CHECKS = Checks()
CHECKS.setup(lambda directory: hvd.init())
# At one rank.
CHECKS.check("single_rank")(lambda directory: check_single_rank())
CHECKS.check("refusals")(lambda directory: check_refusals())
# At several ranks, uneven batches, eager and traced.
for graph in (False, True):
    mode = "graph" if graph else "eager"
    CHECKS.check(f"axis=-1 {mode}")(
        lambda directory, graph=graph: check_layer(-1, (3, 4), graph, sizes()))
    CHECKS.check(f"axis=1 {mode}")(
        lambda directory, graph=graph: check_layer(1, (4, 3), graph, sizes()))
# Once (at two ranks), to keep the test cheap.
CHECKS.check("mask")(lambda directory: check_layer(-1, (5, 3), False, sizes(), mask=True))
CHECKS.check("even")(lambda directory: check_layer(-1, (2, 3), True, sizes(even=2)))
CHECKS.check("fit")(check_fit)


def main():
    CHECKS.run(sys.argv[1], only=sys.argv[2:] or None)
    print(f"rank {hvd.rank()}: sync batch norm checks passed", flush=True)


if __name__ == "__main__":
    worker_main(main)
