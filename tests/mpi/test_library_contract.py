"""What the library exports by name (status codes, algorithms, counters), read by Python
instead of copied, and the gradient settings' one set of rules.

test_library_contract_check makes one test of each check the worker registers (its
CHECKS list), all read from one job at two ranks; test_library_contract checks that
the job as a whole ended well.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, shared_job

WORKER = "library_contract_worker.py"


@pytest.fixture(scope="module")
def contract_job():
    @functools.lru_cache(maxsize=None)
    def job():
        return shared_job(WORKER, 2)
    return job


@pytest.mark.parametrize("check", check_names(WORKER))
def test_library_contract_check(check, contract_job):
    assert_check_passed(contract_job(), check)


def test_library_contract(contract_job):
    output = contract_job().assert_ended()
    assert output.count("library contract OK") == 2, output[-3000:]
