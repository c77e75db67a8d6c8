"""tests/mpi/test_checkpoint_differential.py: generated checkpoint cases against a numpy reference.

    checkpoint_differential_worker.py DIR SEED CASES [defects]

With ``defects`` (np=1 only) it first runs one scenario per fixed defect
and prints "scenario NAME: ok" or "scenario NAME: FAILED" with the
traceback, going on after a failure so that each test sees its own. Then
CASES generated cases, drawn from random.Random(SEED) identically on every
rank, each against a reference taken independently of tfdist: numpy copies
of every variable at each save, keyed by what the variable is (the layer's
position in the model and the variable's own name; an optimizer slot by the
model variable it belongs to), never by a path or order in the file.

A case draws a model (Sequential, functional or subclassed, holding a
layer that creates ``alpha`` and ``beta`` in a drawn order, Dropout and
BatchNormalization), mixed precision or not, a ``keep``, 1 to 4 saves with
training steps between them, damage to some of the newest files
(truncation, flipped bytes inside a dataset's data, a deleted manifest or
digest, an emptied file, a deleted file), and a fresh model to restore
into: built or not, its layer creating the two weights in either order.
Expected: the newest file left intact, restored bit for bit, the damaged
newer ones renamed aside as *.damaged; or, with none intact, a
CheckpointError saying that no checkpoint verifies, with no variable
changed. A case that fell back then saves again at lower steps (with the
same ``keep``) and restores those. Prints "cases run: N" at the end.
"""
import os
import random
import sys
import traceback

import numpy as np

from mpi_harness import worker_main

DAMAGE = ("truncate", "flip", "no_manifest", "no_digest", "empty", "delete")


def import_stack():
    import keras
    import tensorflow as tf
    import tfdist.checkpoint as ckpt
    import tfdist.keras as hvd
    return keras, tf, ckpt, hvd


def two_weights_layer(keras, beta_first):
    class TwoWeights(keras.layers.Layer):
        """y = x * alpha + beta, its two weights of one shape created in a chosen order."""

        def build(self, shape):
            names = ["beta", "alpha"] if beta_first else ["alpha", "beta"]
            for name in names:
                setattr(self, name, self.add_weight(shape=(shape[-1],), name=name,
                                                    initializer="random_normal"))

        def call(self, x):
            return x * self.alpha + self.beta

    return TwoWeights()


def make_model(keras, kind, built, beta_first, features=3):
    """A small model of ``kind`` holding a TwoWeights layer, Dropout and BatchNormalization."""
    def layers():
        return [keras.layers.Dense(4), two_weights_layer(keras, beta_first),
                keras.layers.Dropout(0.25), keras.layers.BatchNormalization(),
                keras.layers.Dense(2)]

    if kind == "sequential":
        model = keras.Sequential(([keras.Input((features,))] if built else []) + layers())
    elif kind == "functional":
        inputs = keras.Input((features,))
        x = inputs
        for layer in layers():
            x = layer(x)
        model = keras.Model(inputs, x)
    else:
        class Subclassed(keras.Model):
            def __init__(self):
                super().__init__()
                self.stack = layers()

            def call(self, x, training=False):
                for layer in self.stack:
                    x = layer(x, training=training)
                return x

        model = Subclassed()
        if built:
            model(np.zeros((1, features), np.float32))
    return model


def model_layers(model):
    return model.stack if hasattr(model, "stack") else [
        layer for layer in model.layers if layer.variables]


def reference(model):
    """{key: numpy copy} of every model and optimizer variable, keyed by what it is."""
    values, slot_owner = {}, {}
    for position, layer in enumerate(model_layers(model)):
        for variable in layer.variables:
            key = ("model", position, variable.name)
            assert key not in values, key
            values[key] = np.array(variable.numpy(), copy=True)
            slot_owner[variable.path.replace("/", "_")] = (position, variable.name)
    leaves = {}
    for variable in model.optimizer.variables:
        leaf = variable.path.rsplit("/", 1)[-1]
        owner = next(((o, leaf[len(p) + 1:]) for p, o in slot_owner.items()
                      if leaf.startswith(p + "_") and leaf[len(p) + 1:].isalpha()), None)
        if owner is not None:
            key = ("slot",) + owner
        else:
            leaves[leaf] = leaves.get(leaf, -1) + 1
            key = ("optimizer", leaf, leaves[leaf])
        assert key not in values, key
        values[key] = np.array(variable.numpy(), copy=True)
    return values


