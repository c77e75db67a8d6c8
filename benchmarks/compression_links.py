"""Time to accuracy against the link, per compressor: benchmarks.compression once per link.

    python -m benchmarks.compression_links --json docs/results/compression-links-np4.json --plot

Starts one job per link (mpirun, like benchmarks.costmodel; run it without
mpirun, from the repository root): shared memory, and 4 virtual hosts (one
per rank, TFDIST_VIRTUAL_HOSTS = --np) joined by emulated links of 25, 10
and 1 Gb/s (TFDIST_EMULATED_BANDWIDTH, with TFDIST_EMULATED_LATENCY =
--latency). Each job is ``python -m benchmarks.compression`` on the digits
CNN with none, bf16, top-k 1%, PowerSGD rank 2 (both with error feedback)
and ``Compression.auto()``, written to ``<json stem>-<link>[-seed<s>].json``
beside the --json file; ``--seeds N`` runs each link N times. This document
collects them: the time to the target accuracy per link and compressor (the
median over the seeds), auto's ratio to bf16 and to the best fixed choice on
that link (issue 25's goals: auto at
most 0.6x bf16 at 1 Gb/s, within 3% of the best fixed choice on shared
memory and at 10 Gb/s), what auto sent each group as, and with --plot the
time to accuracy against the link (benchmarks.compression's figure).

``--links``, ``--np``, ``--epochs``, ``--models`` and ``--only`` make a tiny
run: ``--links shm,1 --epochs 1 --only none,auto`` proves the command works.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from benchmarks import _results, compression

ROOT = Path(__file__).resolve().parent.parent
GIGABIT = 1e9 / 8  # bytes per second
#: Every link, slowest first; "shm" is shared memory (one host, no emulation).
LINKS = ("1", "10", "25", "shm")
DEFAULT_ONLY = "none,bf16,topk(0.01),powersgd(2),auto"
#: The fixed choices auto is compared with.
FIXED = ("none", "bf16", "topk(0.01)", "powersgd(2)")


def _find_mpirun() -> str:
    sys.path.insert(0, str(ROOT))
    from tfdistrun import find_mpirun
    return find_mpirun()


def link_environment(link: str, ranks: int, latency: float) -> Dict[str, str]:
    """The environment of one link's job: the TFDIST_* link settings and nothing stale."""
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "TF_CPP_MIN_LOG_LEVEL": "2"})
    for key in ("TFDIST_VIRTUAL_HOSTS", "TFDIST_EMULATED_BANDWIDTH", "TFDIST_EMULATED_LATENCY"):
        env.pop(key, None)
    if link != "shm":
        env["TFDIST_VIRTUAL_HOSTS"] = str(ranks)
        env["TFDIST_EMULATED_BANDWIDTH"] = repr(float(link) * GIGABIT)
        env["TFDIST_EMULATED_LATENCY"] = repr(latency)
    return env


def run_link(link: str, args: argparse.Namespace, path: Path, seed: int) -> Dict[str, Any]:
    """One link's job at ``seed``; returns the results document it wrote to ``path``."""
    command = [_find_mpirun(), "-np", str(args.np), "--oversubscribe", "--bind-to", "none",
               args.python, "-m", "benchmarks.compression", "--datasets", "digits",
               "--models", args.models, "--only", args.only, "--error-feedback", "on",
               "--seed", str(seed), "--json", str(path)]
    if args.epochs:
        command += ["--epochs", str(args.epochs)]
    if args.target is not None:
        command += ["--target", str(args.target)]
    started = time.perf_counter()
    completed = subprocess.run(command, env=link_environment(link, args.np, args.latency),
                               cwd=str(ROOT), capture_output=True, text=True,
                               timeout=args.timeout)
    if completed.returncode != 0 or not path.exists():
        raise RuntimeError(f"link {link}: benchmarks.compression failed (exit "
                           f"{completed.returncode}):\n"
                           f"{(completed.stdout + completed.stderr)[-4000:]}")
    print(f"link {link}: {time.perf_counter() - started:.0f} s", flush=True)
    return _results.load(str(path))


def _label(link: str) -> str:
    return "shared memory" if link == "shm" else f"{link} Gb/s"


def _times(run: Dict[str, Any]) -> Dict[str, Dict[str, Optional[float]]]:
    """Per model: compression label -> the median time to target over the run's seeds
    (None when fewer than half of them reached it)."""
    by_label: Dict[str, Dict[str, List[Optional[float]]]] = {}
    for document in run["documents"]:
        for r in document["results"]:
            by_label.setdefault(r["model"], {}).setdefault(r["compression"], []).append(
                r["time_to_target_s"])
    found: Dict[str, Dict[str, Optional[float]]] = {}
    for model, labels in by_label.items():
        for label, times in labels.items():
            reached = [t for t in times if t is not None]
            found.setdefault(model, {})[label] = (
                statistics.median(t if t is not None else math.inf for t in times)
                if 2 * len(reached) > len(times) else None)
    return found


