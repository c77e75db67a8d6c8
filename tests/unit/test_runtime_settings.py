"""Runtime settings that init() refuses before any rank talks, and their defaults;
no MPI (the jobs: tests/mpi/test_collectives.py, tests/mpi/test_runtime_stall.py)."""
import pytest


@pytest.mark.parametrize("env, named", [
    ({"TFDIST_EMULATED_BANDWIDTH": "0"}, "TFDIST_EMULATED_BANDWIDTH=0.0 must be a positive"),
    ({"TFDIST_EMULATED_BANDWIDTH": "-5"}, "TFDIST_EMULATED_BANDWIDTH=-5.0 must be a positive"),
    ({"TFDIST_EMULATED_BANDWIDTH": "1e9", "TFDIST_EMULATED_LATENCY": "-1e-6"},
     "TFDIST_EMULATED_LATENCY=-1e-06 must be a non-negative"),
    ({"TFDIST_EMULATED_LATENCY": "1e-5"}, "TFDIST_EMULATED_BANDWIDTH is not"),
    ({"TFDIST_VIRTUAL_HOSTS": "0"}, "TFDIST_VIRTUAL_HOSTS=0 must be a positive"),
])
def test_bad_host_settings_are_refused_before_mpi(env, named):
    """Values no job could use fail in init()'s settings step, before any rank talks."""
    from tfdist.config import ConfigError, RuntimeSettings
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(".", r"\.")):
        RuntimeSettings.from_environment(env)


def test_host_settings_reach_the_runtime_string():
    from tfdist.config import RuntimeSettings
    text = RuntimeSettings.from_environment({
        "TFDIST_VIRTUAL_HOSTS": "4", "TFDIST_EMULATED_BANDWIDTH": "1.25e8",
        "TFDIST_EMULATED_LATENCY": "5e-5", "TFDIST_INTER_HOST_LATENCY": "1e-5",
        "TFDIST_INTER_HOST_SECONDS_PER_BYTE": "8e-9"}).to_runtime_string()
    for item in ("virtual_hosts=4", "emulated_bandwidth=125000000.0", "emulated_latency=5e-05",
                 "inter_host_latency_seconds=1e-05", "inter_host_seconds_per_byte=8e-09"):
        assert item in text.split(";"), text
    assert "virtual_hosts" not in RuntimeSettings.from_environment({}).to_runtime_string()


def test_a_stalled_job_aborts_by_default_and_0_waits_forever():
    from tfdist.config import RuntimeSettings
    assert RuntimeSettings.from_environment({}).stall_shutdown_time == 600
    assert RuntimeSettings.from_environment(
        {"TFDIST_STALL_SHUTDOWN_TIME": "0"}).stall_shutdown_time == 0
