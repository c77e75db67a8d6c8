"""Top-k and PowerSGD (with and without error feedback) on N ranks, against numpy references.

Every rank regenerates every rank's inputs (seeded by rank) and runs the
same compression in numpy: top-k with ties to the lower index and a
residual per (rank, tensor), and with momentum DGC's momentum correction
(velocity u = m·u + g added to the residual, both zeroed where sent); PowerSGD with modified Gram-Schmidt, the
warm-start Q and the residual M - P-hat Q_local^T. The initial Q is set
through tfdist.runtime.restore_rank_state, which the reference then also
uses.
"""
import sys

import keras
import numpy as np
import tensorflow as tf

import tfdist
import tfdist.keras as hvd
from tfdist import runtime
from tfdist.gradient_tape import gradient_names
from tfdist.compression.topk import topk_count
from keras_common import (BATCH, assert_same_on_all_ranks, assert_weights, make_model,
                          rank_data, reference_sgd)
from mpi_harness import Checks, worker_main

SHAPES = [(40, 30), (30,), (3, 3, 4, 8)]


def rank_tensors(rank, step):
    rng = np.random.RandomState(1000 * step + rank)
    return [rng.normal(0, 1, s).astype("float32") for s in SHAPES]


def numpy_topk(x, k):
    order = np.argsort(-np.abs(x), kind="stable")[:k]
    return np.sort(order)


class TopkReference:
    """Rank-order scatter-add of every rank's top-k pairs, with residuals."""

    def __init__(self, size, ratio, error_feedback, momentum=0.0):
        self.size, self.ratio, self.ef = size, ratio, error_feedback
        self.momentum = np.float32(momentum)
        self.residual = {}
        self.velocity = {}

    def accumulate(self, r, i, flat):
        """The residual with this step's gradient (or velocity) added, in float32."""
        if not self.ef:
            return flat.copy()
        if self.momentum:
            u = self.momentum * self.velocity.get((r, i), np.zeros_like(flat)) + flat
            self.velocity[(r, i)] = u
            return self.residual.get((r, i), np.zeros_like(flat)) + u
        return flat + self.residual.get((r, i), 0)

    def sum(self, per_rank):  # per_rank[r] = list of arrays; returns the sums per tensor
        total = [np.zeros(a.size, np.float32) for a in per_rank[0]]
        for r, arrays in enumerate(per_rank):
            for i, a in enumerate(arrays):
                acc = self.accumulate(r, i, a.reshape(-1).astype(np.float32))
                chosen = numpy_topk(acc, topk_count(self.ratio, acc.size))
                np.add.at(total[i], chosen, acc[chosen])
                if self.ef:
                    acc[chosen] = 0
                    self.residual[(r, i)] = acc
                if self.momentum:
                    self.velocity[(r, i)][chosen] = 0  # momentum factor masking
        return [t.reshape(a.shape) for t, a in zip(total, per_rank[0])]

    def dense_sum(self, per_rank):
        """A dense step: every rank sends its whole accumulation; velocity is kept."""
        total = [np.zeros(a.size, np.float32) for a in per_rank[0]]
        for r, arrays in enumerate(per_rank):
            for i, a in enumerate(arrays):
                total[i] += self.accumulate(r, i, a.reshape(-1).astype(np.float32))
                self.residual.pop((r, i), None)
        return [t.reshape(a.shape) for t, a in zip(total, per_rank[0])]


def check_topk_allreduce():
    size, rank = tfdist.size(), tfdist.rank()
    for ef in (True, False):
        compressor = tfdist.Compression.topk(0.1, error_feedback=ef)
        names = [f"topk{ef}.{i}" for i in range(len(SHAPES))]
        reference = TopkReference(size, 0.1, ef)

        @tf.function
        def step(tensors):
            return compressor.allreduce(tensors, names, op=tfdist.Average,
                                        group_name=f"topk{ef}.group")

        pairs = sum(topk_count(0.1, int(np.prod(s))) for s in SHAPES)
        assert compressor.sparse_is_cheaper(pairs, sum(int(np.prod(s)) for s in SHAPES), size)
        for s in range(4):
            out = step([tf.constant(a) for a in rank_tensors(rank, s)])
            expected = reference.sum([rank_tensors(r, s) for r in range(size)])
            for o, e in zip(out, expected):
                np.testing.assert_allclose(o.numpy(), e / size, rtol=1e-6, atol=1e-7)
        # Eager, Sum, float64 in and out.
        out = compressor.allreduce([tf.constant(rank_tensors(rank, 9)[1], tf.float64)],
                                   [f"eager{ef}"], op=tfdist.Sum)[0]
        assert out.dtype == tf.float64
        expected = TopkReference(size, 0.1, ef).sum(
            [[rank_tensors(r, 9)[1]] for r in range(size)])[0]
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6, atol=1e-6)
        assert compressor.wire_bytes() > 0


