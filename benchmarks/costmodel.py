"""The cost model against measurement, cell by cell, on one host and on emulated multi-host jobs.

    python -m benchmarks.costmodel --plot               # every configuration, ~10 min
    python -m benchmarks.costmodel --configs 2x2-10g    # one of them

For each configuration it starts one job (mpirun, with TFDIST_VIRTUAL_HOSTS
and TFDIST_EMULATED_BANDWIDTH/LATENCY set as the configuration says). In that
job every allreduce algorithm (tree, butterfly, ring, Rabenseifner, and
hierarchical where there are several hosts) runs at sizes from 4 B to 64 MiB
of float32, called directly on the transport the runtime's collectives use
(no negotiation, no TensorFlow; benchmarks/native/costmodel_timer.cc), one call per
barrier, the slowest rank's time taken; the fastest of the calls is the
measurement (the model predicts a collective with the machine to itself,
and on a shared machine other work only adds), the median is printed beside
it. Next to each
measurement it prints the runtime's prediction (the two-link cost model on
the link costs calibrated at init), the ratio, what "auto" picks and which
algorithm was fastest. Jobs with emulated links also measure the emulation
itself (ping-pong between every rank and a partner on another host, all pairs
at once) and, at 64 MiB, allreduce through the full runtime (TensorFlow op,
negotiation) with algorithm "auto", "ring" and "hierarchical", in the same job.

Each rank is pinned to core rank mod cores before MPI starts (--no-pin leaves
them to the scheduler), so that the job's calibration at init and its
measurements see the same placement, and every buffer starts 64-byte aligned,
as a TensorFlow tensor does (_pin_to_core, _tensor_like).

Writes everything as JSON (--json, default docs/results/costmodel.json, with its
markdown beside it) and, with --plot, a plot of predicted against measured time.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Sequence

from benchmarks import _results

ROOT = Path(__file__).resolve().parent.parent
GIGABIT = 1e9 / 8  # bytes per second
EMULATED_LATENCY = 50e-6  # seconds, for every emulated configuration
FLOAT32 = 6  # cc/core/base/data_type.h DataType::kFloat32
FLAT_ALGORITHMS = ("tree", "butterfly", "ring", "rabenseifner")
SIZES = tuple(4 * 16 ** k for k in range(7))  # 4 B, 64 B, ..., 64 MiB
TARGET_SECONDS = 0.25  # per cell, after warm-up
MIN_ITERATIONS = 3
MAX_ITERATIONS = 40
PING_PONG_SIZES = (8, 64 << 10, 1 << 20, 64 << 20)
RUNTIME_CALLS = 5  # 64 MiB allreduces through tfdist.allreduce, per algorithm
TENSOR_ALIGNMENT = 64  # bytes: where TensorFlow starts a tensor's data

# name -> ranks, virtual hosts (None: the real host), emulated Gb/s (None: off).
CONFIGURATIONS: Dict[str, Dict[str, Any]] = {
    "1host-p2": {"np": 2, "hosts": None, "gbps": None},
    "1host-p4": {"np": 4, "hosts": None, "gbps": None},
    "2x2-10g": {"np": 4, "hosts": 2, "gbps": 10.0},
    "4x2-1g": {"np": 8, "hosts": 4, "gbps": 1.0},
    "2x4-10g": {"np": 8, "hosts": 2, "gbps": 10.0},
}

# Prediction within this factor of measurement counts as a hit.
PREDICTION_TOLERANCE = 0.25
AUTO_TOLERANCE = 0.10


# ---------------------------------------------------------------- worker (one rank of a job)

class HostTimer:
    """Times the engine's allreduce algorithms and point-to-point messages on this job's
    (virtual) hosts, over the emulated links when they are set, without negotiation or
    TensorFlow (benchmarks/native/costmodel_timer.cc, built by benchmarks/_engine.py).

    It is told what the runtime knows through tfdist's public API: every rank's host,
    the emulated link, and the link costs hierarchical chooses by.
    """

    def __init__(self, comm) -> None:
        from mpi4py import MPI
        import tfdist
        from tfdist import runtime
        if str(ROOT) not in sys.path:
            sys.path.append(str(ROOT))  # last: tfdist must stay the installed one
        from benchmarks import _engine
        settings = tfdist.RuntimeSettings.from_environment()
        # Virtual hosts are consecutive ranks; the first rank of each names it.
        label = (MPI.Get_processor_name(),
                 tfdist.rank() - tfdist.local_rank() if settings.virtual_hosts else 0)
        labels = comm.allgather(label)
        host_numbers: Dict[Any, int] = {}
        for value in labels:
            host_numbers.setdefault(value, len(host_numbers))
        self.host_of_rank = (ctypes.c_int * comm.size)(*(host_numbers[v] for v in labels))
        self.bandwidth = float(settings.emulated_bandwidth or 0.0)
        self.latency = float(settings.emulated_latency or 0.0)
        values = runtime.network_cost_values()
        self.network = (ctypes.c_double * len(values))(*values)
        self.handle = MPI._handleof(comm)
        lib = _engine.load()
        self._allreduce = lib.tfdist_costmodel_allreduce_seconds
        self._allreduce.argtypes = [
            ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), ctypes.c_double, ctypes.c_double,
            ctypes.POINTER(ctypes.c_double), ctypes.c_int64, ctypes.c_int, ctypes.c_void_p,
            ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double),
            ctypes.c_char_p, ctypes.c_int]
        self._allreduce.restype = ctypes.c_int
        self._ping_pong = lib.tfdist_costmodel_ping_pong_seconds
        self._ping_pong.argtypes = [
            ctypes.c_size_t, ctypes.POINTER(ctypes.c_int), ctypes.c_double, ctypes.c_double,
            ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int,
            ctypes.POINTER(ctypes.c_double), ctypes.c_char_p, ctypes.c_int]
        self._ping_pong.restype = ctypes.c_int

    def allreduce(self, algorithm: str, buffer, iterations: int) -> List[float]:
        """This rank's seconds for each of ``iterations`` in-place sum allreduces, one per
        barrier. Collective."""
        from tfdist import _library
        seconds = (ctypes.c_double * iterations)()
        error = ctypes.create_string_buffer(1024)
        code = self._allreduce(self.handle, self.host_of_rank, self.bandwidth, self.latency,
                               self.network, len(self.network),
                               _library.allreduce_algorithms().index(algorithm),
                               buffer.ctypes.data, buffer.size, FLOAT32, iterations, seconds,
                               error, len(error))
        if code:
            raise RuntimeError(f"{algorithm}: {error.value.decode()}")
        return list(seconds)

    def ping_pong(self, peer: int, buffer, iterations: int) -> List[float]:
        """Half of each of ``iterations`` round trips of ``buffer`` with ``peer`` (-1: only
        take part in the barriers). Collective."""
        seconds = (ctypes.c_double * iterations)()
        error = ctypes.create_string_buffer(1024)
        code = self._ping_pong(self.handle, self.host_of_rank, self.bandwidth, self.latency,
                               peer, buffer.ctypes.data, buffer.nbytes, iterations, seconds,
                               error, len(error))
        if code:
            raise RuntimeError(f"ping-pong: {error.value.decode()}")
        return list(seconds)


def _slowest_rank(comm, seconds: Sequence[float]) -> List[float]:
    """For each call, the slowest rank's time."""
    from mpi4py import MPI
    import numpy as np
    slowest = np.empty(len(seconds))
    comm.Allreduce(np.asarray(seconds, dtype=np.float64), slowest, op=MPI.MAX)
    return slowest.tolist()


