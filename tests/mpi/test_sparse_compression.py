"""Top-k and PowerSGD compression, with and without error feedback, under mpirun.

The worker checks Compressor.allreduce, DistributedGradientTape and
model.fit against numpy references of the same compression (top-k also
with DGC's momentum correction, its velocity state bit for bit), the
error-feedback experiment of issue 14 (constant gradient, top-k 5%, 400
steps), PowerSGD's exact recovery of rank-1 averages, start_step, the
per-rank state round trip and the argument errors. Each check is a test of its own
(test_sparse_compression_check), read from one job per size.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job
from shared_jobs import SPARSE_RUNS as RUNS

WORKER = "sparse_compression_worker.py"


def checks_run(args):
    """The worker runs its last check, error_feedback, only with --error-feedback."""
    names = check_names(WORKER)
    return names if args or names == ["import"] else names[:-1]


@pytest.fixture(scope="module")
def sparse_job():
    @functools.lru_cache(maxsize=None)
    def job(np_):
        return shared_job(WORKER, np_)
    return job


@pytest.mark.parametrize("np_,check", [(np_, name) for np_, args in RUNS.items()
                                       for name in checks_run(args)])
def test_sparse_compression_check(np_, check, sparse_job):
    assert_check_passed(sparse_job(np_), check)


@pytest.mark.parametrize("np_,args", list(RUNS.items()))
def test_sparse_compression_matches_numpy(np_, args, sparse_job):
    output = sparse_job(np_).assert_ended()
    assert output.count("sparse compression checks passed") == np_, output[-3000:]
    if args:
        assert "error feedback: relative L2 error" in output
