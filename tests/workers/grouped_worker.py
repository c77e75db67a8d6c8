"""grouped_allgather and grouped_reducescatter against numpy on every rank.

Rank r's tensors depend on r (and its allgather rows on r), so a member
landing in another member's output, or rows of the wrong rank, show up.
Run under mpirun by tests/mpi/test_grouped_collectives.py.
"""
import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import worker_main


def gather_inputs(rank):
    """(numpy value, tf dtype) per member: rank-dependent rows, mixed shapes and dtypes,
    an empty member, and a member of which rank 0 has no rows."""
    rows = rank + 1
    return [
        (np.arange(rows * 3).reshape(rows, 3) + 100 * rank, tf.float32),
        (np.full([rows], rank), tf.int32),
        (np.arange(rank * 4).reshape(rank, 2, 2) * 0.5 + rank, tf.float16),
        (np.zeros([0, 4]), tf.float64),
        (np.arange(rows) % 2 == rank % 2, tf.bool),
    ]


def scatter_inputs(rank, size):
    """Rows not divisible by the size, fewer rows than ranks, an empty member."""
    return [
        (np.arange((2 * size + 1) * 3).reshape(2 * size + 1, 3) * (rank + 1), tf.float32),
        (np.array([rank + 1.0]), tf.float32),
        (np.arange(5 * 2).reshape(5, 2) + rank, tf.float32),
        (np.zeros([0, 2]), tf.float32),
    ]


def split(rows, size, rank):
    counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
    start = sum(counts[:rank])
    return start, start + counts[rank]


def check_allgather(rank, size, run):
    inputs = [[tf.constant(v, dtype=d) for v, d in gather_inputs(r)] for r in range(size)]
    outputs = run(inputs[rank])
    assert len(outputs) == len(inputs[rank])
    for i, output in enumerate(outputs):
        expected = np.concatenate([inputs[r][i].numpy() for r in range(size)])
        assert output.dtype == inputs[rank][i].dtype, (i, output.dtype)
        np.testing.assert_array_equal(output.numpy(), expected, err_msg=f"member {i}")


def check_reducescatter(rank, size, run, op):
    inputs = [[tf.constant(v, dtype=d) for v, d in scatter_inputs(r, size)] for r in range(size)]
    outputs = run(inputs[rank], op)
    for i, output in enumerate(outputs):
        total = np.sum([inputs[r][i].numpy().astype(np.float64) for r in range(size)], axis=0)
        if op == tfdist.Average:
            total = total / size
        start, stop = split(total.shape[0], size, rank)
        np.testing.assert_allclose(output.numpy(), total[start:stop], rtol=1e-6,
                                   err_msg=f"member {i}")


def check_gradients(rank, size):
    # loss = sum(c_r * y_r) with c_r = rank + 1 on every output.
    xs = [tf.constant(np.ones([rank + 1, 2]), tf.float32), tf.constant([1.0 * rank, 2.0])]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        ys = tfdist.grouped_allgather(xs, name="grad.gather")
        loss = sum(tf.reduce_sum(y * (rank + 1.0)) for y in ys)
    grads = tape.gradient(loss, xs)
    # Every rank's output holds this rank's rows: their gradient is sum_r (r + 1).
    weight = sum(r + 1.0 for r in range(size))
    for x, g in zip(xs, grads):
        np.testing.assert_allclose(g.numpy(), np.full(x.shape, weight))

    xs = [tf.constant(np.ones([2 * size + 1, 2]), tf.float32), tf.constant([3.0, 4.0, 5.0])]
    with tf.GradientTape() as tape:
        tape.watch(xs)
        ys = tfdist.grouped_reducescatter(xs, op=tfdist.Average, name="grad.scatter")
        loss = sum(tf.reduce_sum(y * (rank + 1.0)) for y in ys)
    grads = tape.gradient(loss, xs)
    for x, g in zip(xs, grads):
        rows = x.shape[0]
        expected = np.zeros(x.shape)
        for r in range(size):
            start, stop = split(rows, size, r)
            expected[start:stop] = (r + 1.0) / size
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-6)


def check_fused(rank, size):
    before = tfdist.stats()
    tfdist.grouped_allgather([tf.ones([rank + 1, 2]), tf.ones([3], tf.int64), tf.ones([1])],
                             name="fused.gather")
    tfdist.grouped_reducescatter([tf.ones([4, 2]), tf.ones([3])], op=tfdist.Sum,
                                 name="fused.scatter")
    after = tfdist.stats()
    # Every member of a group in one collective.
    assert after["allgather_calls"] - before["allgather_calls"] == 1, (before, after)
    assert after["reducescatter_calls"] - before["reducescatter_calls"] == 1, (before, after)


def expect_error(run, *words):
    try:
        run()
    except tf.errors.FailedPreconditionError as error:
        for word in words:
            assert word in str(error), str(error)
        return
    raise AssertionError(f"no error naming {words}")


def check_mismatches(rank, size):
    count = 2 if rank == 0 else 3
    expect_error(lambda: tfdist.grouped_allgather([tf.ones([1])] * count, name="bad.length"),
                 "number of tensors in the group", "rank 0 has 2")
    expect_error(lambda: tfdist.grouped_reducescatter([tf.ones([2])] * count, name="bad.rs"),
                 "number of tensors in the group")
    dtype = tf.float32 if rank == 0 else tf.float64
    expect_error(lambda: tfdist.grouped_allgather([tf.ones([1]), tf.ones([2], dtype)],
                                                  name="bad.dtype"), "dtype", "float32")
    # The next collectives work, named or not.
    total = tfdist.allreduce(tf.constant([1.0]), op=tfdist.Sum)
    assert total.numpy()[0] == size
    out = tfdist.grouped_allgather([tf.constant([rank])])
    np.testing.assert_array_equal(out[0].numpy(), np.arange(size))


def main():
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    assert tfdist.grouped_allgather([]) == [] and tfdist.grouped_reducescatter([]) == []
    check_allgather(rank, size, lambda xs: tfdist.grouped_allgather(xs))
    check_allgather(rank, size, tf.function(lambda xs: tfdist.grouped_allgather(xs, name="g")))
    for op in (tfdist.Sum, tfdist.Average):
        check_reducescatter(rank, size, lambda xs, o: tfdist.grouped_reducescatter(xs, op=o), op)
        fn = tf.function(lambda xs: tfdist.grouped_reducescatter(xs, op=op, name="rs"))
        check_reducescatter(rank, size, lambda xs, o: fn(xs), op)
    check_gradients(rank, size)
    check_fused(rank, size)
    if size > 1:
        check_mismatches(rank, size)
    print("grouped OK", flush=True)


if __name__ == "__main__":
    worker_main(main)
