"""The test harness's own contract: a job past its timeout fails the test with every
rank's Python stack, and leaves no process behind (tests/mpi_harness.py)."""
import subprocess
import sys
import time

import pytest

from mpi_harness import _descendants, run_command

# A "launcher" that starts a "rank" which hangs in a function of its own, in a thread.
HANGING_JOB = (
    "import subprocess, sys\n"
    "rank = ('import threading, time\\n'\n"
    "        'def stuck_in_a_collective():\\n'\n"
    "        '    time.sleep(600)\\n'\n"
    "        'threading.Thread(target=stuck_in_a_collective).start()\\n'\n"
    "        'print(\"rank up\", flush=True)\\n'\n"
    "        'time.sleep(600)\\n')\n"
    "subprocess.run([sys.executable, '-c', rank])\n")


def test_a_hung_job_shows_its_ranks_stacks_and_leaves_nothing_running():
    started = time.monotonic()
    with pytest.raises(AssertionError) as failure:
        # The launcher's argv names tfdistrun, as the real one's does: it is left
        # running to forward output while the rank prints its stacks.
        run_command([sys.executable, "-c", HANGING_JOB, "tfdistrun"], timeout=3)
    message = str(failure.value)
    assert "hung past 3 s" in message and "rank up" in message, message
    assert "Fatal Python error: Aborted" in message, message
    assert "in stuck_in_a_collective" in message, message
    assert time.monotonic() - started < 30


def test_descendants_are_found_through_every_generation():
    grandchild = "import time; time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c",
                              f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                              f"{grandchild!r}])"])
    try:
        deadline = time.monotonic() + 20
        while len(_descendants(child.pid)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = _descendants(child.pid)
        assert len(found) == 1 and "time.sleep(30)" in found[0][1], found
    finally:
        for pid, _ in _descendants(child.pid):
            subprocess.run(["kill", "-9", str(pid)])
        child.kill()
        child.wait()
