"""Loads tfdist's native library: the TensorFlow ops and the runtime's C control API."""
from __future__ import annotations

import ctypes
import functools
import importlib.machinery
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Callable, Sequence, Tuple

import tensorflow as tf

LIBRARY_DIR = Path(__file__).resolve().parent / "lib"
LIBRARY_PATH = LIBRARY_DIR / "libtfdist.so"
BUILD_INFO_PATH = LIBRARY_DIR / "build_info.json"
REBUILD_HINT = ("Rebuild tfdist against the TensorFlow you have: from the tfdist source "
                "tree run `pip install --no-build-isolation --force-reinstall --no-deps .` "
                "(or ./scripts/setup.sh).")


#: The dtypes the library reduces, indexed by their code in the C++ core
#: (DataType in cc/core/base/data_type.h; bool, code 8, is never reduced).
REDUCIBLE_DTYPES = (tf.uint8, tf.int8, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32,
                    tf.float64)


class LibraryError(ImportError):
    """tfdist's native library is missing or was built for another TensorFlow."""


def _check_build() -> None:
    if not LIBRARY_PATH.exists():
        raise LibraryError(f"tfdist's native library {LIBRARY_PATH} is missing. {REBUILD_HINT}")
    try:
        info = json.loads(BUILD_INFO_PATH.read_text())
    except (OSError, ValueError) as error:
        raise LibraryError(f"cannot read {BUILD_INFO_PATH} ({error}). {REBUILD_HINT}") from None
    built = (info.get("tensorflow_version"), info.get("tensorflow_git_version"))
    found = (tf.__version__, tf.version.GIT_VERSION)
    if built != found:
        raise LibraryError(
            f"tfdist was built against TensorFlow {built[0]} ({built[1]}) but TensorFlow "
            f"{found[0]} ({found[1]}) is installed. {REBUILD_HINT}")


@functools.lru_cache(maxsize=None)
def ops() -> ModuleType:
    """The generated Python wrappers of the Tfdist* ops."""
    _check_build()
    try:
        return tf.load_op_library(str(LIBRARY_PATH))
    except (tf.errors.NotFoundError, OSError) as error:
        raise LibraryError(f"TensorFlow could not load {LIBRARY_PATH}: {error}. "
                           f"{REBUILD_HINT}") from None


@functools.lru_cache(maxsize=None)
def eager_module() -> ModuleType:
    """tfdist._eager_call, the eager fast path's CPython entry (cc/tf/eager_module.cc),
    which libtfdist.so itself holds."""
    ops()  # the same copy of the library as TensorFlow's and ctypes'
    name = "tfdist._eager_call"
    loader = importlib.machinery.ExtensionFileLoader(name, str(LIBRARY_PATH))
    spec = importlib.util.spec_from_file_location(name, str(LIBRARY_PATH), loader=loader)
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as error:
        raise LibraryError(f"{LIBRARY_PATH} has no eager entry ({error}). "
                           f"{REBUILD_HINT}") from None
    return module


