"""Interleaved rounds: how the benchmarks that time several ways of doing one thing in
the same job take turns, so that load that comes and goes hits every way alike.

Each round visits the methods in another order (the same on every rank), each visit
is a block of calls that the ranks start together, and a block's time is the slowest
rank's: a collective is as slow as its slowest rank.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Dict, List, Sequence


def round_order(methods: Sequence[str], round_index: int,
                reverse_odd: bool = True) -> List[str]:
    """The methods rotated by ``round_index``; with ``reverse_odd``, odd rounds backwards
    too, so that no method always follows the same one."""
    shift = round_index % len(methods)
    order = list(methods[shift:]) + list(methods[:shift])
    if reverse_odd and round_index % 2:
        order.reverse()
    return order


def slowest_seconds_per_call(comm, call: Callable[[], Any], calls: int) -> float:
    """The slowest rank's seconds per call over ``calls`` calls of ``call``, started
    together (a barrier first)."""
    from mpi4py import MPI
    comm.Barrier()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    return comm.allreduce((time.perf_counter() - start) / calls, op=MPI.MAX)


def algorithms_run(before: Dict[str, int]) -> Dict[str, int]:
    """Calls per allreduce algorithm since ``before`` (an earlier
    ``tfdist.stats()["algorithm_calls"]``); only those that ran."""
    import tfdist
    after = tfdist.stats()["algorithm_calls"]
    return {name: value - before.get(name, 0) for name, value in after.items()
            if value > before.get(name, 0)}


def paired_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    """The median over rounds of one method's block time over another's in the same round.

    A ratio of two medians compares blocks from different moments; on a machine whose
    speed changes between modes for seconds at a time, each median can land in either
    mode. Two blocks of one round ran within a second of each other, so their ratio
    cancels a mode that lasts longer than a round.
    """
    if len(numerator) != len(denominator) or not numerator:
        raise ValueError(f"paired_ratio needs two equal, non-empty lists of rounds, got "
                         f"{len(numerator)} and {len(denominator)}")
    return statistics.median(a / b for a, b in zip(numerator, denominator))
