"""Every collective, dtype, op and algorithm under mpirun, checked against numpy."""
import pytest

from mpi_harness import run_workers


@pytest.mark.parametrize("np_", [1, 2, 3, 4])
def test_collectives_match_numpy(np_):
    output = run_workers("collectives_worker.py", np_, timeout=400)
    assert output.count("collectives OK") == np_, output[-3000:]


def test_collectives_match_numpy_on_emulated_hosts():
    """Two virtual hosts of two ranks, joined by emulated 10 Gb/s links."""
    env = {"TFDIST_VIRTUAL_HOSTS": "2", "TFDIST_EMULATED_BANDWIDTH": "1.25e9",
           "TFDIST_EMULATED_LATENCY": "20e-6"}
    output = run_workers("collectives_worker.py", 4, timeout=400, env=env)
    assert output.count("collectives OK") == 4, output[-3000:]


@pytest.mark.parametrize("env, named", [
    ({"TFDIST_VIRTUAL_HOSTS": "3"}, "TFDIST_VIRTUAL_HOSTS=3 does not divide the 4 ranks"),
    ({"TFDIST_EMULATED_BANDWIDTH": "1e9@rank1"}, "ranks disagree on TFDIST_EMULATED_BANDWIDTH"),
    ({"TFDIST_VIRTUAL_HOSTS": "2@rank1"}, "ranks disagree on TFDIST_VIRTUAL_HOSTS"),
])
def test_bad_host_settings_fail_init_naming_them(env, named):
    """Every rank's init() raises, naming the setting; nothing hangs."""
    output = run_workers("bad_host_settings_worker.py", 4, timeout=120, env=env,
                         args=[named])
    assert output.count("init failed as expected") == 4, output[-3000:]
