"""Top-k sparsification and PowerSGD, with error feedback: ``Compression.topk`` and ``Compression.powersgd``.

Both override ``Compressor.allreduce``, because neither is "compress,
allreduce, decompress":

- **top-k** (ratio, error_feedback): each rank sends the k = ceil(ratio·n)
  entries of (gradient + residual) with the largest magnitude as (index,
  value) pairs; the rest stays in the rank's residual. All tensors of one
  call go as one allgather of packed pairs, and every rank scatter-adds all
  pairs (C++, in rank order, so every rank gets the same bits). When the
  gathered pairs would cost more than a dense allreduce on the measured link
  (``tfdist.link_cost()``), the call sends gradient + residual dense instead.
  With ``momentum`` m > 0 it applies Deep Gradient Compression's momentum
  correction (Lin et al., 2018): each rank keeps a velocity u = m·u + g,
  adds u (not g) to the residual, and zeroes u where entries were sent
  (momentum factor masking). The optimizer must then have no momentum of
  its own. Before ``start_step`` calls, the call goes dense (a warm-up).
- **PowerSGD** (rank r, error_feedback, start_step): a tensor of rank >= 2
  is viewed as an n×m matrix, m its last dimension and n the product of the
  others (Keras keeps a layer's outputs last: a Dense kernel is in×out, a
  Conv2D kernel kh×kw×in×out, so this is fan-in × fan-out, the view PyTorch
  gets with out × rest in its own layout); when (n+m)·r·2 < n·m it is
  replaced by two thin factors: P = M Q is allreduced together with the
  tensors not worth compressing (one fused grouped allreduce), orthonormalised
  (C++), and Q = Mᵀ P̂ is allreduced in a second round. Q warm-starts the
  next step. Before ``start_step`` calls, everything is allreduced dense.

The per-rank state (residuals, Q, the step count) lives in the runtime,
keyed by tensor name, so every tensor needs a name of its own: a call whose
tensors have no name (``tfdist.allreduce(..., compression=...)`` or
``grouped_allreduce`` without ``name=``) or share one is refused. Every call
first runs one-element allreduces, one per tensor and named as the tensor's
collective would be without top-k or PowerSGD, whose descriptions carry the
compressor's settings (``settings()``), so ranks whose settings differ, or
that send the tensors uncompressed or as fp16/bf16, all get the runtime's
FailedPrecondition naming the setting and both values.
Only Sum and Average can be compressed this way. Both compute in float32
(float64 tensors are rounded, with a warning) and leave ``IndexedSlices``
uncompressed (with a warning); docs/compression.md, "Edge cases".
"""
from __future__ import annotations

import functools
import math
import numbers
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfdist import _library, ops, runtime
from tfdist.compression import Compressor

_FLOAT32_BYTES = 4
_PAIR_BYTES = 8  # int32 index + float32 value


def topk_count(ratio: float, n: int) -> int:
    """k for a tensor of ``n`` elements: ceil(ratio·n) in [1, n] (cc/core/compression/topk.h)."""
    if n == 0:
        return 0
    exact = ratio * n
    k = math.ceil(exact - 1e-9 * exact)
    return max(1, min(n, k))


def dense_wire_bytes(nbytes: int, size: int) -> int:
    """Bytes one rank sends in a bandwidth-optimal allreduce (ring, Rabenseifner) of ``nbytes``."""
    return int(round(2 * (size - 1) / size * nbytes)) if size > 1 else 0


def gather_wire_bytes(nbytes_per_rank: int, size: int) -> int:
    """Bytes one rank sends in a ring allgather where every rank contributes ``nbytes_per_rank``."""
    return (size - 1) * nbytes_per_rank


def _check_op(compressor: str, op: ops.ReduceOp) -> ops.ReduceOp:
    op = ops.ReduceOp(op)
    if op not in (ops.Sum, ops.Average):
        raise ValueError(f"op={op.name.capitalize()} cannot be used with Compression."
                         f"{compressor}: compressed gradients can only be summed or averaged "
                         "(op=Sum or op=Average)")
    return op


