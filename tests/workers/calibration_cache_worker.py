"""Starts tfdist and prints, from rank 0, the intra-host link cost it runs on.

tests/test_calibration_cache.py runs it against a calibration cache it has
doctored, and reads the line this prints.
"""
import json

import tfdist
from mpi_harness import worker_main


def main() -> None:
    tfdist.init()
    cost = tfdist.link_cost()
    # Every rank must run on the same figures (they all choose by them).
    gathered = tfdist.allgather_object(cost)
    assert all(other == cost for other in gathered), gathered
    if tfdist.rank() == 0:
        print("LINK_COST " + json.dumps(cost), flush=True)
    tfdist.shutdown()


if __name__ == "__main__":
    worker_main(main)
