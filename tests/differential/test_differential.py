"""Differential tests: tfdist's collectives and compressors against numpy models, np 1-4.

One mpirun per number of ranks runs every generated case and the hand-written
edge cases of targeted.py (worker.py); the tests here read its results. The
np=2 job then runs, in a tfdist lifetime of its own under a short stall
shutdown, the ranks that disagree on the compressor, so that a regression to a
hang fails in seconds (one launch fewer than a job of their own).
"""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from cases import DISAGREEMENTS
from mpi_harness import Job, run_job

#: Generated cases per number of ranks: (collectives, compressors). 1,000+ in all.
PLAN = {1: (280, 36), 2: (280, 36), 3: (200, 30), 4: (200, 30)}
#: The job that also runs the disagreements.
DISAGREE_SIZE = 2

JOBS: Dict[int, Job] = {}
REPORTS: Dict[int, Dict[str, Any]] = {}


def job(size: int, tmp_path_factory) -> Job:
    """The job of ``size`` ranks, run once; its results in REPORTS[size] if it wrote any."""
    if size not in JOBS:
        path = tmp_path_factory.mktemp(f"differential-np{size}") / "results.json"
        collective, compressor = PLAN[size]
        args = [str(path), str(collective), str(compressor)]
        # About 1-2 minutes at np=4 on an idle 2-core machine; 5 under a load of 12.
        JOBS[size] = run_job("tests/differential/worker.py", size,
                             args + (["disagree"] if size == DISAGREE_SIZE else []), timeout=600)
        if path.exists():
            REPORTS[size] = json.loads(path.read_text())
    return JOBS[size]


def failures(results: Dict[str, Any]) -> str:
    return "\n".join(f"{case_id} on ranks {sorted(r['failures'])}: "
                     f"{next(iter(r['failures'].values()))}\n    case: {r['case']}"
                     for case_id, r in results.items() if r["failures"])


@pytest.mark.parametrize("size", sorted(PLAN))
def test_generated_and_targeted_cases_meet_their_contract(size, tmp_path_factory):
    ran = job(size, tmp_path_factory)
    if size != DISAGREE_SIZE:  # that job's end is the disagreement test's
        ran.assert_ended()
    assert size in REPORTS, f"np={size}: the job wrote no results:\n{ran.output[-6000:]}"
    result = REPORTS[size]
    targeted = [k for k, v in result["results"].items() if v["case"]["kind"] == "targeted"]
    assert result["ran"] >= sum(PLAN[size]) + len(targeted)
    assert targeted, f"np={size}: no targeted case ran"
    found = failures(result["results"])
    assert not found, f"np={size}: cases that fail:\n{found}"


def test_disagreeing_compressors_are_reported_on_every_rank(tmp_path_factory):
    # A regression to a hang ends in the stall shutdown after a few seconds, not at the
    # harness's timeout.
    output = job(DISAGREE_SIZE, tmp_path_factory).assert_ended()
    for label in DISAGREEMENTS:
        assert output.count(f"disagreement reported: {label}\n") == DISAGREE_SIZE, (
            label, output[-3000:])
