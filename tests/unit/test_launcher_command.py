"""tfdistrun without starting a job: the mpirun command it builds and the settings
its Horovod-style options become."""
import pytest

import tfdistrun as launcher

FAKE_MPIRUN = "/opt/mpi/bin/mpirun"


def build(np_, **kwargs):
    kwargs.setdefault("mpirun", FAKE_MPIRUN)
    kwargs.setdefault("environ", {"PATH": "/usr/bin"})
    return launcher.build_command(np_, ["python", "train.py", "--epochs", "2"], **kwargs)


def test_command_has_the_defaults(monkeypatch):
    monkeypatch.setattr(launcher, "local_cores", lambda: 2)
    argv, env = build(2)
    assert argv == [FAKE_MPIRUN, "-np", "2", "--bind-to", "none", "-x", "GLIBC_TUNABLES",
                    "-x", "PATH", "python", "train.py", "--epochs", "2"]
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.hugetlb=1"
    assert env["PATH"] == "/usr/bin"


def test_more_processes_than_cores_oversubscribe_only_on_this_machine(monkeypatch):
    monkeypatch.setattr(launcher, "local_cores", lambda: 2)
    assert "--oversubscribe" in build(3)[0]
    argv = build(3, hosts="a:2,b:2")[0]
    assert "--oversubscribe" not in argv
    assert argv[argv.index("-H") + 1] == "a:2,b:2"


def test_settings_and_environment_reach_every_rank():
    argv, env = build(2, settings={"TFDIST_CYCLE_TIME": "2"},
                      environ={"TFDIST_DEBUG": "1", "PYTHONPATH": "/src", "HOME": "/root",
                               "GLIBC_TUNABLES": "glibc.malloc.check=0"})
    exported = {argv[i + 1] for i, word in enumerate(argv) if word == "-x"}
    assert exported == {"TFDIST_CYCLE_TIME", "TFDIST_DEBUG", "PYTHONPATH", "GLIBC_TUNABLES"}
    assert "HOME" not in argv
    assert env["TFDIST_CYCLE_TIME"] == "2"
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.check=0:glibc.malloc.hugetlb=1"


def test_huge_pages_respect_the_user():
    assert launcher.with_huge_pages("glibc.malloc.hugetlb=0") == "glibc.malloc.hugetlb=0"
    _, env = build(2, huge_pages=False)
    assert "GLIBC_TUNABLES" not in env


@pytest.mark.parametrize("np_, command", [(0, ["python"]), (2, [])])
def test_bad_arguments_are_refused(np_, command):
    with pytest.raises(ValueError):
        launcher.build_command(np_, command, mpirun=FAKE_MPIRUN)


def test_horovod_options_become_settings(capsys):
    assert launcher.main(["-np", "2", "--fusion-threshold-mb", "2", "--cycle-time-ms", "0.5",
                          "--timeline-filename", "/tmp/t.json", "--autotune",
                          "--autotune-log", "/tmp/a.csv", "--dry-run",
                          "python", "train.py"]) == 0
    printed = capsys.readouterr().out
    tokens = printed.split()
    exported = {tokens[i + 1] for i, token in enumerate(tokens[:-1]) if token == "-x"}
    for name in ("TFDIST_FUSION_THRESHOLD", "TFDIST_CYCLE_TIME", "TFDIST_TIMELINE",
                 "TFDIST_AUTOTUNE", "TFDIST_AUTOTUNE_LOG"):
        assert name in exported, printed
    assert printed.rstrip().endswith("python train.py")
    # "--" may end tfdistrun's options; it is not passed on.
    assert launcher.main(["-np", "2", "--dry-run", "--", "python", "train.py"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed[-2:] == ["python", "train.py"] and "--" not in printed
