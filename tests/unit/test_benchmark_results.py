"""The benchmarks package without running a benchmark: its listing, the results files,
their markdown and plots, and how tfdist-bench finds the source tree."""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mpi_harness import ROOT


def test_listing_names_every_benchmark_without_tensorflow():
    code = ("import sys; from benchmarks.__main__ import main; status = main([]); "
            "print(status, 'tensorflow' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, cwd=str(ROOT))
    assert result.stdout.split() == ["2", "False"], (result.stdout, result.stderr)
    for name in ("allreduce", "runtime", "training", "join", "huge_pages"):
        assert f"  {name} " in result.stderr, result.stderr


# benchmarks/__init__.py moves the source tree to the end of sys.path; put it back
# after the import, so that later tests in this process import the same tfdist as before.
_SYS_PATH = list(sys.path)
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
from benchmarks import _results  # noqa: E402  (ROOT on sys.path first)
sys.path[:] = _SYS_PATH + [str(ROOT)] * (str(ROOT) not in _SYS_PATH)

RESULTS = ROOT / "docs" / "results"
JOIN_RESULT = {"ranks": 2, "microseconds": {"eager_4B_all_active": 20.0, "eager_4B_joined": 10.0,
                                            "paced_step_all_active": 3000.0,
                                            "paced_step_joined": 1500.0},
               "ratio_eager_joined_vs_active": 0.5, "ratio_paced_step_joined_vs_active": 0.5,
               "compute_ms_per_step": 5.0}


def _git_head():
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True)
    return done.stdout.strip() if done.returncode == 0 else _results.UNKNOWN


def test_results_module_writes_every_metadata_field(tmp_path, capsys):
    path = tmp_path / "join-np2.json"
    args = argparse.Namespace(json=str(path), plot=None)
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    _results.publish(args, "join", JOIN_RESULT, ["--blocks", "3", "--json", str(path)], 2)
    document = json.loads(path.read_text())
    meta = document["metadata"]
    assert set(_results.METADATA_FIELDS) <= set(meta), meta
    assert set(meta["versions"]) == set(_results.VERSION_FIELDS), meta
    assert meta["benchmark"] == "join"
    assert meta["command"].endswith(f"python -m benchmarks.join --blocks 3 --json {path}")
    assert meta["commit"] == _git_head()
    assert meta["cores"] == os.cpu_count()
    assert meta["versions"]["python"] == platform.python_version()
    for name in ("tensorflow", "open_mpi", "tfdist"):
        assert meta["versions"][name] not in ("", None), meta
    assert before <= datetime.datetime.fromisoformat(meta["date"]) <= before + datetime.timedelta(
        minutes=5)
    assert {k: v for k, v in document.items() if k != "metadata"} == JOIN_RESULT
    markdown = (tmp_path / "join-np2.md").read_text()
    assert f"`{meta['command']}`" in markdown and meta["commit"] in markdown
    assert "| eager allreduce of 4 B (µs) | 20.0 | 10.0 | 0.50 |" in markdown
    assert "| eager allreduce of 4 B (µs) | 20.0 | 10.0 | 0.50 |" in capsys.readouterr().out


