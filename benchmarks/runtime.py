"""The runtime's overhead: eager latency and a tf.function step, against MPI in the same job.

    mpirun -np 2 python -m benchmarks.runtime --json docs/results/runtime-np2.json

(1) Latency of an eager ``tfdist.allreduce`` of 4 bytes (one float32), named
    (the steady state: the response cache answers) and unnamed (a new
    sequence name every call: a full negotiation round), against mpi4py's
    ``MPI_Allreduce`` of 4 bytes. Goal (issue 3): within 15x.
(2) A ``tf.function`` step of 100 allreduces of 16 KiB each (fused by the
    runtime) against one ``MPI_Allreduce`` of the 1.6 MB they add up to.
    Goal: within 2x; and (issue 25) at most the same step without
    communication plus two such MPI calls. Two controls: the step with
    ``r.assign(g * 1.0)`` in place of the allreduce (TensorFlow's own step),
    and the same 100 allreduces on a process set of this rank alone (the
    kernels, the runtime and TensorFlow's handling of 100 asynchronous ops,
    without a peer to talk to). Beside them, the same step with the 100
    tensors in one ``tfdist.grouped_allreduce``: one kernel, which is what
    DistributedOptimizer and DistributedGradientTape submit by default on
    CPUs. The runtime's phase counters (``tfdist.stats()["phase_ns"]``),
    taken around each block, say where each step's time went.

The methods are measured in alternating blocks, each round of blocks in
``round_order``'s order (every method follows every other equally often), with
the same iteration count on every rank, and each method's time is the median of
its blocks, averaged over the ranks: on a shared machine, load that comes and
goes, and what one block leaves to the next, then hit both sides of a ratio alike.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from benchmarks import _results
from benchmarks._interleaved import round_order

STEP_TENSORS = 100
STEP_TENSOR_BYTES = 16 * 1024
# The grouped step's key in the results (files from before it lack it).
GROUPED = "tfdist_grouped_function_100x16KiB"
# The runtime's phase counters (tfdist.stats()["phase_ns"]), in step order.
PHASES = ("arrival", "pickup", "negotiation", "collectives", "completion")
PHASE_MEANING = {
    "arrival": "the first kernel's enqueue to the last one's: TensorFlow starting 100 kernels",
    "pickup": "the last enqueue to the round's start: the runtime thread waking",
    "negotiation": "the negotiation round: mostly waiting for the other rank's burst",
    "collectives": "packing into the fusion buffer, the ring, unpacking",
    "completion": "the 100 kernels' completion callbacks, which run TensorFlow's executor "
                  "(the assigns) on the runtime thread",
}


def _blocks(comm, methods: Dict[str, Callable[[], object]], iterations: Dict[str, int],
            blocks: int, counters: Optional[Callable[[], Dict[str, float]]] = None
            ) -> Tuple[Dict[str, float], Dict[str, Dict[str, float]]]:
    """Median over blocks of the seconds per call, averaged over the ranks; and,
    with ``counters`` (a reading of cumulative counters), how much each
    counter moved per call of each method, averaged over the ranks."""
    samples: Dict[str, List[float]] = {name: [] for name in methods}
    moved: Dict[str, Dict[str, float]] = {name: {} for name in methods}
    for block in range(blocks):
        for name in round_order(list(methods), block):
            fn = methods[name]
            comm.Barrier()
            before = counters() if counters else {}
            start = time.perf_counter()
            for _ in range(iterations[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / iterations[name])
            if counters:
                for key, value in counters().items():
                    moved[name][key] = moved[name].get(key, 0) + value - before[key]
    seconds = {name: comm.allreduce(statistics.median(s)) / comm.size
               for name, s in samples.items()}
    per_call = {name: {key: comm.allreduce(total / (blocks * iterations[name])) / comm.size
                       for key, total in moved[name].items()}
                for name in methods}
    return seconds, per_call


def _runtime_counters() -> Dict[str, float]:
    """The global runtime's phase counters (µs) and its calls and full rounds."""
    import tfdist
    stats = tfdist.stats()
    readings = {phase: stats["phase_ns"][phase] / 1e3 for phase in PHASES}
    readings["allreduce_calls"] = stats["allreduce_calls"]
    readings["full_rounds"] = stats["negotiation_rounds"] - stats["cached_rounds"]
    return readings


