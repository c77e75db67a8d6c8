"""A warm spare's program: ``python -c BOOT --parent HOST:PID -- PROGRAM ...`` (spares.py).

Rank 0 of an elastic job spawns it (tfdist/elastic/spares.py). It starts
MPI first (rank 0's spawn returns then), says hello to rank 0, imports
TensorFlow, and runs the job's program (``script.py args`` or ``-m module
args``, as the ranks run it) with ``tfdist.init()`` made to wait until the
job needs this process: it then returns with this process as the job's
last rank, and the program carries on as a replacement would. When the job
ends without needing it (or its rank 0 died), ``init()`` ends the spare,
with exit code 0. Its output goes where every rank's goes (mpirun's).
"""
from __future__ import annotations

import os
import runpy
import sys
from typing import List, Optional

from mpi4py import MPI  # first: MPI_Init completes rank 0's spawn

from tfdist import _communicator
from tfdist.elastic import membership, spares


def _run_program(program: List[str]) -> None:
    """Runs the job's program as ``python PROGRAM`` would, in this process."""
    if program[0] == "-m":
        sys.argv = [program[1], *program[2:]]
        runpy.run_module(program[1], run_name="__main__", alter_sys=True)
    else:
        path = os.path.abspath(program[0])
        sys.argv = [path, *program[1:]]
        sys.path.insert(0, os.path.dirname(path))
        runpy.run_path(path, run_name="__main__")


def main(argv: Optional[List[str]] = None) -> int:
    host, pid, program = spares.parse_spare_arguments(sys.argv[1:] if argv is None else argv)
    parent = MPI.Comm.Get_parent()
    if parent == MPI.COMM_NULL:
        raise SystemExit(f"{spares.SPARE_MODULE} is started by elastic recovery's rank 0 "
                         "(MPI_Comm_spawn), not by hand")
    spares.become_spare(parent, host, pid)

    def wait():
        return membership.join_as_spare(spares.wait_until_needed())

    _communicator.wait_as_spare(wait)
    import tensorflow  # noqa: F401  (the slow import, done before the job needs this process)
    try:
        _run_program(program)
    except spares.SpareReleased:
        return 0  # MPI_Finalize at exit (PRRTE takes an exit without it for a failure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
