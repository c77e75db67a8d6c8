"""Process sets: subsets of the ranks that run collectives of their own (Horovod's API).

    evens = tfdist.add_process_set([0, 2])      # collective over all ranks
    if evens.included():
        total = tfdist.allreduce(x, process_set=evens)

Each set is a runtime of its own in the native library (cc/tf/runtime_handle.h):
its own communicator (made here with mpi4py), negotiation, response cache,
fusion, hosts and background thread, so collectives on different sets never
wait on each other. Ids are handed out by a counter that every rank agrees on
and are never reused; ``tfdist.shutdown()`` (and so an elastic membership
change) drops every set but the global one. docs/process_sets.md says more.

This module keeps the registry of the sets of this process and the global
set's communicator, which the native runtime handle cannot hold (they are
mpi4py objects).
"""
from __future__ import annotations

import ctypes
import json
import numbers
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from tfdist import _communicator, _library, runtime

GLOBAL_ID = 0


class ProcessSet:
    """A set of ranks (global ranks, sorted, no duplicates) that runs collectives together.

    Register it with ``tfdist.init(process_sets=[...])`` or
    ``tfdist.add_process_set``; then pass it as ``process_set=`` to any
    collective. Only its members may call its collectives.
    """

    def __init__(self, ranks: Sequence[int]) -> None:
        self.ranks: List[int] = _checked_ranks(ranks)
        #: The id the library knows the set by; None until it is registered.
        self.process_set_id: Optional[int] = None

    def size(self) -> int:
        """The number of ranks in the set."""
        return len(self.ranks)

    def rank(self) -> int:
        """This process's rank within the set (its index in ``ranks``).

        Raises ValueError on a rank that is not a member.
        """
        me = runtime.rank()
        if me not in self.ranks:
            raise ValueError(f"rank {me} is not in {self!r}, so it has no rank in it")
        return self.ranks.index(me)

    def included(self) -> bool:
        """Whether this process is a member of the set."""
        return runtime.rank() in self.ranks

    def __repr__(self) -> str:
        return f"ProcessSet(ranks={self.ranks}, process_set_id={self.process_set_id})"


class _GlobalProcessSet(ProcessSet):
    """Every rank of the job: id 0, started by ``tfdist.init()``."""

    def __init__(self) -> None:  # pylint: disable=super-init-not-called
        self.process_set_id = GLOBAL_ID

    @property  # type: ignore[override]
    def ranks(self) -> List[int]:
        return list(range(runtime.size()))

    def size(self) -> int:
        return runtime.size()

    def rank(self) -> int:
        return runtime.rank()

    def included(self) -> bool:
        runtime.rank()  # raises when not initialized
        return True

    def __repr__(self) -> str:
        return "tfdist.global_process_set"


#: The set of every rank; what every collective uses unless told otherwise.
global_process_set: ProcessSet = _GlobalProcessSet()


class _Registry:
    """The sets registered in this process, and the global set's communicator.

    The one piece of Python-side state beside the native runtime handle: the
    native library holds each set's runtime, this holds what Python made for
    it (the ProcessSet objects, the communicator new sets are made from).
    """

    def __init__(self) -> None:
        self.comm: Any = None  # a private duplicate of the communicator given to init()
        self.sets: Dict[int, ProcessSet] = {}
        self.next_id = GLOBAL_ID + 1  # never reused within the process


_registry = _Registry()


def _checked_ranks(ranks: Any) -> List[int]:
    """``ranks`` as a list of ints: a non-empty, sorted sequence of distinct ranks."""
    if isinstance(ranks, (str, bytes)) or not hasattr(ranks, "__iter__"):
        raise TypeError(f"a process set's ranks must be a list of integer ranks, got "
                        f"{ranks!r} ({type(ranks).__name__})")
    values = list(ranks)
    if not values:
        raise ValueError("a process set needs at least one rank, got []")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"a process set's ranks must be integers, got {value!r} in "
                            f"{values!r}")
    values = [int(v) for v in values]
    if any(v < 0 for v in values):
        raise ValueError(f"a process set's ranks must be non-negative, got {values}")
    if len(set(values)) != len(values):
        duplicates = sorted({v for v in values if values.count(v) > 1})
        raise ValueError(f"a process set's ranks must be distinct: {values} repeats "
                         f"{duplicates}")
    if values != sorted(values):
        raise ValueError(f"a process set's ranks must be sorted in increasing order: got "
                         f"{values}, expected {sorted(values)}")
    return values


def process_set_id(process_set: Optional[ProcessSet], what: str) -> int:
    """The id a collective ``what`` passes to its op for ``process_set`` (None: global)."""
    if process_set is None or process_set is global_process_set:
        return GLOBAL_ID
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"tfdist.{what}: process_set must be a tfdist.ProcessSet, got "
                        f"{process_set!r} ({type(process_set).__name__})")
    if process_set.process_set_id is None:
        raise ValueError(f"tfdist.{what}: {process_set!r} is not registered; pass it to "
                         "tfdist.init(process_sets=[...]) or tfdist.add_process_set() first")
    return process_set.process_set_id


