"""fp16/bf16 wire compression and the wire-byte counters under mpirun, checked against numpy.

One job per size runs every check of tests/workers/compression_dense_worker.py;
test_dense_compression_check makes a test of each.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job

WORKER = "compression_dense_worker.py"
SIZES = [2, 3, 4]


@pytest.fixture(scope="module")
def dense_job():
    @functools.lru_cache(maxsize=None)
    def job(np_):
        return shared_job(WORKER, np_)  # under TFDIST_ALLREDUCE_ALGORITHM=ring
    return job


@pytest.mark.parametrize("check", check_names(WORKER))
@pytest.mark.parametrize("np_", SIZES)
def test_dense_compression_check(np_, check, dense_job):
    assert_check_passed(dense_job(np_), check)


@pytest.mark.parametrize("np_", SIZES)
def test_dense_compression_matches_numpy(np_, dense_job):
    output = dense_job(np_).assert_ended()
    assert output.count("compression dense OK") == np_, output[-3000:]
