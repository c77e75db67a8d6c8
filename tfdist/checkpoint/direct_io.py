"""Writing a checkpoint's large arrays past the page cache (O_DIRECT), from page-aligned memory.

Why: a buffered write of a new file first needs as many fresh page-cache
pages as the file is large, and then fsync writes them out again. On the
development VM fresh pages are slow (the host takes freed memory back after
a few seconds): a buffered write and fsync of 600 MB took 0.4-1.6 s from one
run to the next, the same bytes written with O_DIRECT 0.42-0.48 s every time
(docs/fault_tolerance.md). A checkpoint is written once and not read back
by this process, so caching it buys nothing; CheckFreq and DeepSpeed's
FastPersist write checkpoints this way for the same reason.

O_DIRECT needs the memory address, the file offset and the length to be
multiples of the device's block size. The snapshot buffers are allocated
page-aligned (``aligned_empty``), HDF5 places large datasets at 4 KiB file
offsets (``ALIGNMENT``), and a dataset's last partial block goes through an
ordinary descriptor. Where any of this does not hold (a file system without
O_DIRECT, such as tmpfs; memory that is not aligned) the bytes go through the
ordinary descriptor: slower, the same file.

This module imports neither TensorFlow nor the rest of tfdist.
"""
from __future__ import annotations

import errno
import mmap
import os
from typing import Optional, Tuple

import numpy as np

# File offsets and memory addresses of directly written data are multiples of
# this: the page size, a multiple of every block size in use.
ALIGNMENT = 4096
# Arrays at least this large are allocated aligned and written directly;
# smaller ones are not worth a mapping of their own.
DIRECT_MIN_BYTES = 1 << 20
# One pwrite at most this long: the GIL is released during each, and the
# training thread may take it between them.
WRITE_SLICE_BYTES = 16 << 20


def aligned_empty(shape: Tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised array; page-aligned (its own anonymous mapping) when it is large."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = count * dtype.itemsize
    if nbytes < DIRECT_MIN_BYTES:
        return np.empty(shape, dtype)
    mapping = mmap.mmap(-1, nbytes)  # freed when the last array viewing it goes
    return np.frombuffer(mapping, dtype=dtype, count=count).reshape(shape)


def _is_aligned(value: int) -> bool:
    return value % ALIGNMENT == 0


class DataWriter:
    """Writes byte ranges of one existing file: directly where it can, else through the cache.

    The caller fsyncs the file afterwards (tfdist.checkpoint.writer does).
    """

    def __init__(self, path: str) -> None:
        self._buffered = os.open(path, os.O_WRONLY)
        self._direct: Optional[int] = None
        direct_flag = getattr(os, "O_DIRECT", 0)
        if direct_flag:
            try:
                self._direct = os.open(path, os.O_WRONLY | direct_flag)
            except OSError as error:
                if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    os.close(self._buffered)
                    raise

    def __enter__(self) -> "DataWriter":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._direct is not None:
            os.close(self._direct)
            self._direct = None
        if self._buffered >= 0:
            os.close(self._buffered)
            self._buffered = -1

    def write(self, offset: int, data: np.ndarray) -> None:
        """Writes ``data``'s bytes (contiguous) at ``offset``."""
        raw = data.reshape(-1).view(np.uint8)
        direct_bytes = 0
        if (self._direct is not None and _is_aligned(offset)
                and _is_aligned(raw.ctypes.data)):
            direct_bytes = raw.size - raw.size % ALIGNMENT
        try:
            self._write_all(self._direct, offset, raw[:direct_bytes])
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            # The file system refused this direct write after all: the cache from here on.
            os.close(self._direct)
            self._direct = None
            direct_bytes = 0
        self._write_all(self._buffered, offset + direct_bytes, raw[direct_bytes:])

    @staticmethod
    def _write_all(descriptor: Optional[int], offset: int, raw: np.ndarray) -> None:
        start = 0
        while start < raw.size:
            end = min(raw.size, start + WRITE_SLICE_BYTES)
            written = os.pwrite(descriptor, raw[start:end], offset + start)
            if written <= 0:
                raise OSError(errno.EIO, f"pwrite wrote {written} bytes at offset {offset + start}")
            start += written
