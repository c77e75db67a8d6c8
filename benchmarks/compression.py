"""Training with each gradient compressor: accuracy, wire bytes per step, step time, time to target.

    mpirun -np 2 python -m benchmarks.compression --json docs/results/compression-np2.json
    TFDIST_VIRTUAL_HOSTS=4 TFDIST_EMULATED_BANDWIDTH=1.25e8 mpirun -np 4 --oversubscribe \\
        python -m benchmarks.compression --datasets digits --models wide_mlp \\
        --json docs/results/compression-np4-1gbit.json --plot

Trains, in one job, on scikit-learn's 8x8 digits (examples/digits_data.py)
the MLP and a small CNN, and on Fashion-MNIST (examples/fashion_mnist_data.py)
the MLP, when Debian's ``dataset-fashion-mnist`` package is installed (when
it is not, the run says so and goes on without it); ``--models wide_mlp`` is
the 4.3 M-parameter MLP whose step is mostly communication on a 1 Gb/s link.
Each rank trains on its shard; the validation set is whole. Training uses
``DistributedOptimizer`` and each compressor: none, fp16, bf16, top-k 1% and
PowerSGD rank 2, the lossy ones with and without error feedback, and top-k 1%
with momentum correction ("topk(0.01)+mc": ``Compression.topk(0.01,
momentum=M)`` with an SGD optimizer without momentum, M being --momentum) and
the same dense for the first two epochs ("topk(0.01)+mc+wu": ``start_step`` =
2 epochs of steps; its wire bytes are those of the sparse steps), and
``Compression.auto(powersgd_rank=2)`` ("auto", whose records also say what
each gradient group went as and the predicted times it chose by). Every run
starts from the same seed. Per run it reports the final validation accuracy,
the bytes this rank puts on the wire per step, the median step time and the
training time until the validation accuracy first reaches the target
(checked after every epoch; evaluation time not counted; the first epoch's
tracing is counted, as a user waits for it too).

Wire bytes come from the compressors' own accounting (top-k: the allgather
of (index, value) pairs; PowerSGD: the P and Q rounds and the tensors it
sends dense) with the formulas of the bandwidth-optimal allreduce,
2(P-1)/P bytes sent per byte reduced, and the ring allgather, (P-1) times a
rank's block; ``tfdist.stats()["bytes_sent"]`` is reported beside them.

The TFDIST_* environment (virtual hosts, emulated links) is passed through
to the runtime untouched and recorded in the JSON; with an emulated
bandwidth each record also has the seconds its wire bytes take on the link.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from benchmarks import _results

MODELS = ("mlp", "cnn", "wide_mlp")
DATASETS = ("digits", "fashion")
# Per dataset: the models of a default run, epochs, and the validation accuracy of
# time-to-target. Fashion-MNIST has 42x more training images than digits: fewer epochs.
DATASET_DEFAULTS = {
    "digits": {"models": "mlp,cnn", "epochs": 15, "target": 0.95},
    "fashion": {"models": "mlp", "epochs": 8, "target": 0.85},
}
REPO = Path(__file__).resolve().parent.parent


def build_model(kind: str, input_shape=(8, 8, 1)):
    """The MLP (flatten-128-10), a small CNN (two 3x3 convolutions, 16 and 32 channels,
    then 64-10) and a wide MLP (flatten-2048-2048-10: 4.3 M parameters on 8x8 digits, one
    multiply-add per parameter and example, the model whose step is mostly communication
    on a 1 Gb/s link)."""
    import keras
    if kind == "mlp":
        return keras.Sequential([keras.Input(input_shape), keras.layers.Flatten(),
                                 keras.layers.Dense(128, activation="relu"),
                                 keras.layers.Dense(10)])
    if kind == "wide_mlp":
        return keras.Sequential([keras.Input(input_shape), keras.layers.Flatten(),
                                 keras.layers.Dense(2048, activation="relu"),
                                 keras.layers.Dense(2048, activation="relu"),
                                 keras.layers.Dense(10)])
    if kind == "cnn":
        return keras.Sequential([keras.Input(input_shape),
                                 keras.layers.Conv2D(16, 3, activation="relu"),
                                 keras.layers.Conv2D(32, 3, activation="relu"),
                                 keras.layers.Flatten(),
                                 keras.layers.Dense(64, activation="relu"),
                                 keras.layers.Dense(10)])
    raise ValueError(f"unknown model {kind!r}; expected one of {MODELS}")


def compressors(momentum: float) -> List[Dict[str, Any]]:
    """(label, factory, error_feedback) for every configuration of the comparison; a run
    with "momentum_correction" moves the optimizer's ``momentum`` into the compressor."""
    import tfdist
    runs: List[Dict[str, Any]] = [{"compression": "none", "make": lambda: tfdist.Compression.none,
                                   "error_feedback": None}]
    for name in ("fp16", "bf16"):
        if hasattr(tfdist.Compression, name):
            runs.append({"compression": name,
                         "make": (lambda n=name: getattr(tfdist.Compression, n)),
                         "error_feedback": None})
    for ef in (True, False):
        runs.append({"compression": "topk(0.01)", "error_feedback": ef,
                     "make": (lambda ef=ef: tfdist.Compression.topk(0.01, error_feedback=ef))})
    if momentum > 0:
        runs.append({"compression": "topk(0.01)+mc", "error_feedback": True,
                     "momentum_correction": True,
                     "make": lambda: tfdist.Compression.topk(0.01, momentum=momentum)})
        runs.append({"compression": "topk(0.01)+mc+wu", "error_feedback": True,
                     "momentum_correction": True,
                     "make": lambda steps_per_epoch: tfdist.Compression.topk(
                         0.01, momentum=momentum, start_step=2 * steps_per_epoch)})
    for ef in (True, False):
        runs.append({"compression": "powersgd(2)", "error_feedback": ef,
                     "make": (lambda ef=ef: tfdist.Compression.powersgd(2, error_feedback=ef))})
    if hasattr(tfdist.Compression, "auto"):
        # none, bf16 or PowerSGD rank 2 (with error feedback) per group, by measured cost.
        runs.append({"compression": "auto", "error_feedback": None,
                     "make": lambda: tfdist.Compression.auto(powersgd_rank=2)})
    return runs


