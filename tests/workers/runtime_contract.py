"""Checks the runtime contract (docs/design.md) on every rank, against numpy.

One job covers many checks, after init() refuses settings that differ between
ranks, in three runtime lifetimes:
  1. default settings (TFDIST_TIMELINE set by the test): ordering, validation,
     fusion, the response cache, every collective and the functions;
  2. after shutdown(): a collective fails clearly; then init() again with
     TFDIST_FUSION_THRESHOLD=1024 and the cache off;
  3. init() again with TFDIST_FUSION_THRESHOLD=0, stall_check_time=1 and a
     4-slot cache: no fusion; cache eviction; a withheld tensor is reported
     (tests/mpi/test_runtime_contract.py reads the report from stderr); the
     process exits without shutdown().
Each check is registered by name in CHECKS (tests/mpi_harness.py's Checks);
every rank prints "CHECK <name> ok" or "CHECK <name> FAILED" per check, and
tests/mpi/test_runtime_contract.py makes one test of each. Importing this
module runs nothing.
"""
import json
import os
import sys
import threading
import time

import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import Checks, expect_error, shared_memory_expected, worker_main

ALGORITHMS = {"tree", "butterfly", "ring", "rabenseifner", "mpi", "hierarchical", "shm",
              "hierarchical_shm"}


def full_rounds():
    s = tfdist.stats()
    return s["negotiation_rounds"] - s["cached_rounds"]


