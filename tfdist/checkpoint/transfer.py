"""Restore's transfer: rank 0's arrays to every rank, sent while rank 0 is still reading them.

On rank 0 one thread reads (``read``, given by the caller) and hands over
each array as soon as it has verified; two more threads broadcast them in
order, each as soon as it is there, so that the read of the file and its
transfer overlap. Every rank gets its copy of every array back (staged),
and nothing here touches a variable: the caller assigns them once rank 0
has read the whole file and found it intact.

A variable of 1 MiB or more travels in a broadcast of its own. Smaller ones
travel packed together (their bytes one after the other, up to 16 MiB a
pack), since every broadcast costs about one negotiation round of the
runtime (1 ms by default) whatever its size: the 10 MiB benchmark model has
14 such variables beside its 12 large ones, and models with normalization
layers have hundreds.

This module knows nothing of files; tfdist.checkpoint.loader drives it.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, List, Optional, Tuple, TypeVar

import numpy as np
import tensorflow as tf

from tfdist import ops, runtime
from tfdist.checkpoint.snapshot import shared_value

# Threads issuing the broadcasts: two keep one in the runtime while the next
# is being issued (the ops release the GIL).
BROADCAST_THREADS = 2
# Variables smaller than this are packed with others.
PACK_BELOW_BYTES = 1 << 20
# A pack is closed once it holds this many bytes.
PACK_BYTES = 16 << 20

# On rank 0 the caller's read hands each array over with (index, array).
Deliver = Callable[[int, np.ndarray], None]
Result = TypeVar("Result")


def _nbytes(variable: Any) -> int:
    dtype = tf.as_dtype(variable.dtype)
    return int(np.prod(tuple(variable.shape), dtype=np.int64)) * dtype.size


def plan(variables: List[Any]) -> List[List[int]]:
    """The broadcasts, in the order they are sent: lists of variable indices. A large
    variable alone; small ones, in order, packed."""
    broadcasts: List[List[int]] = []
    pack: List[int] = []
    pack_bytes = 0
    for index, variable in enumerate(variables):
        nbytes = _nbytes(variable)
        if nbytes >= PACK_BELOW_BYTES:
            broadcasts.append([index])
            continue
        pack.append(index)
        pack_bytes += nbytes
        if pack_bytes >= PACK_BYTES:
            broadcasts.append(pack)
            pack, pack_bytes = [], 0
    if pack:
        broadcasts.append(pack)
    return broadcasts


def _borrowed(array: np.ndarray) -> Any:
    """A tensor over ``array``'s memory, without a copy (DLPack); ``array`` itself where
    DLPack cannot carry it (bfloat16, unaligned memory), which TensorFlow then copies."""
    try:
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    except (BufferError, TypeError, ValueError, tf.errors.OpError):
        return array


def _unshared(received: Any, array: np.ndarray) -> Any:
    """``received`` (rank 0's output of a broadcast of ``array``, borrowed), or a copy of
    ``array`` if it shares ``array``'s memory."""
    # The op writes a new tensor: TensorFlow does not hand it an input that Python
    # still holds. Were a TensorFlow to do so, the variable would adopt rank 0's
    # snapshot buffer, and the next save's copy would run into the training state.
    try:
        shared = np.may_share_memory(np.from_dlpack(received), array)
    except (BufferError, TypeError, ValueError, RuntimeError):
        shared = True  # cannot tell: copy, rather than risk it
    return tf.convert_to_tensor(np.array(array, copy=True)) if shared else received


def send_all(variables: List[Any], read: Optional[Callable[[Deliver], Result]]
             ) -> Tuple[List[Any], Optional[Result]]:
    """Collective: every rank's copy of rank 0's arrays (one per variable, in order), and
    on rank 0 what ``read`` returned (None elsewhere).

    Rank 0 passes ``read``, the others None. ``read(deliver)`` runs in a
    thread of its own and calls ``deliver(index, array)`` for each array as
    it is ready, each array of the variable's shape and dtype. An array it
    never delivers (a read that failed) is sent as whatever the variable
    holds, so that every rank still completes every broadcast; the caller
    throws those values away.

    One broadcast per large variable rather than one concatenation of all:
    the state is copied fewer times (no concatenate, no split). Ranks match
    the broadcasts by name, whatever order the threads issue them in. Rank 0
    gives the op its arrays borrowed, not copied: TensorFlow copies a numpy
    array it is given into fresh memory, and that copy (on top of the op's
    own into its output) doubled rank 0's work; without it a restore of the
    200 MiB benchmark model took 0.25 s from the page cache instead of
    0.55-0.62 s, and 0.46-0.51 s from disk instead of 0.65-0.68 s. On the
    ranks that receive, the op's input is the variable's own value (it
    shares the variable's buffer, so the op writes a new tensor and the
    variable stays as it is): no array is allocated only to be overwritten.
    """
    broadcasts = plan(variables)
    staged: List[Any] = [None] * len(variables)
    arrays: List[Optional[np.ndarray]] = [None] * len(variables)
    ready = [threading.Event() for _ in variables]

    def deliver(index: int, array: np.ndarray) -> None:
        arrays[index] = array
        ready[index].set()

    def read_all() -> Result:
        try:
            return read(deliver)
        finally:
            for event in ready:  # what is missing goes out as the variables hold it
                event.set()

    def send(number: int) -> None:
        members = broadcasts[number]
        if read is not None:
            for index in members:
                ready[index].wait()
        sources = [arrays[i] if arrays[i] is not None else shared_value(variables[i])
                   for i in members]
        name = f"tfdist.checkpoint.restore.{number}"
        if len(members) == 1 and _nbytes(variables[members[0]]) >= PACK_BELOW_BYTES:
            array = arrays[members[0]]
            source = _borrowed(array) if array is not None else sources[0]
            received = ops.broadcast(source, root_rank=0, name=name)
            staged[members[0]] = _unshared(received, array) if source is not array else received
            return
        packed = np.concatenate([np.ascontiguousarray(s).reshape(-1).view(np.uint8)
                                 for s in sources] or [np.zeros(0, np.uint8)])
        received = ops.broadcast(packed, root_rank=0, name=name).numpy()
        offset = 0
        for index in members:
            variable = variables[index]
            size = _nbytes(variable)
            staged[index] = (received[offset:offset + size]
                             .view(tf.as_dtype(variable.dtype).as_numpy_dtype)
                             .reshape(tuple(variable.shape)))
            offset += size

    with ThreadPoolExecutor(BROADCAST_THREADS + 1, thread_name_prefix="tfdist-restore") as pool:
        reading = pool.submit(read_all) if read is not None else None
        for future in [pool.submit(send, number) for number in range(len(broadcasts))]:
            future.result()
        result = reading.result() if reading is not None else None
    return staged, result
