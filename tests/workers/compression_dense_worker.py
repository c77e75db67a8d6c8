"""fp16/bf16 wire compression under mpirun, against numpy references of the same compression.

Checks, on every rank: allreduce (eager and in a tf.function, alone and
grouped, several dtypes) against numpy's own float16 / ml_dtypes' bfloat16
rounding of the same values; Average does not overflow where float32's
average fits float16; the wire-byte counters against the ring's formula;
the bad-argument errors; DistributedGradientTape and Keras ``fit`` with a
compressed optimizer against a numpy SGD reference; a compressed
optimizer saved to .keras and loaded back with hvd.load_model; and
Compression.auto (its choice the same on every rank and the pure rule's,
its results those of the compressor it chose, against numpy; in an
optimizer and a tape; its errors). Each check is
registered by name in CHECKS and is a test of its own in
tests/mpi/test_compression_dense.py.
"""
from __future__ import annotations

import tempfile

import numpy as np

from mpi_harness import Checks, worker_main

import ml_dtypes  # noqa: E402  (TensorFlow's own dependency: an independent bfloat16)
import tensorflow as tf  # noqa: E402

import tfdist  # noqa: E402
import tfdist.keras as hvd  # noqa: E402
from tfdist.compression import auto  # noqa: E402

WIRE = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


def rank_values(rank: int, n: int, seed: int = 0) -> np.ndarray:
    return np.random.RandomState(seed * 100 + rank).normal(0, 1, n).astype(np.float32)


def reference(inputs, name: str, scale: float):
    """Each rank's input scaled and rounded to the wire type (as the pack does),
    the exact sum of those, and a bound on what the 16-bit partial sums may
    add: one rounding per addition, at most half an ulp of the partial sum."""
    wire = WIRE[name]
    rounded = [(x.astype(np.float32) * np.float32(scale)).astype(wire).astype(np.float64)
               for x in inputs]
    total = np.sum(rounded, axis=0)
    bits = 11 if name == "fp16" else 8
    bound = (len(inputs) - 1) * np.sum(np.abs(rounded), axis=0) * 2.0 ** -bits + 1e-30
    return total, bound


def assert_wire_result(result, inputs, name, scale, what):
    result = np.asarray(result, dtype=np.float64)
    total, bound = reference(inputs, name, scale)
    error = np.abs(result - total)
    assert np.all(error <= bound), (what, float(np.max(error - bound)))
    # The result was widened from the wire type: it is exactly representable.
    wire = WIRE[name]
    assert np.array_equal(result.astype(np.float32).astype(wire).astype(np.float64), result), what


def check_allreduce():
    size, rank = tfdist.size(), tfdist.rank()
    inputs = [rank_values(r, 1000) for r in range(size)]
    for name, compression in (("fp16", tfdist.Compression.fp16),
                              ("bf16", tfdist.Compression.bf16)):
        for op, scale in ((tfdist.Sum, 1.0), (tfdist.Average, 1.0 / size)):
            out = tfdist.allreduce(inputs[rank], op=op, name=f"dense.{name}.{int(op)}",
                                   compression=compression)
            assert out.dtype == tf.float32 and out.shape == (1000,)
            assert_wire_result(out.numpy(), inputs, name, scale, f"allreduce {name} {op}")
        # Exactly representable values give exact sums: every element checked.
        small = [((np.arange(300) + r) % 17).astype(np.float64) for r in range(size)]
        out = tfdist.allreduce(small[rank], op=tfdist.Sum, compression=compression)
        assert out.dtype == tf.float64
        np.testing.assert_array_equal(out.numpy(), np.sum(small, axis=0))
        # Integers pass through (uncompressed, exact).
        ints = tfdist.allreduce(np.full(5, 70001 + rank, np.int32), op=tfdist.Sum,
                                compression=compression)
        np.testing.assert_array_equal(ints.numpy(), np.full(5, sum(70001 + r for r in range(size))))
        # Grouped and in a tf.function, fused with tensors of other sizes.
        parts = [[rank_values(r, n, seed=n) for r in range(size)] for n in (7, 64, 3000)]

        @tf.function
        def grouped(tensors):
            return tfdist.grouped_allreduce(tensors, op=tfdist.Average,
                                            name=f"dense.grouped.{name}",
                                            compression=compression)

        outs = grouped([p[rank] for p in parts])
        for out, p in zip(outs, parts):
            assert_wire_result(out.numpy(), p, name, 1.0 / size, f"grouped {name}")

    # Average where the sum of the ranks' inputs is beyond float16 but their
    # average is not: pre-division keeps it finite on any P.
    big = np.full(4096, 60000.0, np.float32) * (1 - 0.01 * rank)
    out = tfdist.allreduce(big, op=tfdist.Average, name="dense.overflow",
                           compression=tfdist.Compression.fp16).numpy()
    expected = np.mean([60000.0 * (1 - 0.01 * r) for r in range(size)])
    assert np.all(np.isfinite(out)), "fp16 Average overflowed"
    assert np.allclose(out, expected, rtol=2e-3), (out[:3], expected)