def by_id(set_id: int) -> ProcessSet:
    """The registered set with id ``set_id`` (the global set for 0)."""
    if set_id == GLOBAL_ID:
        return global_process_set
    found = _registry.sets.get(set_id)
    if found is None:
        raise ValueError(f"process set {set_id} is not registered: it was removed, or tfdist "
                         "was re-initialized after a membership change")
    return found


def size_of(process_set: Optional[ProcessSet]) -> int:
    """The number of ranks of ``process_set`` (None: the global set)."""
    return runtime.size() if process_set is None else process_set.size()


def set_rank(rank: int, process_set: Optional[ProcessSet], argument: str) -> int:
    """Global ``rank`` (e.g. a broadcast's root) as a rank within ``process_set``.

    ValueError naming ``argument`` when it is not one of the set's ranks.
    """
    if process_set is None or process_set.process_set_id == GLOBAL_ID:
        return rank
    if rank not in process_set.ranks:
        raise ValueError(f"{argument}={rank} is not a rank of {process_set!r}; expected one "
                         f"of its ranks {process_set.ranks} (global ranks)")
    return process_set.ranks.index(rank)


def check_compressed_set(compressor: Any, process_set: Optional[ProcessSet], what: str) -> None:
    """ValueError when ``compressor`` cannot run on ``process_set`` (a non-global set).

    Top-k and PowerSGD keep per-tensor state and run side collectives of
    their own on the global set; only the stateless ones (none, fp16, bf16)
    take a process set.
    """
    if process_set_id(process_set, what) != GLOBAL_ID and not getattr(
            compressor, "takes_process_set", False):
        raise ValueError(f"{what}: compression={compressor.name} runs on the global process "
                         f"set only, got process_set={process_set!r}; use no compression, "
                         "fp16 or bf16 on a process set")


