"""Checks every collective of the engine against numpy on every rank.

Rank r contributes (r + 1) * base, with base depending on the element index,
so a dropped or doubled chunk shows up as a wrong sum. Run under mpirun by
tests/mpi/test_collectives.py, also with TFDIST_VIRTUAL_HOSTS (and emulated
links between the virtual hosts). Each check is registered by name in CHECKS
(tests/mpi_harness.py's Checks) and is a test of its own there.
"""
import itertools
import os

import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import Checks, host_shared_memory_expected, shared_memory_expected, worker_main

# "shm" where the ranks may share memory; elsewhere check_shm_unavailable checks its error.
SHARED_MEMORY = shared_memory_expected()
# "hierarchical_shm" where each host's ranks (two or more) may share memory, or on one
# host the flat "shm"; elsewhere check_shm_unavailable checks its error too.
HOST_SHARED_MEMORY = host_shared_memory_expected()
ALGORITHMS = ["tree", "butterfly", "ring", "rabenseifner", "mpi", "hierarchical",
              *(["shm"] if SHARED_MEMORY else []),
              *(["hierarchical_shm"] if HOST_SHARED_MEMORY else []), None]
DTYPES = [tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32,
          tf.float64]
OPS = [tfdist.Sum, tfdist.Average, tfdist.Min, tfdist.Max, tfdist.Product]
SHAPES = [(), (0,), (1,), (7,), (2, 3), (2, 3, 4)]


def contribution(rank, shape, op):
    n = int(np.prod(shape))
    # Products grow as P!: keep their factors small so no type overflows.
    period = 2 if op == tfdist.Product else 5
    base = (np.arange(n) % period + 1).reshape(shape)
    return (rank + 1) * base


def reference(size, shape, dtype, op):
    """The expected result, computed in float64 (exact for these values) and cast."""
    stack = np.stack([contribution(r, shape, op).astype(np.float64) for r in range(size)])
    if op == tfdist.Sum:
        result = stack.sum(0)
    elif op == tfdist.Average:
        result = stack.sum(0) / size
    elif op == tfdist.Min:
        result = stack.min(0)
    elif op == tfdist.Max:
        result = stack.max(0)
    else:
        result = stack.prod(0)
    if dtype.is_integer:
        # Integer averages round to nearest (ties to even); products wrap
        # around in the tensor's own type, as in C.
        result = np.round(result).astype(np.int64).astype(dtype.as_numpy_dtype)
    return result


def as_numpy(tensor):
    tensor = tf.cast(tensor, tf.float64) if tensor.dtype in (tf.bfloat16, tf.float16) else tensor
    return tensor.numpy().astype(np.float64)


def check_allreduce_matrix(rank, size):
    checked = 0
    for algorithm, dtype, op, shape in itertools.product(ALGORITHMS, DTYPES, OPS, SHAPES):
        x = tf.constant(contribution(rank, shape, op), dtype=dtype)
        y = tfdist.allreduce(x, op=op, algorithm=algorithm)
        assert y.dtype == dtype and tuple(y.shape) == shape, (y.dtype, y.shape)
        expected = reference(size, shape, dtype, op)
        got = as_numpy(y)
        tolerance = 1e-2 * np.abs(expected) if dtype in (tf.float16, tf.bfloat16) else 1e-12
        if not np.all(np.abs(got - expected) <= tolerance):
            raise AssertionError(f"allreduce {algorithm} {dtype.name} {op.name} {shape}: "
                                 f"got {got}, expected {expected}")
        checked += 1
    print(f"rank {rank}: {checked} allreduce combinations OK", flush=True)


def check_sum_identity(rank, size):
    # Rank r contributes r + 1: the sum is P(P+1)/2 in every element, across
    # segment boundaries of the ring (1 MiB) and uneven chunks. Every
    # algorithm reads its input where it lies (no copy into the output first)
    # and must leave it as it was.
    for algorithm in ALGORITHMS:
        for n in (size - 1, size + 1, 1000, 300_007):
            x = tf.fill([n], float(rank + 1))
            y = tfdist.allreduce(x, op=tfdist.Sum, algorithm=algorithm)
            assert np.all(y.numpy() == size * (size + 1) / 2), (algorithm, n)
            assert np.all(x.numpy() == rank + 1), (algorithm, n, "wrote its input")


def check_grouped_large_members(rank, size):
    """A group of small and large tensors, every algorithm forced: the ring, "shm" and
    "hierarchical_shm" run it as one collective over the tensors where they lie (the
    executor's WhereTheyLie),
    the others pack the small ones and run the large ones apart; each member's result
    matches numpy's, and the inputs are left as they were."""
    rng = np.random.default_rng(7)
    shapes = [(3,), (700_001,), (5, 7), (300_003,), (1,)]  # two over the fusion limit
    per_rank = [[rng.integers(-20, 20, size=s).astype(np.float32) for s in shapes]
                for _ in range(size)]
    for algorithm in [a for a in ALGORITHMS if a is not None]:
        for op in (tfdist.Sum, tfdist.Average):
            xs = [tf.constant(v) for v in per_rank[rank]]
            ys = tfdist.grouped_allreduce(xs, op=op, algorithm=algorithm,
                                          name=f"grouped.large.{algorithm}.{op.name}")
            for i, y in enumerate(ys):
                total = sum(per_rank[r][i].astype(np.float64) for r in range(size))
                expected = total / size if op == tfdist.Average else total
                np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6,
                                           err_msg=f"{algorithm} {op.name} member {i}")
                np.testing.assert_array_equal(xs[i].numpy(), per_rank[rank][i])


