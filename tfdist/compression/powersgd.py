"""PowerSGD low-rank compression with error feedback: ``Compression.powersgd``.

A tensor of rank >= 2 is viewed as an n×m matrix, m its last dimension and
n the product of the others (Keras keeps a layer's outputs last: a Dense
kernel is in×out, a Conv2D kernel kh×kw×in×out, so this is fan-in ×
fan-out, the view PyTorch gets with out × rest in its own layout); when
(n+m)·r·2 < n·m it is replaced by two thin factors: P = M Q is allreduced
together with the tensors not worth compressing (one fused grouped
allreduce), orthonormalised (C++), and Q = Mᵀ P̂ is allreduced in a second
round. Q warm-starts the next step. Before ``start_step`` calls, everything
is allreduced dense. It overrides ``Compressor.allreduce``, since it is
not "compress, allreduce, decompress". The state, naming and agreement
rules it shares with top-k are in ``tfdist.compression.stateful``.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfdist import _library, ops, runtime
from tfdist.compression import stateful
from tfdist.compression.base import Compressor
from tfdist.compression.stateful import FLOAT32_BYTES, dense_wire_bytes


class PowerSGDCompressor(Compressor):
    """PowerSGD low-rank compression with error feedback; see ``Compression.powersgd``."""

    takes_process_set = False  # its state and side collectives are the global set's

    name = "powersgd"

    def __init__(self, rank: int = 1, error_feedback: bool = True, start_step: int = 0) -> None:
        self.rank = stateful.integer_at_least("powersgd", "rank", rank, 1)
        self.start_step = stateful.integer_at_least("powersgd", "start_step", start_step, 0)
        self.error_feedback = stateful.flag("powersgd", "error_feedback", error_feedback)
        self.sent = stateful.SentBytes()

    def get_config(self) -> Dict[str, Any]:
        return {"name": self.name, "rank": self.rank, "error_feedback": self.error_feedback,
                "start_step": self.start_step}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "PowerSGDCompressor":
        """The compressor a ``get_config()`` dict describes."""
        return cls(int(config.get("rank", 1)), error_feedback=config.get("error_feedback", True),
                   start_step=int(config.get("start_step", 0)))

    def settings(self) -> str:
        """The settings every rank must agree on, as the runtime compares them."""
        return (f"powersgd rank={self.rank} error_feedback={self.error_feedback} "
                f"start_step={self.start_step}")

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Used only for sparse (IndexedSlices) gradients, which are allgathered
        uncompressed: their rows are no fixed matrix to factor."""
        stateful.warn_once("Compression.powersgd does not compress IndexedSlices (sparse) "
                           "gradients; they are allgathered uncompressed. Pass "
                           "sparse_as_dense=True to compress them as dense tensors.")
        return tensor, None

    def __repr__(self) -> str:
        return (f"Compression.powersgd(rank={self.rank}, error_feedback={self.error_feedback}, "
                f"start_step={self.start_step})")

    def wire_bytes(self) -> int:
        """Bytes this rank sends per compressed step (calls built so far), by the formulas."""
        return sum(self.sent.by_call.values())

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
        op, tensors = stateful.checked_call("powersgd", op, tensors, names, group_name)
        if not tensors:
            return []
        # Tensors that go as factors are computed in float32; the others (vectors,
        # matrices too small to factor) are allreduced in their own dtype.
        stateful.warn_float64("powersgd", [t for t in tensors if t.dtype.is_floating
                                   and t.shape.is_fully_defined()
                                   and self.compresses(t.shape.as_list())])
        key = group_name or names[0]
        scales = dict(op=op, prescale_factor=prescale_factor, postscale_factor=postscale_factor)

        def dense() -> List[tf.Tensor]:
            return ops.grouped_allreduce(tensors, name=f"{key}.powersgd_dense", **scales)

        def compressed() -> List[tf.Tensor]:
            return self._compressed(tensors, names, key, scales)

        with tf.control_dependencies([stateful.agreement(self, names, group_name)]):
            return stateful.from_start_step("powersgd", key, self.start_step, compressed, dense)

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
        factors = sum((p_local[i].shape[0] + q_local[i].shape[0]) * self.rank
                      * FLOAT32_BYTES for i in chosen)
        sent = factors + sum(stateful.nbytes(tensors[i]) for i in others)
        full = sum(stateful.nbytes(t) for t in tensors)
        self.sent.record(key, dense_wire_bytes(sent, size), dense_wire_bytes(full, size))
        if chosen:
            # The tensors in `others` went dense and were counted as such.
            counted = stateful.count_uncompressed(
                dense_wire_bytes(sum(stateful.nbytes(tensors[i]) for i in chosen), size),
                dense_wire_bytes(factors, size))
            with tf.control_dependencies([counted]):
                result = [tf.identity(r) for r in result]
        return result


def _matrix_view(shape: Sequence[int]) -> tuple:
    """(n, m): the product of all dimensions but the last, and the last."""
    return int(math.prod(shape[:-1])), int(shape[-1])
