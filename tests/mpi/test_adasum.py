"""op=tfdist.Adasum under mpirun, against a numpy Adasum with the library's pairing order."""
import pytest

from mpi_harness import shared_job


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_adasum_matches_numpy(np_):
    output = shared_job("adasum_worker.py", np_).assert_ended()
    assert output.count("adasum OK") == np_, output[-3000:]