def in_thread(fn):
    """Starts fn in a thread; returns a function that joins it and returns its result."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as error:  # noqa: BLE001  (re-raised by the joiner)
            box["error"] = error

    thread = threading.Thread(target=run)
    thread.start()

    def join():
        thread.join(timeout=60)
        assert not thread.is_alive(), "thread did not finish"
        if "error" in box:
            raise box["error"]
        return box.get("value")
    return join


# ---------------------------------------------------------------- lifetime 1

def check_basic(rank, size):
    x = tfdist.allreduce(tf.constant([rank + 1.0, 2.0 * rank]), op=tfdist.Sum)
    np.testing.assert_allclose(x.numpy(), [size * (size + 1) / 2, size * (size - 1)])
    x = tfdist.allreduce(tf.fill([5], float(rank)), op=tfdist.Average, name="basic.avg")
    np.testing.assert_allclose(x.numpy(), np.full(5, (size - 1) / 2))


def check_idle_cpu(rank, size):
    # The background thread's waiting must not busy-poll: idle, and while
    # rank 0 waits 1.5 s for a tensor the others withhold, a process uses a
    # small fraction of a core (a polling MPI_Wait would use all of it).
    import resource

    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    start_cpu, start = cpu(), time.monotonic()
    time.sleep(1.5)
    idle = (cpu() - start_cpu) / (time.monotonic() - start)
    start_cpu, start = cpu(), time.monotonic()
    if rank != 0:
        time.sleep(1.5)
    tfdist.allreduce(tf.ones([1]), op=tfdist.Sum, name="idle.withheld")
    waiting = (cpu() - start_cpu) / (time.monotonic() - start)
    print(f"rank {rank}: idle CPU {idle:.3f}, waiting CPU {waiting:.3f} of a core", flush=True)
    assert idle < 0.3 and waiting < 0.3, (idle, waiting)


def check_out_of_order_threads(rank, size):
    # Rank r submits "a" first and "b" 0.3 s later from another thread when r
    # is even, the other way round when odd.
    first, second = ("ooo.a", "ooo.b") if rank % 2 == 0 else ("ooo.b", "ooo.a")
    value = {"ooo.a": 1.0, "ooo.b": 10.0}

    def submit(name, delay):
        time.sleep(delay)
        return tfdist.allreduce(tf.fill([3], value[name] * (rank + 1)), op=tfdist.Sum,
                                name=name).numpy()
    join_first = in_thread(lambda: submit(first, 0.0))
    join_second = in_thread(lambda: submit(second, 0.3))
    results = {first: join_first(), second: join_second()}
    total = size * (size + 1) / 2
    np.testing.assert_allclose(results["ooo.a"], np.full(3, total))
    np.testing.assert_allclose(results["ooo.b"], np.full(3, 10 * total))

    # Twenty tensors, one thread each, started in a different random order
    # with random delays on every rank. (One thread cannot submit several
    # in a rank-specific order: eager ops block, so two ranks that wait on
    # different tensors would wait forever, in tfdist as in Horovod.)
    names = [f"ooo.many.{i}" for i in range(20)]
    rng = np.random.default_rng(rank)
    results = {}

    def submit_one(i, delay):
        time.sleep(delay)
        results[i] = tfdist.allreduce(tf.fill([i + 1], float(i * (rank + 1))),
                                      op=tfdist.Sum, name=names[i]).numpy()
    joins = [in_thread(lambda i=int(i), d=float(rng.uniform(0, 0.05)): submit_one(i, d))
             for i in rng.permutation(len(names))]
    for j in joins:
        j()
    for i in range(len(names)):
        np.testing.assert_allclose(results[i], np.full(i + 1, i * total))

    # Four threads at once, each a chain of eager allreduces of the same sizes
    # (256 KiB to 1 MiB: the fast path's cached, aligned result buffers), each
    # result checked while the others run: no two calls may share a buffer.
    def chain(t):
        wrong = []
        for k in range(12):
            count = 65536 * (1 + k % 4)
            value = float(100 * t + k)
            got = tfdist.allreduce(tf.fill([count], value * (rank + 1)), op=tfdist.Sum,
                                   name=f"ooo.big.{t}.{k % 3}").numpy()
            if not np.array_equal(got, np.full(count, value * total, np.float32)):
                wrong.append((k, float(got[0]), value * total))
        return wrong
    joins = [in_thread(lambda t=t: chain(t)) for t in range(4)]
    wrong = {t: j() for t, j in enumerate(joins)}
    assert not any(wrong.values()), f"rank {rank}: wrong results {wrong}"


def check_out_of_order_function(rank, size):
    # Inside one tf.function, "fn.a" waits for a 0.3 s sleep on even ranks and
    # "fn.b" does on odd ranks, so the ranks submit them in opposite orders.
    def sleep():
        time.sleep(0.3)
        return np.float32(0)

    @tf.function
    def step(x):
        delay = tf.numpy_function(sleep, [], tf.float32)
        delay.set_shape([])
        if rank % 2 == 0:
            a = tfdist.allreduce(x, op=tfdist.Sum, name="fn.a")
            b = tfdist.allreduce(x * 10 + delay, op=tfdist.Sum, name="fn.b")
        else:
            a = tfdist.allreduce(x + delay, op=tfdist.Sum, name="fn.a")
            b = tfdist.allreduce(x * 10, op=tfdist.Sum, name="fn.b")
        return a, b

    total = size * (size + 1) / 2
    for _ in range(2):  # traced once, run twice (the second time from the cache)
        a, b = step(tf.fill([4], float(rank + 1)))
        np.testing.assert_allclose(a.numpy(), np.full(4, total))
        np.testing.assert_allclose(b.numpy(), np.full(4, 10 * total))


def check_mismatches(rank, size):
    odd = rank != 0  # rank 0 differs from everybody else

    def follow_up(tag):
        x = tfdist.allreduce(tf.constant([float(rank)]), op=tfdist.Sum, name=f"after.{tag}")
        np.testing.assert_allclose(x.numpy(), [size * (size - 1) / 2])

    cases = [
        ("dtype", "mm.dtype", ["dtype", "float32", "float64"],
         lambda: tfdist.allreduce(tf.ones([3], tf.float64 if odd else tf.float32),
                                  name="mm.dtype")),
        ("shape", "mm.shape", ["shape", "[3]", "[4]"],
         lambda: tfdist.allreduce(tf.ones([4 if odd else 3]), name="mm.shape")),
        ("broadcast shape", "mm.bshape", ["shape", "[2, 3]", "[3, 2]"],
         lambda: tfdist.broadcast(tf.ones([3, 2] if odd else [2, 3]), root_rank=0,
                                  name="mm.bshape")),
        ("allgather dims", "mm.gather", ["shape after the first dimension", "[?, 3]", "[?, 4]"],
         lambda: tfdist.allgather(tf.ones([rank + 1, 4 if odd else 3]), name="mm.gather")),
        ("reduce op", "mm.op", ["reduction op", "sum", "max"],
         lambda: tfdist.allreduce(tf.ones([2]), op=tfdist.Max if odd else tfdist.Sum,
                                  name="mm.op")),
        ("root rank", "mm.root", ["root rank", "has 0", "has 1"],
         lambda: tfdist.broadcast(tf.ones([2]), root_rank=1 if odd else 0, name="mm.root")),
        ("prescale", "mm.pre", ["prescale factor", "0.5", "0.25"],
         lambda: tfdist.allreduce(tf.ones([2]), op=tfdist.Sum,
                                  prescale_factor=0.25 if odd else 0.5, name="mm.pre")),
        ("postscale", "mm.post", ["postscale factor", "1.5", "2.5"],
         lambda: tfdist.allreduce(tf.ones([2]), op=tfdist.Sum,
                                  postscale_factor=2.5 if odd else 1.5, name="mm.post")),
        ("reducescatter shape", "mm.rs", ["shape", "[5, 2]", "[6, 2]"],
         lambda: tfdist.reducescatter(tf.ones([6 if odd else 5, 2]), op=tfdist.Sum,
                                      name="mm.rs")),
        ("collective", "mm.kind", ["collective", "allreduce", "allgather"],
         lambda: (tfdist.allgather(tf.ones([1]), name="mm.kind") if odd
                  else tfdist.allreduce(tf.ones([1]), name="mm.kind"))),
    ]
    for tag, name, fragments, fn in cases:
        message = expect_error(tf.errors.FailedPreconditionError, fn, f"'{name}'", *fragments)
        assert "rank 0" in message and "rank 1" in message, message
        follow_up(tag.replace(" ", "_"))
    # The same mismatch again (now answered from the response cache) fails the
    # same way, and a tf.function sees it as well.
    expect_error(tf.errors.FailedPreconditionError, cases[1][3], "'mm.shape'", "[3]", "[4]")

    @tf.function
    def mismatched():
        return tfdist.allreduce(tf.ones([4 if odd else 3]), name="mm.fn")
    expect_error(tf.errors.FailedPreconditionError, mismatched, "'mm.fn'", "[3]", "[4]")
    follow_up("function")


def check_duplicate_name(rank, size):
    # Rank 0 has "dup" in flight (the others submit it 0.6 s later) and tries
    # to submit a second "dup": that fails at once, locally.
    if rank == 0:
        pending = in_thread(lambda: tfdist.allreduce(tf.ones([2]), op=tfdist.Sum,
                                                     name="dup").numpy())
        time.sleep(0.2)
        start = time.monotonic()
        expect_error(tf.errors.InvalidArgumentError,
                     lambda: tfdist.allreduce(tf.ones([2]), op=tfdist.Sum, name="dup"),
                     "'dup'", "already in flight")
        assert time.monotonic() - start < 0.3, "the duplicate should fail at once"
        np.testing.assert_allclose(pending(), np.full(2, size))
    else:
        time.sleep(0.6)
        x = tfdist.allreduce(tf.ones([2]), op=tfdist.Sum, name="dup")
        np.testing.assert_allclose(x.numpy(), np.full(2, size))
    # A group with a name in flight is refused as a whole.
    if rank == 0:
        pending = in_thread(lambda: tfdist.allreduce(tf.ones([1]), op=tfdist.Sum,
                                                     name="grp.0").numpy())
        time.sleep(0.2)
        expect_error(tf.errors.InvalidArgumentError,
                     lambda: tfdist.grouped_allreduce([tf.ones([1]), tf.ones([1])],
                                                      op=tfdist.Sum, name="grp"),
                     "'grp.0'", "already in flight")
        np.testing.assert_allclose(pending(), [size])
    else:
        time.sleep(0.6)
        np.testing.assert_allclose(
            tfdist.allreduce(tf.ones([1]), op=tfdist.Sum, name="grp.0").numpy(), [size])


def check_fusion(rank, size, expect_fusion=True, threshold=None):
    before = tfdist.stats()
    values = [np.arange(n, dtype=np.float32) * (rank + 1) for n in (1, 3, 5, 7, 11, 13, 17, 19)]
    out = tfdist.grouped_allreduce([tf.constant(v) for v in values], op=tfdist.Sum,
                                   name=f"fusion.{threshold}")
    total = size * (size + 1) / 2
    for v, o in zip(values, out):
        np.testing.assert_allclose(o.numpy(), v / (rank + 1) * total)
    after = tfdist.stats()
    calls = after["allreduce_calls"] - before["allreduce_calls"]
    tensors = after["tensors_reduced"] - before["tensors_reduced"]
    assert tensors == len(values), (tensors, calls)
    if expect_fusion:
        assert calls < tensors, f"no fusion: {calls} calls for {tensors} tensors"
        assert calls == 1, f"8 small tensors took {calls} allreduces"
    else:
        assert calls == tensors, f"fusion is off but {tensors} tensors took {calls} calls"

    # Mixed dtypes never share a buffer; float16 is reduced in float32.
    before = tfdist.stats()
    mixed = [tf.constant([1.0, 2.0], tf.float32), tf.constant([3.0], tf.float64),
             tf.constant([4.0, 5.0], tf.float32), tf.constant([6, 7], tf.int32),
             tf.constant([0.5], tf.float16)]
    out = tfdist.grouped_allreduce(mixed, op=tfdist.Sum, name=f"mixed.{threshold}")
    for m, o in zip(mixed, out):
        assert o.dtype == m.dtype
        np.testing.assert_allclose(o.numpy(), m.numpy() * size)
    calls = tfdist.stats()["allreduce_calls"] - before["allreduce_calls"]
    assert calls == (4 if expect_fusion else 5), calls

    # A tensor larger than the fusion buffer goes on its own and still works.
    big = np.arange(100_000, dtype=np.float32) % 7 * (rank + 1)
    before = tfdist.stats()
    out = tfdist.grouped_allreduce([tf.constant([1.0]), tf.constant(big), tf.constant([2.0])],
                                   op=tfdist.Sum, name=f"big.{threshold}")
    np.testing.assert_allclose(out[1].numpy(), big / (rank + 1) * total)
    np.testing.assert_allclose(out[0].numpy(), [size])
    np.testing.assert_allclose(out[2].numpy(), [2.0 * size])
    calls = tfdist.stats()["allreduce_calls"] - before["allreduce_calls"]
    if threshold is not None and threshold < big.nbytes:
        assert calls == (2 if expect_fusion else 3), calls
    check_large_tensors_in_a_group(rank, size, expect_fusion, threshold)


def check_large_tensors_in_a_group(rank, size, expect_fusion, threshold):
    """Tensors over 256 KiB join the small ones in one ring (or one shared-memory
    allreduce), read and written where they lie; other algorithms run them apart."""
    def member(n, scale):
        return np.arange(n, dtype=np.float32) % 89 * scale + rank

    sizes = (3, 300_000, 50, 70_001, 1)  # 1.2 MB and 280 KB are over the packing bound
    values = [member(n, i + 1) for i, n in enumerate(sizes)]

    @tf.function
    def computed(x):  # an input nobody else holds: the kernel forwards it to the output
        return tfdist.grouped_allreduce([x * 1.0, *[tf.constant(v) for v in values[1:]]],
                                        op=tfdist.Average, name=f"large.fn.{threshold}")

    # "auto" runs the group as one collective when it picks the ring or "shm" for
    # it, which depends on this machine's measured link cost and auto's trials.
    auto_calls = 1 if tfdist.algorithm_for(sum(sizes) * 4) in ("ring", "shm") else 3
    forced = [("ring", 1), ("butterfly", 3), *([("shm", 1)] if shared_memory_expected() else [])]
    for algorithm, expected_calls in (("auto", auto_calls), *forced):
        before = tfdist.stats()
        if algorithm == "auto":
            out = computed(tf.constant(values[0]))
        else:
            out = tfdist.grouped_allreduce([tf.constant(v) for v in values], op=tfdist.Average,
                                           algorithm=algorithm,
                                           name=f"large.{algorithm}.{threshold}")
        for i, (n, o) in enumerate(zip(sizes, out)):
            expected = np.arange(n, dtype=np.float64) % 89 * (i + 1) + (size - 1) / 2
            np.testing.assert_allclose(o.numpy(), expected, rtol=1e-6,
                                       err_msg=f"member {i}, {algorithm}, threshold {threshold}")
        calls = tfdist.stats()["allreduce_calls"] - before["allreduce_calls"]
        if not expect_fusion:
            expected_calls = len(sizes)
        elif threshold is not None:  # the 1 KiB threshold: each large one alone
            expected_calls = 3
        assert calls == expected_calls, (algorithm, threshold, calls)


def check_graph_burst(rank, size):
    # A tf.function hands its allreduces over one kernel at a time; the
    # runtime waits for each step's burst to finish arriving (and, once it
    # has seen it, for exactly its size) and fuses it into one collective.
    grads = [tf.Variable(tf.fill([64], float(rank + i))) for i in range(20)]

    @tf.function
    def step():
        return [tfdist.allreduce(g, op=tfdist.Sum, name=f"burst.{i}")
                for i, g in enumerate(grads)]

    step()
    before = tfdist.stats()
    for _ in range(10):
        out = step()
    calls = tfdist.stats()["allreduce_calls"] - before["allreduce_calls"]
    for i, o in enumerate(out):
        np.testing.assert_allclose(o.numpy(), np.full(64, size * (size - 1) / 2 + size * i))
    # One per step when every burst is caught whole; a round started before
    # the burst is complete would split it.
    assert calls <= 20, f"10 steps of 20 allreduces took {calls} collectives"
    print(f"graph_burst: {calls} collectives for 10 steps (rank {rank})", flush=True)


def check_cache(rank, size, cache_on=True):
    # A repeated tensor is announced by one bit: no full (allgather) round.
    x = tf.fill([16], float(rank))
    for _ in range(3):
        tfdist.allreduce(x, op=tfdist.Sum, name="steady")
    before_full, before = full_rounds(), tfdist.stats()
    for _ in range(30):
        y = tfdist.allreduce(x, op=tfdist.Sum, name="steady")
    np.testing.assert_allclose(y.numpy(), np.full(16, size * (size - 1) / 2))
    extra = full_rounds() - before_full
    after = tfdist.stats()
    assert after["allreduce_calls"] - before["allreduce_calls"] == 30
    if cache_on:
        assert extra == 0, f"30 cached allreduces needed {extra} full negotiation rounds"
        assert after["cached_rounds"] - before["cached_rounds"] >= 30
    else:
        assert extra >= 30, f"without the cache 30 allreduces took only {extra} full rounds"


def check_cache_eviction(rank, size):
    # Runs with cache_capacity=4. One-off names (unnamed eager ops) and more
    # names than slots evict the least recently used slot; results stay right
    # and a repeated tensor is still answered from the cache afterwards.
    for i in range(12):
        x = tfdist.allreduce(tf.constant([float(rank + i)]), op=tfdist.Sum)
        np.testing.assert_allclose(x.numpy(), [size * i + size * (size - 1) / 2])
    for round_ in range(4):
        for i in range(6):  # 6 names through 4 slots
            x = tfdist.allreduce(tf.fill([i + 1], float(rank)), op=tfdist.Sum, name=f"lru.{i}")
            np.testing.assert_allclose(x.numpy(), np.full(i + 1, size * (size - 1) / 2))
        out = tfdist.grouped_allreduce([tf.fill([3], float(round_ + rank))] * 6, op=tfdist.Max,
                                       name="lru.group")
        for o in out:
            np.testing.assert_allclose(o.numpy(), np.full(3, round_ + size - 1))
    check_cache(rank, size)
    # Unnamed eager ops' names never recur: they stay out of the cache, and a
    # cached tensor survives any number of them.
    keep = tf.fill([5], float(rank))
    for _ in range(2):
        tfdist.allreduce(keep, op=tfdist.Sum, name="keep")
    for i in range(12):
        tfdist.allreduce(tf.constant([float(i)]), op=tfdist.Sum)
    before_full = full_rounds()
    for _ in range(5):
        y = tfdist.allreduce(keep, op=tfdist.Sum, name="keep")
    np.testing.assert_allclose(y.numpy(), np.full(5, size * (size - 1) / 2))
    assert full_rounds() == before_full, "unnamed eager ops evicted a cached tensor"


def check_grouped(rank, size):
    assert tfdist.grouped_allreduce([]) == []

    @tf.function
    def grouped(a, b):
        return tfdist.grouped_allreduce([a, b], op=tfdist.Average, name="grouped.fn")
    for _ in range(2):
        a, b = grouped(tf.fill([2, 2], float(rank)), tf.fill([3], float(2 * rank)))
        np.testing.assert_allclose(a.numpy(), np.full([2, 2], (size - 1) / 2))
        np.testing.assert_allclose(b.numpy(), np.full([3], size - 1))
    # Unnamed eager groups get the same sequence name on every rank.
    out = tfdist.grouped_allreduce([tf.constant([rank]), tf.constant([[1, 2]])], op=tfdist.Max)
    np.testing.assert_array_equal(out[0].numpy(), [size - 1])
    np.testing.assert_array_equal(out[1].numpy(), [[1, 2]])
    # Gradient of a grouped Sum is the grouped Sum of the gradients.
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        (y,) = tfdist.grouped_allreduce([v * (rank + 1)], op=tfdist.Sum, name="grouped.grad")
        loss = tf.reduce_sum(y)
    # d(sum y)/dv = the Sum over ranks of the upstream ones, times (rank + 1).
    np.testing.assert_allclose(tape.gradient(loss, v).numpy(), np.full(2, size * (rank + 1)))


def check_alltoall(rank, size):
    # Rank r sends (r + j) % 3 rows to rank j; row values encode (source, destination, row).
    splits = [(rank + j) % 3 for j in range(size)]
    rows = []
    for j, n in enumerate(splits):
        rows += [[rank, j, k] for k in range(n)]
    data = np.array(rows, dtype=np.int64).reshape(-1, 3)
    out, received = tfdist.alltoall(tf.constant(data), splits=splits, name="a2a.uneven")
    expected_splits = [(r + rank) % 3 for r in range(size)]
    np.testing.assert_array_equal(received.numpy(), expected_splits)
    expected = [[r, rank, k] for r in range(size) for k in range((r + rank) % 3)]
    np.testing.assert_array_equal(out.numpy(), np.array(expected, np.int64).reshape(-1, 3))
    # Equal parts by default, with a trailing dimension.
    data = np.arange(size * 2 * 3, dtype=np.float32).reshape(size * 2, 3) + 100 * rank
    out, received = tfdist.alltoall(tf.constant(data), name="a2a.even")
    np.testing.assert_array_equal(received.numpy(), [2] * size)
    expected = np.concatenate([np.arange(size * 2 * 3, dtype=np.float32).reshape(size * 2, 3)
                               [2 * rank:2 * rank + 2] + 100 * r for r in range(size)])
    np.testing.assert_array_equal(out.numpy(), expected)


def check_reducescatter(rank, size):
    for rows, op in ((2 * size + 1, tfdist.Sum), (size - 1, tfdist.Sum), (3 * size + 2, tfdist.Average)):
        contributions = [np.arange(rows * 2, dtype=np.float64).reshape(rows, 2) * (r + 1)
                         for r in range(size)]
        full = np.sum(contributions, axis=0)
        if op == tfdist.Average:
            full = full / size
        counts = [rows // size + (1 if r < rows % size else 0) for r in range(size)]
        start = sum(counts[:rank])
        out = tfdist.reducescatter(tf.constant(contributions[rank]), op=op,
                                   name=f"rs.{rows}.{int(op)}")
        assert out.shape == (counts[rank], 2), (out.shape, counts)
        np.testing.assert_allclose(out.numpy(), full[start:start + counts[rank]])


def check_allgather(rank, size):
    out = tfdist.allgather(tf.fill([rank + 1, 2], rank), name="gather.uneven")
    expected = np.concatenate([np.full([r + 1, 2], r) for r in range(size)])
    np.testing.assert_array_equal(out.numpy(), expected)


def check_functions(rank, size):
    # broadcast_variables: every rank ends with root's values, for several dtypes.
    root = size - 1
    variables = [tf.Variable(np.full([2, 3], rank, np.float32)),
                 tf.Variable(np.arange(4, dtype=np.int64) * (rank + 1)),
                 tf.Variable([rank % 2 == 0, True]),
                 tf.Variable(float(rank), dtype=tf.float64)]
    tfdist.broadcast_variables(variables, root_rank=root)
    np.testing.assert_array_equal(variables[0].numpy(), np.full([2, 3], root, np.float32))
    np.testing.assert_array_equal(variables[1].numpy(), np.arange(4) * (root + 1))
    np.testing.assert_array_equal(variables[2].numpy(), [root % 2 == 0, True])
    assert variables[3].numpy() == root

    @tf.function
    def broadcast_in_function():
        tfdist.broadcast_variables(variables[:2], root_rank=0)
    for v in variables[:2]:
        v.assign(v * 0 + rank)
    broadcast_in_function()
    np.testing.assert_array_equal(variables[0].numpy(), np.zeros([2, 3]))
    np.testing.assert_array_equal(variables[1].numpy(), np.zeros(4))

    # broadcast_object from two different roots.
    for root in (0, size - 1):
        obj = {"rank": rank, "array": np.arange(rank + 3), "text": "x" * (100 * rank)}
        got = tfdist.broadcast_object(obj if rank == root else None, root_rank=root)
        assert got["rank"] == root and got["text"] == "x" * (100 * root), got
        np.testing.assert_array_equal(got["array"], np.arange(root + 3))

    # allgather_object: objects of different sizes, in rank order.
    got = tfdist.allgather_object({"rank": rank, "payload": list(range(rank * 50))})
    assert [g["rank"] for g in got] == list(range(size)), got
    assert [len(g["payload"]) for g in got] == [r * 50 for r in range(size)]
    assert tfdist.allgather_object(None) == [None] * size



def uneven_step(rank, size, step, active, fused_step):
    """One step of a rank that still has data, checked against numpy over the active ranks."""
    def value(r, shift=0.0):
        return np.float32(r + 1 + step + shift)

    for op, reference in ((tfdist.Sum, np.sum), (tfdist.Min, np.min), (tfdist.Max, np.max),
                          (tfdist.Product, np.prod)):
        got = tfdist.allreduce(tf.fill([6], value(rank)), op=op, name=f"join.{op.name}")
        np.testing.assert_allclose(got.numpy(), np.full(6, reference([value(r) for r in active])),
                                   rtol=1e-6)
    got = tfdist.allreduce(tf.constant([int(value(rank))], tf.int64), op=tfdist.Sum,
                           name="join.int64")
    assert got.numpy()[0] == sum(int(value(r)) for r in active)
    # Unnamed: the ranks still training number more eager calls than the joined ones.
    got = tfdist.allreduce(tf.fill([2], value(rank)), op=tfdist.Max)
    np.testing.assert_array_equal(got.numpy(), np.full(2, max(value(r) for r in active)))
    # Average divides by every rank, joined ones included (Horovod's rule).
    got = tfdist.allreduce(tf.fill([3], value(rank)), op=tfdist.Average, name="join.average")
    np.testing.assert_allclose(got.numpy(), sum(value(r) for r in active) / size, rtol=1e-6)
    # Large tensors run alone, in place, each with every algorithm; a joined rank
    # must put the same bytes on the wire (the ring scales as it goes).
    big = np.arange(300_000, dtype=np.float32) % 97 + value(rank)
    for algorithm in sorted(ALGORITHMS):
        got = tfdist.allreduce(tf.constant(big), op=tfdist.Average, algorithm=algorithm,
                               name=f"join.big.{algorithm}")
        expected = sum(np.arange(300_000, dtype=np.float64) % 97 + value(r) for r in active)
        np.testing.assert_allclose(got.numpy(), expected / size, rtol=1e-5,
                                   err_msg=f"{algorithm}, active ranks {active}")
    # Small and large tensors in one ring: a joined rank stands in with identity for both.
    small, large = tf.fill([7], value(rank)), tf.constant(big)
    got = tfdist.grouped_allreduce([small, large, small], op=tfdist.Average, name="join.group")
    expected = sum(np.arange(300_000, dtype=np.float64) % 97 + value(r) for r in active)
    np.testing.assert_allclose(got[1].numpy(), expected / size, rtol=1e-5)
    for out in (got[0], got[2]):
        np.testing.assert_allclose(out.numpy(), sum(value(r) for r in active) / size, rtol=1e-6)
    half = tfdist.allreduce(tf.fill([5], tf.constant(value(rank), tf.float16)), op=tfdist.Sum,
                            name="join.float16")
    np.testing.assert_allclose(half.numpy(), sum(value(r) for r in active), rtol=1e-3)
    # A tf.function's burst, fused and (after its first step) announced by cache bit.
    outs = fused_step(tf.constant(float(rank)))
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.numpy(), np.full(100, sum(r + i for r in active)))
    gathered = tfdist.allgather(tf.fill([rank + 1, 2], rank), name="join.allgather")
    np.testing.assert_array_equal(gathered.numpy()[:, 0],
                                  np.concatenate([np.full(r + 1, r) for r in active]))
    rows = 2 * size + 1
    scattered = tfdist.reducescatter(tf.fill([rows, 2], value(rank)), op=tfdist.Sum,
                                     name="join.reducescatter")
    np.testing.assert_allclose(scattered.numpy()[:, 0], sum(value(r) for r in active))
    root = size - 1  # the last to join: always active
    got = tfdist.broadcast(tf.fill([4], rank), root_rank=root, name="join.broadcast")
    np.testing.assert_array_equal(got.numpy(), np.full(4, root))


def check_join(rank, size, label):
    """Horovod's join: uneven data; joined ranks stand in for the others' collectives."""
    @tf.function
    def fused_step(x):
        return [tfdist.allreduce(tf.fill([100], x + i), op=tfdist.Sum, name=f"join.burst.{i}")
                for i in range(5)]

    steps = {r: r + 2 for r in range(size)}  # rank r has r + 2 batches; the highest joins last
    for step in range(steps[rank]):
        active = [r for r in range(size) if steps[r] > step]
        uneven_step(rank, size, step, active, fused_step)
        if step >= steps[0] and rank != 0:
            # Rank 0 has joined: it cannot be a broadcast root or take part in an alltoall.
            expect_error(tf.errors.FailedPreconditionError,
                         lambda: tfdist.broadcast(tf.zeros([2]), root_rank=0, name="join.bad"),
                         "join.bad", "root rank 0", "called tfdist.join()")
            expect_error(tf.errors.FailedPreconditionError,
                         lambda: tfdist.alltoall(tf.zeros([2 * size]), name="join.a2a"),
                         "join.a2a", "called tfdist.join()")
    assert tfdist.join() == size - 1
    # After the join the unnamed eager numbering starts over on every rank.
    np.testing.assert_array_equal(tfdist.allreduce(tf.ones([2]), op=tfdist.Sum).numpy(),
                                  [size, size])

    # Rank 0 cannot join with a collective in flight, nor start one while joined.
    if rank == 0:
        pending = in_thread(lambda: tfdist.allreduce(tf.ones([1]), op=tfdist.Sum,
                                                     name="join.inflight").numpy())
        time.sleep(0.3)
        expect_error(tf.errors.FailedPreconditionError, tfdist.join, "join.inflight",
                     "still in flight")
    else:
        time.sleep(0.6)
        pending = in_thread(lambda: tfdist.allreduce(tf.ones([1]), op=tfdist.Sum,
                                                     name="join.inflight").numpy())
    assert pending()[0] == size
    if rank == 0:
        joining = in_thread(tfdist.join)
        time.sleep(0.3)
        expect_error(tf.errors.FailedPreconditionError,
                     lambda: tfdist.allreduce(tf.ones([1]), name="join.while_waiting"),
                     "join.while_waiting", "waiting in tfdist.join()")
        assert joining() == size - 1
    else:
        time.sleep(0.6 + 0.1 * rank)  # after rank 0's check; the highest rank last
        assert tfdist.join() == size - 1


def check_timeline(rank, size, path):
    # The runtime is shut down, so the file is complete.
    file = f"{path}.{rank}" if size > 1 else path
    with open(file) as f:
        events = json.load(f)
    rows = {e["tid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e["name"] == "thread_name"}
    phases = {}
    for e in events:
        if e.get("ph") == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0, e
            phases.setdefault(rows[e["tid"]], {}).setdefault(e["name"], []).append(e)
    steady = phases["steady"]
    for phase in ("NEGOTIATE", "WAIT_FOR_OTHER_RANKS", "ALLREDUCE"):
        assert phase in steady, (phase, sorted(steady))
    assert all(e["args"]["algorithm"] in ALGORITHMS for e in steady["ALLREDUCE"])
    # Every algorithm ("mpi" too: MPI_Allreduce gets both buffers) reads a lone
    # tensor's input where it lies and writes the result into the output: no
    # copy of the input comes first.
    assert "COPY_INPUT" not in steady, sorted(steady)
    assert all(e["args"]["bytes"] == 64 for e in steady["ALLREDUCE"])
    # The fused group shows up under its first tensor with the copies in and out.
    fused = phases["fusion.None.0"]
    for phase in ("FUSION_COPY_IN", "ALLREDUCE", "FUSION_COPY_OUT"):
        assert phase in fused, (phase, sorted(fused))
    assert fused["ALLREDUCE"][0]["args"]["tensors"] == 8
    for name, phase in (("gather.uneven", "ALLGATHER"), ("a2a.uneven", "ALLTOALL"),
                        (f"rs.{2 * size + 1}.0", "REDUCESCATTER")):
        assert phase in phases[name], (name, sorted(phases[name]))
    for name in ("ooo.a", "fn.b"):
        assert "WAIT_FOR_OTHER_RANKS" in phases[name] and "NEGOTIATE" in phases[name]


def check_shutdown(rank, size):
    # An op still waiting when the job shuts down fails with Aborted.
    # (A shutdown on any rank stops every rank's runtime, so the others wait
    # at an MPI barrier until rank 0's op is surely in flight.)
    from mpi4py import MPI
    orphan = None
    if rank == 0:
        orphan = in_thread(lambda: tfdist.allreduce(tf.ones([1]), name="orphan"))
        time.sleep(0.3)
    MPI.COMM_WORLD.Barrier()
    tfdist.shutdown()
    if orphan is not None:
        expect_error(tf.errors.AbortedError, orphan, "shutdown()")
    assert not tfdist.is_initialized()
    start = time.monotonic()
    expect_error(tf.errors.FailedPreconditionError,
                 lambda: tfdist.allreduce(tf.ones([1]), name="late"), "not initialized")

    @tf.function
    def late():
        return tfdist.allgather(tf.ones([1]), name="late.fn")
    expect_error(tf.errors.FailedPreconditionError, late, "not initialized")
    assert time.monotonic() - start < 5
    tfdist.shutdown()  # a second shutdown is harmless


def check_stall_report(rank, size):
    # The last rank withholds "stall.x" for 2.5 s; with stall_check_time=1 the
    # others report it (the test reads their stderr), then it completes.
    if rank == size - 1:
        time.sleep(2.5)
    x = tfdist.allreduce(tf.ones([2]), op=tfdist.Sum, name="stall.x")
    np.testing.assert_allclose(x.numpy(), np.full(2, size))


def check_settings_must_agree():
    """Ranks whose fusion or cache settings differ would run different collectives."""
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    expect_error(tfdist.InitError,
                 lambda: tfdist.init(fusion_threshold=1024 if rank == size - 1 else 4096),
                 "ranks disagree on TFDIST_FUSION_THRESHOLD",
                 f"rank 0 has 4096, rank {size - 1} has 1024")
    expect_error(tfdist.InitError, lambda: tfdist.init(cache_capacity=8 + (rank == 1)),
                 "TFDIST_CACHE_CAPACITY", "rank 1 has 9")
    assert not tfdist.is_initialized()


CHECKS = Checks()
check, setup = CHECKS.check, CHECKS.setup

check("settings_agree")(lambda rank, size: check_settings_must_agree())


@setup
def lifetime_1(rank, size):
    tfdist.init()
    assert (tfdist.rank(), tfdist.size()) == (rank, size) and size > 1


check("basic")(check_basic)
check("idle_cpu")(check_idle_cpu)
check("out_of_order_threads")(check_out_of_order_threads)
check("out_of_order_function")(check_out_of_order_function)
check("mismatches")(check_mismatches)
check("duplicate_name")(check_duplicate_name)
check("fusion threshold=None")(check_fusion)
check("graph_burst")(check_graph_burst)
check("cache on=True")(check_cache)
check("grouped_allreduce")(check_grouped)
check("alltoall")(check_alltoall)
check("reducescatter")(check_reducescatter)
check("allgather")(check_allgather)
check("functions")(check_functions)
check("join cache=on")(lambda rank, size: check_join(rank, size, "cache=on"))
check("shutdown")(check_shutdown)


@check("timeline")
def timeline_of_lifetime_1(rank, size):
    path = os.environ.get("TFDIST_TIMELINE", "")
    assert path, "TFDIST_TIMELINE is not set: no timeline to check"
    check_timeline(rank, size, path)


@setup
def lifetime_2(rank, size):
    """A small fusion buffer, no response cache."""
    os.environ["TFDIST_TIMELINE"] = ""
    os.environ["TFDIST_FUSION_THRESHOLD"] = "1024"
    tfdist.init(cache_capacity=0)


check("basic lifetime=2")(check_basic)
check("fusion threshold=1024")(
    lambda rank, size: check_fusion(rank, size, expect_fusion=True, threshold=1024))
check("cache on=False")(lambda rank, size: check_cache(rank, size, cache_on=False))
check("join cache=off")(lambda rank, size: check_join(rank, size, "cache=off"))


@setup
def lifetime_3(rank, size):
    """Fusion off (TFDIST_FUSION_THRESHOLD=0) and a stall report; the process then exits
    without calling shutdown()."""
    tfdist.shutdown()
    os.environ["TFDIST_FUSION_THRESHOLD"] = "0"
    tfdist.init(stall_check_time=1.0, cache_capacity=4)


check("fusion threshold=0")(
    lambda rank, size: check_fusion(rank, size, expect_fusion=False, threshold=0))
check("cache_eviction")(check_cache_eviction)
check("stall_report")(check_stall_report)
check("out_of_order_threads lifetime=3")(check_out_of_order_threads)


def body():
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    CHECKS.run(rank, size)
    print(f"DONE rank {rank}", flush=True)


if __name__ == "__main__":
    worker_main(body)
    sys.exit(0)