def assert_equal_bits(got, want, context):
    assert sorted(got) == sorted(want), (context, sorted(set(got) ^ set(want)))
    for key in want:
        assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, (
            context, key, got[key].dtype, want[key].dtype)
        assert got[key].tobytes() == want[key].tobytes(), f"{context}: {key} differs"


def compiled(keras, model, mixed, eager=True):
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse", run_eagerly=eager)
    return model


def data(seed, features=3):
    rng = np.random.RandomState(seed)
    return (rng.standard_normal((8, features)).astype(np.float32),
            rng.standard_normal((8, 2)).astype(np.float32))


def damage(path, how, rng):
    """Damages the checkpoint at ``path`` in a way that verification must catch."""
    import h5py
    if how == "truncate":
        size = os.path.getsize(path)
        with open(path, "r+b") as handle:
            handle.truncate(rng.randrange(0, size))
    elif how == "flip":
        with h5py.File(path, "r") as handle:
            spans = []
            handle.visititems(lambda name, item: spans.append(
                (item.id.get_offset(), item.id.get_storage_size()))
                if isinstance(item, h5py.Dataset) and item.id.get_storage_size() else None)
        offset, size = rng.choice([s for s in spans if s[0] is not None])
        with open(path, "r+b") as handle:
            where = offset + rng.randrange(size)
            handle.seek(where)
            byte = handle.read(1)[0]
            handle.seek(where)
            handle.write(bytes([byte ^ (1 << rng.randrange(8))]))
    elif how in ("no_manifest", "no_digest"):
        with h5py.File(path, "r+") as handle:
            del handle.attrs["manifest" if how == "no_manifest" else "digest"]
    elif how == "empty":
        open(path, "wb").close()
    else:
        os.unlink(path)


def steps_on_disk(directory):
    return sorted(int(n[5:15]) for n in os.listdir(directory)
                  if n.startswith("ckpt-") and n.endswith(".h5"))


class Case:
    def __init__(self, rng, number):
        self.number = number
        self.kind = rng.choice(["sequential", "functional", "subclassed"])
        self.save_built = self.kind == "functional" or rng.random() < 0.5
        self.restore_built = self.kind == "functional" or rng.random() < 0.5
        self.mixed = rng.random() < 0.3
        self.save_beta_first = rng.random() < 0.5
        self.restore_beta_first = rng.random() < 0.5
        self.keep = rng.randint(1, 3)
        self.saves = rng.randint(1, 4)
        self.steps = sorted(rng.sample(range(1, 60), self.saves))
        self.blocking = [rng.random() < 0.5 for _ in self.steps]
        kept = self.steps[-self.keep:]
        self.damaged = sorted(rng.sample(kept, rng.randint(0, len(kept))), reverse=True)
        self.damage = {step: rng.choice(DAMAGE) for step in self.damaged}
        self.damage_seed = rng.randrange(1 << 30)
        self.seed = rng.randrange(1 << 30)  # the weights' and the data's

    def __str__(self):
        return (f"case {self.number}: {self.kind}, built {self.save_built}->{self.restore_built}, "
                f"mixed {self.mixed}, beta first {self.save_beta_first}->"
                f"{self.restore_beta_first}, keep {self.keep}, steps {self.steps}, "
                f"damage {self.damage}")


