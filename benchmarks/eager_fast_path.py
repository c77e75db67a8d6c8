"""Where the eager fast path stops paying: an auto allreduce through it and through the op.

    mpirun -np 2 --bind-to none python -m benchmarks.eager_fast_path \\
        --json docs/results/eager-fast-path-np2.json

``tfdist.allreduce(x, op=Sum, name=...)`` (eager, float32, the default "auto")
of each size, in rounds that interleave three ways of making the same call in
the same job, so that auto runs the same algorithm in all three:

- ``op``: TensorFlow's op (the fast path's limit moved to 0 for the block);
- ``fast``: the fast path (``tfdist/_eager.py``; the limit moved above the
  size) as tfdist takes it: the library's tensor route where this TensorFlow
  allows it (``cc/tf/eager_tensors.h``);
- ``fast, NumPy route``: the fast path's fallback route (the tensor route
  off): the input's NumPy view, a result array (64-byte aligned from
  ``_ALIGNED_FROM_BYTES`` up) and TensorFlow's Python constructor.

Each cell is the median over rounds of the slowest rank's mean per call. The
ratio fast / op says where ``FAST_PATH_MAX_BYTES`` belongs (docs/runtime.md,
"The eager fast path"); "fast / NumPy route, paired" (the median over rounds of
the two blocks' ratio within a round) what the tensor route saves. (Files
from before the tensor route have ``fast, unaligned`` instead: the NumPy route
with a plain ``np.empty_like`` result, against the aligned one.)
"""
from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results
from benchmarks._interleaved import (algorithms_run, paired_ratio, round_order,
                                     slowest_seconds_per_call)

DEFAULT_SIZES = "65536,131072,262144,524288,1048576,4194304,16777216"
METHODS = ("op", "fast", "fast, NumPy route")


def measure(comm, sizes: List[int], rounds: int, calls: int) -> List[Dict[str, Any]]:
    """One row per size: µs per call of every method, and what auto ran."""
    import tensorflow as tf

    import tfdist
    from tfdist import _eager
    limit, in_c = _eager.FAST_PATH_MAX_BYTES, _eager._tensor_entry_point()
    rows = []
    try:
        for nbytes in sizes:
            x = tf.ones([nbytes // 4], tf.float32)

            def take(method: str) -> None:
                """Makes the next calls go the method's way."""
                _eager.FAST_PATH_MAX_BYTES = 0 if method == "op" else nbytes
                _eager._tensor_entry_point = ((lambda: None) if method == "fast, NumPy route"
                                              else (lambda: in_c))

            def call() -> Any:
                return tfdist.allreduce(x, op=tfdist.Sum, name=f"bench.fast.{nbytes}")

            # Auto's trials first, so that every timed call runs its choice.
            before = tfdist.stats()["algorithm_calls"]
            take("op")
            for _ in range(100):
                call()
            for method in METHODS:
                take(method)
                slowest_seconds_per_call(comm, call, 3)
            samples: Dict[str, List[float]] = {m: [] for m in METHODS}
            for r in range(rounds):
                for method in round_order(METHODS, r):
                    take(method)
                    samples[method].append(slowest_seconds_per_call(comm, call, calls))
            for method in METHODS:  # each way gives the sum, on every rank
                take(method)
                total = call().numpy()
                if not np.array_equal(total, np.full(total.shape, comm.size, np.float32)):
                    raise AssertionError(f"{method} at {nbytes} B: a wrong sum")
            ran = algorithms_run(before)
            row: Dict[str, Any] = {"bytes": nbytes, "rounds": rounds, "calls": calls,
                                   "auto_ran": max(ran, key=ran.get) if ran else "",
                                   "algorithm_calls": ran}
            for method in METHODS:
                row[f"{method}_us"] = statistics.median(samples[method]) * 1e6
            row["fast_vs_op"] = row["fast_us"] / row["op_us"]
            row["numpy_vs_op"] = row["fast, NumPy route_us"] / row["op_us"]
            row["fast_vs_numpy_paired"] = paired_ratio(samples["fast"],
                                                       samples["fast, NumPy route"])
            rows.append(row)
            if comm.rank == 0:
                print(_format_row(row), flush=True)
    finally:
        _eager.FAST_PATH_MAX_BYTES = limit
        _eager._tensor_entry_point = lambda: in_c
    return rows


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


# The third method's columns: (its key, its µs column, the ratio column and key, the
# paired column and key). Files from before the tensor route have the first.
LAYOUTS = (("fast, unaligned", "fast, unaligned µs", "unaligned / op", "unaligned_vs_op",
            "fast / unaligned, paired", "fast_vs_unaligned_paired"),
           ("fast, NumPy route", "fast, NumPy route µs", "NumPy route / op", "numpy_vs_op",
            "fast / NumPy route, paired", "fast_vs_numpy_paired"))


def _layout(row: Dict[str, Any]) -> tuple:
    return next(layout for layout in LAYOUTS if f"{layout[0]}_us" in row)


def _header(row: Dict[str, Any]) -> str:
    """The table's header for rows like `row`; files from before the paired column
    render without it."""
    method, column, ratio, _, paired, paired_key = _layout(row)
    columns = ("size", "auto ran", "op µs", "fast µs", column, "fast / op", ratio)
    columns += (paired,) if paired_key in row else ()
    return "| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|"


def _format_row(row: Dict[str, Any]) -> str:
    method, _, _, ratio_key, _, paired_key = _layout(row)
    cells = (f"| {_size(row['bytes'])} | {row['auto_ran']} | {row['op_us']:.1f} | "
             f"{row['fast_us']:.1f} | {row[f'{method}_us']:.1f} | "
             f"{row['fast_vs_op']:.2f} | {row[ratio_key]:.2f} |")
    if paired_key in row:
        cells += f" {row[paired_key]:.3f} |"
    return cells


def summary(document: Dict[str, Any]) -> str:
    """The table of a results document."""
    rows = document["rows"]
    first = rows[0] if rows else {"rounds": 0, "calls": 0}
    return "\n".join([
        f"np = {document['np']}; eager `tfdist.allreduce` (float32 Sum, auto) through the op "
        f"and through the fast path (limit {document['limit_bytes']} B in tfdist), median over "
        f"{first['rounds']} interleaved rounds of {first['calls']} calls of the slowest "
        f"rank's mean per call.", "",
        _header(rows[0]) if rows else "",
        *(_format_row(r) for r in rows)])


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eager_fast_path",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="comma-separated bytes")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=20, help="calls per block")
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if not sizes or any(s < 4 or s % 4 for s in sizes):
        parser.error("--sizes: positive multiples of 4 bytes")
    import tfdist
    from tfdist import _eager
    tfdist.init()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        print(_header({"fast, NumPy route_us": 0, "fast_vs_numpy_paired": 0}), flush=True)
    rows = measure(comm, sizes, args.rounds, args.calls)
    if comm.rank == 0:
        _results.publish(args, "eager_fast_path",
                         {"np": comm.size, "limit_bytes": _eager.FAST_PATH_MAX_BYTES,
                          "rows": rows}, argv, comm.size)
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
