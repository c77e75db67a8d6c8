"""Starting, stopping and querying the runtime: init(), shutdown(), rank(), size(), stats()."""
from __future__ import annotations

import atexit
import dataclasses
import ctypes
import os
import sys
import warnings
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from tfdist import _arguments, _communicator, _library
from tfdist.config import LaunchInfo, RuntimeSettings, environment_warnings


class NotInitializedError(RuntimeError):
    """A tfdist function that needs the runtime was called before tfdist.init()."""


class InitError(RuntimeError):
    """The runtime could not start; the message says why."""


def init(comm: Any = None, **settings: Any) -> None:
    """Starts tfdist on every process of ``comm`` (an mpi4py communicator; default COMM_WORLD).

    Collective: every rank must call it. Keyword arguments override the
    TFDIST_* environment variables (see ``tfdist.config.RuntimeSettings``),
    e.g. ``init(fusion_threshold=0)``. Calling it again while initialized does
    nothing. In a replacement process spawned by elastic recovery, ``comm=None``
    joins the survivors' job instead of COMM_WORLD (docs/elastic.md).
    """
    if is_initialized():
        return
    config = RuntimeSettings.from_environment(**settings)
    if config.stall_eviction is None:
        # Unset: stuck ranks are evicted exactly when elastic recovery can
        # carry on without them (docs/elastic.md).
        elastic_on = LaunchInfo.from_environment().elastic_off_reason() is None
        config = dataclasses.replace(config, stall_eviction=elastic_on)
    from mpi4py import MPI  # initializes MPI (THREAD_MULTIPLE) if nobody has

    if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
        _warn_at_caller("MPI was initialized without MPI_THREAD_MULTIPLE; tfdist's background "
                        "thread and your own MPI calls must then never overlap.")
    comm = _communicator.for_init(comm)
    if comm.Get_rank() == 0:  # once a job, not once a rank
        for message in environment_warnings():
            _warn_at_caller(message)
    error = ctypes.create_string_buffer(4096)
    code = _library.control().tfdist_init(MPI._handleof(comm),
                                          config.to_runtime_string().encode(), error,
                                          len(error))
    if code != 0:
        raise InitError(f"tfdist.init() failed: {error.value.decode(errors='replace')}")
    _communicator.remember(comm)
    _register_exit_handler()


def _warn_at_caller(message: str) -> None:
    """warnings.warn, attributed to the first frame outside tfdist: the user's init() line
    (tfdist.init and hvd.init reach this module through others of the package)."""
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame = frame.f_back
        level += 1
    warnings.warn(message, stacklevel=level)


def _register_exit_handler() -> None:
    # mpi4py finalizes MPI at exit; handlers run last-registered first, and
    # this one is registered after mpi4py's, so the runtime stops before MPI.
    if not getattr(_register_exit_handler, "done", False):
        atexit.register(_shutdown_at_exit)
        _register_exit_handler.done = True  # type: ignore[attr-defined]


def shutdown() -> None:
    """Stops the runtime. Collectives still waiting fail; later ones raise until init()."""
    if _library.LIBRARY_PATH.exists():
        _library.control().tfdist_shutdown(None)


#: How long a rank that saw a peer fail waits for MPI_Finalize before it
#: exits with code 1 (docs/runtime.md, "When a peer exits or dies").
_FINALIZE_AFTER_FAILURE_SECONDS = 20.0


def _shutdown_at_exit() -> None:
    # The process is ending without shutdown(): the other ranks' waiting
    # collectives fail with this, so it must say what happened here. The
    # interpreter records an uncaught exception before it runs atexit
    # handlers; a SystemExit's code it does not keep.
    if not _library.LIBRARY_PATH.exists():
        return
    # After a peer failed (ULFM), MPI_Finalize, which mpi4py runs after this
    # handler, can wait for good for the dead process: bound it. So can a
    # replacement's, spawned by elastic recovery after a failure.
    _library.control().tfdist_guard_exit(_FINALIZE_AFTER_FAILURE_SECONDS,
                                         int(_communicator.joined()))
    if not is_initialized():
        return
    why = _exit_reason(getattr(sys, "last_value", None))
    _library.control().tfdist_shutdown(why.encode(errors="replace"))