def check_counters():
    size = tfdist.size()
    n = 3 * 4 * 5 * 2 ** 14  # divisible by every P in 2..4: equal ring chunks
    x = np.ones(n, np.float32)
    sent = {}
    for name, compression in (("none", tfdist.Compression.none),
                              ("fp16", tfdist.Compression.fp16),
                              ("bf16", tfdist.Compression.bf16)):
        before = tfdist.stats()
        tfdist.allreduce(x, op=tfdist.Sum, name=f"counters.{name}", compression=compression)
        after = tfdist.stats()
        sent[name] = after["bytes_sent"] - before["bytes_sent"]
        uncompressed = after["bytes_uncompressed"] - before["bytes_uncompressed"]
        assert uncompressed == 2 * (size - 1) * n * 4 // size, (name, uncompressed)
    # The ring (TFDIST_ALLREDUCE_ALGORITHM=ring for this job): 2(P-1)/P of
    # the buffer per rank, in the wire type.
    assert sent["none"] == 2 * (size - 1) * n * 4 // size, sent
    assert sent["fp16"] * 2 == sent["none"] and sent["bf16"] * 2 == sent["none"], sent


def check_errors():
    x = tf.ones(4)
    for op in (tfdist.Min, tfdist.Max, tfdist.Product):
        try:
            tfdist.allreduce(x, op=op, compression=tfdist.Compression.fp16)
        except ValueError as error:
            assert "compression" in str(error) and op.name in str(error), error
        else:
            raise AssertionError(f"compression with {op.name} was accepted")
    try:
        tfdist.grouped_allreduce([x], op=tfdist.Max, compression=tfdist.Compression.bf16)
    except ValueError as error:
        assert "compression" in str(error), error
    else:
        raise AssertionError("grouped compression with Max was accepted")
    # Ranks that disagree on the compression get the error every mismatch gets.
    mine = tfdist.Compression.fp16 if tfdist.rank() == 0 else tfdist.Compression.none
    try:
        tfdist.allreduce(x, op=tfdist.Sum, name="dense.mismatch", compression=mine)
    except tf.errors.FailedPreconditionError as error:
        assert "compression" in str(error) and "fp16" in str(error), error
        assert "none" in str(error) and "dense.mismatch" in str(error), error
    else:
        raise AssertionError("ranks disagreeing on compression were not stopped")
    # A compression may be named; a name that is none is refused, naming the choices.
    try:
        tfdist.allreduce(x, compression="fp8")
    except ValueError as error:
        assert "compression='fp8'" in str(error) and "'fp16'" in str(error), error
    else:
        raise AssertionError("an unknown compression name was accepted")


def check_tape():
    size, rank = tfdist.size(), tfdist.rank()
    inputs = [rank_values(r, 50, seed=7) for r in range(size)]
    w = tf.Variable(np.zeros(50, np.float32))
    for name, compression in (("fp16", tfdist.Compression.fp16),
                              ("bf16", tfdist.Compression.bf16)):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(w * inputs[rank])
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        (grad,) = tape.gradient(loss, [w])
        assert_wire_result(grad.numpy(), inputs, name, 1.0 / size, f"tape {name}")


