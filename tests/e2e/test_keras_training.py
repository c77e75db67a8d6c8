"""Keras 3 data-parallel training under mpirun: DistributedOptimizer, DistributedGradientTape,
callbacks, LossScaleOptimizer, Embedding, save/load, jit_compile, uneven data with join().

Every check trains a few steps with different data on every rank and
compares every rank's weights with a single-process numpy reference that
applies the mean gradient (tests/workers/keras_common.py); the workers also
check that the same run without the wrapper does not match, so the checks
can fail. One job per worker and size runs all of the worker's checks;
test_*_check makes a test of each.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, run_job

OPTIMIZER = "keras_optimizer_worker.py"
CALLBACKS = "keras_callbacks_worker.py"
SIZES = [2, 3]


@pytest.fixture(scope="module")
def keras_job(tmp_path_factory):
    """Each worker's job at each size, run once however many tests read it."""
    @functools.lru_cache(maxsize=None)
    def job(script, np_):
        if script == OPTIMIZER:
            directory = tmp_path_factory.mktemp(f"keras-np{np_}")
            return run_job(script, np_, args=[str(directory)], timeout=240)
        return run_job(script, np_, timeout=180)
    return job


@pytest.mark.parametrize("check", check_names(OPTIMIZER))
@pytest.mark.parametrize("np_", SIZES)
def test_distributed_optimizer_check(np_, check, keras_job):
    assert_check_passed(keras_job(OPTIMIZER, np_), check)


@pytest.mark.parametrize("np_", SIZES)
def test_distributed_optimizer_matches_reference(np_, keras_job):
    output = keras_job(OPTIMIZER, np_).assert_ended()
    assert output.count("keras optimizer checks passed") == np_, output[-3000:]


@pytest.mark.parametrize("check", check_names(CALLBACKS))
@pytest.mark.parametrize("np_", SIZES)
def test_callbacks_check(np_, check, keras_job):
    assert_check_passed(keras_job(CALLBACKS, np_), check)


@pytest.mark.parametrize("np_", SIZES)
def test_callbacks(np_, keras_job):
    output = keras_job(CALLBACKS, np_).assert_ended()
    assert output.count("keras callback checks passed") == np_, output[-3000:]
