"""fp16/bf16 wire compression and the wire-byte counters under mpirun, checked against numpy."""
import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_dense_compression_matches_numpy(np_):
    output = run_workers("compression_dense_worker.py", np_, timeout=300,
                         env={"TFDIST_ALLREDUCE_ALGORITHM": "ring"})
    assert output.count("compression dense OK") == np_, output[-3000:]