def check_hierarchical_pipelined(rank, size):
    # Large enough for several pipeline segments on virtual hosts (segments
    # of at least 2 MiB), with uneven segments and shards; the input must be
    # read where it lies and left as it was.
    # "hierarchical_shm" runs the phases within a host on shared memory: each rank
    # copies (k-1)/k of the buffer for its k-1 peers (tfdist.stats()'s
    # bytes_through_shared_memory; on one host, all P ranks share the flat segment);
    # "hierarchical" copies nothing there.
    n = 3_000_007
    base = (np.arange(n) % 7 + 1).astype(np.float32)
    hosts = int(os.environ.get("TFDIST_VIRTUAL_HOSTS", "1"))
    per_host = size // hosts
    cases = [(algorithm, dtype, op)
             for algorithm in ("hierarchical", *(["hierarchical_shm"] if HOST_SHARED_MEMORY
                                                 else []))
             for dtype, op in ((tf.float32, tfdist.Sum), (tf.float32, tfdist.Average),
                               (tf.int32, tfdist.Max))]
    for algorithm, dtype, op in cases:
        x = tf.constant((rank + 1) * base, dtype=dtype)
        copied_before = tfdist.stats()["bytes_through_shared_memory"]
        y = tfdist.allreduce(x, op=op, algorithm=algorithm,
                             name=f"{algorithm}.pipelined.{dtype.name}.{op.name}")
        copied = tfdist.stats()["bytes_through_shared_memory"] - copied_before
        expected_copied = ((per_host - 1) * 4 * n // per_host
                           if algorithm == "hierarchical_shm" else 0)
        assert copied == expected_copied, (algorithm, copied, expected_copied, hosts)
        factors = {tfdist.Sum: size * (size + 1) / 2, tfdist.Average: (size + 1) / 2,
                   tfdist.Max: size}
        np.testing.assert_allclose(y.numpy(), factors[op] * base, rtol=1e-6,
                                   err_msg=f"{algorithm} {dtype.name} {op.name}")
        np.testing.assert_array_equal(x.numpy(), ((rank + 1) * base).astype(
            dtype.as_numpy_dtype), err_msg=f"{algorithm} wrote its input")


def check_scaling(rank, size):
    x = tf.constant(contribution(rank, (10,), tfdist.Sum), tf.float64)
    y = tfdist.allreduce(x, op=tfdist.Sum, prescale_factor=0.5, postscale_factor=3.0)
    np.testing.assert_allclose(y.numpy(), 1.5 * reference(size, (10,), tf.float64, tfdist.Sum))
    # Average with a postscale of 1/3 keeps double precision in float64.
    y = tfdist.allreduce(x, op=tfdist.Average, postscale_factor=1 / 3)
    np.testing.assert_allclose(y.numpy(), reference(size, (10,), tf.float64, tfdist.Sum)
                               / size / 3, rtol=1e-15)
    xi = tf.constant(contribution(rank, (10,), tfdist.Sum), tf.int32)
    yi = tfdist.allreduce(xi, op=tfdist.Sum, prescale_factor=2.0, postscale_factor=0.25)
    np.testing.assert_array_equal(
        yi.numpy(), np.round(reference(size, (10,), tf.int32, tfdist.Sum) * 0.5))


def check_allgather(rank, size):
    for dtype in DTYPES + [tf.bool]:
        rows = rank + 1  # unequal first dimensions, rank 0 has one row
        x = tf.cast(tf.fill([rows, 2, 3], rank + 1), dtype)
        y = tfdist.allgather(x)
        expected = np.concatenate([np.full([r + 1, 2, 3], r + 1) for r in range(size)])
        if dtype == tf.bool:
            expected = expected.astype(bool)
        assert y.shape == expected.shape, (y.shape, expected.shape)
        np.testing.assert_array_equal(as_numpy(y) if dtype != tf.bool else y.numpy(), expected)
    # A rank may contribute zero rows.
    y = tfdist.allgather(tf.ones([rank % 2, 4]))
    assert y.shape[0] == sum(r % 2 for r in range(size))


def check_broadcast(rank, size):
    for root in range(size):
        for dtype in DTYPES + [tf.bool]:
            x = tf.cast(tf.fill([3, 2], rank + 1), dtype)
            y = tfdist.broadcast(x, root_rank=root)
            expected = np.full([3, 2], root + 1)
            if dtype == tf.bool:
                np.testing.assert_array_equal(y.numpy(), expected.astype(bool))
            else:
                np.testing.assert_array_equal(as_numpy(y), expected)
        scalar = tfdist.broadcast(tf.constant(rank * 10), root_rank=root)
        assert int(scalar) == root * 10
    try:
        tfdist.broadcast(tf.ones(2), root_rank=size)
    except ValueError as error:  # checked before any op runs (tfdist/_arguments.py)
        assert "root_rank" in str(error)
    else:
        raise AssertionError("broadcast to a root outside the job did not fail")


def check_gradients(rank, size):
    weight = tf.constant(float(rank + 2))
    x = tf.Variable(tf.ones([4]))
    with tf.GradientTape() as tape:
        y = tfdist.allreduce(x * weight, op=tfdist.Sum)
        loss = tf.reduce_sum(y * float(rank + 1))
    grad = tape.gradient(loss, x).numpy()
    # d loss_total / dx_r = weight_r * sum_j (j + 1)
    np.testing.assert_allclose(grad, (rank + 2) * size * (size + 1) / 2 * np.ones(4))

    with tf.GradientTape() as tape:
        y = tfdist.allreduce(x, op=tfdist.Average)
        loss = tf.reduce_sum(y * float(rank + 1))
    np.testing.assert_allclose(tape.gradient(loss, x).numpy(),
                               (size + 1) / 2 * np.ones(4), rtol=1e-6)

    rows = tf.Variable(tf.ones([rank + 1, 2]))
    with tf.GradientTape() as tape:
        gathered = tfdist.allgather(rows)
        weights = tf.reshape(tf.range(tf.size(gathered), dtype=tf.float32),
                             tf.shape(gathered)) * float(rank + 1)
        loss = tf.reduce_sum(gathered * weights)
    start = sum(r + 1 for r in range(rank))
    index = np.arange(sum(r + 1 for r in range(size)) * 2, dtype=np.float64).reshape(-1, 2)
    expected = index[start:start + rank + 1] * size * (size + 1) / 2
    np.testing.assert_allclose(tape.gradient(loss, rows).numpy(), expected)

    root = size - 1
    v = tf.Variable(tf.ones([3]))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tfdist.broadcast(v, root_rank=root) * float(rank + 1))
    expected = np.full(3, size * (size + 1) / 2) if rank == root else np.zeros(3)
    np.testing.assert_allclose(tape.gradient(loss, v).numpy(), expected)


