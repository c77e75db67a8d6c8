"""Differential tests: tfdist's collectives and compressors against numpy models, np 1-4.

One mpirun per number of ranks runs every generated case (worker.py); the
tests here read its results. Cases that run into a known defect of issue 21
(cases.KNOWN_DEFECTS) are kept apart and expected to fail, strictly: once the
defect is fixed they pass, the xfail turns into a failure, and its mark goes.
"""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from cases import DISAGREEMENTS, KNOWN_DEFECTS
from mpi_harness import run_workers

#: Generated cases per number of ranks: (collectives, compressors). 1,000+ in all.
PLAN = {1: (280, 36), 2: (280, 36), 3: (200, 30), 4: (200, 30)}
#: The known defects' cases that fail today, by number of ranks.
EXPECTED_DEFECTS = {1: (1, 3, 4, 7), 2: (1, 2, 3, 4, 6, 7), 3: (1, 2, 3, 4, 6, 7),
                    4: (1, 2, 3, 4, 6, 7)}

REPORTS: Dict[int, Dict[str, Any]] = {}


def report(size: int, tmp_path_factory) -> Dict[str, Any]:
    if size not in REPORTS:
        path = tmp_path_factory.mktemp(f"differential-np{size}") / "results.json"
        collective, compressor = PLAN[size]
        run_workers("tests/differential/worker.py", size,
                    [str(path), str(collective), str(compressor)], timeout=300)
        REPORTS[size] = json.loads(path.read_text())
    return REPORTS[size]


def failures(results: Dict[str, Any]) -> str:
    return "\n".join(f"{case_id} on ranks {sorted(r['failures'])}: "
                     f"{next(iter(r['failures'].values()))}\n    case: {r['case']}"
                     for case_id, r in results.items() if r["failures"])


@pytest.mark.parametrize("size", sorted(PLAN))
def test_generated_cases_meet_their_contract(size, tmp_path_factory):
    result = report(size, tmp_path_factory)
    plain = {k: v for k, v in result["results"].items() if v["tag"] is None}
    assert result["ran"] >= sum(PLAN[size])
    assert not failures(plain), f"np={size}: cases that fail:\n{failures(plain)}"


@pytest.mark.parametrize("size,item", [
    pytest.param(size, item, marks=pytest.mark.xfail(
        strict=True, reason=f"issue 21 item {item}: {KNOWN_DEFECTS[item]}"))
    for size, items in sorted(EXPECTED_DEFECTS.items()) for item in items])
def test_known_defect_cases(size, item, tmp_path_factory):
    result = report(size, tmp_path_factory)
    tagged = {k: v for k, v in result["results"].items() if v["tag"] == item}
    assert tagged, f"no case of item {item} ran at np={size}"
    assert not failures(tagged), f"np={size}, item {item}:\n{failures(tagged)}"


@pytest.mark.xfail(strict=True, reason=f"issue 21 item 5: {KNOWN_DEFECTS[5]}")
def test_disagreeing_compressor_settings_are_reported_on_every_rank():
    # A hang is turned into an abort after a few seconds rather than the harness's timeout.
    output = run_workers("tests/differential/worker.py", 2, ["disagree"], timeout=120,
                         env={"TFDIST_STALL_CHECK_TIME": "2", "TFDIST_STALL_SHUTDOWN_TIME": "6"})
    for label in DISAGREEMENTS:
        assert output.count(f"disagreement reported: {label}") == 2, output[-3000:]
