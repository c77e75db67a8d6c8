"""tfdistrun: a job it starts, restarts, preempts and stops."""
import signal
import subprocess
import sys
import time

import pytest

from mpi_harness import ROOT, mpi_environment, run_command
import tfdistrun as launcher


def launch(*args, timeout):
    command = [sys.executable, "-m", "tfdistrun", *args]
    return run_command(command, {"GLIBC_TUNABLES": "glibc.malloc.check=0"}, timeout=timeout)


@pytest.mark.parametrize("np_", [2, 3])
def test_a_launched_job_gets_its_settings_on_every_rank(np_):
    result = launch("-np", str(np_), "--timeout", "180", "--fusion-threshold-mb", "2",
                    sys.executable, "tests/workers/launcher_worker.py", timeout=240)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    for rank in range(np_):
        assert f"rank {rank} of {np_}: launched and checked" in output, output[-6000:]


def test_a_hanging_job_is_stopped_at_its_timeout():
    start = time.monotonic()
    result = launch("-np", "2", "--timeout", "3", sys.executable, "-c",
                    "import time; time.sleep(120)", timeout=90)
    assert result.returncode == launcher.TIMEOUT_EXIT_CODE, result.stdout + result.stderr
    assert "ran past --timeout 3 s" in result.stderr
    assert time.monotonic() - start < 60


def test_a_failed_job_is_restarted_with_its_restart_number(tmp_path):
    # Fails on its first two runs, succeeds on the third; each run records TFDIST_RESTART.
    script = ("import os, sys; n = os.environ['TFDIST_RESTART']; "
              f"open(os.path.join({str(tmp_path)!r}, 'run' + n + '.' + "
              "os.environ['OMPI_COMM_WORLD_RANK']), 'w').close(); "
              "sys.exit(3 if int(n) < 2 and os.environ['OMPI_COMM_WORLD_RANK'] == '1' else 0)")
    result = launch("-np", "2", "--restarts", "3", "--timeout", "120", sys.executable, "-c",
                    script, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"run{n}.{r}" for n in range(3) for r in range(2)]
    assert "restart 2 of 3" in result.stderr and "restart 3" not in result.stderr


def test_restarts_give_up_with_the_job_s_exit_code():
    result = launch("-np", "2", "--restarts", "1", "--timeout", "120", sys.executable, "-c",
                    "import sys; sys.exit(5)", timeout=180)
    assert result.returncode != 0, result.stdout + result.stderr
    assert result.stderr.count("restart 1 of 1") == 1
    # The last failure says what ended the job and that no restart is left.
    assert ("tfdistrun: the job failed (exit 5: a rank exited with code 5; mpirun's message "
            "above names it); no restarts left of 1") in result.stderr, result.stderr


def test_sigterm_creates_the_preemption_file_and_is_not_restarted(tmp_path):
    # The ranks wait for the flag file, as tfdist.checkpoint.preempted() sees it, and
    # exit with the preemption code; tfdistrun returns it and does not restart.
    # They say that they watch, as tfdist.preemption.watch() does.
    marker = tmp_path / "ranks-running"
    script = ("import os, sys, time; flag = os.environ['TFDIST_PREEMPT_FILE']; "
              f"open(flag + {launcher.WATCHED_SUFFIX!r}, 'a').close(); "
              f"open({str(marker)!r} + os.environ['OMPI_COMM_WORLD_RANK'], 'w').close(); "
              "[time.sleep(0.05) for _ in iter(lambda: os.path.exists(flag), True)]; "
              f"sys.exit({launcher.PREEMPTED_EXIT_CODE})")
    job = subprocess.Popen([sys.executable, "-m", "tfdistrun", "-np", "2", "--restarts", "2",
                            "--timeout", "120", sys.executable, "-c", script],
                           env=mpi_environment(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=str(ROOT))
    deadline = time.monotonic() + 90
    while not all((tmp_path / f"ranks-running{r}").exists() for r in range(2)):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=90)
    assert job.returncode == launcher.PREEMPTED_EXIT_CODE, out + err
    assert "asking every rank to save" in err and "restart" not in err, err


def _sigint_as_at_a_terminal():
    # A test run started in the background by a non-interactive shell (`./.ci/run &`)
    # ignores SIGINT, and a child inherits that: Python then never turns SIGINT into
    # KeyboardInterrupt, and the Ctrl-C these tests send would do nothing. The
    # launcher gets the disposition it has when a user starts it at a terminal.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_sleeping_job(tmp_path, *options, watch=True):
    """tfdistrun with 2 ranks that sleep, once both are running; with ``watch``,
    they say they watch for preemption (as BackupAndRestore does) and never do."""
    marker = tmp_path / "running"
    script = ("import os, time; flag = os.environ['TFDIST_PREEMPT_FILE']; "
              + (f"open(flag + {launcher.WATCHED_SUFFIX!r}, 'a').close(); " if watch else "")
              + f"open({str(marker)!r} + os.environ['OMPI_COMM_WORLD_RANK'], 'w').close(); "
              "time.sleep(120)")
    job = subprocess.Popen([sys.executable, "-m", "tfdistrun", "-np", "2", *options,
                            "--timeout", "150", sys.executable, "-c", script],
                           env=mpi_environment(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
                           preexec_fn=_sigint_as_at_a_terminal)
    deadline = time.monotonic() + 90
    while not all((tmp_path / f"running{r}").exists() for r in range(2)):
        assert job.poll() is None and time.monotonic() < deadline, job.communicate()
        time.sleep(0.05)
    return job


def test_ranks_that_ignore_the_preemption_are_killed_after_the_grace_period(tmp_path):
    job = start_sleeping_job(tmp_path, "--preempt-grace", "2")
    start = time.monotonic()
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=90)
    assert job.returncode == launcher.PREEMPTION_KILLED_EXIT_CODE, out + err
    assert "killed in" not in err
    assert "still running in 2 s (--preempt-grace) are killed" in err, err
    assert "Send SIGTERM again or press Ctrl-C to stop them now" in err, err
    assert "did not stop after the preemption request" in err, err
    assert 2 <= time.monotonic() - start < 30


@pytest.mark.parametrize("second, code", [
    (signal.SIGTERM, launcher.PREEMPTION_KILLED_EXIT_CODE),
    (signal.SIGINT, launcher.INTERRUPTED_EXIT_CODE),  # Ctrl-C, as the grace message says
], ids=["SIGTERM", "SIGINT"])
def test_a_second_signal_ends_the_grace_period_at_once(tmp_path, second, code):
    job = start_sleeping_job(tmp_path, "--preempt-grace", "100")
    start = time.monotonic()
    job.send_signal(signal.SIGTERM)
    time.sleep(1)
    job.send_signal(second)
    out, err = job.communicate(timeout=90)
    assert job.returncode == code, out + err
    assert "still running in 100 s (--preempt-grace) are killed" in err, err
    assert time.monotonic() - start < 30, err


def test_sigterm_to_a_job_that_cannot_save_is_passed_on_at_once(tmp_path):
    # `timeout 120 tfdistrun ...` around a script without checkpoints: nothing would
    # be saved, so no grace period (120 s by default) is waited.
    job = start_sleeping_job(tmp_path, watch=False)
    start = time.monotonic()
    job.send_signal(signal.SIGTERM)
    out, err = job.communicate(timeout=90)
    assert job.returncode == launcher.PREEMPTION_KILLED_EXIT_CODE, out + err
    assert "no rank watches for preemption" in err and "stopping every rank now" in err, err
    assert time.monotonic() - start < 30, err
