"""What a user reads when a job fails, without starting one: tfdistrun's line about the
rank that ended the job, and what a rank that exits tells the others (the jobs themselves:
tests/mpi/test_peer_failure.py, tests/e2e/test_launcher.py)."""
import pytest

import tfdistrun as launcher


@pytest.mark.parametrize("code, words", [
    (137, "exit 137: a rank was killed by SIGKILL (signal 9)"),
    (139, "exit 139: a rank was killed by SIGSEGV (signal 11)"),
    (200, "exit 200: a rank was killed by signal 72 (signal 72)"),
    (3, "exit 3: a rank exited with code 3"),
])
def test_mpirun_s_exit_code_in_words(code, words):
    assert launcher.describe_exit(code) == words


def test_a_failure_is_said_once_per_run_and_the_last_says_no_restarts_are_left(
        monkeypatch, capsys):
    codes = iter([137, 3])
    monkeypatch.setattr(launcher, "run", lambda argv, env, timeout, preemption=None: next(codes))
    assert launcher.run_with_restarts(["mpirun"], {}, None, restarts=1) == 3
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "tfdistrun: the job failed (exit 137: a rank was killed by SIGKILL (signal 9)); "
        "restart 1 of 1",
        "tfdistrun: the job failed (exit 3: a rank exited with code 3; mpirun's message above "
        "names it); no restarts left of 1"]


def test_success_timeout_and_ctrl_c_add_no_failure_line(monkeypatch, capsys):
    for code in (0, launcher.TIMEOUT_EXIT_CODE, launcher.INTERRUPTED_EXIT_CODE):
        monkeypatch.setattr(launcher, "run", lambda argv, env, timeout, preemption=None: code)
        assert launcher.run_with_restarts(["mpirun"], {}, None, restarts=0) == code
    assert "the job failed" not in capsys.readouterr().err


def test_an_exiting_rank_tells_the_others_its_uncaught_exception_or_a_plain_exit():
    from tfdist.runtime import _exit_reason
    assert _exit_reason(ValueError("bad batch\nsecond line")) == (
        "is exiting after an uncaught ValueError: bad batch")
    assert len(_exit_reason(RuntimeError("x" * 500))) < 250
    plain = _exit_reason(None)
    assert plain.startswith("is exiting without calling tfdist.shutdown()"), plain
    assert "sys.exit()" in plain