def fit_problem(size: int):
    """The fit checks' least-squares problem: initial 4x1 weights, and each rank's
    8 samples and targets."""
    w0 = np.random.RandomState(1).normal(0, 0.5, (4, 1)).astype(np.float32)
    xs = [np.random.RandomState(10 + r).normal(0, 1, (8, 4)).astype(np.float32)
          for r in range(size)]
    ys = [np.random.RandomState(20 + r).normal(0, 1, (8, 1)).astype(np.float32)
          for r in range(size)]
    return w0, xs, ys


def mse_gradients(w0, xs, ys):
    """Each rank's gradient of the MSE loss at w0 over its 8 samples, flattened."""
    return [((2.0 / 8) * x.T @ (x @ w0 - y)).ravel() for x, y in zip(xs, ys)]


def check_fit_and_saving(directory: str):
    size, rank = tfdist.size(), tfdist.rank()
    w0, xs, ys = fit_problem(size)
    lr = 0.1
    for name, compression in (("fp16", hvd.Compression.fp16), ("bf16", hvd.Compression.bf16)):
        model = tf.keras.Sequential([tf.keras.Input((4,)),
                                     tf.keras.layers.Dense(1, use_bias=False)])
        model.set_weights([w0])
        optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(lr),
                                             compression=compression)
        model.compile(optimizer=optimizer, loss="mse")
        model.fit(xs[rank], ys[rank], batch_size=8, epochs=1, verbose=0)
        # One step of SGD on the wire-averaged gradient of the MSE loss.
        total, bound = reference(mse_gradients(w0, xs, ys), name, 1.0 / size)
        expected = w0.ravel() - lr * total
        got = model.get_weights()[0].ravel()
        assert np.all(np.abs(got - expected) <= lr * bound + 1e-6), (name, got, expected)
        path = f"{directory}/{name}_rank{rank}.keras"
        model.save(path)
        restored = hvd.load_model(path)
        settings = restored.optimizer.distributed_settings
        assert settings.compression is compression, settings
        np.testing.assert_array_equal(restored.get_weights()[0], model.get_weights()[0])


def check_fit_and_saving_in_a_temporary_directory():
    with tempfile.TemporaryDirectory() as directory:
        check_fit_and_saving(directory)


def auto_reference(choice, inputs, scale, what):
    """Asserts that ``result`` is what ``choice`` gives for ``inputs`` (each rank's),
    against numpy: none the exact sum (to float32 rounding), bf16/fp16 within the wire
    bound; PowerSGD is checked on inputs whose sum it represents exactly."""
    def check(result):
        result = np.asarray(result, dtype=np.float64)
        if choice in WIRE:
            assert_wire_result(result.ravel(), [x.ravel() for x in inputs], choice, scale,
                               what)
        else:
            want = np.sum([x.astype(np.float64) * scale for x in inputs], axis=0)
            # none: float32 sums; PowerSGD: float32 products of orthonormalised factors.
            tolerance = 1e-4 if choice == "powersgd" else 1e-5
            np.testing.assert_allclose(result, want, rtol=tolerance, atol=tolerance,
                                       err_msg=what)
    return check


def rank_one_inputs(size, n, m, seed):
    """Each rank's n×m rank-1 matrix u_r·vᵀ with a shared v: their sum is rank 1, which
    PowerSGD of rank 1 (and error feedback or not) delivers exactly on its first step."""
    v = np.random.RandomState(seed).normal(0, 1, m)
    return [np.outer(np.random.RandomState(seed + 1 + r).normal(0, 1, n), v).astype(np.float32)
            for r in range(size)]


