"""Allreduce latency and bandwidth, 4 B to 256 MiB, against MPI_Allreduce in the same job.

    mpirun -np 2 python -m benchmarks.allreduce --json docs/results/allreduce-np2.json --plot

With ``--auto-vs-forced`` it measures instead what a user gets: ``tfdist.allreduce``
(eager, float32 Sum, named so the response cache answers) with the default "auto"
against the same call with every algorithm forced (``algorithm=``; the column
``forced_mpi`` is ``algorithm="mpi"``, MPI_Allreduce run by the runtime, left out
over emulated links, which it bypasses), and against MPI_Allreduce called
directly through mpi4py, in rounds that interleave the methods (a different order each
round, the same on every rank), 4 B to 64 MiB. Each cell is the median over
rounds of the slowest rank's mean per call; auto's calls of a size are warmed
up until its choice is made (TFDIST_AUTO_TRIALS) before they are timed. Each
block starts with one untimed call, which pays what the previous block's
method left behind.

    mpirun -np 2 --bind-to none python -m benchmarks.allreduce --auto-vs-forced \
        --json docs/results/auto-vs-forced-np2.json
    TFDIST_VIRTUAL_HOSTS=2 TFDIST_EMULATED_BANDWIDTH=1.25e9 TFDIST_EMULATED_LATENCY=50e-6 \
        mpirun -np 4 --oversubscribe --bind-to none python -m benchmarks.allreduce \
        --auto-vs-forced --json docs/results/auto-vs-forced-2x2-10g.json

With ``--repeat-forced`` every forced algorithm is timed a second time in each
round, as a column of its own (``ring#2``: the same calls under another name).
The size's fastest forced algorithm's second column over its first is what a
perfect chooser, one that always runs that algorithm, would score against
"the best forced algorithm" in the same rounds: the floor of the "auto / best
forced" figure on this machine, which picks the least of several noisy columns.

Each row also keeps every round's block times (``samples_us``) and pairs them:
"auto / best forced, paired" is the largest, over the forced algorithms, of the
median over rounds of auto's block over that algorithm's block in the same
round (``_interleaved.paired_ratio``). Blocks of one round ran within a second
of each other, so a change in the machine's speed that lasts longer than that
cancels, where a ratio of two medians compares blocks from different moments.
With ``--repeat-forced`` the A/A control is paired the same way.

Each cell also records how busy the machine's cores were (``cores_busy``: the
ranks' CPU time summed, over the cores times the block's time): at 1, as with
more ranks than cores, no core was ever idle and the ranks took turns on the
cores (working, or polling for messages); below 1 they also waited together
with cores idle, as all the ranks of an exchange over an emulated link do.

Across emulated hosts the summary adds hierarchical's time over the ring's; with
an emulated latency, what the tree costs beyond the butterfly in latencies L
(issue 25, section 5: docs/algorithms.md, "Sequential messages over an emulated
link"). The two-host, two-rank job at L = 1 ms measures the latter:

    TFDIST_VIRTUAL_HOSTS=2 TFDIST_EMULATED_BANDWIDTH=1.25e9 TFDIST_EMULATED_LATENCY=1e-3 \
        mpirun -np 2 --bind-to none python -m benchmarks.allreduce --auto-vs-forced \
        --max-bytes 4 --json docs/results/sequential-messages-np2-1ms.json

For every size it measures, in this order and with the same iteration count
on every rank: MPI_Allreduce through mpi4py (the reference), each engine
algorithm called directly (no TensorFlow, no runtime), and ``tfdist.allreduce``
through TensorFlow with the default "auto" choice. Latency is reported as
OSU's osu_allreduce does (average microseconds per call over the ranks,
warm-up excluded); bandwidth as nccl-tests does (algbw = bytes / time,
busbw = algbw * 2(P-1)/P).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

from benchmarks import _results
from benchmarks._interleaved import (algorithms_run, paired_ratio, round_order,
                                      warm_auto_past_its_trials)

ENGINE_ALGORITHMS = ("tree", "butterfly", "ring", "rabenseifner")
TARGET_SECONDS = 0.2  # per size and method, after warm-up
MIN_ITERATIONS = 5
MIN_WARMUP = 3


def _average_over_ranks(comm, seconds: float) -> float:
    return comm.allreduce(seconds) / comm.size


def measure(comm, sizes: List[int]) -> List[Dict]:
    """Runs every method at every size; returns one row per size (the same on every rank)."""
    import tensorflow as tf
    from mpi4py import MPI

    import tfdist
    from benchmarks._engine import engine_timer
    engine = engine_timer(comm)
    rows = []
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        send = np.ones(count, np.float32)
        receive = np.empty_like(send)
        x = tf.ones([count], tf.float32)
        name = f"bench.allreduce.{nbytes}"

        def mpi_loop(n: int) -> float:
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(n):
                comm.Allreduce(send, receive, op=MPI.SUM)
            return (time.perf_counter() - start) / n

        def tf_loop(n: int) -> float:
            # Eager ops return when the collective has completed on this rank.
            comm.Barrier()
            start = time.perf_counter()
            for _ in range(n):
                tfdist.allreduce(x, op=tfdist.Sum, name=name)
            return (time.perf_counter() - start) / n

        # Rank 0 sizes the loops from one timed call of the reference; every
        # rank then runs the same number of iterations.
        probe = mpi_loop(1)
        iterations = comm.bcast(max(MIN_ITERATIONS,
                                    min(2000, int(TARGET_SECONDS / max(probe, 1e-7)))))
        # The first calls of a size fault in fresh pages and fill caches.
        warmup = max(MIN_WARMUP, iterations // 10)
        row: Dict = {"bytes": count * 4, "iterations": iterations}
        mpi_loop(warmup)
        row["mpi_us"] = _average_over_ranks(comm, mpi_loop(iterations)) * 1e6
        for algorithm in ENGINE_ALGORITHMS:
            engine(algorithm, send, warmup)
            row[f"engine_{algorithm}_us"] = _average_over_ranks(
                comm, engine(algorithm, send, iterations)) * 1e6
        tf_loop(warmup)
        row["tf_auto_us"] = _average_over_ranks(comm, tf_loop(iterations)) * 1e6
        row["auto_algorithm"] = tfdist.algorithm_for(count * 4)
        row["ratio_tf_auto_vs_mpi"] = row["tf_auto_us"] / row["mpi_us"]
        factor = 2 * (comm.size - 1) / comm.size if comm.size > 1 else 1.0
        for key in ("mpi", "tf_auto"):
            row[f"{key}_busbw_gbs"] = count * 4 / (row[f"{key}_us"] * 1e-6) * factor / 1e9
        rows.append(row)
        if comm.rank == 0:
            print(_format_row(row), flush=True)
    return rows


FORCED_ALGORITHMS = ("tree", "butterfly", "ring", "rabenseifner")
AUTO_VS_FORCED_MAX_BYTES = 64 << 20
#: The method that forces algorithm="mpi" (MPI_Allreduce run by the runtime); the
#: method "mpi" is mpi4py's MPI_Allreduce called directly, the reference column.
FORCED_MPI = "forced_mpi"


def _forced_algorithms(comm) -> List[str]:
    """The algorithms a user can force on this job: hierarchical only across hosts
    (and "hierarchical_shm" where each host has two ranks or more), "shm" only within
    one (both where TFDIST_SHARED_MEMORY leaves shared memory on); "mpi" (as
    FORCED_MPI) except over emulated links, which it would bypass."""
    import tfdist
    forced = list(FORCED_ALGORITHMS)
    settings = tfdist.RuntimeSettings.from_environment()
    hosts = comm.bcast(_host_count() if comm.rank == 0 else None)
    if hosts > 1:
        forced.append("hierarchical")
        if settings.shared_memory and comm.size // hosts > 1:
            forced.append("hierarchical_shm")
    elif settings.shared_memory:
        forced.append("shm")
    if not settings.emulated_bandwidth:
        forced.append(FORCED_MPI)
    return forced


def _host_count() -> int:
    import os
    virtual = int(os.environ.get("TFDIST_VIRTUAL_HOSTS", "0") or 0)
    return virtual if virtual > 0 else 1


def _machine_cores(comm) -> int:
    """The cores the job's ranks can run on, over all the machines it spans (virtual
    hosts on one machine share its cores)."""
    import socket
    per_host: Dict[str, set] = {}
    for host, allowed in comm.allgather((socket.gethostname(), os.sched_getaffinity(0))):
        per_host.setdefault(host, set()).update(allowed)
    return sum(len(allowed) for allowed in per_host.values())


#: The suffix of a forced algorithm's second column (--repeat-forced).
REPEAT = "#2"


def measure_auto_vs_forced(comm, sizes: List[int], rounds: int,
                           seconds_per_cell: float, repeat_forced: bool = False) -> List[Dict]:
    """One row per size: µs per call of auto, of every forced algorithm and of MPI
    (with ``repeat_forced``, of every forced algorithm a second time)."""
    import tensorflow as tf
    from mpi4py import MPI

    import tfdist
    forced = _forced_algorithms(comm)
    cores = _machine_cores(comm)
    repeats = [f"{a}{REPEAT}" for a in forced] if repeat_forced else []
    methods = ["auto", *forced, *repeats, "mpi"]
    rows = []
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        x = tf.ones([count], tf.float32)
        send = np.ones(count, np.float32)
        receive = np.empty_like(send)

        def run(method: str, n: int, busy: Optional[List[float]] = None) -> float:
            if method == "mpi":
                def call() -> None:
                    comm.Allreduce(send, receive, op=MPI.SUM)
            else:
                forced_name = method.split(REPEAT)[0]
                algorithm = (None if method == "auto" else
                             "mpi" if forced_name == FORCED_MPI else forced_name)
                name = f"bench.avf.{method}.{nbytes}"

                def call() -> None:
                    tfdist.allreduce(x, op=tfdist.Sum, name=name, algorithm=algorithm)
            # Untimed: a call pays part of what the previous one left behind
            # (docs/cost_model.md). What a block of MPI's calls leaves can last
            # longer than one call; round_order shares that out, every method
            # following every other equally often.
            call()
            comm.Barrier()
            cpu_start = time.process_time()
            start = time.perf_counter()
            for _ in range(n):
                call()
            mine = time.perf_counter() - start
            cpu = time.process_time() - cpu_start
            slowest = comm.allreduce(mine, op=MPI.MAX)
            if busy is not None:
                busy.append(comm.allreduce(cpu, op=MPI.SUM) / (cores * slowest))
            return slowest / n

        # Auto first makes its choice for this size (its trials), then every
        # method is warmed up; one timed call of the slowest sizes the blocks.
        warm_auto_past_its_trials(comm, lambda n: run("auto", n))
        for method in methods:
            run(method, 2)
        probe = max(run(m, 1) for m in methods)
        calls = comm.bcast(max(1, min(200, int(seconds_per_cell / max(probe, 1e-7)))))
        samples: Dict[str, List[float]] = {m: [] for m in methods}
        busy: Dict[str, List[float]] = {m: [] for m in methods}
        picks: Dict[str, int] = {}
        for r in range(rounds):
            for method in round_order(methods, r):
                before = tfdist.stats()["algorithm_calls"] if method == "auto" else None
                samples[method].append(run(method, calls, busy[method]))
                if before is not None:
                    for name, value in algorithms_run(before).items():
                        picks[name] = picks.get(name, 0) + value
        row: Dict[str, Any] = {"bytes": count * 4, "calls": calls, "rounds": rounds,
                               "auto_picks": picks}
        for method in methods:
            row[f"{method}_us"] = statistics.median(samples[method]) * 1e6
        best = min(forced, key=lambda m: row[f"{m}_us"])
        row["best_forced"] = best
        row["auto_vs_best_forced"] = row["auto_us"] / row[f"{best}_us"]
        row["auto_vs_mpi"] = row["auto_us"] / row["mpi_us"]
        if repeats:
            # The best algorithm again, in the same rounds: a perfect chooser's score.
            row["best_forced_again_vs_best_forced"] = (row[f"{best}{REPEAT}_us"]
                                                       / row[f"{best}_us"])
        row["samples_us"] = {m: [seconds * 1e6 for seconds in samples[m]] for m in methods}
        row["cores_busy"] = {m: statistics.median(busy[m]) for m in methods}
        row.update(_paired(row["samples_us"], forced, best, bool(repeats)))
        row["load_average"] = os.getloadavg()[0]
        row.update(_link_ratios(row, forced))
        rows.append(row)
        if comm.rank == 0:
            print(_format_auto_row(row, forced), flush=True)
    return rows


def _paired(samples: Dict[str, List[float]], forced: List[str], best: str,
            repeated: bool) -> Dict[str, Any]:
    """auto against every forced algorithm round by round (``paired_ratio``); the
    largest of these is what auto loses to the best of them. With ``repeated``, the
    same figure for the best forced algorithm's second column: a perfect chooser's
    score, the floor of auto's on this machine."""
    against = {f: paired_ratio(samples["auto"], samples[f]) for f in forced}
    paired: Dict[str, Any] = {"auto_vs_forced_paired": against,
                              "auto_vs_best_forced_paired": max(against.values())}
    if repeated:
        again = samples[f"{best}{REPEAT}"]
        paired["best_forced_again_vs_best_forced_paired"] = max(
            paired_ratio(again, samples[f]) for f in forced)
    return paired