def _exit_reason(error: Optional[BaseException]) -> str:
    """What the other ranks are told about this one's exit: the uncaught exception
    that ends it (the first line, at most 200 characters), or that it exits without
    shutdown(). A SystemExit's code is not known here; mpirun reports the code of
    the first rank that exits non-zero, which may be a rank stopped by this one."""
    if error is not None:
        text = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        return f"is exiting after an uncaught {text}"
    return ("is exiting without calling tfdist.shutdown() (its script ended or called "
            "sys.exit())")


def is_initialized() -> bool:
    """True between init() and shutdown()."""
    return bool(_library.control().tfdist_is_initialized())


def _topology() -> tuple:
    values = (ctypes.c_int * 6)()
    if _library.control().tfdist_topology(values) != 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    return tuple(values)


def rank() -> int:
    """This process's rank in the communicator given to init()."""
    return _topology()[0]


def size() -> int:
    """Number of processes in the communicator given to init()."""
    return _topology()[1]


def local_rank() -> int:
    """Rank among the processes on this host."""
    return _topology()[2]


def local_size() -> int:
    """Number of processes on this host."""
    return _topology()[3]


def cross_rank() -> int:
    """Rank of this host among the hosts (processes with this local rank)."""
    return _topology()[4]


def cross_size() -> int:
    """Number of hosts (processes with this local rank)."""
    return _topology()[5]


def autotuning() -> bool:
    """Whether the runtime tunes its settings while training runs (``TFDIST_AUTOTUNE``)."""
    value = _library.control().tfdist_autotuning()
    if value < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    return value == 1


def stats() -> Dict[str, Any]:
    """Counters of what the runtime did on this rank.

    ``allreduce_calls`` counts allreduce collectives executed and
    ``tensors_reduced`` the tensors that went through them (more tensors than
    calls means fusion happened); ``algorithm_calls`` maps algorithm names to
    how many allreduces ran with each. ``bytes_sent`` is the payload this
    rank put on the wire in all collectives (negotiation not included) and
    ``bytes_uncompressed`` what those collectives would have sent without
    compression (equal to ``bytes_sent`` when nothing is compressed).
    ``bytes_through_shared_memory`` is the part of ``bytes_sent`` this rank
    copied into a shared-memory segment for the other ranks of its host
    instead of sending it (the ``shm`` and ``hierarchical_shm`` algorithms).
    ``phase_ns`` sums, in nanoseconds, where the rounds that carried this
    rank's collectives spent their time: ``arrival`` (from the first
    request's enqueue to the last one's), ``pickup`` (from there to the
    round that takes them), ``negotiation``, ``collectives`` and
    ``completion`` (the ops' completion callbacks, in which TensorFlow runs
    what consumes the results); docs/runtime.md tells how to read them. A
    round's phases are added when the round ends, after its completion
    callbacks: read right after a result that the background thread
    delivered, they may not include that result's round yet.
    """
    names = _library.stat_names()  # the library's names and order
    values = (ctypes.c_uint64 * len(names))()
    count = _library.control().tfdist_stats(values, len(values))
    if count < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    result: Dict[str, Any] = {}
    for name, value in zip(names, values[:count]):
        *groups, key = name.split(".")
        table = result
        for group in groups:  # "algorithm_calls.ring" -> result["algorithm_calls"]["ring"]
            table = table.setdefault(group, {})
        table[key] = value
    return result


def algorithm_for(nbytes: int, algorithm: Optional[str] = None) -> str:
    """The allreduce algorithm a call with ``nbytes`` of data runs with on this job.

    With ``algorithm=None`` this is what "auto" (the cost model on the measured
    link cost) or TFDIST_ALLREDUCE_ALGORITHM picks. Float16/bfloat16 tensors
    are reduced in float32, so pass twice their byte size.
    """
    nbytes = _arguments.integer(nbytes, "nbytes", minimum=0)
    algorithms = _library.allreduce_algorithms()
    if algorithm is not None and algorithm not in algorithms:
        raise ValueError(f"algorithm={algorithm!r}: expected None or one of "
                         f"{', '.join(repr(a) for a in algorithms)}")
    requested = algorithms.index(algorithm or "auto")
    chosen = _library.control().tfdist_resolve_algorithm(requested, nbytes)
    if chosen < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    return algorithms[chosen]


