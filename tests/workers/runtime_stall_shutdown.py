"""The last rank stops submitting; with TFDIST_STALL_SHUTDOWN_TIME the job aborts.

Run by tests/mpi/test_runtime_stall.py with TFDIST_STALL_CHECK_TIME=1 and
TFDIST_STALL_SHUTDOWN_TIME=4. "cached.x" runs a few times (so it is in the
response cache and announced by one bit), then the last rank withholds it:
the others must still find out and report which rank is missing, then abort
the job. The withholding rank sleeps far longer than the test's timeout, so
the job ends only if the abort works.
"""
import time

import numpy as np
import tensorflow as tf

import tfdist
from mpi_harness import worker_main


def body():
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    for _ in range(3):
        x = tfdist.allreduce(tf.ones([3]), op=tfdist.Sum, name="cached.x")
        np.testing.assert_allclose(x.numpy(), np.full(3, size))
    print(f"READY rank {rank}", flush=True)
    if rank == size - 1:
        time.sleep(600)
        print(f"SURVIVED rank {rank}", flush=True)
        return
    tfdist.allreduce(tf.ones([3]), op=tfdist.Sum, name="cached.x")
    print(f"SURVIVED rank {rank}", flush=True)


if __name__ == "__main__":
    worker_main(body)
