"""Checkpoint/restart end to end, under tfdistrun and mpirun with timeouts.

- kill -9 of a random rank at a random batch under ``tfdistrun --restarts``,
  in Keras fit with BackupAndRestore (mid-epoch) and in a custom loop, at
  np=2 and np=3: each job ends within 30 s of the kill, restarts, and the
  final weights and optimizer state equal, bit for bit, those of an
  uninterrupted run (tests/workers/resume_worker.py);
- a checkpoint saved on 3 ranks restored on 2, and the reverse, with a
  damaged newest file and a mismatching model on the way;
- restore's pipelined transfer (rank 0 reads, verifies and broadcasts at
  once; every rank assigns only after the verdict), at np=1, 2 and 3: every
  value of several dtypes and sizes checked bit for bit against numpy on
  every rank, read past the page cache and through it, a mismatch (on every
  rank or one) that changes nothing, a damaged file's fallback, every file
  damaged, and a save after a restore
  (tests/workers/checkpoint_restore_worker.py);
- SIGTERM to tfdistrun mid-epoch: every rank saves the same batch, the job
  exits with PREEMPTED_EXIT_CODE, is not restarted, and a relaunch finishes
  bit-identical.

Determinism needs a fixed reduction order across runs: the jobs pin the
allreduce algorithm and turn fusion off (docs/fault_tolerance.md).
"""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from mpi_harness import ROOT, WORKERS, mpi_environment, run_workers
import tfdistrun as launcher

SEED = int(os.environ.get("TFDIST_TEST_SEED", random.randrange(1 << 30)))
DETERMINISTIC = {"TFDIST_ALLREDUCE_ALGORITHM": "tree", "TFDIST_FUSION_THRESHOLD": "0"}
RESUME = str(WORKERS / "resume_worker.py")


class Job:
    """tfdistrun in the background; each output line is kept with the time it arrived."""

    def __init__(self, args, env):
        self.lines = []
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", "tfdistrun", *args], env=mpi_environment(env),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=str(ROOT))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait(self, timeout):
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            # Two SIGTERMs: tfdistrun then stops mpirun and every rank at once.
            self.process.send_signal(signal.SIGTERM)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
            raise AssertionError(f"tfdistrun ran past {timeout} s:\n{self.output()[-6000:]}")
        self.reader.join(timeout=10)
        return code

    def output(self):
        return "\n".join(line for _, line in self.lines
                         if "oneDNN" not in line and "absl::InitializeLog" not in line)

    def first(self, text, after=0.0):
        return next((t for t, line in self.lines if text in line and t >= after), None)


def assert_bit_identical(out, phase, np_):
    for rank in range(np_):
        resumed = np.load(os.path.join(out, f"{phase}.resumed.{rank}.npz"))
        reference = np.load(os.path.join(out, f"{phase}.reference.{rank}.npz"))
        assert sorted(resumed.files) == sorted(reference.files)
        for key in reference.files:
            assert resumed[key].dtype == reference[key].dtype, (phase, rank, key)
            assert np.array_equal(resumed[key], reference[key]), (
                f"{phase}, rank {rank}, {key}: resumed weights differ from the uninterrupted "
                f"run's (seed {SEED})")
        # The run trained: the weights are not the initial ones, and Adam/SGD moved.
        assert int(resumed["optimizer/0"]) > 0, (phase, rank)


def kill_plan(np_, phases, rng):
    """One SIGKILL per attempt: which phase, which rank, after how many batches of the attempt."""
    return [{"phase": phase, "rank": rng.randrange(np_), "after": rng.randint(2, 9)}
            for phase in phases]


def run_kill_trials(tmp_path, np_, phases):
    rng = random.Random(SEED * 10 + np_)
    plan = kill_plan(np_, phases, rng)
    env = dict(DETERMINISTIC, RESUME_PLAN=json.dumps(plan))
    job = Job(["-np", str(np_), "--restarts", str(len(plan)), "--timeout", "420",
               sys.executable, RESUME, str(tmp_path / "ckpt"), str(tmp_path / "out"),
               "fit,loop"], env)
    code = job.wait(timeout=480)
    output = job.output()
    context = f"seed {SEED}, np {np_}, plan {plan}:\n{output[-6000:]}"
    assert code == 0, context
    kills = [t for t, line in job.lines if line.startswith("KILL rank")]
    assert len(kills) == len(plan), context
    for attempt, killed_at in enumerate(kills):
        # mpirun ends the whole job when one rank dies; tfdistrun reports it.
        ended = job.first("tfdistrun: the job failed", after=killed_at)
        assert ended is not None and ended - killed_at < 30, context
        assert f"restart {attempt + 1} of {len(plan)}" in output, context
        for rank in range(np_):
            assert f"rank {rank}: attempt {attempt + 1} starts" in output, context
    assert_bit_identical(tmp_path / "out", "fit", np_)
    assert_bit_identical(tmp_path / "out", "loop", np_)