def link_cost() -> Dict[str, float]:
    """What the cost model of "auto" runs on: message latency (s), wire time per
    byte (s), and time to reduce a byte (s); measured at init unless configured."""
    values = [ctypes.c_double() for _ in range(3)]
    if _library.control().tfdist_link_cost(*map(ctypes.byref, values)) != 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    return dict(zip(("latency_s", "seconds_per_byte", "reduce_seconds_per_byte"),
                    (v.value for v in values)))


# Per-rank state (compression residuals and factors), for checkpoints.
# Codes are cc/core/base/data_type.h's DataType values.
_STATE_DTYPES = ("uint8", "int8", "int32", "int64", "float16", None, "float32", "float64",
                 "bool")


def _state_api() -> ctypes.CDLL:
    lib = _library.control()
    if not getattr(lib, "_tfdist_state_declared", False):
        lib.tfdist_state_names.argtypes = [ctypes.c_char_p, ctypes.c_int64]
        lib.tfdist_state_names.restype = ctypes.c_int64
        lib.tfdist_state_describe.argtypes = [
            ctypes.c_char_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
        lib.tfdist_state_describe.restype = ctypes.c_int
        lib.tfdist_state_read.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int64]
        lib.tfdist_state_read.restype = ctypes.c_int
        lib.tfdist_state_clear.argtypes = []
        lib.tfdist_state_clear.restype = ctypes.c_int
        lib.tfdist_state_write.argtypes = [
            ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
            ctypes.c_void_p, ctypes.c_int64, ctypes.c_char_p, ctypes.c_int]
        lib.tfdist_state_write.restype = ctypes.c_int
        lib.tfdist_state_replace.argtypes = [
            ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int64),
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p,
            ctypes.c_int]
        lib.tfdist_state_replace.restype = ctypes.c_int
        lib._tfdist_state_declared = True
    return lib


def rank_state() -> Dict[str, np.ndarray]:
    """A copy of this rank's own state, keyed by stable names.

    Today that is the lossy compressors' state: error-feedback residuals
    (``topk.residual/<tensor>``, ``powersgd.residual/<tensor>``), PowerSGD's
    warm-start factors (``powersgd.q/<tensor>``) and step counts
    (``step/<name>``). Ranks hold different values; a checkpoint saves each
    rank's and gives them back with ``restore_rank_state``.
    """
    lib = _state_api()
    needed = lib.tfdist_state_names(None, 0)
    if needed < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    buffer = ctypes.create_string_buffer(max(int(needed), 1))
    lib.tfdist_state_names(buffer, needed)
    names = [n for n in buffer.raw[:needed].split(b"\0") if n]
    state: Dict[str, np.ndarray] = {}
    for name in names:
        array = _read_state_array(lib, name)
        if array is not None:
            state[name.decode()] = array
    return state


def _read_state_array(lib: ctypes.CDLL, name: bytes) -> Optional[np.ndarray]:
    """State array ``name``, or None when it was dropped (or resized) meanwhile."""
    dtype, dims, nbytes = ctypes.c_int(), ctypes.c_int(), ctypes.c_int64()
    capacity = 8
    while True:
        shape = (ctypes.c_int64 * capacity)()
        code = lib.tfdist_state_describe(name, dtype, dims, shape, capacity, nbytes)
        if code != 2:  # 2: more dimensions than `capacity`; ask again with room
            break
        capacity = dims.value
    if code != 0:
        return None
    array = np.empty(tuple(shape[:dims.value]), dtype=_STATE_DTYPES[dtype.value])
    # The library copies exactly the array's bytes, and refuses if its size changed.
    if array.nbytes != nbytes.value:
        return None
    if lib.tfdist_state_read(name, array.ctypes.data, array.nbytes) != 0:
        return None
    return array


