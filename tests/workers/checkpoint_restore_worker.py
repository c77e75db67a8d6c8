"""tests/test_checkpoint_restart.py: restore's broadcast path, value by value, on every rank.

    checkpoint_restore_worker.py DIR

Rank 0 reads and verifies the file into its snapshot buffers, then two
threads broadcast and assign the variables one by one. Every rank checks,
bit for bit, against values it computes itself with numpy from the
variable's index and the step (never from the file or from another rank):

- a restore of step 3 and of step 5 into variables zeroed first, of several
  dtypes (float32, float64, bfloat16, int64) and sizes (scalars to 1.5 MB);
- a checkpoint that does not fit (one variable of another shape) is refused
  on every rank and no variable changes;
- a damaged newest file (a flipped byte in one array) falls back to step 3;
- a save right after a restore (it reuses the buffers the restore read
  into) writes exactly the restored values.
"""
import os
import sys

import numpy as np

from mpi_harness import worker_main

SHAPES = [(), (7,), (300, 500), (64, 64), (1, 3, 5), (200_000,), (0,), (3,)]
DTYPES = ["float32", "float64", "float32", "bfloat16", "float32", "float32", "float32", "int64"]


def expected(index, step):
    """Variable ``index``'s value at ``step``, from numpy alone."""
    import ml_dtypes
    rng = np.random.RandomState(1000 * step + index)
    values = rng.standard_normal(SHAPES[index]) * (step + 1)
    if DTYPES[index] == "int64":
        return (values * 1000).astype(np.int64)
    if DTYPES[index] == "bfloat16":
        return values.astype(ml_dtypes.bfloat16)
    return values.astype(DTYPES[index])


def check(variables, step, what):
    for index, variable in enumerate(variables):
        got = np.asarray(variable.numpy())
        want = expected(index, step)
        assert got.dtype == want.dtype and got.shape == want.shape, (what, index, got.dtype)
        assert got.tobytes() == want.tobytes(), f"{what}: variable {index} differs from step {step}"


def body() -> None:
    import tensorflow as tf
    import tfdist.checkpoint as ckpt
    import tfdist.keras as hvd
    hvd.init()
    directory = sys.argv[1]
    variables = [tf.Variable(np.zeros(shape, dtype=expected(i, 0).dtype), name=f"v{i}")
                 for i, shape in enumerate(SHAPES)]

    def set_step(step):
        for index, variable in enumerate(variables):
            variable.assign(expected(index, step))

    def zero():
        for variable in variables:
            variable.assign(tf.zeros_like(variable))

    for step in (3, 5):
        set_step(step)
        ckpt.save(directory, step, variables=variables)
    ckpt.wait()

    for step in (5, 5):  # twice: the second reads into the buffers the first read into
        zero()
        restored = ckpt.restore(directory, variables=variables)
        assert restored.step == 5, restored
        check(variables, 5, "restore")

    # Another shape: refused on every rank, nothing modified.
    wrong = list(variables)
    wrong[2] = tf.Variable(np.zeros((300, 501), np.float32))
    set_step(7)
    try:
        ckpt.restore(directory, variables=wrong)
    except ckpt.CheckpointError as error:
        assert "(300, 500)" in str(error) and "(300, 501)" in str(error), str(error)
    else:
        raise AssertionError("a restore into a variable of another shape did not fail")
    check(variables, 7, "after a refused restore")
    assert not np.asarray(wrong[2].numpy()).any()

    # A flipped byte in the newest file's largest array: step 3 on every rank.
    newest = os.path.join(directory, "ckpt-0000000005.h5")
    if hvd.rank() == 0:
        data = bytearray(open(newest, "rb").read())
        where = data.find(expected(5, 5).tobytes()[:256])
        assert where > 0
        data[where + 100_000] ^= 0x10
        open(newest, "wb").write(bytes(data))
    hvd.barrier()
    zero()
    assert ckpt.restore(directory, variables=variables).step == 3
    check(variables, 3, "fallback")

    # A save right after a restore writes what was restored.
    ckpt.save(directory, 9, variables=variables, blocking=True)
    if hvd.rank() == 0:
        contents = ckpt.file_format.read(os.path.join(directory, "ckpt-0000000009.h5"))
        for index, array in enumerate(contents.groups["variables"]):
            assert array.tobytes() == expected(index, 3).tobytes(), index
    gathered = hvd.allgather(np.concatenate(
        [np.ravel(np.asarray(v.numpy())).astype(np.float64) for v in variables])[None, :]).numpy()
    assert (gathered == gathered[0]).all()
    print(f"rank {hvd.rank()} of {hvd.size()}: restores checked", flush=True)


if __name__ == "__main__":
    worker_main(body)
