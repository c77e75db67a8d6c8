"""tfdistrun's options given a wrong value: the error names the option and what it
accepts (the library's arguments: tests/mpi/test_argument_errors.py)."""
import pytest

import tfdistrun as launcher


@pytest.mark.parametrize("options, needle", [
    (["-np", "0"], "-np must be at least 1, got 0"),
    (["-np", "two"], "argument -np/--num-proc: invalid int value: 'two'"),
    (["-np", "2", "--timeout", "0"], "--timeout must be a positive number of seconds, got 0"),
    (["-np", "2", "--preempt-grace", "-1"], "--preempt-grace must not be negative, got -1"),
    (["-np", "2", "--restarts", "-2"], "--restarts must not be negative, got -2"),
    (["-np", "2", "--fusion-threshold-mb", "-1"], "--fusion-threshold-mb must not be negative"),
    (["-np", "2", "--cycle-time-ms", "0"], "--cycle-time-ms must be positive, got 0"),
    (["-np", "2"], "no command to run"),
])
def test_a_wrong_tfdistrun_option_is_named(options, needle, capsys):
    with pytest.raises(SystemExit) as exit_:
        launcher.main([*options, "--dry-run"] + (["python", "t.py"] if len(options) > 2
                                                 or options[1] == "0" else []))
    assert exit_.value.code == 2
    assert needle in capsys.readouterr().err