def run_case(case, directory):
    keras, tf, ckpt, hvd = import_stack()
    root = hvd.rank() == 0
    seed = case.seed
    keras.mixed_precision.set_global_policy("mixed_float16" if case.mixed else "float32")
    try:
        keras.utils.set_random_seed(seed)  # the same weights on every rank
        model = compiled(keras, make_model(keras, case.kind, case.save_built,
                                           case.save_beta_first), case.mixed)
        saved = {}
        for index, step in enumerate(case.steps):
            model.train_on_batch(*data(seed + index))
            # The last save blocking: it prunes before returning (a background write's
            # pruning runs after wait() returns).
            ckpt.save(directory, step, model=model, keep=case.keep, extra={"step": step},
                      blocking=case.blocking[index] or step == case.steps[-1])
            saved[step] = reference(model)
        on_disk = steps_on_disk(directory) if root else case.steps[-case.keep:]
        assert on_disk == case.steps[-case.keep:], (str(case), on_disk)
        rng = random.Random(case.damage_seed)
        if root:
            for step in case.damaged:
                damage(os.path.join(directory, f"ckpt-{step:010d}.h5"), case.damage[step], rng)
        hvd.barrier()
        intact = [s for s in case.steps[-case.keep:] if s not in case.damaged]

        target = compiled(keras, make_model(keras, case.kind, case.restore_built,
                                            case.restore_beta_first), case.mixed)
        if not intact and all(case.damage[s] == "delete" for s in case.damaged):
            assert ckpt.restore(directory, model=target) is None, str(case)
            return "no checkpoint left"
        if not intact:
            before = reference(target) if target.built else None
            try:
                ckpt.restore(directory, model=target)
            except ckpt.CheckpointError as error:
                assert "no checkpoint" in str(error) and "verifies" in str(error), str(error)
            else:
                raise AssertionError(f"{case}: restore of damaged files only did not raise")
            if before is not None:
                # restore builds the optimizer of a built model first: compare what was there.
                after = reference(target)
                assert_equal_bits({k: after[k] for k in before}, before,
                                  f"{case}, after a refused restore")
            return "refused"
        restored = ckpt.restore(directory, model=target)
        assert restored is not None and restored.step == intact[-1], (str(case), restored)
        assert restored.extra == {"step": intact[-1]}, (str(case), restored.extra)
        assert_equal_bits(reference(target), saved[intact[-1]], str(case))
        if root:
            gone = [s for s in case.damaged if s > intact[-1] and case.damage[s] != "delete"]
            for step in gone:
                assert os.path.exists(os.path.join(directory, f"ckpt-{step:010d}.h5.damaged"))
            left = [s for s in case.steps[-case.keep:] if s <= intact[-1]
                    and not (s in case.damaged and case.damage[s] == "delete")]
            assert steps_on_disk(directory) == left, (str(case), steps_on_disk(directory))
        if len(intact) == len(case.steps[-case.keep:]):
            return "restored newest"
        # Fell back: the job trains on from the older step and saves lower steps than the
        # damaged ones were; each save must survive pruning and restore.
        later = intact[-1] + 1 + np.arange(2)
        for index, step in enumerate(later):
            target.train_on_batch(*data(seed + 100 + index))
            ckpt.save(directory, int(step), model=target, keep=case.keep, blocking=True,
                      extra={"step": int(step)})
            saved[int(step)] = reference(target)
        again = compiled(keras, make_model(keras, case.kind, case.restore_built,
                                           case.restore_beta_first), case.mixed)
        restored = ckpt.restore(directory, model=again)
        assert restored.step == int(later[-1]), (str(case), restored)
        assert_equal_bits(reference(again), saved[int(later[-1])], f"{case}, after falling back")
        return "fell back, saved again"
    finally:
        keras.mixed_precision.set_global_policy("float32")


# ---- one scenario per fixed defect (np=1) ----

def defect_unbuilt_sequential_fit(directory):
    """A Sequential without Input under BackupAndRestore: fit runs from a fresh folder, and
    a second fit in a fresh model resumes, the model built from the checkpoint."""
    keras, tf, ckpt, hvd = import_stack()
    x, y = data(7)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(2)])
    model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    model.fit(x, y, batch_size=4, epochs=2, verbose=0,
              callbacks=[hvd.callbacks.BackupAndRestore(directory, save_freq=2)])
    want = reference(model)
    assert steps_on_disk(directory)[-1] == 4, steps_on_disk(directory)
    fresh = keras.Sequential([keras.layers.Dense(4), keras.layers.Dense(2)])
    fresh.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss="mse")
    fresh.fit(x, y, batch_size=4, epochs=2, verbose=0,
              callbacks=[hvd.callbacks.BackupAndRestore(directory, save_freq=2)])
    # Both epochs were done: nothing is trained again, the values are the saved ones.
    assert_equal_bits(reference(fresh), want, "resumed unbuilt Sequential")


