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


@pytest.mark.parametrize("env, passed", [
    ({}, "shared_memory=1"),
    ({"TFDIST_SHARED_MEMORY": "0"}, "shared_memory=0"),
    # Under MPI's fault tolerance a dead peer must surface as MPI's error.
    ({"OMPI_MCA_mpi_ft_enable": "1"}, "shared_memory=0"),
    ({"OMPI_MCA_mpi_ft_enable": "1", "TFDIST_SHARED_MEMORY": "1"}, "shared_memory=0"),
])
def test_shared_memory_is_on_by_default_and_off_under_fault_tolerance(env, passed):
    from tfdist.config import RuntimeSettings
    assert passed in RuntimeSettings.from_environment(env).to_runtime_string().split(";")


def test_a_stalled_job_aborts_by_default_and_0_waits_forever():
    from tfdist.config import RuntimeSettings
    assert RuntimeSettings.from_environment({}).stall_shutdown_time == 600
    assert RuntimeSettings.from_environment(
        {"TFDIST_STALL_SHUTDOWN_TIME": "0"}).stall_shutdown_time == 0


def _misspellings(name):
    """Every deletion and every swap of two neighbours after the prefix."""
    body = name[len("TFDIST_"):]
    for i in range(len(body)):
        yield "TFDIST_" + body[:i] + body[i + 1:]
    for i in range(len(body) - 1):
        if body[i] != body[i + 1]:
            yield "TFDIST_" + body[:i] + body[i + 1] + body[i] + body[i + 2:]


def test_every_setting_is_read_without_a_warning():
    from tfdist.config import environment_warnings
    from tfdist.settings_table import SETTINGS
    assert environment_warnings({s.variable: "1" for s in SETTINGS}) == []
    assert environment_warnings({}) == []


def test_a_misspelt_setting_is_named_with_the_setting_it_came_from():
    """Every deletion and neighbour swap of every setting's name (819 today): each is
    reported, with the setting it came from as the suggestion."""
    from tfdist.config import environment_warnings
    from tfdist.settings_table import SETTINGS
    known = {s.variable for s in SETTINGS}
    for setting in SETTINGS:
        for typo in set(_misspellings(setting.variable)) - known:
            assert environment_warnings({typo: "1"}) == [
                f"{typo} is not a tfdist setting and changes nothing; did you mean "
                f"{setting.variable}? (every setting: docs/reference/settings.md)"], typo


def test_an_unrelated_tfdist_variable_gets_no_suggestion():
    from tfdist.config import environment_warnings
    (message,) = environment_warnings({"TFDIST_QUANTUM_MODE": "on"})
    assert "did you mean" not in message and "TFDIST_QUANTUM_MODE" in message


def test_horovods_variables_name_tfdists():
    from tfdist.config import environment_warnings
    from tfdist.settings_table import SETTINGS
    for setting in (s for s in SETTINGS if s.horovod):
        (message,) = environment_warnings({setting.horovod: "7"})
        assert message.startswith(f"{setting.horovod}=7 is Horovod's variable"), message
        assert f"set {setting.variable} instead" in message, message
        (message,) = environment_warnings({setting.horovod: "7", setting.variable: "9"})
        assert f"{setting.variable}=9 applies" in message, message
    # Empty counts as unset; Horovod variables with no tfdist setting say nothing.
    assert environment_warnings({"HOROVOD_FUSION_THRESHOLD": "", "TFDIST_TYPO": "",
                                 "HOROVOD_GPU_OPERATIONS": "NCCL"}) == []
