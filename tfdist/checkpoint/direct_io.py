"""A checkpoint's large arrays written and read past the page cache (O_DIRECT), in page-aligned memory.

Why: a buffered write of a new file first needs as many fresh page-cache
pages as the file is large, and then fsync writes them out again. On the
development VM fresh pages are slow (the host takes freed memory back after
a few seconds): a buffered write and fsync of 600 MB took 0.4-1.6 s from one
run to the next, the same bytes written with O_DIRECT 0.42-0.48 s every time
(docs/fault_tolerance.md). A checkpoint is written once and not read back
by this process, so caching it buys nothing; CheckFreq and DeepSpeed's
FastPersist write checkpoints this way for the same reason.

Reading (``DataReader``): a file that is not in the page cache is read with
O_DIRECT too. A buffered read of it would first need fresh page-cache pages,
slow here for the same reason, and would fill the cache with a file that is
read once. A file whose pages are in the cache (a buffered copy, a file read
a moment ago) is read through the cache, at memory speed: which pages are
there is asked of the kernel once per file (``mincore`` on a mapping of it,
which reads nothing), and each range goes the way most of its pages call for.

O_DIRECT needs the memory address, the file offset and the length to be
multiples of the device's block size. The snapshot buffers are allocated
page-aligned (``aligned_empty``), HDF5 places large datasets at 4 KiB file
offsets (``ALIGNMENT``), and a dataset's last partial block goes through an
ordinary descriptor. Where any of this does not hold (a file system without
O_DIRECT, such as tmpfs; memory that is not aligned) the bytes go through the
ordinary descriptor: slower, the same bytes.

This module imports neither TensorFlow nor the rest of tfdist.
"""
from __future__ import annotations

import ctypes
import errno
import mmap
import os
from typing import Callable, Optional, Tuple

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
# One pread at most this long. Nothing trains during a restore, and a long
# direct read keeps more requests in the device's queue: 629 MB from disk in
# a restore took 0.49-0.50 s in reads of whole datasets against 0.53-0.60 s
# in 16 MiB slices here.
READ_SLICE_BYTES = 256 << 20


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


# One pread or pwrite: (descriptor, memory, file offset) -> bytes moved, at least one.
_Transfer = Callable[[int, np.ndarray, int], int]


class _Descriptors:
    """One file open twice, ordinarily and with O_DIRECT (where the file system allows it).

    ``_move`` splits a transfer between them: the block-aligned part of a
    range directly, the rest (and everything, once the file system refuses a
    direct transfer) through the cache.
    """

    def __init__(self, path: str, flags: int) -> None:
        self._buffered = os.open(path, flags)
        self._direct: Optional[int] = None
        direct_flag = getattr(os, "O_DIRECT", 0)
        if direct_flag:
            try:
                self._direct = os.open(path, flags | direct_flag)
            except OSError as error:
                if error.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    os.close(self._buffered)
                    raise

    def __enter__(self) -> "_Descriptors":
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

    def _move(self, transfer: _Transfer, offset: int, raw: np.ndarray, direct: bool,
              slice_bytes: int) -> None:
        """Moves ``raw`` (bytes, contiguous) at ``offset``, ``slice_bytes`` at a time:
        directly where ``direct`` and the alignment allow, else through the cache."""
        direct_bytes = 0
        if (direct and self._direct is not None and _is_aligned(offset)
                and _is_aligned(raw.ctypes.data)):
            direct_bytes = raw.size - raw.size % ALIGNMENT
        try:
            _move_all(transfer, self._direct, offset, raw[:direct_bytes], slice_bytes)
        except OSError as error:
            if error.errno != errno.EINVAL:
                raise
            # The file system refused this direct transfer after all: the cache from here on.
            os.close(self._direct)
            self._direct = None
            direct_bytes = 0
        _move_all(transfer, self._buffered, offset + direct_bytes, raw[direct_bytes:],
                  slice_bytes)


def _move_all(transfer: _Transfer, descriptor: Optional[int], offset: int,
              raw: np.ndarray, slice_bytes: int) -> None:
    start = 0
    while start < raw.size:
        end = min(raw.size, start + slice_bytes)
        start += transfer(descriptor, raw[start:end], offset + start)


def _pwrite(descriptor: int, raw: np.ndarray, offset: int) -> int:
    written = os.pwrite(descriptor, raw, offset)
    if written <= 0:
        raise OSError(errno.EIO, f"pwrite wrote {written} bytes at offset {offset}")
    return written


def _pread(descriptor: int, raw: np.ndarray, offset: int) -> int:
    read = os.preadv(descriptor, [raw], offset)
    if read <= 0:
        raise EOFError(f"the file ends before offset {offset} (pread read {read} of "
                       f"{raw.size} bytes)")
    return read


class DataWriter(_Descriptors):
    """Writes byte ranges of one existing file: directly where it can, else through the cache.

    The caller fsyncs the file afterwards (tfdist.checkpoint.writer does).
    """

    def __init__(self, path: str) -> None:
        super().__init__(path, os.O_WRONLY)

    def write(self, offset: int, data: np.ndarray) -> None:
        """Writes ``data``'s bytes (contiguous) at ``offset``."""
        self._move(_pwrite, offset, data.reshape(-1).view(np.uint8), direct=True,
                   slice_bytes=WRITE_SLICE_BYTES)


class DataReader(_Descriptors):
    """Reads byte ranges of one file into arrays: through the page cache where most of a
    range's pages are there, else directly (O_DIRECT) where it can."""

    def __init__(self, path: str) -> None:
        super().__init__(path, os.O_RDONLY)
        self.size = os.fstat(self._buffered).st_size
        # Which of the file's pages are in the page cache, asked for once: a
        # file is read once, right after opening it.
        self._cached = resident_pages(self._buffered, self.size)

    def cached_fraction(self, offset: int, length: int) -> float:
        """The fraction of the pages of [offset, offset + length) that are in the page cache
        (0 where the kernel cannot tell)."""
        if self._cached is None or length <= 0:
            return 0.0
        pages = self._cached[offset // mmap.PAGESIZE:-(-(offset + length) // mmap.PAGESIZE)]
        return float(pages.mean()) if pages.size else 0.0

    def read(self, offset: int, into: np.ndarray) -> None:
        """Fills ``into`` (contiguous) with the bytes at ``offset``; EOFError if the file
        ends first."""
        raw = into.reshape(-1).view(np.uint8)
        self._move(_pread, offset, raw, direct=self.cached_fraction(offset, raw.size) <= 0.5,
                   slice_bytes=READ_SLICE_BYTES)


def _mincore() -> Optional[Callable[..., int]]:
    """libc's mincore, or None where there is none."""
    try:
        function = ctypes.CDLL(None).mincore  # the process's own symbols: libc's
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


def resident_pages(descriptor: int, size: int) -> Optional[np.ndarray]:
    """One bool per page of the file's first ``size`` bytes: is it in the page cache?
    None where the kernel cannot tell (no mincore, a file that cannot be mapped)."""
    mincore = _mincore()
    if mincore is None or size <= 0:
        return None
    try:
        # Mapping a file reads none of it; mincore looks up each page's state.
        mapping = mmap.mmap(descriptor, size, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    states = np.zeros(-(-size // mmap.PAGESIZE), np.uint8)
    view = np.frombuffer(mapping, np.uint8)  # its address, without touching a page
    try:
        failed = mincore(view.ctypes.data, size, states.ctypes.data)
    finally:
        del view  # the mapping cannot close while an array still views it
        mapping.close()
    return None if failed else (states & 1).astype(bool)
