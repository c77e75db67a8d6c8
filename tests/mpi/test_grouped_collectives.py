"""grouped_allgather and grouped_reducescatter under mpirun, checked against numpy."""
import pytest

from mpi_harness import shared_job


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_grouped_collectives_match_numpy(np_):
    output = shared_job("grouped_worker.py", np_).assert_ended()
    assert output.count("grouped OK") == np_, output[-3000:]
