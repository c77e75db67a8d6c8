"""Time to accuracy against the link, per compressor: benchmarks.compression once per link.

    python -m benchmarks.compression_links --json docs/results/compression-links-np4.json --plot

Starts one job per link (mpirun, like benchmarks.costmodel; run it without
mpirun, from the repository root): shared memory, and 4 virtual hosts (one
per rank, TFDIST_VIRTUAL_HOSTS = --np) joined by emulated links of 25, 10
and 1 Gb/s (TFDIST_EMULATED_BANDWIDTH, with TFDIST_EMULATED_LATENCY =
--latency). Each job is ``python -m benchmarks.compression`` on the digits
CNN with none, bf16, top-k 1%, PowerSGD rank 2 (both with error feedback)
and ``Compression.auto()``, written to ``<json stem>-<link>.json`` beside
the --json file. This document collects them: the time to the target
accuracy per link and compressor, each compressor's ratio to bf16 and
auto's to the best fixed choice on that link (issue 25's goals: auto at
most 0.6x bf16 at 1 Gb/s, within 3% of the best fixed choice on shared
memory and at 10 Gb/s), what auto sent each group as, and with --plot the
time to accuracy against the link (benchmarks.compression's figure).

``--links``, ``--np``, ``--epochs``, ``--models`` and ``--only`` make a tiny
run: ``--links shm,1 --epochs 1 --only none,auto`` proves the command works.
"""
from __future__ import annotations

import argparse
import json
import os
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


def run_link(link: str, args: argparse.Namespace, path: Path) -> Dict[str, Any]:
    """One link's job; returns the results document it wrote to ``path``."""
    command = [_find_mpirun(), "-np", str(args.np), "--oversubscribe", "--bind-to", "none",
               args.python, "-m", "benchmarks.compression", "--datasets", "digits",
               "--models", args.models, "--only", args.only, "--error-feedback", "on",
               "--seed", str(args.seed), "--json", str(path)]
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


def _times(document: Dict[str, Any]) -> Dict[str, Dict[str, Optional[float]]]:
    """Per model: compression label -> time to target (None: never reached)."""
    found: Dict[str, Dict[str, Optional[float]]] = {}
    for r in document["results"]:
        found.setdefault(r["model"], {})[r["compression"]] = r["time_to_target_s"]
    return found


def goals(runs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per link and model: auto's time to target over bf16's and over the best fixed
    choice's (None where a run never reached the target)."""
    rows = []
    for run in runs:
        for model, times in _times(run["document"]).items():
            fixed = {c: t for c, t in times.items() if c in FIXED and t is not None}
            best = min(fixed.items(), key=lambda item: item[1]) if fixed else (None, None)
            auto = times.get("auto")
            rows.append({
                "link": run["link"], "model": model, "auto_s": auto,
                "auto_over_bf16": (auto / times["bf16"] if auto and times.get("bf16")
                                   else None),
                "best_fixed": best[0],
                "auto_over_best_fixed": auto / best[1] if auto and best[1] else None,
                "auto_choices": next((r.get("auto_choices") for r in run["document"]["results"]
                                      if r["model"] == model and r["compression"] == "auto"),
                                     None),
            })
    return rows


def _ratio(value: Optional[float]) -> str:
    return "" if value is None else f"{value:.2f}"


def summary(document: Dict[str, Any]) -> str:
    """Time to target per link and compressor, and auto against bf16 and the best fixed."""
    runs = document["runs"]
    labels = list(dict.fromkeys(r["compression"] for run in runs
                                for r in run["document"]["results"]))
    lines = [f"np = {document['np']}, digits {document['models']}, emulated latency "
             f"{document['latency_s'] * 1e6:g} µs; time to "
             f"{runs[0]['document']['results'][0]['target']:g} validation accuracy (s)", "",
             "| link | model | " + " | ".join(labels) + " | auto / bf16 | best fixed "
             "| auto / best | auto sent |",
             "|---|---|" + "---|" * len(labels) + "---|---|---|---|"]
    by_key = {(g["link"], g["model"]): g for g in document["goals"]}
    for run in runs:
        for model, times in _times(run["document"]).items():
            g = by_key[(run["link"], model)]
            cells = ["never" if times.get(c) is None else f"{times[c]:.2f}" for c in labels]
            sent = ", ".join(sorted(set((g["auto_choices"] or {}).values())))
            lines.append(f"| {_label(run['link'])} | {model} | " + " | ".join(cells)
                         + f" | {_ratio(g['auto_over_bf16'])} | {g['best_fixed'] or ''} "
                         f"| {_ratio(g['auto_over_best_fixed'])} | {sent} |")
    lines += ["", "Goals (issue 25): auto / bf16 <= 0.6 at 1 Gb/s; auto / best fixed <= 1.03 "
              "on shared memory and at 10 Gb/s. Each link's own results page: "
              + ", ".join(f"[{_label(r['link'])}]({Path(r['file']).with_suffix('.md').name})"
                          for r in runs) + "."]
    return "\n".join(lines)


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """Time to accuracy against the link (benchmarks.compression's figure of the runs)."""
    compression.plot(plt, [run["document"] for d in documents for run in d["runs"]], path)


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
    parser.add_argument("--seed", type=int, default=0)
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
        path = base.with_name(f"{base.stem}-{link if link == 'shm' else link + 'gbit'}.json")
        runs.append({"link": link, "file": str(path), "document": run_link(link, args, path)})
    document = {"np": args.np, "models": args.models, "latency_s": args.latency,
                "links": links, "runs": runs, "goals": goals(runs)}
    _results.publish(args, "compression_links", document, argv, args.np)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
