"""Checks tfdist.elastic's State, TensorFlowState and KerasState, and hvd.elastic's fit
callbacks, on every rank against numpy.

No process dies here (helper "elastic" tests that): a reset is
simulated the way ``tfdist.elastic.run`` performs it, ``state.restore();
state.sync(); state.on_reset()``, and a rank that joins by a fresh,
uncommitted state whose compressor state is empty; one check rebuilds the
runtime over fewer ranks (shutdown, init on a sub-communicator). Each check is registered
by name in CHECKS (tests/mpi_harness.py); tests/mpi/test_elastic_state.py
makes one test of each. Importing this module runs nothing.
"""
import sys

import numpy as np
import tensorflow as tf

import keras
import tfdist
import tfdist.keras as hvd
from mpi_harness import Checks, worker_main
from tfdist import runtime
from tfdist.elastic import ObjectState, State, TensorFlowState
from tfdist.elastic import data as elastic_data
from tfdist.local_variables import mark_local

CHECKS = Checks()
check = CHECKS.check


def values_of(rank, salt=0):
    """Rank-dependent values of several dtypes (what rank ``rank`` starts with)."""
    rng = np.random.default_rng([rank, salt])
    return [rng.standard_normal((5, 7)).astype(np.float32),
            rng.standard_normal(11),                                   # float64
            rng.integers(-2**40, 2**40, size=(3, 2)),                  # int64
            rng.standard_normal(6).astype(np.float16),
            (rng.standard_normal(4) > 0),                              # bool
            np.array(rng.standard_normal(), np.float32)]               # a scalar


def make_variables(rank, salt=0):
    return [tf.Variable(v) for v in values_of(rank, salt)]


def assert_bits_equal(actual, expected, what):
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
        what, actual.dtype, actual.shape, expected.dtype, expected.shape)
    assert actual.tobytes() == expected.tobytes(), (what, actual, expected)


def assert_same_on_every_rank(array, what):
    gathered = tfdist.allgather_object(np.asarray(array))
    for rank, other in enumerate(gathered):
        assert_bits_equal(other, gathered[0], f"{what}: rank {rank} vs rank 0")


@CHECKS.setup
def start(rank, size):
    tfdist.init()
    assert (tfdist.rank(), tfdist.size()) == (rank, size)


@check("commit_restore_round_trip")
def check_commit_restore(rank, size):
    variables = make_variables(rank)
    state = TensorFlowState(variables, step=rank)
    state.restore()  # before any commit: nothing happens
    for variable, value in zip(variables, values_of(rank)):
        assert_bits_equal(variable.numpy(), value, "restore before a commit")
    for salt in (1, 2):  # the second commit reuses the first one's buffers
        for variable, value in zip(variables, values_of(rank, salt)):
            variable.assign(value)
        state.step = salt
        state.commit()
        for variable, value in zip(variables, values_of(rank, salt + 10)):
            variable.assign(value)  # training after the commit
        state.step = -1
        state.restore()
        for variable, value in zip(variables, values_of(rank, salt)):
            assert_bits_equal(variable.numpy(), value, f"restore of commit {salt}")
        assert state.step == salt
    # Keras variables too, and a commit is a copy, not a view of the values.
    kvar = keras.Variable(np.arange(12, dtype=np.float32).reshape(3, 4) + rank)
    kstate = TensorFlowState([kvar])
    kstate.commit()
    kvar.assign_add(np.ones((3, 4), np.float32))
    kstate.restore()
    assert_bits_equal(kvar.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) + rank,
                      "keras variable")


