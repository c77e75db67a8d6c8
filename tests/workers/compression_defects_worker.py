"""Edge cases of top-k and PowerSGD (issue 21) on N ranks, against numpy references.

Each check is one edge case: a zero gradient or a warm-start Q with
dependent columns (PowerSGD must keep its rank), unnamed calls (refused) and
grouped named ones (keyed per tensor), state of a tensor with more than 8
dimensions, an all-or-nothing restore, ranks that disagree on a compressor's
settings (an error on every rank, after which collectives still work),
tfdist.stats()'s bytes_uncompressed, and the warnings for float64 and
IndexedSlices. ``argv[1:]`` may name the checks to run (default: all); each is
registered by name in CHECKS and is a test of its own in
tests/mpi/test_compression_defects.py.
"""
import sys
import warnings

import numpy as np
import tensorflow as tf

import tfdist
from tfdist import runtime
from tfdist.gradient_tape import allreduce_gradients
from tfdist.compression.stateful import dense_wire_bytes
from tfdist.compression.topk import topk_count
from mpi_harness import Checks, worker_main


def rank_matrix(rank, step, shape, seed=0):
    return np.random.RandomState(7919 * seed + 1000 * step + rank).randn(*shape).astype(
        np.float32)


def expect_rejected(call, error_type, words, what):
    try:
        call()
    except error_type as error:
        missing = [w for w in words if w not in str(error)]
        assert not missing, f"{what}: {missing} not in {error}"
        return str(error)
    raise AssertionError(f"{what} accepted")


def check_powersgd_zero_gradient():
    """A zero first step must not freeze the tensor: Q is refilled."""
    rank, size = tfdist.rank(), tfdist.size()
    shape = (16, 12)
    compressor = tfdist.Compression.powersgd(2)
    # Rank-1 average u v^T, the same on every rank: rank-r PowerSGD recovers it
    # exactly in one step from any Q not orthogonal to v.
    u = np.linspace(1.0, 2.0, shape[0]).astype(np.float32)
    v = np.linspace(-1.0, 1.0, shape[1]).astype(np.float32) + 0.3
    low_rank = np.outer(u, v).astype(np.float32)
    compressor.allreduce([tf.zeros(shape)], ["zero.a"], op=tfdist.Average)
    out = compressor.allreduce([tf.constant(low_rank)], ["zero.a"], op=tfdist.Average)[0]
    np.testing.assert_allclose(out.numpy(), low_rank, rtol=1e-4, atol=1e-4)

    # After a zero step the tensor behaves exactly as a fresh one of its name
    # (bit for bit: the job forces one algorithm, tests/shared_jobs.py).
    runtime.restore_rank_state({})
    after_zero = [compressor.allreduce([tf.zeros(shape)], ["zero.b"], op=tfdist.Average)[0]]
    for step in range(1, 6):
        g = tf.constant(rank_matrix(rank, step, shape))
        after_zero.append(compressor.allreduce([g], ["zero.b"], op=tfdist.Average)[0])
    assert np.linalg.norm(after_zero[0].numpy()) == 0.0
    for out in after_zero[1:]:
        assert np.linalg.norm(out.numpy()) > 0.1, "PowerSGD output stuck at 0 after a zero step"
    runtime.restore_rank_state({})
    for step in range(1, 6):
        g = tf.constant(rank_matrix(rank, step, shape))
        fresh = compressor.allreduce([g], ["zero.b"], op=tfdist.Average)[0]
        np.testing.assert_array_equal(fresh.numpy(), after_zero[step].numpy())

    # A warm-start Q whose columns are dependent: the rank-2 average must
    # still be recovered exactly (with one zeroed column it would be rank 1).
    a, b = rank_matrix(0, 0, (shape[0], 2), seed=3), rank_matrix(0, 0, (2, shape[1]), seed=4)
    rank_two = (a @ b).astype(np.float32)
    q = rank_matrix(0, 1, (shape[1], 1), seed=5)
    runtime.restore_rank_state({"powersgd.q/dependent": np.hstack([q, 2 * q])})
    out = compressor.allreduce([tf.constant(rank_two)], ["dependent"], op=tfdist.Average)[0]
    np.testing.assert_allclose(out.numpy(), rank_two, rtol=1e-3, atol=1e-3)
    runtime.restore_rank_state({})
    del size


