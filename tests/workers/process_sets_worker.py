"""Process sets (tfdist/process_sets.py) at np 3-4, every result against numpy.

Sets used (n = size): LOW = [0, 1] and HIGH = [2 .. n-1] (disjoint), FIRST =
[0 .. n-2] and LAST = [1 .. n-1] (overlapping), ONE = [n-1]. Each check is
registered by name in CHECKS; tests/mpi/test_process_sets.py makes one test of
each. With ``--train`` only the Keras check runs: two model replicas on LOW and
HIGH (n = 4), each compared bit for bit with a separate 2-rank tfdist world
started afterwards in the same job over the same two processes.
"""
import sys
import threading
import time

import numpy as np
import tensorflow as tf

import tfdist
from tfdist import _library
from mpi_harness import Checks, expect_error, worker_main

CHECKS = Checks()
check, setup = CHECKS.check, CHECKS.setup
SETS = {}


def inputs(rank, shape=(5,), salt=0):
    """What global rank ``rank`` contributes: distinct per rank and salt."""
    return (np.arange(np.prod(shape), dtype=np.float32).reshape(shape) * (rank + 1)
            + 100 * salt)


@setup
def start(rank, size):
    tfdist.init(process_sets=[tfdist.ProcessSet([0, 1])])
    SETS["LOW"] = [ps for ps in _registered() if ps.ranks == [0, 1]][0]
    SETS["HIGH"] = tfdist.add_process_set(list(range(2, size)))
    SETS["FIRST"] = tfdist.add_process_set(list(range(size - 1)))
    SETS["LAST"] = tfdist.add_process_set(tfdist.ProcessSet(list(range(1, size))))
    SETS["ONE"] = tfdist.add_process_set([size - 1])


def _registered():
    from tfdist import process_sets
    return process_sets.registered()


@check("set_properties")
def set_properties(rank, size):
    low, high = SETS["LOW"], SETS["HIGH"]
    ids = [ps.process_set_id for ps in SETS.values()]
    assert len(set(ids)) == len(ids) and 0 not in ids, ids
    assert tfdist.global_process_set.ranks == list(range(size))
    assert tfdist.global_process_set.size() == size and tfdist.global_process_set.included()
    assert low.size() == 2 and high.size() == size - 2
    assert low.included() == (rank < 2) and high.included() == (rank >= 2)
    mine = low if rank < 2 else high
    assert mine.rank() == mine.ranks.index(rank)
    other = high if rank < 2 else low
    expect_error(ValueError, other.rank, f"rank {rank} is not in")
    import tfdist.keras as hvd
    assert hvd.ProcessSet is tfdist.ProcessSet and hvd.add_process_set is tfdist.add_process_set
    assert hvd.global_process_set is tfdist.global_process_set


