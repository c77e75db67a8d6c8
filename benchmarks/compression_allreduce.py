"""fp16/bf16 wire compression on one large allreduce: time, wire bytes and error against none.

    tfdistrun -np 2 python -m benchmarks.compression_allreduce --json docs/results/compression-allreduce-np2.json
    TFDIST_VIRTUAL_HOSTS=2 TFDIST_EMULATED_BANDWIDTH=1.25e9 \
        tfdistrun -np 2 python -m benchmarks.compression_allreduce     # across a 10 Gb/s link

Every repetition runs the three compressions back to back on the same
64 MiB float32 tensor (interleaved, so that a machine shared with other work
slows them alike) and reports the median time of each, its ratio to none's,
the median of the per-repetition ratios and the ratio of the fastest runs. The wire bytes come from ``tfdist.stats()``. The error section
compares Average with the division before the rounding to 16 bits (what
the runtime does) against a division after it (Sum, then divided in
numpy), on gradient-like values and on large ones.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results

# Environment variables that choose the link the allreduce crosses: emulated
# hosts (docs/launching.md, "Several hosts on one machine") or Open MPI's transport.
LINK_SETTINGS = ("TFDIST_VIRTUAL_HOSTS", "TFDIST_EMULATED_BANDWIDTH", "TFDIST_EMULATED_LATENCY",
                 "OMPI_MCA_btl", "OMPI_MCA_pml")


def _timings(tfdist, tensor, compressions: Dict[str, Any], repetitions: int) -> Dict[str, Any]:
    times: Dict[str, List[float]] = {name: [] for name in compressions}
    wire: Dict[str, int] = {}
    algorithms: Dict[str, List[str]] = {}
    for name, compression in compressions.items():  # warm-up: buffers, kernel caches
        tfdist.allreduce(tensor, op=tfdist.Average, name=f"warm.{name}",
                         compression=compression)
    for _ in range(repetitions):
        for name, compression in compressions.items():
            tfdist.barrier()
            before = tfdist.stats()
            start = time.perf_counter()
            tfdist.allreduce(tensor, op=tfdist.Average, name=f"timed.{name}",
                             compression=compression)
            times[name].append(time.perf_counter() - start)
            after = tfdist.stats()
            wire[name] = after["bytes_sent"] - before["bytes_sent"]
            algorithms[name] = [a for a, n in after["algorithm_calls"].items()
                                if n > before["algorithm_calls"][a]]
    base = statistics.median(times["none"])
    # Each repetition's time over none's in the same repetition: load that
    # comes and goes hits both sides of a pair alike.
    return {name: {"median_s": statistics.median(t), "min_s": min(t),
                   "ratio_to_none": statistics.median(t) / base,
                   "paired_ratio_to_none_median": statistics.median(
                       a / b for a, b in zip(t, times["none"])),
                   "min_ratio_to_none": min(t) / min(times["none"]),
                   "bytes_sent_per_rank": wire[name],
                   "wire_ratio_to_none": wire[name] / wire["none"],
                   "algorithm": algorithms[name]}
            for name, t in times.items()}


def _errors(tfdist, compressions: Dict[str, Any]) -> Dict[str, Any]:
    size, rank = tfdist.size(), tfdist.rank()
    # Gradient-like values, and values each within float16's range whose
    # sum over the ranks is not.
    cases = {"gradient_like_normal_std_1e-3": lambda rs: rs.normal(0, 1e-3, 1 << 20),
             "large_uniform_pm_6e4": lambda rs: rs.uniform(-6e4, 6e4, 1 << 20)}
    results: Dict[str, Any] = {}
    for case, draw in cases.items():
        values = [draw(np.random.RandomState(r)).astype(np.float32) for r in range(size)]
        exact = np.mean(np.array(values, dtype=np.float64), axis=0)
        for name in ("fp16", "bf16"):
            compression = compressions[name]
            before = tfdist.allreduce(values[rank], op=tfdist.Average,
                                      compression=compression).numpy().astype(np.float64)
            after = tfdist.allreduce(values[rank], op=tfdist.Sum, postscale_factor=1.0,
                                     compression=compression).numpy().astype(np.float64) / size
            scale = np.linalg.norm(exact)
            finite_before, finite_after = np.isfinite(before), np.isfinite(after)
            results[f"{case}/{name}"] = {
                "divide_before_rounding_rel_l2_finite": float(
                    np.linalg.norm((before - exact)[finite_before]) / scale),
                "divide_after_rounding_rel_l2_finite": float(
                    np.linalg.norm((after - exact)[finite_after]) / scale),
                "divide_before_nonfinite": int(np.sum(~np.isfinite(before))),
                "divide_after_nonfinite": int(np.sum(~np.isfinite(after))),
            }
    return results


def link(document: Dict[str, Any]) -> str:
    """The link the allreduce crossed, in words."""
    settings = document.get("link_settings") or {}
    if settings.get("TFDIST_EMULATED_BANDWIDTH"):
        return f"emulated {float(settings['TFDIST_EMULATED_BANDWIDTH']) * 8 / 1e9:g} Gb/s"
    if settings.get("OMPI_MCA_btl"):
        return f"Open MPI btl {settings['OMPI_MCA_btl']}"
    return "shared memory"


def summary(document: Dict[str, Any]) -> str:
    """Each compression's time and wire bytes against none's, then the rounding errors."""
    lines = [f"np = {document['ranks']}, {document['tensor_mib']} MiB float32, {link(document)}; "
             f"{document['repetitions']} interleaved repetitions", "",
             "| compression | median ms | / none | median of paired ratios | fastest / fastest "
             "| bytes sent per rank | wire / none | algorithm |",
             "|---|---|---|---|---|---|---|---|"]
    for name, t in document["timings"].items():
        lines.append(f"| {name} | {t['median_s'] * 1e3:.2f} | {t['ratio_to_none']:.3f} "
                     f"| {t['paired_ratio_to_none_median']:.3f} | {t['min_ratio_to_none']:.3f} "
                     f"| {t['bytes_sent_per_rank']} | {t['wire_ratio_to_none']:.2f} "
                     f"| {', '.join(t['algorithm'])} |")
    lines += ["", "| values / compression | relative L2 error, divided before rounding "
              "| divided after | non-finite before | non-finite after |", "|---|---|---|---|---|"]
    for name, e in document["average_error"].items():
        lines.append(f"| {name} | {e['divide_before_rounding_rel_l2_finite']:.2e} "
                     f"| {e['divide_after_rounding_rel_l2_finite']:.2e} "
                     f"| {e['divide_before_nonfinite']} | {e['divide_after_nonfinite']} |")
    return "\n".join(lines)


def plot(plt, documents: List[Dict[str, Any]], path: str) -> None:
    """The allreduce's time with each compression, one group of bars per link."""
    def bandwidth(document: Dict[str, Any]) -> float:
        value = (document.get("link_settings") or {}).get("TFDIST_EMULATED_BANDWIDTH")
        return float(value) if value else float("inf")
    documents = sorted(documents, key=bandwidth)
    names = list(dict.fromkeys(n for d in documents for n in d["timings"]))
    width = 0.8 / len(names)
    figure, axes = plt.subplots(figsize=(1.8 * len(documents) + 3, 4.5))
    for i, name in enumerate(names):
        x = [j + (i - (len(names) - 1) / 2) * width for j, d in enumerate(documents)
             if name in d["timings"]]
        axes.bar(x, [d["timings"][name]["median_s"] * 1e3 for d in documents
                     if name in d["timings"]], width, label=name)
    axes.set_xticks(range(len(documents)), [link(d) for d in documents], fontsize=8)
    axes.set_ylabel("median time per allreduce (ms)")
    axes.set_title(f"{documents[0]['tensor_mib']} MiB allreduce at np = "
                   f"{documents[0]['ranks']}: compression against the link")
    axes.legend()
    figure.savefig(path, dpi=110, bbox_inches="tight")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compression_allreduce",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=64, help="tensor size in MiB of float32")
    parser.add_argument("--repetitions", type=int, default=15)
    _results.add_arguments(parser)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)

    import tensorflow as tf
    import tfdist

    tfdist.init()
    # The link decides whether halving the bytes pays: say which one this was.
    link = {name: os.environ[name] for name in LINK_SETTINGS if name in os.environ}
    compressions = {"none": tfdist.Compression.none, "fp16": tfdist.Compression.fp16,
                    "bf16": tfdist.Compression.bf16}
    elements = args.mib * (1 << 20) // 4
    tensor = tf.constant(np.random.RandomState(tfdist.rank()).normal(0, 1e-2, elements)
                         .astype(np.float32))
    results = {
        "ranks": tfdist.size(),
        "link_settings": link,
        "tensor_mib": args.mib,
        "repetitions": args.repetitions,
        "note": "medians of interleaved repetitions",
        "load_average_at_start": os.getloadavg()[0],
        "timings": _timings(tfdist, tensor, compressions, args.repetitions),
        "average_error": _errors(tfdist, compressions),
    }
    if tfdist.rank() == 0:
        _results.publish(args, "compression_allreduce", results, argv, tfdist.size())
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
