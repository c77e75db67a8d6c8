"""The benchmarks as smoke tests: the engine timer that benchmarks.allreduce and
benchmarks.huge_pages build from the source tree, the cost-model timer, and one
benchmark run through tfdist-bench from another directory."""
import json
import sys

import pytest

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
    # The phase counters moved during the step blocks, and the table shows them.
    phases = document["step_phases_us"]
    assert set(phases) == {"arrival", "pickup", "negotiation", "collectives", "completion"}
    assert phases["collectives"] > 0 and min(phases.values()) >= 0, phases
    assert document["microseconds"]["tfdist_alone_function_100x16KiB"] > 0
    # The grouped step is timed and split by its own counters: one kernel, whose
    # one round carries the 100 members through the fusion buffer.
    assert document["microseconds"]["tfdist_grouped_function_100x16KiB"] > 0
    grouped = document["grouped_step_phases_us"]
    assert set(grouped) == set(phases) and grouped["collectives"] > 0, grouped
    assert document["grouped_step_allreduces_per_step"] >= 1
    assert "| phase | 100 kernels | one grouped kernel | what |" in result.stdout
    assert "| outside the runtime |" in result.stdout


def test_training_benchmark_measures_every_row_against_the_ceiling(tmp_path):
    # A few steps of the MLP at np 2, with the serial bounds: every row of the table
    # gets a throughput and a ratio to the ceiling of the same rounds.
    result = run_command(
        [sys.executable, "-m", "tfdistrun", "-np", "2", "--timeout", "240", sys.executable,
         "-m", "benchmarks.training", "--models", "mlp", "--mlp-steps", "5", "--rounds", "2",
         "--num-groups", "1", "--serial-bounds", "--json", str(tmp_path / "training.json")],
        timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    entry = json.loads((tmp_path / "training.json").read_text())["tfdist"]["models"]["mlp"]
    assert entry["parameters"] == 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
    rows = {"lockstep", "lockstep+mpi", "lockstep+tfdist", "tfdist[num_groups=1]"}
    assert rows <= set(entry), entry
    for name in rows:
        ratios = entry[name]["round_ratios"]
        assert len(ratios) == 2 and all(r > 0 for r in ratios), (name, ratios)
        assert entry[name]["ratio"] == pytest.approx(sum(ratios) / 2)  # the median of two
        for counter in ("minor_faults", "involuntary_switches"):  # per step, slowest rank
            per_round = entry[name][f"round_{counter}_per_step"]
            assert len(per_round) == 2 and min(per_round) >= 0, (name, counter, per_round)
    # The allreduces of the gradients' bytes timed alone, and lock-step plus each: a
    # step that also moves the bytes is longer than lock-step's, so below its ratio.
    alone = entry["alone_us"]
    assert set(alone) == {"mpi", "tfdist auto", "tfdist ring", "tfdist rabenseifner",
                          "tfdist butterfly"}, alone
    for name, us in alone.items():
        assert us > 0 and len(entry["round_alone_us"][name]) == 2, (name, us)
    fastest = entry["lockstep+fastest (computed)"]["round_ratios"]
    for r, (computed, lockstep) in enumerate(zip(fastest, entry["lockstep"]["round_ratios"])):
        assert 0 < computed < lockstep, (computed, lockstep)
        # Recomputed: a lock-step step (128 samples over both ranks) plus the round's
        # fastest allreduce, in samples/s, against the round's ceiling.
        step_s = 128 / entry["lockstep"]["rounds"][r]
        alone_s = min(per_round[r] for per_round in entry["round_alone_us"].values()) * 1e-6
        assert computed == pytest.approx(128 / (step_s + alone_s) / entry["ceiling"]["rounds"][r])
    table = (tmp_path / "training.md").read_text()
    assert "| mlp | 669706 | lockstep+tfdist |" in table
    assert "| mlp | 669706 | lockstep+fastest (computed) |" in table
    assert "one allreduce of its 669706 float32 alone" in table


def test_eager_fast_path_benchmark_times_both_paths_with_one_algorithm(tmp_path):
    # Two sizes either side of the NumPy route's alignment threshold, at np 2: every way
    # of making the call (the op, the tensor route, the NumPy route) is timed, gives the
    # right sum (the benchmark checks it), and ran auto's pick.
    result = run_command(
        [sys.executable, "-m", "tfdistrun", "-np", "2", "--timeout", "240", sys.executable,
         "-m", "benchmarks.eager_fast_path", "--sizes", "65536,1048576", "--rounds", "2",
         "--calls", "3", "--json", str(tmp_path / "fast.json")],
        timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((tmp_path / "fast.json").read_text())
    assert document["np"] == 2 and [r["bytes"] for r in document["rows"]] == [65536, 1048576]
    for row in document["rows"]:
        assert all(row[f"{m}_us"] > 0 for m in ("op", "fast", "fast, NumPy route")), row
        assert row["auto_ran"] in ("tree", "butterfly", "ring", "rabenseifner", "shm"), row
        assert row["fast_vs_op"] == pytest.approx(row["fast_us"] / row["op_us"])
        assert row["fast_vs_numpy_paired"] > 0, row
    text = (tmp_path / "fast.md").read_text()
    assert "| 1 MiB |" in text and "fast / NumPy route, paired" in text


def test_mpi_drift_benchmark_times_every_window(tmp_path):
    # One rank, a few windows: every window timed, the spread computed from them.
    result = run_command(
        [sys.executable, "-m", "benchmarks.mpi_drift", "--windows", "4", "--calls", "3",
         "--bytes", "4096", "--json", str(tmp_path / "drift.json")], timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((tmp_path / "drift.json").read_text())
    windows = document["window_microseconds"]
    assert len(windows) == 4 and min(windows) > 0, windows
    assert document["slowest_over_fastest"] == pytest.approx(max(windows) / min(windows))
    assert "| 2 (fresh buffers) |" in (tmp_path / "drift.md").read_text()


def test_auto_vs_forced_keeps_every_round_and_pairs_them(tmp_path):
    import numpy as np
    result = run_command(
        [sys.executable, "-m", "benchmarks.allreduce", "--auto-vs-forced", "--repeat-forced",
         "--max-bytes", "64", "--rounds", "3", "--seconds-per-cell", "0.002",
         "--json", str(tmp_path / "avf.json")], timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads((tmp_path / "avf.json").read_text())
    forced = document["forced"]
    assert [row["bytes"] for row in document["rows"]] == [4, 16, 64]
    for row in document["rows"]:
        samples = row["samples_us"]
        assert set(samples) == {"auto", "mpi", *forced, *(f"{f}#2" for f in forced)}
        assert all(len(v) == 3 and min(v) > 0 for v in samples.values()), samples
        assert row["auto_us"] == pytest.approx(float(np.median(samples["auto"])))
        against = {f: float(np.median(np.divide(samples["auto"], samples[f]))) for f in forced}
        assert row["auto_vs_forced_paired"] == pytest.approx(against)
        assert row["auto_vs_best_forced_paired"] == pytest.approx(max(against.values()))
        again = samples[row["best_forced"] + "#2"]
        assert row["best_forced_again_vs_best_forced_paired"] == pytest.approx(
            max(float(np.median(np.divide(again, samples[f]))) for f in forced))
        # CPU time over cores x time: above 0, and one process cannot keep more than
        # every core busy (a few per cent for the clocks' granularity).
        assert set(row["cores_busy"]) == set(samples), row["cores_busy"]
        assert all(0 < v <= 1.05 for v in row["cores_busy"].values()), row["cores_busy"]
    text = (tmp_path / "avf.md").read_text()
    assert "Paired: the largest over the forced algorithms" in text
    assert "Cores busy: the ranks' CPU time" in text