@check("sync_gives_rank0_values")
def check_sync(rank, size):
    variables = make_variables(rank, salt=3)
    local = tf.Variable(np.full(3, rank, np.int32))
    mark_local(local)
    state = TensorFlowState(variables + [local], step=100 + rank, name=f"rank{rank}")
    state.sync()
    for variable, value in zip(variables, values_of(0, salt=3)):
        assert_bits_equal(variable.numpy(), value, "synced value")
        assert_same_on_every_rank(variable.numpy(), "synced value")
    assert state.step == 100 and state.name == "rank0", (state.step, state.name)
    assert_bits_equal(local.numpy(), np.full(3, rank, np.int32), "local variable kept")
    # A sync counts as a commit: restore comes back to rank 0's values.
    for variable in variables:
        variable.assign(tf.zeros_like(variable))
    state.step = -5
    state.restore()
    for variable, value in zip(variables, values_of(0, salt=3)):
        assert_bits_equal(variable.numpy(), value, "restore after sync")
    assert state.step == 100
    # Ranks with different variables all raise, naming the difference, and none hangs.
    odd = TensorFlowState([tf.Variable(np.zeros(4 + (rank == size - 1), np.float32))])
    try:
        odd.sync()
    except ValueError as error:
        assert "the ranks' variables differ" in str(error), error
    else:
        raise AssertionError("sync of differing variables did not raise")


@check("attrs_survive")
def check_attrs(rank, size):
    state = ObjectState(epoch=np.int64(3), batch=7, lr=0.125, tag="a", nested={"k": [1, 2.5]},
                        pair=(1, 2), nothing=None, flag=True)
    state.commit()
    expected = {"epoch": 3, "batch": 7, "lr": 0.125, "tag": "a", "nested": {"k": [1, 2.5]},
                "pair": [1, 2], "nothing": None, "flag": True}
    state.epoch, state.batch, state.lr, state.tag = 9, 8, 0.5, "b"
    state.nested["k"].append(3)
    state.restore()
    for name, value in expected.items():
        got = getattr(state, name)
        assert got == value and type(got) is type(value), (name, got, value)
    # Attributes set later are not part of the state (as in Horovod).
    state.extra = 1
    state.restore()
    assert state.extra == 1
    state.bad = object()
    bad = State(value=object())
    try:
        bad.commit()
    except TypeError as error:
        assert "JSON values" in str(error) and "value" in str(error), error
    else:
        raise AssertionError("a non-JSON attribute was committed")
    try:
        State(commit=1)
    except ValueError as error:
        assert "'commit'" in str(error), error
    else:
        raise AssertionError("an attribute hiding a method was accepted")
    # Differing attributes: sync gives rank 0's, including types JSON keeps.
    state = ObjectState(epoch=rank, history=[rank] * (rank + 1))
    state.sync()
    assert state.epoch == 0 and state.history == [0], (state.epoch, state.history)


@check("reset_callbacks_in_order")
def check_reset_callbacks(rank, size):
    calls = []
    state = State(step=0)
    state.register_reset_callbacks([lambda: calls.append("a"), lambda: calls.append("b")])
    state.register_reset_callbacks([lambda: calls.append("c")])
    state.on_reset()
    assert calls == ["a", "b", "c"], calls
    state.on_reset()
    assert calls == ["a", "b", "c"] * 2, calls
    try:
        state.register_reset_callbacks(["not callable"])
    except TypeError:
        pass
    else:
        raise AssertionError("a non-callable reset callback was accepted")


def powersgd_step(compressor, rank, step):
    gradient = np.random.default_rng([rank, step, 7]).standard_normal((16, 8)).astype(np.float32)
    return compressor.allreduce([tf.constant(gradient)], ["elastic.g"], op=tfdist.Sum)[0]


