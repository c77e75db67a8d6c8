"""tests/e2e/test_checkpoint_restart.py: a checkpoint saved on one number of ranks, restored on another.

    save      DIR OUT   trains a little, saves step 7 (and a step 8 that it restores, checking
                        each rank gets its own per-rank state back, also with only rank 0
                        able to read the directory; then truncates step 8)
    restore   DIR OUT   checks a mismatching model is refused and left unchanged, restores
                        step 7 (warning about step 8), checks it against OUT/saved.npz,
                        trains one step and saves it (two steps on) into OUT/saved.npz
Every value is checked against the numpy arrays the saving job wrote.
``tfdist.runtime.rank_state`` is replaced by one returning per-rank arrays,
as lossy compression's residuals will be.
"""
import os
import sys
import warnings

import numpy as np

from mpi_harness import worker_main

INPUTS, OUTPUTS = 5, 3


def make_model(hidden):
    import keras
    keras.utils.set_random_seed(hidden)
    return keras.Sequential([keras.Input((INPUTS,)), keras.layers.Dense(hidden, activation="tanh"),
                             keras.layers.Dense(OUTPUTS)])


def train_step(hvd, model, optimizer, seed):
    import tensorflow as tf
    rng = np.random.RandomState(seed * 10 + hvd.rank())
    x = rng.normal(0, 1, (4, INPUTS)).astype("float32")
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - 1.0))
    grads = hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))


def values(model, optimizer, counter):
    result = {f"model/{i}": v.numpy() for i, v in enumerate(model.variables)}
    result.update({f"optimizer/{i}": np.asarray(v.numpy())
                   for i, v in enumerate(optimizer.variables)})
    result["counter"] = counter.numpy()
    return result


def fake_rank_state(runtime, rank):
    """Per-rank state as compression will keep it: a residual that differs on every rank."""
    received = []
    runtime.rank_state = lambda: {"residual": np.arange(4, dtype=np.float32) + 10 * rank,
                                  "factor/q": np.full((2, 2), rank, np.float64)}
    runtime.restore_rank_state = received.append
    return received


def body() -> None:
    import keras
    import tensorflow as tf
    import tfdist.checkpoint as ckpt
    import tfdist.keras as hvd
    from tfdist import runtime
    hvd.init()
    mode, directory, out = sys.argv[1:4]
    received = fake_rank_state(runtime, hvd.rank())
    model = make_model(4)
    optimizer = keras.optimizers.Adam(0.01)
    counter = tf.Variable(0, dtype=tf.int64)
    if mode == "save":
        optimizer.build(model.trainable_variables)
        hvd.broadcast_variables(model.variables, 0)
        for seed in range(3):
            train_step(hvd, model, optimizer, seed)
        counter.assign(123)
        ckpt.save(directory, 7, model=model, optimizer=optimizer, variables=[counter],
                  extra={"epoch": 2, "note": "saved on %d ranks" % hvd.size()}, blocking=True)
        if hvd.rank() == 0:
            np.savez(os.path.join(out, "saved.npz"), step=7, **values(model, optimizer, counter))
        train_step(hvd, model, optimizer, 9)
        ckpt.save(directory, 8, model=model, optimizer=optimizer, variables=[counter],
                  blocking=True)
        # Restored on as many ranks as saved it: each rank gets its own state back.
        assert ckpt.restore(directory, model=model, optimizer=optimizer,
                            variables=[counter]).step == 8
        assert len(received) == 1 and sorted(received[0]) == ["factor/q", "residual"]
        np.testing.assert_array_equal(received[0]["residual"],
                                      np.arange(4, dtype=np.float32) + 10 * hvd.rank())
        np.testing.assert_array_equal(received[0]["factor/q"], np.full((2, 2), hvd.rank()))
        assert received[0]["factor/q"].dtype == np.float64
        # Only rank 0 can read the directory (as on a host-local disk): the
        # values and each rank's own state still reach every rank.
        saved = values(model, optimizer, counter)
        for variable in model.variables + optimizer.variables + [counter]:
            variable.assign(tf.zeros_like(variable))
        received.clear()
        if hvd.rank() != 0:
            def unreadable(path, *args, **kwargs):
                raise FileNotFoundError(f"{path} is not on this host")
            ckpt.file_format.read = unreadable
            ckpt.file_format.CheckpointReader = unreadable
        assert ckpt.restore(directory, model=model, optimizer=optimizer,
                            variables=[counter]).step == 8
        for key, value in values(model, optimizer, counter).items():
            np.testing.assert_array_equal(value, saved[key], err_msg=key)
        np.testing.assert_array_equal(received[0]["residual"],
                                      np.arange(4, dtype=np.float32) + 10 * hvd.rank())
        if hvd.rank() == 0:
            newest = os.path.join(directory, "ckpt-0000000008.h5")
            with open(newest, "r+b") as handle:
                handle.truncate(os.path.getsize(newest) // 2)
        return

    expected = np.load(os.path.join(out, "saved.npz"))
    # A model of another shape: refused, naming the variable and both shapes; unchanged.
    wrong = make_model(6)
    wrong_optimizer = keras.optimizers.Adam(0.01)
    before = [v.numpy().copy() for v in wrong.variables]
    try:
        ckpt.restore(directory, model=wrong, optimizer=wrong_optimizer, variables=[counter])
    except ckpt.CheckpointError as error:
        message = str(error)
        assert "kernel" in message and "(5, 4)" in message and "(5, 6)" in message, message
    else:
        raise AssertionError("restoring into a model of another shape did not fail")
    for old, variable in zip(before, wrong.variables):
        np.testing.assert_array_equal(variable.numpy(), old)
    assert counter.numpy() == 0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored = ckpt.restore(directory, model=model, optimizer=optimizer, variables=[counter])
    assert restored is not None and restored.step == int(expected["step"]), restored
    if restored.step == 7:
        assert restored.extra == {"epoch": 2, "note": "saved on 3 ranks"}, restored.extra
    messages = [str(w.message) for w in caught]
    if hvd.rank() == 0 and restored.step == 7:
        assert any("damaged" in m and "ckpt-0000000008.h5" in m for m in messages), messages
    # Saved on another number of ranks: each rank's own state starts fresh, with a warning.
    assert received == [{}], received
    if hvd.rank() == 0:
        assert any("starts fresh" in m for m in messages), messages
    got = values(model, optimizer, counter)
    assert sorted(got) == sorted(k for k in expected.files if k != "step")
    for key in got:
        np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
    # Every rank holds the same values: compare with rank 0's through an allgather.
    flat = np.concatenate([np.ravel(got[k]).astype(np.float64) for k in sorted(got)])
    gathered = hvd.allgather(flat[None, :]).numpy()
    assert (gathered == gathered[0]).all()

    train_step(hvd, model, optimizer, 11)
    counter.assign_add(1)
    step = restored.step + 2
    ckpt.save(directory, step, model=model, optimizer=optimizer, variables=[counter],
              blocking=True)
    if hvd.rank() == 0:
        np.savez(os.path.join(out, "saved.npz"), step=step, **values(model, optimizer, counter))
    print(f"rank {hvd.rank()} of {hvd.size()}: restored step {restored.step} and checked",
          flush=True)


if __name__ == "__main__":
    worker_main(body)
