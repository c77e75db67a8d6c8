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


def round_order(methods: Sequence[str], round_index: int) -> List[str]:
    """The methods in round ``round_index``'s order: a Williams design, in which every
    method directly follows every other equally often over a cycle of rounds (n
    rounds for n methods, 2n when n is odd).

    A block can leave part of its cost to the next one, and not the same part for
    every method: at np 2, 16 MiB, a block of ``tfdist.allreduce`` calls right after
    a block of mpi4py's ``MPI_Allreduce`` ran 1-23% slower than the same block after
    another allreduce. A rotation of one list puts each method after the same one or
    two others in every round, so one method would pay another's leftover in every
    round; here they share it alike.
    """
    n = len(methods)
    if n == 0:
        return []
    # The first row is 0, 1, n-1, 2, n-2, ...; row r adds r to each (mod n). The
    # differences between neighbours then cover every nonzero residue once, so
    # every ordered pair is adjacent once in n rows; n odd also needs the rows
    # backwards.
    first = [0] + [(k + 1) // 2 if k % 2 else n - k // 2 for k in range(1, n)]
    row = round_index % (n if n % 2 == 0 else 2 * n)
    order = [methods[(i + row) % n] for i in first]
    if row >= n:
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


def warm_auto_past_its_trials(comm, calls: Callable[[int], Any]) -> None:
    """Makes auto's calls (``calls(n)`` makes n of them) until a block of eight ran one
    algorithm only. Its trials go round its candidates, and a rematch round the two
    closest, two calls a visit, so a block of eight that ran one algorithm means the
    size's choice is made, whatever TFDIST_AUTO_TRIALS says. Rank 0's count decides
    for every rank, so that all make the same calls."""
    import tfdist
    while True:
        before = tfdist.stats()["algorithm_calls"]
        calls(8)
        if comm.bcast(len(algorithms_run(before)) == 1):
            return
