"""Entry point: ``mpirun -np 2 python -m tfdist.bench allreduce [--json out.json]``."""
from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "allreduce": "tfdist.bench.allreduce",   # the collective engine vs MPI_Allreduce
    "runtime": "tfdist.bench.runtime",       # eager latency and tf.function steps
    "training": "tfdist.bench.training",     # Keras training throughput vs the ceiling
    "join": "tfdist.bench.join",             # what a joined rank costs the others
    "huge_pages": "tfdist.bench.huge_pages", # the ring over 4 KiB pages vs huge pages
}


def main(argv: list) -> int:
    if not argv or argv[0] not in BENCHMARKS:
        print(f"usage: python -m tfdist.bench {{{','.join(BENCHMARKS)}}} [options]",
              file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[argv[0]])
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
