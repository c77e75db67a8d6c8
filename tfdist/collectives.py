"""``tfdist.allreduce`` and ``tfdist.grouped_allreduce``: the ops, plus ``compression=``.

Above both tfdist.ops (which only wraps the TensorFlow ops) and
tfdist.compression (whose compressors are built from those ops): without
``compression`` a call is the op's; with one, the compressor decides how the
tensors cross the ranks (``Compressor.allreduce``).
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

import tensorflow as tf

from tfdist import _arguments, compression as _compression, ops
from tfdist.ops import Average, ReduceOp
from tfdist.process_sets import ProcessSet, check_compressed_set


def allreduce(tensor: tf.Tensor, op: ReduceOp = Average, name: Optional[str] = None,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              algorithm: Optional[str] = None, compression: Any = None,
              process_set: Optional[ProcessSet] = None) -> tf.Tensor:
    """Combines ``tensor`` across all ranks; every rank gets the result.

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
    ("auto"). ``compression`` (a ``tfdist.Compression`` compressor,
    Sum or Average only; or its name, "fp16") changes what crosses the network;
    ``name`` keys the per-tensor state of compressors that keep some.
    ``process_set`` (a registered ``tfdist.ProcessSet``; None: the global set)
    limits it to the set's ranks (compressors: none, fp16 and bf16 only).
    """
    if compression is None:
        return ops.allreduce(tensor, op, name, prescale_factor, postscale_factor, algorithm,
                             process_set)
    op = ops._checked(op, name, prescale_factor, postscale_factor)
    if algorithm is not None and type(algorithm) is not str:
        _arguments.name(algorithm, "algorithm")
    ops._check_adasum_algorithm(op, algorithm)
    compressor = _compression.as_compressor(compression)
    _compression.check_compression(compressor, op, algorithm)
    check_compressed_set(compressor, process_set, "tfdist.allreduce")
    extra = {} if process_set is None else {"process_set": process_set}
    return compressor.allreduce([tensor], [name or ""], op=ReduceOp(op),
                                prescale_factor=prescale_factor,
                                postscale_factor=postscale_factor, **extra)[0]


def grouped_allreduce(tensors: Sequence[tf.Tensor], op: ReduceOp = Average,
                      name: Optional[str] = None, prescale_factor: float = 1.0,
                      postscale_factor: float = 1.0,
                      algorithm: Optional[str] = None,
                      compression: Any = None,
                      process_set: Optional[ProcessSet] = None) -> List[tf.Tensor]:
    """Allreduces a list of tensors as one unit; ``[]`` gives ``[]``.

    The tensors are handed to the runtime together, so they are negotiated in
    the same round and fused where possible, and the op completes when all of
    them have. Tensor i is matched across ranks as ``"<name>.<i>"``. Each
    tensor may have its own dtype and shape. ``compression`` as in
    ``allreduce``; tensor i's per-tensor state is keyed ``"<name>.<i>"``.
    ``process_set`` as in ``allreduce``.
    """
    if compression is None:
        return ops.grouped_allreduce(tensors, op, name, prescale_factor, postscale_factor,
                                     algorithm, process_set)
    op = ops._checked(op, name, prescale_factor, postscale_factor)
    tensors = ops._tensor_list(tensors, "allreduce")
    if algorithm is not None and type(algorithm) is not str:
        _arguments.name(algorithm, "algorithm")
    ops._check_adasum_algorithm(op, algorithm)
    compressor = _compression.as_compressor(compression)
    _compression.check_compression(compressor, op, algorithm)
    check_compressed_set(compressor, process_set, "tfdist.grouped_allreduce")
    if not tensors:
        return []
    extra = {} if process_set is None else {"process_set": process_set}
    return compressor.allreduce(
        tensors, [f"{name}.{i}" if name else "" for i in range(len(tensors))],
        op=ReduceOp(op), prescale_factor=prescale_factor,
        postscale_factor=postscale_factor, group_name=name or "", **extra)
