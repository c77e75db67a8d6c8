"""Where the time of an eager ``tfdist.allreduce`` of 4 B and 64 KiB goes.

    mpirun -np 2 --bind-to none python -m benchmarks.eager_breakdown \\
        --json docs/results/eager-breakdown-np2.json

Times, in rounds that interleave them (median over rounds of the slowest rank's
mean per call), the whole call and the parts it is made of, each measured on its
own in the same job:

- ``allreduce``: ``tfdist.allreduce(x, op=Sum, name=...)``, the eager fast path
  (tfdist/_eager.py), named so that negotiation is one cached bit;
- ``runtime``: the library call the fast path makes (``tfdist_eager_allreduce``
  through ctypes, GIL released) with its arguments prepared: enqueue, the
  negotiation round run inline, the algorithm, completion;
- ``python``: the fast path's Python around that call (argument checks,
  eligibility, the input's buffer, the result array, the result EagerTensor,
  which copies the result when it is not 64-byte aligned), measured without
  communication: ``allreduce - runtime`` is shown beside it as a check;
- ``negotiation floor``: one MPI_Allreduce (BAND) of the 16-byte bit vector a
  cached round exchanges; ``data floor``: MPI_Allreduce of the tensor's bytes;
- ``op path``: the same call through the TensorFlow op (forced algorithm, the
  one auto runs): TensorFlow's eager dispatch that the fast path skips;
- ``tf.function``: one allreduce in a ``tf.function`` (the kernel wakes the
  background thread, which runs the round and completes the op: the hand-off
  and wake-up) and the same function with ``tf.identity``;
- ``tf.identity``: TensorFlow's own eager dispatch of a trivial op, the
  small-message goal's yardstick (issue 25: 4 B eager <= 1.1x tf.identity).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np

from benchmarks import _results

SIZES = (4, 64 * 1024)
PARTS = ("allreduce", "runtime", "python", "negotiation_floor", "data_floor", "op_path",
         "function_allreduce", "function_identity", "identity")


def _parts(comm, nbytes: int) -> Dict[str, Callable[[], Any]]:
    """One call of each part, for a float32 tensor of `nbytes`."""
    import tensorflow as tf
    from mpi4py import MPI

    import tfdist
    from tfdist import _eager, _library, ops
    count = max(1, nbytes // 4)
    x = tf.ones([count], tf.float32)
    name = f"bench.breakdown.{nbytes}"
    # The runtime part: the fast path's library call with its arguments ready.
    source = x._numpy()
    result = np.empty_like(source)
    error = _eager._error_buffer()
    # A function object of its own (the library's attribute is shared, and
    # what else sets its argtypes is not this benchmark's business).
    entry = _library.control()["tfdist_eager_allreduce"]
    entry.argtypes = _eager._entry_point().argtypes
    entry.restype = ctypes.c_int
    encoded = _eager._encoded(name + ".c")
    shape = _eager._shape_array(source.shape)
    dtype_code = _eager._CORE_DTYPE[x._datatype_enum()]
    source_address, result_address = _eager._address(source), _eager._address(result)

    def runtime():
        code = entry(encoded, dtype_code, shape, source.ndim, source_address, result_address,
                     int(tfdist.Sum), 1.0, 1.0, 0, 0, error, _eager._ERROR_BYTES)
        assert code == 0, error.value

    def python():
        # What _eager.allreduce and ops.allreduce do around the library call.
        ops._checked(tfdist.Sum, name, 1.0, 1.0)
        assert _eager._eligible(x)
        own = x._numpy()
        out = np.empty_like(own)
        _eager._address(own), _eager._address(out), _eager._encoded(name)
        _eager._shape_array(own.shape)
        return _eager._EagerTensor(out, x.device, x._datatype_enum())

    bits = np.full(2, ~np.uint64(0), np.uint64)
    bits_out = np.empty_like(bits)
    send = np.ones(count, np.float32)
    receive = np.empty_like(send)
    algorithm = tfdist.algorithm_for(count * 4)

    @tf.function
    def function_allreduce(t):
        return tfdist.allreduce(t, op=tfdist.Sum, name=name + ".fn")

    @tf.function
    def function_identity(t):
        return tf.identity(t)

    return {
        "allreduce": lambda: tfdist.allreduce(x, op=tfdist.Sum, name=name),
        "runtime": runtime,
        "python": python,
        "negotiation_floor": lambda: comm.Allreduce(bits, bits_out, op=MPI.BAND),
        "data_floor": lambda: comm.Allreduce(send, receive, op=MPI.SUM),
        "op_path": lambda: tfdist.allreduce(x, op=tfdist.Sum, name=name + ".op",
                                            algorithm=algorithm),
        "function_allreduce": lambda: function_allreduce(x),
        "function_identity": lambda: function_identity(x),
        "identity": lambda: tf.identity(x),
    }


def measure(comm, rounds: int, calls: int) -> List[Dict[str, Any]]:
    from mpi4py import MPI
    rows = []
    for nbytes in SIZES:
        parts = _parts(comm, nbytes)
        for call in parts.values():  # warm-up: traces the functions, fills the cache
            for _ in range(3):
                call()
        samples: Dict[str, List[float]] = {p: [] for p in PARTS}
        for r in range(rounds):
            order = list(PARTS[r % len(PARTS):] + PARTS[:r % len(PARTS)])
            for part in order:
                call = parts[part]
                comm.Barrier()
                start = time.perf_counter()
                for _ in range(calls):
                    call()
                seconds = (time.perf_counter() - start) / calls
                samples[part].append(comm.allreduce(seconds, op=MPI.MAX))
        row: Dict[str, Any] = {"bytes": max(1, nbytes // 4) * 4, "rounds": rounds,
                               "calls": calls, "load_average": os.getloadavg()[0]}
        for part in PARTS:
            row[f"{part}_us"] = statistics.median(samples[part]) * 1e6
        rows.append(row)
        if comm.rank == 0:
            print(_format_row(row), flush=True)
    return rows


HEADER = ("| size | allreduce µs | runtime (C call) µs | Python µs | allreduce − runtime µs "
          "| negotiation floor µs | data floor µs | op path µs | tf.function(allreduce) µs "
          "| tf.function(identity) µs | tf.identity µs | allreduce / tf.identity | load |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _format_row(row: Dict[str, Any]) -> str:
    size = f"{row['bytes'] // 1024} KiB" if row["bytes"] >= 1024 else f"{row['bytes']} B"
    cells = [row[f"{p}_us"] for p in ("allreduce", "runtime", "python")]
    cells.append(row["allreduce_us"] - row["runtime_us"])
    cells += [row[f"{p}_us"] for p in PARTS[3:]]
    return (f"| {size} | " + " | ".join(f"{c:.1f}" for c in cells)
            + f" | {row['allreduce_us'] / row['identity_us']:.2f} | {row['load_average']:.1f} |")


def summary(document: Dict[str, Any]) -> str:
    """The parts of an eager allreduce, µs per call, at each size."""
    head = (f"np = {document['np']}; median over {document['rows'][0]['rounds']} interleaved "
            f"rounds of the slowest rank's mean per call; load = 1-minute load average")
    return "\n".join([head, "", HEADER] + [_format_row(r) for r in document["rows"]])


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eager_breakdown",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="calls per part per round")
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    import tfdist
    tfdist.init()
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    if comm.rank == 0:
        print(HEADER, flush=True)
    rows = measure(comm, args.rounds, args.calls)
    if comm.rank == 0:
        _results.publish(args, "eager_breakdown", {"np": comm.size, "rows": rows}, argv,
                         comm.size)
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
