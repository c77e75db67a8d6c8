"""The eager fast path of ``allreduce``: small CPU tensors skip TensorFlow's op dispatch.

An eager call of a custom op costs 12-16 µs of TensorFlow dispatch on a
small machine, several times what the collective itself takes for a small
tensor (MPI's allreduce of 4 bytes: about 2 µs). When nothing can need the
op, ``allreduce`` hands the tensor's buffer straight to the runtime through
the library's C API (``cc/tf/eager_api.cc``): the same request, names,
validation and errors as the op, without the dispatch.

Two routes lead there. The library's own (``allreduce_tensor``,
``cc/tf/eager_tensors.h``) takes the EagerTensor and returns a new one, its
result in aligned buffers the library keeps per size
(``cc/tf/result_buffers.h``). Where this TensorFlow lacks the functions that
needs, the NumPy route below does the same through the tensor's NumPy view,
a result array (``_new_result``) and TensorFlow's Python constructor: at np 2 the
tensor route took 0.71-0.79x its time at 64 KiB and 0.76-0.84x at 256 KiB
(benchmarks.eager_fast_path, docs/runtime.md "The eager fast path").

The op is still used whenever it may matter: inside ``tf.function``, while a
gradient tape could record the call, for tensors on other devices, for a
16-bit compression cast, and for tensors over ``FAST_PATH_MAX_BYTES`` (where
the dispatch it saves is a small part of the call). A forced ``algorithm=``
takes the fast path like the default: the runtime reads it from the request
either way.
"""
from __future__ import annotations

import collections
import functools
import sys
import threading
from typing import Callable, List, NoReturn, Optional, Tuple

import numpy as np
import tensorflow as tf

from tfdist import _library

try:  # TensorFlow internals; without them every call takes the op.
    from tensorflow.python.eager.record import could_possibly_record as _tape_may_record
    from tensorflow.python.framework.ops import EagerTensor as _EagerTensor
    if not all(hasattr(_EagerTensor, m) for m in ("_numpy", "_datatype_enum", "device")):
        _EagerTensor = None
except ImportError:  # pragma: no cover - depends on the TensorFlow version
    _EagerTensor = None

#: Largest tensor, in bytes, that takes the fast path. Up to here it saves
#: TensorFlow's op dispatch: at np 2 it took 0.48-0.67x the op's time at 64 KiB,
#: 0.72-0.77x at 256 KiB and 0.86-0.95x at 1 MiB; at 4 and 16 MiB the two were
#: even (0.94-1.10x), so larger tensors keep the op (benchmarks.eager_fast_path,
#: docs/runtime.md "The eager fast path").
FAST_PATH_MAX_BYTES = 1024 * 1024

#: The alignment TensorFlow needs to make a tensor of a NumPy array without
#: copying it (EIGEN_MAX_ALIGN_BYTES at most). np.empty aligns to 16 bytes, and
#: an unaligned result was copied once more: 27 us a MiB here, which made the
#: fast path 1.10-1.54x the op's time from 1 MiB up.
_TENSOR_ALIGNMENT = 64
#: Results from this size up are allocated aligned; below, the copy costs less
#: than aligning does (64-128 KiB: the unaligned result was the faster). With the
#: cached buffers of _ResultBuffers, 64 KiB was tried too and did not pay
#: (benchmarks.eager_fast_path, docs/runtime.md "The eager fast path").
_ALIGNED_FROM_BYTES = 256 * 1024

# tf dtype enum -> the core's DataType code (cc/core/base/data_type.h).
_CORE_DTYPE = {dtype.as_datatype_enum: code
               for code, dtype in enumerate(_library.REDUCIBLE_DTYPES)}

_BFLOAT16 = tf.bfloat16.as_datatype_enum

