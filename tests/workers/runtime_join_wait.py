"""A long wait in join() is reported but is not a stall: the job must not abort.

Run by tests/mpi/test_runtime_stall.py with TFDIST_STALL_CHECK_TIME=1 and
TFDIST_STALL_SHUTDOWN_TIME=4. The last rank joins at once; the others keep
it waiting for 6 s, then run allreduces (which it stands in for) and join.
"""
import time

import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import worker_main


def body():
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    if rank == size - 1:
        assert tfdist.join() == size - 2
    else:
        time.sleep(6)
        for _ in range(3):
            x = tfdist.allreduce(tf.ones([3]), op=tfdist.Sum, name="after.wait")
            np.testing.assert_allclose(x.numpy(), np.full(3, size - 1))
        time.sleep(0.2 * rank)  # the highest of them joins last
        assert tfdist.join() == size - 2
    print(f"JOINED rank {rank}", flush=True)


if __name__ == "__main__":
    worker_main(body)
