"""Edge cases of top-k and PowerSGD (issue 21) under mpirun, against numpy references.

tests/workers/compression_defects_worker.py holds the checks: PowerSGD after
a zero gradient and with a dependent warm-start Q, unnamed and grouped calls,
state of tensors with more than 8 dimensions, all-or-nothing restore, ranks
that disagree on a compressor's settings, tfdist.stats(), and the warnings
for float64 and IndexedSlices. np=3 covers a mismatch on a rank that is not
rank 1 and counts on a non-power-of-two job.
"""
import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_,checks", [(2, []), (3, ["mismatch", "stats", "zero"])])
def test_compression_edge_cases(np_, checks):
    output = run_workers("compression_defects_worker.py", np_, args=checks, timeout=240)
    assert output.count("compression defect checks passed") == np_, output[-3000:]