@check("disjoint_sets_every_collective")
def disjoint_sets_every_collective(rank, size):
    ps = SETS["LOW"] if rank < 2 else SETS["HIGH"]
    members, me = ps.ranks, ps.rank()
    x = tf.constant(inputs(rank))
    # The same names on both sets: names are matched within a set.
    got = tfdist.allreduce(x, op=tfdist.Sum, name="same", process_set=ps).numpy()
    np.testing.assert_allclose(got, sum(inputs(r) for r in members), rtol=1e-6)
    got = tfdist.allreduce(x, name="avg", process_set=ps).numpy()
    np.testing.assert_allclose(got, np.mean([inputs(r) for r in members], axis=0), rtol=1e-6)
    # A forced algorithm on a set (the eager fast path carries both), every one.
    for algorithm in [a for a in _library.allreduce_algorithms() if a != "auto"]:
        got = tfdist.allreduce(x, op=tfdist.Sum, name=f"forced.{algorithm}", algorithm=algorithm,
                               process_set=ps).numpy()
        np.testing.assert_allclose(got, sum(inputs(r) for r in members), rtol=1e-6,
                                   err_msg=algorithm)
    got = tfdist.grouped_allreduce([x, 2 * x], op=tfdist.Max, process_set=ps)
    np.testing.assert_allclose(got[1].numpy(), 2 * inputs(members[-1]), rtol=1e-6)
    rows = tf.fill([rank + 1, 2], float(rank))
    gathered = tfdist.allgather(rows, process_set=ps).numpy()
    expected = np.concatenate([np.full([r + 1, 2], float(r)) for r in members])
    np.testing.assert_array_equal(gathered, expected)
    grouped = tfdist.grouped_allgather([rows, rows[:1]], process_set=ps)
    np.testing.assert_array_equal(grouped[0].numpy(), expected)
    root = members[-1]
    got = tfdist.broadcast(x, root_rank=root, process_set=ps).numpy()
    np.testing.assert_array_equal(got, inputs(root))
    block = tf.constant(np.arange(4 * len(members), dtype=np.float32).reshape(-1, 1) + rank)
    scattered = tfdist.reducescatter(block, op=tfdist.Sum, process_set=ps).numpy()
    total = sum(np.arange(4 * len(members), dtype=np.float32).reshape(-1, 1) + r
                for r in members)
    np.testing.assert_allclose(scattered, total[4 * me:4 * me + 4])
    both = tfdist.grouped_reducescatter([block], op=tfdist.Sum, process_set=ps)
    np.testing.assert_allclose(both[0].numpy(), total[4 * me:4 * me + 4])
    sent = tf.constant([[float(rank * 10 + j)] for j in range(len(members))])
    received, splits = tfdist.alltoall(sent, process_set=ps)
    np.testing.assert_array_equal(received.numpy().ravel(),
                                  [r * 10 + me for r in members])
    np.testing.assert_array_equal(splits.numpy(), [1] * len(members))
    assert int(tfdist.barrier(process_set=ps).numpy()) == len(members)
    objects = tfdist.allgather_object({"rank": rank}, process_set=ps)
    assert objects == [{"rank": r} for r in members], objects


@check("disjoint_sets_run_concurrently")
def disjoint_sets_run_concurrently(rank, size):
    # HIGH's ranks hold their allreduce back for 3 s: LOW's must not wait for it.
    ps = SETS["LOW"] if rank < 2 else SETS["HIGH"]
    if rank >= 2:
        time.sleep(3.0)
    start = time.monotonic()
    got = tfdist.allreduce(tf.constant(inputs(rank, salt=1)), op=tfdist.Sum,
                           name="concurrent", process_set=ps).numpy()
    took = time.monotonic() - start
    np.testing.assert_allclose(got, sum(inputs(r, salt=1) for r in ps.ranks), rtol=1e-6)
    if rank < 2:
        assert took < 2.0, f"LOW's allreduce took {took:.2f} s: it waited for HIGH"


@check("overlapping_sets_rank_dependent_order")
def overlapping_sets_rank_dependent_order(rank, size):
    first, last = SETS["FIRST"], SETS["LAST"]

    @tf.function
    def step(x):
        # Independent ops, built in a rank-dependent order: each rank's
        # executor may submit them in any order; none may deadlock.
        out = {}
        order = [("first", first), ("global", None), ("last", last)]
        if rank % 2:
            order.reverse()
        for key, ps in order:
            if ps is None or ps.included():
                out[key] = tfdist.allreduce(x * (1 + len(key)), op=tfdist.Sum,
                                            name=f"overlap.{key}", process_set=ps)
        return out

    for round_ in range(3):
        out = step(tf.constant(inputs(rank, salt=round_)))
        for key, members in (("first", first.ranks), ("global", list(range(size))),
                             ("last", last.ranks)):
            if rank in members:
                expected = sum(inputs(r, salt=round_) for r in members) * (1 + len(key))
                np.testing.assert_allclose(out[key].numpy(), expected, rtol=1e-5)
    # Eagerly, from threads started in a rank-dependent order.
    results = {}

    def run(key, ps):
        results[key] = tfdist.allreduce(tf.constant(inputs(rank)), op=tfdist.Sum,
                                        name=f"thread.{key}", process_set=ps).numpy()

    mine = [(k, SETS[k]) for k in ("FIRST", "LAST") if SETS[k].included()]
    if rank % 2:
        mine.reverse()
    threads = [threading.Thread(target=run, args=item) for item in mine]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(60)
    for key, ps in mine:
        np.testing.assert_allclose(results[key], sum(inputs(r) for r in ps.ranks), rtol=1e-6)