def _link_ratios(row: Dict[str, Any], forced: List[str]) -> Dict[str, float]:
    """The two figures of issue 25, section 5, where the job can show them:
    hierarchical's time over the flat ring's (several hosts), and what the
    tree costs beyond the butterfly in emulated link latencies L (emulated
    links with a latency)."""
    import tfdist
    ratios: Dict[str, float] = {}
    if "hierarchical" in forced:
        ratios["hierarchical_vs_ring"] = row["hierarchical_us"] / row["ring_us"]
    if "hierarchical_shm" in forced:
        ratios["hierarchical_shm_vs_ring"] = row["hierarchical_shm_us"] / row["ring_us"]
    settings = tfdist.RuntimeSettings.from_environment()
    if settings.emulated_bandwidth and settings.emulated_latency:
        ratios["tree_minus_butterfly_in_latencies"] = (
            (row["tree_us"] - row["butterfly_us"]) * 1e-6 / settings.emulated_latency)
    return ratios


def _auto_header(forced: List[str], paired: bool = True) -> str:
    # Results files from before the paired figure existed render as they did.
    return ("| size | auto µs (its pick) | " + " | ".join(f"{a} µs" for a in forced)
            + " | MPI_Allreduce µs | best forced | auto / best forced | "
            + ("auto / best forced, paired | " if paired else "") + "auto / MPI | load |\n"
            + "|---" * (len(forced) + 7 + paired) + "|")


