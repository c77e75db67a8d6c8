"""tests/e2e/test_checkpoint_restart.py: restore's pipelined transfer, value by value, on every rank.

    checkpoint_restore_worker.py DIR

Rank 0 reads and verifies the file into its snapshot buffers while threads
broadcast each array as soon as it is read (arrays under 1 MiB packed
together); every rank keeps the values aside and assigns them only once the
whole file has verified. Every rank checks, bit for bit, against values it
computes itself with numpy from the variable's index and the step (never
from the file or from another rank):

- a restore of step 5 into variables zeroed first, of several dtypes
  (float32, float64, bfloat16, int64, bool) and sizes (scalars to 2.9 MB,
  one ending in a partial 4 KiB block), with the file out of rank 0's page
  cache (read past it, O_DIRECT) and in it; and with small packs (several
  broadcasts of packed variables); no variable shares memory with the
  snapshot buffers rank 0 read into and sent from, even when the broadcast
  gives rank 0 its input back;
- a checkpoint that does not fit (one variable of another shape), on every
  rank or on one rank only, is refused on every rank and no variable
  changes on any;
- a newer file that does not fit but is damaged is skipped, not refused;
- a damaged newest file (a flipped byte in its last array, found after the
  earlier arrays were sent) falls back to step 3;
- a save right after a restore (it reuses the buffers the restore read
  into) writes exactly the restored values;
- when every file is damaged, restore raises and no variable changes.
"""
import os
import sys

import numpy as np

from mpi_harness import worker_main

SHAPES = [(), (7,), (300, 500), (64, 64), (1, 3, 5), (200_000,), (0,), (3,), (5,),
          (700, 1024), (300_001,)]
DTYPES = ["float32", "float64", "float32", "bfloat16", "float32", "float32", "float32", "int64",
          "bool", "float32", "float64"]


def expected(index, step):
    """Variable ``index``'s value at ``step``, from numpy alone."""
    import ml_dtypes
    rng = np.random.RandomState(1000 * step + index)
    values = rng.standard_normal(SHAPES[index]) * (step + 1)
    if DTYPES[index] == "int64":
        return (values * 1000).astype(np.int64)
    if DTYPES[index] == "bool":
        return values > 0
    if DTYPES[index] == "bfloat16":
        return values.astype(ml_dtypes.bfloat16)
    return values.astype(DTYPES[index])


def check(variables, step, what):
    for index, variable in enumerate(variables):
        got = np.asarray(variable.numpy())
        want = expected(index, step)
        assert got.dtype == want.dtype and got.shape == want.shape, (what, index, got.dtype)
        assert got.tobytes() == want.tobytes(), f"{what}: variable {index} differs from step {step}"


def flip_byte(path, index, step, where):
    """Flips one byte of variable ``index``'s bytes in the checkpoint file (rank 0)."""
    data = bytearray(open(path, "rb").read())
    start = data.find(expected(index, step).tobytes()[:256])
    assert start > 0, (path, index)
    data[start + where] ^= 0x10
    with open(path, "wb") as handle:
        handle.write(bytes(data))
        handle.flush()
        os.fsync(handle.fileno())


def evict(path):
    """Drops the file from rank 0's page cache: the restore then reads it past the cache."""
    descriptor = os.open(path, os.O_RDONLY)
    os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(descriptor)


