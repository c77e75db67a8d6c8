"""``tfdist-bench NAME [options]``: runs ``benchmarks/NAME.py`` of tfdist's source tree from
any directory, e.g. ``mpirun -np 2 tfdist-bench allreduce --json out.json``.

The benchmarks are not part of the installed package (they need the source tree's C++ for
their engine timers, and the examples' data loaders), so this looks for the tree, in order:

1. ``$TFDIST_SOURCE``, the repository root (the folder that holds ``benchmarks/``);
2. the folder of this file, when it runs from the tree itself (or an editable install);
3. the folder ``pip install`` recorded it was installed from (PEP 610's direct_url.json);
4. the current directory and its parents.

Without a tree it says so and what to set. Results go where ``--json`` says, relative to
the current directory; the benchmark measures the installed tfdist.
"""
from __future__ import annotations

import importlib
import json
import os
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Iterator, List, Optional

SOURCE_VARIABLE = "TFDIST_SOURCE"


def is_source_tree(folder: Path) -> bool:
    """Whether ``folder`` is tfdist's repository root (it holds the benchmarks package)."""
    return (folder / "benchmarks" / "__main__.py").is_file()


def recorded_source(direct_url: Optional[str]) -> Optional[Path]:
    """The local folder a PEP 610 ``direct_url.json`` text names, if it names one."""
    if not direct_url:
        return None
    try:
        url = json.loads(direct_url).get("url", "")
    except (ValueError, AttributeError):
        return None
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parsed.path))


def _installed_direct_url() -> Optional[str]:
    import importlib.metadata
    try:
        return importlib.metadata.distribution("tfdist").read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None


def _candidates() -> Iterator[Path]:
    if os.environ.get(SOURCE_VARIABLE):
        yield Path(os.environ[SOURCE_VARIABLE])
        return  # an explicit choice is not second-guessed
    yield Path(__file__).resolve().parent
    recorded = recorded_source(_installed_direct_url())
    if recorded is not None:
        yield recorded
    here = Path.cwd().resolve()
    yield from (here, *here.parents)


def find_source_tree() -> Path:
    """The repository root to run benchmarks from; SystemExit naming what to do without one."""
    for folder in _candidates():
        if is_source_tree(folder):
            return folder.resolve()
    if os.environ.get(SOURCE_VARIABLE):
        raise SystemExit(f"tfdist-bench: {SOURCE_VARIABLE}={os.environ[SOURCE_VARIABLE]} is not "
                         f"tfdist's source tree (it has no benchmarks/__main__.py); set it to "
                         f"the repository root, the folder that holds benchmarks/")
    raise SystemExit(f"tfdist-bench: cannot find tfdist's source tree: the benchmarks are not "
                     f"installed with tfdist. Set {SOURCE_VARIABLE} to the repository root (the "
                     f"folder that holds benchmarks/), or run `python -m benchmarks.NAME` "
                     f"from that folder.")


def main(argv: Optional[List[str]] = None) -> int:
    """Runs ``benchmarks.NAME`` with the remaining arguments; lists the benchmarks without."""
    argv = list(sys.argv[1:] if argv is None else argv)
    root = find_source_tree()
    # Last on the path: an installed tfdist still wins over the tree's uncompiled copy,
    # as benchmarks/__init__.py arranges for `python -m benchmarks.NAME`.
    if str(root) not in sys.path:
        sys.path.append(str(root))
    from benchmarks.__main__ import benchmarks, main as listing
    if not argv or argv[0] not in benchmarks():
        return listing(argv)
    return importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
