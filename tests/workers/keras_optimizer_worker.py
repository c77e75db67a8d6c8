"""DistributedOptimizer / DistributedGradientTape checks, run on N ranks by test_keras_training.py.

Each check trains for a few steps with different data on every rank and
compares the weights, on every rank, with keras_common's numpy reference.
``argv[1]`` is a directory for saved models. Each check is registered by name
in CHECKS and is a test of its own in tests/e2e/test_keras_training.py.
"""
import sys

import keras
import numpy as np
import tensorflow as tf

import tfdist.keras as hvd
from tfdist import ops as tfdist_ops
from keras_common import (BATCH, assert_same_on_all_ranks, assert_weights, differs_somewhere,
                          initial_weights, make_model, rank_data, reference_sgd)
from mpi_harness import Checks, worker_main

STEPS, LR, MOMENTUM = 3, 0.1, 0.9


def fit(optimizer, steps=STEPS, callbacks=(), jit_compile=False):
    model = make_model()
    model.compile(optimizer=optimizer, loss="mse", jit_compile=jit_compile)
    x, y = rank_data(hvd.rank(), steps)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0,
              callbacks=list(callbacks))
    return model


def check_fit_matches_reference():
    expected = reference_sgd(hvd.size(), STEPS, LR, MOMENTUM)
    model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM)))
    assert_weights(model.get_weights(), expected, "model.fit")
    assert_same_on_all_ranks(model.get_weights(), "fit")
    assert int(model.optimizer.iterations.numpy()) == STEPS

    # The same run without the wrapper does not average: the test can fail.
    plain = fit(keras.optimizers.SGD(LR, momentum=MOMENTUM))
    assert differs_somewhere(plain.get_weights(), expected), "unwrapped run matched reference"


def train_with_tape(steps):
    """A fresh model trained for ``steps`` of this rank's batches with DistributedGradientTape."""
    x, y = rank_data(hvd.rank(), steps)
    loss_fn = keras.losses.MeanSquaredError()
    model = make_model()
    optimizer = keras.optimizers.SGD(LR, momentum=MOMENTUM)

    @tf.function
    def tape_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for s in range(steps):
        tape_step(x[s * BATCH:(s + 1) * BATCH], y[s * BATCH:(s + 1) * BATCH])
    return model


def check_custom_loops():
    size, rank = hvd.size(), hvd.rank()
    x, y = rank_data(rank, STEPS)
    loss_fn = keras.losses.MeanSquaredError()

    # DistributedGradientTape + plain optimizer, inside tf.function.
    expected = reference_sgd(size, STEPS, LR, MOMENTUM)
    model = train_with_tape(STEPS)
    assert_weights(model.get_weights(), expected, "DistributedGradientTape in tf.function")

    # DistributedOptimizer.apply, eagerly, with global_clipnorm: the clip must
    # act on the averaged gradient (clipping local ones gives other weights).
    clip = 0.05
    expected = reference_sgd(size, STEPS, LR, MOMENTUM, global_clipnorm=clip)
    model = make_model()
    optimizer = hvd.DistributedOptimizer(
        keras.optimizers.SGD(LR, momentum=MOMENTUM, global_clipnorm=clip))
    for s in range(STEPS):
        with tf.GradientTape() as tape:
            loss = loss_fn(y[s * BATCH:(s + 1) * BATCH], model(x[s * BATCH:(s + 1) * BATCH]))
        optimizer.apply(tape.gradient(loss, model.trainable_variables),
                        model.trainable_variables)
    assert_weights(model.get_weights(), expected, "DistributedOptimizer.apply eager + clip")
    assert_same_on_all_ranks(model.get_weights(), "apply")


def check_uneven_data_with_join():
    """Rank r has STEPS - 1 + r batches, then calls join(): the others train on without it.

    Its gradient counts as zero in their average (Horovod's rule), so each
    rank's weights are the reference's after that rank's own number of steps.
    """
    size, rank = hvd.size(), hvd.rank()
    rank_steps = [STEPS - 1 + r for r in range(size)]
    model = train_with_tape(rank_steps[rank])
    assert hvd.join() == size - 1
    expected = reference_sgd(size, rank_steps[rank], LR, MOMENTUM, rank_steps=rank_steps)
    assert_weights(model.get_weights(), expected, "uneven data with join")


AUTOTUNE_STEPS = 80  # the search is final by step 50 (docs/runtime.md, Autotuning)


