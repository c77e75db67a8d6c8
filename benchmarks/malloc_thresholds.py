"""Fixed malloc thresholds against glibc's adaptive ones, job by job.

    python -m benchmarks.malloc_thresholds --jobs 8 --json docs/results/malloc-thresholds-np2.json

Whether a buffer that is allocated and freed on every call stays mapped depends
on where glibc placed it, which differs from job to job: so this starts whole
jobs (``tfdistrun -np N``), alternately with ``FIXED_THRESHOLDS`` added to
``GLIBC_TUNABLES`` and without, the first setting alternating too. Each job times,
in interleaved rounds, three ways of making the same allreduce: ``tfdist.allreduce``
with the default algorithm (up to 1 MiB the eager fast path, which allocates its
result with NumPy on every call), the same call with the ring forced through
the op (``through_op``; its output TensorFlow allocates) and mpi4py's ``MPI_Allreduce`` (Open
MPI allocates scratch space inside every call). For each it counts the minor
page faults per call, the sign of memory handed back and fetched again.

Reported per size and setting: every job's auto / ring and MPI / ring (medians
over rounds of the ratio within a round) and its faults per call.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from benchmarks import _results
from benchmarks._interleaved import paired_ratio, round_order, warm_auto_past_its_trials
from benchmarks._op_path import through_op

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("auto", "ring", "mpi")
SETTINGS = ("fixed", "adaptive")  # FIXED_THRESHOLDS; glibc's own
#: All allocations up to 32 MiB (glibc's largest mmap threshold on 64-bit) from the
#: heap, and up to 128 MiB free at a heap's top kept mapped. Both or neither: setting
#: either turns glibc's adaptive mmap threshold off.
FIXED_THRESHOLDS = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=134217728"
RESULT_PREFIX = "MALLOC_THRESHOLDS_RESULT "
DEFAULT_SIZES = (256 << 10, 1 << 20, 4 << 20, 16 << 20)


def _worker(sizes: List[int], rounds: int, calls: int) -> Dict[str, Any]:
    """One job's rows: per size and method, seconds and faults per call in every round."""
    import numpy as np
    import tensorflow as tf
    from mpi4py import MPI

    import tfdist
    tfdist.init()
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in sizes:
        count = nbytes // 4
        x = tf.ones([count], tf.float32)
        send = np.ones(count, np.float32)
        receive = np.empty_like(send)
        ways = {
            "auto": lambda: tfdist.allreduce(x, op=tfdist.Sum, name=f"mt.auto.{nbytes}"),
            "ring": through_op(lambda: tfdist.allreduce(x, op=tfdist.Sum,
                                                        name=f"mt.ring.{nbytes}",
                                                        algorithm="ring")),
            "mpi": lambda: comm.Allreduce(send, receive, op=MPI.SUM),
        }
        warm_auto_past_its_trials(comm, lambda n: [ways["auto"]() for _ in range(n)])
        for way in ways.values():
            for _ in range(3):
                way()
        seconds: Dict[str, List[float]] = {m: [] for m in METHODS}
        faults: Dict[str, List[float]] = {m: [] for m in METHODS}
        for r in range(rounds):
            for method in round_order(METHODS, r):
                call = ways[method]
                call()  # pays what the previous method left behind
                comm.Barrier()
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                start = time.perf_counter()
                for _ in range(calls):
                    call()
                elapsed = time.perf_counter() - start
                faulted = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
                seconds[method].append(comm.allreduce(elapsed, op=MPI.MAX) / calls)
                faults[method].append(comm.allreduce(faulted, op=MPI.MAX) / calls)
        rows.append({"bytes": nbytes, "seconds": seconds, "faults": faults})
    tfdist.shutdown()
    return {"np": comm.size, "calls": calls, "rounds": rounds, "rows": rows}


