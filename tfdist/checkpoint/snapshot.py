"""The host copy of a checkpoint's state: the only part of a save the training thread waits for.

The buffers are kept from one save to the next and reused when the shapes
match: copying into memory that is already mapped costs one memcpy, while a
fresh allocation also pays a page fault per page, which made the copy about
three times slower here. The price is one host copy of the state held
between saves, as CheckFreq and PyTorch DCP's async save also keep.
Reuse is safe because a save first waits for the previous write. Restore
(which also waits for it first) reads rank 0's copy of the checkpoint into
the same buffers, and keeps what it read as the buffers of the next save.
"""
from __future__ import annotations

from typing import Any, Dict, List

import numpy as np
import tensorflow as tf

from tfdist.checkpoint.direct_io import aligned_empty


def shared_value(variable: Any) -> Any:
    """The variable's value as a tensor that shares its buffer (no copy)."""
    # A Keras 3 Variable wraps a tf.Variable; reading gives a tensor that
    # shares the variable's buffer (TensorFlow copies on the next write).
    inner = getattr(variable, "value", None)  # a method on a tf.Variable itself
    return (inner if isinstance(inner, tf.Variable) else variable).read_value()


class SnapshotBuffers:
    """Host arrays for each group of variables, reused across saves."""

    def __init__(self) -> None:
        self._arrays: Dict[str, List[np.ndarray]] = {}

    def copy(self, group: str, variables: List[Any]) -> List[np.ndarray]:
        """The values of ``variables``, copied into this group's buffers."""
        previous = self._arrays.get(group, [])
        copies = []
        for index, variable in enumerate(variables):
            source = np.asarray(shared_value(variable))  # no copy: a view of the tensor
            if (index < len(previous) and previous[index].shape == source.shape
                    and previous[index].dtype == source.dtype):
                target = previous[index]
            else:
                target = aligned_empty(source.shape, source.dtype)  # written with O_DIRECT
            np.copyto(target, source)
            copies.append(target)
        self._arrays[group] = copies
        return copies

    def buffers(self) -> Dict[str, List[np.ndarray]]:
        """The buffers by group: restore reads rank 0's copy of a checkpoint into them."""
        return self._arrays

    def adopt(self, groups: Dict[str, List[np.ndarray]]) -> None:
        """Keeps ``groups``' arrays (a restored checkpoint's) as the buffers of the next save."""
        self._arrays = {group: list(arrays) for group, arrays in groups.items()}
