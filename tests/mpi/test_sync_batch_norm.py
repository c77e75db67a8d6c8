"""tfdist.keras.SyncBatchNormalization under mpirun against one process on the concatenated batch.

tests/workers/sync_batch_norm_worker.py: forward pass, gradients (inputs,
gamma, beta), moving statistics, eager and traced, axis -1 and 1, uneven
per-rank batches, a mask, model.fit with save/load; at one rank, bit
equality with keras.layers.BatchNormalization.
"""
import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_sync_batch_norm_matches_one_process(np_, tmp_path):
    output = run_workers("sync_batch_norm_worker.py", np_, args=[str(tmp_path)], timeout=240)
    assert output.count("sync batch norm checks passed") == np_, output[-3000:]
