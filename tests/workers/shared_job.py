"""Runs several workers' main() one after another in this one job (tests/shared_jobs.py).

argv[1]: a JSON list of {"script", "args", "env"}. Each member's check lines carry its
name ("CHECK grouped_worker/name ok (rank r)"), and each member ends with
"SHARED <name> ok|FAILED (rank r)". A member whose checks fail ends FAILED on every rank
(its checks' verdict is agreed) and the next member still runs; anything else that goes
wrong aborts the whole job, as in any worker, so that no rank is left waiting.
"""
import importlib
import json
import os
import sys
from pathlib import Path

from mpi4py import MPI

from mpi_harness import Checks, worker_main


def run_member(member: dict) -> bool:
    stem = Path(member["script"]).stem
    saved = {key: os.environ.get(key) for key in member["env"]}
    os.environ.update(member["env"])
    sys.argv = [member["script"], *member["args"]]
    Checks.prefix = f"{stem}/"
    try:
        importlib.import_module(stem).main()
        return True
    except SystemExit as verdict:  # Checks.run's, the same on every rank
        return verdict.code in (None, 0)
    finally:
        Checks.prefix = ""
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        import tfdist
        if tfdist.is_initialized():
            tfdist.shutdown()
        if "keras" in sys.modules:
            sys.modules["keras"].backend.clear_session()


def main() -> None:
    rank = MPI.COMM_WORLD.rank
    failed = 0
    for member in json.loads(sys.argv[1]):
        passed = run_member(member)
        failed += not passed
        print(f"SHARED {Path(member['script']).stem} {'ok' if passed else 'FAILED'} "
              f"(rank {rank})", flush=True)
        MPI.COMM_WORLD.Barrier()
    if failed:
        raise SystemExit(f"rank {rank}: {failed} member(s) of the shared job failed")


if __name__ == "__main__":
    worker_main(main)