def check_auto_choice_agrees():
    size, rank = tfdist.size(), tfdist.rank()
    # A digits-CNN-like group, eager and in a tf.function (where auto measures while
    # the function is traced), with whatever this job's link makes it choose.
    shapes = [(3, 3, 1, 16), (16,), (3, 3, 16, 32), (32,), (512, 64), (64,), (64, 10), (10,)]
    inputs = [[rank_one_inputs(size, int(np.prod(s[:-1])), s[-1], 10 * i)[r].reshape(s)
               if len(s) > 1 else rank_values(r, s[0], seed=i) for r in range(size)]
              for i, s in enumerate(shapes)]
    for mode in ("eager", "function"):
        compressor = tfdist.Compression.auto(powersgd_rank=1)
        name = f"auto.cnn.{mode}"

        def call(tensors):
            return tfdist.grouped_allreduce(tensors, op=tfdist.Average, name=name,
                                            compression=compressor)
        if mode == "function":
            call = tf.function(call)
        out = call([x[rank] for x in inputs])
        decision = compressor.decisions[name]
        # Every rank decided alike, on the same predictions, and as the pure rule does
        # on the agreed costs and the cost model's curves.
        everyone = tfdist.allgather_object((decision.choice, decision.predicted_seconds,
                                            compressor.costs(name)))
        assert all(e == everyone[0] for e in everyone), everyone
        specs = [auto.TensorSpec(s, 4, True) for s in shapes]
        predicted = auto.predicted_seconds(specs, auto.fastest_allreduce_seconds,
                                           compressor.costs(name), 1)
        assert predicted == decision.predicted_seconds, (predicted, decision)
        costs = compressor.costs(name)
        assert 0 < costs.cast_per_byte < 1e-6 and costs.powersgd_fixed >= 0, costs
        assert costs.powersgd_per_byte >= 0 and costs.powersgd_fixed + costs.powersgd_per_byte > 0
        rule = auto.choose(predicted, ("none", "half", "powersgd"), 0.8)
        assert decision.choice == {"half": "bf16"}.get(rule, rule), (rule, decision)
        for i, (o, x) in enumerate(zip(out, inputs)):
            auto_reference(decision.choice, x, 1.0 / size, f"{mode} {i} {decision}")(o.numpy())
        # The results are the same on every rank.
        gathered = tfdist.allgather_object([o.numpy() for o in out])
        for theirs in gathered:
            for a, b in zip(theirs, gathered[0]):
                np.testing.assert_array_equal(a, b)


def check_auto_gives_the_chosen_compressors_results():
    size, rank = tfdist.size(), tfdist.rank()
    inputs = [rank_one_inputs(size, 96, 40, 5), [rank_values(r, 40, seed=3) for r in range(size)]]
    for only in ("none", "bf16", "fp16", "powersgd"):
        half = "fp16" if only == "fp16" else "bf16"
        compressor = tfdist.Compression.auto(powersgd_rank=1, half=half, candidates=(only,))
        name = f"auto.only.{only}"
        out = tfdist.grouped_allreduce([x[rank] for x in inputs], op=tfdist.Sum, name=name,
                                       compression=compressor)
        assert compressor.choices() == {name: only}, compressor.choices()
        for i, (o, x) in enumerate(zip(out, inputs)):
            auto_reference(only, x, 1.0, f"{only} {i}")(o.numpy())
        # Bit for bit the chosen compressor's own result on the same call.
        chosen = {"none": tfdist.Compression.none, "bf16": tfdist.Compression.bf16,
                  "fp16": tfdist.Compression.fp16,
                  "powersgd": tfdist.Compression.powersgd(1)}[only]
        tfdist.runtime.restore_rank_state({})
        again = tfdist.grouped_allreduce([x[rank] for x in inputs], op=tfdist.Sum, name=name,
                                         compression=chosen)
        for a, b in zip(out, again):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
    tfdist.runtime.restore_rank_state({})
    # One tensor through tfdist.allreduce, as auto decides per call.
    x = rank_values(rank, 3000, seed=4)
    compressor = tfdist.Compression.auto()
    out = tfdist.allreduce(x, op=tfdist.Sum, name="auto.single", compression=compressor)
    choice = compressor.choices()["auto.single"]
    assert choice in ("none", "bf16"), choice  # a vector: PowerSGD cannot factor it
    auto_reference(choice, [rank_values(r, 3000, seed=4) for r in range(size)], 1.0,
                   "single")(out.numpy())


