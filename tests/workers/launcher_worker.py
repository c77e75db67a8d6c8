"""Started by tfdistrun (tests/e2e/test_launcher.py): the job's settings reached every rank."""
import os

import numpy as np

from mpi_harness import worker_main


def body() -> None:
    import tfdist
    from tfdist.config import RuntimeSettings
    tfdist.init()
    rank, size = tfdist.rank(), tfdist.size()
    # Set by tfdistrun: huge pages on, the user's own tunable kept.
    tunables = os.environ.get("GLIBC_TUNABLES", "").split(":")
    assert "glibc.malloc.hugetlb=1" in tunables, tunables
    assert "glibc.malloc.check=0" in tunables, tunables
    # Horovod's --fusion-threshold-mb 2, as the TFDIST_* setting init() reads.
    assert RuntimeSettings.from_environment().fusion_threshold == 2 << 20
    data = np.arange(10, dtype=np.float32) * (rank + 1)
    result = tfdist.allreduce(data, op=tfdist.Sum, name="launched").numpy()
    expected = np.arange(10, dtype=np.float32) * sum(r + 1 for r in range(size))
    np.testing.assert_allclose(result, expected)
    print(f"rank {rank} of {size}: launched and checked", flush=True)


if __name__ == "__main__":
    worker_main(body)
