"""The engine's allreduce algorithms timed directly, without TensorFlow or the runtime.

The timing entry points (benchmarks/native/*.cc: engine_timer.cc for the
algorithms on one transport, costmodel_timer.cc for them on emulated hosts)
are not part of tfdist's library. On first use they are compiled, with the framework-free core
(cc/core without the runtime), into build/benchmarks/libtfdist_engine.so
(git-ignored), with the compiler and MPI flags tfdist's own build uses
(build_support/native.py). Later uses rebuild only what changed. Every rank
of a job may call ``engine_timer``: they build one at a time, under a lock.
"""
from __future__ import annotations

import ctypes
import fcntl
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "build" / "benchmarks"
LIBRARY_PATH = BUILD_DIR / "libtfdist_engine.so"
NATIVE_DIR = Path(__file__).resolve().parent / "native"

EngineTimer = Callable[[str, np.ndarray, int], float]


def _sources() -> list:
    from build_support import native  # the algorithms and transports, not the runtime
    return [*sorted(NATIVE_DIR.glob("*.cc")), *native.SOURCES.engine_sources()]


def _build() -> Path:
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # last: tfdist must stay the installed one
    from build_support import native

    mpicc = native.find_mpicc(sys.prefix)
    cxx = native.find_compiler()
    mpi_compile, mpi_link = native.mpi_flags(mpicc)
    # The flags of libtfdist's build, without TensorFlow's; hidden symbols keep
    # this copy of the core apart from libtfdist's in the same process.
    compile_flags = (native.SOURCES.LIBRARY_FLAGS + ["-fvisibility=hidden"]
                     + native.system_includes(mpi_compile))
    sources = _sources()
    objects = native.compile_objects(cxx, compile_flags, sources, BUILD_DIR / "objects", jobs=2)
    link = [cxx, "-shared", "-Wl,--no-undefined", "-o", str(LIBRARY_PATH),
            *map(str, objects), *mpi_link, "-pthread"]
    key = json.dumps(link)
    stamp = BUILD_DIR / "link.json"
    newest_object = max(o.stat().st_mtime for o in objects)
    if (LIBRARY_PATH.exists() and stamp.exists() and stamp.read_text() == key
            and LIBRARY_PATH.stat().st_mtime > newest_object):
        return LIBRARY_PATH
    result = subprocess.run(link, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise native.BuildError(f"linking {LIBRARY_PATH} failed:\n{' '.join(link)}\n"
                                f"{result.stderr}")
    stamp.write_text(key)
    return LIBRARY_PATH


def load() -> ctypes.CDLL:
    """Builds the timing library if it is missing or stale, and loads it."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BUILD_DIR / "build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            path = _build()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    lib = ctypes.CDLL(str(path))
    run = lib.tfdist_engine_allreduce_seconds
    run.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint64,
                    ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_double),
                    ctypes.c_char_p, ctypes.c_int]
    run.restype = ctypes.c_int
    return lib


def engine_timer(comm) -> EngineTimer:
    """A function (algorithm name, float32 buffer, iterations) -> this rank's seconds per
    in-place sum allreduce of the buffer over ``comm`` (an mpi4py communicator).

    Collective over ``comm``, like every call of the function it returns.
    """
    from mpi4py import MPI

    import tensorflow as tf

    from tfdist import _library
    run = load().tfdist_engine_allreduce_seconds
    handle = MPI._handleof(comm)
    algorithms = _library.allreduce_algorithms()
    float32 = _library.REDUCIBLE_DTYPES.index(tf.float32)  # its DataType code

    def timed(algorithm: str, buffer: np.ndarray, iterations: int) -> float:
        if buffer.dtype != np.float32:
            raise TypeError(f"engine_timer times float32 buffers, not {buffer.dtype}")
        seconds = ctypes.c_double()
        error = ctypes.create_string_buffer(1024)
        code = run(handle, algorithms.index(algorithm), buffer.ctypes.data, buffer.size,
                   float32, iterations, ctypes.byref(seconds), error, len(error))
        if code:
            raise RuntimeError(error.value.decode())
        return seconds.value
    return timed
