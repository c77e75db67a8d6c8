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
    (["-np", "2", "--min-np", "1"], "--min-np needs --elastic"),
    (["-np", "3", "--elastic", "--min-np", "4"], "--min-np must be between 1 and -np (3), got 4"),
    (["-np", "3", "--elastic", "--max-np", "2"], "--max-np must be at least -np (3), got 2"),
])
def test_a_wrong_tfdistrun_option_is_named(options, needle, capsys):
    with pytest.raises(SystemExit) as exit_:
        launcher.main([*options, "--dry-run"] + (["python", "t.py"] if len(options) > 2
                                                 or options[1] == "0" else []))
    assert exit_.value.code == 2
    assert needle in capsys.readouterr().err


def test_elastic_adds_ulfm_and_the_settings(monkeypatch):
    seen = {}
    monkeypatch.setattr(launcher, "build_command",
                        lambda np, command, **kwargs: (seen.update(kwargs), (["mpirun"], {}))[1])
    assert launcher.main(["-np", "3", "--elastic", "--min-np", "2", "--dry-run",
                          "python", "t.py"]) == 0
    assert seen["mpi_args"][:2] == ["--with-ft", "ulfm"]
    settings = seen["settings"]
    assert settings["TFDIST_ELASTIC"] == "1"
    assert settings["TFDIST_MIN_NP"] == "2"
    assert settings["TFDIST_MAX_NP"] == "3"  # defaults to -np
    assert "TFDIST_HOST_DISCOVERY_SCRIPT" not in settings


def test_without_elastic_no_fault_tolerance(monkeypatch):
    seen = {}
    monkeypatch.setattr(launcher, "build_command",
                        lambda np, command, **kwargs: (seen.update(kwargs), (["mpirun"], {}))[1])
    assert launcher.main(["-np", "2", "--dry-run", "python", "t.py"]) == 0
    assert "--with-ft" not in seen["mpi_args"]
    assert "TFDIST_ELASTIC" not in seen["settings"]


def test_spares_need_elastic_and_become_the_setting(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        launcher.main(["-np", "2", "--spares", "1", "--dry-run", "python", "t.py"])
    assert "--spares needs --elastic" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        launcher.main(["-np", "2", "--elastic", "--spares", "-1", "--dry-run", "python", "t.py"])
    assert "--spares must not be negative, got -1" in capsys.readouterr().err
    seen = {}
    monkeypatch.setattr(launcher, "run_with_restarts",
                        lambda argv, env, *rest: seen.update(env=env) or 0)
    assert launcher.main(["-np", "2", "--elastic", "--spares", "2", "python", "t.py"]) == 0
    assert seen["env"]["TFDIST_ELASTIC_SPARES"] == "2"
