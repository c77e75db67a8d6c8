"""The intra-host calibration cache (cc/core/tuning/calibration.cc) at np = 2.

A cached calibration is checked at every init() against a quick measurement
of the same steps: one taken on a busy machine (here: the real file with
every time made 20x slower) is measured again and the file rewritten, while
one faster than the machine is now (every time 1/4) is kept as it is, since a
busy moment must not replace a good calibration.

Only rank 0 reads and writes the cache. A rank whose HOME cannot hold the
default directory (its parent is a regular file: as root, permissions would
not stop a write) must not make init() fail; a cache rank 0 cannot write is
one warning line, and leaves no temporary file behind.
"""
import json
from pathlib import Path
from typing import Dict, List

from mpi_harness import run_workers

STEP_KINDS = 5  # cc/core/tuning/step_costs.h


def seconds_slots(values: List[float]) -> List[int]:
    """Indices of the seconds in a cached StepCosts (network_cost_codec.h: per kind,
    the number of distances; per distance, the number of points, then each point's
    bytes and seconds)."""
    slots, at = [], 0
    for _ in range(STEP_KINDS):
        distances = int(values[at])
        at += 1
        for _ in range(distances):
            points = int(values[at])
            at += 1
            slots.extend(at + 2 * point + 1 for point in range(points))
            at += 2 * points
    assert at == len(values), "the cache file is not one StepCosts"
    return slots


def read_cache(directory: Path) -> (Path, List[float]):
    files = sorted(directory.glob("linkcost-*.txt"))
    assert len(files) == 1, files
    return files[0], [float(line) for line in files[0].read_text().split()]


def write_scaled(path: Path, values: List[float], factor: float) -> List[float]:
    scaled = list(values)
    for slot in seconds_slots(values):
        scaled[slot] = values[slot] * factor
    path.write_text("".join(f"{value!r}\n" for value in scaled))
    return scaled


WARNING = "tfdist: warning: the link-cost calibration was not cached"


def link_cost(directory: Path) -> dict:
    output = run_workers("calibration_cache_worker.py", 2, timeout=120,
                         env={"TFDIST_CALIBRATION_CACHE_DIR": str(directory)})
    line = next(line for line in output.splitlines() if line.startswith("LINK_COST "))
    return json.loads(line[len("LINK_COST "):])


def run_with_homes(homes: Dict[int, Path]) -> str:
    """The worker with each rank's own HOME and the default cache directory under it."""
    args = [f"--home={rank}={home}" for rank, home in homes.items()]
    # Empty: unset, so that the default under HOME applies whatever the caller's
    # environment says.
    output = run_workers("calibration_cache_worker.py", 2, args=args, timeout=120,
                         env={"TFDIST_CALIBRATION_CACHE_DIR": ""})
    assert any(line.startswith("LINK_COST ") for line in output.splitlines()), output[-4000:]
    return output


def unusable_home(tmp_path: Path) -> Path:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a regular file where a directory would have to be\n")
    return blocker / "home"


def test_a_slow_cache_is_measured_again_and_a_fast_one_kept(tmp_path):
    measured = link_cost(tmp_path)
    path, values = read_cache(tmp_path)
    slots = seconds_slots(values)

    # Taken on a busy machine: every step 20x what it costs.
    slow = write_scaled(path, values, 20.0)
    remeasured = link_cost(tmp_path)
    _, rewritten = read_cache(tmp_path)
    ratios = sorted(rewritten[slot] / slow[slot] for slot in slots)
    assert ratios[len(ratios) // 2] < 0.2, f"the slow cache was kept: {ratios}"
    assert remeasured["latency_s"] < 20.0 * measured["latency_s"] / 5, (measured, remeasured)

    # Faster than the machine now: kept, file and figures alike.
    fast = write_scaled(path, rewritten, 0.25)
    kept = link_cost(tmp_path)
    _, after = read_cache(tmp_path)
    assert after == fast, "a cache faster than the check was rewritten"
    assert abs(kept["latency_s"] - 0.25 * remeasured["latency_s"]) <= 1e-3 * kept["latency_s"] + 1e-15, (
        remeasured, kept)


def test_a_rank_without_a_writable_home_does_not_stop_init(tmp_path):
    home = tmp_path / "home0"
    output = run_with_homes({0: home, 1: unusable_home(tmp_path)})
    assert WARNING not in output, output[-4000:]
    cache = home / ".cache" / "tfdist"
    files = sorted(path.name for path in cache.iterdir())
    assert len(files) == 1 and files[0].startswith("linkcost-"), files
    seconds_slots(read_cache(cache)[1])  # a whole StepCosts

    # Rank 0 cannot replace the file (a directory stands in its way): one
    # warning, init goes on, and no temporary file is left behind.
    target = cache / files[0]
    target.unlink()
    (target / "occupied").mkdir(parents=True)
    output = run_with_homes({0: home, 1: unusable_home(tmp_path)})
    warnings = [line for line in output.splitlines() if WARNING in line]
    assert len(warnings) == 1 and "rename" in warnings[0], output[-4000:]
    assert sorted(path.name for path in cache.iterdir()) == files, list(cache.iterdir())


def test_rank_zero_without_a_writable_home_warns_and_measures(tmp_path):
    home = tmp_path / "home1"
    output = run_with_homes({0: unusable_home(tmp_path), 1: home})
    warnings = [line for line in output.splitlines() if WARNING in line]
    assert len(warnings) == 1 and "cannot create" in warnings[0], output[-4000:]
    assert not (home / ".cache" / "tfdist").exists(), "a rank other than 0 wrote the cache"
