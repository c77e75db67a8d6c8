#!/usr/bin/env python3
"""Writes docs/reference/settings.md from tfdist/settings_table.py.

    python scripts/settings_reference.py            # rewrite the page
    python scripts/settings_reference.py --check    # exit 1 if the page is stale

Loads the table by its path, so neither TensorFlow nor the native library is
imported (``python -m tfdist.settings_table --markdown`` does the same through
the package, which imports TensorFlow first).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "settings.md"


def load_table():
    """tfdist/settings_table.py as a module, without importing the tfdist package."""
    spec = importlib.util.spec_from_file_location(
        "_tfdist_settings_table", ROOT / "tfdist" / "settings_table.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def main(argv: list) -> int:
    text = load_table().markdown()
    if argv == ["--check"]:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python scripts/settings_reference.py",
                  file=sys.stderr)
            return 1
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
