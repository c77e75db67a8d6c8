"""fp16/bf16 wire compression under mpirun, against numpy references of the same compression.

Checks, on every rank: allreduce (eager and in a tf.function, alone and
grouped, several dtypes) against numpy's own float16 / ml_dtypes' bfloat16
rounding of the same values; Average does not overflow where float32's
average fits float16; the wire-byte counters against the ring's formula;
the bad-argument errors; DistributedGradientTape and Keras ``fit`` with a
compressed optimizer against a numpy SGD reference; and a compressed
optimizer saved to .keras and loaded back with hvd.load_model. Each check is
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


def check_fit_and_saving(directory: str):
    size, rank = tfdist.size(), tfdist.rank()
    rng = np.random.RandomState(1)
    w0 = rng.normal(0, 0.5, (4, 1)).astype(np.float32)
    xs = [np.random.RandomState(10 + r).normal(0, 1, (8, 4)).astype(np.float32)
          for r in range(size)]
    ys = [np.random.RandomState(20 + r).normal(0, 1, (8, 1)).astype(np.float32)
          for r in range(size)]
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
        grads = [(2.0 / 8) * x.T @ (x @ w0 - y) for x, y in zip(xs, ys)]
        total, bound = reference([g.ravel() for g in grads], name, 1.0 / size)
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


CHECKS = Checks()
CHECKS.setup(lambda: tfdist.init())
CHECKS.check("allreduce")(check_allreduce)
CHECKS.check("counters")(check_counters)
CHECKS.check("errors")(check_errors)
CHECKS.check("tape")(check_tape)
CHECKS.check("fit_and_saving")(check_fit_and_saving_in_a_temporary_directory)


def main():
    CHECKS.run()
    print(f"compression dense OK rank {tfdist.rank()}", flush=True)


if __name__ == "__main__":
    worker_main(main)