def _job(setting: str, args: argparse.Namespace) -> Dict[str, Any]:
    """One job with ``setting``; its rank 0's rows."""
    command = [sys.executable, "-m", "tfdistrun", "-np", str(args.np),
               "--timeout", str(args.timeout)]
    env = dict(os.environ)
    if setting == "fixed":  # tfdistrun adds its huge pages to these
        env["GLIBC_TUNABLES"] = ":".join(
            item for item in (env.get("GLIBC_TUNABLES"), FIXED_THRESHOLDS) if item)
    command += [sys.executable, "-m", "benchmarks.malloc_thresholds", "--worker",
                "--sizes", ",".join(map(str, args.sizes)), "--rounds", str(args.rounds),
                "--calls", str(args.calls)]
    completed = subprocess.run(command, cwd=str(ROOT), env=env, capture_output=True,
                               text=True, timeout=args.timeout + 60)
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise RuntimeError(f"{setting} job failed (exit {completed.returncode}):\n"
                       f"{(completed.stdout + completed.stderr)[-4000:]}")


def _job_row(job: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Per size: auto / ring and MPI / ring paired, and each method's faults per call."""
    cells = []
    for row in job["rows"]:
        s, f = row["seconds"], row["faults"]
        cells.append({"bytes": row["bytes"],
                      **{f"{m}_us": statistics.median(s[m]) * 1e6 for m in METHODS},
                      "auto_over_ring": paired_ratio(s["auto"], s["ring"]),
                      "mpi_over_ring": paired_ratio(s["mpi"], s["ring"]),
                      **{f"{m}_faults": statistics.median(f[m]) for m in METHODS}})
    return cells


def measure(args: argparse.Namespace) -> Dict[str, Any]:
    jobs: Dict[str, List[List[Dict[str, Any]]]] = {s: [] for s in SETTINGS}
    for j in range(args.jobs):
        for setting in (SETTINGS if j % 2 == 0 else SETTINGS[::-1]):
            started = time.perf_counter()
            jobs[setting].append(_job_row(_job(setting, args)))
            print(f"job {j + 1}/{args.jobs} {setting}: {time.perf_counter() - started:.0f} s",
                  flush=True)
    return {"np": args.np, "sizes": args.sizes, "rounds": args.rounds, "calls": args.calls,
            "jobs": jobs}


def _size(nbytes: int) -> str:
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def _median_us(cells: List[Dict[str, Any]], method: str) -> str:
    return f"{statistics.median(c[f'{method}_us'] for c in cells):.0f}"


def summary(document: Dict[str, Any]) -> str:
    """Per size and setting: the jobs' ratios and faults, and how many jobs faulted."""
    lines = [f"np = {document['np']}; {len(document['jobs']['fixed'])} jobs per setting, "
             f"alternating; in each, {document['rounds']} interleaved rounds of "
             f"{document['calls']} calls per method. auto / ring and MPI / ring: the median "
             "over rounds of the ratio within a round, one value per job, sorted. Faulting "
             "jobs: those where auto or MPI took at least 0.5 minor faults per call "
             "(median over rounds).", "",
             "| size | thresholds | auto / ring, per job | MPI / ring, per job "
             "| auto, ring, MPI µs (medians over jobs) | faulting jobs "
             "| auto faults per call (max over jobs) |",
             "|---|---|---|---|---|---|---|"]
    for i, nbytes in enumerate(document["sizes"]):
        for setting in SETTINGS:
            cells = [job[i] for job in document["jobs"][setting]]
            auto = sorted(c["auto_over_ring"] for c in cells)
            mpi = sorted(c["mpi_over_ring"] for c in cells)
            faulting = sum(1 for c in cells if max(c["auto_faults"], c["mpi_faults"]) >= 0.5)
            lines.append(
                f"| {_size(nbytes)} | {setting} | {' '.join(f'{r:.2f}' for r in auto)} "
                f"| {' '.join(f'{r:.2f}' for r in mpi)} "
                f"| {', '.join(_median_us(cells, m) for m in METHODS)} | {faulting} of {len(cells)} "
                f"| {max(c['auto_faults'] for c in cells):.1f} |")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.malloc_thresholds",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=8, help="jobs per setting")
    parser.add_argument("--sizes", type=lambda v: [int(s) for s in v.split(",")],
                        default=list(DEFAULT_SIZES), help="comma-separated bytes")
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--calls", type=int, default=20, help="calls per block")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per job")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    if args.worker:
        result = _worker(args.sizes, args.rounds, args.calls)
        if os.environ.get("OMPI_COMM_WORLD_RANK", "0") == "0":
            print(RESULT_PREFIX + json.dumps(result), flush=True)
        return 0
    _results.publish(args, "malloc_thresholds", measure(args), argv, args.np)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
