"""Keras 3 data-parallel training under mpirun: DistributedOptimizer, DistributedGradientTape,
callbacks, LossScaleOptimizer, Embedding, save/load, jit_compile, uneven data with join().

Every check trains a few steps with different data on every rank and
compares every rank's weights with a single-process numpy reference that
applies the mean gradient (tests/workers/keras_common.py); the workers also
check that the same run without the wrapper does not match, so the checks
can fail.
"""
import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_", [2, 3])
def test_distributed_optimizer_matches_reference(np_, tmp_path):
    output = run_workers("keras_optimizer_worker.py", np_, args=[str(tmp_path)], timeout=240)
    assert output.count("keras optimizer checks passed") == np_, output[-3000:]


@pytest.mark.parametrize("np_", [2, 3])
def test_callbacks(np_):
    output = run_workers("keras_callbacks_worker.py", np_, timeout=180)
    assert output.count("keras callback checks passed") == np_, output[-3000:]
