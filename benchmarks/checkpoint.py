"""Checkpoint speed: tfdist.checkpoint against Keras' save_weights and BackupAndRestore, in one job.

    tfdistrun -np 2 python -m benchmarks.checkpoint --json docs/bench/checkpoint-np2.json

For each model size (MiB of float32 weights; an MLP of equal square Dense
layers, with Adam, so the saved state is about 3x that), every measure is
repeated ``--repeats`` times, rounds alternating between the methods so
that other load on the machine hits all of them alike, and the median is
reported:

- ``stall_s``: how long the training thread is held per checkpoint. For
  tfdist, the ``save(blocking=False)`` call (host snapshot plus a small
  collective); for ``save_weights`` and Keras' BackupAndRestore, the whole
  synchronous write. ``memcpy_s`` is the time to copy the same bytes once
  in memory, the floor of any snapshot.
- ``save_s``: until the checkpoint is durable (tfdist: save + wait, which
  includes fsync; Keras does not fsync). ``tfdist.save_nofsync_s``: the
  same with fsync made a no-op, to compare like with like.
- ``restore_s``: tfdist.restore (every rank reads and verifies the file
  rank 0 chooses) against load_weights and BackupAndRestore's restore.
- ``MB/s``: the file's size over save_s and restore_s.
- ``throughput``: training samples/s with BackupAndRestore(save_freq=
  ``--every``) against none, over ``--steps`` steps of fit; for models over
  50 MiB, a checkpoint every ``--every / 5`` steps over twice that many
  steps (a CPU trains them slowly), which bounds the ratio at ``--every``
  from below.
- ``preempted_call_s``: one ``tfdist.checkpoint.preempted()`` agreement.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import unittest.mock
from typing import Any, Callable, Dict, List, Optional

BATCH = 16
LAYERS = 4


def build(size_mib: float):
    """An MLP of LAYERS square Dense layers holding ``size_mib`` MiB of float32 weights, with Adam."""
    import keras
    width = int(((size_mib * (1 << 20) / 4) / LAYERS) ** 0.5)
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((width,))] +
                             [keras.layers.Dense(width, activation="relu") for _ in range(LAYERS)])
    return model, width


def compile_model(model, hvd):
    import keras
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(1e-4)), loss="mse")
    model.optimizer.build(model.trainable_variables)


def state_bytes(model) -> int:
    import numpy as np
    return sum(int(np.prod(v.shape)) * 4 for v in model.variables + model.optimizer.variables)


def timed(function: Callable[[], Any]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def file_mb(path: str) -> float:
    return os.path.getsize(path) / 1e6


def measure_size(hvd, size_mib: float, repeats: int, steps: int, every: int,
                 work: str, fit_repeats: int) -> Dict[str, Any]:
    import keras
    import numpy as np
    import tfdist.checkpoint as ckpt
    model, width = build(size_mib)
    compile_model(model, hvd)
    rank0 = hvd.rank() == 0
    samples: Dict[str, List[float]] = {}

    def add(key: str, value: float) -> None:
        samples.setdefault(key, []).append(value)

    state = [v.numpy() for v in model.variables + model.optimizer.variables]
    tf_dir = os.path.join(work, f"tfdist-{size_mib:g}")
    keras_path = os.path.join(work, f"keras-{size_mib:g}.weights.h5")
    backup_dir = os.path.join(work, f"keras-backup-{size_mib:g}")
    for round_ in range(repeats):
        targets = [np.empty_like(a) for a in state]
        add("memcpy_s", timed(lambda: [np.copyto(t, a) for t, a in zip(targets, state)]))
        hvd.barrier()
        stall = timed(lambda: ckpt.save(tf_dir, round_ + 1, model=model, keep=2))
        total = stall + timed(ckpt.wait)
        add("tfdist.stall_s", stall)
        add("tfdist.save_s", total)
        hvd.barrier()
        # The same save without its fsyncs, which save_weights does not make
        # either; for comparison only, the product always fsyncs.
        with unittest.mock.patch("os.fsync", lambda descriptor: None):
            add("tfdist.save_nofsync_s",
                timed(lambda: (ckpt.save(tf_dir, round_ + 1, model=model, keep=2),
                               ckpt.wait())))
        hvd.barrier()
        add("tfdist.restore_s", timed(lambda: ckpt.restore(tf_dir, model=model)))
        if rank0:
            add("tfdist.file_mb", file_mb(ckpt.latest(tf_dir)))
        hvd.barrier()
        if rank0:
            seconds = timed(lambda: model.save_weights(keras_path))
            add("save_weights.stall_s", seconds)
            add("save_weights.save_s", seconds)
            add("save_weights.restore_s", timed(lambda: model.load_weights(keras_path)))
            add("save_weights.file_mb", file_mb(keras_path))
            backup = keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch")
            backup.set_model(model)
            backup.on_train_begin()
            seconds = timed(lambda: backup.on_epoch_end(0))
            add("keras_backup.stall_s", seconds)
            add("keras_backup.save_s", seconds)
            fresh = keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch")
            fresh.set_model(model)
            add("keras_backup.restore_s", timed(fresh.on_train_begin))
            model._initial_epoch = None
            add("keras_backup.file_mb", file_mb(os.path.join(backup_dir, "latest.weights.h5")))
        hvd.barrier()

    # Throughput with and without a checkpoint every `every` steps, alternating.
    import tensorflow as tf
    x = np.random.RandomState(hvd.rank()).standard_normal((BATCH * 8, width)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH).repeat()
    fit_dir = os.path.join(work, f"fit-{size_mib:g}")
    model.fit(data, steps_per_epoch=5, epochs=1, verbose=0)  # trace the train step
    for _ in range(fit_repeats):
        for label in ("without", "with"):
            if rank0:  # the writer: its last write is durable (fit ended with wait())
                shutil.rmtree(fit_dir, ignore_errors=True)
            callbacks = [] if label == "without" else [
                hvd.callbacks.BackupAndRestore(fit_dir, save_freq=every, keep=2)]
            hvd.barrier()
            seconds = timed(lambda: model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0,
                                              callbacks=callbacks))
            add(f"throughput_{label}", steps * BATCH * hvd.size() / seconds)
    # The preemption agreement BackupAndRestore makes every 10 batches under tfdistrun.
    ckpt.preempted()
    calls = 200
    add("preempted_call_s", timed(lambda: [ckpt.preempted() for _ in range(calls)]) / calls)
    medians = {k: statistics.median(v) for k, v in samples.items()}
    medians["throughput_ratio"] = medians["throughput_with"] / medians["throughput_without"]
    return {"size_mib": size_mib, "state_mb": state_bytes(model) / 1e6, "width": width,
            "median": medians, "samples": samples}


def table(results: List[Dict[str, Any]]) -> str:
    rows = ["| model | method | stall (s) | stall / memcpy | save (s) | save MB/s | restore (s) "
            "| restore MB/s |", "|---|---|---|---|---|---|---|---|"]
    for result in results:
        m = result["median"]
        for method in ("tfdist", "save_weights", "keras_backup"):
            mb = m.get(f"{method}.file_mb")
            if mb is None:
                continue
            rows.append(
                f"| {result['size_mib']:g} MiB | {method} | {m[method + '.stall_s']:.4f} | "
                f"{m[method + '.stall_s'] / m['memcpy_s']:.1f} | {m[method + '.save_s']:.3f} | "
                f"{mb / m[method + '.save_s']:.0f} | {m[method + '.restore_s']:.3f} | "
                f"{mb / m[method + '.restore_s']:.0f} |")
    rows.append("")
    rows.append("| model | tfdist save / save_weights | same without fsync | "
                "tfdist restore / load_weights | "
                "throughput with / without checkpoints (every N steps) |")
    rows.append("|---|---|---|---|---|")
    for result in results:
        m = result["median"]
        if "save_weights.save_s" in m:
            rows.append(f"| {result['size_mib']:g} MiB | "
                        f"{m['tfdist.save_s'] / m['save_weights.save_s']:.2f} | "
                        f"{m['tfdist.save_nofsync_s'] / m['save_weights.save_s']:.2f} | "
                        f"{m['tfdist.restore_s'] / m['save_weights.restore_s']:.2f} | "
                        f"{m['throughput_ratio']:.3f} (every {result['checkpoint_every']}) |")
    return "\n".join(rows)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,200", help="model sizes in MiB (default 10,200)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="fit steps per throughput run")
    parser.add_argument("--every", type=int, default=100, help="checkpoint every N steps")
    parser.add_argument("--fit-repeats", type=int, default=2,
                        help="throughput runs of each kind (default 2)")
    parser.add_argument("--dir", default=None, help="where files go (default: a temp dir)")
    parser.add_argument("--json", default=None, help="write the results here (rank 0)")
    args = parser.parse_args(argv)
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tfdist.keras as hvd
    hvd.init()
    work = args.dir or (tempfile.mkdtemp(prefix="tfdist-ckpt-bench-") if hvd.rank() == 0
                        else None)
    work = hvd.broadcast_object(work, 0)
    results = []
    for size in (float(s) for s in args.sizes.split(",")):
        # Large models train slowly on CPUs: checkpoint them 5x more often over
        # fewer steps. The cost per checkpoint is the same, so the throughput
        # ratio at --every is 1 - (1 - ratio) / 5, and a ratio measured this
        # way is a lower bound.
        every = args.every if size <= 50 else max(1, args.every // 5)
        steps = args.steps if size <= 50 else 2 * every
        result = measure_size(hvd, size, args.repeats, steps, every, work, args.fit_repeats)
        result.update(fit_steps=steps, checkpoint_every=every)
        results.append(result)
    if hvd.rank() == 0:
        report = {"benchmark": "checkpoint", "np": hvd.size(), "host": socket.gethostname(),
                  "command": "tfdistrun -np %d python -m benchmarks.checkpoint %s"
                             % (hvd.size(), " ".join(argv if argv is not None else sys.argv[1:])),
                  "results": results}
        print(table(results), flush=True)
        if args.json:
            os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
            with open(args.json, "w") as handle:
                json.dump(report, handle, indent=1)
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
