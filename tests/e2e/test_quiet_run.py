"""A tfdistrun job at np = 2 (Keras fit with BackupAndRestore.dataset()) prints none of
the noise lines docs/troubleshooting.md lists as avoidable."""
import sys

from mpi_harness import run_command

NOISE = [
    "shuffle=True` was passed",                      # Keras: fit(shuffle=...) on a Dataset
    "PMIX ERROR",                                    # PMIx after a failure
    "oneDNN custom operations are on",               # TensorFlow; TF_ENABLE_ONEDNN_OPTS=0 below
    "tfdist stall",                                  # nothing waits here
]


def test_a_short_keras_job_is_quiet(tmp_path):
    # TF_ENABLE_ONEDNN_OPTS=0 is the user's remedy for TensorFlow's oneDNN lines
    # (docs/troubleshooting.md): tfdistrun must carry it to every rank.
    result = run_command(
        [sys.executable, "-m", "tfdistrun", "-np", "2", "--timeout", "240", sys.executable,
         "tests/workers/quiet_run_worker.py", str(tmp_path / "ckpt")],
        {"TF_ENABLE_ONEDNN_OPTS": "0"}, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert output.count("quiet run done rank") == 2, output[-6000:]
    noisy = [line for line in output.splitlines() if any(n in line for n in NOISE)]
    assert noisy == [], "\n".join(noisy)