def defect_lower_step_saves_survive_pruning(directory):
    """A damaged newest file (step 20) and a new save of step 10 with keep=1: step 10 is
    kept and restores; the damaged file is renamed aside once a restore falls back."""
    keras, tf, ckpt, hvd = import_stack()
    variable = tf.Variable(np.arange(5, dtype=np.float32), name="w")
    ckpt.save(directory, 20, variables=[variable], blocking=True)
    newest = os.path.join(directory, "ckpt-0000000020.h5")
    with open(newest, "r+b") as handle:
        handle.truncate(os.path.getsize(newest) // 2)
    variable.assign(np.full(5, 10, np.float32))
    ckpt.save(directory, 10, variables=[variable], keep=1)
    ckpt.wait()
    ckpt.save(directory, 11, variables=[variable], keep=1, blocking=True)
    assert steps_on_disk(directory) == [11, 20], steps_on_disk(directory)
    variable.assign(np.zeros(5, np.float32))
    restored = ckpt.restore(directory, variables=[variable])
    assert restored is not None and restored.step == 11, restored
    assert np.array_equal(variable.numpy(), np.full(5, 10, np.float32))
    assert steps_on_disk(directory) == [11], steps_on_disk(directory)
    assert os.path.exists(newest + ".damaged")


def defect_restore_matches_by_path(directory):
    """A layer whose two same-shaped weights are created in the other order restores each
    weight by its path, not swapped by position; paths that disagree are refused."""
    keras, tf, ckpt, hvd = import_stack()

    def model(beta_first):
        layer = two_weights_layer(keras, beta_first)
        built = keras.Sequential([keras.Input((3,)), layer], name="m")
        return built, layer

    saving, layer = model(beta_first=False)
    layer.alpha.assign([1.0, 2.0, 3.0])
    layer.beta.assign([-1.0, -2.0, -3.0])
    ckpt.save(directory, 1, model=saving, blocking=True)
    keras.utils.clear_session()  # the same names as in a restarted process
    restoring, layer = model(beta_first=True)
    assert [v.name for v in restoring.variables] == ["beta", "alpha"]
    ckpt.restore(directory, model=restoring)
    assert np.array_equal(layer.alpha.numpy(), [1.0, 2.0, 3.0]), layer.alpha.numpy()
    assert np.array_equal(layer.beta.numpy(), [-1.0, -2.0, -3.0]), layer.beta.numpy()
    # Another process's numbering (m_1/two_weights_1/...): matched without the numbers.
    again, layer = model(beta_first=True)
    ckpt.restore(directory, model=again)
    assert np.array_equal(layer.alpha.numpy(), [1.0, 2.0, 3.0]), layer.alpha.numpy()
    # A variable of another name at that position: refused, naming both.
    renamed = tf.Variable(np.zeros(3, np.float32), name="gamma")
    other = tf.Variable(np.zeros(3, np.float32), name="delta")
    ckpt.save(directory, 2, variables=[tf.Variable(np.ones(3, np.float32), name="alpha"),
                                       tf.Variable(np.ones(3, np.float32), name="beta")],
              model=None, blocking=True)
    try:
        ckpt.restore(directory, variables=[renamed, other])
    except ckpt.CheckpointError as error:
        assert "alpha" in str(error) and "gamma" in str(error), str(error)
    else:
        raise AssertionError("a restore into variables of other names was not refused")
    assert not renamed.numpy().any()


DEFECTS = [("unbuilt_sequential_fit", defect_unbuilt_sequential_fit),
           ("lower_step_saves_survive_pruning", defect_lower_step_saves_survive_pruning),
           ("restore_matches_by_path", defect_restore_matches_by_path)]


def body():
    keras, tf, ckpt, hvd = import_stack()
    hvd.init()
    directory, seed, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    failed = 0
    if "defects" in sys.argv[4:]:
        assert hvd.size() == 1
        for name, scenario in DEFECTS:
            keras.utils.clear_session()
            try:
                scenario(os.path.join(directory, "defect_" + name))
                print(f"scenario {name}: ok", flush=True)
            except Exception:  # noqa: BLE001  (each scenario reports on its own)
                print(f"scenario {name}: FAILED\n{traceback.format_exc()}", flush=True)
                failed += 1
    rng = random.Random(seed)
    outcomes = {}
    for number in range(cases):
        case = Case(rng, number)
        outcome = run_case(case, os.path.join(directory, f"case{number}"))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if hvd.rank() == 0:
            print(f"{case}: {outcome}", flush=True)
    if hvd.rank() == 0:
        print(f"cases run: {cases} (seed {seed}; {outcomes})", flush=True)
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    worker_main(body)
