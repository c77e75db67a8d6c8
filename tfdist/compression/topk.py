"""Top-k sparsification with error feedback: ``Compression.topk``.

Each rank sends the k = ceil(ratio·n) entries of (gradient + residual) with
the largest magnitude as (index, value) pairs; the rest stays in the rank's
residual. All tensors of one call go as one allgather of packed pairs, and
every rank scatter-adds all pairs (C++, in rank order, so every rank gets
the same bits). When the gathered pairs would cost more than a dense
allreduce on the measured link (``tfdist.link_cost()``), the call sends
gradient + residual dense instead. With ``momentum`` m > 0 it applies Deep
Gradient Compression's momentum correction (Lin et al., 2018): each rank
keeps a velocity u = m·u + g, adds u (not g) to the residual, and zeroes u
where entries were sent (momentum factor masking). The optimizer must then
have no momentum of its own. Before ``start_step`` calls, the call goes
dense (a warm-up). It overrides ``Compressor.allreduce``, since it is not
"compress, allreduce, decompress". The state, naming and agreement rules
it shares with PowerSGD are in ``tfdist.compression.stateful``.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfdist import _library, ops, runtime
from tfdist.compression import stateful
from tfdist.compression.base import Compressor
from tfdist.compression.stateful import FLOAT32_BYTES, dense_wire_bytes

_PAIR_BYTES = 8  # int32 index + float32 value


def topk_count(ratio: float, n: int) -> int:
    """k for a tensor of ``n`` elements: ceil(ratio·n) in [1, n] (cc/core/compression/topk.h)."""
    if n == 0:
        return 0
    exact = ratio * n
    k = math.ceil(exact - 1e-9 * exact)
    return max(1, min(n, k))


def gather_wire_bytes(nbytes_per_rank: int, size: int) -> int:
    """Bytes one rank sends in a ring allgather where every rank contributes ``nbytes_per_rank``."""
    return (size - 1) * nbytes_per_rank


def _static_size(tensor: tf.Tensor, name: str, compressor: str) -> int:
    if not tensor.shape.is_fully_defined():
        raise ValueError(f"Compression.{compressor} needs tensors of known shape; "
                         f"{name!r} has shape {tensor.shape}")
    return int(tensor.shape.num_elements())


def _scale(op: ops.ReduceOp, prescale: float, postscale: float, size: int) -> float:
    factor = prescale * postscale
    return factor / size if op == ops.Average else factor


class TopKCompressor(Compressor):
    """Top-k sparsification with error feedback; see ``Compression.topk``."""

    takes_process_set = False  # its state and side collectives are the global set's

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
        stateful.flag("topk", "error_feedback", error_feedback)
        if momentum and not error_feedback:
            raise ValueError("Compression.topk: momentum correction accumulates the velocity "
                             "in the residual, so it needs error_feedback=True")
        self.ratio = float(ratio)
        self.error_feedback = bool(error_feedback)
        self.momentum = float(momentum)
        self.start_step = stateful.integer_at_least("topk", "start_step", start_step, 0)
        self.sent = stateful.SentBytes()

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "ratio": self.ratio, "error_feedback": self.error_feedback,
                "momentum": self.momentum, "start_step": self.start_step}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "TopKCompressor":
        """The compressor a ``get_config()`` dict describes."""
        return cls(config["ratio"], error_feedback=config.get("error_feedback", True),
                   momentum=config.get("momentum", 0.0),
                   start_step=int(config.get("start_step", 0)))

    def settings(self) -> str:
        """The settings every rank must agree on, as the runtime compares them."""
        return (f"topk ratio={self.ratio!r} error_feedback={self.error_feedback} "
                f"momentum={self.momentum!r} start_step={self.start_step}")

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Used only for sparse (IndexedSlices) gradients, which are allgathered
        uncompressed: top-k of a gradient's rows has no residual to keep."""
        stateful.warn_once("Compression.topk does not compress IndexedSlices (sparse) "
                           "gradients; they are allgathered uncompressed. Pass "
                           "sparse_as_dense=True to compress them as dense tensors.")
        return tensor, None

    def __repr__(self) -> str:
        extra = f", momentum={self.momentum!r}" if self.momentum else ""
        extra += f", start_step={self.start_step}" if self.start_step else ""
        return f"Compression.topk({self.ratio!r}, error_feedback={self.error_feedback}{extra})"

    def wire_bytes(self) -> int:
        """Bytes this rank sends per step (the calls built so far), by the algorithms' formulas."""
        return sum(self.sent.by_call.values())

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
                  + size * pairs * FLOAT32_BYTES * reduce_per_byte)
        dense_bytes = elements * FLOAT32_BYTES
        dense = (2 * math.log2(size) * latency + dense_wire_bytes(dense_bytes, size) * per_byte
                 + (size - 1) / size * dense_bytes * reduce_per_byte)
        return gather < dense

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None) -> List[tf.Tensor]:
        op, tensors = stateful.checked_call("topk", op, tensors, names, group_name)
        if not tensors:
            return []
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
        stateful.warn_float64("topk", tensors)
        size = runtime.size()
        key = group_name or names[0]
        with tf.control_dependencies([stateful.agreement(self, names, group_name)]):
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
        uncompressed = dense_wire_bytes(total * FLOAT32_BYTES, size)
        if not self.sparse_is_cheaper(pairs, total, size):
            self.sent.record(key, uncompressed, uncompressed)
            return self._dense_sum(floats, names, key)
        sent = gather_wire_bytes(pairs * _PAIR_BYTES, size)
        self.sent.record(key, sent, uncompressed)
        # Without compression the call would have allreduced the tensors as given.
        dense = dense_wire_bytes(sum(stateful.nbytes(t) for t in tensors), size)

        def sparse() -> tf.Tensor:
            with tf.control_dependencies([stateful.count_uncompressed(dense, sent)]):
                return tf.identity(self._sparse_sum(floats, names, sizes, key))

        return stateful.from_start_step("topk", key, self.start_step, sparse,
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
