"""Keras 3 data-parallel training under mpirun: DistributedOptimizer, DistributedGradientTape,
callbacks, LossScaleOptimizer, Embedding, save/load, jit_compile, uneven data with join().

Every check trains a few steps with different data on every rank and
compares every rank's weights with a single-process numpy reference that
applies the mean gradient (tests/workers/keras_common.py); the workers also
check that the same run without the wrapper does not match, so the checks
can fail. Each size's shared job (tests/shared_jobs.py) runs all of both workers'
checks; test_*_check makes a test of each.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job

OPTIMIZER = "keras_optimizer_worker.py"
CALLBACKS = "keras_callbacks_worker.py"
SIZES = [2, 3]


@pytest.fixture(scope="module")
def keras_job():
    """Each worker's part of the shared job at each size (tests/shared_jobs.py)."""
    @functools.lru_cache(maxsize=None)
    def job(script, np_):
        return shared_job(script, np_)
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