@functools.lru_cache(maxsize=None)
def _warn_once(message: str) -> None:
    """Warns with ``message`` the first time only: these warnings are about a
    configuration, and one per step would bury everything else."""
    warnings.warn(message, UserWarning, stacklevel=4)


def _check_names(compressor: str, names: Sequence[str], group_name: Optional[str]) -> None:
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


def _warn_float64(compressor: str, tensors: Sequence[tf.Tensor]) -> None:
    """Warns, once per process, that float64 tensors this compressor compresses lose
    precision: they are summed in float32."""
    if any(t.dtype == tf.float64 for t in tensors):
        _warn_once(f"Compression.{compressor} computes in float32: float64 tensors are "
                   "rounded to float32 before they are compressed and summed, and the "
                   "float32 result is cast back to float64 (this warning is shown once "
                   "per process)")


def _agreement(compressor: Compressor, names: Sequence[str],
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


def _count_uncompressed(dense: int, compressed: int) -> tf.Operation:
    """Tells tfdist.stats() what this compressed call would have sent without compression."""
    return _library.ops().tfdist_count_uncompressed(dense=int(dense), compressed=int(compressed))


def _integer_at_least(compressor: str, name: str, value: Any, minimum: int) -> int:
    """``value`` as an int, or a ValueError naming the argument (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"Compression.{compressor}: {name} must be an integer >= {minimum}, "
                         f"got {value!r}")
    return int(value)


def _static_size(tensor: tf.Tensor, name: str, compressor: str) -> int:
    if not tensor.shape.is_fully_defined():
        raise ValueError(f"Compression.{compressor} needs tensors of known shape; "
                         f"{name!r} has shape {tensor.shape}")
    return int(tensor.shape.num_elements())


def _scale(op: ops.ReduceOp, prescale: float, postscale: float, size: int) -> float:
    factor = prescale * postscale
    return factor / size if op == ops.Average else factor


class _WireCounter:
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


class TopKCompressor(Compressor):
    """Top-k sparsification with error feedback; see ``Compression.topk``."""

    name = "topk"

    def __init__(self, ratio: float, error_feedback: bool = True,
                 momentum: float = 0.0, start_step: int = 0) -> None:
        if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real) or not (
                0.0 < float(ratio) <= 1.0):
            raise ValueError(f"Compression.topk: ratio must be a number in (0, 1], got {ratio!r}")
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real) or not (
                0.0 <= float(momentum) < 1.0):
            raise ValueError("Compression.topk: momentum must be a number in [0, 1), "
                             f"got {momentum!r}")
        if momentum and not error_feedback:
            raise ValueError("Compression.topk: momentum correction accumulates the velocity "
                             "in the residual, so it needs error_feedback=True")
        self.ratio = float(ratio)
        self.error_feedback = bool(error_feedback)
        self.momentum = float(momentum)
        self.start_step = _integer_at_least("topk", "start_step", start_step, 0)
        self.wire = _WireCounter()

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "ratio": self.ratio, "error_feedback": self.error_feedback,
                "momentum": self.momentum, "start_step": self.start_step}

    def settings(self) -> str:
        """The settings every rank must agree on, as the runtime compares them."""
        return (f"topk ratio={self.ratio!r} error_feedback={self.error_feedback} "
                f"momentum={self.momentum!r} start_step={self.start_step}")

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Used only for sparse (IndexedSlices) gradients, which are allgathered
        uncompressed: top-k of a gradient's rows has no residual to keep."""
        _warn_once("Compression.topk does not compress IndexedSlices (sparse) gradients; "
                   "they are allgathered uncompressed. Pass sparse_as_dense=True to "
                   "compress them as dense tensors.")
        return tensor, None

    def __repr__(self) -> str:
        extra = f", momentum={self.momentum!r}" if self.momentum else ""
        extra += f", start_step={self.start_step}" if self.start_step else ""
        return f"Compression.topk({self.ratio!r}, error_feedback={self.error_feedback}{extra})"

    def wire_bytes(self) -> int:
        """Bytes this rank sends per step (the calls built so far), by the algorithms' formulas."""
        return sum(self.wire.by_call.values())

    def sparse_is_cheaper(self, pairs: int, elements: int, size: int) -> bool:
        """Whether allgathering ``pairs`` pairs per rank beats a dense allreduce of ``elements``.

        Uses the link cost the runtime measured (or was configured with) and
        the survey's formulas: ring allgather (P−1)(L + 8k·G) plus adding the
        P·k gathered values into the result, against the bandwidth-optimal
        allreduce 2·log2(P)·L + 2(P−1)/P·4n·G plus its reduction. The union
        of the ranks' indices is not known before the exchange, so the gather
        is costed at its worst case (no overlap).
        """
        cost = runtime.link_cost()
        latency, per_byte = cost["latency_s"], cost["seconds_per_byte"]
        reduce_per_byte = cost["reduce_seconds_per_byte"]
        # The scatter-add touches every gathered value once, at least what
        # reducing as many dense values costs. Without this term a link
        # whose latency was measured high made P = 2 gather even at ratio 1:
        # the dense formula pays two latencies there, the gather one.
        gather = ((size - 1) * latency + gather_wire_bytes(pairs * _PAIR_BYTES, size) * per_byte
                  + size * pairs * _FLOAT32_BYTES * reduce_per_byte)
        dense_bytes = elements * _FLOAT32_BYTES
        dense = (2 * math.log2(size) * latency + dense_wire_bytes(dense_bytes, size) * per_byte
                 + (size - 1) / size * dense_bytes * reduce_per_byte)
        return gather < dense

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None) -> List[tf.Tensor]:
        op = _check_op("topk", op)
        tensors = [tf.convert_to_tensor(t) for t in tensors]
        if not tensors:
            return []
        _check_names("topk", names, group_name)
        for tensor, name in zip(tensors, names):
            if not tensor.dtype.is_floating:
                raise TypeError(f"Compression.topk compresses floating-point tensors only; "
                                f"{name!r} is {tensor.dtype.name} (send integer tensors "
                                "without compression)")
        sizes = [_static_size(t, n, "topk") for t, n in zip(tensors, names)]
        total = sum(sizes)
        if total >= 2 ** 31:
            raise ValueError("Compression.topk: one call can carry at most 2^31-1 elements, "
                             f"got {total}; split the tensors into groups")
        _warn_float64("topk", tensors)
        size = runtime.size()
        key = group_name or names[0]
        with tf.control_dependencies([_agreement(self, names, group_name)]):
            summed = self._sum(tensors, names, sizes, key, size)
        factor = _scale(op, prescale_factor, postscale_factor, size)
        if factor != 1.0:
            summed = summed * factor
        outputs = tf.split(summed, sizes) if len(sizes) > 1 else [summed]
        return [tf.cast(tf.reshape(o, tf.shape(t)), t.dtype) for o, t in zip(outputs, tensors)]

    def _sum(self, tensors: List[tf.Tensor], names: Sequence[str], sizes: List[int], key: str,
             size: int) -> tf.Tensor:
        """The flat float32 sum of the call: sparse or dense, by cost and step."""
        total = sum(sizes)
        # Residuals keep the tensor's shape (rank_state shows them that way).
        floats = [tf.cast(t, tf.float32) for t in tensors]
        pairs = sum(topk_count(self.ratio, n) for n in sizes)
        uncompressed = dense_wire_bytes(total * _FLOAT32_BYTES, size)
        if not self.sparse_is_cheaper(pairs, total, size):
            self.wire.record(key, uncompressed, uncompressed)
            return self._dense_sum(floats, names, key)
        sent = gather_wire_bytes(pairs * _PAIR_BYTES, size)
        self.wire.record(key, sent, uncompressed)
        # Without compression the call would have allreduced the tensors as given.
        dense = dense_wire_bytes(sum(_nbytes(t) for t in tensors), size)

        def sparse() -> tf.Tensor:
            with tf.control_dependencies([_count_uncompressed(dense, sent)]):
                return tf.identity(self._sparse_sum(floats, names, sizes, key))

        if not self.start_step:
            return sparse()
        step = _library.ops().tfdist_compression_step(state_name=f"topk/{key}")
        return tf.cond(step >= self.start_step, sparse,
                       lambda: self._dense_sum(floats, names, key))

    def _sparse_sum(self, floats: List[tf.Tensor], names: Sequence[str], sizes: List[int],
                    key: str) -> tf.Tensor:
        library = _library.ops()
        indices, values, offset = [], [], 0
        for tensor, name, n in zip(floats, names, sizes):
            index, value = library.tfdist_topk_compress(
                tensor, ratio=repr(self.ratio), state_name=name,
                error_feedback=self.error_feedback, momentum=self.momentum)
            indices.append(index + offset if offset else index)
            values.append(value)
            offset += n
        index = tf.concat(indices, 0)
        value = tf.concat(values, 0)
        # One message of pairs: indices, then the values' bits, as int32.
        packed = tf.concat([index, tf.bitcast(value, tf.int32)], 0)
        gathered = tf.reshape(ops.allgather(packed, name=f"{key}.topk"), [-1, 2, tf.size(index)])
        all_indices = tf.reshape(gathered[:, 0, :], [-1])
        all_values = tf.bitcast(tf.reshape(gathered[:, 1, :], [-1]), tf.float32)
        return library.tfdist_scatter_add(all_indices, all_values, size=offset)

    def _dense_sum(self, floats: List[tf.Tensor], names: Sequence[str], key: str) -> tf.Tensor:
        library = _library.ops()
        if self.error_feedback:
            floats = [library.tfdist_residual_flush(f, state_name=n, momentum=self.momentum)
                      for f, n in zip(floats, names)]
        flats = [tf.reshape(f, [-1]) for f in floats]
        reduced = ops.grouped_allreduce(flats, op=ops.Sum, name=f"{key}.topk_dense")
        return tf.concat(reduced, 0) if len(reduced) > 1 else reduced[0]