def numpy_topk(x, k):
    order = sorted(range(x.size), key=lambda i: (-abs(float(x.flat[i])), i))[:k]
    sent = np.zeros_like(x)
    sent.flat[order] = x.flat[order]
    return sent


def check_unnamed_and_grouped():
    """Unnamed compressed calls are refused; grouped ones key tensor i as '<name>.<i>'."""
    size = tfdist.size()
    for compressor in (tfdist.Compression.topk(0.1), tfdist.Compression.powersgd(1)):
        expect_rejected(lambda: tfdist.allreduce(tf.ones((12, 10)), compression=compressor),
                        ValueError, ["name="], f"unnamed allreduce with {compressor}")
        expect_rejected(lambda: tfdist.grouped_allreduce(
            [tf.ones((12, 10)), tf.ones((12, 10))], compression=compressor),
            ValueError, ["name="], f"unnamed grouped_allreduce with {compressor}")
        expect_rejected(lambda: compressor.allreduce(
            [tf.ones(4), tf.ones(4)], ["same", "same"], op=tfdist.Sum),
            ValueError, ["'same'"], f"two tensors named alike with {compressor}")
    assert not runtime.rank_state(), runtime.rank_state()

    # Grouped top-k, two 12x10 tensors, four steps, against numpy per tensor.
    ratio = 0.1
    compressor = tfdist.Compression.topk(ratio)
    residuals = [[np.zeros((12, 10), np.float32) for _ in range(2)] for _ in range(size)]
    for step in range(4):
        grads = [[rank_matrix(r, step, (12, 10), seed=t) for t in range(2)] for r in range(size)]
        out = tfdist.grouped_allreduce([tf.constant(g) for g in grads[tfdist.rank()]],
                                       op=tfdist.Sum, name="grp", compression=compressor)
        for t in range(2):
            expected = np.zeros((12, 10), np.float32)
            for r in range(size):
                acc = residuals[r][t] + grads[r][t]
                sent = numpy_topk(acc, topk_count(ratio, acc.size))
                residuals[r][t] = acc - sent
                expected += sent
            np.testing.assert_allclose(out[t].numpy(), expected, rtol=1e-5, atol=1e-5)
    state = runtime.rank_state()
    for t in range(2):
        np.testing.assert_allclose(state[f"topk.residual/grp.{t}"],
                                   residuals[tfdist.rank()][t], rtol=1e-5, atol=1e-5)
    runtime.restore_rank_state({})


def check_state_of_many_dimensions():
    """rank_state() of a residual with 9 and with 12 dimensions."""
    rank = tfdist.rank()
    compressor = tfdist.Compression.topk(0.25)
    for dims in (9, 12):
        shape = (2,) * dims
        g = rank_matrix(rank, dims, shape)
        compressor.allreduce([tf.constant(g)], [f"dims{dims}"], op=tfdist.Sum)
        state = runtime.rank_state()
        residual = state[f"topk.residual/dims{dims}"]
        assert residual.shape == shape, residual.shape
        np.testing.assert_array_equal(residual, g - numpy_topk(g, topk_count(0.25, g.size)))
        runtime.restore_rank_state(state)
        again = runtime.rank_state()[f"topk.residual/dims{dims}"]
        np.testing.assert_array_equal(again, residual)
    runtime.restore_rank_state({})


def check_restore_is_all_or_nothing():
    """A bad entry leaves the state exactly as it was."""
    compressor = tfdist.Compression.topk(0.5)
    compressor.allreduce([tf.constant(rank_matrix(tfdist.rank(), 0, (6, 5)))], ["kept"],
                         op=tfdist.Sum)
    before = runtime.rank_state()
    assert list(before) == ["topk.residual/kept"], list(before)
    good = {"topk.residual/new": np.ones((3,), np.float32)}
    for bad in ({**good, 7: np.ones(2, np.float32)},
                {**good, b"bytes-name": np.ones(2, np.float32)},
                {**good, "complex": np.ones(2, np.complex64)},
                {**good, "": np.ones(2, np.float32)}):
        try:
            runtime.restore_rank_state(bad)
        except (TypeError, ValueError):
            pass
        else:
            raise AssertionError(f"restore of {list(bad)} accepted")
        after = runtime.rank_state()
        assert sorted(after) == sorted(before), (list(bad), sorted(after))
        for key in before:
            np.testing.assert_array_equal(after[key], before[key])
    runtime.restore_rank_state({})


