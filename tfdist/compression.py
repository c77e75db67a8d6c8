"""Gradient compression: ``Compression.none``, ``Compression.fp16`` and ``Compression.bf16``.

A compressor decides how a list of dense gradients crosses the ranks:
``Compressor.allreduce`` is the one entry point that ``allreduce_gradients``
(and so ``DistributedOptimizer`` and ``DistributedGradientTape``) and
``tfdist.allreduce(..., compression=...)`` call. The base class sends each
tensor through ``compress``, reduces what that returns (with the runtime's
wire compression ``wire_code``) and undoes it with ``decompress``:

    wire, context = compressor.compress(tensor)
    tensor = compressor.decompress(reduced_wire, context)

A compressor that needs another collective (a sparse exchange, several
rounds) overrides ``allreduce`` instead. ``get_config`` and
``Compression.from_config`` carry a compressor through a saved model.

fp16 and bf16 are done by the runtime itself (docs/compression.md): floating
tensors are rounded to 16 bits while they are packed into the fusion buffer,
the ranks exchange and add 16-bit values (each addition in float32) and the
result is widened while it is unpacked into a tensor of the input's dtype.
The wire carries half the bytes of float32; no TensorFlow cast runs. With
Average, the division by the number of ranks happens before the rounding,
so inputs that float16 can hold never overflow on the wire. Other dtypes
pass through unchanged.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import tensorflow as tf

from tfdist import ops


class Compressor:
    """Identity compression; the base of the others."""

    name = "none"
    #: The runtime's wire compression (cc/core/runtime/request.h WireCompression):
    #: 0 none, 1 fp16, 2 bf16.
    wire_code = 0

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
        named ``names[i]``. ``op`` must be Sum or Average when anything is
        compressed.
        """
        if self.wire_code:
            ops.check_compression(self, op)
        compressed = [self.compress(tf.convert_to_tensor(t)) for t in tensors]
        wire = [c[0] for c in compressed]
        if group_name is not None:
            reduced = ops.wire_grouped_allreduce(wire, op=op, name=group_name,
                                                 prescale_factor=prescale_factor,
                                                 postscale_factor=postscale_factor,
                                                 wire_code=self.wire_code)
        else:
            reduced = [ops.wire_allreduce(w, op=op, name=n, prescale_factor=prescale_factor,
                                          postscale_factor=postscale_factor,
                                          wire_code=self.wire_code)
                       for w, n in zip(wire, names)]
        return [self.decompress(r, c[1]) for r, c in zip(reduced, compressed)]

    def get_config(self) -> Dict[str, Any]:
        """What ``Compression.from_config`` needs to make this compressor again (JSON)."""
        return {"name": self.name}

    def __repr__(self) -> str:
        return f"Compression.{self.name}"


class _SixteenBitCompressor(Compressor):
    """Floating tensors travel as a 16-bit float; the runtime rounds and widens them.

    ``compress``/``decompress`` (casts in TensorFlow) only serve exchanges the
    runtime cannot compress itself: the allgather of sparse (IndexedSlices)
    gradients.
    """

    wire_dtype = tf.float16

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        if tensor.dtype in (tf.float32, tf.float64):
            return tf.cast(tensor, self.wire_dtype), tensor.dtype
        return tensor, None

    def decompress(self, tensor: tf.Tensor, context: Any) -> tf.Tensor:
        return tensor if context is None else tf.cast(tensor, context)

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None) -> List[tf.Tensor]:
        ops.check_compression(self, op)
        tensors = [tf.convert_to_tensor(t) for t in tensors]
        if group_name is not None:
            return ops.wire_grouped_allreduce(tensors, op=op, name=group_name,
                                              prescale_factor=prescale_factor,
                                              postscale_factor=postscale_factor,
                                              wire_code=self.wire_code)
        return [ops.wire_allreduce(t, op=op, name=n, prescale_factor=prescale_factor,
                                   postscale_factor=postscale_factor, wire_code=self.wire_code)
                for t, n in zip(tensors, names)]


class FP16Compressor(_SixteenBitCompressor):
    """Sends floating tensors as IEEE float16 (accumulated in float32)."""

    name = "fp16"
    wire_code = 1
    wire_dtype = tf.float16


class BF16Compressor(_SixteenBitCompressor):
    """Sends floating tensors as bfloat16 (float32's range, 8 significant bits)."""

    name = "bf16"
    wire_code = 2
    wire_dtype = tf.bfloat16


class Compression:
    """The available compressors: ``Compression.none``, ``.fp16``, ``.bf16``."""

    none = Compressor()
    fp16 = FP16Compressor()
    bf16 = BF16Compressor()

    @staticmethod
    def topk(ratio: float, error_feedback: bool = True, momentum: float = 0.0,
             start_step: int = 0) -> Compressor:
        """Sends the ceil(ratio·n) largest-magnitude entries of each gradient (plus its
        residual, with ``error_feedback``); ``momentum`` > 0 adds DGC's momentum
        correction (use an optimizer without momentum then); dense before ``start_step``
        calls; see tfdist/sparse_compression.py."""
        from tfdist.sparse_compression import TopKCompressor
        return TopKCompressor(ratio, error_feedback=error_feedback, momentum=momentum,
                              start_step=start_step)

    @staticmethod
    def powersgd(rank: int = 1, error_feedback: bool = True, start_step: int = 0) -> Compressor:
        """PowerSGD of rank ``rank`` on matrices (dense before ``start_step`` calls);
        see tfdist/sparse_compression.py."""
        from tfdist.sparse_compression import PowerSGDCompressor
        return PowerSGDCompressor(rank, error_feedback=error_feedback, start_step=start_step)

    @staticmethod
    def by_name(name: str) -> Compressor:
        """The compressor called ``name`` ("none", "fp16" or "bf16"); used when restoring a config."""
        for compressor in (Compression.none, Compression.fp16, Compression.bf16):
            if compressor.name == name:
                return compressor
        raise ValueError(f"unknown compression {name!r}; expected 'none', 'fp16' or 'bf16'")

    @staticmethod
    def from_config(config: Union[str, Dict[str, Any]]) -> Compressor:
        """The compressor a ``get_config()`` dict (or, from older saves, a name) describes."""
        if isinstance(config, str):
            return Compression.by_name(config)
        if config["name"] in ("topk", "powersgd"):
            from tfdist.sparse_compression import from_config
            return from_config(config)
        return Compression.by_name(config["name"])
