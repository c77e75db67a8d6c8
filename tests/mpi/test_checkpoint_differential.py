"""Generated checkpoint cases against an independent reference, and the three defects they found.

tests/workers/checkpoint_differential_worker.py draws cases from a seeded
generator (the same draws on every rank): Sequential, functional and
subclassed models, built and unbuilt, mixed precision, weights created in
either order, a random ``keep``, random damage to the newest files, and
saves at lower steps after a fallback. Every restored value is compared bit
for bit with numpy copies taken at save time. One process runs them at
np=1 (with one scenario per fixed defect first); a few more run at np=2
under mpirun. The writer's kill -9 trials with a random ``keep`` reuse
tests/workers/checkpoint_writer_child.py (no TensorFlow), and the rules that
pair saved arrays with variables are checked on their own (matching.py,
loaded without TensorFlow).

TFDIST_TEST_SEED fixes the seed; the tests print the one they drew.
"""
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from mpi_harness import WORKERS, run_workers
from test_checkpoint_files import FILE_FORMAT, same
from workers.checkpoint_writer_child import expected_contents

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


CHILD = str(WORKERS / "checkpoint_writer_child.py")


@pytest.mark.parametrize("trial", range(4))
def test_a_writer_killed_at_a_random_moment_with_a_random_keep(tmp_path, trial):
    rng = random.Random(SEED * 7 + trial)
    keep = rng.randint(1, 3)
    mode = rng.choice(["blocking", "background"])
    child = subprocess.Popen([sys.executable, CHILD, str(tmp_path), mode, str(keep)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.5))
    finally:
        child.send_signal(signal.SIGKILL)
        output, _ = child.communicate(timeout=30)
    durable = [int(line.split()[1]) for line in output.splitlines() if line.startswith("durable")]
    context = f"seed {SEED}, trial {trial}, {mode}, keep {keep}, durable {durable[-3:]}"
    steps = [step for step, _ in FILE_FORMAT.checkpoint_files(str(tmp_path))]
    # A kill between the rename and the pruning leaves one file more than keep.
    assert len(steps) <= keep + 1, (context, steps)
    path, contents, failures = FILE_FORMAT.newest_valid(str(tmp_path))
    assert failures == [], context
    if durable:
        assert contents.step >= durable[-1], context
    if path is not None:
        assert same(contents, expected_contents(FILE_FORMAT, contents.step)), context


def load_matching():
    """tfdist/checkpoint/matching.py, loaded without TensorFlow (as FILE_FORMAT is)."""
    import importlib.util
    from pathlib import Path
    path = Path(FILE_FORMAT.__file__).with_name("matching.py")
    spec = importlib.util.spec_from_file_location("tfdist_checkpoint_matching", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MATCHING = load_matching()


@pytest.mark.parametrize("saved, current, order", [
    # The same unique paths in another order: by path.
    (["m/l/beta", "m/l/alpha"], ["m/l/alpha", "m/l/beta"], [1, 0]),
    # Another process's numbering: by path without it.
    (["m/two/beta", "m/two/alpha", "m/dense/kernel", "m/dense_1/kernel"],
     ["m_1/two_1/alpha", "m_1/two_1/beta", "m_1/dense_2/kernel", "m_1/dense_3/kernel"],
     [1, 0, 2, 3]),
    # Scopes that differ above a unique last component.
    (["lso/adam/x_alpha_momentum", "lso/adam/x_beta_momentum"],
     ["adam_1/x_1_beta_momentum", "adam_1/x_1_alpha_momentum"], [1, 0]),
    # Unnamed (TensorFlow's default names, older files): by position.
    (["Variable:0", None, ""], ["Variable_1:0", "Variable_2:0", "v:0"], [0, 1, 2]),
    # Keras' numbering shifted by an earlier model: non-unique names go by position,
    # never dense_1 to dense_1.
    (["f/dense/kernel", "f/dense_1/kernel"], ["f/dense_1/kernel", "f/dense_2/kernel"], [0, 1]),
])
def test_arrays_pair_with_variables_by_path_then_by_position(saved, current, order):
    assert MATCHING.match(saved, current) == (order, "")


def test_names_that_disagree_by_position_are_refused_naming_both():
    order, why = MATCHING.match(["a/alpha", "a/beta"], ["b/gamma", "b/beta"])
    assert order == [] and "'a/alpha'" in why and "'b/gamma'" in why, why