def check_topk_momentum_correction():
    """DGC momentum correction: outputs and the per-rank state against numpy, bit for bit."""
    size, rank = tfdist.size(), tfdist.rank()
    compressor = tfdist.Compression.topk(0.1, momentum=0.9)
    names = [f"topkm.{i}" for i in range(len(SHAPES))]
    reference = TopkReference(size, 0.1, True, momentum=0.9)

    @tf.function
    def step(tensors):
        return compressor.allreduce(tensors, names, op=tfdist.Average, group_name="topkm.group")

    plain = TopkReference(size, 0.1, True)
    for s in range(5):
        out = step([tf.constant(a) for a in rank_tensors(rank, s)])
        per_rank = [rank_tensors(r, s) for r in range(size)]
        expected = reference.sum(per_rank)
        without = plain.sum(per_rank)
        for o, e in zip(out, expected):
            np.testing.assert_allclose(o.numpy(), e / size, rtol=1e-6, atol=1e-7)
    # Plain error feedback gives another result: the check can fail.
    assert any(not np.allclose(o.numpy(), w / size, atol=1e-4) for o, w in zip(out, without))
    state = runtime.rank_state()
    for i, name in enumerate(names):
        velocity = state[f"topk.velocity/{name}"]
        residual = state[f"topk.residual/{name}"]
        assert velocity.shape == SHAPES[i], velocity.shape
        np.testing.assert_array_equal(velocity.reshape(-1), reference.velocity[(rank, i)])
        np.testing.assert_array_equal(residual.reshape(-1), reference.residual[(rank, i)])
        # Masking: where the residual was just sent (0), the velocity is 0 too.
        sent = reference.residual[(rank, i)] == 0
        assert np.all(velocity.reshape(-1)[sent] == 0)

    # A dense step (ratio 1 on a large tensor) sends residual + m·u + g and keeps u.
    n = 200_000
    grads = [[np.random.RandomState(50 + r + 10 * s).normal(0, 1, n).astype("float32")]
             for s in range(2) for r in range(size)]
    first, second = grads[:size], grads[size:]
    sparse = tfdist.Compression.topk(0.01, momentum=0.9)
    dense = tfdist.Compression.topk(1.0, momentum=0.9)
    assert sparse.sparse_is_cheaper(topk_count(0.01, n), n, size)
    assert not dense.sparse_is_cheaper(n, n, size)
    reference = TopkReference(size, 0.01, True, momentum=0.9)
    out = sparse.allreduce([tf.constant(first[rank][0])], ["topkm.dense"], op=tfdist.Sum)[0]
    np.testing.assert_allclose(out.numpy(), reference.sum(first)[0], rtol=1e-6, atol=1e-6)
    out = dense.allreduce([tf.constant(second[rank][0])], ["topkm.dense"], op=tfdist.Sum)[0]
    np.testing.assert_allclose(out.numpy(), reference.dense_sum(second)[0], rtol=1e-5, atol=1e-5)
    state = runtime.rank_state()
    assert "topk.residual/topkm.dense" not in state
    np.testing.assert_array_equal(state["topk.velocity/topkm.dense"], reference.velocity[(rank, 0)])


def check_topk_start_step():
    """Dense (momentum SGD, velocity kept) for the first start_step calls, then sparse."""
    size, rank = tfdist.size(), tfdist.rank()
    compressor = tfdist.Compression.topk(0.1, momentum=0.9, start_step=2)
    names = [f"topkw.{i}" for i in range(len(SHAPES))]
    reference = TopkReference(size, 0.1, True, momentum=0.9)

    @tf.function
    def step(tensors):
        return compressor.allreduce(tensors, names, op=tfdist.Average, group_name="topkw.group")

    for s in range(4):
        out = step([tf.constant(a) for a in rank_tensors(rank, s)])
        per_rank = [rank_tensors(r, s) for r in range(size)]
        expected = reference.dense_sum(per_rank) if s < 2 else reference.sum(per_rank)
        for o, e in zip(out, expected):
            np.testing.assert_allclose(o.numpy(), e / size, rtol=1e-5, atol=1e-6,
                                       err_msg=f"start_step, step {s}")
        if s == 1:  # after the dense steps: no residual, the whole velocity
            state = runtime.rank_state()
            assert f"topk.residual/{names[0]}" not in state
            np.testing.assert_array_equal(state[f"topk.velocity/{names[0]}"].reshape(-1),
                                          reference.velocity[(rank, 0)])
    assert runtime.rank_state()["step/topk/topkw.group"] == 4