def test_command_line_records_the_settings_that_change_a_measurement(monkeypatch):
    for name in [n for n in os.environ if n.startswith(("TFDIST_", "OMPI_", "MALLOC_",
                                                        "GLIBC_TUNABLES"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    monkeypatch.setenv("TFDIST_CYCLE_TIME", "2")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "4294967296")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    monkeypatch.setenv("HOME_IS_NOT_RECORDED", "x")
    assert _results.command_line("allreduce", ["--json", "a b.json"], 2) == (
        "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 MALLOC_TRIM_THRESHOLD_=4294967296 "
        "TFDIST_CYCLE_TIME=2 mpirun -np 2 python -m benchmarks.allreduce --json 'a b.json'")


@pytest.mark.parametrize("tunables, recorded", [
    ("glibc.malloc.hugetlb=1", ""),
    ("glibc.malloc.trim_threshold=134217728:glibc.malloc.hugetlb=1",
     "GLIBC_TUNABLES=glibc.malloc.trim_threshold=134217728 "),
    ("glibc.malloc.hugetlb=0", "GLIBC_TUNABLES=glibc.malloc.hugetlb=0 "),
])
def test_command_line_under_tfdistrun_keeps_the_users_tunables(monkeypatch, tunables, recorded):
    for name in [n for n in os.environ if n.startswith(("TFDIST_", "OMPI_", "MALLOC_",
                                                        "GLIBC_TUNABLES"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("TFDIST_RESTART", "0")  # what tfdistrun sets for every rank
    monkeypatch.setenv("GLIBC_TUNABLES", tunables)
    assert _results.command_line("training", ["--rounds", "5"], 2) == (
        f"{recorded}tfdistrun -np 2 python -m benchmarks.training --rounds 5")


def test_plot_without_matplotlib_says_how_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now fails
    parser = argparse.ArgumentParser(prog="bench")
    _results.add_arguments(parser)
    args = parser.parse_args(["--json", "x.json", "--plot"])
    with pytest.raises(SystemExit):
        _results.check_arguments(parser, args)
    assert "pip install matplotlib" in capsys.readouterr().err


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.stem)
def test_each_results_file_renders_as_its_committed_markdown(path):
    document = _results.load(str(path))
    assert set(_results.METADATA_FIELDS) <= set(document["metadata"]), path
    assert _results.markdown(document, path.stem) == path.with_suffix(".md").read_text(), (
        f"{path.with_suffix('.md')} is stale: python -m benchmarks._results render {path}")
    for plot in document["metadata"].get("plots", []):
        assert (path.parent / plot).is_file(), plot


def test_plot_of_two_results_files(tmp_path):
    documents = [_results.load(str(RESULTS / f"allreduce-np{n}.json")) for n in (2, 4)]
    _results.draw(documents, str(tmp_path / "allreduce.png"))
    assert (tmp_path / "allreduce.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _copied_launcher(tmp_path, monkeypatch):
    shutil.copy(ROOT / "tfdist_bench.py", tmp_path / "tfdist_bench.py")
    spec = importlib.util.spec_from_file_location("tfdist_bench_copy",
                                                  tmp_path / "tfdist_bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    return module


def test_tfdist_bench_without_a_source_tree_says_what_to_set(tmp_path, monkeypatch):
    launcher = _copied_launcher(tmp_path, monkeypatch)
    monkeypatch.delenv("TFDIST_SOURCE", raising=False)
    monkeypatch.setattr(launcher, "_installed_direct_url", lambda: None)
    with pytest.raises(SystemExit) as stopped:
        launcher.find_source_tree()
    assert "TFDIST_SOURCE" in str(stopped.value) and "benchmarks/" in str(stopped.value)
    monkeypatch.setenv("TFDIST_SOURCE", str(tmp_path))
    with pytest.raises(SystemExit, match="is not tfdist's source tree"):
        launcher.find_source_tree()
    monkeypatch.setenv("TFDIST_SOURCE", str(ROOT))
    assert launcher.find_source_tree() == ROOT


def test_tfdist_bench_finds_the_folder_pip_installed_from(tmp_path, monkeypatch):
    launcher = _copied_launcher(tmp_path, monkeypatch)
    monkeypatch.delenv("TFDIST_SOURCE", raising=False)
    url = json.dumps({"url": Path(ROOT).as_uri(), "dir_info": {}})
    monkeypatch.setattr(launcher, "_installed_direct_url", lambda: url)
    assert launcher.find_source_tree() == ROOT
    assert launcher.recorded_source('{"url": "https://example.org/tfdist.tar.gz"}') is None


BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py")
                    if not p.stem.startswith("_"))
# The headline comparisons: figure -> the benchmark that draws it.
HEADLINE_FIGURES = {"allreduce.png": "allreduce", "training-np2.png": "training",
                    "elastic-np4.png": "elastic",
                    "compression-time-to-target.png": "compression"}


def _functions(name: str) -> set:
    import ast
    tree = ast.parse((ROOT / "benchmarks" / f"{name}.py").read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_benchmark_prints_a_summary_table(name):
    # Read, not imported: some benchmarks import TensorFlow at the top.
    assert "summary" in _functions(name), f"benchmarks/{name}.py has no summary()"
    assert "_results.publish(" in (ROOT / "benchmarks" / f"{name}.py").read_text(), name


@pytest.mark.parametrize("figure", sorted(HEADLINE_FIGURES))
def test_headline_figures_are_drawn_by_their_benchmark_and_shown(figure):
    name = HEADLINE_FIGURES[figure]
    assert "plot" in _functions(name), f"benchmarks/{name}.py draws no figure"
    source = (ROOT / "benchmarks" / f"{name}.py").read_text()
    assert "_results.add_arguments(parser" in source and "plot=False" not in source, name
    assert (RESULTS / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"](results/{figure})" in (ROOT / "docs" / "benchmarks.md").read_text(), figure
    assert f"](docs/results/{figure})" in (ROOT / "README.md").read_text(), figure


def test_recovery_timelines_draw_from_the_elastic_results(tmp_path):
    _results.draw([_results.load(str(RESULTS / "elastic-np4.json"))],
                  str(tmp_path / "elastic.png"))
    assert (tmp_path / "elastic.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _compression_run(link, times):
    """A benchmarks.compression document of one link with these times to target."""
    environment = {} if link == "shm" else {"TFDIST_VIRTUAL_HOSTS": "4",
                                            "TFDIST_EMULATED_BANDWIDTH": str(1.25e8 * int(link))}
    return {"np": 4, "tfdist_environment": environment, "results": [
        {"dataset": "digits", "model": "cnn", "target": 0.95, "compression": name,
         "error_feedback": None, "time_to_target_s": seconds,
         **({"auto_choices": {"g": "powersgd"}} if name == "auto" else {})}
        for name, seconds in times.items()]}


def test_compression_links_goals_summary_and_plot(tmp_path):
    from benchmarks import compression_links
    # Two seeds at 1 Gb/s: medians (top-k reached the target once in two: never).
    runs = [{"link": "1", "files": ["x-1gbit-seed0.json", "x-1gbit-seed1.json"], "documents": [
                _compression_run("1", {"none": 40.0, "bf16": 20.0, "topk(0.01)": None,
                                       "powersgd(2)": 9.0, "auto": 10.0}),
                _compression_run("1", {"none": 44.0, "bf16": 22.0, "topk(0.01)": 30.0,
                                       "powersgd(2)": 9.0, "auto": 12.0})]},
            {"link": "shm", "files": ["x-shm.json"], "documents": [_compression_run(
                "shm", {"none": 5.0, "bf16": 6.0, "topk(0.01)": 8.0, "powersgd(2)": 7.0,
                        "auto": 5.1})]}]
    goals = compression_links.goals(runs)
    assert [(g["link"], g["best_fixed"]) for g in goals] == [("1", "powersgd(2)"),
                                                             ("shm", "none")]
    assert goals[0]["auto_over_bf16"] == pytest.approx(11.0 / 21.0)
    assert goals[0]["auto_over_best_fixed"] == pytest.approx(11.0 / 9.0)
    assert goals[1]["auto_over_best_fixed"] == pytest.approx(1.02)
    document = {"np": 4, "models": "cnn", "latency_s": 5e-5, "links": ["1", "shm"],
                "runs": runs, "goals": goals}
    text = compression_links.summary(document)
    assert "| 1 Gb/s | cnn | 42.00 | 21.00 | never | 9.00 | 11.00 | 0.52 | powersgd(2) " \
           "| 1.22 | powersgd |" in text, text
    _results.draw([{"metadata": {"benchmark": "compression_links"}, **document}],
                  str(tmp_path / "links.png"))
    assert (tmp_path / "links.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_paired_ratio_is_the_median_of_per_round_ratios():
    from benchmarks._interleaved import paired_ratio
    generator = np.random.default_rng(7)
    for rounds in (1, 2, 5, 15):
        a = generator.uniform(1, 100, rounds)
        b = generator.uniform(1, 100, rounds)
        assert paired_ratio(list(a), list(b)) == pytest.approx(float(np.median(a / b)))
    for a, b in (([], []), ([1.0], [1.0, 2.0])):
        with pytest.raises(ValueError, match="equal, non-empty"):
            paired_ratio(a, b)


def test_auto_vs_forced_pairs_rounds_where_the_machine_changes_mode():
    # auto is 1.02x the ring in every round but one; the machine runs 3x slower in
    # some rounds, three of the ring's blocks and two of auto's (in round 2 the mode
    # changed between them), so the ratio of medians is far off; the paired one is not.
    from benchmarks import allreduce
    auto_slow = [1, 3, 1, 1, 3]
    ring_slow = [1, 3, 3, 1, 3]
    samples = {"auto": [102.0 * m for m in auto_slow],
               "ring": [100.0 * m for m in ring_slow],
               "butterfly": [130.0 * m for m in auto_slow],
               "ring#2": [100.0 * m for m in ring_slow],
               "butterfly#2": [130.0 * m for m in auto_slow]}
    paired = allreduce._paired(samples, ["ring", "butterfly"], "ring", repeated=True)
    expected = {f: float(np.median(np.array(samples["auto"]) / np.array(samples[f])))
                for f in ("ring", "butterfly")}
    assert paired["auto_vs_forced_paired"] == pytest.approx(expected)
    assert paired["auto_vs_best_forced_paired"] == pytest.approx(1.02)
    assert paired["best_forced_again_vs_best_forced_paired"] == pytest.approx(1.0)
    assert np.median(samples["auto"]) / np.median(samples["ring"]) == pytest.approx(1.02 / 3)

    row = {"bytes": 1 << 20, "rounds": 5, "auto_picks": {"ring": 10}, "mpi_us": 90.0,
           "best_forced": "ring", "auto_vs_best_forced": 0.34, "auto_vs_mpi": 1.1,
           "load_average": 0.5, "best_forced_again_vs_best_forced": 0.33, **paired,
           **{f"{m}_us": float(np.median(v)) for m, v in samples.items()},
           "auto_us": float(np.median(samples["auto"]))}
    text = allreduce.summary({"mode": "auto_vs_forced", "np": 2, "hosts": 1,
                              "forced": ["ring", "butterfly"], "rows": [row]})
    assert "within 5% at 1 of 1 sizes" in text
    lines = [line for line in text.splitlines() if line.startswith("| 1 MiB")]
    assert len(lines) == 2 and "| 0.34 | 1.02 |" in lines[0], lines
    assert "| 0.33 | 1.00 | 0.34 | 1.02 |" in lines[1], lines


@pytest.mark.parametrize("n", range(1, 14))
def test_round_order_puts_every_method_after_every_other_equally_often(n):
    from benchmarks._interleaved import round_order
    methods = [f"m{i}" for i in range(n)]
    cycle = n if n % 2 == 0 else 2 * n
    follows = {}
    for r in range(cycle):
        order = round_order(methods, r)
        assert sorted(order) == sorted(methods)
        assert order == round_order(methods, r + cycle)
        for before, after in zip(order, order[1:]):
            follows[before, after] = follows.get((before, after), 0) + 1
    pairs = [(a, b) for a in methods for b in methods if a != b]
    assert sorted(follows) == sorted(pairs)
    assert len(set(follows.values())) <= 1, follows


def test_malloc_thresholds_counts_the_jobs_that_fault():
    from benchmarks import malloc_thresholds

    def job(auto_us, faults):
        rounds = len(auto_us)
        return {"rows": [{"bytes": 1 << 20,
                          "seconds": {"auto": [u * 1e-6 for u in auto_us],
                                      "ring": [100e-6] * rounds, "mpi": [150e-6] * rounds},
                          "faults": {"auto": [faults] * rounds, "ring": [0.0] * rounds,
                                     "mpi": [faults] * rounds}}]}
    fixed = [malloc_thresholds._job_row(job([80, 90, 85], 0.0))]
    adaptive = [malloc_thresholds._job_row(job([150, 140, 160], 1.0)),
                malloc_thresholds._job_row(job([82, 84, 86], 0.0))]
    assert adaptive[0][0]["auto_over_ring"] == pytest.approx(1.5)
    text = malloc_thresholds.summary({"np": 2, "rounds": 3, "calls": 20, "sizes": [1 << 20],
                                      "jobs": {"fixed": fixed, "adaptive": adaptive}})
    assert "| 1 MiB | fixed | 0.85 | 1.50 | 85, 100, 150 | 0 of 1 | 0.0 |" in text, text
    assert "| 1 MiB | adaptive | 0.84 1.50 | 1.50 1.50 | 117, 100, 150 | 1 of 2 | 1.0 |" in text, text


def test_autotune_scores_the_grid_best_on_rounds_it_was_not_picked_on():
    """A grid point that won the same rounds by luck must not set the bar: picked on the
    even rounds, scored on the odd ones, and the other way round (numpy reference)."""
    from benchmarks import autotune
    rng = np.random.default_rng(7)
    for rounds in (2, 3, 9):
        configs = {name: {"rounds": list(rng.uniform(80, 120, rounds))}
                   for name in ("defaults", autotune.AGAIN, "autotune",
                                "grid[fusion=0,cycle=1]", "grid[fusion=0,cycle=4]",
                                "grid[fusion=4194304,cycle=1]")}
        entry = {"configurations": configs}
        picks, ratios = autotune.held_out_grid_ratios(entry)
        grid = [name for name in configs if name.startswith("grid")]
        table = np.array([configs[name]["rounds"] for name in grid])
        tuned = np.array(configs["autotune"]["rounds"])
        expected = []
        for picked_on in (0, 1):
            best = grid[int(np.argmax(np.median(table[:, picked_on::2], axis=1)))]
            assert picks[picked_on] == best
            scored = np.arange(1 - picked_on, rounds, 2)
            expected += list(tuned[scored] / table[grid.index(best)][scored])
        np.testing.assert_allclose(ratios, expected)
        assert len(ratios) == rounds
    assert autotune.held_out_grid_ratios({"configurations": {
        "autotune": {"rounds": [1.0]}, "grid[fusion=0,cycle=1]": {"rounds": [1.0]}}}) == ([], [])


def test_autotune_summary_reports_the_aa_control_and_every_choice():
    from benchmarks import autotune
    rounds = {"defaults": [100.0, 90.0, 110.0], autotune.AGAIN: [105.0, 90.0, 99.0],
              "autotune": [100.0, 100.0, 100.0], "grid[fusion=0,cycle=1]": [50.0, 200.0, 50.0]}
    kept = {"fusion_threshold_bytes": "67108864", "cycle_time_ms": "1.0000",
            "algorithm_overrides": "none", "trials": "5", "generation": "5",
            "final_step": "30"}
    changed = dict(kept, fusion_threshold_bytes="0", trials="7", generation="7",
                   final_step="48")
    document = {"ranks": 2, "batch_per_rank": 64, "tune_steps": 50, "settings": {},
                "models": {"mlp": {
                    "gradients": 6, "grid_best": "grid[fusion=0,cycle=1]",
                    "configurations": {name: {"samples_per_second": float(np.median(values)),
                                              "rounds": values}
                                       for name, values in rounds.items()},
                    "autotune_choices": [kept, changed, kept]}}}
    row = [line for line in autotune.summary(document).splitlines()
           if line.startswith("| mlp")][0]
    aa = np.array(rounds[autotune.AGAIN]) / np.array(rounds["defaults"])
    assert f"{np.median(aa):.3f} [{aa.min():.3f}-{aa.max():.3f}]" in row
    # Held out: even rounds (0, 2) pick the grid point with median 50, scored on round 1
    # (100 / 200); round 1 picks it too, scored on rounds 0 and 2 (100 / 50 twice).
    assert "2.000 [0.500-2.000] (picked: fusion=0,cycle=1, fusion=0,cycle=1)" in row
    assert ("fusion_threshold_bytes=67108864, cycle_time_ms=1.0000, algorithm_overrides=none"
            " (2 of 3); fusion_threshold_bytes=0") in row
    assert row.endswith("| 30 (30-48) |"), row  # the step each search ended by
    del document["models"]["mlp"]["configurations"][autotune.AGAIN]  # an older run
    for choice in document["models"]["mlp"]["autotune_choices"]:
        choice.pop("final_step", None)  # logs from before the column
    row = [line for line in autotune.summary(document).splitlines()
           if line.startswith("| mlp")][0]
    assert "| - |" in row