def body() -> None:
    import tensorflow as tf
    import tfdist.checkpoint as ckpt
    import tfdist.keras as hvd
    from tfdist import ops
    from tfdist.checkpoint import transfer
    from tfdist.checkpoint import _api as checkpoint_api
    hvd.init()
    directory = sys.argv[1]
    root = hvd.rank() == 0
    variables = [tf.Variable(np.zeros(shape, dtype=expected(i, 0).dtype), name=f"v{i}")
                 for i, shape in enumerate(SHAPES)]

    def set_step(step):
        for index, variable in enumerate(variables):
            variable.assign(expected(index, step))

    def zero():
        for variable in variables:
            variable.assign(tf.zeros_like(variable))

    def path(step):
        return os.path.join(directory, f"ckpt-{step:010d}.h5")

    def damage(step, index, values_step, where):
        """Flips a byte of variable ``index`` (holding ``values_step``'s values) in the file
        of ``step``, on rank 0."""
        if root:
            flip_byte(path(step), index, values_step, where)
        hvd.barrier()

    def restores(step, what):
        zero()
        assert ckpt.restore(directory, variables=variables).step == step, what
        check(variables, step, what)

    def refused(targets, *needles):
        try:
            ckpt.restore(directory, variables=targets)
        except ckpt.CheckpointError as error:
            assert all(n in str(error) for n in needles), str(error)
        else:
            raise AssertionError("a restore that should have been refused was not")

    for step in (3, 5):
        set_step(step)
        ckpt.save(directory, step, variables=variables)
    ckpt.wait()

    # From the disk (past rank 0's page cache), then from the cache (what the first read
    # left there, through the buffers it read into).
    for cached in (False, True):
        if root and not cached:
            evict(path(5))
        hvd.barrier()
        restores(5, f"restore, cached={cached}")
    # What rank 0 read into stays its snapshot buffers, apart from the variables: the
    # next save copies into them while the variables train on.
    if root:
        for arrays in checkpoint_api._SNAPSHOT.buffers().values():
            for array in arrays:
                array.reshape(-1).view(np.uint8)[:] = 0xAB
    check(variables, 5, "after rank 0's snapshot buffers changed")
    # The same if the broadcast gave rank 0 its (borrowed) input back as its output, as a
    # TensorFlow that forwarded it would: the restore copies rather than share.
    real_broadcast = ops.broadcast
    if root:
        ops.broadcast = lambda tensor, root_rank, name=None: (
            real_broadcast(tensor, root_rank, name=name), tf.convert_to_tensor(tensor))[1]
    try:
        restores(5, "restore, rank 0's input given back")
    finally:
        ops.broadcast = real_broadcast
    if root:
        for arrays in checkpoint_api._SNAPSHOT.buffers().values():
            for array in arrays:
                array.reshape(-1).view(np.uint8)[:] = 0xAB
    check(variables, 5, "after rank 0's snapshot buffers changed, input given back")

    # Small packs: several broadcasts of packed variables.
    transfer.PACK_BYTES = 64 << 10
    restores(5, "restore in small packs")
    transfer.PACK_BYTES = 16 << 20

    # Another shape: refused on every rank, nothing modified.
    wrong = list(variables)
    wrong[2] = tf.Variable(np.zeros((300, 501), np.float32))
    set_step(7)
    refused(wrong, "(300, 500)", "(300, 501)", "nothing was restored")
    check(variables, 7, "after a refused restore")
    assert not np.asarray(wrong[2].numpy()).any()
    # The same on the last rank only: every rank refuses, no rank changes anything.
    last = hvd.rank() == hvd.size() - 1
    refused(wrong if last else variables,
            *(("(300, 501)",) if last else ("does not fit", "another rank")))
    check(variables, 7, "after a restore refused on another rank")

    # A newer file that does not fit and is damaged: skipped like any damaged file.
    for index, variable in enumerate(wrong):
        if index != 2:
            variable.assign(expected(index, 6))
    ckpt.save(directory, 6, variables=wrong, blocking=True)
    refused(variables, "(300, 501)", "(300, 500)")  # intact, it is refused
    damage(6, 9, 6, 1_000_000)
    restores(5, "past a damaged file that does not fit")

    # A flipped byte in the newest fitting file's last array, read last: step 3.
    damage(5, 10, 5, 1_200_000)
    restores(3, "fallback")

    # A save right after a restore writes what was restored.
    ckpt.save(directory, 9, variables=variables, blocking=True, keep=10)
    if root:
        contents = ckpt.file_format.read(path(9))
        for index, array in enumerate(contents.groups["variables"]):
            assert array.tobytes() == expected(index, 3).tobytes(), index
    gathered = hvd.allgather(np.concatenate(
        [np.ravel(np.asarray(v.numpy())).astype(np.float64) for v in variables])[None, :]).numpy()
    assert (gathered == gathered[0]).all()

    # Every file damaged: raises, and nothing changes, although arrays went out.
    damage(9, 10, 3, 2_000_000)
    damage(3, 9, 3, 5000)
    set_step(7)
    refused(variables, "no checkpoint", "verifies")
    check(variables, 7, "after no file verified")
    print(f"rank {hvd.rank()} of {hvd.size()}: restores checked", flush=True)


if __name__ == "__main__":
    worker_main(body)
