"""Keras training throughput with tfdist, against the no-communication ceiling, in one job.

    tfdistrun -np 2 python -m benchmarks.training --json docs/results/training-np2.json
    tfdistrun -np 2 python -m benchmarks.training --method mwms --json docs/results/training-np2.json --plot

Every rank runs TensorFlow with one intra-op and one inter-op thread and
trains on synthetic data, batch 64 per rank, with ``model.fit``. For each
model, rounds alternate between:

- ``ceiling``: every rank trains a plain Keras model on its own, with no
  communication at all: N single-process runs side by side, the best the
  N ranks could do on this machine;
- ``lockstep``: the plain model with an MPI barrier before every step, so
  no data moves but every step waits for the slowest rank: the bound for
  any synchronous data-parallel scheme here;
- ``tfdist``: the same model with ``DistributedOptimizer`` (gradients
  averaged every step), or, with ``--method mwms``, TensorFlow's
  ``MultiWorkerMirroredStrategy`` (in its own job: it must be created
  before TensorFlow runs anything, and it needs its gRPC servers);
- with ``--serial-bounds``, ``lockstep+mpi`` and ``lockstep+tfdist``: the
  plain model and, before every step, one allreduce of as many float32 as it
  has parameters (the gradients' bytes), by ``MPI_Allreduce`` or by one
  eager ``tfdist.allreduce``, with nothing to overlap it. With one core per
  rank, moving the bytes takes the core from the step whatever the scheme,
  so these rows bound what data-parallel training can reach on the machine
  with that allreduce. Each round also times that allreduce alone, back to
  back, by MPI and by tfdist (auto, and the ring, Rabenseifner and the butterfly
  forced), and adds the fastest to the lock-step row's step: ``lockstep+fastest
  (computed)``, what a scheme with nothing overlapped would reach if the
  allreduce cost in training what it costs back to back (it costs more there:
  the step leaves its memory cold).

Throughput is the sum over ranks of samples per second; the ratio to the
ceiling is the fraction of the machine that data-parallel training keeps.
Alternating the rounds, each in ``round_order``'s order (every row follows
every other equally often), and taking medians keeps other load on the
machine, and what one row leaves behind for the next, from favouring one side.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional

from benchmarks import _results
from benchmarks._interleaved import round_order, slowest_seconds_per_call

MODELS = ("cnn", "mlp")


def build_model(kind: str):
    """The benchmark models: Keras' mnist convnet (1.2 M parameters) and a 784-512-512-10 MLP."""
    import keras
    if kind == "cnn":
        return keras.Sequential([
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Dropout(0.25),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(10),
        ])
    if kind == "mlp":
        return keras.Sequential([
            keras.Input((784,)),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(512, activation="relu"),
            keras.layers.Dense(10),
        ])
    raise ValueError(f"unknown model {kind!r}; expected one of {MODELS}")


def synthetic_dataset(kind: str, batch: int, seed: int):
    """One fixed random batch, repeated: the input pipeline costs nothing."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.RandomState(seed)
    shape = (batch, 28, 28, 1) if kind == "cnn" else (batch, 784)
    x = rng.rand(*shape).astype("float32")
    y = rng.randint(0, 10, batch).astype("int64")
    return tf.data.Dataset.from_tensors((x, y)).repeat()


def _compile(model, optimizer) -> None:
    import keras
    model.compile(optimizer=optimizer,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)


# Steps of every fit() left out of the timing: the first steps of a fit pay
# for setting up its iterator; the timing also stops at the last step, before
# fit() tears down (which takes 0.2-0.8 s here, as long as 100 MLP steps, and
# varies from call to call).
UNTIMED_STEPS = 2


def _usage() -> Dict[str, int]:
    """This process's minor page faults and involuntary context switches so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"minor_faults": usage.ru_minflt, "involuntary_switches": usage.ru_nivcsw}


def _step_clock():
    """Keras callback: ``start`` at step ``UNTIMED_STEPS``, ``end`` when training ends, and
    the process's usage counters between the two."""
    import keras

    class StepClock(keras.callbacks.Callback):
        # Only begin/end hooks: a batch-end hook would change what is timed.
        start = end = 0.0
        at_start: Dict[str, int] = {}
        counted: Dict[str, int] = {}  # between the two

        def on_train_batch_begin(self, batch, logs=None):
            if batch == UNTIMED_STEPS:
                self.start = time.perf_counter()
                self.at_start = _usage()

        def on_train_end(self, logs=None):
            self.end = time.perf_counter()
            now = _usage()
            self.counted = {name: now[name] - self.at_start.get(name, now[name])
                            for name in now}

    return StepClock()