def goals(runs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per link and model: auto's time to target over bf16's and over the best fixed
    choice's (None where a run never reached the target)."""
    rows = []
    for run in runs:
        for model, times in _times(run).items():
            fixed = {c: t for c, t in times.items() if c in FIXED and t is not None}
            best = min(fixed.items(), key=lambda item: item[1]) if fixed else (None, None)
            auto = times.get("auto")
            rows.append({
                "link": run["link"], "model": model, "auto_s": auto,
                "auto_over_bf16": (auto / times["bf16"] if auto and times.get("bf16")
                                   else None),
                "best_fixed": best[0],
                "auto_over_best_fixed": auto / best[1] if auto and best[1] else None,
                "auto_choices": next((r.get("auto_choices") for d in run["documents"]
                                      for r in d["results"]
                                      if r["model"] == model and r["compression"] == "auto"),
                                     None),
            })
    return rows


def _ratio(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.2f}"


def summary(document: Dict[str, Any]) -> str:
    """Time to target per link and compressor, and auto against bf16 and the best fixed."""
    runs = document["runs"]
    labels = list(dict.fromkeys(r["compression"] for run in runs for d in run["documents"]
                                for r in d["results"]))
    seeds = len(runs[0]["documents"])
    lines = [f"np = {document['np']}, digits {document['models']}, emulated latency "
             f"{document['latency_s'] * 1e6:g} µs; time to "
             f"{runs[0]['documents'][0]['results'][0]['target']:g} validation accuracy (s), "
             f"median of {seeds} seed{'s' if seeds > 1 else ''}", "",
             "| link | model | " + " | ".join(labels) + " | auto / bf16 | best fixed "
             "| auto / best | auto sent |",
             "|---|---|" + "---|" * len(labels) + "---|---|---|---|"]
    by_key = {(g["link"], g["model"]): g for g in document["goals"]}
    for run in runs:
        for model, times in _times(run).items():
            g = by_key[(run["link"], model)]
            cells = ["never" if times.get(c) is None else f"{times[c]:.2f}" for c in labels]
            sent = ", ".join(sorted(set((g["auto_choices"] or {}).values())))
            lines.append(f"| {_label(run['link'])} | {model} | " + " | ".join(cells)
                         + f" | {_ratio(g['auto_over_bf16'])} | {g['best_fixed'] or ''} "
                         f"| {_ratio(g['auto_over_best_fixed'])} | {sent} |")
    lines += ["", "Goals (issue 25): auto / bf16 <= 0.6 at 1 Gb/s; auto / best fixed <= 1.03 "
              "on shared memory and at 10 Gb/s. Each link's own results page: "
              + ", ".join(f"[{_label(r['link'])}]({Path(f).with_suffix('.md').name})"
                          for r in runs for f in r["files"]) + "."]
    return "\n".join(lines)


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Time to accuracy against the link (benchmarks.compression's figure), one point per
    link and compressor: the median over the seeds."""
    medians = []
    for document in documents:
        for run in document["runs"]:
            times = _times(run)
            first = run["documents"][0]
            medians.append({**first, "results": [
                {**r, "time_to_target_s": times[r["model"]][r["compression"]]}
                for r in first["results"]]})
    compression.plot(plt, medians, path)


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compression_links",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--links", default=",".join(LINKS),
                        help=f"comma-separated, of {', '.join(LINKS)} (Gb/s; shm: shared memory)")
    parser.add_argument("--np", type=int, default=4, help="ranks (and virtual hosts)")
    parser.add_argument("--latency", type=float, default=50e-6,
                        help="TFDIST_EMULATED_LATENCY of the emulated links (s)")
    parser.add_argument("--models", default="cnn", help="of " + ", ".join(compression.MODELS))
    parser.add_argument("--epochs", type=int, default=None, help="default: the digits default")
    parser.add_argument("--target", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1,
                        help="runs per link, at seeds --seed, --seed + 1, ...: the tables and "
                             "plot show the median time to target")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--timeout", type=float, default=3600, help="per link, seconds")
    parser.add_argument("--python", default=sys.executable,
                        help="the Python the ranks run (default: this one)")
    _results.add_arguments(parser)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    if not args.json:
        parser.error("--json is needed: each link's results go beside it")
    links = args.links.split(",")
    for link in links:
        if link not in LINKS:
            parser.error(f"--links: unknown link {link!r}; expected some of {LINKS}")
    base = Path(args.json)
    runs = []
    for link in sorted(links, key=LINKS.index):
        name = f"{base.stem}-{link if link == 'shm' else link + 'gbit'}"
        files, documents = [], []
        for seed in range(args.seed, args.seed + args.seeds):
            path = base.with_name(name + (f"-seed{seed}" if args.seeds > 1 else "") + ".json")
            files.append(str(path))
            documents.append(run_link(link, args, path, seed))
        runs.append({"link": link, "files": files, "documents": documents})
    document = {"np": args.np, "models": args.models, "latency_s": args.latency,
                "links": links, "runs": runs, "goals": goals(runs)}
    _results.publish(args, "compression_links", document, argv, args.np)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