def dense_gradient_bytes(model) -> int:
    return sum(int(v.shape.num_elements()) * 4 for v in model.trainable_variables)


def wire_bytes_per_step(compressor, gradient_bytes: int, size: int) -> int:
    """What this rank sends per step, by the algorithms' formulas (module docstring)."""
    from tfdist.compression.stateful import dense_wire_bytes
    if hasattr(compressor, "wire_bytes"):
        return compressor.wire_bytes()
    factor = 0.5 if compressor.name in ("fp16", "bf16") else 1.0
    return dense_wire_bytes(int(gradient_bytes * factor), size)


def train(dataset: str, kind: str, run: Dict[str, Any], data, args, epochs: int,
          target: float) -> Dict[str, Any]:
    """One training run; every rank returns the same record."""
    import keras
    import numpy as np
    import tfdist
    import tfdist.keras as hvd
    from tfdist import runtime

    x_train, y_train, x_val, y_val = data
    runtime.restore_rank_state({})  # no residuals from the previous run
    keras.utils.set_random_seed(args.seed)
    model = build_model(kind, x_train.shape[1:])
    steps_per_epoch = len(x_train) // args.batch  # the same on every rank (see main)
    compressor = (run["make"](steps_per_epoch) if run["compression"].endswith("+wu")
                  else run["make"]())
    # With momentum correction the compressor applies the momentum, not the optimizer.
    momentum = 0.0 if run.get("momentum_correction") else args.momentum
    optimizer = hvd.DistributedOptimizer(
        keras.optimizers.SGD(args.learning_rate, momentum=momentum), compression=compressor)
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=False)
    stats_before = tfdist.stats()
    epoch_times: List[float] = []
    accuracies: List[float] = []
    trained = 0.0
    time_to_target: Optional[float] = None
    for _ in range(epochs):
        start = time.perf_counter()
        model.fit(x_train, y_train, batch_size=args.batch, epochs=1, shuffle=True, verbose=0)
        elapsed = time.perf_counter() - start
        epoch_times.append(elapsed)
        trained += elapsed
        accuracy = float(np.mean(np.argmax(model.predict(x_val, verbose=0), axis=1) == y_val))
        accuracies.append(accuracy)
        if time_to_target is None and accuracy >= target:
            time_to_target = trained
    steps = steps_per_epoch * epochs
    stats_after = tfdist.stats()
    gradient_bytes = dense_gradient_bytes(model)
    # The optimizer keeps its own copy of the compressor (rebuilt from its
    # config); that copy counted the bytes.
    compressor = model.optimizer.distributed_settings.compression
    record = {
        "dataset": dataset,
        "model": kind,
        "target": target,
        "compression": run["compression"],
        "error_feedback": run["error_feedback"],
        "optimizer_momentum": momentum,
        "compressor_momentum": getattr(compressor, "momentum", 0.0),
        "parameters": gradient_bytes // 4,
        "val_accuracy": accuracies[-1],
        "val_accuracy_by_epoch": accuracies,
        "wire_bytes_per_step": wire_bytes_per_step(compressor, gradient_bytes, tfdist.size()),
        # Epoch 0 includes tracing; the median of the rest is the steady state.
        "step_time_s": statistics.median(epoch_times[1:] or epoch_times) / steps_per_epoch,
        "time_to_target_s": time_to_target,
        "epochs_to_target": (None if time_to_target is None
                             else next(i + 1 for i, a in enumerate(accuracies) if a >= target)),
        "epoch_times_s": epoch_times,
        "steps": steps,
    }
    if hasattr(compressor, "choices"):  # Compression.auto: what each group went as, and why
        record["auto_choices"] = compressor.choices()
        record["auto_predicted_s"] = {key: d.predicted_seconds
                                      for key, d in compressor.decisions.items()}
    bandwidth = os.environ.get("TFDIST_EMULATED_BANDWIDTH")
    if bandwidth:
        # What this rank's sends alone take on its emulated NIC, per step (no latency).
        record["emulated_wire_seconds_per_step"] = record["wire_bytes_per_step"] / float(bandwidth)
    if "bytes_sent" in stats_after:
        record["counter_bytes_sent_per_step"] = (
            (stats_after["bytes_sent"] - stats_before["bytes_sent"]) / steps)
    return record