def numpy_reference_sgd(size, steps):
    """reference_sgd's weights for make_model(), with the gradients in numpy.

    Dense(tanh) then Dense under the mean-squared error, differentiated by hand:
    80 steps of keras_common's reference (a Keras gradient per rank and step)
    would cost more than the training they check.
    """
    w1, b1, w2, b2 = [w.astype("float64") for w in initial_weights()]
    weights = [w1, b1, w2, b2]
    velocity = [np.zeros_like(w) for w in weights]
    data = [rank_data(r, steps) for r in range(size)]
    for step in range(steps):
        rows = slice(step * BATCH, (step + 1) * BATCH)
        total = [np.zeros_like(w) for w in weights]
        for x, y in data:
            x, y = x[rows].astype("float64"), y[rows].astype("float64")
            w1, b1, w2, b2 = weights
            hidden = np.tanh(x @ w1 + b1)
            d_out = 2 * (hidden @ w2 + b2 - y) / y.size
            d_hidden = (d_out @ w2.T) * (1 - hidden ** 2)
            grads = [x.T @ d_hidden, d_hidden.sum(0), hidden.T @ d_out, d_out.sum(0)]
            total = [t + g for t, g in zip(total, grads)]
        for i, g in enumerate(total):
            velocity[i] = MOMENTUM * velocity[i] - LR * g / size
            weights[i] = weights[i] + velocity[i]
    return weights


def start_autotuned_runtime(directory, log="autotune.csv"):
    """A new runtime lifetime with TFDIST_AUTOTUNE's init() arguments."""
    hvd.shutdown()
    hvd.init(autotune=True, autotune_log=f"{directory}/{log}")


def read_autotune_logs(directory, log="autotune.csv"):
    """Every rank's autotuning CSV, checked to be identical; rank 0's rows."""
    hvd.barrier()  # every rank has written its rows
    size = hvd.size()
    logs = [open(f"{directory}/{log}.{r}").read() for r in range(size)]
    for r in range(1, size):
        assert logs[r] == logs[0], f"rank {r}'s autotune log differs:\n{logs[r]}\nrank 0's:\n{logs[0]}"
    rows = [line.split(",") for line in logs[0].splitlines()]
    assert rows[0][:4] == ["generation", "round", "step", "phase"], logs[0]
    return rows


def check_autotune(directory):
    """Training while the autotuner changes fusion, cycle time and algorithms mid-run.

    The weights must still be the numpy reference's (every rank switched at the
    same round, or fusion would differ between ranks), and every rank's CSV must
    list the same trials, at the same rounds, ending with the final choice.
    """
    size = hvd.size()
    model = train_with_tape(AUTOTUNE_STEPS)
    # float32 training against a float64 reference over 80 steps: a wrong
    # average (a rank missing, a sum for a mean) is off by over 1e-2.
    assert_weights(model.get_weights(), numpy_reference_sgd(size, AUTOTUNE_STEPS),
                   "DistributedGradientTape with autotuning", tolerance=1e-4)
    rows = read_autotune_logs(directory)
    phases = [row[3] for row in rows[1:]]
    assert phases[0] == "baseline" and phases[-1] == "final", rows
    assert len(phases) >= 3, rows  # at least one candidate was tried
    assert 0 < int(rows[-1][2]) <= 50, rows  # final by step 50, the search's budget
    # A tape has no iteration every rank shares: its grouping is not tuned.
    assert "gradient_groups" not in phases, rows


def start_runtime_for_gradient_groups(directory):
    start_autotuned_runtime(directory, "autotune_fit.csv")


def check_autotune_gradient_groups(directory):
    """model.fit while autotuning switches DistributedOptimizer's gradient grouping.

    The step is built with num_groups 1 and 2; every rank must switch branch at
    the same iteration (or their collectives would differ and the job stall),
    and the weights must be the numpy reference's.
    """
    from tfdist import gradient_tape  # the choice of candidates, checked directly below

    size = hvd.size()
    model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM)),
                steps=AUTOTUNE_STEPS)
    assert_weights(model.get_weights(), numpy_reference_sgd(size, AUTOTUNE_STEPS),
                   "model.fit while autotuning the gradient groups", tolerance=1e-4)
    rows = read_autotune_logs(directory, "autotune_fit.csv")
    header = rows[0]
    trials = [dict(zip(header, row)) for row in rows[1:]]
    assert trials[0]["phase"] == "baseline" and trials[-1]["phase"] == "final", rows
    # The search's budget (autotuner.h): final by step 50.
    assert 0 < int(trials[-1]["step"]) <= 50, rows
    tried = [t for t in trials if t["phase"] == "gradient_groups"]
    assert len(tried) == 1 and tried[0]["gradient_groups"] == "2", rows
    assert int(tried[0]["steps"]) >= 3 and float(tried[0]["median_step_ms"]) > 0, rows
    # Which branch each iteration ran, as the schedule recorded it: the same
    # on every rank, and num_groups 2 (index 1) for some steps.
    iterations = tf.range(AUTOTUNE_STEPS, dtype=tf.int64)
    ran = [int(tfdist_ops.gradient_groups_index(i, [1, 2])) for i in iterations]
    everyone = hvd.allgather_object(ran)
    assert all(r == everyone[0] for r in everyone), everyone
    assert 1 in ran, ran
    kept = trials[-1]["gradient_groups"]
    assert ran[-1] == (1 if kept == "2" else 0), (ran, rows)

    # Where the grouping is not tuned: a fixed num_groups, a compressor with
    # state, no shared iteration, one gradient (nothing to split).
    iteration = model.optimizer.iterations
    candidates = gradient_tape._tuned_group_candidates
    none = hvd.Compression.none
    assert candidates(None, 4, iteration, none, None) == [1, 2]
    assert candidates(None, 4, iteration, hvd.Compression.bf16, None) == [1, 2]
    assert candidates(1, 4, iteration, none, None) == [1]
    assert candidates(0, 4, iteration, none, None) == [0]
    assert candidates(None, 4, iteration, hvd.Compression.topk(0.5), None) == [1]
    assert candidates(None, 4, None, none, None) == [1]
    assert candidates(None, 1, iteration, none, None) == [1]


