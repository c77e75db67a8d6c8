"""Process sets (tfdist/process_sets.py, docs/process_sets.md) at np 3 and 4.

tests/workers/process_sets_worker.py checks, against numpy: every collective
on two disjoint sets (the same names on both), that they run concurrently,
overlapping sets used in rank-dependent orders (one tf.function; threads),
unnamed eager calls numbered per set, a one-rank set, DistributedGradientTape
and gradients on a set, a mismatch within a set, the errors of a rank outside
a set and of every bad input, adding and removing sets while collectives run,
ids never reused after a re-init, and idle sets' CPU. With --train (np 4),
two Keras replicas on two disjoint 2-rank sets each match a separate 2-rank
run bit for bit.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, run_job

WORKER = "process_sets_worker.py"
SIZES = [3, 4]
# Deterministic reductions, so that the replicas can match bit for bit.
RING = {"TFDIST_ALLREDUCE_ALGORITHM": "ring"}


@functools.lru_cache(maxsize=None)
def _job(np_):
    return run_job(WORKER, np_, timeout=240 + 30 * np_)


@pytest.mark.parametrize("check", check_names(WORKER))
@pytest.mark.parametrize("np_", SIZES)
def test_process_sets_check(np_, check):
    assert_check_passed(_job(np_), check)


@pytest.mark.parametrize("np_", SIZES)
def test_process_sets_job_ends(np_):
    output = _job(np_).assert_ended()
    for rank in range(np_):
        assert f"DONE rank {rank}" in output


def test_two_replicas_on_disjoint_sets_match_separate_runs():
    job = run_job(WORKER, 4, args=["--train"], timeout=300, env=RING)
    assert_check_passed(job, "two_replicas_match_separate_2_rank_runs")
    job.assert_ended()