@check("rank_state_in_commit_restore_and_sync")
def check_rank_state(rank, size):
    runtime.restore_rank_state({})
    compressor = tfdist.Compression.powersgd(1, start_step=1)
    variable = tf.Variable(np.zeros(3, np.float32))
    state = TensorFlowState([variable], step=0)
    for step in range(2):
        powersgd_step(compressor, rank, step)
    state.commit()
    committed = runtime.rank_state()
    assert any(k.startswith("powersgd.residual/") for k in committed), sorted(committed)
    assert any(k.startswith("powersgd.q/") for k in committed), sorted(committed)
    assert any(k.startswith("step/") for k in committed), sorted(committed)
    powersgd_step(compressor, rank, 2)  # changes residual, Q and the step count
    changed = runtime.rank_state()
    assert any(not np.array_equal(changed[k], committed[k]) for k in committed)
    state.restore()
    restored = runtime.rank_state()
    assert sorted(restored) == sorted(committed), (sorted(restored), sorted(committed))
    for key in committed:
        assert_bits_equal(restored[key], committed[key], f"restored {key}")
    # The last rank "joins": a new process with an empty compressor state and a
    # state that never committed; the others restore and all sync.
    joiner = rank == size - 1
    if joiner:
        runtime.restore_rank_state({})
        state = TensorFlowState([variable], step=0)
    state.restore()
    state.sync()
    after = runtime.rank_state()
    rank0 = tfdist.broadcast_object(after if rank == 0 else None, root_rank=0)
    shared = sorted(k for k in committed if k.startswith(("step/", "powersgd.q/")))
    own = sorted(k for k in committed if k not in shared)
    for key in shared:
        assert_bits_equal(after[key], rank0[key], f"{key} from rank 0")
    for key in own:
        if joiner:
            assert key not in after, f"a joining rank has {key}"
        else:
            assert_bits_equal(after[key], committed[key], f"own {key} kept")
    # The next compressed step agrees on every rank (same branch, same warm start).
    result = powersgd_step(compressor, rank, 3)
    assert_same_on_every_rank(result.numpy(), "powersgd after a join")
    runtime.restore_rank_state({})


def small_model(build):
    model = keras.Sequential([keras.layers.Dense(5, activation="relu"), keras.layers.Dense(2)])
    if build:
        model(np.zeros((1, 4), np.float32))
    # Named: the gradients' collectives are named after the optimizer, and the
    # joining rank's second optimizer must match rank 0's first (Keras would
    # number it "adam_1"; a real joining process has only one).
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01, name="adam")),
                  loss="mse")
    return model


@check("keras_state_model_and_optimizer")
def check_keras_state(rank, size):
    keras.utils.set_random_seed(100 + rank)  # every rank its own initial weights
    model = small_model(build=True)
    state = hvd.elastic.KerasState(model, epoch=0)
    assert state.optimizer is model.optimizer
    names = [v.path for v in state.variables()]
    assert len(state.variables()) == len(model.variables) + len(model.optimizer.variables)
    assert any("adam" in n for n in names), names  # the optimizer was built: its slots
    x = np.random.default_rng([rank, 1]).standard_normal((8, 4)).astype(np.float32)
    y = np.random.default_rng([rank, 2]).standard_normal((8, 2)).astype(np.float32)
    state.sync()
    synced = [v.numpy() for v in state.variables()]
    for value in synced:
        assert_same_on_every_rank(value, "KerasState.sync")
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)  # 2 steps: slots and iterations move
    state.epoch = 1
    state.commit()
    committed = [v.numpy().copy() for v in state.variables()]
    assert int(model.optimizer.iterations.numpy()) == 2
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert not all(np.array_equal(v.numpy(), c) for v, c in zip(state.variables(), committed))
    state.epoch = 2
    state.restore()
    for variable, value in zip(state.variables(), committed):
        assert_bits_equal(variable.numpy(), value, f"restored {variable.path}")
    assert state.epoch == 1
    # A rank that joins: a fresh process whose model and optimizer are not built yet.
    joiner = rank == size - 1 and size > 1
    keras.utils.set_random_seed(7)
    fresh = small_model(build=False) if joiner else model
    joined = hvd.elastic.KerasState(fresh, epoch=0) if joiner else state
    if joiner:
        assert not fresh.built and not fresh.optimizer.built
    joined.restore()
    joined.sync()
    assert fresh.built and fresh.optimizer.built
    assert joined.epoch == 1
    for variable, value in zip(joined.variables(), committed):
        assert_same_on_every_rank(variable.numpy(), f"{variable.path} after a join")
    # Training goes on in step on every rank.
    fresh.fit(x, y, batch_size=4, epochs=1, verbose=0)
    for variable in joined.variables():
        assert_same_on_every_rank(variable.numpy(), f"{variable.path} after a step")


