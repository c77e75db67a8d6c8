"""Collective helpers built from tfdist's own ops: variables, Python objects, join.

Every function here is collective: all ranks (of its process set) must call
it, the same number of times and in the same order (each call takes the next
number of a per-process sequence of its set, and that number names its
tensors across the set's ranks).
Python objects travel pickled, as uint8 tensors, with their sizes sent first.
"""
from __future__ import annotations

import itertools
import pickle
import threading
from typing import Any, Dict, Iterable, List, Optional

import numpy as np
import tensorflow as tf

from tfdist import _arguments, ops, runtime
from tfdist.local_variables import is_local
from tfdist.process_sets import ProcessSet, process_set_id

class _Sequence:
    """Numbers the helpers' calls; restarted by join() on every rank alike."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counter = itertools.count()

    def next(self) -> int:
        with self._lock:
            return next(self._counter)

    def restart(self) -> None:
        with self._lock:
            self._counter = itertools.count()


# One per process set (by id): ranks outside a set make none of its calls.
_sequences: Dict[int, _Sequence] = {}


def _sequence_of(set_id: int) -> _Sequence:
    return _sequences.setdefault(set_id, _Sequence())


def _next_name(kind: str, process_set: Optional[ProcessSet] = None) -> str:
    """A name for the next call of ``kind`` on ``process_set``, the same on its ranks."""
    return f"tfdist.{kind}.{_sequence_of(process_set_id(process_set, kind)).next()}"


def broadcast_variables(variables: Iterable[tf.Variable], root_rank: int = 0,
                        process_set: Optional[ProcessSet] = None) -> None:
    """Assigns ``root_rank``'s values to ``variables`` (TensorFlow or Keras) on every rank.

    Typically called once after the model and optimizer are built, so that all
    ranks start from the same weights. The variables must be the same (same
    order, dtypes and shapes) on every rank. Variables of one dtype travel
    together as one flat broadcast, so the cost is one collective per dtype,
    not one per variable. Works eagerly and inside ``tf.function``.

    Raises ValueError if one of ``variables`` is a registered local variable
    (``register_local_var``, ``local_layers=``): its value is meant to differ
    between ranks, and the root's would overwrite it. Leave local variables
    out (``tfdist.is_local_variable``), or broadcast before registering them.

    ``process_set``: only its ranks take part; ``root_rank`` is a global rank
    in the set.
    """
    if isinstance(variables, (tf.Variable, tf.Tensor)) or not hasattr(variables, "__iter__"):
        raise TypeError("variables must be a list of variables (e.g. model.variables), got "
                        f"{type(variables).__name__}")
    variables = list(variables)
    for index, variable in enumerate(variables):
        if not (hasattr(variable, "assign") and hasattr(variable, "dtype")):
            raise TypeError(f"variables must be a list of variables (tf.Variable or Keras "
                            f"variables, e.g. model.variables); item {index} is "
                            f"{variable!r:.60} ({type(variable).__name__})")
    local = [str(getattr(v, "path", None) or v.name) for v in variables if is_local(v)]
    if local:
        raise ValueError(
            f"broadcast_variables was given {len(local)} local variable(s) ({', '.join(local)}), "
            "whose values are each rank's own; broadcasting would replace them with rank "
            f"{root_rank}'s. Leave them out, e.g. [v for v in variables if not "
            "tfdist.is_local_variable(v)], or broadcast before registering them")
    _arguments.rank(root_rank, "root_rank", runtime.size())
    base = _next_name("broadcast_variables", process_set)
    by_dtype: Dict[tf.DType, List[tf.Variable]] = {}
    for variable in variables:  # tf.Variable (DType) or Keras 3 Variable (dtype name)
        by_dtype.setdefault(tf.as_dtype(variable.dtype).base_dtype, []).append(variable)
    # Sorted by dtype name so that every rank issues the broadcasts in the same order.
    for dtype in sorted(by_dtype, key=lambda d: d.name):
        group = by_dtype[dtype]
        flat = tf.concat([tf.reshape(tf.convert_to_tensor(v), [-1]) for v in group], axis=0)
        received = ops.broadcast(flat, root_rank=root_rank, name=f"{base}.{dtype.name}",
                                 process_set=process_set)
        sizes = [int(np.prod(tf.TensorShape(v.shape).as_list(), dtype=np.int64))
                 for v in group]
        for variable, part in zip(group, tf.split(received, sizes, num=len(sizes))):
            variable.assign(tf.reshape(part, tf.shape(variable)))


def _to_bytes_tensor(obj: Any) -> tf.Tensor:
    return tf.constant(np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL),
                                     dtype=np.uint8))


def broadcast_object(obj: Any, root_rank: int = 0,
                     process_set: Optional[ProcessSet] = None) -> Any:
    """Returns ``root_rank``'s ``obj`` (any picklable object) on every rank (of
    ``process_set``; ``root_rank`` is a global rank in it).

    Only the root's ``obj`` is used; the other ranks may pass None. Eager only.
    Unpickling runs arbitrary code: use it only between processes of one job.
    """
    _arguments.rank(root_rank, "root_rank", runtime.size())
    base = _next_name("broadcast_object", process_set)
    is_root = runtime.rank() == root_rank
    payload = _to_bytes_tensor(obj) if is_root else None
    size = tf.constant([payload.shape[0] if is_root else 0], dtype=tf.int64)
    size = int(ops.broadcast(size, root_rank=root_rank, name=f"{base}.size",
                             process_set=process_set).numpy()[0])
    if not is_root:
        payload = tf.zeros([size], dtype=tf.uint8)
    received = ops.broadcast(payload, root_rank=root_rank, name=f"{base}.data",
                             process_set=process_set)
    if is_root:
        return obj
    return pickle.loads(received.numpy().tobytes())


def allgather_object(obj: Any, process_set: Optional[ProcessSet] = None) -> List[Any]:
    """Returns every rank's ``obj`` (any picklable object), as a list in rank order
    (of ``process_set``'s ranks when given).

    Eager only. Unpickling runs arbitrary code: use it only between processes
    of one job.
    """
    base = _next_name("allgather_object", process_set)
    payload = _to_bytes_tensor(obj)
    sizes = ops.allgather(tf.constant([payload.shape[0]], dtype=tf.int64),
                          name=f"{base}.sizes", process_set=process_set).numpy()
    data = ops.allgather(payload, name=f"{base}.data", process_set=process_set).numpy()
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return [pickle.loads(data[offsets[r]:offsets[r + 1]].tobytes())
            for r in range(len(sizes))]


def join(process_set: Optional[ProcessSet] = None) -> int:
    """Marks this rank as out of data; returns, once every rank has joined, the rank that joined last.

    For uneven data (Horovod's ``join``): a rank that runs out of batches
    calls ``join()`` and, until every rank has, stands in for the collectives
    the other ranks still run, so they do not hang waiting for it. It
    contributes the reduction's identity to an allreduce or reducescatter
    (so a Sum is the sum over the ranks still training, and an Average, as in
    Horovod, that sum divided by the full number of ranks), no rows to an
    allgather, and receives broadcasts; an alltoall, or a broadcast from a
    joined rank, fails on every rank with ``FailedPreconditionError``.

    Call it when this rank has no collective in flight; while it waits, any
    other collective started on this rank fails. "Last" is the rank whose
    join the ranks learned of last (of several at once, the highest). After
    a join every rank restarts the numbering of unnamed eager collectives and
    of these helpers, which the ranks still training advanced further. Eager
    only. With ``process_set`` all of this happens within the set (the
    result is still a global rank).
    """
    if not tf.executing_eagerly():
        raise RuntimeError("tfdist.join() runs eagerly only: call it outside tf.function")
    set_id = process_set_id(process_set, "join")
    last = int(ops.join(process_set).numpy())
    _sequence_of(set_id).restart()
    return last if set_id == 0 else process_set.ranks[last]