@check("unnamed_eager_calls_counted_per_set")
def unnamed_eager_calls_counted_per_set(rank, size):
    # Unnamed eager collectives are numbered per set: LOW's ranks make extra
    # unnamed calls that the global set's numbering must not see.
    if rank < 2:
        for _ in range(3):
            tfdist.allreduce(tf.ones([2]), op=tfdist.Sum, process_set=SETS["LOW"])
            tfdist.allgather(tf.ones([1]), process_set=SETS["LOW"])
    got = tfdist.allreduce(tf.constant([float(rank)]), op=tfdist.Sum).numpy()
    assert got[0] == sum(range(size)), got


@check("single_rank_set")
def single_rank_set(rank, size):
    one = SETS["ONE"]
    if not one.included():
        return
    x = tf.constant(inputs(rank))
    np.testing.assert_array_equal(tfdist.allreduce(x, process_set=one).numpy(), inputs(rank))
    np.testing.assert_array_equal(tfdist.allreduce(x, op=tfdist.Sum, process_set=one).numpy(),
                                  inputs(rank))
    np.testing.assert_array_equal(tfdist.allgather(x, process_set=one).numpy(), inputs(rank))
    np.testing.assert_array_equal(
        tfdist.broadcast(x, root_rank=rank, process_set=one).numpy(), inputs(rank))
    assert one.rank() == 0 and one.size() == 1


@check("gradient_tape_on_a_set")
def gradient_tape_on_a_set(rank, size):
    ps = SETS["LOW"] if rank < 2 else SETS["HIGH"]
    w = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * w * float(rank + 1))
    tape = tfdist.DistributedGradientTape(tape, process_set=ps)
    grad = tape.gradient(loss, [w])[0].numpy()
    expected = np.mean([2 * np.array([1.0, 2.0]) * (r + 1) for r in ps.ranks], axis=0)
    np.testing.assert_allclose(grad, expected, rtol=1e-6)
    # The gradient of an allreduce on a set runs on the same set.
    x = tf.Variable(inputs(rank)[:2])
    with tf.GradientTape() as tape:
        y = tfdist.allreduce(x, op=tfdist.Sum, name="grad.src", process_set=ps)
        loss = tf.reduce_sum(y * float(rank + 1))
    g = tape.gradient(loss, x).numpy()
    np.testing.assert_allclose(g, np.full(2, float(sum(r + 1 for r in ps.ranks))))
    variable = tf.Variable(inputs(rank))
    tfdist.broadcast_variables([variable], root_rank=ps.ranks[0], process_set=ps)
    np.testing.assert_array_equal(variable.numpy(), inputs(ps.ranks[0]))


@check("mismatch_within_a_set")
def mismatch_within_a_set(rank, size):
    low, high = SETS["LOW"], SETS["HIGH"]
    if rank < 2:
        shape = (3,) if rank == 0 else (4,)
        expect_error(tf.errors.FailedPreconditionError,
                     lambda: tfdist.allreduce(tf.ones(shape), name="mismatch", process_set=low),
                     "'mismatch'", "disagree on the shape", "rank 0 has [3], rank 1 has [4]")
    else:  # the other set, meanwhile, works
        got = tfdist.allreduce(tf.ones([3]), op=tfdist.Sum, name="mismatch", process_set=high)
        np.testing.assert_array_equal(got.numpy(), np.full(3, float(size - 2)))


@check("non_member_gets_a_clear_error")
def non_member_gets_a_clear_error(rank, size):
    low = SETS["LOW"]
    if rank >= 2:
        expect_error(tf.errors.FailedPreconditionError,
                     lambda: tfdist.allreduce(tf.ones([2]), process_set=low),
                     f"rank {rank} is not in process set {low.process_set_id} (ranks [0, 1])")

        @tf.function
        def graph():
            return tfdist.allgather(tf.ones([1]), process_set=low)
        expect_error(tf.errors.FailedPreconditionError, graph,
                     f"rank {rank} is not in process set {low.process_set_id}")


