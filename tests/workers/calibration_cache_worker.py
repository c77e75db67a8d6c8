"""Starts tfdist and prints, from rank 0, the intra-host link cost it runs on.

tests/mpi/test_calibration_cache.py runs it against a calibration cache it has
doctored, and reads the line this prints. ``--home RANK=PATH`` gives that
rank its own HOME (where the default cache directory lies) before tfdist is
imported, so that a test can make the cache unwritable on one rank only.
"""
import argparse
import json
import os
from pathlib import Path

from mpi4py import MPI

from mpi_harness import worker_main


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", action="append", default=[], metavar="RANK=PATH")
    args = parser.parse_args()
    homes = dict(item.split("=", 1) for item in args.home)
    home = homes.get(str(MPI.COMM_WORLD.Get_rank()))
    if home is not None:
        # Matplotlib and Keras (imported by TensorFlow) keep their caches
        # where they were: built afresh under a new HOME they cost a minute.
        os.environ.setdefault("MPLCONFIGDIR", str(Path.home() / ".config" / "matplotlib"))
        os.environ.setdefault("KERAS_HOME", str(Path.home() / ".keras"))
        os.environ["HOME"] = home
    import tfdist  # after HOME: the default cache directory is read from it

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