def _allgather_json(value: Any) -> List[Any]:
    """Every rank's ``value`` (JSON-serializable), in rank order, over the global set."""
    from mpi4py import MPI

    comm = _registry.comm
    payload = np.frombuffer(json.dumps(value).encode(), dtype=np.uint8)
    sizes = np.array(comm.allgather(int(payload.size)), dtype=np.int64)
    received = np.empty(int(sizes.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    comm.Allgatherv(payload, [received, sizes, offsets, MPI.BYTE])
    return [json.loads(received[o:o + n].tobytes()) for o, n in zip(offsets, sizes)]


def _raise_disagreement(what: str, asked: List[Any], describe) -> None:
    """Raises ValueError, the same on every rank, when the ranks' requests differ."""
    problems = [(r, a["problem"]) for r, a in enumerate(asked) if a.get("problem")]
    if problems:
        listed = "; ".join(f"rank {r}: {p}" for r, p in problems)
        raise ValueError(f"tfdist.{what} failed on every rank because of bad input: {listed}")
    requests = [describe(a) for a in asked]
    if len(set(requests)) > 1:
        listed = "; ".join(f"rank {r} asked for {d}" for r, d in enumerate(requests))
        raise ValueError(f"tfdist.{what} is collective: every rank of the global set must call "
                         f"it with the same process set, in the same order, but {listed}")


def add_process_set(process_set: Union[ProcessSet, Sequence[int]]) -> ProcessSet:
    """Registers a process set (a ProcessSet or its ranks) and returns it.

    Collective over the global set: every rank calls it with the same ranks,
    in the same order relative to other add/remove calls. Starts the set's
    runtime on its members. Errors (the same on every rank) name a rank that
    asked for something else or gave bad ranks.
    """
    _require_initialized("add_process_set")
    problem = None
    ranks: Optional[List[int]] = None
    try:
        if isinstance(process_set, ProcessSet):
            if process_set.process_set_id == GLOBAL_ID:
                raise ValueError("the global process set is always registered")
            if process_set.process_set_id in _registry.sets:
                raise ValueError(f"{process_set!r} is already registered")
            ranks = list(process_set.ranks)
        else:
            ranks = _checked_ranks(process_set)
        world = runtime.size()
        outside = [r for r in ranks if r >= world]
        if outside:
            raise ValueError(f"ranks {outside} of {ranks} are not ranks of this job: expected "
                             f"0 to {world - 1} (size {world})")
    except (TypeError, ValueError) as error:
        problem = str(error)
    asked = _allgather_json({"problem": problem, "ranks": ranks, "next_id": _registry.next_id})
    _raise_disagreement("add_process_set", asked, lambda a: str(a["ranks"]))
    set_id = max(a["next_id"] for a in asked)
    _registry.next_id = set_id + 1
    result = process_set if isinstance(process_set, ProcessSet) else ProcessSet(ranks)
    _start(result, set_id)
    return result


def _start(process_set: ProcessSet, set_id: int) -> None:
    """Starts ``process_set``'s runtime under ``set_id`` (collective over the global set)."""
    comm = _registry.comm
    member = comm.Get_rank() in process_set.ranks
    set_comm = None
    from mpi4py import MPI

    if member:
        group = comm.Get_group().Incl(process_set.ranks)
        set_comm = comm.Create_group(group, tag=set_id % 32768)
        group.Free()
    ranks = (ctypes.c_int * len(process_set.ranks))(*process_set.ranks)
    error = ctypes.create_string_buffer(4096)
    handle = MPI._handleof(set_comm) if set_comm is not None else 0
    code = _library.control().tfdist_add_process_set(set_id, handle, ranks, len(ranks), error,
                                                     len(error))
    if set_comm is not None:
        set_comm.Free()  # the runtime made its own duplicates
    if code != 0:
        raise runtime.InitError(f"starting {process_set!r} as process set {set_id} failed: "
                                f"{error.value.decode(errors='replace')}")
    process_set.process_set_id = set_id
    _registry.sets[set_id] = process_set


def remove_process_set(process_set: ProcessSet) -> bool:
    """Unregisters ``process_set`` and stops its runtime; returns True.

    Collective over the global set, like ``add_process_set``. Collectives of
    the set still waiting fail; its id is never used again.
    """
    _require_initialized("remove_process_set")
    problem = None
    set_id = getattr(process_set, "process_set_id", None)
    if not isinstance(process_set, ProcessSet):
        problem = (f"process_set must be a tfdist.ProcessSet, got {process_set!r} "
                   f"({type(process_set).__name__})")
    elif set_id == GLOBAL_ID:
        problem = "the global process set cannot be removed"
    elif set_id not in _registry.sets:
        problem = f"{process_set!r} is not registered"
    asked = _allgather_json({"problem": problem, "id": set_id})
    _raise_disagreement("remove_process_set", asked, lambda a: f"process set {a['id']}")
    del _registry.sets[set_id]
    error = ctypes.create_string_buffer(4096)
    code = _library.control().tfdist_remove_process_set(set_id, error, len(error))
    if code != 0:
        raise RuntimeError(f"tfdist.remove_process_set: {error.value.decode(errors='replace')}")
    return True


def registered() -> List[ProcessSet]:
    """The registered process sets, the global set first."""
    return [global_process_set, *(_registry.sets[i] for i in sorted(_registry.sets))]


def _require_initialized(what: str) -> None:
    if _registry.comm is None or not runtime.is_initialized():
        raise runtime.NotInitializedError(
            f"tfdist is not initialized: call tfdist.init() before tfdist.{what} "
            "(tfdist.runtime.init() alone starts no process set registry)")


def init(comm: Any = None, process_sets: Optional[Sequence[ProcessSet]] = None,
         **settings: Any) -> None:
    """Starts tfdist on every process of ``comm`` (an mpi4py communicator; default COMM_WORLD).

    ``tfdist.init``: ``tfdist.runtime.init`` (see there for ``settings``), then
    registers ``process_sets`` (``tfdist.ProcessSet`` objects, the same on
    every rank, in the same order) as ``add_process_set`` would. Collective.
    Calling it again while initialized does nothing.
    """
    if process_sets is not None and (isinstance(process_sets, (str, bytes, ProcessSet)) or
                                     not hasattr(process_sets, "__iter__")):
        raise TypeError("process_sets must be a list of tfdist.ProcessSet, got "
                        f"{process_sets!r} ({type(process_sets).__name__})")
    if comm is not None and not (hasattr(comm, "Get_size") and hasattr(comm, "Dup")):
        raise TypeError("comm must be an mpi4py communicator (e.g. MPI.COMM_WORLD.Split(...)) "
                        f"or None for COMM_WORLD, got {comm!r} ({type(comm).__name__})")
    if runtime.is_initialized():
        return
    runtime.init(comm, **settings)
    # Sets of an earlier runtime (stopped without tfdist.shutdown) are gone with it.
    _registry.sets.clear()
    _free(_registry.comm)
    # The communicator the runtime started over: in a replacement spawned by
    # elastic recovery, comm=None means the survivors' job, not COMM_WORLD.
    _registry.comm = _communicator.current().Dup()
    for process_set in process_sets or ():
        add_process_set(process_set)


def shutdown() -> None:
    """Stops the runtime, every process set's too (``tfdist.shutdown``).

    Collectives still waiting fail; later ones raise until ``init()``, and
    process sets must be added again after it.
    """
    _registry.sets.clear()
    comm, _registry.comm = _registry.comm, None
    runtime.shutdown()
    _free(comm)


def _free(comm: Any) -> None:
    if comm is None:
        return
    try:
        comm.Free()
    except Exception:  # pylint: disable=broad-except  # MPI may be finalized or broken
        pass
