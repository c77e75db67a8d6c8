"""Checkpoint speed: tfdist.checkpoint against Keras' save_weights and BackupAndRestore, in one job.

    tfdistrun -np 2 python -m benchmarks.checkpoint --json docs/results/checkpoint-np2.json --plot

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
- restore: tfdist.restore (rank 0 reads and verifies the file while it
  broadcasts it to every rank) against load_weights and BackupAndRestore's
  restore, which load on rank 0 alone, each timed three ways, every method
  alike: ``restore_cold_s`` with its file dropped from the page cache first
  (posix_fadvise DONTNEED), as after a restart on another host or once
  memory pressure has evicted it; ``restore_warm_s`` with its file read into
  the page cache first, as a buffered writer leaves it; ``restore_s`` with
  the file as its own save left it: save_weights' in the page cache,
  tfdist's on disk only, since tfdist writes past the cache (O_DIRECT).
- ``MB/s``: the file's size over save_s and the restore times.
- ``save_weights.save_fsync_s``: save_weights followed by an fsync of the
  file and its directory, the honest reference for a durable save.
- ``throughput_ratio``: training speed with a checkpoint every ``--every``
  steps over that without, in one ``fit``: ``--segments`` segments of
  ``--every`` steps alternate without / with / with / without (so a drift
  in the machine's load cancels), a "with" segment saving once in its
  middle and waiting for the write at its end (so a write never spills
  into the next segment); the ratio is the median over the adjacent
  (without, with) pairs of time without / time with. For models over
  50 MiB a CPU trains slowly: segments of ``--every / 5`` steps, a
  checkpoint 5x as often, which bounds the ratio at ``--every`` from below.
  ``--segments 0`` skips it.
- ``preempted_call_s``: one ``tfdist.checkpoint.preempted()`` agreement.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import unittest.mock
from typing import Any, Callable, Dict, List, Optional

from benchmarks import _results

BATCH = 16
LAYERS = 4
WARMUP_STEPS = 5


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


def fsync_file_and_directory(path: str) -> None:
    for target in (path, os.path.dirname(path)):
        descriptor = os.open(target, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def evict_from_page_cache(path: str) -> None:
    """Drops ``path``'s (clean, fsync'd) pages from the page cache: a read then comes from
    the disk, as after a restart on another host or once memory pressure has evicted it."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


def read_into_page_cache(path: str) -> None:
    """Reads ``path`` through the page cache, so that the next read of it finds every page
    there, as a buffered writer would have left it."""
    chunk = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as handle:
        while handle.readinto(chunk):
            pass


def time_restores(add: Callable[[str, float], None], method: str, restore: Callable[[], Any],
                  path: Callable[[], str], rank0: bool, barrier: Callable[[], Any]) -> None:
    """Times ``restore`` with its file as the save left it, out of the page cache, and in it.

    ``path`` gives the file (on rank 0, which alone prepares it); ``barrier``
    lines the ranks up after each preparation.
    """
    barrier()
    add(f"{method}.restore_s", timed(restore))
    for key, prepare in (("restore_cold_s", evict_from_page_cache),
                         ("restore_warm_s", read_into_page_cache)):
        if rank0:
            prepare(path())
        barrier()
        add(f"{method}.{key}", timed(restore))