# ---------------------------------------------------------------- fit callbacks

SAMPLES, BATCH, EPOCHS, LR, SEED = 24, 2, 3, 0.05, 11


def fit_data(size):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((SAMPLES, 4)).astype(np.float32)
    y = rng.standard_normal((SAMPLES, 3)).astype(np.float32)
    return x, y


def dataset_from(state, x, y, rank, size):
    """Rank ``rank``'s batches from where ``state`` stands to the last epoch's end."""
    position = state.batch * size * BATCH
    indices = np.concatenate([
        elastic_data.rank_indices(SAMPLES, epoch, position if epoch == state.epoch else 0,
                                  rank, size, seed=SEED)
        for epoch in range(state.epoch, EPOCHS)])
    return (tf.data.Dataset.from_tensor_slices(indices).batch(BATCH)
            .map(lambda i: (tf.gather(x, i), tf.gather(y, i))).repeat())


def numpy_reference(w, b, x, y, size):
    """Uninterrupted SGD on the mean squared error, each step averaging the ranks' gradients."""
    steps = SAMPLES // (size * BATCH)
    return numpy_segments(w, b, x, y, [(size, epoch, 0, steps) for epoch in range(EPOCHS)])


class FailAt(keras.callbacks.Callback):
    """Raises at the end of the n-th trained batch: trained, but not yet committed."""

    def __init__(self, at):
        super().__init__()
        self.at, self.count = at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.count += 1
        if self.count == self.at:
            raise RuntimeError("simulated failure")


class Trained(keras.callbacks.Callback):
    """Records (state.epoch, batch) of each batch Keras announces."""

    def __init__(self, state):
        super().__init__()
        self.state, self.batches = state, []

    def on_train_batch_begin(self, batch, logs=None):
        self.batches.append((self.state.epoch, batch))


@check("fit_callbacks_resume_at_batch_and_epoch")
def check_fit_resume(rank, size):
    steps = SAMPLES // (size * BATCH)
    x, y = fit_data(size)
    w0 = np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32)
    b0 = np.random.default_rng(10).standard_normal(3).astype(np.float32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR)), loss="mse")
    model.set_weights([w0 + rank, b0])  # differing weights: sync gives rank 0's
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    resets = []
    state.register_reset_callbacks([lambda: resets.append((state.epoch, state.batch))])
    trained = Trained(state)
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=2)]
    # Fails at the end of batch 3 of epoch 1, trained but not yet counted: the
    # last commit was after batch 1 of epoch 1 (every 2 batches; the epoch has
    # an even number of them).
    assert steps % 2 == 0 and steps >= 4, steps
    fail_at = steps + 4
    committed_batches = 2
    state.sync()
    try:
        model.fit(dataset_from(state, x, y, rank, size), steps_per_epoch=steps,
                  epochs=EPOCHS - state.epoch, verbose=0,
                  callbacks=[trained, FailAt(fail_at)] + callbacks)
    except RuntimeError as error:
        assert "simulated failure" in str(error)
    else:
        raise AssertionError("the failure was not raised")
    assert (state.epoch, state.batch) == (1, 3), (state.epoch, state.batch)
    state.restore()
    state.sync()
    state.on_reset()
    assert resets == [(1, committed_batches)], resets
    assert int(model.optimizer.iterations.numpy()) == steps + committed_batches
    first = len(trained.batches)
    model.fit(dataset_from(state, x, y, rank, size), steps_per_epoch=steps,
              epochs=EPOCHS - state.epoch, verbose=0, callbacks=[trained] + callbacks)
    assert (state.epoch, state.batch) == (EPOCHS, 0), (state.epoch, state.batch)
    assert int(model.optimizer.iterations.numpy()) == EPOCHS * steps
    # The re-entered fit announced the resumed epoch from batch 0 (the first
    # committed_batches skipped) and then the later epochs whole.
    expected = ([(1, b) for b in range(steps)]
                + [(epoch, b) for epoch in range(2, EPOCHS) for b in range(steps)])
    assert trained.batches[first:] == expected, trained.batches[first:]
    w, b = numpy_reference(w0, b0, x, y, size)
    np.testing.assert_allclose(model.get_weights()[0], w, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.get_weights()[1], b, rtol=1e-5, atol=1e-5)
    assert_same_on_every_rank(model.get_weights()[0], "weights after the resumed fit")
    # The skipping is gone: a later fit trains every step.
    assert not hasattr(model.train_function, "_tfdist_skipping")