def check_topk_dense_switch():
    # At ratio 1 the pairs are twice the dense bytes: a large call goes dense
    # and sends gradient + residual exactly.
    size, rank = tfdist.size(), tfdist.rank()
    compressor = tfdist.Compression.topk(1.0)
    n = 200_000
    assert not compressor.sparse_is_cheaper(n, n, size)
    tensors = [np.random.RandomState(r).normal(0, 1, n).astype("float32") for r in range(size)]
    out = compressor.allreduce([tf.constant(tensors[rank])], ["dense"], op=tfdist.Average)[0]
    np.testing.assert_allclose(out.numpy(), np.mean(tensors, axis=0), rtol=1e-5, atol=1e-6)
    assert compressor.wire_bytes() == compressor.sent.dense_by_call["dense"]


def check_error_feedback(steps=400):
    """The issue's test: a constant gradient of 1000 entries through top-k 5%."""
    size, rank = tfdist.size(), tfdist.rank()
    gradient = np.random.RandomState(7 + rank).uniform(0.1, 1.0, 1000).astype("float32")
    true_mean = np.mean([np.random.RandomState(7 + r).uniform(0.1, 1.0, 1000)
                         for r in range(size)], axis=0)
    errors = {}
    for ef in (True, False):
        compressor = tfdist.Compression.topk(0.05, error_feedback=ef)

        @tf.function
        def step(g):
            return compressor.allreduce([g], [f"ef{ef}"], op=tfdist.Average)[0]

        total = np.zeros(1000)
        g = tf.constant(gradient)
        for _ in range(steps):
            total += step(g).numpy()
        mean = total / steps
        errors[ef] = np.linalg.norm(mean - true_mean) / np.linalg.norm(true_mean)
    assert errors[True] < 0.05, errors
    assert errors[False] > 0.5, errors
    if rank == 0:
        print(f"error feedback: relative L2 error {errors[True]:.4f} with, "
              f"{errors[False]:.4f} without")


def orthonormalize(p):
    p = p.astype(np.float64).copy()
    basis = []
    for c in range(p.shape[1]):
        col = p[:, c].copy()
        norm0 = np.linalg.norm(col)
        for _ in range(2):
            for q in basis:
                col -= (col @ q) * q
        norm = np.linalg.norm(col)
        if not norm > 1e-6 * norm0 or norm == 0:
            p[:, c] = 0
            continue
        col /= norm
        p[:, c] = col
        basis.append(col)
    return p


class PowerSgdReference:
    def __init__(self, size, rank, ef, q0):
        self.size, self.rank, self.ef = size, rank, ef
        self.q = dict(q0)  # tensor index -> m x r
        self.residual = {}

    def average(self, per_rank, compressed):
        out = []
        for i in range(len(per_rank[0])):
            if i not in compressed:
                out.append(np.mean([a[i] for a in per_rank], axis=0))
                continue
            shape = per_rank[0][i].shape
            ms = []
            for r, arrays in enumerate(per_rank):
                m = arrays[i].reshape(-1, shape[-1]).astype(np.float64)
                if self.ef:
                    m = m + self.residual.get((r, i), 0)
                ms.append(m)
            p_hat = orthonormalize(np.mean([m @ self.q[i] for m in ms], axis=0))
            q_local = [m.T @ p_hat for m in ms]
            self.q[i] = np.mean(q_local, axis=0)
            if self.ef:
                for r, (m, ql) in enumerate(zip(ms, q_local)):
                    self.residual[(r, i)] = m - p_hat @ ql.T
            out.append((p_hat @ self.q[i].T).reshape(shape))
        return out