def restore_rank_state(state: Dict[str, np.ndarray]) -> None:
    """Replaces this rank's state with ``state`` (what ``rank_state`` returned).

    Everything not in ``state`` is dropped, so a compressor restored this way
    continues exactly where the saved one stood; an empty dict resets it.
    All or nothing: every entry is checked (a str name, an array of a
    supported dtype) before anything changes, and the library swaps the whole
    state at once, so a TypeError or ValueError naming the bad entry leaves
    the state as it was.
    """
    lib = _state_api()
    arrays = []
    for name, value in state.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"rank state names must be non-empty strings, got {name!r}")
        # np.require, not np.ascontiguousarray: that one makes a 0-d array (a step
        # count) 1-d, and the count then restarts from zero.
        array = np.require(value, requirements="C")
        if array.dtype.name not in _STATE_DTYPES:
            raise TypeError(f"rank state {name!r}: unsupported dtype {array.dtype}")
        arrays.append((name, array))
    count = len(arrays)
    names = (ctypes.c_char_p * max(count, 1))(*[n.encode() for n, _ in arrays])
    dtypes = (ctypes.c_int * max(count, 1))(*[_STATE_DTYPES.index(a.dtype.name)
                                              for _, a in arrays])
    dims = (ctypes.c_int * max(count, 1))(*[a.ndim for _, a in arrays])
    flat_shape = [d for _, a in arrays for d in a.shape]
    shapes = (ctypes.c_int64 * max(len(flat_shape), 1))(*flat_shape)
    data = (ctypes.c_void_p * max(count, 1))(*[a.ctypes.data for _, a in arrays])
    sizes = (ctypes.c_int64 * max(count, 1))(*[a.nbytes for _, a in arrays])
    error = ctypes.create_string_buffer(1024)
    code = lib.tfdist_state_replace(count, names, dtypes, dims, shapes, data, sizes, error,
                                    len(error))
    if code < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    if code != 0:
        raise ValueError(f"rank state: {error.value.decode(errors='replace')}")


def network_cost_values() -> List[float]:
    """The cost model's step curves as the library's flat array of numbers
    (cc/core/tuning/network_cost_codec.h), for handing back to native code."""
    lib = _library.control()
    needed = lib.tfdist_network_cost(None, 0)
    if needed < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    values = (ctypes.c_double * needed)()
    lib.tfdist_network_cost(values, needed)
    return list(values)


def network_cost() -> Dict[str, Dict[str, List[List[Tuple[float, float]]]]]:
    """What the cost model predicts with: for each link class (``"intra"``: within a host,
    ``"inter"``: between hosts; equal on a one-host job), the seconds of one step of each
    kind (``"hop"``, ``"hop_reduce"``, ``"exchange"``, ``"exchange_reduce"``, ``"ring"``;
    docs/cost_model.md), one curve per distance between the partners (1, 2, 4, ...; a
    ring step has one), each a list of ``(bytes, seconds)`` points. Measured at init, or
    the survey's straight lines from the TFDIST_LATENCY... settings. Between the points
    the model interpolates linearly."""
    values = network_cost_values()
    result: Dict[str, Dict[str, List[List[Tuple[float, float]]]]] = {}
    offset = 0
    for link in ("intra", "inter"):
        curves = result[link] = {}
        for kind in _library.step_kinds():
            distances = int(values[offset])
            offset += 1
            curves[kind] = []
            for _ in range(distances):
                count = int(values[offset])
                points = values[offset + 1:offset + 1 + 2 * count]
                curves[kind].append(list(zip(points[0::2], points[1::2])))
                offset += 1 + 2 * count
    return result


def predict_allreduce_seconds(nbytes: int, algorithm: str) -> float:
    """What the cost model predicts for one allreduce of ``nbytes`` with ``algorithm``
    on this job's hosts and link costs (``inf`` for "mpi", "shm" and
    "hierarchical_shm", which it does not price, and for "hierarchical" unless the
    job spans several hosts of equal size)."""
    if algorithm == "auto":
        algorithm = algorithm_for(nbytes)
    code = _library.allreduce_algorithms().index(algorithm)
    seconds = _library.control().tfdist_predict_allreduce_seconds(code, nbytes)
    if seconds < 0:
        raise NotInitializedError("tfdist is not initialized: call tfdist.init() first")
    return seconds
