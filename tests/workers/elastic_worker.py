"""Elastic training under MPI's fault tolerance (tests/mpi/test_elastic.py, benchmarks/elastic.py).

``python elastic_worker.py MODE OUT_DIR`` on 3 ranks. Every step each rank
computes a least-squares gradient from data that depends only on (step,
rank), averages it with tfdist (the ring algorithm: the test forces it),
and checks a second allreduce (Sum) against numpy for the current size.
The state (a TensorFlowState of the weights, the step) is committed every
step.

Modes:
- ``elastic``: rank 2 (ELASTIC_VICTIM) kills itself (SIGKILL) in step KILL_STEP while the
  others wait in its allreduce (or, with ELASTIC_KILL_IN=commit, in the middle
  of its State.commit() at the end of that step, the others waiting in the
  next step's allreduce); ``tfdist.elastic.run`` recovers (with or without a
  replacement: the launcher's TFDIST_MAX_NP decides) and the job finishes
  STEPS steps.
- ``faults``: several failures in one job, at np 3 without replacements (short
  stall times set by the test). In step STALL_STEP world rank 1 sleeps
  instead of calling the step's allreduce: the stall inspector evicts it
  (it ends itself with SIGKILL) and the two others carry on. At the start of step
  SAVE_STEP every rank saves a checkpoint (tfdist.checkpoint.save, blocking)
  to OUT_DIR/checkpoints; world rank 0, the writer, is killed after writing
  the temporary file and before renaming it: the last rank redoes the save
  and finishes alone. It then restores the newest checkpoint into a fresh
  variable and prints ``CHECKPOINT <rank> <step> <weights as hex> <the files in the folder>``.
- ``first_part``: steps 0..KILL_STEP-1 without elastic, then rank 0 saves
  the weights and the step to OUT_DIR/checkpoint.npz (the checkpoint).
- ``second_part``: restarts from that checkpoint at whatever size it is run
  with and finishes the steps.

Each rank prints ``DONE <rank> <size> <step> <weights as hex>``; a survivor
that recovered prints ``RECOVERED <rank> <size>``, a replacement ``JOINED
<rank> <size>``, and a survivor the recovery could not continue (--min-np)
``STOPPED <COMM_WORLD rank> <error class>: <message>`` before it exits with 1.
After every reset a rank also prints ``RESET <COMM_WORLD rank> <rank> <size>
<step> <local_size> <cross_size>`` (the step it resumes at, its host's ranks
and the number of hosts). Rank 0 writes the final weights to
OUT_DIR/weights_<MODE>.npy.
"""
import os
import signal
import sys
import time

import numpy as np
import tensorflow as tf
from mpi4py import MPI

import tfdist
import tfdist.runtime  # kill_during_commit replaces its rank_state
from tfdist.elastic import membership

STEPS, KILL_STEP = 8, 3
STALL_STEP, SAVE_STEP = 2, 4  # faults mode
# The rank that is killed, as the job started (COMM_WORLD; a replacement is never it).
VICTIM = int(os.environ.get("ELASTIC_VICTIM", "2"))
KILL_IN = os.environ.get("ELASTIC_KILL_IN", "allreduce")  # or "commit"
FEATURES, BATCH, LEARNING_RATE = 16, 8, 0.05


def batch(step: int, rank: int):
    rng = np.random.RandomState(1000 * step + rank)
    x = rng.normal(0, 1, (BATCH, FEATURES)).astype(np.float32)
    y = (x @ np.linspace(-1, 1, FEATURES, dtype=np.float32)).astype(np.float32)
    return tf.constant(x), tf.constant(y)


def die(after: float = 1.0) -> None:
    """SIGKILL of this process, once the others wait for it (``after`` seconds)."""
    time.sleep(after)
    os.kill(os.getpid(), signal.SIGKILL)


def original() -> bool:
    """Whether this process is one of the job's first (not a replacement)."""
    return not membership.joined_as_replacement()


def kill_during_commit() -> None:
    """From now on this rank dies in the middle of its next State.commit(): after the
    variables and attributes are copied, when the state asks for the compressor state."""
    tfdist.runtime.rank_state = lambda: die()


def kill_during_checkpoint_write(out_dir: str) -> None:
    """This rank (the checkpoint writer) dies after writing the checkpoint's temporary
    file, before its fsync and rename; OUT_DIR/killed_writing names that file."""
    from tfdist.checkpoint import file_format
    write = file_format.write

    def write_then_die(path, contents):
        write(path, contents)
        with open(os.path.join(out_dir, "killed_writing"), "w") as note:
            note.write(path)
        die(after=0.2)

    file_format.write = write_then_die


def train_step(weights: tf.Variable, state, mode: str) -> None:
    rank, size = tfdist.rank(), tfdist.size()
    world = MPI.COMM_WORLD.Get_rank()
    if (mode == "elastic" and world == VICTIM and state.step == KILL_STEP and original()):
        if KILL_IN == "commit":
            kill_during_commit()
        else:
            die()  # the others are waiting in this step's allreduce by now
    if mode == "faults" and world == 1 and state.step == STALL_STEP and size == 3:
        time.sleep(600)  # stuck outside tfdist: the others evict this rank
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
    state.register_reset_callbacks([
        lambda: print(f"RESET {MPI.COMM_WORLD.Get_rank()} {tfdist.rank()} {tfdist.size()} "
                      f"{state.step} {tfdist.local_size()} {tfdist.cross_size()}", flush=True)])
    last = KILL_STEP if mode == "first_part" else STEPS
    checkpoints = os.path.join(out_dir, "checkpoints")

    @tfdist.elastic.run
    def train(state) -> None:
        while state.step < last:
            if mode == "faults" and state.step == SAVE_STEP:
                if MPI.COMM_WORLD.Get_rank() == 0:
                    kill_during_checkpoint_write(out_dir)
                tfdist.checkpoint.save(checkpoints, state.step, variables=[weights],
                                       blocking=True)
            train_step(weights, state, mode)

    try:
        train(state)
    except tfdist.elastic.ElasticJobError as error:
        print(f"STOPPED {MPI.COMM_WORLD.Get_rank()} {type(error).__name__}: {error}",
              flush=True)
        sys.exit(1)
    rank, size = tfdist.rank(), tfdist.size()
    print(f"DONE {rank} {size} {state.step} {weights.numpy().tobytes().hex()}", flush=True)
    if mode == "faults":
        probe = tf.Variable(tf.zeros([FEATURES]))
        restored = tfdist.checkpoint.restore(checkpoints, variables=[probe])
        print(f"CHECKPOINT {rank} {restored.step} {probe.numpy().tobytes().hex()} "
              f"{' '.join(sorted(os.listdir(checkpoints)))}", flush=True)
    if rank == 0:
        if mode == "first_part":
            np.savez(os.path.join(out_dir, "checkpoint.npz"), weights=weights.numpy(),
                     step=state.step)
        np.save(os.path.join(out_dir, f"weights_{mode}.npy"), weights.numpy())
    tfdist.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