def check_powersgd_allreduce():
    size, rank = tfdist.size(), tfdist.rank()
    for ef in (True, False):
        compressor = tfdist.Compression.powersgd(2, error_feedback=ef)
        names = [f"psgd{ef}.{i}" for i in range(len(SHAPES))]
        compressed = [i for i, s in enumerate(SHAPES) if compressor.compresses(s)]
        assert compressed == [0, 2], compressed
        rng = np.random.RandomState(5)
        q0 = {i: rng.normal(0, 1, (SHAPES[i][-1], 2)).astype("float32")
              for i in compressed}
        state = runtime.rank_state()
        state.update({f"powersgd.q/{names[i]}": q for i, q in q0.items()})
        runtime.restore_rank_state(state)
        reference = PowerSgdReference(size, 2, ef, q0)

        @tf.function
        def step(tensors):
            return compressor.allreduce(tensors, names, op=tfdist.Average,
                                        group_name=f"psgd{ef}.group")

        for s in range(3):
            out = step([tf.constant(a) for a in rank_tensors(rank, s)])
            expected = reference.average([rank_tensors(r, s) for r in range(size)], compressed)
            for i, (o, e) in enumerate(zip(out, expected)):
                np.testing.assert_allclose(o.numpy(), e, rtol=1e-4, atol=1e-4,
                                           err_msg=f"powersgd ef={ef} step {s} tensor {i}")
        state = runtime.rank_state()
        if ef:
            np.testing.assert_allclose(state[f"powersgd.residual/{names[0]}"],
                                       reference.residual[(rank, 0)], rtol=1e-4, atol=1e-4)
        else:
            assert f"powersgd.residual/{names[0]}" not in state
        np.testing.assert_allclose(state[f"powersgd.q/{names[2]}"], reference.q[2],
                                   rtol=1e-4, atol=1e-4)


def check_powersgd_rank_one_converges():
    size, rank = tfdist.size(), tfdist.rank()
    u = np.linspace(-1, 1, 50).astype("float32")
    v = np.cos(np.arange(20)).astype("float32")
    g = ((rank + 1) * np.outer(u, v)).astype("float32")
    exact = np.mean([(r + 1) * np.outer(u, v) for r in range(size)], axis=0)
    compressor = tfdist.Compression.powersgd(1)
    errors = []
    for _ in range(3):
        out = compressor.allreduce([tf.constant(g)], ["rank1"], op=tfdist.Average)[0].numpy()
        errors.append(np.abs(out - exact).max() / np.abs(exact).max())
    assert errors[-1] < 1e-5, errors


def check_powersgd_start_step():
    size, rank = tfdist.size(), tfdist.rank()
    compressor = tfdist.Compression.powersgd(1, start_step=2)
    g = np.random.RandomState(rank).normal(0, 1, (30, 20)).astype("float32")
    exact = np.mean([np.random.RandomState(r).normal(0, 1, (30, 20)) for r in range(size)], 0)

    @tf.function
    def step(t):
        return compressor.allreduce([t], ["start"], op=tfdist.Average)[0]

    outs = [step(tf.constant(g)).numpy() for _ in range(3)]
    np.testing.assert_allclose(outs[0], exact, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outs[1], exact, rtol=1e-5, atol=1e-6)
    if size > 1:  # from step 2 on, a rank-1 approximation of a random matrix
        assert np.abs(outs[2] - exact).max() > 1e-2


def check_rank_state_round_trip():
    rank = tfdist.rank()
    compressor = tfdist.Compression.topk(0.2)
    g = tf.constant(rank_tensors(rank, 0)[0])
    compressor.allreduce([g], ["roundtrip"], op=tfdist.Average)
    saved = runtime.rank_state()
    assert "topk.residual/roundtrip" in saved and saved["topk.residual/roundtrip"].shape == (40, 30)
    first = compressor.allreduce([g], ["roundtrip"], op=tfdist.Average)[0].numpy()
    changed = runtime.rank_state()["topk.residual/roundtrip"]
    assert not np.array_equal(changed, saved["topk.residual/roundtrip"])
    runtime.restore_rank_state(saved)
    again = runtime.rank_state()
    assert sorted(again) == sorted(saved)
    for key in saved:
        np.testing.assert_array_equal(again[key], saved[key])
    second = compressor.allreduce([g], ["roundtrip"], op=tfdist.Average)[0].numpy()
    np.testing.assert_array_equal(first, second)


def expect_rejected(call, error_type, words, what):
    """``call()`` must raise ``error_type`` with every one of ``words`` in its message."""
    try:
        call()
    except error_type as error:
        assert all(word in str(error) for word in words), error
    else:
        raise AssertionError(f"{what} accepted")


