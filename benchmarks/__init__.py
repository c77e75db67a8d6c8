"""tfdist's benchmarks; not part of the installed package.

Run each under mpirun, from the repository root as
``mpirun -np 2 python -m benchmarks.allreduce`` or from anywhere as
``mpirun -np 2 tfdist-bench allreduce`` (tfdist_bench.py); ``python -m benchmarks``
lists them. They measure the installed tfdist (``pip install .``, or
./scripts/setup.sh), not the source tree's copy. Every benchmark writes its
results through benchmarks/_results.py; those of the docs are in docs/results/.
"""
from __future__ import annotations

import importlib.machinery
import os
import sys
from pathlib import Path


def _prefer_installed_tfdist() -> None:
    # `python -m benchmarks.X` puts the source tree first on sys.path, where
    # tfdist is the source without its compiled library (pip builds that into
    # the installed copy). Measure the installed tfdist, as the tests do; the
    # tree stays on the path, last, for a tree without an installed tfdist.
    root = str(Path(__file__).resolve().parent.parent)
    tree = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) == root]
    rest = [entry for entry in sys.path if entry not in tree]
    if (tree and "tfdist" not in sys.modules
            and importlib.machinery.PathFinder.find_spec("tfdist", rest) is not None):
        sys.path[:] = rest + tree


_prefer_installed_tfdist()