@check("bad_input_errors")
def bad_input_errors(rank, size):
    expect_error(ValueError, lambda: tfdist.add_process_set([0, size]),
                 f"[{size}]", "not ranks of this job", f"rank 0: ")
    expect_error(ValueError, lambda: tfdist.add_process_set([1, 0]), "sorted", "[0, 1]")
    expect_error(ValueError, lambda: tfdist.add_process_set([0, 1, 1]), "distinct", "[1]")
    expect_error(ValueError, lambda: tfdist.add_process_set([]), "at least one rank")
    expect_error(TypeError, lambda: tfdist.ProcessSet([0, 1.5]), "integers")
    # Only rank 1's input is bad: every rank fails, naming rank 1, without hanging.
    mine = [1, 0] if rank == 1 else [0, 1]
    expect_error(ValueError, lambda: tfdist.add_process_set(mine), "rank 1:", "sorted")
    # Ranks that ask for different sets: every rank fails, naming who asked for what.
    mine = [0, 1] if rank == 0 else [0, 2]
    expect_error(ValueError, lambda: tfdist.add_process_set(mine),
                 "rank 0 asked for [0, 1]", "rank 1 asked for [0, 2]", "same process set")
    # The failed calls registered nothing: a good call still agrees everywhere.
    ps = tfdist.add_process_set([0, size - 1])
    assert ps.process_set_id not in (SETS["ONE"].process_set_id,)
    low = SETS["LOW"]
    if low.included():
        expect_error(ValueError,
                     lambda: tfdist.broadcast(tf.ones([1]), root_rank=size - 1, process_set=low),
                     f"root_rank={size - 1} is not a rank of", "[0, 1]")
    expect_error(ValueError, lambda: tfdist.allreduce(tf.ones([1]),
                                                      process_set=tfdist.ProcessSet([0])),
                 "not registered", "add_process_set")
    expect_error(TypeError, lambda: tfdist.allreduce(tf.ones([1]), process_set=[0, 1]),
                 "must be a tfdist.ProcessSet")
    expect_error(ValueError, lambda: tfdist.allreduce(
        tf.ones([4]), compression=tfdist.Compression.topk(0.5), process_set=low),
        "global process set only")
    expect_error(ValueError, lambda: tfdist.remove_process_set(tfdist.global_process_set),
                 "cannot be removed")
    assert tfdist.remove_process_set(ps) is True
    if ps.included():
        expect_error(tf.errors.FailedPreconditionError,
                     lambda: tfdist.allreduce(tf.ones([1]), process_set=ps),
                     f"process set {ps.process_set_id} is not registered", "removed")
    # Removing it again: every rank fails alike.
    expect_error(ValueError, lambda: tfdist.remove_process_set(ps), "is not registered")


@check("add_and_remove_while_collectives_run")
def add_and_remove_while_collectives_run(rank, size):
    # A thread keeps the global set busy while sets come and go.
    results = []

    def busy():
        for i in range(20):
            results.append(tfdist.allreduce(tf.constant([float(rank + i)]), op=tfdist.Sum,
                                            name=f"busy.{i}").numpy()[0])

    thread = threading.Thread(target=busy)
    thread.start()
    for round_ in range(3):
        ps = tfdist.add_process_set([r for r in range(size) if (r + round_) % 2 == 0])
        if ps.included():
            got = tfdist.allreduce(tf.constant([float(rank)]), op=tfdist.Sum,
                                   name="churn", process_set=ps).numpy()[0]
            assert got == sum(ps.ranks), (got, ps.ranks)
        tfdist.remove_process_set(ps)
    thread.join(120)
    assert not thread.is_alive()
    assert results == [sum(range(size)) + size * i for i in range(20)], results
    # A collective still waiting when its set is removed fails (rank 0 alone
    # submits it; its peer never does).
    ps = tfdist.add_process_set([0, 1])
    pending = {}
    if rank == 0:
        def waiting():
            try:
                tfdist.allreduce(tf.ones([1]), name="orphan", process_set=ps)
            except tf.errors.OpError as error:
                pending["error"] = error.message
        waiter = threading.Thread(target=waiting)
        waiter.start()
        time.sleep(0.5)
    tfdist.remove_process_set(ps)
    if rank == 0:
        waiter.join(60)
        assert "error" in pending, "the orphaned collective did not fail"
        assert "remove_process_set" in pending["error"] or "shut down" in pending["error"], \
            pending["error"]