class AlternatingCheckpoints:
    """Times segments of ``every`` training steps, checkpointing in every other pair of them.

    Segments follow the pattern without, with, with, without, ...; a "with"
    segment saves (tfdist.checkpoint.save, as BackupAndRestore does) at its
    middle step and waits for the write at its end, inside the timed span.
    ``batch_end`` is called after each training step (a LambdaCallback).
    """

    PATTERN = (False, True, True, False)

    def __init__(self, model: Any, directory: str, every: int, segments: int, keep: int) -> None:
        self.model, self.directory, self.every, self.keep = model, directory, every, keep
        self.pattern = [self.PATTERN[i % 4] for i in range(segments)]
        self.seconds: List[float] = []
        self.steps = 0
        self.started = 0.0

    def batch_end(self) -> None:
        import tfdist.checkpoint as ckpt
        self.steps += 1
        done = self.steps - WARMUP_STEPS
        if done < 0:
            return
        segment, position = divmod(done, self.every)
        if done == 0:
            self.started = time.perf_counter()
        elif position == 0:  # the end of segment - 1
            if self.pattern[segment - 1]:
                ckpt.wait()
            now = time.perf_counter()
            self.seconds.append(now - self.started)
            self.started = now
        elif (segment < len(self.pattern) and self.pattern[segment]
              and position == self.every // 2):
            ckpt.save(self.directory, self.steps, model=self.model, keep=self.keep)

    def ratios(self) -> List[float]:
        """Time without / time with, for each adjacent (without, with) pair of segments."""
        pairs = range(0, len(self.seconds) - 1, 2)
        return [self.seconds[i + self.pattern[i]] / self.seconds[i + 1 - self.pattern[i]]
                for i in pairs]


def measure_size(hvd, size_mib: float, repeats: int, every: int, segment_count: int,
                 work: str) -> Dict[str, Any]:
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
        time_restores(add, "tfdist", lambda: ckpt.restore(tf_dir, model=model),
                      lambda: ckpt.latest(tf_dir), rank0, hvd.barrier)
        if rank0:
            add("tfdist.file_mb", file_mb(ckpt.latest(tf_dir)))
        hvd.barrier()
        if rank0:
            seconds = timed(lambda: model.save_weights(keras_path))
            add("save_weights.stall_s", seconds)
            add("save_weights.save_s", seconds)
            add("save_weights.save_fsync_s", seconds + timed(lambda: fsync_file_and_directory(
                keras_path)))
            time_restores(add, "save_weights", lambda: model.load_weights(keras_path),
                          lambda: keras_path, True, lambda: None)
            add("save_weights.file_mb", file_mb(keras_path))
            backup = keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch")
            backup.set_model(model)
            backup.on_train_begin()
            seconds = timed(lambda: backup.on_epoch_end(0))
            add("keras_backup.stall_s", seconds)
            add("keras_backup.save_s", seconds)
            backup_path = os.path.join(backup_dir, "latest.weights.h5")
            time_restores(add, "keras_backup", lambda: restore_backup(keras, model, backup_dir),
                          lambda: backup_path, True, lambda: None)
            add("keras_backup.file_mb", file_mb(backup_path))
        hvd.barrier()

    medians = {k: statistics.median(v) for k, v in samples.items()}
    if segment_count:
        measure_throughput(hvd, model, width, every, segment_count, work, samples, medians)
    # The preemption agreement BackupAndRestore makes every 10 batches under tfdistrun.
    ckpt.preempted()
    calls = 200
    samples["preempted_call_s"] = [timed(lambda: [ckpt.preempted() for _ in range(calls)])
                                   / calls]
    medians["preempted_call_s"] = samples["preempted_call_s"][0]
    return {"size_mib": size_mib, "state_mb": state_bytes(model) / 1e6, "width": width,
            "median": medians, "samples": samples}


def restore_backup(keras, model, backup_dir: str) -> None:
    """Keras' BackupAndRestore restoring ``backup_dir`` into ``model``, as at the start of fit."""
    fresh = keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch")
    fresh.set_model(model)
    fresh.on_train_begin()
    model._initial_epoch = None


def measure_throughput(hvd, model, width: int, every: int, segment_count: int, work: str,
                       samples: Dict[str, List[float]], medians: Dict[str, float]) -> None:
    """Throughput with and without a checkpoint every ``every`` steps, in alternating segments
    of one fit; adds the pair ratios and segment times to ``samples``, the medians to
    ``medians``."""
    import keras
    import numpy as np
    import tensorflow as tf
    import tfdist.checkpoint as ckpt
    x = np.random.RandomState(hvd.rank()).standard_normal((BATCH * 8, width)).astype("float32")
    data = tf.data.Dataset.from_tensor_slices((x, x)).batch(BATCH).repeat()
    fit_dir = os.path.join(work, f"fit-{width}")
    segments = AlternatingCheckpoints(model, fit_dir, every, segment_count, keep=2)
    model.fit(data, steps_per_epoch=WARMUP_STEPS + segment_count * every, epochs=1, verbose=0,
              callbacks=[keras.callbacks.LambdaCallback(
                  on_train_batch_end=lambda batch, logs: segments.batch_end())])
    ckpt.wait()
    samples["throughput_pair_ratios"] = segments.ratios()
    samples["segment_s"] = segments.seconds
    medians["throughput_ratio"] = statistics.median(samples["throughput_pair_ratios"])
    medians["steps_per_s_without"] = every / statistics.median(
        t for t, with_ in zip(segments.seconds, segments.pattern) if not with_)


def table(results: List[Dict[str, Any]]) -> str:
    rows = ["| model | method | stall (s) | stall / memcpy | save (s) | save MB/s "
            "| restore from disk (s) | MB/s | restore from the page cache (s) | MB/s |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for result in results:
        m = result["median"]
        for method in ("tfdist", "save_weights", "keras_backup"):
            mb = m.get(f"{method}.file_mb")
            if mb is None:
                continue
            cells = [m[method + ".stall_s"], m[method + ".stall_s"] / m["memcpy_s"],
                     m[method + ".save_s"], mb / m[method + ".save_s"],
                     m[method + ".restore_cold_s"], mb / m[method + ".restore_cold_s"],
                     m[method + ".restore_warm_s"], mb / m[method + ".restore_warm_s"]]
            formats = [".4f", ".1f", ".3f", ".0f", ".3f", ".0f", ".3f", ".0f"]
            rows.append(f"| {result['size_mib']:g} MiB | {method} | " +
                        " | ".join(format(c, f) for c, f in zip(cells, formats)) + " |")
    rows.append("")
    rows.append("| model | tfdist save / save_weights | the same, tfdist without fsync | "
                "tfdist save / (save_weights + fsync) | tfdist restore / load_weights, "
                "both from disk | both from the page cache | each file as its save left it | "
                "throughput with / without a checkpoint every N steps |")
    rows.append("|---|---|---|---|---|---|---|---|")
    for result in results:
        m = result["median"]
        if "save_weights.save_s" not in m:
            continue
        ratios = [m["tfdist.save_s"] / m["save_weights.save_s"],
                  m["tfdist.save_nofsync_s"] / m["save_weights.save_s"],
                  m["tfdist.save_s"] / m["save_weights.save_fsync_s"]]
        ratios += [m[f"tfdist.{key}"] / m[f"save_weights.{key}"]
                   for key in ("restore_cold_s", "restore_warm_s", "restore_s")]
        throughput = "not measured (--segments 0)"
        if "throughput_ratio" in m:
            pairs = result["samples"]["throughput_pair_ratios"]
            throughput = (f"{m['throughput_ratio']:.3f} (N = {result['checkpoint_every']}; "
                          f"{len(pairs)} pairs, {min(pairs):.3f}-{max(pairs):.3f})")
        rows.append(f"| {result['size_mib']:g} MiB | " +
                    " | ".join(f"{r:.2f}" for r in ratios) + f" | {throughput} |")
    return "\n".join(rows)


def summary(document: Dict[str, Any]) -> str:
    """The tables of every model size: each method's times, and tfdist's ratios to Keras'."""
    return f"np = {document['np']}\n\n" + table(document["results"])


_PHASES = (("training held", "stall_s", "tab:red"),
           ("written in the background until durable", "save_s", "tab:orange"),
           ("restart: restore from disk", "restore_cold_s", "tab:blue"))


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Recovery timelines: per model size and method, a checkpoint from the moment training
    hands it over (held, then written until durable), then a restart's restore from disk."""
    rows = []  # (label, [(start, length, colour)])
    for document in documents:
        for result in document["results"]:
            m = result["median"]
            for method in ("tfdist", "save_weights", "keras_backup"):
                if f"{method}.save_s" not in m:
                    continue
                stall, save = m[f"{method}.stall_s"], m[f"{method}.save_s"]
                restore = m[f"{method}.restore_cold_s"]
                rows.append((f"{result['size_mib']:g} MiB, {method}",
                             [(0.0, stall, _PHASES[0][2]),
                              (stall, max(0.0, save - stall), _PHASES[1][2]),
                              (save, restore, _PHASES[2][2])]))
    figure, axes = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.5))
    for y, (_, spans) in enumerate(rows):
        axes.broken_barh([(start, length) for start, length, _ in spans], (y - 0.35, 0.7),
                         facecolors=[colour for _, _, colour in spans])
    axes.set_yticks(range(len(rows)), [label for label, _ in rows])
    axes.invert_yaxis()
    axes.set_xlabel("seconds from the checkpoint call (median of repeats)")
    axes.set_title(f"checkpoint and restore timelines, np = {documents[0]['np']}")
    for label, _, colour in _PHASES:
        axes.barh([0], [0], color=colour, label=label)
    axes.legend(fontsize=8, loc="upper right")
    figure.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checkpoint",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,200", help="model sizes in MiB (default 10,200)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", type=int, default=100, help="checkpoint every N steps")
    parser.add_argument("--segments", type=int, default=16,
                        help="alternating throughput segments of N steps (default 16; "
                             "0 skips the throughput measurement)")
    parser.add_argument("--dir", default=None, help="where files go (default: a temp dir)")
    _results.add_arguments(parser)
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
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
        # Large models train slowly on CPUs: checkpoint them 5x more often. The
        # cost per checkpoint is the same, so the throughput ratio at --every
        # is 1 - (1 - ratio) / 5, and a ratio measured this way is a lower bound.
        every = args.every if size <= 50 else max(2, args.every // 5)
        result = measure_size(hvd, size, args.repeats, every, args.segments, work)
        result.update(checkpoint_every=every, segments=args.segments)
        results.append(result)
    if hvd.rank() == 0:
        _results.publish(args, "checkpoint", {"np": hvd.size(), "results": results}, argv,
                         hvd.size())
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
