"""Allreduce latency and bandwidth, 4 B to 256 MiB, against MPI_Allreduce in the same job.

    mpirun -np 2 python -m benchmarks.allreduce --json docs/results/allreduce-np2.json --plot

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
import sys
import time
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results

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
    """The table of every size: microseconds per call of each method, and bus bandwidth."""
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
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    _results.add_arguments(parser)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    import tfdist
    tfdist.init()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    sizes = []
    nbytes = args.min_bytes
    while nbytes <= args.max_bytes:
        sizes.append(nbytes)
        nbytes *= 4
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
