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

from mpi_harness import assert_check_passed, check_names, run_job

WORKER = "sparse_compression_worker.py"
# The 400-step error-feedback run once (np=2); np=4 covers uneven k and more ranks.
RUNS = {2: ["--error-feedback"], 4: []}


def checks_run(args):
    """The worker runs its last check, error_feedback, only with --error-feedback."""
    names = check_names(WORKER)
    return names if args or names == ["import"] else names[:-1]


@pytest.fixture(scope="module")
def sparse_job(tmp_path_factory):
    @functools.lru_cache(maxsize=None)
    def job(np_):
        directory = tmp_path_factory.mktemp(f"sparse-np{np_}")
        return run_job(WORKER, np_, args=[str(directory), *RUNS[np_]], timeout=240)
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
