"""The ring allreduce over 4 KiB pages against the same over huge pages, in one job.

    python -m tfdistrun -np 2 python -m benchmarks.huge_pages [--bytes N] --json docs/results/huge-pages-np2.json

On one host MPI moves large messages with a single copy from the sender's
memory, and pins the sender's pages one by one for every message; the
runtime therefore moves buffers it reduces in place onto huge pages once they
are reused (``HugePageCollapser``, cc/core/runtime/memory_advice.h). This
measures what that is worth: two private anonymous buffers of the same size,
one left on 4 KiB pages and one collapsed onto huge pages with MADV_COLLAPSE,
each reduced in place by the engine's ring (no TensorFlow), alternating in
blocks of ten calls so that both see the same load on the machine. Reported:
the median time per call of each, and the median over blocks of their ratio.
"""
from __future__ import annotations

import argparse
import ctypes
import mmap
import statistics
import sys
from typing import Any, Dict, List

import numpy as np

from benchmarks import _results

HUGE_PAGE = 2 << 20
MADV_COLLAPSE = 25  # Linux 6.1; not in Python's mmap module before 3.13
CALLS_PER_BLOCK = 10


def _buffer(nbytes: int, collapse: bool):
    """A float32 buffer of ``nbytes`` in a private mapping of its own; the mapping is returned
    too, to keep it alive. With ``collapse``, its pages are moved onto huge pages."""
    span = (nbytes + 2 * HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE + HUGE_PAGE
    mapping = mmap.mmap(-1, span, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    raw = np.frombuffer(mapping, np.uint8)
    start = (raw.ctypes.data + HUGE_PAGE - 1) // HUGE_PAGE * HUGE_PAGE - raw.ctypes.data
    raw[:] = 0  # present, on 4 KiB pages (THP "madvise" gives them nothing more)
    if collapse:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        regions = (nbytes + HUGE_PAGE - 1) // HUGE_PAGE
        if libc.madvise(raw.ctypes.data + start, regions * HUGE_PAGE, MADV_COLLAPSE) != 0:
            raise OSError(ctypes.get_errno(), "MADV_COLLAPSE refused: THP off or kernel < 6.1")
    count = nbytes // 4
    return mapping, np.frombuffer(mapping, np.float32, count=count, offset=start)


def measure(comm, nbytes: int, blocks: int) -> Dict:
    """Alternates the two buffers for ``blocks`` blocks; times the slower rank of each block."""
    from mpi4py import MPI
    from benchmarks._engine import engine_timer
    timed = engine_timer(comm)
    kept = []
    buffers = {}
    for name, collapse in (("4k_pages", False), ("huge_pages", True)):
        mapping, buffer = _buffer(nbytes, collapse)
        kept.append(mapping)
        # Zeros: sums stay finite however often they are reduced.
        buffers[name] = buffer
    for buffer in buffers.values():
        timed("ring", buffer, 3)  # warm up
    per_call: Dict[str, List[float]] = {name: [] for name in buffers}
    for _ in range(blocks):
        for name, buffer in buffers.items():
            seconds = timed("ring", buffer, CALLS_PER_BLOCK)
            per_call[name].append(comm.allreduce(seconds, op=MPI.MAX))
    ratios = [h / s for s, h in zip(per_call["4k_pages"], per_call["huge_pages"])]
    return {
        "bytes": nbytes,
        "ranks": comm.size,
        "blocks": blocks,
        "calls_per_block": CALLS_PER_BLOCK,
        "seconds_4k_pages": statistics.median(per_call["4k_pages"]),
        "seconds_huge_pages": statistics.median(per_call["huge_pages"]),
        "ratio_huge_to_4k": statistics.median(ratios),
        "block_ratios": ratios,
    }


def summary(document: Dict[str, Any]) -> str:
    """The two buffers' median time per call and the median ratio over blocks."""
    ratios = document["block_ratios"]
    return "\n".join([
        f"np = {document['ranks']}, {document['bytes']} bytes reduced in place by the ring, "
        f"{document['blocks']} blocks of {document['calls_per_block']} calls", "",
        "| 4 KiB pages (µs per call) | huge pages (µs per call) | huge / 4 KiB (median over "
        "blocks) | range over blocks |", "|---|---|---|---|",
        f"| {document['seconds_4k_pages'] * 1e6:.0f} | {document['seconds_huge_pages'] * 1e6:.0f} "
        f"| {document['ratio_huge_to_4k']:.3f} | {min(ratios):.3f}-{max(ratios):.3f} |"])


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.huge_pages",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=2678824,
                        help="buffer size; the default is the benchmark MLP's gradients")
    parser.add_argument("--blocks", type=int, default=60)
    _results.add_arguments(parser, plot=False)
    args = parser.parse_args(argv)
    _results.check_arguments(parser, args)
    import tfdist
    from mpi4py import MPI
    tfdist.init()
    comm = MPI.COMM_WORLD
    result = measure(comm, args.bytes, args.blocks)
    if comm.rank == 0:
        _results.publish(args, "huge_pages", result, argv, comm.size)
    tfdist.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
