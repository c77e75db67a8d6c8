"""Gradient compression applied around a collective: ``Compression.none`` and ``Compression.fp16``.

A compressor decides how a list of dense gradients crosses the ranks:
``Compressor.allreduce`` is the one entry point that ``allreduce_gradients``
(and so ``DistributedOptimizer`` and ``DistributedGradientTape``) calls. The
base class sends each tensor through ``compress``, reduces what that returns
and undoes it with ``decompress``:

    wire, context = compressor.compress(tensor)
    tensor = compressor.decompress(reduced_wire, context)

A compressor that needs another collective (a sparse exchange, several
rounds) overrides ``allreduce`` instead. ``get_config`` and
``Compression.from_config`` carry a compressor through a saved model.

fp16 halves the bytes of float32/float64 gradients; the runtime accumulates
float16 in float32, so the loss of precision is that of the rounding to
float16 only. Non-floating tensors pass through unchanged.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfdist import ops


class Compressor:
    """Identity compression; the base of the others."""

    name = "none"

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Returns the tensor to send and what ``decompress`` needs to undo it."""
        return tensor, None

    def decompress(self, tensor: tf.Tensor, context: Any) -> tf.Tensor:
        """Inverts ``compress`` on the (reduced) tensor."""
        return tensor

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None) -> List[tf.Tensor]:
        """Combines dense ``tensors`` across ranks; returns them in the same order.

        ``names[i]`` names tensor i on every rank (and keys any per-tensor
        state a compressor keeps). With ``group_name`` the tensors go as one
        grouped collective of that name; without, each as its own collective
        named ``names[i]``.
        """
        compressed = [self.compress(tf.convert_to_tensor(t)) for t in tensors]
        wire = [c[0] for c in compressed]
        if group_name is not None:
            reduced = ops.grouped_allreduce(wire, op=op, name=group_name,
                                            prescale_factor=prescale_factor,
                                            postscale_factor=postscale_factor)
        else:
            reduced = [ops.allreduce(w, op=op, name=n, prescale_factor=prescale_factor,
                                     postscale_factor=postscale_factor)
                       for w, n in zip(wire, names)]
        return [self.decompress(r, c[1]) for r, c in zip(reduced, compressed)]

    def get_config(self) -> Dict[str, Any]:
        """What ``Compression.from_config`` needs to make this compressor again (JSON)."""
        return {"name": self.name}

    def __repr__(self) -> str:
        return f"Compression.{self.name}"


class FP16Compressor(Compressor):
    """Sends float32/float64 tensors as float16 and casts the result back."""

    name = "fp16"

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        if tensor.dtype in (tf.float32, tf.float64):
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    def decompress(self, tensor: tf.Tensor, context: Any) -> tf.Tensor:
        return tensor if context is None else tf.cast(tensor, context)


class Compression:
    """The available compressors, as in Horovod: ``Compression.none``, ``Compression.fp16``."""

    none = Compressor()
    fp16 = FP16Compressor()

    @staticmethod
    def topk(ratio: float, error_feedback: bool = True) -> Compressor:
        """Sends the ceil(ratio·n) largest-magnitude entries of each gradient (plus its
        residual, with ``error_feedback``); see tfdist/sparse_compression.py."""
        from tfdist.sparse_compression import TopKCompressor
        return TopKCompressor(ratio, error_feedback=error_feedback)

    @staticmethod
    def powersgd(rank: int = 1, error_feedback: bool = True, start_step: int = 0) -> Compressor:
        """PowerSGD of rank ``rank`` on matrices (dense before ``start_step`` calls);
        see tfdist/sparse_compression.py."""
        from tfdist.sparse_compression import PowerSGDCompressor
        return PowerSGDCompressor(rank, error_feedback=error_feedback, start_step=start_step)

    @staticmethod
    def by_name(name: str) -> Compressor:
        """The compressor called ``name`` ("none" or "fp16"); used when restoring a config."""
        for compressor in (Compression.none, Compression.fp16):
            if compressor.name == name:
                return compressor
        raise ValueError(f"unknown compression {name!r}; expected 'none' or 'fp16'")

    @staticmethod
    def from_config(config: Union[str, Dict[str, Any]]) -> Compressor:
        """The compressor a ``get_config()`` dict (or, from older saves, a name) describes."""
        if isinstance(config, str):
            return Compression.by_name(config)
        if config["name"] in ("topk", "powersgd"):
            from tfdist.sparse_compression import from_config
            return from_config(config)
        return Compression.by_name(config["name"])
