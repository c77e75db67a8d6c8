"""tfdist's benchmarks; not part of the installed package.

Run each from the repository root under mpirun, e.g.
``mpirun -np 2 python -m benchmarks.allreduce``; ``python -m benchmarks``
lists them. Results and the commands that produced them are in docs/.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional


def write_json(path: Optional[str], results: Dict[str, Any]) -> None:
    """Writes ``results`` to ``path`` as indented JSON (nothing when ``path`` is None)."""
    if not path:
        return
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
        f.write("\n")