def add_ratios(records: List[Dict[str, Any]]) -> None:
    """Each record's wire bytes, step time and time to target relative to "none" on its
    dataset and model."""
    base = {(r["dataset"], r["model"]): r for r in records if r["compression"] == "none"}
    for r in records:
        b = base[(r["dataset"], r["model"])]
        r["wire_ratio"] = (r["wire_bytes_per_step"] / b["wire_bytes_per_step"]
                           if b["wire_bytes_per_step"] else None)
        r["step_time_ratio"] = r["step_time_s"] / b["step_time_s"]
        r["accuracy_delta_points"] = 100 * (r["val_accuracy"] - b["val_accuracy"])
        r["time_to_target_ratio"] = (
            r["time_to_target_s"] / b["time_to_target_s"]
            if r["time_to_target_s"] is not None and b["time_to_target_s"] else None)


def link(document: Dict[str, Any]) -> str:
    """The link between the run's (virtual) hosts, in words."""
    environment = document.get("tfdist_environment") or {}
    bandwidth = environment.get("TFDIST_EMULATED_BANDWIDTH")
    if bandwidth:
        return (f"emulated {float(bandwidth) * 8 / 1e9:g} Gb/s between "
                f"{environment.get('TFDIST_VIRTUAL_HOSTS', '?')} virtual hosts")
    return "shared memory"


