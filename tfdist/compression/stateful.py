"""What top-k and PowerSGD share: per-tensor state in the runtime, and its checks.

Both keep per-rank state (residuals, PowerSGD's Q, the step count) in the
runtime, keyed by tensor name, so every tensor needs a name of its own: a
call whose tensors have no name (``tfdist.allreduce(..., compression=...)``
or ``grouped_allreduce`` without ``name=``) or share one is refused
(``check_names``). Every call first runs one-element allreduces, one per
tensor and named as the tensor's collective would be without top-k or
PowerSGD, whose descriptions carry the compressor's settings
(``agreement``), so ranks whose settings differ, or that send the tensors
uncompressed or as fp16/bf16, all get the runtime's FailedPrecondition
naming the setting and both values. Only Sum and Average can be compressed
this way (``check_op``). Both compute in float32 (float64 tensors are
rounded, with a warning) and leave ``IndexedSlices`` uncompressed (with a
warning); docs/compression.md, "Edge cases".

``SentBytes`` and the ``*_wire_bytes`` formulas count the bytes a rank puts
on the network, the compressors' own account next to ``tfdist.stats()``.
"""
from __future__ import annotations

import functools
import numbers
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import tensorflow as tf

from tfdist import _library, ops
from tfdist.compression.base import Compressor

FLOAT32_BYTES = 4


def dense_wire_bytes(nbytes: int, size: int) -> int:
    """Bytes one rank sends in a bandwidth-optimal allreduce (ring, Rabenseifner) of ``nbytes``."""
    return int(round(2 * (size - 1) / size * nbytes)) if size > 1 else 0


_Result = TypeVar("_Result")


def checked_call(compressor: str, op: ops.ReduceOp, tensors: Sequence[Any],
                 names: Sequence[str],
                 group_name: Optional[str]) -> Tuple[ops.ReduceOp, List[tf.Tensor]]:
    """The op and the tensors of one call, after the checks every call makes first
    (``check_op``; ``check_names`` when there are tensors at all)."""
    op = check_op(compressor, op)
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    if tensors:
        check_names(compressor, names, group_name)
    return op, tensors


def from_start_step(compressor: str, key: str, start_step: int,
                    compressed: Callable[[], _Result],
                    dense: Callable[[], _Result]) -> _Result:
    """``compressed()`` once the call's step count reaches ``start_step``, ``dense()`` before.

    The steps are counted per call in the rank's state (``step/<compressor>/<key>``,
    which ``tfdist.runtime.rank_state()`` shows).
    """
    if not start_step:
        return compressed()
    step = _library.ops().tfdist_compression_step(state_name=f"{compressor}/{key}")
    return tf.cond(step >= start_step, compressed, dense)


def check_op(compressor: str, op: ops.ReduceOp) -> ops.ReduceOp:
    op = ops.ReduceOp(op)
    if op not in (ops.Sum, ops.Average):
        raise ValueError(f"op={op.name.capitalize()} cannot be used with Compression."
                         f"{compressor}: compressed gradients can only be summed or averaged "
                         "(op=Sum or op=Average)")
    return op


@functools.lru_cache(maxsize=None)
def warn_once(message: str) -> None:
    """Warns with ``message`` the first time only: these warnings are about a
    configuration, and one per step would bury everything else."""
    warnings.warn(message, UserWarning, stacklevel=4)


def check_names(compressor: str, names: Sequence[str], group_name: Optional[str]) -> None:
    """Refuses calls whose tensors have no name or share one: the per-tensor
    state (residual, Q, step) is keyed by name, and unnamed tensors would all
    use the same state, each resetting or adding into the others'."""
    if group_name == "" or any(not n for n in names):
        raise ValueError(
            f"Compression.{compressor} keeps per-tensor state keyed by the tensor's name, so "
            "every tensor needs one: pass name= to tfdist.allreduce, or to "
            "tfdist.grouped_allreduce (whose tensor i is then keyed '<name>.<i>')")
    seen = set()
    for n in names:
        if n in seen:
            raise ValueError(f"Compression.{compressor}: two tensors of one call are both "
                             f"named {n!r}; each needs its own name (its state is keyed by it)")
        seen.add(n)


def warn_float64(compressor: str, tensors: Sequence[tf.Tensor]) -> None:
    """Warns, once per process, that float64 tensors this compressor compresses lose
    precision: they are summed in float32."""
    if any(t.dtype == tf.float64 for t in tensors):
        warn_once(f"Compression.{compressor} computes in float32: float64 tensors are "
                   "rounded to float32 before they are compressed and summed, and the "
                   "float32 result is cast back to float64 (this warning is shown once "
                   "per process)")


def agreement(compressor: Compressor, names: Sequence[str],
               group_name: Optional[str]) -> tf.Tensor:
    """The call's first collective: every rank's settings, compared by the runtime.

    One one-element allreduce per tensor, named as ``Compressor.allreduce``
    names the tensor's collective without top-k or PowerSGD (``<group>.<i>``
    in a group, else the tensor's name): a rank that sends these tensors
    uncompressed or as fp16/bf16 meets them by name and gets the same error.
    """
    if group_name:
        collective_names = [f"{group_name}.{i}" for i in range(len(names))]
    else:
        collective_names = list(names)
    check = _library.ops().tfdist_compressor_agreement(settings=compressor.settings(),
                                                       tensor_names=collective_names)
    ops._independent(check)
    return check


def count_uncompressed(dense: int, compressed: int) -> tf.Operation:
    """Tells tfdist.stats() what this compressed call would have sent without compression."""
    return _library.ops().tfdist_count_uncompressed(dense=int(dense), compressed=int(compressed))


def integer_at_least(compressor: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as an int, or a ValueError naming the argument (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"Compression.{compressor}: {name} must be an integer >= {minimum}, "
                         f"got {value!r}")
    return int(value)


def flag(compressor: str, name: str, value: Any) -> bool:
    """``value`` if it is True or False, or a TypeError naming the argument."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise TypeError(f"Compression.{compressor}: {name} must be True or False, got {value!r}")


class SentBytes:
    """Bytes this rank sends per call, by collective: the compressor's own count.

    Shapes are static, so what a call sends is known when it is built;
    ``wire_bytes()`` is the sum over the calls of one step.
    """

    def __init__(self) -> None:
        self.by_call: Dict[str, int] = {}
        self.dense_by_call: Dict[str, int] = {}

    def record(self, call: str, sent: int, uncompressed: int) -> None:
        self.by_call[call] = sent
        self.dense_by_call[call] = uncompressed


def nbytes(tensor: tf.Tensor) -> int:
    return int(tensor.shape.num_elements() or 0) * tensor.dtype.size
