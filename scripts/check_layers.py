#!/usr/bin/env python3
"""Fails when a C++ file under cc/ includes a layer above its own.

The layers, lowest first; a file may include its own folder and the folders
before it. <mpi.h> only in cc/mpi/, TensorFlow (and absl) only in cc/tf/.
cc/testing/ and cc/tests/ are built without MPI and TensorFlow, so they may
include neither. docs/design.md draws the same order.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = [
    "core/base", "core/numeric", "core/compression", "core/transport", "core/collectives",
    "core/control", "core/tuning", "core/runtime", "mpi", "testing", "tests", "tf",
]
WITHOUT_MPI = {"testing", "tests"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


def layer_of(path: str) -> str | None:
    """The layer of a path relative to cc/, or None outside every layer."""
    for layer in sorted(LAYERS, key=len, reverse=True):
        if path == layer or path.startswith(layer + "/"):
            return layer
    return None


def problems(cc: Path) -> list[str]:
    """One line per forbidden include under `cc`."""
    found = []
    for source in sorted(cc.rglob("*")):
        if source.suffix not in (".h", ".cc") or "build" in source.relative_to(cc).parts[:1]:
            continue
        name = source.relative_to(cc).as_posix()
        own = layer_of(name)
        if own is None:
            found.append(f"cc/{name}: not in any layer folder ({', '.join(LAYERS)})")
            continue
        for bracket, included in INCLUDE.findall(source.read_text()):
            if bracket == "<" and included == "mpi.h" and own != "mpi":
                found.append(f"cc/{name}: includes <mpi.h>; only cc/mpi/ may")
            elif included.startswith(("tensorflow/", "absl/")) and own != "tf":
                found.append(f"cc/{name}: includes {included}; only cc/tf/ may")
            elif bracket == '"' and included.startswith("cc/"):
                target = layer_of(included[len("cc/"):])
                if target is None:
                    found.append(f"cc/{name}: includes {included}, which is in no layer")
                elif LAYERS.index(target) > LAYERS.index(own):
                    found.append(f"cc/{name}: includes {included}: {target}/ is above {own}/")
                elif own in WITHOUT_MPI and target == "mpi":
                    found.append(f"cc/{name}: includes {included}; {own}/ is built without MPI")
    return found


def main() -> int:
    found = problems(ROOT / "cc")
    for line in found:
        print(line, file=sys.stderr)
    if found:
        print(f"check_layers: {len(found)} include(s) break the layer order "
              "(scripts/check_layers.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
