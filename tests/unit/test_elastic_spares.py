"""Warm spares' pure logic: how many a job keeps, a spare's command line, the pool's
bookkeeping (no MPI job; tests/mpi/test_elastic.py runs spares for real)."""
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from mpi_harness import mpi_environment
from tfdist.config import ConfigError, LaunchInfo
from tfdist.elastic import spares

ULFM = {"OMPI_MCA_mpi_ft_enable": "1"}


@pytest.mark.parametrize("environ, size, wanted", [
    ({"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "4", **ULFM}, 4, 0),   # default: none
    ({"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "4", "TFDIST_ELASTIC_SPARES": "1", **ULFM}, 4, 1),
    ({"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "6", "TFDIST_ELASTIC_SPARES": "2", **ULFM}, 4, 2),
    ({"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "4", "TFDIST_ELASTIC_SPARES": "0", **ULFM}, 4, 0),
    # --max-np below the size: one failure leaves enough ranks, nothing to regrow.
    ({"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "3", "TFDIST_ELASTIC_SPARES": "1", **ULFM}, 4, 0),
    ({"TFDIST_ELASTIC": "1", "TFDIST_ELASTIC_SPARES": "1", **ULFM}, 4, 0),   # no --max-np
    ({"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "4", "TFDIST_ELASTIC_SPARES": "1"}, 4, 0),  # no ULFM
    ({"TFDIST_MAX_NP": "4", "TFDIST_ELASTIC_SPARES": "1", **ULFM}, 4, 0),  # not --elastic
])
def test_how_many_spares_a_job_keeps(environ, size, wanted):
    info = LaunchInfo.from_environment(environ)
    assert info.spares_wanted(size, environ) == wanted


def test_a_negative_spare_count_is_named():
    environ = {"TFDIST_ELASTIC": "1", "TFDIST_MAX_NP": "4", "TFDIST_ELASTIC_SPARES": "-1",
               **ULFM}
    with pytest.raises(ConfigError, match="TFDIST_ELASTIC_SPARES=-1"):
        LaunchInfo.from_environment(environ).spares_wanted(4, environ)


@pytest.mark.parametrize("program", [["train.py", "--epochs", "2"],
                                     ["-m", "benchmarks.elastic", "--rank", "regrow", "/tmp/x"],
                                     ["a.py", "--", "b"]])
def test_a_spare_command_line_round_trips(program):
    argv = spares.spare_arguments("node7", 1234, program)
    # MPI before any other import but sys: rank 0's spawn returns once MPI_Init has.
    imports = [part.strip() for part in argv[1].split(";") if "import" in part]
    assert argv[0] == "-c" and imports[:2] == ["import sys", "from mpi4py import MPI"]
    assert spares.parse_spare_arguments(argv[2:]) == ("node7", 1234, program)


@pytest.mark.parametrize("argv", [[], ["--parent", "node7"], ["--parent", "node7:x", "--", "a"],
                                  ["--parent", "node7:1", "--"]])
def test_a_wrong_spare_command_line_is_named(argv):
    with pytest.raises(ValueError, match="expects --parent HOST:PID -- PROGRAM"):
        spares.parse_spare_arguments(argv)


def test_process_alive_on_this_host_only():
    host = socket.gethostname()
    assert spares.process_alive(host, os.getpid()) is True
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert spares.process_alive(host, gone.pid) is False
    assert spares.process_alive(host + "-elsewhere", os.getpid()) is None


class FakeSpare(spares.Spare):
    def __init__(self, name):
        super().__init__(inter=None, host="h", pid=0)
        self.name = name

    def free(self):
        pass


def test_the_pool_fills_up_to_wanted_in_the_background():
    made = []

    def spawn_one():
        made.append(FakeSpare(len(made)))
        return made[-1]

    pool = spares.SparePool(2, spawn_one)
    pool.refill()
    pool.wait_spawning()
    assert [s.name for s in pool.ready] == [0, 1]
    pool.refill()  # full: spawns nothing
    pool.wait_spawning()
    assert len(made) == 2


def test_a_failed_spawn_leaves_the_pool_short_and_says_why(capsys):
    def spawn_one():
        raise RuntimeError("no slots")

    pool = spares.SparePool(1, spawn_one)
    pool.refill()
    pool.wait_spawning()
    assert pool.ready == []
    assert "could not start a warm spare (RuntimeError: no slots)" in capsys.readouterr().err


def test_a_scheduled_top_up_runs_once_at_the_next_commit():
    calls = []
    spares.schedule(lambda: calls.append(1))
    spares.after_commit()
    spares.after_commit()
    assert calls == [1]


def test_a_recovery_gives_up_on_a_spawn_that_never_returns(monkeypatch, capsys):
    # Open MPI can leave MPI_Comm_spawn (or the spare's hello) blocked for good: the
    # recovery must go on (with replacements) after SPAWN_TIMEOUT_SECONDS, not hang.
    monkeypatch.setattr(spares, "SPAWN_TIMEOUT_SECONDS", 0.2)
    never = threading.Event()

    def spawn_one():
        never.wait(30)
        return FakeSpare("late")

    pool = spares.SparePool(1, spawn_one)
    pool.refill()
    started = time.monotonic()
    assert pool.claim(1) == []
    assert time.monotonic() - started < 5
    assert "a warm spare was still being started after 0 s when a recovery needed it; " \
           "going on without spares" in capsys.readouterr().err
    assert pool.claim(1) == []  # given up for good: no second wait
    pool.release()  # at exit: no wait either
    assert time.monotonic() - started < 5
    never.set()


def test_an_orphaned_spare_ends_itself(tmp_path):
    # A spare whose rank 0 is gone ends (exit code 0) wherever it is, here asleep
    # where it could be importing TensorFlow or blocked in an MPI call.
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    spare = subprocess.run(
        [sys.executable, "-c",
         f"import sys; sys.path.insert(0, {spares.PACKAGE_ROOT!r})\n"
         "import socket, threading, time\n"
         "from tfdist.elastic import spares\n"
         "threading.Thread(target=spares._end_when_orphaned,\n"
         f"                 args=(socket.gethostname(), {parent.pid}), daemon=True).start()\n"
         "time.sleep(60); sys.exit(3)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=50)
    parent.wait()
    assert spare.returncode == 0, spare.stderr
    assert f"exits: its rank 0 (pid {parent.pid}) is gone" in spare.stderr, spare.stderr


def test_a_spare_runs_the_tfdist_of_its_rank_0_not_the_one_in_its_directory(tmp_path):
    # `python -c` puts the working directory first on sys.path: a spare started in
    # a tfdist source tree without a built library (a clean clone whose tfdist
    # went to site-packages) imported that tree and died before its hello.
    decoy = tmp_path / "tfdist"
    decoy.mkdir()
    (decoy / "__init__.py").write_text("import sys\nsys.exit('the decoy tfdist was imported')\n")
    started = subprocess.run(
        [sys.executable, *spares.spare_arguments("somehost", 1, ["train.py"])],
        cwd=tmp_path, env=mpi_environment(), capture_output=True, text=True, timeout=120)
    # It got as far as the real warm_spare, which refuses to run without a rank 0.
    assert "decoy" not in started.stderr, started.stderr
    assert "not by hand" in started.stderr, started.stderr
    assert started.returncode != 0