def check_errors():
    for bad in (0, 1.5, -0.1, "0.1"):
        expect_rejected(lambda: tfdist.Compression.topk(bad), ValueError, ["ratio"],
                        f"topk({bad!r})")
    for bad in (0, -1, 1.5):
        expect_rejected(lambda: tfdist.Compression.powersgd(bad), ValueError, ["rank"],
                        f"powersgd({bad!r})")
    expect_rejected(lambda: tfdist.Compression.topk(0.1).allreduce(
        [tf.constant([1, 2, 3])], ["ints"], op=tfdist.Sum), TypeError, ["ints", "int32"],
        "top-k of an integer tensor")
    for compressor in (tfdist.Compression.topk(0.1), tfdist.Compression.powersgd(1)):
        expect_rejected(lambda: compressor.allreduce([tf.ones(4)], ["x"], op=tfdist.Max),
                        ValueError, ["op=Max"], f"{compressor} with Max")
    for bad in (-0.1, 1.0, True, "0.9"):
        expect_rejected(lambda: tfdist.Compression.topk(0.1, momentum=bad), ValueError,
                        ["momentum"], f"topk(momentum={bad!r})")
    for bad in (-1, 1.5, True):
        expect_rejected(lambda: tfdist.Compression.topk(0.1, start_step=bad), ValueError,
                        ["start_step"], f"topk(start_step={bad!r})")
    expect_rejected(lambda: tfdist.Compression.topk(0.1, error_feedback=False, momentum=0.9),
                    ValueError, ["error_feedback"],
                    "momentum correction without error feedback")
    for compressor in (tfdist.Compression.topk(0.25, error_feedback=False),
                       tfdist.Compression.topk(0.25, momentum=0.9, start_step=3),
                       tfdist.Compression.powersgd(3, start_step=5)):
        again = tfdist.Compression.from_config(compressor.get_config())
        assert again.get_config() == compressor.get_config(), again


def topk_mean(size, ratio, momentum=0.0):
    """reference_sgd's ``mean`` for top-k with error feedback (called per weight, in order)."""
    references, calls = {}, [0]

    def mean(grads):
        i = calls[0] % 4  # keras_common's model has four weights
        calls[0] += 1
        reference = references.setdefault(i, TopkReference(size, ratio, True, momentum))
        return reference.sum([[g.astype("float32")] for g in grads])[0] / size

    return mean


def check_fit_and_tape_with_topk(steps=3, lr=0.1, momentum=0.9):
    size = tfdist.size()
    compressor = hvd.Compression.topk(0.3)
    sizes = [20, 5, 15, 3]
    assert compressor.sparse_is_cheaper(sum(topk_count(0.3, n) for n in sizes), 43, size)
    expected = reference_sgd(size, steps, lr, momentum, mean=topk_mean(size, 0.3))
    model = make_model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=momentum),
                                                     compression=compressor), loss="mse")
    x, y = rank_data(hvd.rank(), steps)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert_weights(model.get_weights(), expected, "fit with top-k", tolerance=1e-4)
    assert_same_on_all_ranks(model.get_weights(), "fit-topk")
    # Without compression the result differs: the check can fail.
    plain = reference_sgd(size, steps, lr, momentum)
    assert any(not np.allclose(a, e, atol=1e-4) for a, e in zip(model.get_weights(), plain))

    # The tape, with its own compressor (fresh residuals under other names).
    model = make_model()
    optimizer = keras.optimizers.SGD(lr, momentum=momentum)
    loss_fn = keras.losses.MeanSquaredError()
    tape_compressor = tfdist.Compression.topk(0.3)

    @tf.function
    def tape_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = tfdist.DistributedGradientTape(tape, compression=tape_compressor)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for s in range(steps):
        tape_step(x[s * BATCH:(s + 1) * BATCH], y[s * BATCH:(s + 1) * BATCH])
    assert_weights(model.get_weights(), expected, "tape with top-k", tolerance=1e-4)


