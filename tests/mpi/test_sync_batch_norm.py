"""tfdist.keras.SyncBatchNormalization under mpirun against one process on the concatenated batch.

tests/workers/sync_batch_norm_worker.py: forward pass, gradients (inputs,
gamma, beta), moving statistics, eager and traced, axis -1 and 1, uneven
per-rank batches, a mask, model.fit with save/load; at one rank, bit
equality with keras.layers.BatchNormalization. One job per size runs the
checks RUNS names for it; test_sync_batch_norm_check makes a test of each.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job
from shared_jobs import SYNC_BN_RUNS as RUNS

WORKER = "sync_batch_norm_worker.py"


@pytest.fixture(scope="module")
def batch_norm_job():
    @functools.lru_cache(maxsize=None)
    def job(np_):
        return shared_job(WORKER, np_)  # the checks RUNS names for np_
    return job


def test_every_check_runs_at_some_size():
    assert sorted(check_names(WORKER)) == sorted({name for names in RUNS.values()
                                                  for name in names})


@pytest.mark.parametrize("np_,check", [(np_, name) for np_, names in RUNS.items()
                                       for name in names])
def test_sync_batch_norm_check(np_, check, batch_norm_job):
    assert_check_passed(batch_norm_job(np_), check)


@pytest.mark.parametrize("np_", list(RUNS))
def test_sync_batch_norm_matches_one_process(np_, batch_norm_job):
    output = batch_norm_job(np_).assert_ended()
    assert output.count("sync batch norm checks passed") == np_, output[-3000:]
