"""The collective operations as TensorFlow ops, with their gradients.

Every function works eagerly and inside ``tf.function``. Ranks match
collectives by name: pass ``name=`` when collectives may be issued in a
different order on different ranks (several threads, several concurrently
running functions); unnamed graph ops use their node name and unnamed eager
ops a per-process sequence number.
"""
from __future__ import annotations

import functools
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from tfdist import _arguments, _eager, _library, runtime
from tfdist.process_sets import ProcessSet, process_set_id, set_rank
from tfdist._reduce_ops import Adasum, Average, Max, Min, Product, ReduceOp, Sum  # noqa: F401

_REDUCE_OPS = frozenset(ReduceOp)
# The values are the library's ReduceOp codes, Average (Sum then 1/size) and
# Adasum (Sum's op, combined by Adasum) after them.
_library.check_mirror("ReduceOp", [op.name.lower() for op in ReduceOp
                                   if op not in (ReduceOp.AVERAGE, ReduceOp.ADASUM)],
                      _library.control().tfdist_reduce_op_name)
# What the collectives other than allreduce accept.
_ELEMENTWISE_OPS = (Sum, Average, Min, Max, Product)
_library.check_mirrors()
_REDUCIBLE = _library.REDUCIBLE_DTYPES
_REDUCIBLE_ENUMS = frozenset(t.as_datatype_enum for t in _REDUCIBLE)


def _naming(name: Optional[str], set_id: int = 0) -> dict:
    """Attributes that name the collective (see the module docstring) and its process set
    (names are matched within the set)."""
    return {"tensor_name": name or "", "eager": tf.executing_eagerly(),
            "process_set_id": set_id}


@functools.lru_cache(maxsize=4096)
def _node_name(name: Optional[str]) -> Optional[str]:
    # TensorFlow node names allow fewer characters than tensor names.
    if not name:
        return None
    cleaned = "".join(c if c.isalnum() or c in "._-/" else "_" for c in name)
    return cleaned.lstrip("_/-") or None


def _independent(*outputs: tf.Tensor) -> None:
    """Lets a collective built in a tf.function run concurrently with its other ops.

    The ops are stateful (so that TensorFlow never folds, merges or drops
    them), and tf.function chains stateful ops in program order: 100
    allreduces would then run one after another, nothing could be fused, and
    ranks could not submit in different orders. Marking them independent
    (what TensorFlow does for its own collectives) keeps their data
    dependencies and that they must run, and drops only the program order.
    """
    if not outputs or tf.executing_eagerly():
        return
    op = outputs[0].op
    manager = getattr(op.graph, "experimental_acd_manager", None)
    if manager is not None:
        manager.run_independently(op)


@functools.lru_cache(maxsize=256)
def _reduction_attrs(op: int, prescale_factor: float, postscale_factor: float) -> dict:
    """Attributes of a reduction; cached, since eager loops repeat them."""
    return {"reduce_op": int(ReduceOp(op)), "prescale_factor": _scale_attr(prescale_factor),
            "postscale_factor": _scale_attr(postscale_factor)}


def _check_reducible(tensor: tf.Tensor, what: str) -> None:
    # Compared by enum: DType.__eq__ is slow enough to show in eager loops.
    if tensor.dtype.as_datatype_enum not in _REDUCIBLE_ENUMS:
        raise TypeError(f"tfdist.{what} does not support dtype {tensor.dtype.name}; "
                        f"supported: {', '.join(t.name for t in _REDUCIBLE)}")


def _scale_attr(value: float) -> str:
    return repr(float(value))


def _algorithm_attr(algorithm: Optional[str]) -> int:
    if algorithm is None:
        return 0  # the runtime applies TFDIST_ALLREDUCE_ALGORITHM, else auto
    algorithms = _library.allreduce_algorithms()
    if algorithm not in algorithms:
        raise ValueError(f"unknown allreduce algorithm {algorithm!r}; "
                         f"expected one of {', '.join(algorithms)}")
    return algorithms.index(algorithm)


def _checked(op: Any, name: Any, prescale_factor: Any = 1.0,
             postscale_factor: Any = 1.0) -> ReduceOp:
    """The common arguments of a reduction, checked (see tfdist._arguments); returns the op.

    Each test is one type check for the usual values: eager calls are short.
    """
    if type(op) is not ReduceOp:
        op = _arguments.reduce_op(op)
    if name is not None and type(name) is not str:
        _arguments.name(name)
    if type(prescale_factor) is not float or type(postscale_factor) is not float:
        _arguments.number(prescale_factor, "prescale_factor")
        _arguments.number(postscale_factor, "postscale_factor")
    return op