def check_auto_in_tape_and_optimizer():
    size, rank = tfdist.size(), tfdist.rank()
    # Forced PowerSGD through a tape: a rank-1 sum of rank-1 gradients, delivered exactly.
    inputs = rank_one_inputs(size, 64, 32, 9)
    w = tf.Variable(np.zeros((64, 32), np.float32))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(w * inputs[rank])
    compressor = tfdist.Compression.auto(powersgd_rank=1, candidates=("powersgd",))
    tape = hvd.DistributedGradientTape(tape, compression=compressor)
    (grad,) = tape.gradient(loss, [w])
    assert set(compressor.choices().values()) == {"powersgd"}, compressor.choices()
    auto_reference("powersgd", inputs, 1.0 / size, "tape")(grad.numpy())
    tfdist.runtime.restore_rank_state({})
    # Keras fit: one SGD step on the averaged gradient of whatever auto chose, the same
    # weights on every rank; the setting survives get_config.
    w0, xs, ys = fit_problem(size)
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1, use_bias=False)])
    model.set_weights([w0])
    optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.1),
                                         compression=hvd.Compression.auto())
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(xs[rank], ys[rank], batch_size=8, epochs=1, verbose=0)
    used = model.optimizer.distributed_settings.compression
    assert used.get_config() == hvd.Compression.auto().get_config(), used.get_config()
    (choice,) = set(used.choices().values())
    assert choice in ("none", "bf16"), choice  # a 4×1 kernel: nothing to factor
    grads = mse_gradients(w0, xs, ys)
    got = model.get_weights()[0].ravel()
    if choice == "none":
        expected = w0.ravel() - 0.1 * np.mean(grads, axis=0)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    else:
        total, bound = reference(grads, choice, 1.0 / size)
        assert np.all(np.abs(got - (w0.ravel() - 0.1 * total)) <= 0.1 * bound + 1e-6), got
    weights = tfdist.allgather_object(model.get_weights()[0])
    for theirs in weights:
        np.testing.assert_array_equal(theirs, weights[0])


def check_auto_errors():
    x = tf.ones(4)
    compressor = tfdist.Compression.auto()
    for op in (tfdist.Min, tfdist.Max, tfdist.Product):
        try:
            tfdist.allreduce(x, op=op, name="auto.bad_op", compression=compressor)
        except ValueError as error:
            assert "compression" in str(error) and op.name in str(error), error
        else:
            raise AssertionError(f"Compression.auto with {op.name} was accepted")
    try:
        tfdist.allreduce(x, compression=compressor)
    except ValueError as error:
        assert "name=" in str(error) and "auto" in str(error), error
    else:
        raise AssertionError("Compression.auto without a name was accepted")
    try:
        tfdist.allreduce(x, name="auto.algorithm", algorithm="ring", compression=compressor)
    except ValueError as error:
        assert "algorithm" in str(error), error
    else:
        raise AssertionError("Compression.auto with algorithm= was accepted")
    # The cast timing's C API refuses what it cannot time.
    for cast_code, nbytes, repetitions in ((3, 4096, 1), (2, 6, 1), (2, 0, 1), (1, 4096, 0)):
        try:
            auto._wire_cast_seconds(cast_code, nbytes, repetitions)
        except ValueError as error:
            assert "bad argument" in str(error), error
        else:
            raise AssertionError(f"wire cast timing accepted {cast_code, nbytes, repetitions}")
    assert 0 < auto._wire_cast_seconds(1, 4096, 1) < 1.0
    # A rank that sends the tensor without auto meets auto's first collective and every
    # rank gets an error, not a hang.
    mine = compressor if tfdist.rank() == 0 else tfdist.Compression.none
    try:
        tfdist.allreduce(x, op=tfdist.Sum, name="auto.mismatch", compression=mine)
    except tf.errors.FailedPreconditionError as error:
        assert "auto.mismatch" in str(error), error
    else:
        raise AssertionError("a rank without Compression.auto was not stopped")


CHECKS = Checks()
CHECKS.setup(lambda: tfdist.init())
CHECKS.check("allreduce")(check_allreduce)
CHECKS.check("counters")(check_counters)
CHECKS.check("errors")(check_errors)
CHECKS.check("tape")(check_tape)
CHECKS.check("fit_and_saving")(check_fit_and_saving_in_a_temporary_directory)
CHECKS.check("auto_choice_agrees")(check_auto_choice_agrees)
CHECKS.check("auto_gives_the_chosen_compressors_results")(
    check_auto_gives_the_chosen_compressors_results)
CHECKS.check("auto_in_tape_and_optimizer")(check_auto_in_tape_and_optimizer)
CHECKS.check("auto_errors")(check_auto_errors)


def main():
    CHECKS.run()
    print(f"compression dense OK rank {tfdist.rank()}", flush=True)


if __name__ == "__main__":
    worker_main(main)
