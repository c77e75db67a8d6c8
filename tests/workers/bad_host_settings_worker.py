"""init() with a bad virtual-host or emulated-link setting must fail on every rank, naming it.

A value ending in "@rank1" is given to rank 1 only (the others run without
the variable), to check that the settings agreement names the setting.
argv[1]: text the error must contain.
"""
import os
import sys

from mpi4py import MPI

from mpi_harness import worker_main


def main():
    expected = sys.argv[1]
    rank = MPI.COMM_WORLD.rank
    for key, value in list(os.environ.items()):
        if key.startswith("TFDIST_") and value.endswith("@rank1"):
            if rank == 1:
                os.environ[key] = value[:-len("@rank1")]
            else:
                del os.environ[key]
    import tfdist
    try:
        tfdist.init()
    except (tfdist.InitError, tfdist.ConfigError) as error:
        assert expected in str(error), f"rank {rank}: {error}"
    else:
        raise AssertionError(f"rank {rank}: init() succeeded; expected an error naming {expected}")
    print(f"rank {rank}: init failed as expected", flush=True)


if __name__ == "__main__":
    worker_main(main)