def _mismatches(rank, size):
    """(what, compressor on this rank, the setting's words in the error)."""
    odd = rank == size - 1  # the last rank differs
    return [
        ("top-k ratio", tfdist.Compression.topk(0.2 if odd else 0.1), ["ratio", "0.1", "0.2"]),
        ("top-k momentum", tfdist.Compression.topk(0.1, momentum=0.9 if odd else 0.5),
         ["momentum", "0.5", "0.9"]),
        ("top-k error feedback", tfdist.Compression.topk(0.1, error_feedback=not odd),
         ["error_feedback", "True", "False"]),
        ("top-k start step", tfdist.Compression.topk(0.1, start_step=3 if odd else 0),
         ["start_step", "0", "3"]),
        ("PowerSGD rank", tfdist.Compression.powersgd(2 if odd else 1), ["rank", "1", "2"]),
        ("PowerSGD start step", tfdist.Compression.powersgd(1, start_step=2 if odd else 0),
         ["start_step", "0", "2"]),
        ("compressor kind", tfdist.Compression.powersgd(1) if odd else
         tfdist.Compression.topk(0.1), ["compressor", "topk", "powersgd"]),
        # Dense compressors send no settings of their own; the compressed rank's
        # agreement is named as their allreduce is, so they meet it.
        ("fp16 against top-k", tfdist.Compression.fp16 if odd else tfdist.Compression.topk(0.1),
         ["compressor of", "rank 0 has topk", "has fp16"]),
        ("none against PowerSGD", None if odd else tfdist.Compression.powersgd(1),
         ["compressor of", "rank 0 has powersgd", "has none"]),
    ]


def check_settings_mismatch():
    """Ranks that disagree get the runtime's error naming the setting, then carry on."""
    rank, size = tfdist.rank(), tfdist.size()
    g = tf.constant(rank_matrix(rank, 0, (24, 20)))
    for what, compressor, words in _mismatches(rank, size):
        message = expect_rejected(
            lambda: tfdist.allreduce(g, op=tfdist.Sum, name=f"mismatch.{what}",
                                     compression=compressor),
            tf.errors.FailedPreconditionError, words + [f"rank {size - 1} has"], what)
        assert "disagree" in message, message
        # The next collectives work, compressed or not.
        total = tfdist.allreduce(tf.ones(3), op=tfdist.Sum, name=f"after.{what}")
        np.testing.assert_array_equal(total.numpy(), np.full(3, size, np.float32))
    agreed = tfdist.Compression.topk(1.0, error_feedback=False)
    total = tfdist.allreduce(g, op=tfdist.Sum, name="agreed", compression=agreed)
    expected = sum(rank_matrix(r, 0, (24, 20)) for r in range(size))
    np.testing.assert_allclose(total.numpy(), expected, rtol=1e-5, atol=1e-5)

    # Gradients through allreduce_gradients (DistributedOptimizer's path), grouped,
    # with bf16 on the last rank: every tensor of its group meets the error.
    gradients = [g, tf.ones(7) * rank, g[:4]]
    compressor = tfdist.Compression.bf16 if rank == size - 1 else tfdist.Compression.topk(0.1)
    expect_rejected(lambda: allreduce_gradients(gradients, prefix="mismatch.grads",
                                                op=tfdist.Sum, compression=compressor,
                                                num_groups=1),
                    tf.errors.FailedPreconditionError, ["compressor of", "topk", "bf16"],
                    "bf16 against top-k in allreduce_gradients")
    total = tfdist.allreduce(tf.ones(3), op=tfdist.Sum, name="after.grads")
    np.testing.assert_array_equal(total.numpy(), np.full(3, size, np.float32))

    # The same inside a tf.function.
    mismatched = tfdist.Compression.topk(0.2 if rank == size - 1 else 0.1)

    @tf.function
    def step(x):
        return mismatched.allreduce([x], ["mismatch.function"], op=tfdist.Sum)[0]

    expect_rejected(lambda: step(g), tf.errors.FailedPreconditionError,
                    ["ratio", "0.1", "0.2"], "mismatched ratio in a tf.function")
    total = tfdist.allreduce(tf.ones(3), op=tfdist.Sum, name="after.function")
    np.testing.assert_array_equal(total.numpy(), np.full(3, size, np.float32))
    runtime.restore_rank_state({})