def check_options():
    size = hvd.size()
    # backward_passes_per_step=2 over 4 batches: two updates, each with the
    # locally summed gradients of two batches, averaged across ranks.
    for average in (False, True):
        expected = reference_sgd(size, 4, LR, MOMENTUM, passes_per_update=2,
                                 average_passes=average)
        model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM),
                                             backward_passes_per_step=2,
                                             average_aggregated_gradients=average), steps=4)
        assert_weights(model.get_weights(), expected, f"backward_passes_per_step avg={average}")
        assert int(model.optimizer.iterations.numpy()) == 2

    expected = reference_sgd(size, STEPS, LR, MOMENTUM)
    # No GPU here, so the default submits one group; 0 is one allreduce per gradient.
    assert hvd.default_num_groups() == 1
    for kwargs in ({"gradient_predivide_factor": float(size)}, {"num_groups": 2},
                   {"num_groups": 0}, {"compression": hvd.Compression.fp16}):
        model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM),
                                             **kwargs))
        tolerance = 3e-3 if "compression" in kwargs else 2e-5
        assert_weights(model.get_weights(), expected, f"options {kwargs}", tolerance)

    # op=Sum: the gradient is the sum over ranks.
    expected = reference_sgd(size, STEPS, LR, 0.0, mean=lambda g: np.sum(g, axis=0))
    model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR), op=hvd.Sum))
    assert_weights(model.get_weights(), expected, "op=Sum")

    # Other optimizer classes stay instances of their class and train in step.
    for base in (keras.optimizers.Adam(1e-2), keras.optimizers.AdamW(1e-2),
                 keras.optimizers.RMSprop(1e-2)):
        optimizer = hvd.DistributedOptimizer(base)
        assert isinstance(optimizer, type(base)), type(optimizer).__mro__
        assert_same_on_all_ranks(fit(optimizer).get_weights(), type(base).__name__)


def check_loss_scale_optimizer():
    size = hvd.size()
    expected = reference_sgd(size, STEPS, LR, MOMENTUM)
    inner = keras.optimizers.SGD(LR, momentum=MOMENTUM)
    optimizer = hvd.DistributedOptimizer(keras.optimizers.LossScaleOptimizer(inner))
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    model = fit(optimizer)
    assert_weights(model.get_weights(), expected, "LossScaleOptimizer")

    # A non-finite gradient on one rank only: every rank must skip the step
    # and halve its scale (the decision is taken on the averaged gradients).
    model = make_model()
    optimizer = hvd.DistributedOptimizer(
        keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(LR)))
    variables = model.trainable_variables
    grads = [tf.ones_like(v) * (np.inf if hvd.rank() == size - 1 else 1.0) for v in variables]
    optimizer.apply(grads, variables)
    assert_weights(model.get_weights(), make_model().get_weights(), "skipped non-finite step")
    assert float(optimizer.dynamic_scale.numpy()) == 2.0 ** 14, optimizer.dynamic_scale.numpy()


