"""The names the library exports (status codes, algorithms, counters) and the gradient
settings' one set of rules, checked on every rank.

Each check is registered by name in CHECKS (tests/mpi_harness.py's Checks) and is a
test of its own in tests/mpi/test_library_contract.py, read from one job.
"""
import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import Checks, worker_main
from tfdist import _eager, _library, config
from tfdist.keras.optimizer import DistributedSettings


def check_names() -> None:
    codes = _library.status_codes()
    assert codes[0] == "ok", codes
    # Every error code the library can return raises a specific TensorFlow error:
    # a code added in C++ without a mapping here fails this check.
    for code, name in enumerate(codes[1:], start=1):
        assert name in _eager._ERROR_CLASSES, (code, name)
        assert _eager._error_class(code) is _eager._ERROR_CLASSES[name]
    assert _eager._error_class(len(codes)) is tf.errors.UnknownError
    algorithms = _library.allreduce_algorithms()
    assert algorithms[0] == "auto", algorithms
    assert {"tree", "butterfly", "ring", "rabenseifner", "mpi"} <= set(algorithms), algorithms
    assert len(set(algorithms)) == len(algorithms), algorithms
    assert config.ALGORITHMS == algorithms
    names = _library.stat_names()
    assert len(set(names)) == len(names), names
    assert [n for n in names if n.startswith("algorithm_calls.")] == [
        f"algorithm_calls.{a}" for a in algorithms], names


def check_stats(rank: int, size: int) -> None:
    before = tfdist.stats()
    x = tf.constant(np.arange(1000, dtype=np.float32) + rank)
    for algorithm in ("ring", "tree"):
        got = tfdist.allreduce(x, op=tfdist.Sum, name=f"contract.{algorithm}",
                               algorithm=algorithm)
        want = np.arange(1000, dtype=np.float32) * size + sum(range(size))
        np.testing.assert_allclose(got.numpy(), want)
    after = tfdist.stats()
    expected_keys = {n.split(".")[0] for n in _library.stat_names()}
    assert set(after) == expected_keys, sorted(after)
    assert set(after["algorithm_calls"]) == set(_library.allreduce_algorithms())
    assert after["allreduce_calls"] - before["allreduce_calls"] == 2, (before, after)
    for algorithm in ("ring", "tree"):
        calls = after["algorithm_calls"][algorithm] - before["algorithm_calls"][algorithm]
        assert calls == 1, (algorithm, before, after)
    assert tfdist.algorithm_for(4, "butterfly") == "butterfly"
    # The phase counters only grow, and the two collectives ran for some time.
    assert set(after["phase_ns"]) == {"arrival", "pickup", "negotiation", "collectives", "completion"}
    for phase, value in after["phase_ns"].items():
        assert value >= before["phase_ns"][phase], (phase, before, after)
    assert after["phase_ns"]["collectives"] > before["phase_ns"]["collectives"], (before, after)


def check_error_class(rank: int, size: int) -> None:
    # Shapes that differ between ranks: the eager fast path maps the library's
    # failed_precondition code to the op's error.
    if size < 2:
        return
    try:
        tfdist.allreduce(tf.zeros([3 + rank]), name="contract.mismatch")
    except tf.errors.FailedPreconditionError as error:
        assert "ranks disagree on the shape" in str(error), error
    else:
        raise AssertionError("a shape mismatch between ranks did not raise")


def check_gradient_settings() -> None:
    message = "gradient_predivide_factor only applies with op=Average"
    for make in (lambda **k: tfdist.DistributedGradientTape(tf.GradientTape(), **k),
                 lambda **k: DistributedSettings(**k)):
        for kwargs, text in (({"op": tfdist.Sum, "gradient_predivide_factor": 2.0}, message),
                             ({"num_groups": -1}, "num_groups must be >= 0")):
            try:
                make(**kwargs)
            except ValueError as error:
                assert text in str(error), error
            else:
                raise AssertionError(f"{kwargs} was accepted")
    tfdist.DistributedGradientTape(tf.GradientTape(), gradient_predivide_factor=2.0)


CHECKS = Checks()
CHECKS.setup(lambda rank, size: tfdist.init())
CHECKS.check("names")(lambda rank, size: check_names())
CHECKS.check("stats")(check_stats)
CHECKS.check("error_class")(check_error_class)
CHECKS.check("gradient_settings")(lambda rank, size: check_gradient_settings())
CHECKS.setup(lambda rank, size: tfdist.shutdown())


def main() -> None:
    from mpi4py import MPI
    rank, size = MPI.COMM_WORLD.rank, MPI.COMM_WORLD.size
    CHECKS.run(rank, size)
    print(f"library contract OK (rank {rank})", flush=True)


if __name__ == "__main__":
    worker_main(main)