class PowerSGDCompressor(Compressor):
    """PowerSGD low-rank compression with error feedback; see ``Compression.powersgd``."""

    name = "powersgd"

    def __init__(self, rank: int = 1, error_feedback: bool = True, start_step: int = 0) -> None:
        self.rank = _integer_at_least("powersgd", "rank", rank, 1)
        self.start_step = _integer_at_least("powersgd", "start_step", start_step, 0)
        self.error_feedback = bool(error_feedback)
        self.wire = _WireCounter()

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "rank": self.rank, "error_feedback": self.error_feedback,
                "start_step": self.start_step}

    def settings(self) -> str:
        """The settings every rank must agree on, as the runtime compares them."""
        return (f"powersgd rank={self.rank} error_feedback={self.error_feedback} "
                f"start_step={self.start_step}")

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Used only for sparse (IndexedSlices) gradients, which are allgathered
        uncompressed: their rows are no fixed matrix to factor."""
        _warn_once("Compression.powersgd does not compress IndexedSlices (sparse) gradients; "
                   "they are allgathered uncompressed. Pass sparse_as_dense=True to "
                   "compress them as dense tensors.")
        return tensor, None

    def __repr__(self) -> str:
        return (f"Compression.powersgd(rank={self.rank}, error_feedback={self.error_feedback}, "
                f"start_step={self.start_step})")

    def wire_bytes(self) -> int:
        """Bytes this rank sends per compressed step (calls built so far), by the formulas."""
        return sum(self.wire.by_call.values())

    def compresses(self, shape: Sequence[int]) -> bool:
        """Whether a tensor of this shape goes as factors: rank >= 2 and (n+m)·r·2 < n·m
        for n×m = (product of all but the last dimension) × last."""
        if len(shape) < 2:
            return False
        n, m = _matrix_view(shape)
        return n > 0 and m > 0 and (n + m) * self.rank * 2 < n * m

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None) -> List[tf.Tensor]:
        op = _check_op("powersgd", op)
        tensors = [tf.convert_to_tensor(t) for t in tensors]
        if not tensors:
            return []
        _check_names("powersgd", names, group_name)
        # Tensors that go as factors are computed in float32; the others (vectors,
        # matrices too small to factor) are allreduced in their own dtype.
        _warn_float64("powersgd", [t for t in tensors if t.dtype.is_floating
                                   and t.shape.is_fully_defined()
                                   and self.compresses(t.shape.as_list())])
        key = group_name or names[0]
        scales = dict(op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)

        def dense() -> List[tf.Tensor]:
            return ops.grouped_allreduce(tensors, name=f"{key}.powersgd_dense", **scales)

        def compressed() -> List[tf.Tensor]:
            return self._compressed(tensors, names, key, scales)

        with tf.control_dependencies([_agreement(self, names, group_name)]):
            if self.start_step == 0:
                return compressed()
            step = _library.ops().tfdist_compression_step(state_name=f"powersgd/{key}")
            return tf.cond(step >= self.start_step, compressed, dense)

    def _compressed(self, tensors: List[tf.Tensor], names: Sequence[str], key: str,
                    scales: Dict[str, Any]) -> List[tf.Tensor]:
        library = _library.ops()
        size = runtime.size()
        chosen = [i for i, t in enumerate(tensors)
                  if t.dtype.is_floating and t.shape.is_fully_defined()
                  and self.compresses(t.shape.as_list())]
        others = [i for i in range(len(tensors)) if i not in set(chosen)]
        accumulated, q_start, p_local = {}, {}, {}
        for i in chosen:
            shape = tensors[i].shape.as_list()
            matrix = tf.reshape(tf.cast(tensors[i], tf.float32), list(_matrix_view(shape)))
            accumulated[i], q_start[i] = library.tfdist_powersgd_prepare(
                matrix, state_name=names[i], rank=self.rank, error_feedback=self.error_feedback)
            p_local[i] = tf.matmul(accumulated[i], q_start[i])
        first = ops.grouped_allreduce([p_local[i] for i in chosen] + [tensors[i] for i in others],
                                      name=f"{key}.powersgd.p", **scales)
        result: List[Optional[tf.Tensor]] = [None] * len(tensors)
        for i, reduced in zip(others, first[len(chosen):]):
            result[i] = reduced
        p_hat = {i: library.tfdist_orthogonalize(p) for i, p in zip(chosen, first)}
        q_local = {i: tf.matmul(accumulated[i], p_hat[i], transpose_a=True) for i in chosen}
        second = ops.grouped_allreduce([q_local[i] for i in chosen], name=f"{key}.powersgd.q",
                                       **scales)
        for i, q_reduced in zip(chosen, second):
            output = library.tfdist_powersgd_finish(
                accumulated[i], p_hat[i], q_local[i], q_reduced, state_name=names[i],
                error_feedback=self.error_feedback)
            result[i] = tf.cast(tf.reshape(output, tensors[i].shape), tensors[i].dtype)
        factors = sum((p_local[i].shape[0] + q_local[i].shape[0]) * self.rank * _FLOAT32_BYTES
                      for i in chosen)
        sent = factors + sum(_nbytes(tensors[i]) for i in others)
        full = sum(_nbytes(t) for t in tensors)
        self.wire.record(key, dense_wire_bytes(sent, size), dense_wire_bytes(full, size))
        if chosen:
            # The tensors in `others` went dense and were counted as such.
            counted = _count_uncompressed(
                dense_wire_bytes(sum(_nbytes(tensors[i]) for i in chosen), size),
                dense_wire_bytes(factors, size))
            with tf.control_dependencies([counted]):
                result = [tf.identity(r) for r in result]
        return result


def _matrix_view(shape: Sequence[int]) -> tuple:
    """(n, m): the product of all dimensions but the last, and the last."""
    return int(math.prod(shape[:-1])), int(shape[-1])


def _nbytes(tensor: tf.Tensor) -> int:
    return int(tensor.shape.num_elements() or 0) * tensor.dtype.size


def from_config(config: Dict[str, Any]) -> Compressor:
    """The top-k or PowerSGD compressor a ``get_config()`` dict describes."""
    if config["name"] == TopKCompressor.name:
        return TopKCompressor(config["ratio"], error_feedback=config.get("error_feedback", True),
                              momentum=config.get("momentum", 0.0),
                              start_step=int(config.get("start_step", 0)))
    if config["name"] == PowerSGDCompressor.name:
        return PowerSGDCompressor(int(config.get("rank", 1)),
                                  error_feedback=config.get("error_feedback", True),
                                  start_step=int(config.get("start_step", 0)))
    raise ValueError(f"unknown compression {config['name']!r}")
