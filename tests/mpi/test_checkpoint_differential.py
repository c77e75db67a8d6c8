"""Generated checkpoint cases against an independent reference, and the three defects they found.

tests/workers/checkpoint_differential_worker.py draws cases from a seeded
generator (the same draws on every rank): Sequential, functional and
subclassed models, built and unbuilt, mixed precision, weights created in
either order, a random ``keep``, random damage to the newest files, and
saves at lower steps after a fallback. Every restored value is compared bit
for bit with numpy copies taken at save time. One process runs them at
np=1 (with one scenario per fixed defect first); a few more run at np=2
under mpirun. The writer's kill -9 trials with a random ``keep`` and the rules
that pair saved arrays with variables, which need no TensorFlow, are in
tests/unit/test_checkpoint_keep_and_matching.py.

TFDIST_TEST_SEED fixes the seed; the tests print the one they drew.
"""
import os
import random
import re

import pytest

from mpi_harness import run_workers

SEED = int(os.environ.get("TFDIST_TEST_SEED", random.randrange(1 << 30)))
WORKER = "checkpoint_differential_worker.py"
CASES_NP1 = 10
CASES_NP2 = 2


@pytest.fixture(scope="module")
def np1_output(tmp_path_factory):
    """One process: the defect scenarios, then CASES_NP1 generated cases. A failing
    scenario or case fails the job, but the output still says which."""
    directory = tmp_path_factory.mktemp("differential")
    try:
        output = run_workers(WORKER, 1, [str(directory), str(SEED), str(CASES_NP1), "defects"],
                             timeout=240)
    except AssertionError as error:
        output = f"JOB FAILED\n{error}"
    print(f"seed {SEED}")
    return output


def scenario(output, name):
    match = re.search(rf"scenario {name}: (ok|FAILED)", output)
    assert match is not None, output[-6000:]
    assert match.group(1) == "ok", output[output.index(f"scenario {name}"):][:6000]


def test_a_sequential_without_input_trains_and_resumes_under_backup_and_restore(np1_output):
    scenario(np1_output, "unbuilt_sequential_fit")


def test_a_save_of_a_lower_step_than_a_damaged_newest_file_survives_pruning(np1_output):
    scenario(np1_output, "lower_step_saves_survive_pruning")


def test_restore_matches_weights_by_path_not_by_creation_order(np1_output):
    scenario(np1_output, "restore_matches_by_path")


def test_generated_cases_restore_bit_for_bit_np1(np1_output):
    assert f"cases run: {CASES_NP1}" in np1_output, f"seed {SEED}:\n{np1_output[-8000:]}"
    print(np1_output[np1_output.index("cases run"):].splitlines()[0])


def test_generated_cases_restore_bit_for_bit_np2(tmp_path):
    output = run_workers(WORKER, 2, [str(tmp_path), str(SEED + 1), str(CASES_NP2)], timeout=240)
    assert f"cases run: {CASES_NP2}" in output, f"seed {SEED + 1}:\n{output[-8000:]}"
    print(output[output.index("cases run"):].splitlines()[0])
