"""Elastic training under MPI's fault tolerance (tests/mpi/test_elastic.py, benchmarks/elastic.py).

``python elastic_worker.py MODE OUT_DIR`` on 3 ranks. Every step each rank
computes a least-squares gradient from data that depends only on (step,
rank), averages it with tfdist (the ring algorithm: the test forces it),
and checks a second allreduce (Sum) against numpy for the current size.
The state (a TensorFlowState of the weights, the step) is committed every
step.

Modes:
- ``elastic``: rank 2 (ELASTIC_VICTIM) kills itself (SIGKILL) in step KILL_STEP while the
  others wait in its allreduce; ``tfdist.elastic.run`` recovers (with or
  without a replacement: the launcher's TFDIST_MAX_NP decides) and the
  job finishes STEPS steps.
- ``first_part``: steps 0..KILL_STEP-1 without elastic, then rank 0 saves
  the weights and the step to OUT_DIR/checkpoint.npz (the checkpoint).
- ``second_part``: restarts from that checkpoint at whatever size it is run
  with and finishes the steps.

Each rank prints ``DONE <rank> <size> <step> <weights as hex>``; a survivor
that recovered prints ``RECOVERED <rank> <size>``, a replacement ``JOINED
<rank> <size>``, and a survivor the recovery could not continue (--min-np)
``STOPPED <COMM_WORLD rank> <error class>: <message>`` before it exits with 1. Rank 0
writes the final weights to OUT_DIR/weights_<MODE>.npy.
"""
import os
import signal
import sys
import time

import numpy as np
import tensorflow as tf
from mpi4py import MPI

import tfdist
from tfdist.elastic import membership

STEPS, KILL_STEP = 8, 3
# The rank that is killed, as the job started (COMM_WORLD; a replacement is never it).
VICTIM = int(os.environ.get("ELASTIC_VICTIM", "2"))
FEATURES, BATCH, LEARNING_RATE = 16, 8, 0.05


def batch(step: int, rank: int):
    rng = np.random.RandomState(1000 * step + rank)
    x = rng.normal(0, 1, (BATCH, FEATURES)).astype(np.float32)
    y = (x @ np.linspace(-1, 1, FEATURES, dtype=np.float32)).astype(np.float32)
    return tf.constant(x), tf.constant(y)


def train_step(weights: tf.Variable, state, mode: str) -> None:
    rank, size = tfdist.rank(), tfdist.size()
    if (mode == "elastic" and MPI.COMM_WORLD.Get_rank() == VICTIM
            and state.step == KILL_STEP and not membership.joined_as_replacement()):
        time.sleep(1.0)  # the others are waiting in this step's allreduce by now
        os.kill(os.getpid(), signal.SIGKILL)
    # A collective checked against numpy at the current size.
    mine = np.full(5, (rank + 1) * (state.step + 1), dtype=np.float32)
    total = tfdist.allreduce(tf.constant(mine), op=tfdist.Sum, name="check_sum").numpy()
    expected = np.full(5, (state.step + 1) * size * (size + 1) / 2, dtype=np.float32)
    np.testing.assert_array_equal(total, expected)
    x, y = batch(state.step, rank)
    residual = tf.linalg.matvec(x, weights) - y
    gradient = tf.linalg.matvec(x, residual, transpose_a=True) / BATCH
    average = tfdist.allreduce(gradient, op=tfdist.Average, name="gradient")
    weights.assign_sub(LEARNING_RATE * average)
    state.step += 1
    state.commit()


def main(mode: str, out_dir: str) -> None:
    tfdist.init()
    weights = tf.Variable(tf.zeros([FEATURES]), name="weights")
    state = tfdist.elastic.TensorFlowState([weights], step=0)
    if mode == "second_part":
        saved = np.load(os.path.join(out_dir, "checkpoint.npz"))
        weights.assign(saved["weights"])
        state.step = int(saved["step"])
    if membership.joined_as_replacement():
        print(f"JOINED {tfdist.rank()} {tfdist.size()}", flush=True)
    state.register_reset_callbacks([
        lambda: print(f"RECOVERED {tfdist.rank()} {tfdist.size()}", flush=True)])
    last = KILL_STEP if mode == "first_part" else STEPS

    @tfdist.elastic.run
    def train(state) -> None:
        while state.step < last:
            train_step(weights, state, mode)

    try:
        train(state)
    except tfdist.elastic.ElasticJobError as error:
        print(f"STOPPED {MPI.COMM_WORLD.Get_rank()} {type(error).__name__}: {error}",
              flush=True)
        sys.exit(1)
    rank, size = tfdist.rank(), tfdist.size()
    print(f"DONE {rank} {size} {state.step} {weights.numpy().tobytes().hex()}", flush=True)
    if rank == 0:
        if mode == "first_part":
            np.savez(os.path.join(out_dir, "checkpoint.npz"), weights=weights.numpy(),
                     step=state.step)
        np.save(os.path.join(out_dir, f"weights_{mode}.npy"), weights.numpy())
    tfdist.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
