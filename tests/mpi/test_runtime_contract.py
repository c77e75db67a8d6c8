"""The runtime contract (docs/design.md) at np = 2, 3 and 4.

One mpirun per size runs tests/workers/runtime_contract.py, which checks, on
every rank and against numpy: init() failing on every rank when ranks'
settings differ, submission in different orders (threads and
inside one tf.function), cross-rank validation errors, duplicate names,
fusion (and TFDIST_FUSION_THRESHOLD=0), a tf.function's burst of allreduces fused
into one collective per step, the response cache, grouped_allreduce,
alltoall, reducescatter, allgather, the functions (broadcast_variables,
broadcast_object, allgather_object), join with uneven data (ranks that joined
stand in for the others' collectives), shutdown, the timeline, idle CPU,
the stall report and exiting without shutdown(). This file checks that every
check passed on every rank and reads the stall report from stderr.
"""
import json

import pytest

from mpi_harness import run_workers

CHECKS = ["settings_agree", "basic", "idle_cpu", "out_of_order_threads", "out_of_order_function", "mismatches",
          "duplicate_name", "fusion threshold=None", "graph_burst", "cache on=True", "grouped_allreduce",
          "alltoall", "reducescatter", "allgather", "functions", "join cache=on", "shutdown",
          "timeline", "fusion threshold=1024", "cache on=False", "join cache=off", "fusion threshold=0", "cache_eviction",
          "stall_report"]


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_runtime_contract(np_, tmp_path):
    timeline = tmp_path / "timeline.json"
    output = run_workers("runtime_contract.py", np_, timeout=150 + 30 * np_,
                         env={"TFDIST_TIMELINE": str(timeline)})
    for rank in range(np_):
        for check in CHECKS:
            assert f"CHECK {check} ok (rank {rank})" in output, (check, rank, output[-4000:])
        assert f"DONE rank {rank}" in output
    # Every rank but the withholding one names the tensor and the missing rank.
    for rank in range(np_ - 1):
        assert (f"tfdist stall (rank {rank}): 'stall.x' has waited" in output
                and f"ranks that have not submitted it: {np_ - 1}" in output), output[-4000:]
    assert f"tfdist stall (rank {np_ - 1})" not in output
    # The timeline of every rank is one valid JSON document (Perfetto's format).
    for rank in range(np_):
        events = json.loads((tmp_path / f"timeline.json.{rank}").read_text())
        assert any(e.get("name") == "ALLREDUCE" for e in events)
