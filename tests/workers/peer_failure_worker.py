"""A peer leaves while the other ranks wait in an allreduce; the others print their error.

``exit``: rank 1 raises SystemExit(3) (np = 2). ``ulfm``: under
``mpirun --with-ft ulfm``, rank 2 kills itself with SIGKILL (np = 3), and
tfdist runs on a duplicate of COMM_WORLD whose error handler is
MPI_ERRORS_ARE_FATAL, which tfdist must neither inherit nor change.

Each survivor prints ``SURVIVOR <rank> <error class>: <message>`` and exits
with 1; tests/mpi/test_peer_failure.py reads those lines. ``ulfm_stuck_exit`` is
``ulfm`` with an exit that never ends by itself after tfdist's handler.
"""
import atexit
import os
import signal
import sys
import time

import numpy as np
import tensorflow as tf
from mpi4py import MPI

import tfdist


def main(mode: str) -> None:
    if mode == "ulfm_stuck_exit":
        # Runs after tfdist's exit handler, as mpi4py's MPI_Finalize does, and
        # stands in for a finalize that waits for good for the dead process.
        atexit.register(time.sleep, 600)
        mode = "ulfm"
    comm = MPI.COMM_WORLD.Dup()
    if mode == "ulfm":
        comm.Set_errhandler(MPI.ERRORS_ARE_FATAL)
    tfdist.init(comm=comm)
    rank, size = tfdist.rank(), tfdist.size()
    if mode == "ulfm":
        assert comm.Get_errhandler() == MPI.ERRORS_ARE_FATAL, "tfdist changed the user's handler"
    # tfdist works on the duplicate before anything fails.
    values = np.arange(6, dtype=np.float32) * (rank + 1)
    total = tfdist.allreduce(tf.constant(values), op=tfdist.Sum, name="before").numpy()
    expected = np.arange(6, dtype=np.float32) * sum(r + 1 for r in range(size))
    np.testing.assert_allclose(total, expected)
    print(f"RANK {rank} BEFORE OK", flush=True)

    leaver = 1 if mode == "exit" else 2
    if rank == leaver:
        time.sleep(1.0)  # the others are in the allreduce by now
        if mode == "exit":
            raise SystemExit(3)
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        tfdist.allreduce(tf.ones([1024]), name="after")
    except Exception as error:  # noqa: BLE001  (the test reads the class and message)
        message = str(error).replace("\n", " ")
        print(f"SURVIVOR {rank} {type(error).__name__}: {message}", flush=True)
        sys.exit(1)
    print(f"SURVIVOR {rank} got no error", flush=True)
    sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1])
