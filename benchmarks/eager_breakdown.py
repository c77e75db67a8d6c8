"""Where the time of an eager ``tfdist.allreduce`` of 4 B and 64 KiB goes.

    mpirun -np 2 --bind-to none python -m benchmarks.eager_breakdown \\
        --json docs/results/eager-breakdown-np2.json

Times, in rounds that interleave them (median over rounds of the slowest rank's
mean per call), the whole call and the parts it is made of, each measured on its
own in the same job:

- ``allreduce``: ``tfdist.allreduce(x, op=Sum, name=...)``, the eager fast path
  (tfdist/_eager.py), named so that negotiation is one cached bit;
- ``runtime``: the library call the fast path makes, with its arguments
  prepared: ``tfdist._eager_call``'s ``allreduce_tensor`` (which reads the
  EagerTensor, allocates the result in TensorFlow's memory, calls
  ``tfdist_eager_allreduce`` with the GIL released and wraps the result as an
  EagerTensor: cc/tf/eager_tensors.h), or, where this TensorFlow lacks what that
  needs, ``allreduce`` on NumPy buffers: enqueue, the negotiation round run
  inline, the algorithm, completion;
- ``python``: the fast path's Python around that call (argument checks,
  eligibility; on the NumPy route also the input's buffer, the result array and
  the result EagerTensor), measured without communication: ``allreduce -
  runtime`` is shown beside it as a check;
- ``negotiation floor``: one MPI_Allreduce (BAND) of the 16-byte bit vector a
  cached round exchanges; ``data floor``: MPI_Allreduce of the tensor's bytes;
- ``op path``: the same call through the TensorFlow op (the fast path's size
  limit set to 0 around it, the algorithm auto runs forced): TensorFlow's eager
  dispatch that the fast path skips;
- ``tf.function``: one allreduce in a ``tf.function`` (the kernel wakes the
  background thread, which runs the round and completes the op: the hand-off
  and wake-up) and the same function with ``tf.identity``;
- ``tf.identity``: TensorFlow's own eager dispatch of a trivial op, the
  small-message goal's yardstick (issue 25: 4 B eager <= 1.1x tf.identity);
- ``result tensor``: a result array made into an EagerTensor by TensorFlow's
  Python constructor (``np.empty_like``, then the EagerTensor, which copies an
  unaligned array), alone: what the NumPy route, and any Python code handing
  back a new tensor, pays for it. ``data floor + result tensor`` is a lower
  bound on an eager call that makes its result so (it leaves out every check
  and the C call's own overhead); the summary gives it as a multiple of the
  data floor, against issue 25's 64 KiB goal of 1.25x MPI. The tensor route
  makes its result in C, below this bound.

With ``--phases`` the job also writes a timeline (TFDIST_TIMELINE, in a
temporary directory) and splits the ``runtime`` part (the library call) into
the phases the runtime itself records for its tensor, with the parts' own
statistic (median over rounds of the mean per call) so that they subtract,
the slowest rank's: ``wait`` (WAIT_FOR_OTHER_RANKS: from
the start of the round that announced the tensor until the round that made it
ready ended; more than ``negotiate`` when the other rank came late and a
further round was needed), ``negotiate`` (NEGOTIATE: the round that made it
ready, one cached bit-vector allreduce), the ``algorithm`` (ALLREDUCE) and any
``copy`` (COPY_INPUT, SCALE_OUTPUT, fusion copies; none for a lone tensor).
``runtime - wait - algorithm - copy`` is the rest: the library call, building
and enqueueing the request, the calling thread polling until it may run the
round, and completion. The timeline's own writes slow the calls a little, so
take the totals from a run without ``--phases``:

    mpirun -np 2 --bind-to none python -m benchmarks.eager_breakdown --phases \\
        --json docs/results/eager-breakdown-phases-np2.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from typing import Any, Callable, Dict, List

import numpy as np

from benchmarks import _results
from benchmarks._interleaved import round_order, slowest_seconds_per_call
from benchmarks._op_path import through_op

SIZES = (4, 64 * 1024)
WARMUP_CALLS = 3  # per part, before the timed rounds (measure)
PARTS = ("allreduce", "runtime", "python", "negotiation_floor", "data_floor", "op_path",
         "function_allreduce", "function_identity", "identity", "result_tensor")


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
    entry = _eager._entry_point()
    in_c = _eager._tensor_entry_point()
    encoded = _eager._encoded(name + ".c")
    dtype_code = _eager._CORE_DTYPE[x._datatype_enum()]

    def runtime():
        if in_c is not None:
            made = in_c(encoded, x, int(tfdist.Sum), 1.0, 1.0, 0, 0, _eager.FAST_PATH_MAX_BYTES)
            assert made is not None and type(made) is not tuple, made
            return made
        failed = entry(encoded, dtype_code, source.shape, source, result, int(tfdist.Sum),
                       1.0, 1.0, 0, 0)
        assert failed is None, failed
        return result

    def python():
        # What _eager.allreduce and ops.allreduce do around the library call.
        ops._checked(tfdist.Sum, name, 1.0, 1.0)
        ops._algorithm_attr(None)
        assert _eager._eligible(x)
        _eager._encoded(name)
        if in_c is not None:
            return None
        own = x._numpy()
        out = np.empty_like(own)
        _eager._CORE_DTYPE[x._datatype_enum()], own.shape
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

    def result_tensor():
        return _eager._EagerTensor(np.empty_like(source), x.device, x._datatype_enum())

    return {
        "allreduce": lambda: tfdist.allreduce(x, op=tfdist.Sum, name=name),
        "runtime": runtime,
        "python": python,
        "negotiation_floor": lambda: comm.Allreduce(bits, bits_out, op=MPI.BAND),
        "data_floor": lambda: comm.Allreduce(send, receive, op=MPI.SUM),
        "op_path": through_op(lambda: tfdist.allreduce(x, op=tfdist.Sum, name=name + ".op",
                                                       algorithm=algorithm)),
        "function_allreduce": lambda: function_allreduce(x),
        "function_identity": lambda: function_identity(x),
        "identity": lambda: tf.identity(x),
        "result_tensor": result_tensor,
    }


def measure(comm, rounds: int, calls: int) -> List[Dict[str, Any]]:
    rows = []
    for nbytes in SIZES:
        parts = _parts(comm, nbytes)
        for call in parts.values():  # warm-up: traces the functions, fills the cache
            for _ in range(WARMUP_CALLS):
                call()
        samples: Dict[str, List[float]] = {p: [] for p in PARTS}
        for r in range(rounds):
            for part in round_order(PARTS, r):
                samples[part].append(slowest_seconds_per_call(comm, parts[part], calls))
        row: Dict[str, Any] = {"bytes": max(1, nbytes // 4) * 4, "rounds": rounds,
                               "calls": calls, "load_average": os.getloadavg()[0]}
        for part in PARTS:
            row[f"{part}_us"] = statistics.median(samples[part]) * 1e6
        rows.append(row)
        if comm.rank == 0:
            print(_format_row(row), flush=True)
    return rows


# Timeline phases (docs/runtime.md, Timeline) summed into each --phases column.
PHASE_COLUMNS = {"wait": ("WAIT_FOR_OTHER_RANKS",), "negotiate": ("NEGOTIATE",),
                 "algorithm": ("ALLREDUCE",),
                 "copy": ("COPY_INPUT", "SCALE_OUTPUT", "FUSION_COPY_IN", "FUSION_COPY_OUT")}


def timeline_phases(path: str, rank: int, size: int, names: Dict[int, str], rounds: int,
                    calls: int) -> Dict[int, Dict]:
    """µs per call of each PHASE_COLUMNS column for the tensor named names[nbytes], from
    this rank's timeline file (complete once the runtime has shut down): the same statistic
    as the parts' (the median over the timed rounds of the mean per call), so that the
    columns subtract from ``runtime``. The tensor's events are in call order, one of each
    phase per call (a lone tensor has no copies: those count 0)."""
    file = f"{path}.{rank}" if size > 1 else path
    with open(file) as f:
        events = json.load(f)
    rows = {e["tid"]: e["args"]["name"] for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name"}
    result = {}
    for nbytes, name in names.items():
        durations: Dict[str, List[float]] = {}
        for e in sorted((e for e in events if e.get("ph") == "X" and rows.get(e["tid"]) == name),
                        key=lambda e: e["ts"]):
            durations.setdefault(e["name"], []).append(float(e["dur"]))
        timed = len(durations.get("ALLREDUCE", [])) - WARMUP_CALLS
        column: Dict[str, Any] = {"timeline_calls": max(0, timed)}
        for key, phases in PHASE_COLUMNS.items():
            per_round = []
            for r in range(min(rounds, max(0, timed) // calls)):
                begin = WARMUP_CALLS + r * calls
                total = sum(sum(durations.get(p, [])[begin:begin + calls]) for p in phases)
                per_round.append(total / calls)
            column[f"{key}_us"] = statistics.median(per_round) if per_round else float("nan")
        result[nbytes] = column
    return result


HEADER = ("| size | allreduce µs | runtime (C call) µs | Python µs | allreduce − runtime µs "
          "| negotiation floor µs | data floor µs | op path µs | tf.function(allreduce) µs "
          "| tf.function(identity) µs | tf.identity µs | result tensor µs | allreduce / tf.identity "
          "| allreduce / data floor | (data floor + result tensor) / data floor | load |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def _format_row(row: Dict[str, Any]) -> str:
    size = f"{row['bytes'] // 1024} KiB" if row["bytes"] >= 1024 else f"{row['bytes']} B"
    cells = [row[f"{p}_us"] for p in ("allreduce", "runtime", "python")]
    cells.append(row["allreduce_us"] - row["runtime_us"])
    cells += [row[f"{p}_us"] for p in PARTS[3:] if p != "result_tensor"]
    floor = row["data_floor_us"]
    # Rows measured before the result tensor was a part show "–" in its columns.
    tensor = row.get("result_tensor_us")
    if tensor is None:
        tensor_cell, bound = "–", "–"
    else:
        tensor_cell, bound = f"{tensor:.1f}", f"{(floor + tensor) / floor:.2f}"
    ratios = [f"{row['allreduce_us'] / row['identity_us']:.2f}",
              f"{row['allreduce_us'] / floor:.2f}", bound, f"{row['load_average']:.1f}"]
    return "| " + " | ".join([size] + [f"{c:.1f}" for c in cells] + [tensor_cell] + ratios) + " |"


PHASES_HEADER = ("| size | runtime (C call) µs | wait (announced to ready) µs | of it, negotiate µs "
                 "| algorithm µs | copies µs | runtime − wait − algorithm − copies µs "
                 "| timeline calls |\n|---|---|---|---|---|---|---|---|")


def _format_phases_row(row: Dict[str, Any]) -> str:
    size = f"{row['bytes'] // 1024} KiB" if row["bytes"] >= 1024 else f"{row['bytes']} B"
    rest = row["runtime_us"] - row["wait_us"] - row["algorithm_us"] - row["copy_us"]
    cells = [row["runtime_us"], row["wait_us"], row["negotiate_us"], row["algorithm_us"],
             row["copy_us"], rest]
    return f"| {size} | " + " | ".join(f"{c:.1f}" for c in cells) + \
        f" | {row['timeline_calls']} |"


def summary(document: Dict[str, Any]) -> str:
    """The parts of an eager allreduce, µs per call, at each size."""
    head = (f"np = {document['np']}; median over {document['rows'][0]['rounds']} interleaved "
            f"rounds of the slowest rank's mean per call; load = 1-minute load average")
    if "route" in document:  # documents from before the tensor route have none
        head += (f"; the fast path's route: {document['route']} ("
                 + ("the library reads the EagerTensor and makes the result, "
                    "cc/tf/eager_tensors.h)" if document["route"] == "tensor"
                    else "NumPy buffers, the result made by TensorFlow's Python)"))
    lines = [head, "", HEADER] + [_format_row(r) for r in document["rows"]]
    if document.get("phases"):
        lines += ["", "Phases of the runtime call, from the timeline (median over rounds of "
                  "the mean per call, the slowest rank's; the timeline's writes slow this run's totals a little):",
                  "", PHASES_HEADER] + [_format_phases_row(r) for r in document["rows"]]
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eager_breakdown",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="calls per part per round")
    parser.add_argument("--phases", action="store_true",
                        help="also split the runtime call into the phases a timeline records")
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    import tfdist
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    scratch = tempfile.mkdtemp(prefix="tfdist-breakdown-") if args.phases else None
    if scratch:
        # The same directory on every rank (rank 0's), for one timeline file per rank.
        scratch = comm.bcast(scratch, root=0)
        os.makedirs(scratch, exist_ok=True)
        os.environ["TFDIST_TIMELINE"] = os.path.join(scratch, "timeline.json")
    tfdist.init()
    if comm.rank == 0:
        print(HEADER, flush=True)
    rows = measure(comm, args.rounds, args.calls)
    tfdist.shutdown()  # closes the timeline
    if scratch:
        # The tensor of the `runtime` part (_parts: the library call's own name).
        names = {row["bytes"]: f"bench.breakdown.{row['bytes']}.c" for row in rows}
        mine = timeline_phases(os.environ["TFDIST_TIMELINE"], comm.rank, comm.size, names,
                               args.rounds, args.calls)
        every = comm.gather(mine, root=0)
        if comm.rank == 0:
            for row in rows:
                for key in mine[row["bytes"]]:
                    row[key] = max(theirs[row["bytes"]][key] for theirs in every)
    if comm.rank == 0:
        from tfdist import _eager
        route = "tensor" if _eager._tensor_entry_point() is not None else "numpy"
        _results.publish(args, "eager_breakdown",
                         {"np": comm.size, "rows": rows, "phases": bool(scratch),
                          "route": route}, argv, comm.size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
