"""Which workers share one mpirun at each size (tests/mpi_harness.py, ``shared_job``).

Most of the suite's time goes to starting ranks: each imports TensorFlow. Workers whose
checks leave nothing behind in the process (they end with tfdist shut down or let the
runner shut it down, set no process-wide state, and need no fresh process to show what
they show) run one after another in one job per size, started by whichever of their
tests asks first. Workers that test a process's lifetime (exit without shutdown, idle CPU,
stalls, failures, elastic membership) keep their own jobs.

``{dir}`` in a member's arguments or settings becomes a fresh directory of its own.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Tuple

SYNC_BN_SEVERAL_RANKS = ["axis=-1 eager", "axis=1 eager", "axis=-1 graph", "axis=1 graph"]
#: The SyncBatchNormalization checks each size runs (its own and keras' layer at one rank,
#: the several-rank checks at every other size, and the costlier ones once).
SYNC_BN_RUNS = {1: ["single_rank", "refusals"],
                2: SYNC_BN_SEVERAL_RANKS + ["mask", "even", "fit"],
                3: SYNC_BN_SEVERAL_RANKS, 4: SYNC_BN_SEVERAL_RANKS}


#: Top-k and PowerSGD: the 400-step error-feedback run once (np=2); np=4 covers uneven k
#: and more ranks.
SPARSE_RUNS = {2: ["--error-feedback"], 4: []}
#: Their edge cases (issue 21): all at np=2; at np=3 a mismatch on a rank that is not
#: rank 1 and counts on a non-power-of-two job.
DEFECT_RUNS = {2: [], 3: ["mismatch", "stats", "zero"]}


@dataclass(frozen=True)
class Member:
    """One worker in a shared job: its script (tests/workers/), arguments, and the
    TFDIST_* settings it runs under (set before its main() and removed after)."""
    script: str
    args: Tuple[str, ...] = ()
    env: Tuple[Tuple[str, str], ...] = ()
    timeout: float = 240


def _members(np_: int) -> List[Member]:
    members = [Member("collectives_worker.py", timeout=400),
               Member("adasum_worker.py"),
               Member("sync_batch_norm_worker.py", ("{dir}", *SYNC_BN_RUNS[np_]))]
    if np_ >= 2:
        members += [Member("grouped_worker.py"),
                    Member("compression_dense_worker.py",
                           env=(("TFDIST_ALLREDUCE_ALGORITHM", "ring"),), timeout=300)]
    # The edge cases first: their warning check needs top-k and PowerSGD's first float64
    # call in the process (a traced call warns once, when it is traced).
    if np_ in DEFECT_RUNS:
        # One algorithm for every call: its "zero" check compares two runs of the same
        # PowerSGD steps bit for bit, and under auto each run may reduce with another
        # algorithm (trials, then a pick that depends on timing), which at np=3 rounds
        # the sums differently.
        members.append(Member("compression_defects_worker.py", tuple(DEFECT_RUNS[np_]),
                              env=(("TFDIST_ALLREDUCE_ALGORITHM", "ring"),)))
    if np_ in SPARSE_RUNS:
        members.append(Member("sparse_compression_worker.py", ("{dir}", *SPARSE_RUNS[np_])))
    if np_ in (2, 3):
        members += [Member("keras_optimizer_worker.py", ("{dir}",)),
                    Member("keras_callbacks_worker.py", timeout=180)]
    if np_ == 2:
        members += [Member("library_contract_worker.py"),
                    Member("local_variables_worker.py", ("{dir}",))]
    return members


#: np -> the workers that share that size's job, in the order they run.
SHARED_JOBS: Dict[int, List[Member]] = {np_: _members(np_) for np_ in (1, 2, 3, 4)}
