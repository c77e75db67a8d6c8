"""``python -m benchmarks NAME [options]`` runs ``python -m benchmarks.NAME [options]``.

Without a known NAME it lists the benchmarks: every public module of this
package, with the first line of its docstring (read without importing it, so
listing costs no TensorFlow start-up, and a new benchmark needs no entry here).
"""
from __future__ import annotations

import ast
import importlib
import pkgutil
import sys
from pathlib import Path
from typing import Dict, List

PACKAGE_DIR = Path(__file__).resolve().parent


def benchmarks() -> Dict[str, str]:
    """Benchmark name -> the first line of its module docstring."""
    found = {}
    for module in pkgutil.iter_modules([str(PACKAGE_DIR)]):
        if module.name.startswith("_") or module.ispkg:
            continue
        tree = ast.parse((PACKAGE_DIR / f"{module.name}.py").read_text())
        found[module.name] = (ast.get_docstring(tree) or "").split("\n", 1)[0]
    return dict(sorted(found.items()))


def main(argv: List[str]) -> int:
    available = benchmarks()
    if not argv or argv[0] not in available:
        print("usage: tfdist-bench NAME [options]   (from any directory; or, from the repository\n"
              "       root, python -m benchmarks.NAME [options]), under mpirun; NAME is one of:",
              file=sys.stderr)
        for name, summary in available.items():
            print(f"  {name:<12} {summary}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"benchmarks.{argv[0]}")
    return module.main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
