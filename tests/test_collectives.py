"""Every collective, dtype, op and algorithm under mpirun, checked against numpy."""
import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_collectives_match_numpy(np_):
    output = run_workers("collectives_worker.py", np_, timeout=400)
    assert output.count("collectives OK") == np_, output[-3000:]