def measure(comm, blocks: int, scale: float) -> Dict[str, object]:
    """Runs both comparisons; returns the results (the same on every rank)."""
    import tensorflow as tf

    import tfdist
    rank = tfdist.rank()
    n = lambda count: max(1, int(count * scale))  # noqa: E731

    # (1) 4 bytes, eager.
    small = tf.constant([float(rank)], tf.float32)
    small_np = np.array([float(rank)], np.float32)
    small_out = np.empty_like(small_np)
    latency_methods = {
        "mpi_allreduce_4B": lambda: comm.Allreduce(small_np, small_out),
        "tfdist_eager_named_4B": lambda: tfdist.allreduce(small, op=tfdist.Sum, name="bench.4B"),
        "tfdist_eager_unnamed_4B": lambda: tfdist.allreduce(small, op=tfdist.Sum),
    }
    latency_iterations = {"mpi_allreduce_4B": n(2000), "tfdist_eager_named_4B": n(300),
                          "tfdist_eager_unnamed_4B": n(300)}
    _blocks(comm, latency_methods, {k: max(1, v // 10) for k, v in latency_iterations.items()},
            1)  # warm-up
    latency, _ = _blocks(comm, latency_methods, latency_iterations, blocks)

    # (2) 100 x 16 KiB in one tf.function step vs one MPI_Allreduce of 1.6 MB.
    # Like a training step: the tensors ("gradients") live in the graph and
    # the results are assigned to variables, so the step is one call without
    # 100 Python arguments and results to convert.
    elements = STEP_TENSOR_BYTES // 4
    gradients = [tf.Variable(tf.fill([elements], float(rank + i))) for i in range(STEP_TENSORS)]
    results = [tf.Variable(tf.zeros([elements])) for _ in range(STEP_TENSORS)]

    @tf.function
    def step():
        for i, (gradient, result) in enumerate(zip(gradients, results)):
            result.assign(tfdist.allreduce(gradient, op=tfdist.Sum, name=f"bench.step.{i}"))

    @tf.function
    def local_step():  # the same step without communication: TensorFlow's share
        for gradient, result in zip(gradients, results):
            result.assign(gradient * 1.0)

    @tf.function
    def grouped_step():  # one kernel for the 100: what the distributed optimizers submit
        reduced = tfdist.grouped_allreduce(gradients, op=tfdist.Sum, name="bench.grouped")
        for out, result in zip(reduced, results):
            result.assign(out)

    # add_process_set is collective: every rank adds every one-rank set.
    alone = [tfdist.add_process_set([r]) for r in range(tfdist.size())][rank]

    @tf.function
    def alone_step():  # the same kernels and runtime, with nobody to talk to
        for i, (gradient, result) in enumerate(zip(gradients, results)):
            result.assign(tfdist.allreduce(gradient, op=tfdist.Sum, name=f"bench.alone.{i}",
                                           process_set=alone))

    alone_step()
    for i, out in enumerate(results):  # the benchmark only counts if it is right
        np.testing.assert_allclose(out.numpy(), np.full(elements, rank + i))
    step()
    size = tfdist.size()
    expected = sum(range(size))
    for i, out in enumerate(results):
        np.testing.assert_allclose(out.numpy(), np.full(elements, expected + size * i))
    for result in results:
        result.assign(tf.zeros_like(result))
    grouped_step()
    for i, out in enumerate(results):
        np.testing.assert_allclose(out.numpy(), np.full(elements, expected + size * i))
    big_np = np.ones(STEP_TENSORS * elements, np.float32)
    big_out = np.empty_like(big_np)
    step_methods = {
        "mpi_allreduce_1.6MB": lambda: comm.Allreduce(big_np, big_out),
        "tfdist_function_100x16KiB": step,
        "local_function_100x16KiB": local_step,
        "tfdist_alone_function_100x16KiB": alone_step,
        GROUPED: grouped_step,
    }
    step_iterations = {"mpi_allreduce_1.6MB": n(100), "tfdist_function_100x16KiB": n(50),
                       "local_function_100x16KiB": n(50), "tfdist_alone_function_100x16KiB": n(50),
                       GROUPED: n(50)}
    _blocks(comm, step_methods, {k: max(1, v // 10) for k, v in step_iterations.items()}, 1)
    # Only the global set's steps move the global runtime's counters (the
    # one-rank sets have runtimes of their own).
    steps, moved = _blocks(comm, step_methods, step_iterations, blocks,
                           counters=_runtime_counters)
    step, grouped = moved["tfdist_function_100x16KiB"], moved[GROUPED]

    seconds = {**latency, **steps}
    return {
        "ranks": size,
        "seconds": seconds,
        "microseconds": {k: v * 1e6 for k, v in seconds.items()},
        "ratio_eager_named_vs_mpi": latency["tfdist_eager_named_4B"] / latency["mpi_allreduce_4B"],
        "ratio_eager_unnamed_vs_mpi": (latency["tfdist_eager_unnamed_4B"]
                                       / latency["mpi_allreduce_4B"]),
        "ratio_step_vs_mpi": (steps["tfdist_function_100x16KiB"]
                              / steps["mpi_allreduce_1.6MB"]),
        "step_allreduces_per_step": step["allreduce_calls"],
        "step_full_negotiation_rounds_per_step": step["full_rounds"],
        "step_phases_us": {phase: step[phase] for phase in PHASES},
        "grouped_step_allreduces_per_step": grouped["allreduce_calls"],
        "grouped_step_phases_us": {phase: grouped[phase] for phase in PHASES},
        "goals": {"eager": 15.0, "step": 2.0},
        "settings": {"fusion_threshold": tfdist.RuntimeSettings.from_environment().fusion_threshold,
                     "cycle_time_ms": tfdist.RuntimeSettings.from_environment().cycle_time},
    }


def summary(document: Dict[str, Any]) -> str:
    """Microseconds per call of each method, and the ratios to MPI against their goals."""
    us = document["microseconds"]
    goals = document.get("goals", {"eager": 15.0, "step": 2.0})
    rows = [
        ("(1) eager allreduce, 4 B", "MPI_Allreduce", us["mpi_allreduce_4B"], ""),
        ("", "tfdist, named (response cache)", us["tfdist_eager_named_4B"],
         f"{document['ratio_eager_named_vs_mpi']:.1f}x (goal ≤ {goals['eager']:g}x)"),
        ("", "tfdist, unnamed (full negotiation)", us["tfdist_eager_unnamed_4B"],
         f"{document['ratio_eager_unnamed_vs_mpi']:.1f}x (goal ≤ {goals['eager']:g}x)"),
        ("(2) step of 100 x 16 KiB", "one MPI_Allreduce of 1.6 MB", us["mpi_allreduce_1.6MB"], ""),
        ("", "tf.function of 100 tfdist.allreduce", us["tfdist_function_100x16KiB"],
         f"{document['ratio_step_vs_mpi']:.2f}x (goal ≤ {goals['step']:g}x)"),
        ("", "the same step without communication", us["local_function_100x16KiB"], ""),
    ]
    if "tfdist_alone_function_100x16KiB" in us:  # results before it lack the control
        rows.append(("", "the same allreduces on a one-rank process set",
                     us["tfdist_alone_function_100x16KiB"], ""))
    if GROUPED in us:  # nor the grouped step
        rows.append(("", "the 100 as one tfdist.grouped_allreduce", us[GROUPED],
                     f"{us[GROUPED] / us['mpi_allreduce_1.6MB']:.2f}x"))
    lines = [f"ranks = {document['ranks']}; "
             f"{document['step_allreduces_per_step']:.1f} allreduces and "
             f"{document['step_full_negotiation_rounds_per_step']:.1f} full negotiation rounds "
             f"per step", "", "| comparison | method | µs per call | vs MPI |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c:.1f} | {d} |" for a, b, c, d in rows]
    lines += ["", f"Step against TensorFlow's own step plus two fused MPI calls: "
              f"{step_vs_local_and_mpi(us):.2f}x (issue 25's graph-mode goal: ≤ 1.0x)."]
    if "tfdist_alone_function_100x16KiB" in us:
        lines += [f"Step against the same step on a one-rank process set plus two fused MPI "
                  f"calls: {step_vs_alone_and_mpi(us):.2f}x."]
    if GROUPED in us:
        lines += [f"The grouped step against TensorFlow's own step plus two fused MPI calls: "
                  f"{step_vs_local_and_mpi(us, GROUPED):.2f}x."]
    phases = document.get("step_phases_us")
    grouped_phases = document.get("grouped_step_phases_us")
    if phases and grouped_phases:
        lines += ["", _phase_table(us, phases, grouped_phases)]
    elif phases:
        step = us["tfdist_function_100x16KiB"]
        outside = step - sum(phases[p] for p in PHASES)
        lines += ["", "Where the step's time goes (the runtime's phase counters, µs per step, "
                  "means over all its blocks; outside the runtime is the step's median less "
                  "them):",
                  "", "| phase | µs | share | what |", "|---|---|---|---|"]
        lines += [f"| {p} | {phases[p]:.0f} | {phases[p] / step:.0%} | {PHASE_MEANING[p]} |"
                  for p in PHASES]
        lines += [f"| outside the runtime | {outside:.0f} | {outside / step:.0%} | "
                  f"TensorFlow: the call, the reads before the first kernel, the function's "
                  f"return |"]
    return "\n".join(lines)


def _phase_table(us: Dict[str, float], phases: Dict[str, float],
                 grouped_phases: Dict[str, float]) -> str:
    """Where the time of the step of 100 kernels and of the grouped step goes."""
    steps = {"100 kernels": (us["tfdist_function_100x16KiB"], phases),
             "one grouped kernel": (us[GROUPED], grouped_phases)}
    lines = ["Where each step's time goes (the runtime's phase counters taken around each "
             "block, µs per step, means over its blocks; outside the runtime is the step's "
             "median less them):", "",
             "| phase | " + " | ".join(steps) + " | what |",
             "|---|" + "---|" * len(steps) + "---|"]
    for p in PHASES:
        lines.append(f"| {p} | " + " | ".join(f"{counted[p]:.0f}" for _, counted in
                                              steps.values()) + f" | {PHASE_MEANING[p]} |")
    outside = [step - sum(counted[p] for p in PHASES) for step, counted in steps.values()]
    lines.append("| outside the runtime | " + " | ".join(f"{o:.0f}" for o in outside)
                 + " | TensorFlow: the call, the variables' reads and the kernels' "
                   "starts before the first enqueue (one grouped kernel: its members' "
                   "outputs and descriptions), the function's return |")
    return "\n".join(lines)


def step_vs_local_and_mpi(us: Dict[str, float],
                          method: str = "tfdist_function_100x16KiB") -> float:
    """A tf.function step (by default the 100 allreduces) over (the same step
    without communication + 2 x one MPI_Allreduce of its bytes): issue 25's
    graph-mode yardstick."""
    return us[method] / (us["local_function_100x16KiB"] + 2 * us["mpi_allreduce_1.6MB"])


def step_vs_alone_and_mpi(us: Dict[str, float]) -> float:
    """The tf.function step over (the same step on a one-rank process set + 2 x one
    MPI_Allreduce of its bytes): what the communication adds, against what MPI needs."""
    return us["tfdist_function_100x16KiB"] / (us["tfdist_alone_function_100x16KiB"]
                                              + 2 * us["mpi_allreduce_1.6MB"])


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.runtime",
                                     description=__doc__.split("\n\n")[0])
    _results.add_arguments(parser, plot=False)
    parser.add_argument("--blocks", type=int, default=7, help="alternating blocks per method")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiply the iteration counts (e.g. 0.2 for a quick run)")
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    from mpi4py import MPI

    import tfdist
    tfdist.init()
    comm = MPI.COMM_WORLD
    results = measure(comm, args.blocks, args.scale)
    if tfdist.rank() == 0:
        _results.publish(args, "runtime", results, argv, comm.size)
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
