"""``tfdist.ReduceOp``, how a reduction combines the ranks' tensors.

Its own module, without TensorFlow or the library, so that the argument
checks (tfdist._arguments), which sit below the ops, can name it; tfdist.ops
checks the values against the library's.
"""
from __future__ import annotations

import enum


class ReduceOp(enum.IntEnum):
    """How allreduce combines the ranks' tensors."""

    SUM = 0
    MIN = 1
    MAX = 2
    PRODUCT = 3
    AVERAGE = 4
    #: Adaptive summation of floating-point gradients (allreduce only; docs/adasum.md).
    ADASUM = 5


Sum = ReduceOp.SUM
Min = ReduceOp.MIN
Max = ReduceOp.MAX
Product = ReduceOp.PRODUCT
Average = ReduceOp.AVERAGE
Adasum = ReduceOp.ADASUM
