"""The runtime contract (docs/design.md) at np = 2 and 3.

One mpirun per size runs tests/workers/runtime_contract.py, which checks, on
every rank and against numpy: init() failing on every rank when ranks'
settings differ, submission in different orders (threads and
inside one tf.function), cross-rank validation errors, duplicate names,
fusion (and TFDIST_FUSION_THRESHOLD=0), a tf.function's burst of allreduces fused
into one collective per step, the response cache, grouped_allreduce,
alltoall, reducescatter, allgather, the functions (broadcast_variables,
broadcast_object, allgather_object), join with uneven data (ranks that joined
stand in for the others' collectives), shutdown, the timeline, idle CPU,
the stall report and exiting without shutdown().

test_runtime_contract_check makes one test of each check the worker registers
(its CHECKS list), all read from the one job per size; test_runtime_contract
checks the job as a whole: it ended well, and the stall report on stderr and
the timeline files are right.
"""
import functools
import json

import pytest

from mpi_harness import assert_check_passed, check_names, run_job

WORKER = "runtime_contract.py"
# 2 and an odd size; np 4 is left to the collectives, differential and process-set
# suites (this job was CI's slowest launch, 66 s there).
SIZES = [2, 3]


@pytest.fixture(scope="module")
def contract_job(tmp_path_factory):
    """The worker's job at each size, run once however many tests read it."""
    @functools.lru_cache(maxsize=None)
    def job(np_):
        timeline = tmp_path_factory.mktemp(f"np{np_}") / "timeline.json"
        return run_job(WORKER, np_, timeout=150 + 30 * np_,
                       env={"TFDIST_TIMELINE": str(timeline)}), timeline
    return job


@pytest.mark.parametrize("check", check_names(WORKER))
@pytest.mark.parametrize("np_", SIZES)
def test_runtime_contract_check(np_, check, contract_job):
    assert_check_passed(contract_job(np_)[0], check)


@pytest.mark.parametrize("np_", SIZES)
def test_runtime_contract(np_, contract_job):
    job, timeline = contract_job(np_)
    output = job.assert_ended()
    for rank in range(np_):
        assert f"DONE rank {rank}" in output
    # Every rank but the withholding one names the tensor and the missing rank.
    for rank in range(np_ - 1):
        assert (f"tfdist stall (rank {rank}): 'stall.x' has waited" in output
                and f"ranks that have not submitted it: {np_ - 1}" in output), output[-4000:]
    assert f"tfdist stall (rank {np_ - 1})" not in output
    # The timeline of every rank is one valid JSON document (Perfetto's format).
    for rank in range(np_):
        events = json.loads(timeline.with_name(f"timeline.json.{rank}").read_text())
        assert any(e.get("name") == "ALLREDUCE" for e in events)
