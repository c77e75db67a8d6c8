"""TFDIST_STALL_SHUTDOWN_TIME: a job with a rank that stops submitting aborts, at np = 2, 3, 4.

Without the setting the job would wait forever (the test's timeout would
fire); with it every process ends, non-zero, a few seconds after the stall
began, and the report names the tensor and the rank that never sent it.
(The stall report without shutdown is checked in test_runtime_contract.py.)
"""
import time

import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_stall_shutdown_aborts_every_rank(np_):
    start = time.monotonic()
    output = run_workers("runtime_stall_shutdown.py", np_, timeout=120,
                         env={"TFDIST_STALL_CHECK_TIME": "1",
                              "TFDIST_STALL_SHUTDOWN_TIME": "4"},
                         expect_failure=True)
    assert time.monotonic() - start < 110
    for rank in range(np_):
        assert f"READY rank {rank}" in output, output[-4000:]
        assert f"SURVIVED rank {rank}" not in output, output[-4000:]
    # A cached tensor is first announced by bit; the report still finds the rank.
    assert "'cached.x' has waited" in output, output[-4000:]
    assert f"ranks that have not submitted it: {np_ - 1}" in output, output[-4000:]
    assert "longer than TFDIST_STALL_SHUTDOWN_TIME=4 s; aborting the job" in output
