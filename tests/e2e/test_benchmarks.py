"""The benchmarks as smoke tests: the engine timer that benchmarks.allreduce and
benchmarks.huge_pages build from the source tree, the cost-model timer, and one
benchmark run through tfdist-bench from another directory."""
import json
import sys

from mpi_harness import ROOT, run_command, run_workers


def test_engine_timer_matches_numpy_at_three_ranks():
    output = run_workers("engine_timer_worker.py", 3, timeout=300)
    assert output.count("engine timer OK") == 3, output[-3000:]


def test_costmodel_timer_matches_numpy_on_emulated_hosts():
    env = {"TFDIST_VIRTUAL_HOSTS": "2", "TFDIST_EMULATED_BANDWIDTH": "1.25e9",
           "TFDIST_EMULATED_LATENCY": "2e-5"}
    output = run_workers("costmodel_timer_worker.py", 4, env=env, timeout=300)
    assert output.count("costmodel timer OK") == 4, output[-3000:]


def test_benchmark_runs_from_another_directory(tmp_path):
    # `python -m benchmarks.runtime` only works from the repository root; tfdist-bench
    # (tfdist_bench.py) finds the tree from anywhere.
    result = run_command(
        [sys.executable, str(ROOT / "tfdist_bench.py"), "runtime", "--scale", "0.01",
         "--blocks", "1", "--json", "out/runtime.json"],
        {"TFDIST_SOURCE": None}, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((tmp_path / "out" / "runtime.json").read_text())
    assert document["metadata"]["benchmark"] == "runtime"
    assert document["ranks"] == 1 and document["step_allreduces_per_step"] >= 1
    assert "| (1) eager allreduce, 4 B | MPI_Allreduce |" in result.stdout
    assert (tmp_path / "out" / "runtime.md").is_file()
