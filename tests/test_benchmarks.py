"""The benchmarks package (not installed with tfdist): its listing, and the engine timer
that benchmarks.allreduce and benchmarks.huge_pages build from the source tree."""
import subprocess
import sys

from mpi_harness import ROOT, run_workers


def test_listing_names_every_benchmark_without_tensorflow():
    code = ("import sys; from benchmarks.__main__ import main; status = main([]); "
            "print(status, 'tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd=str(ROOT))
    assert result.stdout.split() == ["2", "False"], (result.stdout, result.stderr)
    for name in ("allreduce", "runtime", "training", "join", "huge_pages"):
        assert f"  {name} " in result.stderr, result.stderr


def test_engine_timer_matches_numpy_at_three_ranks():
    output = run_workers("engine_timer_worker.py", 3, timeout=300)
    assert output.count("engine timer OK") == 3, output[-3000:]


def test_costmodel_timer_matches_numpy_on_emulated_hosts():
    env = {"TFDIST_VIRTUAL_HOSTS": "2", "TFDIST_EMULATED_BANDWIDTH": "1.25e9",
           "TFDIST_EMULATED_LATENCY": "2e-5"}
    output = run_workers("costmodel_timer_worker.py", 4, env=env, timeout=300)
    assert output.count("costmodel timer OK") == 4, output[-3000:]