def check_fit_with_momentum_correction(steps=3, lr=0.1):
    """model.fit with the momentum in the compressor and plain SGD in the optimizer."""
    size = tfdist.size()
    expected = reference_sgd(size, steps, lr, 0.0, mean=topk_mean(size, 0.3, momentum=0.9))
    model = make_model()
    model.compile(optimizer=hvd.DistributedOptimizer(
        keras.optimizers.SGD(lr), compression=hvd.Compression.topk(0.3, momentum=0.9)),
        loss="mse")
    x, y = rank_data(hvd.rank(), steps)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert_weights(model.get_weights(), expected, "fit with top-k momentum", tolerance=1e-4)
    assert_same_on_all_ranks(model.get_weights(), "fit-topk-momentum")
    plain = reference_sgd(size, steps, lr, 0.0, mean=topk_mean(size, 0.3))
    assert any(not np.allclose(a, e, atol=1e-4) for a, e in zip(model.get_weights(), plain))


def check_fit_with_powersgd(steps=3, lr=0.1, momentum=0.9):
    size = tfdist.size()
    model = make_model()
    compressor = hvd.Compression.powersgd(1)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=momentum),
                                                     compression=compressor), loss="mse")
    # The first kernel (4x5) is compressed, the rest go dense: set its Q.
    names = gradient_names(model.trainable_variables, 4, f"tfdist.{model.optimizer.name}")
    q0 = np.random.RandomState(9).normal(0, 1, (5, 1)).astype("float32")
    runtime.restore_rank_state({f"powersgd.q/{names[0]}": q0})
    reference = PowerSgdReference(size, 1, True, {0: q0})
    expected = _reference_sgd_grouped(size, steps, lr, momentum,
                                      lambda per_rank: reference.average(per_rank, [0]))
    x, y = rank_data(hvd.rank(), steps)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0)
    assert_weights(model.get_weights(), expected, "fit with PowerSGD", tolerance=1e-4)
    assert_same_on_all_ranks(model.get_weights(), "fit-powersgd")
    assert f"powersgd.residual/{names[0]}" in runtime.rank_state()


def check_save_and_load(directory):
    for compressor in (hvd.Compression.topk(0.3, error_feedback=False),
                       hvd.Compression.powersgd(2, start_step=4)):
        model = make_model()
        model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1),
                                                         compression=compressor), loss="mse")
        path = f"{directory}/{compressor.name}-rank{hvd.rank()}.keras"
        model.save(path)
        restored = hvd.load_model(path).optimizer.distributed_settings.compression
        assert type(restored) is type(compressor), restored
        assert restored.get_config() == compressor.get_config(), restored


def _reference_sgd_grouped(size, steps, lr, momentum, combine):
    """Like reference_sgd, with ``combine(per_rank_gradient_lists)`` giving the mean."""
    from keras_common import initial_weights, local_gradients
    weights = [w.astype("float64") for w in initial_weights()]
    velocity = [np.zeros_like(w) for w in weights]
    data = [rank_data(r, steps) for r in range(size)]
    for step in range(steps):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        per_rank = [local_gradients([w.astype("float32") for w in weights],
                                    data[r][0][rows], data[r][1][rows]) for r in range(size)]
        for i, g in enumerate(combine(per_rank)):
            velocity[i] = momentum * velocity[i] - lr * g
            weights[i] = weights[i] + velocity[i]
    return weights


CHECKS = Checks()
CHECKS.setup(lambda: tfdist.init())
CHECKS.check("errors")(check_errors)
CHECKS.check("topk_allreduce")(check_topk_allreduce)
CHECKS.check("topk_momentum_correction")(check_topk_momentum_correction)
CHECKS.check("topk_start_step")(check_topk_start_step)
CHECKS.check("topk_dense_switch")(check_topk_dense_switch)
CHECKS.check("rank_state_round_trip")(check_rank_state_round_trip)
CHECKS.check("powersgd_allreduce")(check_powersgd_allreduce)
CHECKS.check("powersgd_rank_one_converges")(check_powersgd_rank_one_converges)
CHECKS.check("powersgd_start_step")(check_powersgd_start_step)
CHECKS.check("fit_and_tape_with_topk")(check_fit_and_tape_with_topk)
CHECKS.check("fit_with_momentum_correction")(check_fit_with_momentum_correction)
CHECKS.check("fit_with_powersgd")(check_fit_with_powersgd)
CHECKS.check("save_and_load")(lambda: check_save_and_load(sys.argv[1]))
CHECKS.check("error_feedback")(check_error_feedback)  # only with --error-feedback


def main():
    names = CHECKS.names()
    CHECKS.run(only=None if "--error-feedback" in sys.argv else names[:-1])
    print("sparse compression checks passed", flush=True)


if __name__ == "__main__":
    worker_main(main)