def _delta(call):
    before = tfdist.stats()
    call()
    after = tfdist.stats()
    return (after["bytes_sent"] - before["bytes_sent"],
            after["bytes_uncompressed"] - before["bytes_uncompressed"])


def _job_total(value, name):
    """The sum over ranks: with a non-power-of-two number of ranks the fold makes
    each rank send a different share, and only the job's total is the formula's."""
    return int(tfdist.allreduce(tf.constant([value], tf.int64), op=tfdist.Sum,
                                name=name).numpy()[0])


def check_stats():
    """bytes_uncompressed is what the same call sends without compression."""
    size = tfdist.size()
    shape = (256, 64)
    g = tf.constant(rank_matrix(tfdist.rank(), 0, shape))
    dense_sent, dense_unc = _delta(lambda: tfdist.allreduce(g, op=tfdist.Sum, name="st.dense"))
    assert dense_sent == dense_unc and dense_sent > 0, (dense_sent, dense_unc)
    dense_total = _job_total(dense_sent, "st.dense.total")
    formula = size * dense_wire_bytes(g.numpy().nbytes, size)
    assert abs(dense_total - formula) <= 0.1 * formula, (dense_total, formula)
    for compressor in (tfdist.Compression.topk(0.01), tfdist.Compression.powersgd(2)):
        name = f"st.{compressor.name}"
        sent, unc = _delta(lambda: tfdist.allreduce(g, op=tfdist.Sum, name=name,
                                                    compression=compressor))
        sent = _job_total(sent, f"{name}.sent")
        unc = _job_total(unc, f"{name}.unc")
        # The settings check adds a one-element allreduce to both counts.
        assert abs(unc - dense_total) <= 0.02 * dense_total + 64 * size, (
            compressor, unc, dense_total)
        assert sent < 0.1 * unc, (compressor, sent, unc)
    runtime.restore_rank_state({})


def check_warnings():
    """float64 and IndexedSlices: one warning each per process, results still right."""
    size = tfdist.size()
    for compressor in (tfdist.Compression.topk(1.0), tfdist.Compression.powersgd(1)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = np.arange(60, dtype=np.float64).reshape(12, 5) + tfdist.rank()
            for call in range(2):
                out = compressor.allreduce([tf.constant(x)], [f"f64.{compressor.name}"],
                                           op=tfdist.Sum)[0]
                assert out.dtype == tf.float64
            if compressor.name == "topk":
                expected = sum(np.arange(60, dtype=np.float64).reshape(12, 5) + r
                               for r in range(size))
                np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)
            values = tf.constant(np.full((2, 3), tfdist.rank() + 1.0, np.float32))
            for call in range(2):
                sparse = tf.IndexedSlices(values, tf.constant([0, 2]), tf.constant([4, 3]))
                reduced = allreduce_gradients([sparse], prefix=f"slices.{compressor.name}",
                                              op=tfdist.Sum, compression=compressor)[0]
                assert isinstance(reduced, tf.IndexedSlices)
                dense = tf.convert_to_tensor(reduced).numpy()
                expected = np.zeros((4, 3), np.float32)
                expected[[0, 2]] = sum(r + 1.0 for r in range(size))
                np.testing.assert_allclose(dense, expected)
        texts = [str(w.message) for w in caught]
        assert sum("float64" in t for t in texts) == 1, texts
        assert sum("IndexedSlices" in t for t in texts) == 1, texts
    runtime.restore_rank_state({})


CHECKS = Checks()
CHECKS.setup(lambda: tfdist.init())
CHECKS.check("zero")(check_powersgd_zero_gradient)
CHECKS.check("names")(check_unnamed_and_grouped)
CHECKS.check("dims")(check_state_of_many_dimensions)
CHECKS.check("restore")(check_restore_is_all_or_nothing)
CHECKS.check("mismatch")(check_settings_mismatch)
CHECKS.check("stats")(check_stats)
CHECKS.check("warnings")(check_warnings)


def main():
    CHECKS.run(only=sys.argv[1:] or None)
    print("compression defect checks passed", flush=True)


if __name__ == "__main__":
    worker_main(main)
