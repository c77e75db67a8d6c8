"""Gradient compression applied around a collective: ``Compression.none`` and ``Compression.fp16``.

A compressor turns a tensor into what goes over the wire and back:

    wire, context = compressor.compress(tensor)
    tensor = compressor.decompress(reduced_wire, context)

fp16 halves the bytes of float32/float64 gradients; the runtime accumulates
float16 in float32, so the loss of precision is that of the rounding to
float16 only. Non-floating tensors pass through unchanged.
"""
from __future__ import annotations

from typing import Any, Tuple

import tensorflow as tf


class Compressor:
    """Identity compression; the base of the others."""

    name = "none"

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Returns the tensor to send and what ``decompress`` needs to undo it."""
        return tensor, None

    def decompress(self, tensor: tf.Tensor, context: Any) -> tf.Tensor:
        """Inverts ``compress`` on the (reduced) tensor."""
        return tensor

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
    def by_name(name: str) -> Compressor:
        """The compressor called ``name`` ("none" or "fp16"); used when restoring a config."""
        for compressor in (Compression.none, Compression.fp16):
            if compressor.name == name:
                return compressor
        raise ValueError(f"unknown compression {name!r}; expected 'none' or 'fp16'")
