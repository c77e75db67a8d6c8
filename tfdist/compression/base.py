"""The compressor interface, ``Compressor``, which is also ``Compression.none``.

A compressor decides how a list of dense gradients crosses the ranks:
``Compressor.allreduce`` is the one entry point that ``allreduce_gradients``
(and so ``DistributedOptimizer`` and ``DistributedGradientTape``) and
``tfdist.allreduce(..., compression=...)`` call. The base class sends each
tensor through ``compress``, reduces what that returns (asking the runtime
to round floating tensors to 16 bits while it packs them, ``cast_code``) and
undoes it with ``decompress``:

    sent, context = compressor.compress(tensor)
    tensor = compressor.decompress(reduced, context)

A compressor that needs another collective (a sparse exchange, several
rounds) overrides ``allreduce`` instead. ``get_config`` and
``Compression.from_config`` carry a compressor through a saved model.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import tensorflow as tf

from tfdist import ops


class Compressor:
    """Identity compression; the base of the others."""

    name = "none"
    #: The 16-bit float the runtime rounds floating tensors to while it packs
    #: them (cc/core/runtime/request.h WireCompression): 0 none, 1 fp16, 2 bf16.
    cast_code = 0
    #: Whether ``allreduce`` takes ``process_set=`` (a compressor that keeps
    #: per-tensor state runs collectives of its own on the global set only).
    takes_process_set = True

    def compress(self, tensor: tf.Tensor) -> Tuple[tf.Tensor, Any]:
        """Returns the tensor to send and what ``decompress`` needs to undo it."""
        return tensor, None

    def decompress(self, tensor: tf.Tensor, context: Any) -> tf.Tensor:
        """Inverts ``compress`` on the (reduced) tensor."""
        return tensor

    def allreduce(self, tensors: Sequence[tf.Tensor], names: Sequence[str], *,
                  op: ops.ReduceOp, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0,
                  group_name: Optional[str] = None,
                  process_set: Any = None) -> List[tf.Tensor]:
        """Combines dense ``tensors`` across ranks; returns them in the same order.

        ``names[i]`` names tensor i on every rank (and keys any per-tensor
        state a compressor keeps). With ``group_name`` the tensors go as one
        grouped collective of that name; without, each as its own collective
        named ``names[i]``. ``op`` must be Sum or Average when anything is
        compressed. ``process_set`` (a registered ``tfdist.ProcessSet``, or
        None: the global set) when ``takes_process_set``.
        """
        if self.cast_code:
            check_compression(self, op)
        compressed = [self.compress(tf.convert_to_tensor(t)) for t in tensors]
        sent = [c[0] for c in compressed]
        if group_name is not None:
            reduced = ops.grouped_allreduce_with_cast(sent, op=op, name=group_name,
                                                      prescale_factor=prescale_factor,
                                                      postscale_factor=postscale_factor,
                                                      cast_code=self.cast_code,
                                               process_set=process_set)
        else:
            reduced = [ops.allreduce_with_cast(s, op=op, name=n,
                                               prescale_factor=prescale_factor,
                                               postscale_factor=postscale_factor,
                                               cast_code=self.cast_code,
                                               process_set=process_set)
                       for s, n in zip(sent, names)]
        return [self.decompress(r, c[1]) for r, c in zip(reduced, compressed)]

    def get_config(self) -> Dict[str, Any]:
        """What ``Compression.from_config`` needs to make this compressor again (JSON)."""
        return {"name": self.name}

    def __repr__(self) -> str:
        return f"Compression.{self.name}"


def check_compression(compression: Any, op: ops.ReduceOp,
                      algorithm: Optional[str] = None) -> None:
    """Raises a TypeError/ValueError naming ``compression`` when it cannot apply."""
    if not isinstance(compression, Compressor):
        raise TypeError("compression must be a tfdist.Compression compressor (e.g. "
                        f"Compression.fp16), got {compression!r}")
    if ops.ReduceOp(op) not in (ops.Sum, ops.Average):
        raise ValueError(f"compression={compression!r} needs op=Sum or op=Average; "
                         f"got op={ops.ReduceOp(op).name}")
    if algorithm is not None:
        raise ValueError(f"compression={compression!r} cannot be combined with "
                         f"algorithm={algorithm!r}; leave algorithm=None")