@check("restore_into_a_rebuilt_smaller_runtime")
def check_rebuilt_runtime(rank, size):
    """What run() does after a rank is lost, without the loss: the runtime is rebuilt over
    fewer ranks (shutdown, init on a sub-communicator), every survivor restores its commit
    into the new runtime (whose compressor state starts empty) and they sync."""
    from mpi4py import MPI
    runtime.restore_rank_state({})
    compressor = tfdist.Compression.powersgd(1)
    variable = tf.Variable(values_of(rank, salt=20)[0])
    state = TensorFlowState([variable], step=rank)
    powersgd_step(compressor, rank, 0)
    state.commit()
    committed_state = runtime.rank_state()
    assert committed_state
    variable.assign(tf.zeros_like(variable))
    state.step = -1
    tfdist.shutdown()
    survivor = rank < size - 1
    comm = MPI.COMM_WORLD.Split(0 if survivor else MPI.UNDEFINED, rank)
    try:
        if survivor:
            tfdist.init(comm)
            assert tfdist.size() == size - 1
            assert not runtime.rank_state(), "a rebuilt runtime starts without compressor state"
            state.restore()
            assert_bits_equal(variable.numpy(), values_of(rank, salt=20)[0], "restored")
            restored = runtime.rank_state()
            for key, value in committed_state.items():
                assert_bits_equal(restored[key], value, f"restored {key}")
            state.sync()
            assert_bits_equal(variable.numpy(), values_of(0, salt=20)[0], "synced")
            assert state.step == 0
            result = powersgd_step(compressor, rank, 1)
            assert_same_on_every_rank(result.numpy(), "powersgd on the new membership")
            tfdist.shutdown()
    finally:
        if comm != MPI.COMM_NULL:
            comm.Free()
        MPI.COMM_WORLD.Barrier()
        tfdist.init()
    runtime.restore_rank_state({})


class TrackPosition(keras.callbacks.Callback):
    """state.position, the samples of the epoch trained by all ranks (as in
    examples/keras_elastic.py)."""

    def __init__(self, state):
        super().__init__()
        self.state, self.start = state, (0, 0)

    def on_train_begin(self, logs=None):
        self.start = (self.state.position, self.state.batch)

    def on_train_batch_end(self, batch, logs=None):
        position, batches = self.start
        self.state.position = position + (self.state.batch - batches) * tfdist.size() * BATCH

    def on_epoch_end(self, epoch, logs=None):
        self.state.position, self.start = 0, (0, 0)


def position_dataset(state, x, y):
    """This rank's full batches from the state's epoch and position to the end of training."""
    parts = []
    for epoch in range(state.epoch, EPOCHS):
        position = state.position if epoch == state.epoch else 0
        steps = elastic_data.steps_remaining(SAMPLES, position, tfdist.size(), BATCH,
                                             drop_remainder=True)
        parts.append(elastic_data.rank_indices(SAMPLES, epoch, position, tfdist.rank(),
                                               tfdist.size(), seed=SEED)[:steps * BATCH])
    return (tf.data.Dataset.from_tensor_slices(np.concatenate(parts)).batch(BATCH)
            .map(lambda i: (tf.gather(x, i), tf.gather(y, i))).repeat())