class Trainer:
    """A compiled model and its dataset; ``run(steps)`` trains and returns the seconds taken."""

    def __init__(self, model, dataset, fit_kwargs: Optional[Dict] = None) -> None:
        self.model = model
        self.dataset = dataset
        self.fit_kwargs = fit_kwargs or {}
        #: Counters of the last run's timed steps, per step (``_usage``'s names).
        self.per_step: Dict[str, float] = {}

    def run(self, steps: int) -> float:
        """Trains ``steps + UNTIMED_STEPS`` steps; returns the seconds the last ``steps`` took."""
        clock = _step_clock()
        kwargs = dict(self.fit_kwargs)
        kwargs["callbacks"] = list(kwargs.get("callbacks", [])) + [clock]
        self.model.fit(self.dataset, steps_per_epoch=steps + UNTIMED_STEPS, epochs=1,
                       verbose=0, shuffle=False, **kwargs)
        self.per_step = {name: count / steps for name, count in clock.counted.items()}
        return clock.end - clock.start


#: Blocking calls per round of each allreduce timed alone (``--serial-bounds``).
ALONE_CALLS = 20
#: The row of the lock-step step plus the fastest allreduce timed alone that round.
LOCKSTEP_PLUS_FASTEST = "lockstep+fastest (computed)"


def _gradient_allreduces(comm, kind: str, count: int) -> Dict[str, Callable[[], None]]:
    """One blocking allreduce of ``count`` float32 (a model's gradients' bytes) by MPI (in
    place: what MPI alone needs for the bytes) and by one eager ``tfdist.allreduce`` of one
    tensor with auto (what one fused gradient group costs through tfdist's runtime, without
    the optimizer's integration) and with the ring, Rabenseifner and the butterfly forced
    (not the tree: at the benchmark's np 2 the cost model never offers it). The buffers
    hold zeros, so a Sum leaves them as they are, call after call."""
    import numpy as np
    import tensorflow as tf
    import tfdist
    from mpi4py import MPI
    buffer = np.zeros(count, np.float32)
    tensor = tf.zeros([count], tf.float32)
    calls: Dict[str, Callable[[], None]] = {
        "mpi": lambda: comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)}
    for algorithm in (None, "ring", "rabenseifner", "butterfly"):
        label = f"tfdist {algorithm or 'auto'}"
        calls[label] = (lambda algorithm=algorithm, label=label: tfdist.allreduce(
            tensor, op=tfdist.Sum, name=f"{kind} gradients, {label}", algorithm=algorithm))
    return calls


def _time_alone(comm, call: Callable[[], None]) -> float:
    """Seconds per call of ``call``, the slowest rank's mean over ALONE_CALLS calls."""
    call()  # untimed: what the previous block left behind
    return slowest_seconds_per_call(comm, call, ALONE_CALLS)


def _lockstep_plus_alone(rates: Dict[str, List[float]], alone: Dict[str, List[float]],
                         samples_per_step: int) -> Dict[str, List[float]]:
    """Per round, the ratio to the ceiling of lock-step's step plus each allreduce alone.

    ``samples_per_step``: the batch summed over ranks, so that ``samples_per_step / rate``
    is a step's seconds. With one core per rank nothing overlaps the allreduce; if it
    cost what it costs back to back, a step of data-parallel training with it would take
    this long.
    """
    ratios: Dict[str, List[float]] = {}
    for name, seconds in alone.items():
        ratios[name] = [samples_per_step / (samples_per_step / lockstep + t) / ceiling
                        for lockstep, ceiling, t in zip(rates["lockstep"], rates["ceiling"],
                                                        seconds)]
    return ratios


