"""init() on a job whose environment sets variables tfdist does not read: a misspelt
TFDIST_* name and Horovod's name for a setting. Rank 0 warns once for each, naming the
variable to set; the job runs as if they were not there. The warnings' wording and the
generated misspellings: tests/unit/test_runtime_settings.py."""
import sys

from mpi_harness import find_mpirun, run_command

SCRIPT = """
import tfdist
tfdist.init()
import numpy as np
total = tfdist.allreduce(np.ones(3, np.float32) * (tfdist.rank() + 1), op=tfdist.Sum,
                         name="x").numpy()
assert total.tolist() == [3.0, 3.0, 3.0], total
print("rank", tfdist.rank(), "summed", flush=True)
tfdist.shutdown()
"""


def test_rank_0_warns_once_about_each_variable_it_does_not_read(tmp_path):
    env = {"TFDIST_FUSION_TRESHOLD": "0", "HOROVOD_CYCLE_TIME": "5",
           "HOROVOD_FUSION_THRESHOLD": "1024", "TFDIST_FUSION_THRESHOLD": "2048",
           "HOROVOD_GPU_OPERATIONS": "NCCL"}  # no tfdist setting: nothing to say
    result = run_command([find_mpirun(), "-np", "2", "--oversubscribe", "--bind-to", "none",
                          sys.executable, "-c", SCRIPT], env, timeout=180,
                         cwd=tmp_path)  # not the tree: `-c` imports from the current directory
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "rank 0" in result.stdout and "rank 1" in result.stdout, output[-6000:]
    expected = [
        "TFDIST_FUSION_TRESHOLD is not a tfdist setting and changes nothing; did you mean "
        "TFDIST_FUSION_THRESHOLD?",
        "HOROVOD_CYCLE_TIME=5 is Horovod's variable, which tfdist does not read: set "
        "TFDIST_CYCLE_TIME instead",
        "HOROVOD_FUSION_THRESHOLD=1024 is Horovod's variable, which tfdist does not read: "
        "TFDIST_FUSION_THRESHOLD=2048 applies",
    ]
    for message in expected:
        assert output.count(message) == 1, (message, output[-6000:])
    assert "HOROVOD_GPU_OPERATIONS" not in output, output[-6000:]