@check("ids_not_reused_after_reinit")
def ids_not_reused_after_reinit(rank, size):
    old = SETS["LOW"]
    old_id = old.process_set_id
    tfdist.shutdown()
    tfdist.init(process_sets=[tfdist.ProcessSet([0, 1])])
    if rank < 2:
        expect_error(tf.errors.FailedPreconditionError,
                     lambda: tfdist.allreduce(tf.ones([1]), process_set=old),
                     f"process set {old_id} is not registered", "re-initialized")
    again = tfdist.add_process_set(old)  # re-adding the same object: a new id
    assert again is old and old.process_set_id > old_id, (old_id, old.process_set_id)
    if old.included():
        got = tfdist.allreduce(tf.constant([float(rank)]), op=tfdist.Sum, process_set=old)
        assert got.numpy()[0] == 1.0


@check("idle_sets_cost_little_cpu")
def idle_sets_cost_little_cpu(rank, size):
    # Eight idle sets' background threads (with the global one) on this rank.
    sets = [tfdist.add_process_set(list(range(size))) for _ in range(8)]
    start_cpu, start = time.process_time(), time.monotonic()
    time.sleep(3.0)
    used = (time.process_time() - start_cpu) / (time.monotonic() - start)
    for ps in sets:
        tfdist.remove_process_set(ps)
    assert used < 0.25, f"idle process sets used {used:.0%} of a core"


# ---------------------------------------------------------------- training

TRAIN = Checks()


def _train(process_set, set_rank, data_seed):
    """Trains a small model on this rank's shard of set ``data_seed``'s data; its weights."""
    import keras
    keras.utils.set_random_seed(1234)
    rng = np.random.default_rng(data_seed)
    x = rng.normal(size=(64, 6)).astype(np.float32)
    y = (x @ rng.normal(size=(6, 1)) + 0.1).astype(np.float32)
    shard = slice(set_rank * 32, set_rank * 32 + 32)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"),
                              keras.layers.Dense(1)])
    # A different start on each rank: the broadcast must make them equal.
    from mpi4py import MPI
    model.set_weights([w + 0.01 * MPI.COMM_WORLD.rank for w in model.get_weights()])
    optimizer = tfdist.keras.DistributedOptimizer(keras.optimizers.SGD(0.05, momentum=0.9),
                                                  process_set=process_set)
    model.compile(optimizer=optimizer, loss="mse")
    root = 0 if process_set is None else process_set.ranks[0]
    callbacks = [tfdist.keras.callbacks.BroadcastGlobalVariablesCallback(root, process_set),
                 tfdist.keras.callbacks.MetricAverageCallback(process_set)]
    history = model.fit(x[shard], y[shard], batch_size=8, epochs=2, shuffle=False,
                        callbacks=callbacks, verbose=0)
    return model.get_weights(), history.history["loss"]


@TRAIN.check("two_replicas_match_separate_2_rank_runs")
def two_replicas_match_separate_runs(rank, size):
    from mpi4py import MPI
    import tfdist.keras  # noqa: F401
    assert size == 4
    tfdist.init()
    low = tfdist.add_process_set([0, 1])
    high = tfdist.add_process_set([2, 3])
    mine = low if rank < 2 else high
    weights, losses = _train(mine, mine.rank(), data_seed=rank // 2)
    tfdist.shutdown()
    # The reference: a separate 2-rank tfdist world of the same two processes.
    pair = MPI.COMM_WORLD.Split(color=rank // 2, key=rank)
    tfdist.init(comm=pair)
    assert tfdist.size() == 2
    reference, reference_losses = _train(None, tfdist.rank(), data_seed=rank // 2)
    tfdist.shutdown()
    pair.Free()
    # Collective first, so that a failing assertion below cannot leave a rank in it.
    every = MPI.COMM_WORLD.allgather(weights[0].tobytes())
    assert losses == reference_losses, (losses, reference_losses)
    for got, expected in zip(weights, reference):
        np.testing.assert_array_equal(got, expected)
    # Each set's replicas agree, and the two sets trained different data.
    assert every[0] == every[1] and every[2] == every[3] and every[0] != every[2]


def body():
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    if "--train" in sys.argv:
        TRAIN.run(rank, size)
    else:
        CHECKS.run(rank, size)
        tfdist.shutdown()
    print(f"DONE rank {rank}", flush=True)


if __name__ == "__main__":
    worker_main(body)