# StatusCode names (cc/core/base/status.h) -> the error the op would raise.
_ERROR_CLASSES = {"invalid_argument": tf.errors.InvalidArgumentError,
                  "failed_precondition": tf.errors.FailedPreconditionError,
                  "internal": tf.errors.InternalError, "aborted": tf.errors.AbortedError}

@functools.lru_cache(maxsize=None)
def _error_class(code: int) -> type:
    """The TensorFlow error for a StatusCode value, as the library names it."""
    names = _library.status_codes()
    name = names[code] if 0 <= code < len(names) else None
    return _ERROR_CLASSES.get(name, tf.errors.UnknownError)


def _raise_failure(failed: Tuple[int, str]) -> NoReturn:
    """Raises the library's (StatusCode, message) as the error the op would raise."""
    code, message = failed
    raise _error_class(code)(None, None, message)


@functools.lru_cache(maxsize=None)
def _entry_point() -> Callable:
    """The library's call: allreduce(name, dtype code, shape, input, output, op,
    prescale, postscale, algorithm code, process set id) -> None, or (StatusCode,
    message)."""
    return _library.eager_module().allreduce


@functools.lru_cache(maxsize=None)
def _tensor_entry_point() -> Optional[Callable]:
    """The library's call that takes the EagerTensor and returns a new one:
    allreduce_tensor(name, tensor, op, prescale, postscale, algorithm code, process
    set id, max bytes) -> the result, None where it does not take the tensor, or
    (StatusCode, message); None where this TensorFlow lacks what it needs
    (cc/tf/eager_tensors.h)."""
    module = _library.eager_module()
    return module.allreduce_tensor if module.tensor_support() is None else None


@functools.lru_cache(maxsize=4096)
def _encoded(name: Optional[str]) -> bytes:
    return (name or "").encode()


class _ResultBuffers:
    """The aligned result buffers of earlier calls, one per size, taken again once no
    tensor uses them.

    A result of 256 KiB to 1 MiB allocated and freed on every call was, in some jobs,
    handed back to the kernel by glibc at each free and faulted in again at the next
    call: one page fault a call, and at np 2 the 1 MiB call took 1.15-1.6x its time in
    the other jobs (docs/cost_model.md, "Balanced rounds"). A buffer is free when its
    only references are this cache's: every tensor made from it, and every tensor that
    shares its memory (a reshape, an identity), holds a reference to it through
    TensorFlow's buffer, until the last of them is gone.

    Each buffer keeps its aligned part as an array made once: finding the aligned
    offset and slicing on every call cost 2.3-4.5 us of Python at 256 KiB to 1 MiB.
    """

    #: Sizes kept; the least recently used goes first.
    LIMIT = 16
    #: Buffers kept per size: ``x = allreduce(x)`` holds the previous result while the
    #: next call takes its buffer, so one buffer a size would never be free there.
    PER_SIZE = 2

    def __init__(self) -> None:
        # nbytes -> [(the whole allocation, its aligned nbytes)], the newest last
        self._buffers: "collections.OrderedDict[int, List[Tuple[np.ndarray, np.ndarray]]]" = (
            collections.OrderedDict())
        self._lock = threading.Lock()

    def take(self, nbytes: int, dtype: np.dtype = np.dtype(np.uint8),
             shape: Optional[Tuple[int, ...]] = None) -> np.ndarray:
        """``nbytes`` as an array of ``dtype`` and ``shape`` (default: flat), 64-byte
        aligned, in a buffer nothing else uses.

        The array holds its buffer from the moment it exists, and it is made before
        the lock is released: a bare aligned part handed out and viewed by the caller
        afterwards would leave a moment in which another thread's call found the
        buffer free and took it too.
        """
        with self._lock:
            entries = self._buffers.get(nbytes)
            if entries is None:
                entries = self._buffers[nbytes] = []
                while len(self._buffers) > self.LIMIT:
                    self._buffers.popitem(last=False)
            else:
                self._buffers.move_to_end(nbytes)
                for entry in entries:
                    # References to the allocation: the entry's, the aligned part's base
                    # and getrefcount's argument. An array made from the aligned part (a
                    # view, a reshape) refers to the allocation too: NumPy gives it
                    # that base.
                    if sys.getrefcount(entry[0]) == 3:
                        return self._shaped(entry[1], dtype, shape)
            entry = self._allocate(nbytes)
            entries.append(entry)
            if len(entries) > self.PER_SIZE:
                del entries[0]  # still used by its tensors, which keep it alive
            return self._shaped(entry[1], dtype, shape)

    @staticmethod
    def _shaped(aligned: np.ndarray, dtype: np.dtype,
                shape: Optional[Tuple[int, ...]]) -> np.ndarray:
        # A view of a view has the allocation as its base: it holds the buffer.
        array = aligned.view(dtype)
        return array if shape is None else array.reshape(shape)

    @staticmethod
    def _allocate(nbytes: int) -> Tuple[np.ndarray, np.ndarray]:
        whole = np.empty(nbytes + _TENSOR_ALIGNMENT, np.uint8)
        offset = -whole.__array_interface__["data"][0] % _TENSOR_ALIGNMENT
        return whole, whole[offset:offset + nbytes]


