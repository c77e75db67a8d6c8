"""op=tfdist.Adasum against a numpy Adasum on every rank.

The reference follows the pairing order of cc/core/collectives/
adasum_allreduce.cc exactly: with P = p2 + r (p2 the largest power of two
<= P), ranks 2i and 2i+1 (i < r) are combined first, then the balanced
binary tree over the p2 results in rank order. Run under mpirun by
tests/mpi/test_adasum.py.
"""
import numpy as np
import tensorflow as tf

import tfdist
import tfdist.keras
from mpi_harness import worker_main


def pair(a, b):
    dot, aa, bb = float(a @ b), float(a @ a), float(b @ b)
    ca = 1.0 if aa == 0 else 1.0 - dot / (2 * aa)
    cb = 1.0 if bb == 0 else 1.0 - dot / (2 * bb)
    return ca * a + cb * b


def adasum(vectors):
    """numpy Adasum of one tensor per rank, in float64, in the library's pairing order."""
    flat = [np.asarray(v, np.float64).ravel() for v in vectors]
    p2 = 1
    while p2 * 2 <= len(flat):
        p2 *= 2
    extra = len(flat) - p2
    level = [pair(flat[2 * i], flat[2 * i + 1]) for i in range(extra)] + flat[2 * extra:]
    while len(level) > 1:
        level = [pair(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0].reshape(np.shape(vectors[0]))


# Tolerances, relative to the result's largest magnitude. float64 is computed
# in double throughout: only reassociation differs. float32 is rounded to
# float32 after each of at most 3 pair levels at P <= 4 (2^-24 each). 16-bit
# floats are combined in float32 and rounded to 16 bits once at the end:
# half an ulp, 2^-11 for float16 and 2^-8 for bfloat16.
TOLERANCE = {tf.float64: 1e-12, tf.float32: 1e-6, tf.float16: 1e-3, tf.bfloat16: 8e-3}


def random_input(rank, shape, seed):
    return np.random.default_rng(seed * 100 + rank).normal(size=shape) + 0.3


def close(actual, expected, dtype, what):
    actual = tf.cast(actual, tf.float64).numpy()
    scale = max(np.abs(expected).max(initial=0.0), 1e-30)
    error = np.abs(actual - expected).max(initial=0.0)
    assert error <= TOLERANCE[dtype] * scale, f"{what}: error {error} scale {scale}"


def check_properties(rank, size, allreduce):
    n = 8
    orthogonal = np.zeros(n)
    orthogonal[rank] = rank + 1.0
    expected = np.zeros(n)
    expected[:size] = np.arange(1, size + 1)
    np.testing.assert_array_equal(allreduce(tf.constant(orthogonal, tf.float32)).numpy(),
                                  expected)
    same = np.array([0.5, -1.0, 2.0, 0.0, 3.0, -0.25, 1.0, 4.0])
    np.testing.assert_array_equal(allreduce(tf.constant(same, tf.float32)).numpy(), same)
    zero = np.zeros(3) if rank == 0 else np.full(3, 2.0)
    expected = np.zeros(3) if size == 1 else adasum([np.zeros(3)] + [np.full(3, 2.0)] * (size - 1))
    np.testing.assert_allclose(allreduce(tf.constant(zero)).numpy(), expected, rtol=1e-12)


def check_random(rank, size, allreduce):
    for seed, (dtype, shape) in enumerate([(tf.float64, (5, 3)), (tf.float32, (1000,)),
                                           (tf.float16, (7,)), (tf.bfloat16, (4, 4)),
                                           (tf.float32, ()), (tf.float32, (0,))]):
        x = tf.cast(random_input(rank, shape, seed), dtype)
        # What every rank really holds, after the cast.
        inputs = [tf.cast(tf.cast(random_input(r, shape, seed), dtype), tf.float64).numpy()
                  for r in range(size)]
        close(allreduce(x), adasum(inputs), dtype, f"{dtype.name} {shape}")


def check_fused(rank, size):
    """Three tensors in one grouped allreduce: each combined on its own."""
    orthogonal = np.zeros(6)
    orthogonal[rank] = 1.0
    same = np.arange(4.0)
    rand = random_input(rank, (3, 3), 7)
    before = tfdist.stats()
    out = tfdist.grouped_allreduce([tf.constant(orthogonal), tf.constant(same),
                                    tf.constant(rand)], op=tfdist.Adasum, name="fused")
    after = tfdist.stats()
    expected_orthogonal = np.zeros(6)
    expected_orthogonal[:size] = 1.0
    np.testing.assert_allclose(out[0].numpy(), expected_orthogonal, rtol=1e-12)
    np.testing.assert_allclose(out[1].numpy(), same, rtol=1e-12)
    close(out[2], adasum([random_input(r, (3, 3), 7) for r in range(size)]), tf.float64,
          "fused random")
    if size > 1:
        # One collective for the three tensors.
        assert after["allreduce_calls"] - before["allreduce_calls"] == 1, (before, after)
        assert after["tensors_reduced"] - before["tensors_reduced"] == 3, (before, after)


def check_gradient_paths(rank, size):
    g = random_input(rank, (4,), 11)
    expected = adasum([random_input(r, (4,), 11) for r in range(size)])
    w = tf.Variable(np.zeros(4))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * g)
    grad = tfdist.DistributedGradientTape(tape, op=tfdist.Adasum).gradient(loss, [w])[0]
    np.testing.assert_allclose(grad.numpy(), expected, rtol=1e-12)

    import keras
    v = keras.Variable(np.zeros(4, np.float32))
    optimizer = tfdist.keras.DistributedOptimizer(keras.optimizers.SGD(1.0), op=tfdist.Adasum)
    optimizer.apply_gradients([(tf.constant(g, tf.float32), v)])
    np.testing.assert_allclose(np.asarray(v), -expected, rtol=1e-5, atol=1e-6)


def check_errors():
    try:
        tfdist.allreduce(tf.constant([1, 2]), op=tfdist.Adasum)
    except tf.errors.InvalidArgumentError as error:
        assert "Adasum" in str(error) and "int32" in str(error), str(error)
    else:
        raise AssertionError("Adasum of int32 did not fail")
    for call in (lambda: tfdist.allreduce(tf.ones(2), op=tfdist.Adasum, algorithm="ring"),
                 lambda: tfdist.reducescatter(tf.ones(2), op=tfdist.Adasum),
                 lambda: tfdist.allreduce(tf.ones(2), op=tfdist.Adasum, compression="fp16")):
        try:
            call()
        except (ValueError, TypeError) as error:
            assert "Adasum" in str(error) or "ADASUM" in str(error), str(error)
        else:
            raise AssertionError("no error")


def main():
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    eager = lambda x: tfdist.allreduce(x, op=tfdist.Adasum)  # noqa: E731
    graph = tf.function(lambda x: tfdist.allreduce(x, op=tfdist.Adasum, name="adasum.graph"))
    for allreduce in (eager, graph):
        check_properties(rank, size, allreduce)
        check_random(rank, size, allreduce)
    check_fused(rank, size)
    check_gradient_paths(rank, size)
    check_errors()
    print("adasum OK", flush=True)


if __name__ == "__main__":
    worker_main(main)