def test_kill_a_random_rank_np2_fit_and_custom_loop_resume_bit_identical(tmp_path):
    # A few trials of each fault here; many belong in a soak (benchmarks/elastic_soak.py
    # kills at random moments at length).
    run_kill_trials(tmp_path, 2, ["fit", "loop"])


def test_kill_a_random_rank_np3_fit_and_custom_loop_resume_bit_identical(tmp_path):
    run_kill_trials(tmp_path, 3, ["fit", "loop", "loop"])


def test_a_checkpoint_moves_between_3_and_2_ranks(tmp_path):
    directory, out = str(tmp_path / "ckpt"), str(tmp_path)
    worker = "checkpoint_resize_worker.py"
    run_workers(worker, 3, ["save", directory, out], timeout=240)
    output = run_workers(worker, 2, ["restore", directory, out], timeout=240)
    assert output.count("restored step 7 and checked") == 2, output[-4000:]
    output = run_workers(worker, 3, ["restore", directory, out], timeout=240)
    assert output.count("restored step 9 and checked") == 3, output[-4000:]


def test_restore_broadcasts_every_value_exactly_np2(tmp_path):
    output = run_workers("checkpoint_restore_worker.py", 2, [str(tmp_path / "ckpt")],
                         timeout=180)
    assert output.count("restores checked") == 2, output[-4000:]


def test_restore_on_one_rank_reads_and_assigns_every_value_exactly(tmp_path):
    output = run_workers("checkpoint_restore_worker.py", 1, [str(tmp_path / "ckpt")],
                         timeout=180)
    assert output.count("restores checked") == 1, output[-4000:]


def test_restore_broadcasts_every_value_exactly_np3(tmp_path):
    output = run_workers("checkpoint_restore_worker.py", 3, [str(tmp_path / "ckpt")],
                         timeout=180)
    assert output.count("restores checked") == 3, output[-4000:]


def checkpoint_steps(directory):
    return sorted(int(name[5:15]) for name in os.listdir(directory)
                  if name.startswith("ckpt-") and name.endswith(".h5"))


def test_sigterm_preempts_every_rank_at_the_same_batch_and_a_relaunch_is_bit_identical(tmp_path):
    assert launcher.PREEMPTED_EXIT_CODE == 75  # tfdist.checkpoint.PREEMPTED_EXIT_CODE
    fit_dir = tmp_path / "ckpt" / "fit"
    args = ["-np", "2", "--restarts", "2", "--timeout", "300", sys.executable, RESUME,
            str(tmp_path / "ckpt"), str(tmp_path / "out"), "fit"]
    # Slow batches, so that the SIGTERM lands mid-training.
    job = Job(args, dict(DETERMINISTIC, RESUME_SLOW="0.15"))
    deadline = time.monotonic() + 240
    while not (fit_dir.exists() and checkpoint_steps(fit_dir)):
        assert job.process.poll() is None, job.output()[-6000:]
        assert time.monotonic() < deadline, job.output()[-6000:]
        time.sleep(0.05)
    job.process.send_signal(signal.SIGTERM)
    code = job.wait(timeout=200)
    output = job.output()
    assert code == launcher.PREEMPTED_EXIT_CODE, output[-6000:]
    assert "restart 1" not in output and "attempt 1 starts" not in output, output[-6000:]
    assert "preempted; saved batch" in output, output[-6000:]
    # BackupAndRestore said that the job watches: the grace period, and how to skip it.
    assert ("tfdistrun: SIGTERM: asking every rank to save a checkpoint and stop; ranks still "
            "running in 120 s (--preempt-grace) are killed. Send SIGTERM again or press "
            "Ctrl-C to stop them now") in output, output[-6000:]
    steps = checkpoint_steps(fit_dir)
    import h5py
    with h5py.File(fit_dir / f"ckpt-{steps[-1]:010d}.h5", "r") as handle:
        extra = json.loads(handle.attrs["manifest"])["extra"]
    assert extra["reason"] == "preemption", (steps, extra)
    # After the last periodic checkpoint (every 5 batches), before the end (24).
    assert 5 <= steps[-1] < 24 and steps[-1] == extra["global_batch"], (steps, extra)
    assert not (tmp_path / "out").exists()  # the preempted job did not finish

    relaunch = Job(args, DETERMINISTIC)
    code = relaunch.wait(timeout=240)
    assert code == 0, relaunch.output()[-6000:]
    assert f"resumed from {fit_dir}/ckpt-{steps[-1]:010d}.h5" in relaunch.output()
    assert_bit_identical(tmp_path / "out", "fit", 2)
