"""Elastic training under MPI's fault tolerance (ULFM), at np = 3.

tests/workers/elastic_worker.py trains a least-squares model for 8 steps,
committing every step; rank 2 is killed with SIGKILL in step 3 while the
others wait in its allreduce. Every step also checks an allreduce against
numpy at the current size. The tests check that:

- the survivors recover and finish at np = 2 (no replacement), and their
  weights are bit for bit those of a run that goes from 3 to 2 ranks at the
  same committed step by checkpoint and restart (the ring algorithm forced);
- with tfdistrun --elastic (--max-np defaults to -np) a replacement is
  spawned, joins as rank 2, and all three finish with the same weights;
- with --min-np 3 every survivor stops with a clear ElasticJobError.
"""
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from mpi_harness import ROOT, WORKERS, mpi_environment
from tfdistrun import find_mpirun

WORKER = str(WORKERS / "elastic_worker.py")
# The ring algorithm forced (the bit-identical comparison needs the same
# algorithm at every size); given link costs spare every init the measurement.
RING = {"TFDIST_ALLREDUCE_ALGORITHM": "ring", "TFDIST_LATENCY": "1e-5",
        "TFDIST_SECONDS_PER_BYTE": "1e-9"}
TIMEOUT = 240


def run(command: List[str], env: Dict[str, str]) -> str:
    try:
        result = subprocess.run(command, env=mpi_environment(env), capture_output=True,
                                text=True, timeout=TIMEOUT, cwd=str(ROOT))
    except subprocess.TimeoutExpired as error:
        output = error.stdout.decode(errors="replace") if isinstance(error.stdout, bytes) \
            else (error.stdout or "")
        raise AssertionError(f"the job hung past {TIMEOUT} s:\n{output[-6000:]}")
    return f"(exit {result.returncode})\n" + result.stdout + result.stderr


def launch(np_: int, mode: str, out: Path, options: List[str] = (),
           env: Dict[str, str] = None) -> str:
    """tfdistrun [options] -np N python elastic_worker.py MODE OUT."""
    return run([sys.executable, str(ROOT / "tfdistrun.py"), *options, "-np", str(np_),
                sys.executable, WORKER, mode, str(out)], {**RING, **(env or {})})


def lines(output: str, tag: str) -> Dict[int, List[str]]:
    """``TAG <rank> rest...`` lines, by rank."""
    found: Dict[int, List[str]] = {}
    for line in output.splitlines():
        if line.startswith(tag + " "):
            _, rank, *rest = line.split(" ")
            found[int(rank)] = rest
    return found


@pytest.fixture(scope="module")
def shrunk(tmp_path_factory):
    """The elastic job without replacements (TFDIST_MAX_NP=2 < 3 ranks), by mpirun itself."""
    out = tmp_path_factory.mktemp("shrunk")
    command = [find_mpirun(), "--with-ft", "ulfm", "-np", "3", "--oversubscribe",
               "--bind-to", "none", "-x", "TFDIST_ELASTIC", "-x", "TFDIST_MAX_NP",
               *[arg for name in RING for arg in ("-x", name)], sys.executable, WORKER, "elastic", str(out)]
    return run(command, {**RING, "TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "2"}), out


def test_survivors_carry_on_at_two_ranks_after_a_kill(shrunk):
    output, _ = shrunk
    assert set(lines(output, "RECOVERED")) == {0, 1}, output[-6000:]
    assert all(rest == ["2"] for rest in lines(output, "RECOVERED").values()), output[-6000:]
    done = lines(output, "DONE")
    assert set(done) == {0, 1}, output[-6000:]
    assert all(rest[:2] == ["2", "8"] for rest in done.values()), output[-6000:]
    assert done[0][2] == done[1][2], "the survivors' weights differ"
    assert "JOINED" not in output, output[-6000:]


def test_recovery_is_bit_identical_to_checkpoint_and_restart(shrunk, tmp_path):
    output, out = shrunk
    first = launch(3, "first_part", tmp_path)
    assert len(lines(first, "DONE")) == 3, first[-6000:]
    # Without --elastic, run() calls the function once and says why recovery is off.
    assert "elastic recovery is off (the job was not started with tfdistrun --elastic)" \
        in first, first[-6000:]
    second = launch(2, "second_part", tmp_path)
    assert set(lines(second, "DONE")) == {0, 1}, second[-6000:]
    elastic = np.load(out / "weights_elastic.npy")
    restarted = np.load(tmp_path / "weights_second_part.npy")
    assert elastic.tobytes() == restarted.tobytes(), (elastic, restarted)
    # Training moved the weights (a comparison of two untouched zeros proves nothing).
    assert np.abs(elastic).max() > 0.05, elastic


def test_a_replacement_joins_and_the_job_is_back_at_three(tmp_path):
    output = launch(3, "elastic", tmp_path, ["--elastic"])
    assert lines(output, "JOINED") == {2: ["3"]}, output[-6000:]
    assert set(lines(output, "RECOVERED")) == {0, 1}, output[-6000:]
    done = lines(output, "DONE")
    assert set(done) == {0, 1, 2}, output[-6000:]
    assert all(rest[:2] == ["3", "8"] for rest in done.values()), output[-6000:]
    assert len({rest[2] for rest in done.values()}) == 1, "the ranks' weights differ"


def test_fewer_survivors_than_min_np_stop_clearly(tmp_path):
    output = launch(3, "elastic", tmp_path, ["--elastic", "--min-np", "3"])
    stopped = lines(output, "STOPPED")
    assert set(stopped) == {0, 1}, output[-6000:]
    for rest in stopped.values():
        message = " ".join(rest)
        assert message.startswith("ElasticJobError:"), message
        assert "only 2 rank(s) survived, fewer than --min-np 3" in message, message
    assert "DONE" not in output, output[-6000:]
