"""Local variables (per-rank heads) under mpirun against a numpy reference.

tests/workers/local_variables_worker.py: PartialDistributedOptimizer in
model.fit, DistributedGradientTape.register_local_var,
PartialDistributedGradientTape, DistributedOptimizer.register_local_var;
checkpoints keep local variables and their momenta per rank;
broadcast_variables and BroadcastGlobalVariablesCallback refuse them. One
job at two ranks; test_local_variables_check makes a test of each check.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job

WORKER = "local_variables_worker.py"


@pytest.fixture(scope="module")
def local_job():
    @functools.lru_cache(maxsize=None)
    def job():
        return shared_job(WORKER, 2)
    return job


@pytest.mark.parametrize("check", check_names(WORKER))
def test_local_variables_check(check, local_job):
    assert_check_passed(local_job(), check)


def test_local_variables_match_reference(local_job):
    output = local_job().assert_ended()
    assert output.count("local variable checks passed") == 2, output[-3000:]
