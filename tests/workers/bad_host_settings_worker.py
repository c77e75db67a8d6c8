"""init() with a bad virtual-host or emulated-link setting must fail on every rank, naming it.

argv[1:] are cases, each "SETTING=VALUE|expected text", tried one after another in this
one job: a failed init() leaves nothing behind, so the next init() starts afresh. A value
ending in "@rank1" is given to rank 1 only (the others run without the variable), to check
that the settings agreement names the setting.
"""
import os
import sys

from mpi4py import MPI

from mpi_harness import worker_main


def try_case(case: str, rank: int) -> None:
    setting, expected = case.split("|", 1)
    key, value = setting.split("=", 1)
    if value.endswith("@rank1"):
        value = value[:-len("@rank1")] if rank == 1 else None
    if value is not None:
        os.environ[key] = value
    import tfdist
    try:
        tfdist.init()
    except (tfdist.InitError, tfdist.ConfigError) as error:
        assert expected in str(error), f"rank {rank}: {error}"
    else:
        raise AssertionError(f"rank {rank}: init() succeeded; expected an error naming {expected}")
    finally:
        os.environ.pop(key, None)
    print(f"rank {rank}: init failed as expected: {expected}", flush=True)


def main():
    rank = MPI.COMM_WORLD.rank
    for case in sys.argv[1:]:
        try_case(case, rank)


if __name__ == "__main__":
    worker_main(main)