@functools.lru_cache(maxsize=None)
def control() -> ctypes.CDLL:
    """The runtime's C control API (cc/tf/control_api.cc), with argument types declared."""
    ops()  # loads the library into TensorFlow first, so both share one copy
    lib = ctypes.CDLL(str(LIBRARY_PATH))
    lib.tfdist_init.argtypes = [ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]
    lib.tfdist_init.restype = ctypes.c_int
    lib.tfdist_shutdown.argtypes = [ctypes.c_char_p]
    lib.tfdist_shutdown.restype = None
    lib.tfdist_is_initialized.restype = ctypes.c_int
    lib.tfdist_guard_exit.argtypes = [ctypes.c_double, ctypes.c_int]
    lib.tfdist_guard_exit.restype = ctypes.c_int
    lib.tfdist_topology.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.tfdist_topology.restype = ctypes.c_int
    lib.tfdist_autotuning.restype = ctypes.c_int
    lib.tfdist_stats.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]
    lib.tfdist_stats.restype = ctypes.c_int
    lib.tfdist_resolve_algorithm.argtypes = [ctypes.c_int, ctypes.c_uint64]
    lib.tfdist_resolve_algorithm.restype = ctypes.c_int
    lib.tfdist_link_cost.argtypes = [ctypes.POINTER(ctypes.c_double)] * 3
    lib.tfdist_link_cost.restype = ctypes.c_int
    for name in ("tfdist_status_code_name", "tfdist_allreduce_algorithm_name",
                 "tfdist_stat_name", "tfdist_data_type_name", "tfdist_reduce_op_name",
                 "tfdist_step_kind_name"):
        getattr(lib, name).argtypes = [ctypes.c_int]
        getattr(lib, name).restype = ctypes.c_char_p
    lib.tfdist_network_cost.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int64]
    lib.tfdist_network_cost.restype = ctypes.c_int64
    lib.tfdist_predict_allreduce_seconds.argtypes = [ctypes.c_int, ctypes.c_uint64]
    lib.tfdist_predict_allreduce_seconds.restype = ctypes.c_double
    lib.tfdist_add_process_set.argtypes = [ctypes.c_int, ctypes.c_size_t,
                                           ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                           ctypes.c_char_p, ctypes.c_int]
    lib.tfdist_add_process_set.restype = ctypes.c_int
    lib.tfdist_remove_process_set.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lib.tfdist_remove_process_set.restype = ctypes.c_int
    lib.tfdist_process_set_topology.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                                ctypes.POINTER(ctypes.c_int)]
    lib.tfdist_process_set_topology.restype = ctypes.c_int
    return lib


# The library's enums and counter names, read from it rather than copied here,
# so that a value added or renumbered on the C++ side cannot be mislabelled.

def _names(function: Callable[[int], bytes]) -> Tuple[str, ...]:
    names = []
    while (name := function(len(names))) is not None:
        names.append(name.decode())
    return tuple(names)


@functools.lru_cache(maxsize=None)
def status_codes() -> Tuple[str, ...]:
    """StatusCode names (cc/core/base/status.h), indexed by value: "ok", "invalid_argument", ..."""
    return _names(control().tfdist_status_code_name)


@functools.lru_cache(maxsize=None)
def allreduce_algorithms() -> Tuple[str, ...]:
    """AllreduceAlgorithm names (cc/core/collectives/algorithm.h), indexed by value."""
    return _names(control().tfdist_allreduce_algorithm_name)


@functools.lru_cache(maxsize=None)
def step_kinds() -> Tuple[str, ...]:
    """The cost model's kinds of step (cc/core/tuning/step_costs.h StepKind), in the
    order of the curves in each link class of ``tfdist_network_cost``."""
    return _names(control().tfdist_step_kind_name)


@functools.lru_cache(maxsize=None)
def stat_names() -> Tuple[str, ...]:
    """The names of the counters tfdist_stats returns, in its order ("a.b" for nested ones)."""
    return _names(control().tfdist_stat_name)


def check_mirror(what: str, python_names: Sequence[str], library: Callable[[int], bytes],
                 complete: bool = True) -> None:
    """Raises LibraryError unless ``python_names`` are the library's names for ``what``, value
    for value (its first ones, if not ``complete``): for the tables Python must keep itself
    (a public enum, TensorFlow dtypes by code)."""
    library_names = _names(library)
    known = library_names if complete else library_names[:len(python_names)]
    if tuple(python_names) != known:
        raise LibraryError(f"tfdist's Python {what} table {tuple(python_names)} does not match "
                           f"its library's {library_names}. {REBUILD_HINT}")


@functools.lru_cache(maxsize=None)
def check_mirrors() -> None:
    """Checks REDUCIBLE_DTYPES against the library's DataType codes (bool, never reduced,
    comes after them)."""
    check_mirror("dtype", [dtype.name for dtype in REDUCIBLE_DTYPES],
                 control().tfdist_data_type_name, complete=False)
