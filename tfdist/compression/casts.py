"""``Compression.fp16`` and ``Compression.bf16``: floating tensors cross as 16-bit floats.

The runtime does the rounding itself (docs/compression.md): floating
tensors are rounded to 16 bits while they are packed into the fusion
buffer, the ranks exchange and add 16-bit values (each addition in float32)
and the result is widened while it is unpacked into a tensor of the input's
dtype. The network carries half the bytes of float32; no TensorFlow cast
runs. With Average, the division by the number of ranks happens before the
rounding, so inputs that float16 can hold never overflow. Other dtypes pass
through unchanged.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfdist import ops
from tfdist.compression.base import Compressor, check_compression


class _SixteenBitCompressor(Compressor):
    """Floating tensors travel as a 16-bit float; the runtime rounds and widens them.

    ``compress``/``decompress`` (casts in TensorFlow) only serve exchanges the
    runtime cannot compress itself: the allgather of sparse (IndexedSlices)
    gradients.
    """

    cast_dtype = tf.float16

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        if tensor.dtype in (tf.float32, tf.float64):
            return tf.cast(tensor, self.cast_dtype), tensor.dtype
        return tensor, None

    def decompress(self, tensor: tf.Tensor, context: Any) -> tf.Tensor:
        return tensor if context is None else tf.cast(tensor, context)

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None,
                  process_set: Any = None) -> List[tf.Tensor]:
        check_compression(self, op)
        tensors = [tf.convert_to_tensor(t) for t in tensors]
        if group_name is not None:
            return ops.grouped_allreduce_with_cast(tensors, op=op, name=group_name,
                                                  prescale_factor=prescale_factor,
                                                  postscale_factor=postscale_factor,
                                                  cast_code=self.cast_code,
                                                  process_set=process_set)
        return [ops.allreduce_with_cast(t, op=op, name=n, prescale_factor=prescale_factor,
                                        postscale_factor=postscale_factor,
                                        cast_code=self.cast_code,
                                        process_set=process_set)
                for t, n in zip(tensors, names)]


class FP16Compressor(_SixteenBitCompressor):
    """Sends floating tensors as IEEE float16 (accumulated in float32)."""

    name = "fp16"
    cast_code = 1
    cast_dtype = tf.float16


class BF16Compressor(_SixteenBitCompressor):
    """Sends floating tensors as bfloat16 (float32's range, 8 significant bits)."""

    name = "bf16"
    cast_code = 2
    cast_dtype = tf.bfloat16