def _record(document: Dict[str, Any], r: Dict[str, Any]) -> Dict[str, Any]:
    # Runs from before Fashion-MNIST was added trained on digits only and kept the target
    # in their settings alone.
    return {"dataset": "digits", "target": document.get("settings", {}).get("target"), **r}


def summary(document: Dict[str, Any]) -> str:
    """One row per training run: accuracy, wire bytes, step time and time to target, each
    also relative to the uncompressed run of the same dataset and model."""
    lines = [f"np = {document['np']}, {link(document)}; ratios (×) are to `none` on the same "
             f"data and model", "",
             "| data | model | compression | error feedback | val acc | Δ pts | wire B/step "
             "| wire × | step ms | step × | target | time to target | × |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in (_record(document, r) for r in document["results"]):
        ef = "" if r["error_feedback"] is None else ("on" if r["error_feedback"] else "off")
        ttt = "never" if r["time_to_target_s"] is None else f"{r['time_to_target_s']:.2f} s"
        ttr = ("" if r.get("time_to_target_ratio") is None
               else f"{r['time_to_target_ratio']:.2f}")
        wire = "" if r.get("wire_ratio") is None else f"{r['wire_ratio']:.3f}"  # None at np=1
        lines.append(f"| {r['dataset']} | {r['model']} | {r['compression']} | {ef} "
                     f"| {r['val_accuracy']:.4f} | {r['accuracy_delta_points']:+.2f} "
                     f"| {r['wire_bytes_per_step']} | {wire} | {1000 * r['step_time_s']:.2f} "
                     f"| {r['step_time_ratio']:.2f} | {r['target']:.2f} | {ttt} | {ttr} |")
    return "\n".join(lines)


def _link_order(document: Dict[str, Any]) -> float:
    bandwidth = (document.get("tfdist_environment") or {}).get("TFDIST_EMULATED_BANDWIDTH")
    return float(bandwidth) if bandwidth else float("inf")


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Time to the target accuracy against the link, one line per compressor (runs that
    never reached it are left out), one panel per dataset and model."""
    documents = sorted(documents, key=_link_order)
    links = list(dict.fromkeys(link(d).split(" between")[0] for d in documents))
    panels = list(dict.fromkeys((r["dataset"], r["model"], r["target"], d["np"])
                                for d in documents
                                for r in (_record(d, r) for r in d["results"])))
    figure, axes_row = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5),
                                    squeeze=False)
    for axes, (dataset, model, target, np_) in zip(axes_row[0], panels):
        lines: Dict[str, List] = {}
        for document in documents:
            x = links.index(link(document).split(" between")[0])
            for r in (_record(document, r) for r in document["results"]):
                if ((r["dataset"], r["model"], r["target"], document["np"])
                        != (dataset, model, target, np_) or r["time_to_target_s"] is None):
                    continue
                label = r["compression"] + (" (error feedback)" if r["error_feedback"] else "")
                lines.setdefault(label, []).append((x, r["time_to_target_s"]))
        for label, points in lines.items():
            points.sort()
            axes.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        axes.set_xticks(range(len(links)), links)
        axes.set_xlim(-0.3, len(links) - 0.7)
        axes.set_ylim(bottom=0)
        axes.set_xlabel("link between the virtual hosts")
        axes.set_ylabel(f"training time to {target:g} validation accuracy (s)")
        axes.set_title(f"{dataset}, {model}, np = {np_}")
        if lines:
            axes.legend(fontsize=8)
        else:
            axes.text(0.5, 0.5, "no run reached the target", ha="center",
                      transform=axes.transAxes)
    figure.savefig(path, dpi=110, bbox_inches="tight")


def load_dataset(name: str, rank: int, size: int, batch: int):
    """(x_train, y_train, x_val, y_val) of this rank, its training shard cut to the same
    number of whole batches on every rank (so that every rank runs the same steps)."""
    sys.path.insert(0, str(REPO / "examples"))
    if name == "digits":
        from digits_data import load_shards
    else:
        from fashion_mnist_data import load_shards
    x_train, y_train, x_val, y_val = load_shards(rank, size)
    smallest_shard = len(load_shards(size - 1, size)[0])
    per_rank = smallest_shard // batch * batch
    return x_train[:per_rank], y_train[:per_rank], x_val, y_val


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compression",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(DATASETS),
                        help="fashion is skipped (and said so) when Debian's "
                             "dataset-fashion-mnist is not installed")
    parser.add_argument("--models", default=None,
                        help=f"comma-separated, of {', '.join(MODELS)} (default per dataset: "
                             + "; ".join(f"{d}: {v['models']}" for d, v in DATASET_DEFAULTS.items())
                             + ")")
    parser.add_argument("--epochs", type=int, default=None,
                        help="default per dataset: " + ", ".join(
                            f"{d} {v['epochs']}" for d, v in DATASET_DEFAULTS.items()))
    parser.add_argument("--batch", type=int, default=32, help="per rank")
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--target", type=float, default=None,
                        help="validation accuracy for time-to-target (default per dataset: "
                             + ", ".join(f"{d} {v['target']}" for d, v in DATASET_DEFAULTS.items())
                             + ")")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated compression labels to run")
    parser.add_argument("--error-feedback", choices=("both", "on"), default="both",
                        help="'on' leaves out the top-k and PowerSGD runs without error "
                             "feedback")
    _results.add_arguments(parser)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    datasets = args.datasets.split(",")
    for name in datasets:
        if name not in DATASETS:
            parser.error(f"--datasets: unknown dataset {name!r}; expected some of {DATASETS}")
    for kind in (args.models or "").split(","):
        if kind and kind not in MODELS:
            parser.error(f"--models: unknown model {kind!r}; expected some of {MODELS}")

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tfdist
    sys.path.insert(0, str(REPO / "examples"))
    import fashion_mnist_data

    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    fashion_installed = fashion_mnist_data.available()
    skipped = []
    if "fashion" in datasets and not fashion_installed:
        datasets.remove("fashion")
        skipped.append("fashion")
        if rank == 0:
            print(f"Fashion-MNIST skipped: Debian's dataset-fashion-mnist is not installed "
                  f"({fashion_mnist_data.DEFAULT_DIRECTORY} lacks its files).", flush=True)
    runs = compressors(args.momentum)
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {r["compression"] for r in runs}
        if unknown:
            parser.error(f"--only: unknown compression label(s) {sorted(unknown)}; expected "
                         f"some of {sorted({r['compression'] for r in runs})}")
        runs = [r for r in runs if r["compression"] in wanted or r["compression"] == "none"]
    if args.error_feedback == "on":
        runs = [r for r in runs if r["error_feedback"] is not False]
    records = []
    for dataset in datasets:
        defaults = DATASET_DEFAULTS[dataset]
        epochs = args.epochs or defaults["epochs"]
        target = args.target if args.target is not None else defaults["target"]
        data = load_dataset(dataset, rank, size, args.batch)
        for kind in (args.models or defaults["models"]).split(","):
            for run in runs:
                records.append(train(dataset, kind, run, data, args, epochs, target))
                if rank == 0:
                    r = records[-1]
                    print(f"  {dataset} {kind} {run['compression']} "
                          f"ef={run['error_feedback']}: acc {r['val_accuracy']:.4f}, "
                          f"{r['wire_bytes_per_step']} B/step, "
                          f"{1000 * r['step_time_s']:.2f} ms/step, to target "
                          f"{r['time_to_target_s']}", flush=True)
    add_ratios(records)
    if rank == 0:
        result = {
            "np": size,
            "load_average_at_end": os.getloadavg(),
            "note": "machine shared with other jobs: compare ratios, not absolute times",
            "tfdist_environment": {k: v for k, v in os.environ.items()
                                   if k.startswith("TFDIST_")},
            "link_cost": tfdist.link_cost(),
            "fashion_mnist": ("installed" if fashion_installed
                              else "skipped (dataset-fashion-mnist not installed)"),
            "datasets_skipped": skipped,
            "settings": vars(args),
            "results": records,
        }
        _results.publish(args, "compression", result, argv, size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
