"""Runs a worker script on N processes under mpirun, with a timeout, for the pytest tests.

A worker asserts its results against numpy. If anything fails on any rank,
``worker_main`` prints the traceback and aborts the whole MPI job, so that no
rank is left waiting in a collective; the timeout here is the last line of
defence against a hang. Either way the test fails and shows every rank's
output.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

from tfdistrun import find_mpirun

ROOT = Path(__file__).resolve().parent.parent
WORKERS = Path(__file__).resolve().parent / "workers"
# The tfdist package the tests check, found before anything reorders sys.path
# (importing the benchmarks package moves the source tree to its end).
TFDIST_PACKAGE = Path(importlib.util.find_spec("tfdist").submodule_search_locations[0])


def mpi_environment(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
        # Workers import the installed tfdist; tests/ only for this harness.
        "PYTHONPATH": os.pathsep.join(filter(None, [env.get("PYTHONPATH"),
                                                    str(Path(__file__).resolve().parent)])),
        # Several processes on two cores: keep TensorFlow's thread pools small.
        "TF_NUM_INTRAOP_THREADS": env.get("TF_NUM_INTRAOP_THREADS", "1"),
        "TF_NUM_INTEROP_THREADS": env.get("TF_NUM_INTEROP_THREADS", "1"),
    })
    env.update(extra or {})
    return env


def run_workers(script: str, np: int, args: Sequence[str] = (), timeout: float = 240,
                env: Optional[Dict[str, str]] = None,
                expect_failure: bool = False) -> str:
    """Runs tests/workers/<script> on ``np`` ranks; returns the combined output.

    Fails the calling test if the job fails (or, with expect_failure, if it
    succeeds) or runs past ``timeout`` seconds. ``script`` may also be a path
    relative to the repository root (an example).
    """
    path = WORKERS / script if (WORKERS / script).exists() else ROOT / script
    command = [find_mpirun(), "-np", str(np), "--oversubscribe", "--bind-to", "none",
               sys.executable, str(path), *args]
    try:
        result = subprocess.run(command, env=mpi_environment(env), capture_output=True,
                                text=True, timeout=timeout, cwd=str(ROOT))
    except subprocess.TimeoutExpired as error:
        output = (error.stdout or b"")
        output = output.decode(errors="replace") if isinstance(output, bytes) else output
        raise AssertionError(f"{script} on {np} ranks hung past {timeout} s:\n{output[-6000:]}")
    output = result.stdout + result.stderr
    if expect_failure:
        assert result.returncode != 0, f"{script} on {np} ranks should have failed:\n{output[-6000:]}"
    else:
        assert result.returncode == 0, (
            f"{script} on {np} ranks failed (exit {result.returncode}):\n{output[-8000:]}")
    return output


def worker_main(body: Callable[[], None]) -> None:
    """Runs a worker's checks; on any failure, reports it and aborts every rank."""
    try:
        body()
    except SystemExit:
        raise  # a deliberate exit code (a preempted worker's) is its answer, not a failure
    except BaseException:  # noqa: BLE001  (any failure must reach every rank)
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        from mpi4py import MPI
        MPI.COMM_WORLD.Abort(1)