def _format_auto_row(row: Dict, forced: List[str]) -> str:
    picks = ", ".join(sorted(row["auto_picks"], key=lambda a: -row["auto_picks"][a])) or "-"
    return (f"| {_human(row['bytes'])} | {row['auto_us']:.1f} ({picks}) | "
            + " | ".join(f"{row[f'{a}_us']:.1f}" for a in forced)
            + f" | {row['mpi_us']:.1f} | {row['best_forced']} | {row['auto_vs_best_forced']:.2f} "
            + (f"| {row['auto_vs_best_forced_paired']:.2f} "
               if "auto_vs_best_forced_paired" in row else "")
            + f"| {row['auto_vs_mpi']:.2f} | {row['load_average']:.1f} |")


def _summary_auto_vs_forced(document: Dict[str, Any]) -> str:
    forced = document["forced"]
    rows = document["rows"]
    within = sum(r["auto_vs_best_forced"] <= 1.05 for r in rows)
    head = (f"np = {document['np']}, {document['hosts']} host(s); tfdist.allreduce (eager, "
            f"float32 Sum) with auto against every forced algorithm and MPI_Allreduce; "
            f"median over {rows[0]['rounds'] if rows else 0} interleaved rounds of the slowest "
            f"rank's mean per call. auto within 5% of the best forced algorithm at "
            f"{within} of {len(rows)} sizes. Load: the 1-minute load average after each size.")
    paired = bool(rows) and all("auto_vs_best_forced_paired" in r for r in rows)
    if paired:
        paired_within = sum(r["auto_vs_best_forced_paired"] <= 1.05 for r in rows)
        head += (" Paired: the largest over the forced algorithms of the median over rounds "
                 "of auto's block over that algorithm's block in the same round (a ratio "
                 "of medians compares blocks from different moments); within 5% at "
                 f"{paired_within} of {len(rows)} sizes.")
    lines = ([head, "", _auto_header(forced, paired)]
             + [_format_auto_row(row, forced) for row in rows])
    if any("best_forced_again_vs_best_forced" in r for r in rows):
        lines += ["", "The A/A control (`--repeat-forced`): every forced algorithm timed a second "
                  "time in the same rounds; the best forced algorithm's second column over its "
                  "first is what a chooser that always ran it would score.", "",
                  "| size | best forced | its second column / it | "
                  + ("the same, paired | " if paired else "") + "auto / best forced | "
                  + ("auto / best forced, paired | " if paired else "")
                  + " | ".join(f"{a}{REPEAT} / {a}" for a in forced) + " |",
                  "|---" * (len(forced) + 4 + 2 * paired) + "|"]
        for r in rows:
            lines.append(f"| {_human(r['bytes'])} | {r['best_forced']} "
                         f"| {r['best_forced_again_vs_best_forced']:.2f} "
                         + (f"| {r['best_forced_again_vs_best_forced_paired']:.2f} "
                            if paired else "")
                         + f"| {r['auto_vs_best_forced']:.2f} "
                         + (f"| {r['auto_vs_best_forced_paired']:.2f} " if paired else "")
                         + "| "
                         + " | ".join(f"{r[f'{a}{REPEAT}_us'] / r[f'{a}_us']:.2f}"
                                      for a in forced) + " |")
    if rows and all("cores_busy" in r for r in rows):
        methods = list(rows[0]["cores_busy"])
        lines += ["", "Cores busy: the ranks' CPU time (user and system, the runtime's polling "
                  "included) over the machine's cores times the block's time, median over "
                  "rounds. At 1 no core was ever idle: the ranks took turns on the cores, "
                  "working or polling. Below 1 they also waited together, cores idle (for "
                  "an emulated link's latency, asleep).",
                  "", "| size | " + " | ".join(methods) + " |",
                  "|---" * (len(methods) + 1) + "|"]
        for r in rows:
            lines.append(f"| {_human(r['bytes'])} | "
                         + " | ".join(f"{r['cores_busy'][m]:.2f}" for m in methods) + " |")
    for key, what in (("hierarchical_vs_ring", "hierarchical / ring"),
                      ("hierarchical_shm_vs_ring", "hierarchical_shm / ring"),
                      ("tree_minus_butterfly_in_latencies",
                       "(tree - butterfly) in emulated latencies L")):
        cells = [f"{_human(r['bytes'])} {r[key]:.2f}" for r in rows if key in r]
        if cells:
            lines += ["", f"{what}: " + ", ".join(cells)]
    return "\n".join(lines)


