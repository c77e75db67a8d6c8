"""Soak of the runtime at np = 3: thousands of random collectives from several
threads, a different order on every rank, each checked against numpy, with
bounded memory growth (tests/workers/runtime_soak.py)."""
import re

import pytest

from mpi_harness import run_workers


# The response cache has 8 slots for the soak's ~40 names: constant eviction, with
# tensors waiting on evicted slots re-announced in full, on a job size that is not a
# power of two (the algorithms' folds). A cache that never evicts is what every other
# job runs with. The run does well over the 1,000 collectives checked below in 20 s;
# longer soaks and other sizes are for by hand (the worker's usage line).
@pytest.mark.parametrize("np_,seconds,cache", [(3, 20, 8)])
def test_soak(np_, seconds, cache):
    output = run_workers("runtime_soak.py", np_, args=[str(seconds)], timeout=seconds + 150,
                         env={"TFDIST_CACHE_CAPACITY": str(cache)})
    counts = set()
    for rank in range(np_):
        match = re.search(rf"SOAK OK rank {rank} collectives=(\d+)", output)
        assert match, output[-4000:]
        counts.add(int(match.group(1)))
    assert len(counts) == 1 and counts.pop() >= 1000
