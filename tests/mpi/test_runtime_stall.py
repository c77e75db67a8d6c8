"""TFDIST_STALL_SHUTDOWN_TIME: a job with a rank that stops submitting aborts (by default
after 600 s), at np = 3, and at np = 2 in the doubling-interval test; a long stall is
reported at doubling intervals; a rank that waits long in join() is reported and does not
abort the job.

Without the setting the job would wait forever (the test's timeout would
fire); with it every process ends, non-zero, a few seconds after the stall
began, and the report names the tensor and the rank that never sent it.
(The stall report without shutdown is checked in test_runtime_contract.py.)
"""
import time

import pytest

from mpi_harness import run_workers


# np 3: more than one rank waits, and the report must name the one that is missing. The
# doubling-interval test below is the same job at np 2.
@pytest.mark.parametrize("np_", [3])
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


def test_a_long_stall_is_reported_at_doubling_intervals_not_every_second():
    # With a 1 s check and a 9 s shutdown: reports at about 1 s (the cached tensor's
    # missing rank still unknown), 2 s (named), 4 s, 8 s, and the abort's at 9 s;
    # a report every second would print 9 or 10.
    output = run_workers("runtime_stall_shutdown.py", 2, timeout=120,
                         env={"TFDIST_STALL_CHECK_TIME": "1",
                              "TFDIST_STALL_SHUTDOWN_TIME": "9"},
                         expect_failure=True)
    reports = output.count("tfdist stall (rank 0): 'cached.x' has waited")
    assert 4 <= reports <= 6, output[-4000:]
    assert "reported again at doubling intervals" in output, output[-4000:]
    assert "set TFDIST_STALL_SHUTDOWN_TIME=0 to wait forever" in output, output[-4000:]


# np 3: the report names several ranks that have not joined ("ranks 0, 1").
@pytest.mark.parametrize("np_", [3])
def test_long_join_is_reported_but_does_not_abort(np_):
    output = run_workers("runtime_join_wait.py", np_, timeout=120,
                         env={"TFDIST_STALL_CHECK_TIME": "1",
                              "TFDIST_STALL_SHUTDOWN_TIME": "4"})
    for rank in range(np_):
        assert f"JOINED rank {rank}" in output, output[-4000:]
    waiting_for = "rank 0" if np_ == 2 else "ranks 0, 1"
    assert (f"tfdist (rank {np_ - 1}): has waited" in output
            and f"in join() for {waiting_for} to join" in output), output[-4000:]
    assert "aborting the job" not in output