def check_tf_function(rank, size):
    @tf.function
    def step(x):
        total = tfdist.allreduce(x, op=tfdist.Sum)
        biggest = tfdist.allreduce(x, op=tfdist.Max, algorithm="ring")
        gathered = tfdist.allgather(tf.reshape(x, [1, -1]))
        root = tfdist.broadcast(x, root_rank=0)
        return total, biggest, gathered, root, tfdist.rank_op(), tfdist.size_op()

    for _ in range(3):  # the same graph again: the response cache path
        x = tf.fill([5], float(rank + 1))
        total, biggest, gathered, root, r, s = step(x)
        assert np.all(total.numpy() == size * (size + 1) / 2)
        assert np.all(biggest.numpy() == size)
        np.testing.assert_array_equal(gathered.numpy()[:, 0], np.arange(1, size + 1))
        assert np.all(root.numpy() == 1)
        assert int(r) == rank and int(s) == size


def check_topology(rank, size):
    assert tfdist.is_initialized()
    assert (tfdist.rank(), tfdist.size()) == (rank, size)
    hosts = int(os.environ.get("TFDIST_VIRTUAL_HOSTS", "1"))  # else one real host
    per_host = size // hosts
    assert (tfdist.local_size(), tfdist.local_rank()) == (per_host, rank % per_host)
    assert (tfdist.cross_size(), tfdist.cross_rank()) == (hosts, rank // per_host)
    assert int(tfdist.local_rank_op()) == rank % per_host
    assert int(tfdist.local_size_op()) == per_host
    tfdist.init()  # a second init is harmless
    assert tfdist.size() == size


def _address(tensor):
    return tensor._numpy().__array_interface__["data"][0]


def assert_result_buffers_reused(rank, size, prefix, count):
    """The eager fast path's result buffers, on whichever route it takes now: a buffer is
    taken again once no tensor uses it, and never while one does (not while a reshape of
    a result lives on, nor the result itself); ``x = allreduce(x)``, whose previous result
    lives while the next call runs, takes turns between two buffers of a size. Makes six
    calls of ``count`` float32 and four of 3/4 of that (sizes no earlier call used)."""
    at_limit = tf.fill([count], float(rank + 1))
    ranks_sum = size * (size + 1) / 2
    first = tfdist.allreduce(at_limit, op=tfdist.Sum, name=f"{prefix}.reuse")
    first_address = _address(first)
    kept = tf.reshape(first, [2, -1])
    del first
    held = tfdist.allreduce(2 * at_limit, op=tfdist.Sum, name=f"{prefix}.reuse")
    assert _address(kept) == first_address and _address(held) != first_address
    held_address = _address(held)
    del held
    again = tfdist.allreduce(3 * at_limit, op=tfdist.Sum, name=f"{prefix}.reuse")
    assert _address(again) == held_address, "a free result buffer was not taken again"
    other = tfdist.allreduce(4 * at_limit, op=tfdist.Sum, name=f"{prefix}.reuse")
    assert _address(other) not in (_address(again), _address(kept))
    for tensor, k in ((kept, 1), (again, 3), (other, 4)):
        np.testing.assert_array_equal(tensor.numpy().ravel(), np.full(count, k * ranks_sum))
    chained = tf.fill([3 * count // 4], float(rank + 1))
    addresses = []
    for _ in range(4):
        chained = tfdist.allreduce(chained, op=tfdist.Average, name=f"{prefix}.chain")
        addresses.append(_address(chained))
        np.testing.assert_allclose(chained.numpy(), (size + 1) / 2, rtol=1e-6)
    assert addresses[0] != addresses[1] and addresses[2:] == addresses[:2], addresses


def check_eager_fast_path(rank, size):
    """Small eager allreduces skip the op; everything else takes it; results agree."""
    from tfdist import _eager as eager
    entry_point = eager._entry_point()
    tensor_entry_point = eager._tensor_entry_point()
    # This TensorFlow has what the library's own tensor route needs: without it
    # every small call would quietly take the slower NumPy route.
    assert tensor_entry_point is not None, eager._library.eager_module().tensor_support()
    calls = []

    def counting(*args):
        calls.append(args[0])
        return entry_point(*args)

    def counting_tensors(*args):
        made = tensor_entry_point(*args)
        if made is not None:  # None: not taken here, the NumPy route goes on
            calls.append(args[0])
        return made

    eager._entry_point = lambda: counting
    eager._tensor_entry_point = lambda: counting_tensors
    try:
        x = tf.constant(contribution(rank, (3,), tfdist.Sum), tf.float32)
        first = tfdist.allreduce(x, op=tfdist.Sum, name="fast.first")
        second = tfdist.allreduce(2 * x, op=tfdist.Sum, name="fast.second")
        third = tfdist.allreduce(x, op=tfdist.Average)  # unnamed: the shared sequence
        assert len(calls) == 3, calls
        expected = reference(size, (3,), tf.float32, tfdist.Sum)
        # Each result owns its memory: later calls do not overwrite it.
        np.testing.assert_array_equal(first.numpy(), expected)
        np.testing.assert_array_equal(second.numpy(), 2 * expected)
        np.testing.assert_allclose(third.numpy(), expected / size, rtol=1e-6)
        assert first.device.endswith("CPU:0") and first.dtype == tf.float32
        # The largest tensor the fast path takes, averaged: every element right.
        count = eager.FAST_PATH_MAX_BYTES // 4
        at_limit = tf.fill([count], float(rank + 1))
        mean = tfdist.allreduce(at_limit, op=tfdist.Average, name="fast.at_limit")
        assert len(calls) == 4 and calls[-1] == b"fast.at_limit", calls
        np.testing.assert_allclose(mean.numpy(), np.full(count, (size + 1) / 2), rtol=1e-6)
        # The NumPy route (where TensorFlow lacks what the library's own route needs;
        # that one's results are checked in check_eager_tensor_route) makes its large
        # results aligned and keeps their buffers.
        eager._tensor_entry_point = lambda: None
        try:
            # A large result is made aligned and the tensor uses that memory as it is
            # (no copy); a 2-D float64 one of the smallest size made so, and a second
            # call must not overwrite it.
            made = []
            new_result = eager._new_result
            eager._new_result = lambda source: made.append(new_result(source)) or made[-1]
            wide_shape = (eager._ALIGNED_FROM_BYTES // 8 // 128, 128)
            try:
                wide = (np.arange(np.prod(wide_shape), dtype=np.float64).reshape(wide_shape)
                        * (rank + 1))
                assert wide.nbytes == eager._ALIGNED_FROM_BYTES
                sums = [tfdist.allreduce(tf.constant(wide * k), op=tfdist.Sum, name=f"fast.wide{k}")
                        for k in (1, 2)]
            finally:
                eager._new_result = new_result
            assert len(calls) == 6 and len(made) == 2, (calls, len(made))
            for k, total, array in zip((1, 2), sums, made):
                assert array.__array_interface__["data"][0] % eager._TENSOR_ALIGNMENT == 0
                assert total._numpy().__array_interface__["data"][0] == \
                    array.__array_interface__["data"][0], "the result was copied"
                assert total.shape == wide_shape and total.dtype == tf.float64
                np.testing.assert_array_equal(
                    total.numpy(), k * np.arange(np.prod(wide_shape), dtype=np.float64).reshape(
                        wide_shape) * size * (size + 1) / 2)
            # The same buffers taken again, and a chain of four calls allocating two
            # (addresses alone could not tell: malloc may hand a freed buffer's memory out
            # again).
            allocations = []
            allocate = eager._ResultBuffers._allocate
            eager._ResultBuffers._allocate = staticmethod(
                lambda nbytes: allocations.append(nbytes) or allocate(nbytes))
            try:
                assert_result_buffers_reused(rank, size, "fast", count)
            finally:
                eager._ResultBuffers._allocate = staticmethod(allocate)
            # Three of the six calls of `count` (the one after a free buffer did not), two
            # of the chain's four.
            assert allocations == [4 * count] * 3 + [3 * count] * 2, (
                "calls allocated again", allocations)
            assert len(calls) == 14, calls
        finally:
            eager._tensor_entry_point = lambda: counting_tensors

        # A forced algorithm takes the fast path too, and runs: every algorithm the
        # library has ("shm" where the ranks may share memory, "hierarchical_shm" where
        # each host's ranks may), at two sizes (a 4-byte
        # tensor and one that the ring and Rabenseifner cut into pieces that do not
        # divide evenly), each checked.
        before = tfdist.stats()["algorithm_calls"]
        algorithms = [a for a in eager._library.allreduce_algorithms()
                      if a != "auto" and (a != "shm" or SHARED_MEMORY)
                      and (a != "hierarchical_shm" or HOST_SHARED_MEMORY)]
        for algorithm in algorithms:
            for shape in ((1,), (1031,)):
                part = tf.constant(contribution(rank, shape, tfdist.Sum), tf.float32)
                forced = tfdist.allreduce(part, op=tfdist.Sum, algorithm=algorithm,
                                          name=f"fast.forced.{algorithm}.{shape[0]}")
                assert calls[-1] == f"fast.forced.{algorithm}.{shape[0]}".encode(), calls
                np.testing.assert_allclose(
                    forced.numpy(), reference(size, shape, tf.float32, tfdist.Sum), rtol=1e-6)
        after = tfdist.stats()["algorithm_calls"]
        for algorithm in algorithms:
            assert after[algorithm] >= before[algorithm] + 2, (algorithm, before, after)
        taken = 14 + 2 * len(algorithms)
        assert len(calls) == taken, calls
        try:
            tfdist.allreduce(x, op=tfdist.Sum, algorithm="fastest", name="fast.unknown")
        except ValueError as error:
            assert "fastest" in str(error), error
        else:
            raise AssertionError("an unknown algorithm was accepted")
        assert len(calls) == taken, calls

        # The op is used where it matters: a tape that may record, a traced
        # function, a tensor over the size limit.
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tfdist.allreduce(x, op=tfdist.Sum, name="fast.taped")
        # The gradient is an allreduce named after the forward one, run eagerly.
        np.testing.assert_array_equal(tape.gradient(y, x).numpy(), np.full(3, size, np.float32))
        assert calls[-1] == b"fast.taped/grad", calls
        tf.function(lambda: tfdist.allreduce(x, op=tfdist.Sum, name="fast.traced"))()
        count = eager.FAST_PATH_MAX_BYTES // 4 + 1
        big = tf.fill([count], float(rank + 1))
        total = tfdist.allreduce(big, op=tfdist.Sum, name="fast.big")
        np.testing.assert_array_equal(total.numpy(), np.full(count, size * (size + 1) / 2))
        total = tfdist.allreduce(big, op=tfdist.Sum, name="fast.big.ring", algorithm="ring")
        np.testing.assert_array_equal(total.numpy(), np.full(count, size * (size + 1) / 2))
        taken += 1  # the gradient of fast.taped; the traced and the big calls took the op
        assert len(calls) == taken, calls

        # The library's entry checks what it is given before it runs anything,
        # on every rank alike, so no rank is left waiting.
        real = eager._library.eager_module().allreduce
        source = np.ones(3, np.float32)
        frozen = np.zeros(3, np.float32)
        frozen.flags.writeable = False
        for arguments, error in [
                ((b"fast.count", 6, (3,), source, np.empty(3, np.float32)), TypeError),
                (("fast.text", 6, (3,), source, np.empty(3, np.float32), 1, 1.0, 1.0, 0, 0),
                 TypeError),
                ((b"fast.shape", 6, [3], source, np.empty(3, np.float32), 1, 1.0, 1.0, 0, 0),
                 TypeError),
                ((b"fast.frozen", 6, (3,), source, frozen, 1, 1.0, 1.0, 0, 0),
                 (BufferError, ValueError)),
                ((b"fast.object", 6, (3,), object(), np.empty(3, np.float32), 1, 1.0, 1.0, 0, 0),
                 TypeError),
                ((b"fast.short", 6, (3,), source, np.empty(2, np.float32), 1, 1.0, 1.0, 0, 0),
                 ValueError),
                ((b"fast.long", 6, (4,), source, np.empty(4, np.float32), 1, 1.0, 1.0, 0, 0),
                 ValueError),
                ((b"fast.negative", 6, (-3,), source, np.empty(3, np.float32), 1, 1.0, 1.0, 0, 0),
                 ValueError)]:
            try:
                real(*arguments)
            except error:
                pass
            else:
                raise AssertionError(f"{arguments[0]!r} was accepted")
        assert not frozen.any() and len(calls) == taken, calls

        # Errors come back as the op's errors.
        try:
            tfdist.allreduce(tf.ones([rank + 1]), name="fast.mismatch")
        except tf.errors.FailedPreconditionError as error:
            assert "fast.mismatch" in str(error), error
        else:
            assert size == 1, "a shape mismatch did not fail"
        assert len(calls) == taken + 1, calls
    finally:
        eager._entry_point = lambda: entry_point
        eager._tensor_entry_point = lambda: tensor_entry_point
    print(f"rank {rank}: eager fast path OK", flush=True)


def check_eager_tensor_route(rank, size):
    """The library's tensor route (cc/tf/eager_tensors.h) against the NumPy route it
    replaced, bit for bit, and against numpy; its argument checks; its results as
    TensorFlow sees them; no reference or memory kept per call."""
    import resource
    import sys

    from tfdist import _eager as eager
    in_c = eager._tensor_entry_point()
    assert in_c is not None, eager._library.eager_module().tensor_support()
    taken = []

    def counting(*args):
        made = in_c(*args)
        taken.append(made is not None)
        return made

    def through(route, x, **kwargs):
        eager._tensor_entry_point = (lambda: counting) if route == "tensor" else (lambda: None)
        try:
            return tfdist.allreduce(x, **kwargs)
        finally:
            eager._tensor_entry_point = lambda: in_c

    checked = 0
    for dtype, op, shape in itertools.product(DTYPES, OPS, [(), (1,), (7,), (2, 3, 4)]):
        x = tf.constant(contribution(rank, shape, op), dtype=dtype)
        scales = ({} if dtype.is_integer or op == tfdist.Product
                  else {"prescale_factor": 0.5, "postscale_factor": 4.0})
        results = {route: through(route, x, op=op, name=f"route.{route}.{dtype.name}."
                                  f"{op.name}.{len(shape)}", **scales)
                   for route in ("tensor", "numpy")}
        assert taken.pop() is True, (dtype, op, shape)
        expected = reference(size, shape, dtype, op) * (2.0 if scales else 1)
        for route, y in results.items():
            assert y.dtype == dtype and tuple(y.shape) == shape, (route, y.dtype, y.shape)
            assert y.device.endswith("CPU:0"), (route, y.device)
            got = as_numpy(y)
            tolerance = 1e-2 * np.abs(expected) if dtype in (tf.float16, tf.bfloat16) else 1e-12
            assert np.all(np.abs(got - expected) <= tolerance), (route, dtype, op, shape, got,
                                                                 expected)
        bits = [y.numpy().tobytes() for y in results.values()]
        assert bits[0] == bits[1], (dtype, op, shape, "the routes disagree")
        checked += 1

    # Where the tensor route stops: no bytes, a type it does not reduce, the size limit.
    for x in (tf.zeros([0]), tf.constant([True, False])):
        assert in_c(b"route.skip", x, int(tfdist.Sum), 1.0, 1.0, 0, 0, 1 << 20) is None
    limit = eager.FAST_PATH_MAX_BYTES
    below = tf.fill([limit], np.uint8(rank + 1))
    over = tf.fill([limit + 1], np.uint8(rank + 1))
    for x in (below, over):
        y = through("tensor", x, op=tfdist.Max, name=f"route.limit.{x.shape[0]}")
        np.testing.assert_array_equal(y.numpy(), np.full(x.shape[0], size, np.uint8))
    assert taken == [True, False], taken  # the larger one took the op
    taken.clear()
    assert in_c(b"route.none", below, int(tfdist.Sum), 1.0, 1.0, 0, 0, -1) is None

    # The result buffers (cc/tf/result_buffers.h) are taken again as they should be.
    count = limit // 4
    assert_result_buffers_reused(rank, size, "route", count)
    # At most two free buffers of a size are kept.
    kept_buffers = eager._library.eager_module().kept_result_buffers
    fives = [tfdist.allreduce(tf.ones([1000]), op=tfdist.Sum, name="route.five")
             for _ in range(5)]
    before = kept_buffers()
    del fives
    assert kept_buffers() == before + 2, (before, kept_buffers())

    # Arguments are checked before anything runs, alike on every rank.
    x = tf.constant(contribution(rank, (3,), tfdist.Sum), tf.float32)
    for arguments, error in [((b"route.count", x), TypeError),
                             (("route.text", x, 0, 1.0, 1.0, 0, 0, 64), TypeError),
                             ((b"route.array", x.numpy(), 0, 1.0, 1.0, 0, 0, 64), TypeError),
                             ((b"route.object", object(), 0, 1.0, 1.0, 0, 0, 64), TypeError),
                             ((b"route.op", x, "sum", 1.0, 1.0, 0, 0, 64), TypeError),
                             ((b"route.scale", x, 0, "1", 1.0, 0, 0, 64), TypeError)]:
        try:
            in_c(*arguments)
        except error:
            pass
        else:
            raise AssertionError(f"{arguments[0]!r} was accepted")
    # A runtime error comes back as (code, message), and as the op's error above it.
    failed = in_c(b"route.bad_op", x, 99, 1.0, 1.0, 0, 0, 64)
    assert type(failed) is tuple and "99" in failed[1], failed

    # The result is an ordinary tensor: its own aligned memory (not the input's, not
    # an earlier result's), usable by TensorFlow's ops, functions and tapes, alive
    # after the input is gone, and held by nothing else.
    results = [tfdist.allreduce(x * k, op=tfdist.Sum, name=f"route.own.{k}") for k in (1, 2)]
    del x
    addresses = [y._numpy().__array_interface__["data"][0] for y in results]
    assert len(set(addresses)) == 2 and all(a % eager._TENSOR_ALIGNMENT == 0 for a in addresses)
    expected = reference(size, (3,), tf.float32, tfdist.Sum)
    np.testing.assert_array_equal(results[0].numpy(), expected)
    np.testing.assert_array_equal((results[1] + results[0]).numpy(), 3 * expected)
    np.testing.assert_array_equal(tf.function(lambda t: t * 2)(results[0]).numpy(), 2 * expected)
    with tf.GradientTape() as tape:
        tape.watch(results[0])
        loss = tf.reduce_sum(results[0] * results[0])
    np.testing.assert_array_equal(tape.gradient(loss, results[0]).numpy(), 2 * expected)
    assert sys.getrefcount(results[1]) == 2, sys.getrefcount(results[1])

    # Neither the input nor the results are kept: a thousand 64 KiB calls leave the
    # input's references as they were and the process no larger than a few results.
    x = tf.fill([16384], float(rank + 1))
    references = sys.getrefcount(x)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(1000):
        y = tfdist.allreduce(x, op=tfdist.Sum, name="route.leak")
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert sys.getrefcount(x) == references, (references, sys.getrefcount(x))
    np.testing.assert_array_equal(y.numpy(), np.full(16384, size * (size + 1) / 2, np.float32))
    assert grown_kib < 16 * 1024, f"the process grew by {grown_kib} KiB over 1000 calls"
    print(f"rank {rank}: {checked} tensor-route combinations OK", flush=True)


def check_before_init(rank, size):
    try:
        tfdist.allreduce(tf.ones(1))
    except tf.errors.FailedPreconditionError as error:
        assert "tfdist.init()" in str(error), error
    else:
        raise AssertionError("a collective before init() did not fail")


def _algorithm_of_next_call(call):
    """Runs ``call`` and returns the one algorithm tfdist.stats() counted for it."""
    before = tfdist.stats()["algorithm_calls"]
    result = call()
    after = tfdist.stats()["algorithm_calls"]
    ran = [name for name, value in after.items() if value != before.get(name, 0)]
    assert len(ran) == 1, (before, after)
    return ran[0], result


def _over_emulated_links():
    """Whether this job emulates links between hosts, where auto never runs MPI_Allreduce
    (it would bypass the emulated link)."""
    return (tfdist.RuntimeSettings.from_environment().emulated_bandwidth or 0) > 0


# The per-host segment's slot (host_shared_memory.h), and how many of them a call must
# fill for auto to time "hierarchical_shm" (the executor's
# kHierarchicalSharedMemoryTimedFromSlots).
HOST_SEGMENT_SLOT_BYTES = 1 << 20
HIERARCHICAL_SHM_TIMED_FROM_BYTES = 4 * HOST_SEGMENT_SLOT_BYTES


def _calls_to_decide(rounds):
    """Calls that take a size class through its trials and beyond: at most 7 candidates,
    a rematch of two, then 4 decided calls."""
    return 2 * 7 * rounds + 2 * 2 * rounds + 4


def _kept_after_trials(ran, rounds, size, nbytes):
    """Asserts that ``ran``, the algorithms the calls of one size class (``nbytes``)
    ran, is auto's trials (check_auto_trials says how they go) followed by one kept
    algorithm, and returns it."""
    visits = ran[::2]
    assert ran[0] in visits[1:], f"the trials never came back to their first candidate: {ran}"
    candidates = visits[:visits.index(ran[0], 1)]  # one round of the trials
    assert len(set(candidates)) == len(candidates) <= 7, ran
    # At two ranks the tree is the butterfly's exchange in two messages: never timed.
    assert size != 2 or "tree" not in candidates, ran
    # MPI_Allreduce, a choice a user can force, is timed last, except over emulated
    # links, which it would bypass.
    emulated = _over_emulated_links()
    assert ("mpi" in candidates) != emulated, (ran, emulated)
    # Then the shared-memory algorithm, where the ranks share memory; across hosts
    # whose ranks share a segment each, hierarchical over it, from four of its slots.
    assert ("shm" in candidates) == SHARED_MEMORY, (ran, SHARED_MEMORY)
    host_segments = (HOST_SHARED_MEMORY and not SHARED_MEMORY
                     and nbytes >= HIERARCHICAL_SHM_TIMED_FROM_BYTES)
    assert ("hierarchical_shm" in candidates) == host_segments, (ran, nbytes)
    last = ((["mpi"] if not emulated else []) + (["shm"] if SHARED_MEMORY else [])
            + (["hierarchical_shm"] if host_segments else []))
    assert candidates[len(candidates) - len(last):] == last, (ran, last)
    trials = 2 * rounds * len(candidates)
    assert ran[:trials] == [c for c in candidates for _ in range(2)] * rounds, ran
    rest = ran[trials:]
    if len(set(rest[:4])) == 2:  # a rematch: two candidates, in the model's order
        finalists = [rest[0], rest[2]]
        assert candidates.index(finalists[0]) < candidates.index(finalists[1]), ran
        rematch = 2 * rounds * len(finalists)
        assert rest[:rematch] == [f for f in finalists for _ in range(2)] * rounds, ran
        rest = rest[rematch:]
    assert len(rest) >= 4, ran
    kept = rest[0]
    assert set(rest) == {kept} and kept in candidates, ran
    return kept


def check_auto_trials(rank, size):
    """auto's first calls of a size class go round the cost model's plausible
    algorithms, its pick first, and MPI_Allreduce last (not over emulated links),
    two calls each time (the second is timed), TFDIST_AUTO_TRIALS rounds; where the
    two fastest were close, those two alone go round as often again (a rematch);
    then it keeps one of them for good; every rank runs the same algorithm on every
    call, and every result is right."""
    if size == 1:
        return
    from mpi4py import MPI
    settings = tfdist.RuntimeSettings.from_environment()
    rounds = settings.auto_trials
    assert rounds >= 2, rounds
    # 2.4 MB and 16.8 MB: size classes (2^21 and 2^24 bytes) no other check here reduces
    # with auto, one on each side of where "hierarchical_shm" joins the trials.
    for n in (600_001, 4_200_001):
        x = tf.fill([n], float(rank + 1))
        model_pick = tfdist.algorithm_for(n * 4)
        ran = []
        for i in range(_calls_to_decide(rounds)):
            algorithm, y = _algorithm_of_next_call(
                lambda: tfdist.allreduce(x, op=tfdist.Sum, name=f"auto.trials.{n}.{i % 3}"))
            assert np.all(y.numpy() == size * (size + 1) / 2), (n, i, algorithm)
            ran.append(algorithm)
        assert ran[0] == model_pick, (ran, model_pick)
        kept = _kept_after_trials(ran, rounds, size, n * 4)
        assert tfdist.algorithm_for(n * 4) == kept, (ran, tfdist.algorithm_for(n * 4))
        every_rank = MPI.COMM_WORLD.allgather(ran)
        assert all(theirs == ran for theirs in every_rank), every_rank
    # A forced algorithm of the same size is not a trial and changes nothing.
    algorithm, _ = _algorithm_of_next_call(
        lambda: tfdist.allreduce(x, op=tfdist.Sum, algorithm="tree"))
    assert algorithm == "tree" and tfdist.algorithm_for(n * 4) == kept


def check_auto_trials_grouped_large(rank, size):
    """A fused group with large members goes through its size class's trials as a lone
    tensor does, whether its candidate of the moment runs it whole (the ring, "shm",
    "hierarchical_shm") or
    sends the large members apart (the others): every visit is timed, and the class keeps
    one algorithm. The calls the members make while apart are not trials of their own,
    even one in the group's own size class (else each group call would move the class on
    twice). Every member's result matches numpy's on every call."""
    if size == 1:
        return
    from mpi4py import MPI
    # A runtime of its own, whose size classes no call has visited yet.
    tfdist.shutdown()
    tfdist.init()
    rng = np.random.default_rng(25)
    groups = {
        # 4.8 MB of 1.6 MB members and a small one: no member in the group's size class.
        "apart": [(400_009,), (3,), (400_009,), (400_009,)],
        # 880 KB, of which 600 KB in one member of the group's own size class and 280 KB
        # in another, still over the fusion limit.
        "same_class": [(150_001,), (3,), (70_001,), (5, 7)],
    }
    trials = tfdist.RuntimeSettings.from_environment().auto_trials
    for label, shapes in groups.items():
        group_bytes = 4 * sum(int(np.prod(s)) for s in shapes)
        size_class = group_bytes.bit_length() - 1
        rounds = trials * (1 if size_class >= 20 else 2)  # AlgorithmChooser::RoundsFor
        per_rank = [[rng.integers(-20, 20, size=s).astype(np.float32) for s in shapes]
                    for _ in range(size)]
        totals = [sum(per_rank[r][i] for r in range(size)) for i in range(len(shapes))]
        xs = [tf.constant(v) for v in per_rank[rank]]
        ran = []
        for i in range(_calls_to_decide(rounds)):
            ran.append(tfdist.algorithm_for(group_bytes))
            ys = tfdist.grouped_allreduce(xs, op=tfdist.Sum, name=f"auto.{label}.{i % 2}")
            for member, (y, total) in enumerate(zip(ys, totals)):
                np.testing.assert_array_equal(y.numpy(), total,
                                              err_msg=f"{label} call {i} member {member}")
        kept = _kept_after_trials(ran, rounds, size, group_bytes)
        assert tfdist.algorithm_for(group_bytes) == kept, (label, ran)
        every_rank = MPI.COMM_WORLD.allgather(ran)
        assert all(theirs == ran for theirs in every_rank), (label, every_rank)


def check_auto_falls_back_where_mpi_cannot_reduce(rank, size):
    """While auto's trials visit MPI_Allreduce, a call that MPI cannot reduce (float16 on
    the wire) runs the model's pick instead, with the right result, and is no trial: the
    next call of the size class still runs MPI's visit."""
    if size == 1 or _over_emulated_links():
        return  # no MPI among the candidates (check_auto_trials)
    n = 2_100_001  # 8.4 MB: a size class (2^23 bytes) no other check reduces with auto
    x = tf.fill([n], float(rank + 1))
    model_pick = tfdist.algorithm_for(n * 4)
    for _ in range(2 * 5):  # at most four candidates before MPI's visit, two calls each
        if tfdist.algorithm_for(n * 4) == "mpi":
            break
        tfdist.allreduce(x, op=tfdist.Sum, name="auto.fallback.float32")
    assert tfdist.algorithm_for(n * 4) == "mpi", tfdist.algorithm_for(n * 4)
    # Twice the elements in float16 on the wire: the same bytes, the same size class.
    halves = tf.fill([2 * n], float(rank + 1))
    algorithm, y = _algorithm_of_next_call(lambda: tfdist.allreduce(
        halves, op=tfdist.Sum, compression=tfdist.Compression.fp16, name="auto.fallback.fp16"))
    assert algorithm == model_pick, (algorithm, model_pick)
    np.testing.assert_array_equal(y.numpy(), np.full(2 * n, size * (size + 1) / 2, np.float32))
    assert tfdist.algorithm_for(n * 4) == "mpi", tfdist.algorithm_for(n * 4)
    algorithm, y = _algorithm_of_next_call(
        lambda: tfdist.allreduce(x, op=tfdist.Sum, name="auto.fallback.float32"))
    assert algorithm == "mpi", algorithm
    np.testing.assert_array_equal(y.numpy(), np.full(n, size * (size + 1) / 2, np.float32))


def check_auto_runs_mpi_below_1kib(rank, size):
    """Below 1 KiB auto runs MPI_Allreduce from the first call, with no trials (the
    executor's kMpiAllreduceBelowBytes), except over emulated links, which MPI would
    bypass; a call MPI cannot reduce (float16 on the wire) runs the butterfly. Every
    result matches numpy's, in every dtype MPI reduces and with scaling after MPI."""
    if size == 1:
        return
    from mpi4py import MPI
    emulated = _over_emulated_links()
    rng = np.random.default_rng(1234)
    per_rank = np.stack([rng.integers(-50, 50, size=255) for _ in range(size)])
    total = per_rank.sum(axis=0)
    for elements in (1, 3, 64, 255):  # 4 B to 1,020 B of float32: classes 2^2 to 2^9
        nbytes = 4 * elements
        assert (tfdist.algorithm_for(nbytes) == "mpi") != emulated, (
            nbytes, emulated, tfdist.algorithm_for(nbytes))
        mine = per_rank[rank, :elements]
        for dtype in (tf.float32, tf.int32, tf.float64):
            x = tf.constant(mine, dtype=dtype)
            algorithm, y = _algorithm_of_next_call(lambda: tfdist.allreduce(
                x, op=tfdist.Sum, name=f"auto.small.{elements}.{dtype.name}"))
            np.testing.assert_array_equal(
                y.numpy(), total[:elements].astype(dtype.as_numpy_dtype))
            if dtype.size == 4:  # the size class asked about above
                assert (algorithm == "mpi") != emulated, (algorithm, nbytes, emulated)
        x = tf.constant(mine, dtype=tf.float32)
        algorithm, y = _algorithm_of_next_call(lambda: tfdist.allreduce(
            x, op=tfdist.Average, postscale_factor=0.5, name=f"auto.small.{elements}.avg"))
        np.testing.assert_allclose(y.numpy(), total[:elements] / size * 0.5, rtol=1e-6)
        assert (algorithm == "mpi") != emulated, (algorithm, nbytes, emulated)
    # Twice the elements in float16 on the wire: 1,020 B, the class MPI runs above.
    halves = tf.constant(np.tile(per_rank[rank], 2), dtype=tf.float32)
    algorithm, y = _algorithm_of_next_call(lambda: tfdist.allreduce(
        halves, op=tfdist.Sum, compression=tfdist.Compression.fp16, name="auto.small.fp16"))
    assert emulated or algorithm == "butterfly", algorithm
    np.testing.assert_array_equal(y.numpy(), np.tile(total, 2).astype(np.float32))
    every_rank = MPI.COMM_WORLD.allgather(tfdist.stats()["algorithm_calls"])
    assert all(theirs == every_rank[0] for theirs in every_rank), every_rank


def check_every_algorithm_counted(rank, size):
    """After the checks above, tfdist.stats() counted a call of every algorithm."""
    stats = tfdist.stats()
    for name in ("tree", "butterfly", "ring", "rabenseifner", "mpi", "hierarchical",
                 *(["shm"] if SHARED_MEMORY else []),
                 *(["hierarchical_shm"] if HOST_SHARED_MEMORY else [])):
        assert size == 1 or stats["algorithm_calls"][name] > 0, stats


def check_shm_unavailable(rank, size):
    """Where the ranks may not share memory (virtual hosts, or TFDIST_SHARED_MEMORY=0),
    forcing "shm" fails on every rank with an error that says why, and so does
    "hierarchical_shm" where no host's ranks may; the next call runs."""
    shared_memory_off = os.environ.get("TFDIST_SHARED_MEMORY", "1") == "0"
    why = "TFDIST_SHARED_MEMORY=0" if shared_memory_off else "TFDIST_VIRTUAL_HOSTS"
    for algorithm, available in (("shm", SHARED_MEMORY),
                                 ("hierarchical_shm", HOST_SHARED_MEMORY)):
        if available:
            continue
        try:
            tfdist.allreduce(tf.fill([5], 1.0), op=tfdist.Sum, algorithm=algorithm,
                             name=f"{algorithm}.refused")
        except tf.errors.FailedPreconditionError as e:
            assert f"'{algorithm}' allreduce algorithm cannot run" in str(e), str(e)
            assert why in str(e), (why, str(e))
        else:
            raise AssertionError(f"algorithm={algorithm!r} ran where it cannot")
        y = tfdist.allreduce(tf.fill([5], 1.0), op=tfdist.Sum, name=f"{algorithm}.refused.after")
        np.testing.assert_array_equal(y.numpy(), np.full(5, float(size), np.float32))


CHECKS = Checks()
CHECKS.check("before_init")(check_before_init)
CHECKS.setup(lambda rank, size: tfdist.init())
CHECKS.check("topology")(check_topology)
# It starts a runtime of its own, which resets tfdist.stats(): before the checks whose
# calls algorithm_stats counts.
CHECKS.check("auto_trials_grouped_large")(check_auto_trials_grouped_large)
CHECKS.check("allreduce_matrix")(check_allreduce_matrix)
CHECKS.check("sum_identity")(check_sum_identity)
CHECKS.check("grouped_large_members")(check_grouped_large_members)
CHECKS.check("hierarchical_pipelined")(check_hierarchical_pipelined)
CHECKS.check("scaling")(check_scaling)
CHECKS.check("allgather")(check_allgather)
CHECKS.check("broadcast")(check_broadcast)
CHECKS.check("gradients")(check_gradients)
CHECKS.check("tf_function")(check_tf_function)
CHECKS.check("eager_fast_path")(check_eager_fast_path)
CHECKS.check("eager_tensor_route")(check_eager_tensor_route)
CHECKS.check("auto_trials")(check_auto_trials)
CHECKS.check("auto_mpi_fallback")(check_auto_falls_back_where_mpi_cannot_reduce)
CHECKS.check("auto_mpi_below_1kib")(check_auto_runs_mpi_below_1kib)
CHECKS.check("algorithm_stats")(check_every_algorithm_counted)
CHECKS.check("shm_unavailable")(check_shm_unavailable)
CHECKS.setup(lambda rank, size: tfdist.shutdown())


def main():
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    CHECKS.run(rank, size)
    print(f"rank {rank}: collectives OK", flush=True)


if __name__ == "__main__":
    worker_main(main)