def _iterations(predicted: float) -> int:
    # From the prediction, identical on every rank, so every rank runs as many calls.
    if not predicted or predicted != predicted or predicted == float("inf"):
        return MIN_ITERATIONS
    return max(MIN_ITERATIONS, min(MAX_ITERATIONS, int(TARGET_SECONDS / predicted)))


def _tensor_like(count: int, dtype=None):
    """``count`` ones, their data 64-byte aligned as TensorFlow aligns a tensor's: numpy's
    16-byte alignment puts half of all buffers 16 bytes off a 32-byte boundary, which made
    16 KiB-256 KiB allreduces on shared memory 2-3x slower, at random from cell to cell."""
    import numpy as np
    dtype = np.dtype(dtype or np.float32)
    raw = np.ones(count * dtype.itemsize + TENSOR_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % TENSOR_ALIGNMENT
    view = raw[start:start + count * dtype.itemsize].view(dtype)
    view[:] = 1
    return view


def _measure_cells(timer: HostTimer, comm, hosts: int) -> List[Dict[str, Any]]:
    import numpy as np
    from tfdist import runtime
    algorithms = FLAT_ALGORITHMS + (("hierarchical",) if hosts > 1 else ())
    cells = []
    for nbytes in SIZES:
        count = max(1, nbytes // 4)
        auto = runtime.algorithm_for(count * 4)
        for algorithm in algorithms:
            predicted = runtime.predict_allreduce_seconds(count * 4, algorithm)
            buffer = _tensor_like(count)
            iterations = _iterations(predicted)
            timer.allreduce(algorithm, buffer, 1)  # warm-up
            calls = _slowest_rank(comm, timer.allreduce(algorithm, buffer, iterations))
            # The model predicts a collective that has the machine to itself;
            # on a shared machine other work only ever adds time, so the
            # fastest call is the measurement, and the median is kept beside it.
            cells.append({"bytes": count * 4, "algorithm": algorithm, "predicted_s": predicted,
                          "measured_s": min(calls), "median_s": statistics.median(calls),
                          "auto": auto, "iterations": iterations})
    return cells


def _measure_emulation(timer: HostTimer, comm, per_host: int, bandwidth: float, latency: float
                       ) -> List[Dict[str, Any]]:
    """Every rank ping-pongs with the rank at the same place on the partner host."""
    import numpy as np
    from mpi4py import MPI
    rank, size = comm.rank, comm.size
    host = rank // per_host
    partner_host = host ^ 1
    peer = partner_host * per_host + rank % per_host
    if peer >= size:
        peer = -1  # an odd host out sits this one out
    rows = []
    for nbytes in PING_PONG_SIZES:
        model = latency + nbytes / bandwidth
        iterations = max(MIN_ITERATIONS, min(20, int(TARGET_SECONDS / (2 * model))))
        buffer = _tensor_like(nbytes, np.uint8)
        seconds = timer.ping_pong(peer, buffer, iterations + 1)
        calls = _slowest_rank(comm, seconds[1:])
        rows.append({"bytes": nbytes, "model_s": model, "measured_s": min(calls),
                     "median_s": statistics.median(calls),
                     "pairs": size // (2 * per_host) * per_host})
    return rows


def _measure_through_runtime(comm) -> Dict[str, float]:
    """64 MiB through tfdist.allreduce (TensorFlow op, negotiation), per algorithm.

    Each call is timed until the eager op returns, which it does once the
    result is complete; reading the result (``.numpy()``, a 64 MiB copy) is
    not part of the allreduce. One name per algorithm, as a training step
    reuses its gradients' names, so that negotiation takes its cached path
    after the warm-up call.
    """
    import numpy as np
    import tensorflow as tf
    import tfdist
    x = tf.constant(np.ones((64 << 20) // 4, np.float32))
    result = {}
    for algorithm in ("auto", "ring", "hierarchical"):
        name = f"costmodel.{algorithm}"
        tfdist.allreduce(x, op=tfdist.Sum, algorithm=algorithm, name=name)  # warm-up
        samples = []
        for _ in range(RUNTIME_CALLS):
            comm.Barrier()
            start = time.perf_counter()
            output = tfdist.allreduce(x, op=tfdist.Sum, algorithm=algorithm, name=name)
            samples.append(time.perf_counter() - start)
            del output
        result[algorithm] = min(_slowest_rank(comm, samples))
    return result


def _pin_to_core() -> List[int]:
    """Pins this rank (and the threads it starts) to core ``rank mod cores``, before MPI
    starts; returns the cores it may use. Unpinned, which ranks share a core is the
    scheduler's choice at each moment, and with more ranks than cores it decides what a
    step costs: at P=4 on 2 cores a 4-byte butterfly took 3.8 us in one job and 9.8 us in
    the next, and a job's calibration at init need not meet the placement its collectives
    run in. Round robin gives every (virtual) host ranks on every core, as a real host
    runs its ranks side by side."""
    cores = sorted(os.sched_getaffinity(0))
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    chosen = [cores[rank % len(cores)]]
    os.sched_setaffinity(0, chosen)
    return chosen


def worker(json_path: str, pin: bool = True) -> int:
    """One rank of a configuration's job; rank 0 writes the job's results to ``json_path``."""
    cores = _pin_to_core() if pin else sorted(os.sched_getaffinity(0))
    import tfdist
    from mpi4py import MPI
    from tfdist import runtime
    started = time.perf_counter()
    tfdist.init()
    init_s = time.perf_counter() - started  # the calibration included
    comm = MPI.COMM_WORLD.Dup()
    timer = HostTimer(comm)
    settings = tfdist.RuntimeSettings.from_environment()
    hosts = tfdist.cross_size()
    per_host = tfdist.local_size()
    result: Dict[str, Any] = {
        "np": comm.size, "hosts": hosts, "ranks_per_host": per_host,
        "emulated_bandwidth": settings.emulated_bandwidth,
        "emulated_latency": settings.emulated_latency,
        "network_cost": runtime.network_cost(),
        "network_cost_values": runtime.network_cost_values(),
        "cores_of_rank": comm.gather(cores, root=0),
        "init_s": comm.allreduce(init_s, op=MPI.MAX),
        "cells": _measure_cells(timer, comm, hosts),
    }
    if settings.emulated_bandwidth and hosts > 1:
        result["emulation"] = _measure_emulation(timer, comm, per_host, settings.emulated_bandwidth,
                                                 settings.emulated_latency or 0.0)
        result["runtime_64MiB_s"] = _measure_through_runtime(comm)
    if comm.rank == 0:
        Path(json_path).write_text(json.dumps(result, indent=1))
    comm.Free()
    tfdist.shutdown()
    return 0


# ---------------------------------------------------------------- driver (one job per configuration)

def _find_mpirun() -> str:
    sys.path.insert(0, str(ROOT))
    from tfdistrun import find_mpirun
    return find_mpirun()


def run_configuration(name: str, timeout: float, pin: bool = True) -> Dict[str, Any]:
    """Runs one configuration's job and returns rank 0's results."""
    config = CONFIGURATIONS[name]
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "TF_CPP_MIN_LOG_LEVEL": "2", "TF_NUM_INTRAOP_THREADS": "1",
                "TF_NUM_INTEROP_THREADS": "1"})
    for key in ("TFDIST_VIRTUAL_HOSTS", "TFDIST_EMULATED_BANDWIDTH", "TFDIST_EMULATED_LATENCY"):
        env.pop(key, None)
    if config["hosts"]:
        env["TFDIST_VIRTUAL_HOSTS"] = str(config["hosts"])
    if config["gbps"]:
        env["TFDIST_EMULATED_BANDWIDTH"] = repr(config["gbps"] * GIGABIT)
        env["TFDIST_EMULATED_LATENCY"] = repr(EMULATED_LATENCY)
    with tempfile.TemporaryDirectory() as scratch:
        # An empty cache: the link costs are measured under this run's
        # conditions, not read from another moment (or another load).
        env["TFDIST_CALIBRATION_CACHE_DIR"] = str(Path(scratch) / "calibration")
        out = Path(scratch) / "result.json"
        # Run as a script from outside the source tree, so that the ranks
        # import the installed tfdist (with its native library), not ./tfdist.
        command = [_find_mpirun(), "-np", str(config["np"]), "--oversubscribe", "--bind-to",
                   "none", sys.executable, str(Path(__file__).resolve()), "--worker", str(out)]
        if not pin:
            command.insert(-2, "--no-pin")
        started = time.perf_counter()
        load_before = os.getloadavg()[0]
        completed = subprocess.run(command, env=env, cwd=scratch, capture_output=True,
                                   text=True, timeout=timeout)
        if completed.returncode != 0 or not out.exists():
            raise RuntimeError(f"configuration {name} failed (exit {completed.returncode}):\n"
                               f"{(completed.stdout + completed.stderr)[-4000:]}")
        result = json.loads(out.read_text())
    result["name"] = name
    result["pinned"] = pin
    result["wall_s"] = time.perf_counter() - started
    # The machine's 1-minute load average before and after the job: how
    # much else was running (the job itself adds its ranks).
    result["load_average"] = [load_before, os.getloadavg()[0]]
    result["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return result


def summarize(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The goals of docs/cost_model.md over every cell of every configuration."""
    hits = cells = 0
    auto_hits = auto_cases = 0
    worst_auto = 1.0
    for result in results:
        by_size: Dict[int, Dict[str, Dict[str, Any]]] = {}
        for cell in result["cells"]:
            by_size.setdefault(cell["bytes"], {})[cell["algorithm"]] = cell
            cells += 1
            ratio = cell["predicted_s"] / cell["measured_s"]
            hits += abs(ratio - 1.0) <= PREDICTION_TOLERANCE
        for size, row in by_size.items():
            fastest = min(row.values(), key=lambda c: c["measured_s"])
            auto = row[next(iter(row.values()))["auto"]]
            ratio = auto["measured_s"] / fastest["measured_s"]
            auto_cases += 1
            auto_hits += ratio <= 1.0 + AUTO_TOLERANCE
            worst_auto = max(worst_auto, ratio)
    return {"cells": cells, "predictions_within_25pct": hits / max(cells, 1),
            "auto_cases": auto_cases, "auto_within_10pct": auto_hits / max(auto_cases, 1),
            "auto_worst_ratio": worst_auto}


def _format_seconds(seconds: float) -> str:
    if seconds == float("inf"):
        return "inf"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e6:.3g} us"


def print_result(result: Dict[str, Any]) -> None:
    """The configuration's table: one line per (size, algorithm)."""
    cost = result["network_cost"]
    print(f"\n== {result['name']}: P={result['np']} as {result['hosts']} host(s) x "
          f"{result['ranks_per_host']}; emulated "
          f"{'off' if not result.get('emulated_bandwidth') else _gbps(result)}; "
          f"job took {result['wall_s']:.0f} s")
    for link in ("intra", "inter") if result["hosts"] > 1 else ("intra",):
        print(f"   {link}-host steps, measured at init (seconds per step at each size):")
        for kind, by_distance in cost[link].items():
            for index, points in enumerate(by_distance):
                label = kind if len(by_distance) == 1 else f"{kind} d={1 << index}"
                print(f"     {label:<19}" + " ".join(
                    f"{_format_seconds(p[1]):>9}@{_format_bytes(p[0]):<5}" for p in points))
    print(f"   {'bytes':>9} {'algorithm':<13} {'predicted':>10} {'measured':>10} {'ratio':>6}"
          f" {'median':>10}  {'auto':<13} {'fastest':<13}")
    by_size: Dict[int, List[Dict[str, Any]]] = {}
    for cell in result["cells"]:
        by_size.setdefault(cell["bytes"], []).append(cell)
    for size, row in by_size.items():
        fastest = min(row, key=lambda c: c["measured_s"])["algorithm"]
        for cell in row:
            ratio = cell["predicted_s"] / cell["measured_s"]
            print(f"   {size:>9} {cell['algorithm']:<13} {_format_seconds(cell['predicted_s']):>10}"
                  f" {_format_seconds(cell['measured_s']):>10} {ratio:>6.2f}"
                  f" {_format_seconds(cell['median_s']):>10}  "
                  f"{cell['auto']:<13} {fastest:<13}")
    for row in result.get("emulation", []):
        print(f"   emulated link, {row['pairs']} pairs at once, {row['bytes']:>9} B: model "
              f"{_format_seconds(row['model_s'])}, measured {_format_seconds(row['measured_s'])}"
              f" (ratio {row['measured_s'] / row['model_s']:.3f}; median "
              f"{_format_seconds(row['median_s'])})")
    runtime = result.get("runtime_64MiB_s")
    if runtime:
        print(f"   64 MiB through tfdist.allreduce: auto {_format_seconds(runtime['auto'])} "
              f"({runtime['auto'] / runtime['ring']:.2f}x ring), hierarchical "
              f"{_format_seconds(runtime['hierarchical'])} "
              f"({runtime['hierarchical'] / runtime['ring']:.2f}x ring), ring "
              f"{_format_seconds(runtime['ring'])}")


def _format_bytes(nbytes: float) -> str:
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g}{unit}"
    return f"{nbytes:g}"


def _gbps(result: Dict[str, Any]) -> str:
    return (f"{result['emulated_bandwidth'] / GIGABIT:g} Gb/s, "
            f"{_format_seconds(result['emulated_latency'] or 0.0)}")


def markdown(document: Dict[str, Any]) -> str:
    """docs/cost_model.md's tables from a results file: per configuration, one row per size."""
    lines = []
    for result in document["configurations"]:
        algorithms = list(dict.fromkeys(c["algorithm"] for c in result["cells"]))
        summary = summarize([result])
        lines.append(f"**{result['name']}** (P={result['np']}, {result['hosts']} host(s) x "
                     f"{result['ranks_per_host']}"
                     + (f", {_gbps(result)}" if result.get("emulated_bandwidth") else "")
                     + f"): predictions within 25% in {summary['predictions_within_25pct']:.0%}"
                     f" of cells, auto within 10% of the fastest at "
                     f"{summary['auto_within_10pct']:.0%} of sizes, at worst "
                     f"{summary['auto_worst_ratio']:.2f}x.\n")
        lines.append("| bytes | " + " | ".join(algorithms) + " | auto | fastest |")
        lines.append("|---" * (len(algorithms) + 3) + "|")
        by_size: Dict[int, Dict[str, Dict[str, Any]]] = {}
        for cell in result["cells"]:
            by_size.setdefault(cell["bytes"], {})[cell["algorithm"]] = cell
        for size, row in by_size.items():
            fastest = min(row.values(), key=lambda c: c["measured_s"])["algorithm"]
            entries = [f"{_format_seconds(row[a]['measured_s'])} ({row[a]['predicted_s'] / row[a]['measured_s']:.2f})"
                       for a in algorithms]
            auto = next(iter(row.values()))["auto"]
            lines.append(f"| {size} | " + " | ".join(entries) + f" | {auto} | {fastest} |")
        lines.append("")
    return "\n".join(lines)


def summary(document: Dict[str, Any]) -> str:
    """The goals' figures over every configuration, then each configuration's table."""
    s = document["summary"]
    return (f"Predictions within 25% of measurement: {s['predictions_within_25pct']:.0%} of "
            f"{s['cells']} cells (goal 80%); auto within 10% of the fastest: "
            f"{s['auto_within_10pct']:.0%} of {s['auto_cases']} sizes (goal 90%); auto at worst "
            f"{s['auto_worst_ratio']:.2f}x the fastest (goal ≤ 1.5x). Cells: measured time "
            f"(predicted / measured).\n\n" + markdown(document))


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Predicted against measured time, one colour per configuration."""
    results = [r for document in documents for r in document["configurations"]]
    figure, axes = plt.subplots(figsize=(7, 7))
    low, high = 1e-6, 10.0
    for result in results:
        measured = [c["measured_s"] for c in result["cells"]]
        predicted = [c["predicted_s"] for c in result["cells"]]
        axes.scatter(measured, predicted, s=12, label=result["name"])
        low = min(low, *measured, *predicted)
    axes.plot([low, high], [low, high], color="black", linewidth=0.8)
    axes.plot([low, high], [low * 1.25, high * 1.25], color="grey", linewidth=0.5, linestyle="--")
    axes.plot([low, high], [low * 0.75, high * 0.75], color="grey", linewidth=0.5, linestyle="--")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("measured (s)")
    axes.set_ylabel("predicted (s)")
    axes.set_title("tfdist allreduce cost model: predicted vs measured")
    axes.legend()
    figure.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.costmodel",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", choices=sorted(CONFIGURATIONS),
                        default=list(CONFIGURATIONS), help="configurations to run (default all)")
    _results.add_arguments(parser, "results file (default docs/results/costmodel.json), "
                                   "with X.md beside it")
    parser.set_defaults(json="docs/results/costmodel.json")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one configuration's job may take")
    parser.add_argument("--markdown", metavar="JSON",
                        help="print the tables of docs/cost_model.md from a results file and exit")
    parser.add_argument("--merge", action="store_true",
                        help="keep the other configurations already in the results file "
                             "(one configuration per run, e.g. under an exclusive lock)")
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="leave the ranks where the scheduler puts them (default: rank r "
                             "pinned to core r mod cores)")
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    if args.worker:
        return worker(args.worker, args.pin)
    if args.markdown:
        print(summary(json.loads(Path(args.markdown).read_text())))
        return 0

    results = []
    earlier: List[Dict[str, Any]] = []
    earlier_metadata = None
    if args.merge and Path(args.json).exists():
        previous = json.loads(Path(args.json).read_text())
        earlier = [r for r in previous["configurations"] if r["name"] not in args.configs]
        earlier_metadata = previous.get("metadata")
    for name in args.configs:
        result = run_configuration(name, args.timeout, args.pin)
        print_result(result)
        sys.stdout.flush()
        results.append(result)
    order = list(CONFIGURATIONS)
    results = sorted(earlier + results, key=lambda r: order.index(r["name"]))
    document = {"emulated_latency_s": EMULATED_LATENCY, "summary": summarize(results),
                "configurations": results}
    if earlier and earlier_metadata:  # the kept configurations were measured by that run
        document["kept_configurations_metadata"] = earlier_metadata
    _results.publish(args, "costmodel", document, list(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
