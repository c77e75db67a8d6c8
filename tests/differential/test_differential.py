"""Differential tests: tfdist's collectives and compressors against numpy models, np 1-4.

One mpirun per number of ranks runs every generated case and the hand-written
edge cases of targeted.py (worker.py); the tests here read its results.
Ranks that disagree on the compressor run as a job of their own, under a
short stall shutdown, so that a regression to a hang fails in seconds.
"""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from cases import DISAGREEMENTS
from mpi_harness import run_workers

#: Generated cases per number of ranks: (collectives, compressors). 1,000+ in all.
PLAN = {1: (280, 36), 2: (280, 36), 3: (200, 30), 4: (200, 30)}

REPORTS: Dict[int, Dict[str, Any]] = {}


def report(size: int, tmp_path_factory) -> Dict[str, Any]:
    if size not in REPORTS:
        path = tmp_path_factory.mktemp(f"differential-np{size}") / "results.json"
        collective, compressor = PLAN[size]
        # About 1-2 minutes at np=4 on an idle 2-core machine; 5 under a load of 12.
        run_workers("tests/differential/worker.py", size,
                    [str(path), str(collective), str(compressor)], timeout=600)
        REPORTS[size] = json.loads(path.read_text())
    return REPORTS[size]


def failures(results: Dict[str, Any]) -> str:
    return "\n".join(f"{case_id} on ranks {sorted(r['failures'])}: "
                     f"{next(iter(r['failures'].values()))}\n    case: {r['case']}"
                     for case_id, r in results.items() if r["failures"])


@pytest.mark.parametrize("size", sorted(PLAN))
def test_generated_and_targeted_cases_meet_their_contract(size, tmp_path_factory):
    result = report(size, tmp_path_factory)
    targeted = [k for k, v in result["results"].items() if v["case"]["kind"] == "targeted"]
    assert result["ran"] >= sum(PLAN[size]) + len(targeted)
    assert targeted, f"np={size}: no targeted case ran"
    found = failures(result["results"])
    assert not found, f"np={size}: cases that fail:\n{found}"


def test_disagreeing_compressors_are_reported_on_every_rank():
    # A regression to a hang ends in the stall shutdown after a few seconds, not at the
    # harness's timeout.
    output = run_workers("tests/differential/worker.py", 2, ["disagree"], timeout=120,
                         env={"TFDIST_STALL_CHECK_TIME": "2", "TFDIST_STALL_SHUTDOWN_TIME": "10"})
    for label in DISAGREEMENTS:
        assert output.count(f"disagreement reported: {label}\n") == 2, (label, output[-3000:])
