"""The examples run as a user would run them, and reach the accuracy the README promises."""
import re

import pytest

from mpi_harness import run_workers


def final_accuracy(output: str) -> float:
    match = re.search(r"final validation accuracy (\d+\.\d+)", output)
    assert match, output[-3000:]
    return float(match.group(1))


# A single process is covered by the np=1 jobs of tests/differential and tests/mpi.
@pytest.mark.parametrize("np_", [2, 4])
def test_keras_digits_reaches_95_percent(np_):
    output = run_workers("examples/keras_digits.py", np_, args=["--min-accuracy", "0.95"],
                         timeout=300)
    assert final_accuracy(output) >= 0.95


def test_custom_loop_reaches_95_percent():
    # 3 ranks: the shards give 15, 14 and 14 batches, so two ranks join early every epoch.
    output = run_workers("examples/tf2_custom_loop.py", 3, args=["--min-accuracy", "0.95"],
                         timeout=300)
    assert final_accuracy(output) >= 0.95


def test_synthetic_benchmark_reports_throughput():
    output = run_workers("examples/synthetic_benchmark.py", 2,
                         args=["--model", "mlp", "--num-warmup-batches", "2",
                               "--num-batches-per-iter", "2", "--num-iters", "3"],
                         timeout=300)
    match = re.search(r"Total samples/sec on 2 rank\(s\): (\d+\.\d+) \+-(\d+\.\d+)", output)
    assert match, output[-3000:]
    assert float(match.group(1)) > 0


def test_keras_resume_trains_and_leaves_its_checkpoints(tmp_path):
    output = run_workers("examples/keras_resume.py", 2,
                         args=["--checkpoint-dir", str(tmp_path), "--epochs", "3",
                               "--min-accuracy", "0.8"], timeout=300)
    assert final_accuracy(output) >= 0.8
    # TensorFlow's error line about use_unbounded_threadpool (docs/troubleshooting.md).
    assert "use_unbounded_threadpool" not in output, output[-3000:]
    names = sorted(p.name for p in tmp_path.iterdir())
    # 22 batches per epoch on 2 ranks, saved every 10 and at the end (66): the newest 3 kept.
    assert names == ["ckpt-0000000050.h5", "ckpt-0000000060.h5", "ckpt-0000000066.h5"], names


def test_keras_process_sets_trains_two_models_side_by_side():
    output = run_workers("examples/keras_process_sets.py", 4,
                         args=["--epochs", "10", "--min-accuracy", "0.9"], timeout=300)
    found = dict(re.findall(r"set (\d) \(\w+, ranks \[[\d, ]+\]\) final validation "
                            r"accuracy (\d+\.\d+)", output))
    assert set(found) == {"0", "1"}, output[-3000:]
    assert all(float(accuracy) >= 0.9 for accuracy in found.values()), found


def test_keras_elastic_trains_once_without_elastic_launch():
    # Without `tfdistrun --elastic`, run() calls the training function once (and says
    # why recovery is off); the example must still train to accuracy.
    output = run_workers("examples/keras_elastic.py", 2,
                         args=["--epochs", "3", "--min-accuracy", "0.85"], timeout=300)
    assert "elastic recovery is off" in output
    assert final_accuracy(output) >= 0.85
