"""The differential layer's MPI worker: every rank runs the same generated cases.

    mpirun -np P python tests/differential/worker.py RESULTS.json COLLECTIVES COMPRESSORS [disagree]
    mpirun -np 2 python tests/differential/worker.py disagree

Each rank draws the same case lists (cases.py; checked by comparing a hash
across ranks), runs them in order and checks each against the numpy models.
A case that fails is recorded with its parameters and the run goes on; at the
end the ranks exchange their failures, every rank prints all of them, and rank
0 writes RESULTS.json ({"ran": n, "results": {case id: {"case",
"failures": {rank: message}}}}) for tests/differential/test_differential.py.
Anything that breaks the worker itself aborts every rank (worker_main).

``disagree`` (alone, or after the cases: one launch fewer) runs the ranks that
disagree on the compressor (targeted.disagreeing_settings) in a tfdist lifetime
of their own, under a stall shutdown of 10 s, so that a regression to a hang
fails in seconds.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # the models here, tests/mpi_harness.py

from mpi4py import MPI  # noqa: E402

import tensorflow as tf  # noqa: E402

import tfdist  # noqa: E402
from tfdist import _library  # noqa: E402
from mpi_harness import worker_main  # noqa: E402

import cases  # noqa: E402
import collectives  # noqa: E402
import compressors  # noqa: E402
import targeted  # noqa: E402


def run_case(run, case, rank, size):
    try:
        return run(case, rank, size)
    except Exception as error:  # noqa: BLE001 (a failing case is a result, not a crash)
        detail = traceback.format_exception_only(type(error), error)[-1].strip()
        return f"raised {detail[:600]}"


def disagreements() -> None:
    tfdist.init(stall_check_time=2, stall_shutdown_time=10)
    targeted.disagreeing_settings(tfdist.rank(), tfdist.size())
    tfdist.shutdown()


def main() -> None:
    if sys.argv[1] == "disagree":
        disagreements()
        return
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    path, n_collective, n_compressor = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # Compressor cases that restart through a checkpoint write beside the results.
    compressors.checkpoint_root = os.path.join(os.path.dirname(os.path.abspath(path)),
                                               "checkpoints")
    comm = MPI.COMM_WORLD
    accepted = {a for a in _library.allreduce_algorithms()}
    missing = accepted - {a for a in cases.ALGORITHMS if a}
    assert not missing, f"cases.ALGORITHMS lacks allreduce algorithms {sorted(missing)}"

    started = time.time()
    plan = [(c, collectives.run) for c in cases.collective_cases(n_collective)]
    plan += [(c, compressors.run) for c in cases.compressor_cases(n_compressor)]
    plan += [(c, targeted.run) for c in targeted.cases(size)]
    digest = hashlib.sha256(json.dumps([c for c, _ in plan], sort_keys=True).encode()).hexdigest()
    digests = comm.allgather(digest)
    assert len(set(digests)) == 1, f"ranks drew different cases: {digests}"
    generated = time.time() - started

    results, seconds = {}, {}
    for case, run in plan:
        begin = time.time()
        results[case["id"]] = run_case(run, case, rank, size)
        label = case["kind"] + (":" + case["mode"] if "mode" in case else "")
        seconds[label] = seconds.get(label, 0.0) + time.time() - begin
    elapsed = time.time() - started

    everyone = comm.allgather(results)
    report = {"ran": len(plan), "size": size, "seconds": elapsed, "generation_seconds": generated,
              "seconds_by_kind": seconds,
              "results": {}}
    for case, _ in plan:
        failures = {r: everyone[r][case["id"]] for r in range(size) if everyone[r][case["id"]]}
        report["results"][case["id"]] = {"case": case, "failures": failures}
        for r, message in failures.items():
            print(f"[rank {rank}] FAILED {case['id']} on rank {r}: {message}\n"
                  f"    case: {cases.describe(case)}", flush=True)
    failed = sum(1 for v in report["results"].values() if v["failures"])
    print(f"[rank {rank}] differential: {len(plan)} cases at np={size} in {elapsed:.1f} s "
          f"(generation {generated:.1f} s), {failed} failed", flush=True)
    if rank == 0:
        with open(path, "w") as handle:
            json.dump(report, handle, default=str)
    comm.Barrier()
    tfdist.shutdown()
    if sys.argv[4:] == ["disagree"]:
        disagreements()


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    worker_main(main)