def _human(nbytes: int) -> str:
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


HEADER = ("| size | MPI_Allreduce µs | tfdist.allreduce (TF, auto) µs | ratio TF/MPI | auto picks "
          "| tree µs | butterfly µs | ring µs | rabenseifner µs | MPI busbw GB/s "
          "| TF busbw GB/s |\n|---|---|---|---|---|---|---|---|---|---|---|")


def _format_row(row: Dict) -> str:
    return (f"| {_human(row['bytes'])} | {row['mpi_us']:.1f} | {row['tf_auto_us']:.1f} "
            f"| {row['ratio_tf_auto_vs_mpi']:.2f} | {row['auto_algorithm']} "
            + " ".join(f"| {row[f'engine_{a}_us']:.1f}" for a in ENGINE_ALGORITHMS)
            + f" | {row['mpi_busbw_gbs']:.2f} | {row['tf_auto_busbw_gbs']:.2f} |")


def summary(document: Dict[str, Any]) -> str:
    """The table of every size: microseconds per call of each method, and bus bandwidth
    (or, for ``--auto-vs-forced``, auto against every forced algorithm)."""
    if document.get("mode") == "auto_vs_forced":
        return _summary_auto_vs_forced(document)
    cost = document.get("link_cost") or {}
    head = f"np = {document['np']}"
    if cost:
        head += (f"; link cost L = {cost['latency_s'] * 1e6:.2f} µs, "
                 f"G = {cost['seconds_per_byte'] * 1e9:.3f} ns/B")
    return "\n".join([head, "", HEADER] + [_format_row(row) for row in document["rows"]])


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Time per call against size, one line per engine algorithm, MPI and tfdist.allreduce;
    one panel per results file (e.g. np = 2 and np = 4)."""
    figure, panels = plt.subplots(1, len(documents), figsize=(6.5 * len(documents), 5),
                                  squeeze=False)
    for axes, document in zip(panels[0], documents):
        rows = document["rows"]
        sizes = [row["bytes"] for row in rows]
        lines = [("MPI_Allreduce (Open MPI)", "mpi_us", "black", "-")]
        lines += [(f"engine {a}", f"engine_{a}_us", None, "--") for a in ENGINE_ALGORITHMS]
        lines += [("tfdist.allreduce (TensorFlow, auto)", "tf_auto_us", "tab:red", "-")]
        for label, key, colour, style in lines:
            axes.plot(sizes, [row[key] for row in rows], style, marker="o", markersize=3,
                      label=label, color=colour)
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
        axes.set_xlabel("message size (bytes)")
        axes.set_ylabel("time per allreduce (µs)")
        axes.set_title(f"allreduce, np = {document['np']}")
        axes.grid(True, which="major", linewidth=0.3)
        axes.legend(fontsize=8)
    figure.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.allreduce",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--min-bytes", type=int, default=4)
    parser.add_argument("--max-bytes", type=int, default=None,
                        help="largest size (default 256 MiB; 64 MiB with --auto-vs-forced)")
    parser.add_argument("--auto-vs-forced", action="store_true",
                        help="tfdist.allreduce with auto against every forced algorithm")
    parser.add_argument("--rounds", type=int, default=15,
                        help="--auto-vs-forced: interleaved rounds per size")
    parser.add_argument("--seconds-per-cell", type=float, default=0.05,
                        help="--auto-vs-forced: time of one method's block in a round")
    parser.add_argument("--repeat-forced", action="store_true",
                        help="--auto-vs-forced: time every forced algorithm twice per round "
                             "(the A/A control)")
    _results.add_arguments(parser)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    if args.max_bytes is None:
        args.max_bytes = AUTO_VS_FORCED_MAX_BYTES if args.auto_vs_forced else 256 << 20
    import tfdist
    tfdist.init()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    sizes = []
    nbytes = args.min_bytes
    while nbytes <= args.max_bytes:
        sizes.append(nbytes)
        nbytes *= 4
    if args.auto_vs_forced:
        forced = _forced_algorithms(comm)
        if comm.rank == 0:
            print(f"# np={comm.size}, hosts={_host_count()}", flush=True)
            print(_auto_header(forced), flush=True)
        rows = measure_auto_vs_forced(comm, sizes, args.rounds, args.seconds_per_cell,
                                      args.repeat_forced)
        if comm.rank == 0:
            _results.publish(args, "allreduce",
                             {"mode": "auto_vs_forced", "np": comm.size, "hosts": _host_count(),
                              "forced": forced, "rows": rows}, argv, comm.size)
        tfdist.shutdown()
        return 0
    if comm.rank == 0:
        cost = tfdist.link_cost()
        print(f"# np={comm.size}; link cost L={cost['latency_s'] * 1e6:.2f} µs, "
              f"G={cost['seconds_per_byte'] * 1e9:.3f} ns/B (1/G = "
              f"{1 / cost['seconds_per_byte'] / 1e9:.1f} GB/s)")
        print(HEADER, flush=True)
    rows = measure(comm, sizes)
    if comm.rank == 0:
        _results.publish(args, "allreduce",
                         {"np": comm.size, "link_cost": tfdist.link_cost(), "rows": rows},
                         argv, comm.size)
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
