"""Edge cases of top-k and PowerSGD (issue 21) under mpirun, against numpy references.

tests/workers/compression_defects_worker.py holds the checks: PowerSGD after
a zero gradient and with a dependent warm-start Q, unnamed and grouped calls,
state of tensors with more than 8 dimensions, all-or-nothing restore, ranks
that disagree on a compressor's settings, tfdist.stats(), and the warnings
for float64 and IndexedSlices. np=3 covers a mismatch on a rank that is not
rank 1 and counts on a non-power-of-two job. Each check is a test of its own
(test_compression_edge_case), read from one job per size.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job
from shared_jobs import DEFECT_RUNS as RUNS

WORKER = "compression_defects_worker.py"


@pytest.fixture(scope="module")
def defects_job():
    @functools.lru_cache(maxsize=None)
    def job(np_):
        return shared_job(WORKER, np_)
    return job


@pytest.mark.parametrize("np_,check", [(np_, name) for np_, names in RUNS.items()
                                       for name in names or check_names(WORKER)])
def test_compression_edge_case(np_, check, defects_job):
    assert_check_passed(defects_job(np_), check)


@pytest.mark.parametrize("np_,checks", list(RUNS.items()))
def test_compression_edge_cases(np_, checks, defects_job):
    output = defects_job(np_).assert_ended()
    assert output.count("compression defect checks passed") == np_, output[-3000:]