def numpy_segments(w, b, x, y, segments):
    """SGD on the mean squared error through ``segments`` of (ranks, epoch, position,
    steps), each step averaging the ranks' gradients."""
    w, b = w.astype(np.float64), b.astype(np.float64)
    for ranks, epoch, position, steps in segments:
        per_rank = [elastic_data.rank_indices(SAMPLES, epoch, position, r, ranks, seed=SEED)
                    for r in range(ranks)]
        for step in range(steps):
            gw, gb = np.zeros_like(w), np.zeros_like(b)
            for indices in per_rank:
                i = indices[step * BATCH:(step + 1) * BATCH]
                error = x[i] @ w + b - y[i]
                gw += 2.0 / error.size * x[i].T @ error / ranks
                gb += 2.0 / error.size * error.sum(axis=0) / ranks
            w, b = w - LR * gw, b - LR * gb
    return w, b


@check("fit_resumes_mid_epoch_on_fewer_ranks")
def check_fit_on_fewer_ranks(rank, size):
    """A failure in epoch 0 at ``size`` ranks; fit carries on at ``size - 1`` ranks from the
    committed sample position, the batch recounted at the new size (the example's reset
    callback), every sample of each epoch trained once: numpy SGD through the same
    segments gives the weights."""
    from mpi4py import MPI
    x, y = fit_data(size)
    w0 = np.random.default_rng(12).standard_normal((4, 3)).astype(np.float32)
    b0 = np.random.default_rng(13).standard_normal(3).astype(np.float32)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(LR, name="sgd_ranks")),
                  loss="mse")
    model.set_weights([w0 - rank, b0])
    state = hvd.elastic.KerasState(model, epoch=0, batch=0, position=0)

    def steps_per_epoch():
        return SAMPLES // (tfdist.size() * BATCH)

    def recount_batch():
        left = elastic_data.steps_remaining(SAMPLES, state.position, tfdist.size(), BATCH,
                                            drop_remainder=True)
        state.batch = max(0, steps_per_epoch() - left)

    state.register_reset_callbacks([recount_batch])
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state), TrackPosition(state),
                 hvd.elastic.CommitStateCallback(state)]
    state.sync()
    try:
        model.fit(position_dataset(state, x, y), steps_per_epoch=steps_per_epoch(),
                  epochs=EPOCHS - state.epoch, verbose=0, shuffle=False,
                  callbacks=[FailAt(3)] + callbacks)
    except RuntimeError as error:
        assert "simulated failure" in str(error)
    else:
        raise AssertionError("the failure was not raised")
    tfdist.shutdown()
    survivor = rank < size - 1
    comm = MPI.COMM_WORLD.Split(0 if survivor else MPI.UNDEFINED, rank)
    try:
        if survivor:
            tfdist.init(comm)
            state.restore()
            state.sync()
            state.on_reset()
            committed = 2 * size * BATCH
            assert (state.epoch, state.position) == (0, committed), (state.epoch,
                                                                     state.position)
            model.fit(position_dataset(state, x, y), steps_per_epoch=steps_per_epoch(),
                      epochs=EPOCHS - state.epoch, verbose=0, shuffle=False,
                      callbacks=callbacks)
            assert (state.epoch, state.batch, state.position) == (EPOCHS, 0, 0)
            rest = elastic_data.steps_remaining(SAMPLES, committed, size - 1, BATCH,
                                                drop_remainder=True)
            full = SAMPLES // ((size - 1) * BATCH)
            segments = [(size, 0, 0, 2), (size - 1, 0, committed, rest)] + [
                (size - 1, epoch, 0, full) for epoch in range(1, EPOCHS)]
            assert int(model.optimizer.iterations.numpy()) == sum(s[3] for s in segments)
            w, b = numpy_segments(w0, b0, x, y, segments)
            np.testing.assert_allclose(model.get_weights()[0], w, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(model.get_weights()[1], b, rtol=1e-5, atol=1e-5)
            assert_same_on_every_rank(model.get_weights()[0], "weights on the new membership")
            tfdist.shutdown()
    finally:
        if comm != MPI.COMM_NULL:
            comm.Free()
        MPI.COMM_WORLD.Barrier()
        tfdist.init()


def body():
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    CHECKS.run(rank, size)
    tfdist.shutdown()
    print(f"DONE rank {rank}", flush=True)


if __name__ == "__main__":
    worker_main(body)
    sys.exit(0)
