"""What the other ranks see when a peer exits or dies while they wait in a collective.

A rank that exits (SystemExit) makes the others' waiting collectives fail
with a message that names it and says that they stop because of it, not
that somebody called tfdist.shutdown(). Under ULFM (``mpirun --with-ft
ulfm``) a killed rank is MPI_ERR_PROC_FAILED on the survivors (or
MPI_ERR_REVOKED: the first to see it revokes tfdist's communicators), marked
as a membership change: a Python
exception naming the failed rank, not an abort, even when the user's
communicator is MPI_ERRORS_ARE_FATAL, and the survivors exit.
"""
import sys
from typing import Dict, List

from mpi_harness import WORKERS, run_command, run_workers
from tfdistrun import find_mpirun


def survivors(output: str) -> Dict[int, str]:
    lines: Dict[int, str] = {}
    for line in output.splitlines():
        if line.startswith("SURVIVOR "):
            _, rank, rest = line.split(" ", 2)
            lines[int(rank)] = rest
    return lines


def test_a_peer_that_exits_is_named_on_the_others():
    output = run_workers("peer_failure_worker.py", 2, args=["exit"], timeout=240,
                         expect_failure=True)
    seen = survivors(output)
    assert set(seen) == {0}, output[-6000:]
    message = seen[0]
    assert message.startswith("AbortedError"), message
    assert "rank 1 is exiting" in message and "this rank (0) stops too" in message, message
    assert "tfdist.shutdown() was called" not in message, message


def run_ulfm(mode: str) -> str:
    command: List[str] = [find_mpirun(), "--with-ft", "ulfm", "-np", "3", "--oversubscribe",
                          "--bind-to", "none", sys.executable,
                          str(WORKERS / "peer_failure_worker.py"), mode]
    result = run_command(command, timeout=240)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-6000:]
    return output


def test_a_killed_peer_under_ulfm_is_an_exception_on_the_survivors():
    output = run_ulfm("ulfm")
    assert output.count("BEFORE OK") == 3, output[-6000:]
    seen = survivors(output)
    assert set(seen) == {0, 1}, output[-6000:]
    for rank, message in seen.items():
        assert message.startswith("InternalError"), message
        # A neighbour of the dead rank sees it fail; it revokes tfdist's
        # communicators, so the others' waits end with MPI_ERR_REVOKED.
        assert "MPI_ERR_PROC_FAILED" in message or "MPI_ERR_REVOKED" in message, message
        # The failure detector's notice may come after the revoke; then the
        # message can only say that a peer failed.
        assert "rank 2 has failed" in message or "a peer process failed" in message, message
        assert "[tfdist: ranks changed]" in message, message
        assert f"tfdist stopped on this rank ({rank})" in message, message
    assert any("rank 2 has failed" in message for message in seen.values()), seen


def test_survivors_exit_when_mpi_finalize_never_returns():
    """After a peer failed, Open MPI's MPI_Finalize can wait for good for the dead process;
    the survivors give it a bounded time, say so, and exit (runtime.py's exit guard)."""
    output = run_ulfm("ulfm_stuck_exit")
    assert set(survivors(output)) == {0, 1}, output[-6000:]
    assert output.count("tfdist: MPI did not finish within 20 s") == 2, output[-6000:]
