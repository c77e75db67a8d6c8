"""The checkpoint writer killed at random moments with a random ``keep``
(tests/workers/checkpoint_writer_child.py, no TensorFlow), and the rules that pair saved
arrays with variables (matching.py, loaded without TensorFlow). The generated cases under
mpirun that found the defects these guard: tests/mpi/test_checkpoint_differential.py.

TFDIST_TEST_SEED fixes the seed."""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from mpi_harness import WORKERS
from test_checkpoint_files import FILE_FORMAT, same
from workers.checkpoint_writer_child import expected_contents

SEED = int(os.environ.get("TFDIST_TEST_SEED", random.randrange(1 << 30)))
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
