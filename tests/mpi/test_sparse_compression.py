"""Top-k and PowerSGD compression, with and without error feedback, under mpirun.

The worker checks Compressor.allreduce, DistributedGradientTape and
model.fit against numpy references of the same compression (top-k also
with DGC's momentum correction, its velocity state bit for bit), the
error-feedback experiment of issue 14 (constant gradient, top-k 5%, 400
steps), PowerSGD's exact recovery of rank-1 averages, start_step, the
per-rank state round trip and the argument errors.
"""
import pytest

from mpi_harness import run_workers


# The 400-step error-feedback run once (np=2); np=4 covers uneven k and more ranks.
@pytest.mark.parametrize("np_,args", [(2, ["--error-feedback"]), (4, [])])
def test_sparse_compression_matches_numpy(np_, args, tmp_path):
    output = run_workers("sparse_compression_worker.py", np_, args=[str(tmp_path), *args],
                         timeout=240)
    assert output.count("sparse compression checks passed") == np_, output[-3000:]
    if args:
        assert "error feedback: relative L2 error" in output