def check_embedding():
    # Embedding gradients are IndexedSlices: allgathered by default,
    # allreduced with sparse_as_dense; both must equal the dense mean.
    size, rank = hvd.size(), hvd.rank()
    vocabulary, width = 7, 3
    table = np.random.RandomState(5).normal(0, 1, (vocabulary, width)).astype("float32")

    def tokens(r):
        return np.random.RandomState(50 + r).randint(0, vocabulary, (4, 2))

    def loss_of(embedded, r):
        return tf.reduce_sum(embedded * float(r + 1)) + tf.reduce_sum(embedded ** 2)

    expected_grad = np.zeros_like(table)
    for r in range(size):
        variable = tf.Variable(table)
        with tf.GradientTape() as tape:
            loss = loss_of(tf.gather(variable, tokens(r)), r)
        expected_grad += tf.convert_to_tensor(tape.gradient(loss, variable)).numpy() / size
    expected = table - LR * expected_grad

    for sparse_as_dense in (False, True):
        layer = keras.layers.Embedding(vocabulary, width)
        layer.build((None, 2))
        layer.set_weights([table])
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(LR),
                                             sparse_as_dense=sparse_as_dense)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = loss_of(layer(tokens(rank)), rank)
            grads = tape.gradient(loss, layer.trainable_variables)
            assert isinstance(grads[0], tf.IndexedSlices)
            optimizer.apply_gradients(zip(grads, layer.trainable_variables))

        step()
        assert_weights(layer.get_weights(), [expected], f"embedding dense={sparse_as_dense}")


def check_config_and_saving(directory: str):
    size, rank = hvd.size(), hvd.rank()
    optimizer = hvd.DistributedOptimizer(keras.optimizers.Adam(1e-2),
                                         backward_passes_per_step=2, num_groups=3,
                                         compression=hvd.Compression.fp16)
    config = optimizer.get_config()
    clone = type(optimizer).from_config(config)
    assert isinstance(clone, keras.optimizers.Adam)
    assert clone.get_config() == config, (clone.get_config(), config)
    assert clone.distributed_settings == optimizer.distributed_settings

    model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM)))
    path = f"{directory}/model_rank{rank}.keras"
    model.save(path)
    restored = hvd.load_model(path)
    assert isinstance(restored.optimizer, keras.optimizers.SGD)
    assert type(restored.optimizer).__mro__[1].__name__ == "DistributedOptimizerMixin"
    assert int(restored.optimizer.iterations.numpy()) == STEPS
    assert_weights(restored.get_weights(), model.get_weights(), "restored weights", 0)
    # Restored momenta + averaging: one more step keeps every rank in step
    # and matches the reference for STEPS + 1 batches.
    x, y = rank_data(rank, STEPS + 1)
    restored.fit(x[STEPS * BATCH:], y[STEPS * BATCH:], batch_size=BATCH, verbose=0)
    assert_weights(restored.get_weights(), reference_sgd(size, STEPS + 1, LR, MOMENTUM),
                   "training after load_model")
    # Default settings keep the file loadable by plain Keras (one process, inference).
    plain = keras.models.load_model(path)
    assert_weights(plain.get_weights(), model.get_weights(), "plain keras load", 0)


def check_jit_compile():
    # jit_compile=True: a tfdist callback turns XLA off and training works...
    expected = reference_sgd(hvd.size(), STEPS, LR, MOMENTUM)
    model = fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR, momentum=MOMENTUM)),
                callbacks=[hvd.callbacks.MetricAverageCallback()], jit_compile=True)
    assert not model.jit_compile
    assert_weights(model.get_weights(), expected, "jit_compile=True with a tfdist callback")
    # ...and without one, the step fails loudly on every rank (no collective
    # was issued, so nothing hangs) instead of training unaveraged.
    try:
        fit(hvd.DistributedOptimizer(keras.optimizers.SGD(LR)), jit_compile=True)
    except RuntimeError as error:
        assert "XLA" in str(error), error
    else:
        raise AssertionError("jit_compile=True without a tfdist callback should raise")


CHECKS = Checks()
CHECKS.setup(lambda directory: hvd.init())
CHECKS.check("fit")(lambda directory: check_fit_matches_reference())
CHECKS.check("custom_loops")(lambda directory: check_custom_loops())
CHECKS.check("uneven_data_join")(lambda directory: check_uneven_data_with_join())
CHECKS.check("options")(lambda directory: check_options())
CHECKS.check("loss_scale_optimizer")(lambda directory: check_loss_scale_optimizer())
CHECKS.check("embedding")(lambda directory: check_embedding())
CHECKS.check("config_and_saving")(check_config_and_saving)
CHECKS.check("jit_compile")(lambda directory: check_jit_compile())
CHECKS.setup(start_autotuned_runtime)
CHECKS.check("autotune")(check_autotune)
CHECKS.setup(start_runtime_for_gradient_groups)
CHECKS.check("autotune_gradient_groups")(check_autotune_gradient_groups)
CHECKS.setup(lambda directory: hvd.barrier())


def main():
    CHECKS.run(sys.argv[1])
    print(f"rank {hvd.rank()}: keras optimizer checks passed", flush=True)


if __name__ == "__main__":
    worker_main(main)