def _timed_rounds(comm, trainers: Dict[str, Trainer], batch: int, steps: int,
                  rounds: int,
                  alone: Optional[Dict[str, Callable[[], None]]] = None) -> Dict[str, Dict]:
    """Alternates the trainers for ``rounds`` rounds; returns samples/s (summed over ranks).

    Each round visits the trainers in ``round_order``'s order: in one fixed order, a
    row would pay, or be spared, what the same neighbour leaves behind every round
    (page-cache and allocator state, the runtime's learned polling), where the ratio
    to the ceiling is meant to compare the rows alone.

    ``alone``: allreduces to time by themselves after each round's trainers (in
    ``round_order``'s order among themselves), and to add to the lock-step row's
    steps (``lockstep+fastest (computed)``).
    """
    alone = alone or {}
    for trainer in trainers.values():  # trace and warm up, outside the timing
        comm.Barrier()
        trainer.run(max(3, steps // 5))
    for call in alone.values():
        call()
    alone_seconds: Dict[str, List[float]] = {name: [] for name in alone}
    rates: Dict[str, List[float]] = {name: [] for name in trainers}
    # Per round, the rank with the most: page faults and descheduling are what slowed
    # rounds down on the 2-core VM, and a step waits for the slowest rank.
    counts: Dict[str, Dict[str, List[float]]] = {name: {} for name in trainers}
    for round_index in range(rounds):
        for name in round_order(list(trainers), round_index):
            trainer = trainers[name]
            comm.Barrier()
            seconds = trainer.run(steps)
            rates[name].append(comm.allreduce(batch * steps / seconds))
            every_rank = comm.allgather(trainer.per_step)
            for counter in trainer.per_step:
                counts[name].setdefault(counter, []).append(
                    max(rank_counts[counter] for rank_counts in every_rank))
        for name in round_order(list(alone), round_index):
            alone_seconds[name].append(_time_alone(comm, alone[name]))
    results = {name: {"samples_per_second": statistics.median(values), "rounds": values}
               for name, values in rates.items()}
    for name, by_counter in counts.items():
        for counter, values in by_counter.items():
            results[name][f"{counter}_per_step"] = statistics.median(values)
            results[name][f"round_{counter}_per_step"] = values
    # Each round's ratio compares runs seconds apart, under the same outside
    # load; their median is the figure reported.
    for name in trainers:
        if name != "ceiling":
            ratios = [a / c for a, c in zip(rates[name], rates["ceiling"])]
            results[name]["ratio"] = statistics.median(ratios)
            results[name]["round_ratios"] = ratios
    if alone:
        plus_alone = _lockstep_plus_alone(rates, alone_seconds, batch * comm.size)
        fastest = [max(per_name[r] for per_name in plus_alone.values())
                   for r in range(rounds)]
        results[LOCKSTEP_PLUS_FASTEST] = {
            "ratio": statistics.median(fastest), "round_ratios": fastest,
            "samples_per_second": statistics.median(
                [f * c for f, c in zip(fastest, rates["ceiling"])])}
        results["alone_us"] = {name: statistics.median(seconds) * 1e6
                               for name, seconds in alone_seconds.items()}
        results["round_alone_us"] = {name: [t * 1e6 for t in seconds]
                                     for name, seconds in alone_seconds.items()}
        results["lockstep_plus_alone"] = {name: statistics.median(values)
                                          for name, values in plus_alone.items()}
    return results


def _plain_trainer(kind: str, batch: int, rank: int,
                   before_every_step: Optional[Callable[[], Any]] = None) -> Trainer:
    """The model without tfdist; ``before_every_step`` runs at each step's start (a Keras
    callback with only that hook, so that nothing else changes what is timed)."""
    import keras
    model = build_model(kind)
    _compile(model, keras.optimizers.SGD(0.01, momentum=0.9))
    trainer = Trainer(model, synthetic_dataset(kind, batch, seed=rank))
    if before_every_step is not None:
        class BeforeEveryStep(keras.callbacks.Callback):
            def on_train_batch_begin(self, batch, logs=None):
                before_every_step()

        trainer.fit_kwargs = {"callbacks": [BeforeEveryStep()]}
    return trainer


def _lockstep_trainer(kind: str, batch: int, rank: int, comm) -> Trainer:
    """The plain model with an MPI barrier before every step: no data moves.

    The bound for any synchronous data-parallel scheme on this machine: every
    step lasts as long as the slowest rank's, which the ceiling's independent
    runs never pay.
    """
    return _plain_trainer(kind, batch, rank, before_every_step=comm.Barrier)


def _serial_bound_trainer(kind: str, batch: int, rank: int,
                          allreduce: Callable[[], None]) -> Trainer:
    """The plain model and, before every step, a blocking allreduce of its parameters'
    bytes (one of ``_gradient_allreduces``)."""
    return _plain_trainer(kind, batch, rank, before_every_step=allreduce)


def _tfdist_trainer(kind: str, batch: int, rank: int, num_groups: int) -> Trainer:
    import keras
    import tfdist.keras as hvd
    model = build_model(kind)
    _compile(model, hvd.DistributedOptimizer(keras.optimizers.SGD(0.01, momentum=0.9),
                                             num_groups=num_groups))
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
    return Trainer(model, synthetic_dataset(kind, batch, seed=rank), {"callbacks": callbacks})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def _start_mwms(comm):
    """Creates MultiWorkerMirroredStrategy on every rank (before TensorFlow runs any op)."""
    ports = comm.gather(_free_port(), root=0)
    ports = comm.bcast(ports, root=0)
    os.environ["TF_CONFIG"] = json.dumps({
        "cluster": {"worker": [f"localhost:{port}" for port in ports]},
        "task": {"type": "worker", "index": comm.rank},
    })
    import tensorflow as tf
    return tf.distribute.MultiWorkerMirroredStrategy()


def _mwms_trainer(strategy, kind: str, batch: int, rank: int) -> Trainer:
    import keras
    import tensorflow as tf
    with strategy.scope():
        model = build_model(kind)
        _compile(model, keras.optimizers.SGD(0.01, momentum=0.9))
    # The global batch is split across the workers; each worker's own data.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = synthetic_dataset(kind, batch * comm_size(), seed=rank).with_options(options)
    return Trainer(model, dataset)


class StrategyLoopTrainer:
    """A custom loop under ``strategy.run``, for when Keras 3's fit fails under the strategy."""

    def __init__(self, strategy, kind: str, batch: int, rank: int) -> None:
        import keras
        import tensorflow as tf
        with strategy.scope():
            self.model = build_model(kind)
            optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        global_batch = batch * strategy.num_replicas_in_sync
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)
        dataset = synthetic_dataset(kind, global_batch, seed=rank).with_options(options)
        self.iterator = iter(strategy.experimental_distribute_dataset(dataset))
        model = self.model

        def replica_step(x, y):
            with tf.GradientTape() as tape:
                value = tf.reduce_sum(loss(y, model(x, training=True))) / global_batch
            grads = tape.gradient(value, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        @tf.function
        def train_step(iterator):
            strategy.run(replica_step, args=next(iterator))

        self.train_step = train_step

    def run(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            self.train_step(self.iterator)
        self.model.trainable_variables[0].numpy()  # wait for the last step
        return time.perf_counter() - start


def comm_size() -> int:
    from mpi4py import MPI
    return MPI.COMM_WORLD.size


def _working_mwms_trainer(strategy, kind: str, batch: int, comm, results: Dict) -> Dict:
    """MWMS with model.fit if a step runs; else MWMS in a custom loop (the failure is recorded)."""
    trainer = _mwms_trainer(strategy, kind, batch, comm.rank)
    try:
        trainer.run(2)
        return {"mwms[model.fit]": trainer}
    except Exception as error:  # noqa: BLE001  (Keras 3's fit under MWMS fails in TF 2.21)
        text = " ".join(str(error).split())
        brief = text if len(text) < 300 else f"{text[:120]} ... {text[-160:]}"
        results.setdefault("mwms_fit_error", f"{type(error).__name__}: {brief}")
    return {"mwms[custom loop]": StrategyLoopTrainer(strategy, kind, batch, comm.rank)}


def _set_threads(intra: int, inter: int) -> None:
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)


def run(method: str, models: List[str], batch: int, steps: Dict[str, int], rounds: int,
        num_groups: List[int], threads: int, serial_bounds: bool = False) -> Dict:
    """Runs the benchmark on every rank; returns the results (meaningful on every rank)."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    _set_threads(threads, threads)  # before anything initialises TensorFlow's context
    strategy = _start_mwms(comm) if method == "mwms" else None
    import tfdist
    if method == "tfdist":
        tfdist.init()
    results: Dict = {"method": method, "ranks": comm.size, "batch_per_rank": batch,
                     "intra_op_threads": threads, "inter_op_threads": threads,
                     "models": {}}
    for kind in models:
        trainers: Dict[str, Trainer] = {
            "ceiling": _plain_trainer(kind, batch, comm.rank),
            "lockstep": _lockstep_trainer(kind, batch, comm.rank, comm),
        }
        allreduces = (_gradient_allreduces(comm, kind, trainers["ceiling"].model.count_params())
                      if serial_bounds else None)
        if allreduces:
            for through, call in (("mpi", "mpi"), ("tfdist", "tfdist auto")):
                trainers[f"lockstep+{through}"] = _serial_bound_trainer(
                    kind, batch, comm.rank, allreduces[call])
        try:
            if method == "tfdist":
                for groups in num_groups:
                    trainers[_label(method, groups)] = _tfdist_trainer(kind, batch, comm.rank,
                                                                       groups)
            else:
                trainers.update(_working_mwms_trainer(strategy, kind, batch, comm, results))
            measured = _timed_rounds(comm, trainers, batch, steps[kind], rounds, allreduces)
            entry = {"parameters": trainers["ceiling"].model.count_params(), **measured}
        except Exception as error:  # noqa: BLE001  (report it: tf.distribute may not work)
            entry = {"error": f"{type(error).__name__}: {str(error)[:500]}"}
        results["models"][kind] = entry
    return results


def _label(method: str, num_groups: int) -> str:
    return f"{method}[num_groups={num_groups}]"


def _methods(document: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [entry for key, entry in document.items()
            if key != "metadata" and isinstance(entry, dict) and "models" in entry]


def summary(document: Dict[str, Any]) -> str:
    """Per model and method: samples/s against the ceiling measured in the same job."""
    lines = []
    for results in _methods(document):
        lines += [f"`--method {results['method']}`: np = {results['ranks']}, batch "
                  f"{results['batch_per_rank']} per rank, {results['intra_op_threads']} intra-op "
                  f"and {results['inter_op_threads']} inter-op threads per rank; samples/s summed "
                  f"over ranks (median of rounds); ratio: median over rounds of method / ceiling",
                  ""]
        if "mwms_fit_error" in results:
            lines += ["MultiWorkerMirroredStrategy with `model.fit` failed, so a custom loop "
                      "ran: " + results["mwms_fit_error"][:160] + " ...", ""]
        lines += ["| model | parameters | method | ceiling (samples/s) | method (samples/s) "
                  "| ratio | range over rounds | minor faults / step | involuntary switches "
                  "/ step |", "|---|---|---|---|---|---|---|---|---|"]
        for kind, entry in results["models"].items():
            if "error" in entry:
                lines.append(f"| {kind} | | {results['method']} failed: {entry['error']} "
                             f"| | | | | | |")
                continue
            for name, measured in entry.items():
                if not isinstance(measured, dict) or "round_ratios" not in measured:
                    continue  # the ceiling itself, and the allreduces timed alone
                ratios = measured["round_ratios"]
                lines.append(f"| {kind} | {entry['parameters']} | {name} "
                             f"| {entry['ceiling']['samples_per_second']:.1f} "
                             f"| {measured['samples_per_second']:.1f} | {measured['ratio']:.3f} "
                             f"| {min(ratios):.3f}-{max(ratios):.3f} "
                             f"| {' | '.join(_counts(measured))} |")
        lines.append("")
        for kind, entry in results["models"].items():
            if "alone_us" in entry:
                lines += [_alone_sentence(kind, entry), ""]
        ceilings = [f"{kind} {' and '.join(_counts(entry['ceiling']))}"
                    for kind, entry in results["models"].items() if "ceiling" in entry]
        if ceilings:
            lines += ["Minor page faults and involuntary context switches per step (per round "
                      "the rank with the most, median over rounds; – where not counted), of "
                      "the ceiling: " + "; ".join(ceilings) + ".", ""]
    return "\n".join(lines)


def _alone_sentence(kind: str, entry: Dict[str, Any]) -> str:
    """The allreduces of one model's gradient bytes timed alone, and lock-step plus each."""
    timed = ", ".join(f"{name} {us:.0f} µs ({entry['lockstep_plus_alone'][name]:.3f})"
                      for name, us in entry["alone_us"].items())
    return (f"{kind}: one allreduce of its {entry['parameters']} float32 alone, median over "
            f"rounds (in brackets, lock-step plus it against the ceiling, computed per "
            f"round): {timed}. `{LOCKSTEP_PLUS_FASTEST}` takes each round's fastest.")


def _counts(measured: Dict[str, Any]) -> List[str]:
    """A row's minor faults and involuntary switches per step, formatted ("–": not counted)."""
    return [f"{measured[key]:.1f}" if key in measured else "–"
            for key in ("minor_faults_per_step", "involuntary_switches_per_step")]


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Each method's throughput as a fraction of the no-communication ceiling, per model."""
    bars = []  # (model, method, ratio, lowest round, highest round)
    for document in documents:
        for results in _methods(document):
            for kind, entry in results["models"].items():
                for name, measured in entry.items():
                    if isinstance(measured, dict) and "ratio" in measured:
                        ratios = measured["round_ratios"]
                        bars.append((kind, name, measured["ratio"], min(ratios), max(ratios)))
    models = list(dict.fromkeys(bar[0] for bar in bars))
    methods = list(dict.fromkeys(bar[1] for bar in bars))
    width = 0.8 / max(1, len(methods))
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for m, method in enumerate(methods):
        mine = [bar for bar in bars if bar[1] == method]
        x = [models.index(bar[0]) + (m - (len(methods) - 1) / 2) * width for bar in mine]
        ratios = [bar[2] for bar in mine]
        axes.bar(x, ratios, width, label=method,
                 yerr=[[r - bar[3] for r, bar in zip(ratios, mine)],
                       [bar[4] - r for r, bar in zip(ratios, mine)]], capsize=3)
    axes.axhline(1.0, color="black", linestyle="--", linewidth=1,
                 label="ceiling: independent processes, no communication")
    axes.set_xticks(range(len(models)), models)
    axes.set_ylabel("throughput / ceiling (median over rounds; bars: range)")
    axes.set_ylim(0, 1.15)
    axes.set_title("Keras training throughput against the no-communication ceiling")
    axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2)
    figure.savefig(path, dpi=110, bbox_inches="tight")


def _merge(path: Optional[str], results: Dict) -> Dict[str, Any]:
    # Each method runs in its own job: keep what earlier jobs wrote for the others, each
    # with the metadata of the run that measured it.
    everything: Dict[str, Any] = {}
    if path and os.path.exists(path):
        with open(path) as existing:
            everything = json.load(existing)
        earlier = everything.pop("metadata", None)
        for entry in _methods(everything):
            if earlier is not None:
                entry.setdefault("metadata", earlier)
    everything[results["method"]] = results
    return everything


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=("tfdist", "mwms"), default="tfdist")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--batch", type=int, default=64, help="per rank")
    parser.add_argument("--cnn-steps", type=int, default=40, help="timed steps per round")
    parser.add_argument("--mlp-steps", type=int, default=200, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-groups", default="0,1",
                        help="DistributedOptimizer num_groups; a comma list measures each "
                             "(the default, None, is 1 on CPUs and 0 with GPUs)")
    parser.add_argument("--threads", type=int, default=1,
                        help="intra-op and inter-op threads per rank")
    parser.add_argument("--serial-bounds", action="store_true",
                        help="also the plain model with one allreduce of its parameters' "
                             "bytes before every step (MPI_Allreduce, and tfdist.allreduce)")
    _results.add_arguments(parser, "merge the results into this file (one entry per "
                                   "--method), with X.md beside it")
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    if args.serial_bounds and args.method != "tfdist":
        parser.error("--serial-bounds needs --method tfdist (its job runs tfdist's runtime)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    results = run(args.method, args.models.split(","), args.batch,
                  {"cnn": args.cnn_steps, "mlp": args.mlp_steps}, args.rounds,
                  [int(g) for g in args.num_groups.split(",")], args.threads,
                  args.serial_bounds)
    from mpi4py import MPI
    if MPI.COMM_WORLD.rank == 0:
        _results.publish(args, "training", _merge(args.json, results), argv,
                         MPI.COMM_WORLD.size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