def _check_adasum_algorithm(op: ReduceOp, algorithm: Optional[str]) -> None:
    if op == Adasum and algorithm is not None:
        raise ValueError(f"op=tfdist.Adasum cannot be combined with algorithm={algorithm!r}: "
                         "Adasum is its own algorithm; leave algorithm=None")


def allreduce(tensor: tf.Tensor, op: ReduceOp = Average, name: Optional[str] = None,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              algorithm: Optional[str] = None,
              process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """Combines ``tensor`` across all ranks (of ``process_set``); every rank gets the result.

    ``op`` is one of Sum, Average (default), Min, Max, Product, or Adasum
    (floating tensors only: adaptive summation, docs/adasum.md). The input is
    multiplied by ``prescale_factor`` before and the result by
    ``postscale_factor`` after the reduction, in double precision; integer
    results are rounded to nearest. float16/bfloat16 are accumulated in
    float32. ``algorithm`` forces "tree", "butterfly", "ring", "rabenseifner",
    "hierarchical" (two levels, for ranks on several hosts), "shm" (through
    shared memory, for ranks on one host), "hierarchical_shm" (hierarchical with
    its phases within a host on the host's shared memory) or "mpi"
    (MPI_Allreduce); None uses TFDIST_ALLREDUCE_ALGORITHM, else the cost model
    ("auto"). ``process_set`` (a registered ``tfdist.ProcessSet``;
    None: the global set) limits it to the set's ranks; only they may call it.
    ``tfdist.allreduce`` adds ``compression=`` (tfdist/collectives.py).
    """
    op = _checked(op, name, prescale_factor, postscale_factor)
    if algorithm is not None and type(algorithm) is not str:
        _arguments.name(algorithm, "algorithm")
    _check_adasum_algorithm(op, algorithm)
    return allreduce_with_cast(tensor, op, name, prescale_factor, postscale_factor, algorithm,
                               process_set=process_set)


def allreduce_with_cast(tensor: tf.Tensor, op: ReduceOp = Average, name: Optional[str] = None,
                        prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                        algorithm: Optional[str] = None, cast_code: int = 0,
                        process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """``allreduce``, unchecked, with the 16-bit float the runtime rounds floating tensors
    to while it packs them (``cast_code``: 0 none, 1 fp16, 2 bf16; the op's
    ``compression`` attribute).

    The building block of the fp16/bf16 compressors (tfdist.compression.casts)
    and of the gradients; use ``tfdist.allreduce(..., compression=...)`` instead.
    """
    if not isinstance(tensor, tf.Tensor):
        tensor = tf.convert_to_tensor(tensor)
    set_id = 0 if process_set is None else process_set_id(process_set, "allreduce")
    # The common case; anything else is checked and reported below. IntEnum
    # members hash as their ints, so plain codes are found in the set too.
    algorithm_code = _algorithm_attr(algorithm)
    if not cast_code and isinstance(op, int) and op in _REDUCE_OPS:
        output = _eager.allreduce(tensor, op, name, prescale_factor, postscale_factor, set_id,
                                  algorithm_code)
        if output is not None:
            return output
    _check_reducible(tensor, "allreduce")
    output = _library.ops().tfdist_allreduce(
        tensor, algorithm=algorithm_code, compression=int(cast_code),
        name=_node_name(name), **_reduction_attrs(op, prescale_factor, postscale_factor),
        **_naming(name, set_id))
    _independent(output)
    return output


def grouped_allreduce(tensors: Sequence[tf.Tensor], op: ReduceOp = Average,
                      name: Optional[str] = None, prescale_factor: float = 1.0,
                      postscale_factor: float = 1.0,
                      algorithm: Optional[str] = None,
                      process_set: Optional[ProcessSet] = None) -> List[tf.Tensor]:
    """Allreduces a list of tensors as one unit; ``[]`` gives ``[]``.

    The tensors are handed to the runtime together, so they are negotiated in
    the same round and fused where possible, and the op completes when all of
    them have. Tensor i is matched across ranks as ``"<name>.<i>"``. Each
    tensor may have its own dtype and shape. ``process_set`` as in
    ``allreduce``. ``tfdist.grouped_allreduce`` adds ``compression=``
    (tfdist/collectives.py).
    """
    op = _checked(op, name, prescale_factor, postscale_factor)
    tensors = _tensor_list(tensors, "allreduce")
    if algorithm is not None and type(algorithm) is not str:
        _arguments.name(algorithm, "algorithm")
    _check_adasum_algorithm(op, algorithm)
    return grouped_allreduce_with_cast(tensors, op, name, prescale_factor, postscale_factor,
                                       algorithm, process_set=process_set)


def grouped_allreduce_with_cast(tensors: Sequence[tf.Tensor], op: ReduceOp = Average,
                                name: Optional[str] = None, prescale_factor: float = 1.0,
                                postscale_factor: float = 1.0, algorithm: Optional[str] = None,
                                cast_code: int = 0,
                                process_set: Optional[ProcessSet] = None) -> List[tf.Tensor]:
    """``grouped_allreduce``, unchecked, with ``cast_code`` (see allreduce_with_cast)."""
    set_id = process_set_id(process_set, "grouped_allreduce")
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if not tensors:
        return []
    for tensor in tensors:
        _check_reducible(tensor, "grouped_allreduce")
    outputs = list(_library.ops().tfdist_grouped_allreduce(
        tensors, algorithm=_algorithm_attr(algorithm), compression=int(cast_code),
        name=_node_name(name), **_reduction_attrs(op, prescale_factor, postscale_factor),
        **_naming(name, set_id)))
    _independent(*outputs)
    return outputs


def allgather(tensor: tf.Tensor, name: Optional[str] = None,
              process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """Concatenates every rank's ``tensor`` along the first dimension, in rank order.

    The first dimension may differ between ranks; the others must agree.
    ``process_set``: only its ranks take part (in their order).
    """
    _arguments.name(name)
    set_id = process_set_id(process_set, "allgather")
    output = _library.ops().tfdist_allgather(tf.convert_to_tensor(tensor),
                                             name=_node_name(name), **_naming(name, set_id))
    _independent(output)
    return output


def _tensor_list(tensors: Any, single: str) -> List[tf.Tensor]:
    """``tensors`` (a list or tuple) as tensors; a TypeError for a lone tensor."""
    if isinstance(tensors, (tf.Tensor, tf.Variable, np.ndarray, str)) or not hasattr(
            tensors, "__iter__"):
        raise TypeError("tensors must be a list or tuple of tensors, got "
                        f"{type(tensors).__name__}; for one tensor use tfdist.{single}")
    return [tf.convert_to_tensor(t) for t in tensors]


def grouped_allgather(tensors: Sequence[tf.Tensor], name: Optional[str] = None,
                      process_set: Optional[ProcessSet] = None) -> List[tf.Tensor]:
    """Allgathers a list of tensors as one unit; ``[]`` gives ``[]``.

    Negotiated together and fused into one collective; tensor i is matched
    across ranks as ``"<name>.<i>"`` and gathered as ``allgather`` would
    (its first dimension may differ between ranks). Each tensor may have its
    own dtype and shape; every rank must pass the same number of tensors.
    ``process_set`` as in ``allgather``.
    """
    _arguments.name(name)
    set_id = process_set_id(process_set, "grouped_allgather")
    tensors = _tensor_list(tensors, "allgather")
    if not tensors:
        return []
    outputs = list(_library.ops().tfdist_grouped_allgather(
        tensors, name=_node_name(name), **_naming(name, set_id)))
    _independent(*outputs)
    return outputs


def grouped_reducescatter(tensors: Sequence[tf.Tensor], op: ReduceOp = Average,
                          name: Optional[str] = None, prescale_factor: float = 1.0,
                          postscale_factor: float = 1.0,
                          process_set: Optional[ProcessSet] = None) -> List[tf.Tensor]:
    """Reducescatters a list of tensors as one unit; ``[]`` gives ``[]``.

    Negotiated together and fused into one collective (one per dtype);
    tensor i is matched across ranks as ``"<name>.<i>"`` and split as
    ``reducescatter`` splits it. ``op`` and ``process_set`` as in ``reducescatter``.
    """
    op = _checked(op, name, prescale_factor, postscale_factor)
    _arguments.reduce_op(op, "op", allowed=_ELEMENTWISE_OPS)
    set_id = process_set_id(process_set, "grouped_reducescatter")
    tensors = _tensor_list(tensors, "reducescatter")
    if not tensors:
        return []
    for tensor in tensors:
        _check_reducible(tensor, "grouped_reducescatter")
    outputs = list(_library.ops().tfdist_grouped_reducescatter(
        tensors, name=_node_name(name), **_reduction_attrs(op, prescale_factor, postscale_factor),
        **_naming(name, set_id)))
    _independent(*outputs)
    return outputs


def broadcast(tensor: tf.Tensor, root_rank: int, name: Optional[str] = None,
              process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """Returns ``root_rank``'s ``tensor`` on every rank (any dtype, bool included).

    ``process_set``: only its ranks take part; ``root_rank`` is still a global
    rank (as in Horovod) and must be one of the set's.
    """
    _arguments.rank(root_rank, "root_rank", runtime.size())
    _arguments.name(name)
    set_id = process_set_id(process_set, "broadcast")
    root = set_rank(root_rank, process_set, "root_rank")
    output = _library.ops().tfdist_broadcast(tf.convert_to_tensor(tensor), root_rank=root,
                                             name=_node_name(name), **_naming(name, set_id))
    _independent(output)
    return output


def alltoall(tensor: tf.Tensor, splits: Optional[Sequence[int]] = None,
             name: Optional[str] = None,
             process_set: Optional[ProcessSet] = None) -> Tuple[tf.Tensor, tf.Tensor]:
    """Sends ``splits[j]`` rows of ``tensor`` to rank j (equal parts when None).

    Returns the rows received, concatenated in rank order, and how many came
    from each rank. With ``process_set``, j counts the set's ranks (one split
    per member).
    """
    _arguments.name(name)
    set_id = process_set_id(process_set, "alltoall")
    if splits is not None and not isinstance(splits, (tf.Tensor, np.ndarray)):
        if not isinstance(splits, (list, tuple)) or not all(
                isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0
                for s in splits):
            raise TypeError("splits must be None or a list of non-negative row counts, one "
                            f"per rank, got {splits!r}")
    splits_tensor = tf.zeros([0], tf.int64) if splits is None else tf.cast(splits, tf.int64)
    output, received = _library.ops().tfdist_alltoall(
        tf.convert_to_tensor(tensor), splits_tensor, name=_node_name(name),
        **_naming(name, set_id))
    _independent(output)
    return output, received


def reducescatter(tensor: tf.Tensor, op: ReduceOp = Average, name: Optional[str] = None,
                  prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                  process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """Reduces ``tensor`` across ranks and gives each rank its share of the first dimension.

    Rank r gets rows [start_r, start_r + n_r) of the result, where the rows are
    split as evenly as possible and the first (rows % size) ranks get one more.
    With ``process_set``, r and size count the set's ranks.
    """
    op = _checked(op, name, prescale_factor, postscale_factor)
    _arguments.reduce_op(op, "op", allowed=_ELEMENTWISE_OPS)
    set_id = process_set_id(process_set, "reducescatter")
    tensor = tf.convert_to_tensor(tensor)
    _check_reducible(tensor, "reducescatter")
    output = _library.ops().tfdist_reducescatter(
        tensor, name=_node_name(name), **_reduction_attrs(op, prescale_factor, postscale_factor),
        **_naming(name, set_id))
    _independent(output)
    return output


def barrier(name: Optional[str] = None, process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """Returns once every rank (of ``process_set``) has reached it; the result is the
    number of ranks."""
    _arguments.name(name)
    set_id = process_set_id(process_set, "barrier")
    return _library.ops().tfdist_barrier(name=_node_name(name), **_naming(name, set_id))


_JOIN_NAME = "tfdist.join"


def join(process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """The op behind ``tfdist.join()`` (see there): the rank that joined last (its rank
    within ``process_set``)."""
    set_id = process_set_id(process_set, "join")
    return _library.ops().tfdist_join(tensor_name=_JOIN_NAME, eager=tf.executing_eagerly(),
                                      process_set_id=set_id)


def gradient_groups_index(iteration: tf.Tensor, candidates: Sequence[int]) -> tf.Tensor:
    """Which of ``candidates`` (num_groups values, the traced one first) the training
    step at ``iteration`` runs: an int32 index, chosen by autotuning, else 0."""
    return _library.ops().tfdist_gradient_groups(
        iteration=tf.cast(iteration, tf.int64), candidates=[int(c) for c in candidates])


def _topology_op(which: int) -> tf.Tensor:
    return _library.ops().tfdist_topology(which=which)


def rank_op() -> tf.Tensor:
    """This rank, evaluated when the graph runs."""
    return _topology_op(0)


def size_op() -> tf.Tensor:
    """The number of ranks, evaluated when the graph runs."""
    return _topology_op(1)


def local_rank_op() -> tf.Tensor:
    """The rank on this host, evaluated when the graph runs."""
    return _topology_op(2)


def local_size_op() -> tf.Tensor:
    """The number of ranks on this host, evaluated when the graph runs."""
    return _topology_op(3)
