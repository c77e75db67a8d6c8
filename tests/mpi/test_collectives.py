"""Every collective, dtype, op and algorithm under mpirun, checked against numpy.

One job per run (np = 1 to 4, and 4 ranks on two emulated hosts, with and without
shared memory within each host) runs every check
tests/workers/collectives_worker.py registers; test_collectives_check makes one test
of each check of each run, and test_collectives_match_numpy checks each job as a whole.
"""
import functools

import pytest

from mpi_harness import assert_check_passed, check_names, run_job, run_workers, shared_job

WORKER = "collectives_worker.py"
# Two virtual hosts of two ranks, joined by emulated 10 Gb/s links.
EMULATED_HOSTS = {"TFDIST_VIRTUAL_HOSTS": "2", "TFDIST_EMULATED_BANDWIDTH": "1.25e9",
                  "TFDIST_EMULATED_LATENCY": "20e-6"}
# name: (np, env). Across hosts, "hierarchical_shm" runs on each host's shared segment;
# with TFDIST_SHARED_MEMORY=0 there is none, and forcing it must fail naming why.
RUNS = {"np1": (1, {}), "np2": (2, {}), "np3": (3, {}), "np4": (4, {}),
        "np4-emulated-hosts": (4, EMULATED_HOSTS),
        "np4-emulated-hosts-messages": (4, {**EMULATED_HOSTS, "TFDIST_SHARED_MEMORY": "0"})}


@pytest.fixture(scope="module")
def collectives_job():
    """Each run's job, run once however many tests read it."""
    @functools.lru_cache(maxsize=None)
    def job(run):
        np_, env = RUNS[run]
        if not env:
            return shared_job(WORKER, np_)
        return run_job(WORKER, np_, timeout=400, env=env)
    return job


@pytest.mark.parametrize("check", check_names(WORKER))
@pytest.mark.parametrize("run", list(RUNS))
def test_collectives_check(run, check, collectives_job):
    assert_check_passed(collectives_job(run), check)


@pytest.mark.parametrize("run", list(RUNS))
def test_collectives_match_numpy(run, collectives_job):
    output = collectives_job(run).assert_ended()
    assert output.count("collectives OK") == RUNS[run][0], output[-3000:]


# setting=value (given to rank 1 only with "@rank1"), and what the error must name.
BAD_HOST_SETTINGS = [
    ("TFDIST_VIRTUAL_HOSTS=2", "TFDIST_VIRTUAL_HOSTS=2 does not divide the 3 ranks"),
    ("TFDIST_EMULATED_BANDWIDTH=1e9@rank1", "ranks disagree on TFDIST_EMULATED_BANDWIDTH"),
    ("TFDIST_VIRTUAL_HOSTS=3@rank1", "ranks disagree on TFDIST_VIRTUAL_HOSTS"),
]


def test_bad_host_settings_fail_init_naming_them():
    """Every rank's init() raises, naming the setting, one case after another in one job
    (a failed init() leaves nothing behind); nothing hangs."""
    output = run_workers("bad_host_settings_worker.py", 3, timeout=240,
                         args=[f"{setting}|{named}" for setting, named in BAD_HOST_SETTINGS])
    for _, named in BAD_HOST_SETTINGS:
        assert output.count(f"init failed as expected: {named}\n") == 3, (named, output[-3000:])