@functools.lru_cache(maxsize=None)
def _result_buffers() -> _ResultBuffers:
    return _ResultBuffers()


def _new_result(source: np.ndarray) -> np.ndarray:
    """An uninitialised array like ``source``, aligned so that the result tensor can
    use its memory as it is."""
    if source.nbytes < _ALIGNED_FROM_BYTES:
        return np.empty_like(source)
    return _result_buffers().take(source.nbytes, source.dtype, source.shape)


def _eligible(tensor) -> bool:
    # An EagerTensor can also reach a function being traced (a captured
    # constant): only a call that runs now may bypass the op.
    return (_EagerTensor is not None and isinstance(tensor, _EagerTensor)
            and tf.executing_eagerly() and not _tape_may_record()
            and tensor._datatype_enum() in _CORE_DTYPE
            and tensor.device.endswith("CPU:0"))


def allreduce(tensor: tf.Tensor, op: int, name: Optional[str], prescale: float,
              postscale: float, process_set_id: int = 0,
              algorithm: int = 0) -> Optional[tf.Tensor]:
    """The allreduce done without the op, or None when the op must be used.

    ``op`` is a valid reduce_op code and ``algorithm`` a valid algorithm code
    (the op's attributes; the caller checks). Anything unusual (a dtype the op
    rejects) returns None, so that the op's path reports it.
    """
    if not _eligible(tensor):
        return None
    in_c = _tensor_entry_point()
    if in_c is not None:
        # The library reads the tensor and makes the result itself; None: a
        # tensor it does not take (empty, over the limit), which the op gets.
        made = in_c(_encoded(name), tensor, int(op), float(prescale), float(postscale),
                    algorithm, process_set_id, FAST_PATH_MAX_BYTES)
        if made is None or type(made) is not tuple:
            return made
        _raise_failure(made)
    # The NumPy route, where this TensorFlow lacks what the library's needs.
    source = tensor._numpy()  # the tensor's own buffer, not a copy
    if not 0 < source.nbytes <= FAST_PATH_MAX_BYTES:
        return None
    # A new array every call: the tensor made from it shares its memory.
    result = _new_result(source)
    dtype = tensor._datatype_enum()
    shape, into = source.shape, result
    if dtype == _BFLOAT16:  # the buffer protocol cannot describe it: addresses instead
        source = source.__array_interface__["data"][0]
        into = result.__array_interface__["data"][0]
    failed = _entry_point()(_encoded(name), _CORE_DTYPE[dtype], shape, source, into,
                            int(op), float(prescale), float(postscale), algorithm,
                            process_set_id)
    if failed is not None:
        _raise_failure(failed)
    return _EagerTensor(result, tensor.device, dtype)
